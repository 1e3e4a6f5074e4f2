"""``/v1/templates`` and ``/v1/notices``: templates and notifying a recipient from one, over
HTTP (:mod:`noti.http.recipients` says who sees what; the same rules apply).

``POST /v1/notices`` takes the ``Idempotency-Key`` header as ``POST /v1/notifications`` does
(the same key again, same user, within ``NOTI_IDEMPOTENCY_TTL_S``: the first notice, marked
``repeated``) and applies the token's level cap and providers to every record it makes. A
digest event (``digest`` and ``window``) is answered ``202``: the notice named is made when its
window closes.
"""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Query, Response

from noti.errors import NotFound
from noti.http.guard import CallerDep
from noti.http.models import IdempotencyKey
from noti.http.recipient_models import (
    ERRORS,
    DeletedOut,
    JsonObject,
    NoticeIn,
    NoticeOut,
    Owner,
    TemplateOut,
    TemplatesOut,
    TemplateVersionOut,
)
from noti.inputs import shown

if TYPE_CHECKING:
    from noti.recipients.api import Recipients
    from noti.recipients.templates import Template, TemplateInfo

__all__ = ["notice_routes"]


def notice_routes(api: Recipients) -> APIRouter:
    """The template and notice routes over ``api``."""
    router = APIRouter()
    _templates(router, api)
    _notices(router, api)
    return router


def _template_out(found: Template) -> dict[str, Any]:
    return found.to_dict()


def _template_info(info: TemplateInfo) -> dict[str, Any]:
    return {
        "name": info.name,
        "version": info.version,
        "channels": list(info.channels),
        "locales": list(info.locales),
        "default_locale": info.default_locale,
        "description": info.description,
        "created_ms": info.created_ms,
        "modified_ms": info.modified_ms,
    }


def _templates(router: APIRouter, api: Recipients) -> None:
    tags: list[str | Enum] = ["templates"]

    @router.put(
        "/v1/templates/{name}",
        status_code=201,
        response_model=TemplateVersionOut,
        responses=ERRORS,
        tags=tags,
        summary="Store a new version of a template (checked and compiled first); it becomes current",
    )
    def put_template(
        name: str, document: JsonObject, who: CallerDep, owner: Owner = None
    ) -> TemplateVersionOut:
        version = api.put_template(name, document, user=who.user, owner=owner)
        return TemplateVersionOut(name=name, version=version)

    @router.get(
        "/v1/templates/{name}",
        response_model=TemplateOut,
        responses=ERRORS,
        tags=tags,
        summary="A template's current version, or ?version=N",
    )
    def get_template(
        name: str,
        who: CallerDep,
        version: Annotated[int | None, Query(ge=1, le=10**9, description="This version")] = None,
        owner: Owner = None,
    ) -> dict[str, Any]:
        return _template_out(api.get_template(name, version=version, user=who.user, owner=owner))

    @router.get(
        "/v1/templates", response_model=TemplatesOut, responses=ERRORS, tags=tags, summary="Templates"
    )
    def list_templates(who: CallerDep, owner: Owner = None) -> dict[str, Any]:
        return {"templates": [_template_info(t) for t in api.list_templates(user=who.user, owner=owner)]}

    @router.delete(
        "/v1/templates/{name}",
        response_model=DeletedOut,
        responses=ERRORS,
        tags=tags,
        summary="Remove a template and every version of it",
    )
    def delete_template(name: str, who: CallerDep, owner: Owner = None) -> DeletedOut:
        if not api.delete_template(name, user=who.user, owner=owner):
            raise NotFound(f"no template {shown(name)}", code="e.cmd.noti.tmpl.not_found")
        return DeletedOut(name=name, deleted=True)


def _notices(router: APIRouter, api: Recipients) -> None:
    tags: list[str | Enum] = ["notices"]

    @router.post(
        "/v1/notices",
        status_code=201,
        response_model=NoticeOut,
        responses=ERRORS,
        tags=tags,
        summary="Notify a recipient from a template: their channels, preferences, quiet hours, locale",
    )
    def post_notice(
        body: NoticeIn, who: CallerDep, response: Response, idempotency_key: IdempotencyKey = None
    ) -> dict[str, Any]:
        given = body.model_dump(exclude_none=True)
        notice = api.notify(
            **given,
            user=who.user,
            idempotency_key=idempotency_key,
            level_cap=who.level_cap,
            providers_allowed=who.providers,
        )
        response.headers["Location"] = f"/v1/notices/{notice.id}"
        if notice.mode == "digest":  # into a window: the notice is made when it closes
            response.status_code = 202
        return notice.to_dict()

    @router.get(
        "/v1/notices/{notice_id}",
        response_model=NoticeOut,
        responses=ERRORS,
        tags=tags,
        summary="One notice and what became of it per channel (the token user's; root: anyone's)",
    )
    def get_notice(notice_id: str, who: CallerDep) -> dict[str, Any]:
        return api.notice(notice_id, user=who.user).to_dict()
