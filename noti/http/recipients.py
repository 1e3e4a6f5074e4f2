"""``/v1/recipients`` and ``/v1/categories``: the recipients layer over HTTP, under
:class:`noti.recipients.api.Recipients`' rules (templates and notices: :mod:`noti.http.notices`;
the unsubscribe links, which take no token: :mod:`noti.http.unsubscribe`).

Recipients, templates and notices are the token user's own: a user reads and writes only
theirs, so another user's is answered exactly as a missing one (404); a root member may name
another user with ``?owner=`` (``"owner"`` in a notice's body); anyone else naming one is
refused 403 ``e.cmd.noti.rcpt.nopvg``. Categories are one list: every token reads it, root
members write it (403 ``e.cmd.noti.cat.nopvg``).

Bodies are JSON objects that :mod:`noti.recipients` checks (the same codes as the Python API
and the CLI); a body that is not an object is refused 422 ``e.noti.http.badrequest``. An
import (``POST /v1/recipients/import``, also ``/v1/recipients:import``) takes CSV
(``text/csv``), JSON lines (``application/x-ndjson``) or a JSON array of profiles, bounded
by ``NOTI_HTTP_BODY_MAX_BYTES``; its bad rows are refused one by one, and a body all of whose
rows are refused is answered 422 ``e.cmd.noti.rcpt.import`` with each row's refusal.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Body, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from noti.errors import InvalidInput, NotFound
from noti.http.guard import CallerDep
from noti.http.models import ErrorOut
from noti.http.recipient_models import (
    ERRORS,
    CategoriesOut,
    CategoryOut,
    DeletedOut,
    DigestsOut,
    ErasureOut,
    HistoryOut,
    ImportOut,
    JsonObject,
    MergeIn,
    Owner,
    RecipientOut,
    RecipientsOut,
    ThrottlesOut,
)
from noti.http.statuses import BatchRefused
from noti.inputs import shown

if TYPE_CHECKING:
    from noti.recipients.api import Recipients

__all__ = ["IMPORT_TYPES", "recipient_routes"]

#: The content types an import takes, and the rows each is read as.
IMPORT_TYPES = {
    "text/csv": "csv",
    "application/x-ndjson": "jsonl",
    "application/jsonl": "jsonl",
    "application/json": "json",
}

_ROOT_ONLY = {**ERRORS, 403: {"model": ErrorOut, "description": "Only root members write categories"}}

_PROFILE = {"addresses": {"sms": ["+8613912345678"], "email": ["ada@example.com"]}, "locale": "en-GB"}
_PROFILE_EXAMPLES: dict[str, Any] = {"profile": {"summary": "A profile", "value": _PROFILE}}
_PATCH = {
    "required": True,
    "content": {
        media: {"schema": {"type": "object", "additionalProperties": True}, "example": {"locale": "fr"}}
        for media in ("application/merge-patch+json", "application/json")
    },
}
_IMPORT = {
    "required": True,
    "content": {
        "text/csv": {"schema": {"type": "string"}, "example": "id,sms,locale\n42,+8613912345678,zh-CN\n"},
        "application/x-ndjson": {
            "schema": {"type": "string"},
            "example": json.dumps({"id": "42", **_PROFILE}),
        },
        "application/json": {"schema": {"type": "array", "items": {"type": "object"}}},
    },
}


def recipient_routes(api: Recipients) -> APIRouter:
    """The recipient and category routes over ``api``."""
    router = APIRouter()
    _recipients(router, api)
    _categories(router, api)
    return router


def _recipients(router: APIRouter, api: Recipients) -> None:
    tags: list[str | Enum] = ["recipients"]

    @router.put(
        "/v1/recipients/{rid}",
        response_model=RecipientOut,
        status_code=200,
        responses={**ERRORS, 201: {"model": RecipientOut, "description": "Created"}},
        tags=tags,
        summary="Create a recipient's profile (201) or replace it (200; its preferences stay)",
    )
    def put_recipient(
        rid: str,
        profile: Annotated[JsonObject, Body(openapi_examples=_PROFILE_EXAMPLES)],
        who: CallerDep,
        response: Response,
        owner: Owner = None,
    ) -> dict[str, Any]:
        recipient, created = api.put(rid, profile, user=who.user, owner=owner)
        if created:
            response.status_code = 201
            response.headers["Location"] = f"/v1/recipients/{recipient.id}"
        return recipient.to_dict()

    @router.get(
        "/v1/recipients/{rid}",
        response_model=RecipientOut,
        responses=ERRORS,
        tags=tags,
        summary="One recipient's profile",
    )
    def get_recipient(rid: str, who: CallerDep, owner: Owner = None) -> dict[str, Any]:
        return api.get(rid, user=who.user, owner=owner).to_dict()

    @router.patch(
        "/v1/recipients/{rid}",
        response_model=RecipientOut,
        responses=ERRORS,
        tags=tags,
        openapi_extra={"requestBody": _PATCH},
        summary="Change a profile by a JSON merge patch (RFC 7396: null removes a key)",
    )
    def patch_recipient(
        rid: str,
        patch: Annotated[JsonObject, Body(media_type="application/merge-patch+json")],
        who: CallerDep,
        owner: Owner = None,
    ) -> dict[str, Any]:
        return api.update(rid, patch, user=who.user, owner=owner).to_dict()

    @router.delete(
        "/v1/recipients/{rid}",
        response_model=ErasureOut,
        responses=ERRORS,
        tags=tags,
        summary="Erase a recipient: profile, preferences, waiting records; kept records masked",
    )
    def delete_recipient(rid: str, who: CallerDep, owner: Owner = None) -> ErasureOut:
        done = api.delete(rid, user=who.user, owner=owner)
        return ErasureOut(
            recipient=done.recipient,
            revoked=done.revoked,
            masked=done.masked,
            notices=done.notices,
            dead_letters=done.dead_letters,
        )

    @router.get(
        "/v1/recipients",
        response_model=RecipientsOut,
        responses=ERRORS,
        tags=tags,
        summary="Recipients, oldest first, a page at a time",
    )
    def list_recipients(
        who: CallerDep,
        limit: Annotated[int, Query(ge=1, le=1000, description="At most this many")] = 100,
        after: Annotated[
            str | None, Query(max_length=200, description="The page after this id (a page's next)")
        ] = None,
        owner: Owner = None,
    ) -> dict[str, Any]:
        found = api.list_recipients(user=who.user, owner=owner, limit=limit, after=after)
        return {
            "recipients": [r.to_dict() for r in found],
            "next": found[-1].id if len(found) == limit else None,
        }

    @router.post(
        "/v1/recipients/{rid}/merge",
        response_model=RecipientOut,
        responses=ERRORS,
        tags=tags,
        summary="Merge another recipient into this one (one person under two ids); the other goes",
    )
    def merge_recipient(rid: str, body: MergeIn, who: CallerDep, owner: Owner = None) -> dict[str, Any]:
        return api.merge(rid, body.from_, user=who.user, owner=owner).to_dict()

    async def import_recipients(request: Request, who: CallerDep, owner: Owner = None) -> dict[str, Any]:
        kind = IMPORT_TYPES.get(request.headers.get("content-type", "").partition(";")[0].strip().lower())
        if kind is None:
            raise InvalidInput(
                "an import is text/csv, application/x-ndjson or a JSON array (application/json)",
                code="e.cmd.noti.rcpt.badformat",
            )
        body = await request.body()
        result = await run_in_threadpool(
            lambda: api.import_rows(_rows(body, kind), user=who.user, owner=owner)
        )
        refused = result.to_dict()["refused"]
        if refused and not result.created and not result.updated:
            error = InvalidInput(
                f"{len(refused)} rows refused; nothing stored", code="e.cmd.noti.rcpt.import"
            )
            raise BatchRefused(error, refused)
        return result.to_dict()

    for path, shown_in_schema in (("/v1/recipients/import", True), ("/v1/recipients:import", False)):
        router.add_api_route(
            path,
            import_recipients,
            methods=["POST"],
            response_model=ImportOut,
            responses={
                **ERRORS,
                422: {
                    "model": ErrorOut,
                    "description": "Not CSV / JSON lines, a bad header, or every row refused",
                },
            },
            include_in_schema=shown_in_schema,
            openapi_extra={"requestBody": _IMPORT},
            tags=tags,
            summary="Create or replace many profiles from CSV or JSON lines; bad rows are refused alone",
        )

    @router.get(
        "/v1/recipients/{rid}/preferences",
        response_model=dict[str, dict[str, bool]],
        responses=ERRORS,
        tags=tags,
        summary="A recipient's preferences: category -> channel -> in (true) / out (false); * is every",
    )
    def get_preferences(rid: str, who: CallerDep, owner: Owner = None) -> dict[str, dict[str, bool]]:
        return api.preferences(rid, user=who.user, owner=owner)

    @router.put(
        "/v1/recipients/{rid}/preferences",
        response_model=dict[str, dict[str, bool]],
        responses=ERRORS,
        tags=tags,
        summary="Set preferences ({category: {channel: true | false | null}}; null: the default again)",
    )
    def put_preferences(
        rid: str,
        preferences: Annotated[
            JsonObject, Body(openapi_examples={"optout": {"value": {"marketing": {"*": False}}}})
        ],
        who: CallerDep,
        owner: Owner = None,
    ) -> dict[str, dict[str, bool]]:
        return api.set_preferences(rid, preferences, user=who.user, owner=owner)

    @router.get(
        "/v1/recipients/{rid}/history",
        response_model=HistoryOut,
        responses=ERRORS,
        tags=tags,
        summary="Notices and records made for a recipient, newest first",
    )
    def get_history(
        rid: str,
        who: CallerDep,
        limit: Annotated[int, Query(ge=1, le=1000, description="At most this many")] = 100,
        owner: Owner = None,
    ) -> HistoryOut:
        return HistoryOut(recipient=rid, history=api.history(rid, user=who.user, owner=owner, limit=limit))

    @router.get(
        "/v1/recipients/{rid}/throttles",
        response_model=ThrottlesOut,
        responses=ERRORS,
        tags=tags,
        summary="A recipient's throttles as they stand: sends in the period, the limit, when the next fits",
    )
    def get_throttles(rid: str, who: CallerDep, owner: Owner = None) -> dict[str, Any]:
        found = api.throttles(rid, user=who.user, owner=owner)
        return {"recipient": rid, "throttles": [t.to_dict() for t in found]}

    @router.get(
        "/v1/digests",
        response_model=DigestsOut,
        responses=ERRORS,
        tags=tags,
        summary="Open digest windows, the soonest due first",
    )
    def get_digests(
        who: CallerDep,
        recipient: Annotated[str | None, Query(description="Only this recipient's")] = None,
        limit: Annotated[int, Query(ge=1, le=1000, description="At most this many")] = 100,
        owner: Owner = None,
    ) -> dict[str, Any]:
        found = api.open_digests(user=who.user, owner=owner, recipient=recipient, limit=limit)
        return {"digests": [w.to_dict() for w in found]}


def _rows(body: bytes, kind: str) -> Iterator[object]:
    """The profiles of an import body (read before anything is stored: a body that is not
    UTF-8, or a JSON body that is not an array, stores nothing).

    Raises:
        InvalidInput: ``e.cmd.noti.rcpt.badformat``.
    """
    from noti.recipients.importing import rows_of_file

    try:
        text = body.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"an import is UTF-8 text: {exc}", code="e.cmd.noti.rcpt.badformat") from None
    if kind != "json":
        return rows_of_file(io.StringIO(text, newline=""), kind=kind)
    try:
        rows = json.loads(text)
    except (ValueError, RecursionError):
        raise InvalidInput("the body is not JSON", code="e.cmd.noti.rcpt.badformat") from None
    if not isinstance(rows, list):
        raise InvalidInput(
            f"a JSON import is an array of profiles, got {shown(rows)}", code="e.cmd.noti.rcpt.badformat"
        )
    return iter(rows)


def _categories(router: APIRouter, api: Recipients) -> None:
    tags: list[str | Enum] = ["categories"]

    @router.get(
        "/v1/categories", response_model=CategoriesOut, responses=ERRORS, tags=tags, summary="Every category"
    )
    def list_categories(who: CallerDep) -> dict[str, Any]:
        return {"categories": [c.to_dict() for c in api.categories()]}

    @router.get(
        "/v1/categories/{name}",
        response_model=CategoryOut,
        responses=ERRORS,
        tags=tags,
        summary="One category",
    )
    def get_category(name: str, who: CallerDep) -> dict[str, Any]:
        return api.category(name).to_dict()

    @router.put(
        "/v1/categories/{name}",
        response_model=CategoryOut,
        responses=_ROOT_ONLY,
        tags=tags,
        summary="Declare a category: channels on by default, opt_out, critical (root members only)",
    )
    def put_category(
        name: str,
        declaration: Annotated[
            JsonObject,
            Body(openapi_examples={"orders": {"value": {"channels": {"sms": False}, "opt_out": True}}}),
        ],
        who: CallerDep,
    ) -> dict[str, Any]:
        return api.put_category(name, declaration, user=who.user).to_dict()

    @router.delete(
        "/v1/categories/{name}",
        response_model=DeletedOut,
        responses=_ROOT_ONLY,
        tags=tags,
        summary="Remove a category (root members only); preferences for it stay, unused",
    )
    def delete_category(name: str, who: CallerDep) -> DeletedOut:
        if not api.delete_category(name, user=who.user):
            raise NotFound(f"no category {shown(name)}", code="e.cmd.noti.cat.not_found")
        return DeletedOut(name=name, deleted=True)
