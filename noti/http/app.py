"""The HTTP API app: :func:`create_app` over a :class:`~noti.sending.notifier.Notifier`.

The routes call the same Python API applications call (:class:`~noti.sending.notifier.Notifier`,
:func:`noti.sending.bulk.add_many`, :class:`~noti.events.Events`), as the API token's user: the
permission rules of :mod:`noti.access.users` apply unchanged, and a token's level cap lowers levels
on top of the user's role cap (never refused, as everywhere in noti). Route functions are
plain ``def``: redis-py is synchronous, so Starlette runs them on its thread pool.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import Body, FastAPI, Query, Request, Response
from fastapi.responses import PlainTextResponse, RedirectResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from noti.core.door import through
from noti.core.record_json import to_json_dict
from noti.errors import InvalidInput
from noti.http.guard import BodyLimit, CallerDep
from noti.http.models import (
    BATCH_MAX,
    BatchOut,
    ErrorOut,
    EventIn,
    EventOut,
    Health,
    IdempotencyKey,
    NotificationIn,
    NotificationsOut,
    RecordOut,
    Refusal,
    RevokeOut,
    StoredOut,
    TimelineOut,
)
from noti.http.receipts import Receipts
from noti.http.statuses import BatchRefused, install_error_handlers
from noti.http.traces import TraceRequests
from noti.redis.outage import translate_errors

if TYPE_CHECKING:
    from noti.events import Events
    from noti.observe.snapshot import Observer
    from noti.sending.notifier import Notifier

__all__ = ["LIST_MAX", "create_app"]

log = logging.getLogger(__name__)

#: The most records ``GET /v1/notifications`` returns.
LIST_MAX = 1000

_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorOut, "description": text}
    for status, text in (
        (401, "No API token, or an unknown or revoked one"),
        (422, "Refused; nothing stored"),
        (429, "The token is over its rate limit (see Retry-After)"),
        (503, "Redis did not answer; try again"),
    )
}
#: Another user's record or event is answered as a missing one (no 403: the answer must not
#: tell that it exists, nor whose it is).
_RECORD_ERRORS = {
    **_ERRORS,
    404: {"model": ErrorOut, "description": "No such record, or another user's"},
}

_SMS = {"type": "sms", "to": "+8613912345678", "text": "Your code is 4321"}
_EXAMPLES: dict[str, Any] = {
    "one": {"summary": "One SMS", "value": _SMS},
    "batch": {
        "summary": "A batch",
        "value": [
            _SMS,
            {"type": "email", "to": "ops@example.com", "subject": "Report", "text": "All green."},
        ],
    },
}

_EVENT_EXAMPLES: dict[str, Any] = {
    "paid": {"summary": "An order was paid", "value": {"name": "order.paid", "payload": {"id": 42}}}
}


def create_app(
    notifier: Notifier,
    *,
    events: Events | None = None,
    observer: Observer | None = None,
) -> FastAPI:
    """The HTTP API over ``notifier`` (its runtime's settings, Redis and tokens). ``events``
    and ``observer`` (for ``/metrics``) are built from the runtime on first use when not given."""
    runtime = notifier.runtime
    settings = runtime.settings
    app = FastAPI(
        title="noti",
        version=_version(),
        description="Notifications (SMS, WeChat, e-mail, webhooks) delivered by Celery workers from Redis.",
        openapi_url="/openapi.json",
        docs_url="/docs",
        redoc_url=None,
        # /v1/notifications/ is a 404: a redirect's Location would be built from the Host header
        redirect_slashes=False,
        # noti's own server span is the request's (noti.http.traces); FastAPI >= 0.16x would add a
        # second one, and spans of its own, under a global tracer provider (older versions
        # keep the unknown keyword in FastAPI.extra)
        telemetry={"tracing": False},
    )
    app.state.notifier = notifier
    app.state.tokens = runtime.tokens
    parts = _Parts(notifier, events, observer)
    receipts = Receipts(runtime)

    install_error_handlers(app)

    # --- notifications ----------------------------------------------------------------------------

    @app.post(
        "/v1/notifications",
        status_code=201,
        response_model=StoredOut | BatchOut,
        responses={**_ERRORS, 413: {"model": ErrorOut, "description": "The body is too large"}},
        summary="Queue one notification (an object) or a batch (an array of up to 1,000)",
    )
    def post_notifications(
        body: Annotated[
            NotificationIn | Annotated[list[NotificationIn], _batch_bounds()],
            Body(openapi_examples=_EXAMPLES),
        ],
        who: CallerDep,
        response: Response,
        idempotency_key: IdempotencyKey = None,
    ) -> StoredOut | BatchOut:
        from noti.sending.bulk import add_many

        single = isinstance(body, NotificationIn)
        given = [body] if isinstance(body, NotificationIn) else body
        items = [item.model_dump(exclude_none=True) for item in given]
        if idempotency_key is not None:
            if any("idempotency_key" in item for item in items):
                raise InvalidInput(
                    "give the Idempotency-Key header or items' idempotency_key, not both",
                    code="e.cmd.noti.add.badkey",
                )
            for index, item in enumerate(items):
                item["idempotency_key"] = idempotency_key if single else f"{idempotency_key}#{index}"
        result = add_many(
            notifier,
            items,
            user=who.user,
            level_cap=who.level_cap,
            providers_allowed=who.providers,
            whole=True,
        )
        refused = [Refusal(index=r.index, code=r.code, message=r.message) for r in result.refused]
        if single:
            if refused:
                raise InvalidInput(refused[0].message, code=refused[0].code)
            record_id = str(result.ids[0])
            response.headers["Location"] = f"/v1/notifications/{record_id}"
            return StoredOut(id=record_id)
        if refused and result.stored == 0:
            error = InvalidInput(
                f"{len(refused)} of {len(items)} items refused; nothing stored", code="e.noti.http.batch"
            )
            raise BatchRefused(error, [r.model_dump() for r in refused])
        return BatchOut(ids=result.ids, refused=refused)

    @app.get(
        "/v1/notifications/{record_id}",
        response_model=RecordOut,
        responses=_RECORD_ERRORS,
        summary="One notification record (the token user's own; root: anyone's)",
    )
    def get_notification(record_id: str, who: CallerDep) -> dict[str, Any]:
        return to_json_dict(notifier.get(record_id, user=who.user))

    @app.get(
        "/v1/notifications/{record_id}/timeline",
        response_model=TimelineOut,
        responses=_RECORD_ERRORS,
        summary="What happened to a notification: every step, oldest first",
    )
    def get_timeline(record_id: str, who: CallerDep) -> dict[str, Any]:
        return notifier.timeline(record_id, user=who.user).to_dict()

    @app.get(
        "/v1/notifications",
        response_model=NotificationsOut,
        responses={
            **_ERRORS,
            403: {"model": ErrorOut, "description": "user= names another user (root members only)"},
            431: {"model": ErrorOut, "description": "The request line is over NOTI_HTTP_HEADER_MAX_BYTES"},
        },
        summary="Records, newest first (the token user's own; root: anyone's)",
    )
    def list_notifications(
        who: CallerDep,
        st: Annotated[int | None, Query(description="Only this status: -1, 0, 1 or 10")] = None,
        type: Annotated[  # noqa: A002 - the seed's word
            str | None, Query(description="Only this type: sms, weixin, email, webhook")
        ] = None,
        delivery: Annotated[
            str | None, Query(description="Only this delivery: accepted, delivered, undelivered, unknown")
        ] = None,
        user: Annotated[str | None, Query(description="Only this user's (root members and admins)")] = None,
        limit: Annotated[int, Query(ge=1, le=LIST_MAX, description="At most this many")] = 100,
        to: Annotated[
            str | None, Query(max_length=2048, description="Sent to this address (phone, e-mail, openid…)")
        ] = None,
        recipient: Annotated[
            str | None, Query(max_length=2048, description="Made for this recipient id")
        ] = None,
        provider: Annotated[
            str | None, Query(max_length=2048, description="Asked for or sent by this provider")
        ] = None,
        msgid: Annotated[str | None, Query(max_length=2048, description="The vendor's message id")] = None,
        since: Annotated[int | None, Query(ge=0, description="Created at or after (epoch ms)")] = None,
        until: Annotated[int | None, Query(ge=0, description="Created at or before (epoch ms)")] = None,
    ) -> dict[str, Any]:
        searched = (to, recipient, provider, msgid, since, until)
        if any(x is not None for x in searched):
            records = notifier.search(
                user=who.user,
                creator=user,
                to=to,
                channel=type,
                recipient=recipient,
                status=st,
                provider=provider,
                msgid=msgid,
                delivery=delivery,
                since_ms=since,
                until_ms=until,
                limit=limit,
            )
        else:
            records = notifier.select(
                user=who.user, creator=user, status=st, type=type, delivery=delivery, limit=limit
            )
        return {"notifications": [to_json_dict(r) for r in records]}

    @app.delete(
        "/v1/notifications/{record_id}",
        response_model=RevokeOut,
        responses={
            **_RECORD_ERRORS,
            202: {"model": RevokeOut, "description": "A sender holds it: revoked at its next claim"},
            409: {"model": ErrorOut, "description": "Not waiting any more (sent, failed or revoked)"},
        },
        summary="Cancel a waiting notification: it is never sent",
    )
    def delete_notification(record_id: str, who: CallerDep, response: Response) -> RevokeOut:
        done = notifier.revoke([record_id], user=who.user)
        if record_id in done.revoked:
            return RevokeOut(id=record_id, state="revoked")
        if record_id in done.held:
            response.status_code = 202
            return RevokeOut(id=record_id, state="held")
        raise InvalidInput(
            f"{record_id} is not waiting any more (sent, failed, invalid or revoked already)",
            code="e.cmd.noti.revoke.final",
        )

    # --- events -----------------------------------------------------------------------------------

    @app.post(
        "/v1/events",
        status_code=202,
        response_model=EventOut,
        responses=_ERRORS,
        summary="Dispatch an event to its listeners",
    )
    def post_event(
        event: Annotated[EventIn, Body(openapi_examples=_EVENT_EXAMPLES)],
        who: CallerDep,
        idempotency_key: IdempotencyKey = None,
    ) -> EventOut:
        event_id = parts.events().dispatch(
            event.name, event.payload, user=who.user, idempotency_key=idempotency_key
        )
        return EventOut(id=event_id)

    @app.get(
        "/v1/events/{event_id}",
        responses=_RECORD_ERRORS,
        summary="One event (the token user's own; root: anyone's)",
    )
    def get_event(event_id: str, who: CallerDep) -> dict[str, Any]:
        found: dict[str, Any] = parts.events().get(event_id, user=who.user).to_json()
        return found

    # --- operations -------------------------------------------------------------------------------

    @app.get(
        "/v1/health",
        response_model=Health,
        responses={503: {"model": ErrorOut, "description": "Redis did not answer"}},
        summary="Redis answers (no token needed)",
    )
    def health() -> Health:
        with translate_errors(runtime.redis):
            runtime.redis.ping()
        return Health(status="ok", redis="up")

    @app.get(
        "/metrics",
        response_class=PlainTextResponse,
        summary="noti's Prometheus metrics, cluster-wide (no token needed)",
    )
    def metrics() -> PlainTextResponse:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return PlainTextResponse(generate_latest(parts.registry()), media_type=CONTENT_TYPE_LATEST)

    receipt_routes: tuple[tuple[str, Callable[..., Any], str], ...] = (
        ("/v1/receipts/{provider}", receipts.endpoint, ""),
        ("/v1/receipts/{provider}/{key}", receipts.keyed_endpoint, "_keyed"),
    )
    for method, (path, endpoint, keyed) in itertools.product(("GET", "POST"), receipt_routes):
        app.add_api_route(
            path,
            endpoint,
            methods=[method],
            operation_id=f"receipt{keyed}_{method.lower()}",
            response_class=Response,
            responses={
                200: {"content": {"text/plain": {}}, "description": "The answer the vendor expects"},
                400: {"model": ErrorOut, "description": "Malformed receipt"},
                403: {"model": ErrorOut, "description": "The signature does not verify"},
                404: {"model": ErrorOut, "description": "No such provider takes receipts"},
                503: {"model": ErrorOut, "description": "Redis did not answer: push again"},
            },
            summary="A vendor's delivery receipt (no token: the vendor's signature)",
        )

    from noti.http.signing import signing_routes

    app.include_router(signing_routes(runtime.signing_keys))
    from noti.http.suppressions import suppression_routes

    app.include_router(suppression_routes(runtime))
    from noti.http.notices import notice_routes
    from noti.http.recipients import recipient_routes
    from noti.http.unsubscribe import unsubscribe_routes
    from noti.recipients.api import Recipients

    people = Recipients(notifier)
    app.include_router(recipient_routes(people))
    app.include_router(notice_routes(people))
    app.include_router(unsubscribe_routes(runtime))

    from noti.http.admin import Site, build_site

    @app.get("/admin", include_in_schema=False)
    def admin_root(request: Request) -> RedirectResponse:
        return RedirectResponse(f"{request.scope.get('root_path', '')}/admin/", status_code=307)

    app.mount("/admin", build_site(Site(notifier, people, lambda: parts.observer().snapshot())))

    app.add_middleware(
        BodyLimit, max_bytes=settings.http_body_max_bytes, all_max_bytes=settings.http_bodies_max_bytes
    )
    app.add_middleware(_HttpDoor)
    app.add_middleware(TraceRequests)  # outermost: a refused request is a span too
    return app


class _HttpDoor:
    """Records made while a request is answered come in through the ``http`` door (their
    timeline's first step says so: :mod:`noti.core.timeline`)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        with through("http"):
            await self.app(scope, receive, send)


class _Parts:
    """What some routes need, built on first use: the events API, the metrics registry."""

    def __init__(self, notifier: Notifier, events: Events | None, observer: Observer | None) -> None:
        self._notifier = notifier
        self._events = events
        self._observer = observer
        self._registry: Any = None
        self._lock = threading.Lock()

    def events(self) -> Events:
        with self._lock:
            if self._events is None:
                from noti.events import Events

                self._events = Events(self._notifier.runtime)
            return self._events

    def observer(self) -> Observer:
        with self._lock:
            if self._observer is None:
                from noti.observe.snapshot import Observer

                self._observer = Observer(self._notifier.runtime)
            return self._observer

    def registry(self) -> Any:
        observer = self.observer()
        with self._lock:
            if self._registry is None:
                from prometheus_client import CollectorRegistry

                from noti.observe.prometheus import NotiCollector

                self._registry = CollectorRegistry(auto_describe=False)
                self._registry.register(NotiCollector(observer.snapshot))
            return self._registry


def _batch_bounds() -> Any:
    from pydantic import Field

    return Field(min_length=1, max_length=BATCH_MAX)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("noti")
    except PackageNotFoundError:
        return "0"
