"""The admin page's reading routes (``GET``), each over the Python API with the signed-in
user's rights (:mod:`noti.access.users`): a plain user sees their own records, the
suppressions their records caused, their digests and their own token; root members see
everyone's records and the dead letters; root administrators the tokens too. What a user may
not see is answered as the HTTP API answers it: another user's record as a missing one (404),
a root-only list as 403.

Every page works without JavaScript; ``admin.js`` only refreshes the live counters.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse

from noti.access.tokens import Caller
from noti.access.users import Role
from noti.core.deadletter import DeadLetter
from noti.core.record import DELIVERY_STATES, Channel, Notification, Status
from noti.errors import InvalidInput, NotFound
from noti.http.admin.render import STATUS_NAMES, when
from noti.http.admin.session import SessionDep
from noti.http.admin.site import Site
from noti.http.guard import refuse_unknown_query
from noti.redis.counters import FAMILIES

__all__ = ["COUNTERS", "page_routes"]

#: The counter families the overview shows, in this order (the latency histogram is left to
#: Prometheus).
COUNTERS = ("added", "sent", "retried", "failed", "invalid", "dead_lettered", "revoked", "revived")
#: The longest value a search field takes.
FIELD_MAX = 200


def _viewer(request: Request, who: SessionDep) -> Caller:
    refuse_unknown_query(request)
    return who


Viewer = Annotated[Caller, Depends(_viewer)]
Limit = Annotated[int, Query(ge=1, le=1000)]
Text = Annotated[str | None, Query(max_length=FIELD_MAX)]


def page_routes(site: Site) -> APIRouter:
    """The reading routes over ``site``."""
    router = APIRouter()

    @router.get("/", response_class=HTMLResponse)
    def overview(request: Request, who: Viewer) -> HTMLResponse:
        snap = site.snapshot()
        totals = snap.counter_totals()
        counters = [(code, totals.get(code, 0), FAMILIES[code].help) for code in COUNTERS]
        return site.page(
            request,
            who,
            "overview.html",
            snap=snap,
            counters=counters,
            records=[(name, snap.records.get(name, 0)) for name in ("waiting", "done", "failed", "invalid")],
            deliveries=[(name, snap.deliveries.get(name, 0)) for name in DELIVERY_STATES],
        )

    @router.get("/notifications", response_class=HTMLResponse)
    def notifications(
        request: Request,
        who: Viewer,
        to: Text = None,
        recipient: Text = None,
        status: Text = None,
        channel: Text = None,
        delivery: Text = None,
        provider: Text = None,
        msgid: Text = None,
        since: Text = None,
        until: Text = None,
        user: Text = None,
        limit: Limit = 100,
    ) -> HTMLResponse:
        asked = {
            "to": to,
            "recipient": recipient,
            "status": status,
            "channel": channel,
            "delivery": delivery,
            "provider": provider,
            "msgid": msgid,
            "since": since,
            "until": until,
            "user": user,
        }
        given = {name: value.strip() for name, value in asked.items() if value and value.strip()}
        found = _find(site, who, given, limit)
        return site.page(
            request,
            who,
            "notifications.html",
            given=given,
            limit=limit,
            records=found,
            channels=[c.value for c in Channel],
            statuses=[(int(s), name) for s, name in STATUS_NAMES.items()],
            deliveries=DELIVERY_STATES,
        )

    @router.get("/notifications/{record_id}", response_class=HTMLResponse)
    def record(
        request: Request, record_id: str, who: Viewer, retried: Annotated[int | None, Query()] = None
    ) -> HTMLResponse:
        if len(record_id) > 64:
            raise NotFound(f"no notification has the id {record_id[:64]!r}…")
        found = site.notifier.get(record_id, user=who.user)
        timeline = site.notifier.timeline(record_id, user=who.user)
        letter = _letter_of(site, found, who)
        return site.page(
            request,
            who,
            "record.html",
            record=found,
            rows=_rows(found),
            channel_fields=sorted((k, _shown(v)) for k, v in found.fields.items()),
            letter=letter,
            timeline=timeline,
            steps=[(step.at_ms, step.event, _details(step.detail)) for step in timeline.steps],
            retried=retried is not None,
        )

    @router.get("/dead", response_class=HTMLResponse)
    def dead_letters(
        request: Request,
        who: Viewer,
        limit: Limit = 200,
        purged: Annotated[int | None, Query(ge=0)] = None,
    ) -> HTMLResponse:
        letters = site.redrive.entries(user=who.user, limit=limit)
        return site.page(request, who, "dead.html", letters=letters, limit=limit, purged=purged)

    @router.get("/held", response_class=HTMLResponse)
    def held(request: Request, who: Viewer, owner: Text = None, limit: Limit = 200) -> HTMLResponse:
        owner = owner.strip() if owner and owner.strip() else None
        waiting = site.notifier.delayed(user=who.user, limit=limit)
        why = site.notifier.why_waiting([r for r, _ in waiting])
        digests = site.people.open_digests(user=who.user, owner=owner, limit=limit)
        return site.page(
            request,
            who,
            "held.html",
            waiting=list(zip(waiting, why, strict=True)),
            digests=digests,
            owner=owner or who.user,
            limit=limit,
        )

    @router.get("/suppressions", response_class=HTMLResponse)
    def suppressions(
        request: Request,
        who: Viewer,
        channel: Text = None,
        limit: Limit = 200,
        lifted: Annotated[int | None, Query()] = None,
    ) -> HTMLResponse:
        channel = channel.strip() if channel and channel.strip() else None
        entries = site.suppressions.entries(user=who.user, channel=channel, limit=limit)
        return site.page(
            request,
            who,
            "suppressions.html",
            entries=entries,
            channel=channel or "",
            channels=[c.value for c in Channel],
            limit=limit,
            lifted=lifted is not None,
        )

    @router.get("/tokens", response_class=HTMLResponse)
    def tokens(
        request: Request, who: Viewer, revoked: Annotated[str | None, Query(max_length=12)] = None
    ) -> HTMLResponse:
        listed = site.tokens.entries(acting=who.user) if site.role(who) is Role.ROOT_ADMIN else None
        return site.page(request, who, "tokens.html", tokens=listed, revoked=revoked)

    return router


#: The fields only a search takes (any of them given: :meth:`Notifier.search`, else the
#: plain listing, :meth:`Notifier.select`, which reads the delivery status's own index).
SEARCH_FIELDS = ("to", "recipient", "provider", "msgid", "since", "until")


def _find(site: Site, who: Caller, given: dict[str, str], limit: int) -> list[Notification]:
    """The records the search form asks for, as ``GET /v1/notifications`` finds them.

    Raises:
        InvalidInput: ``e.cmd.noti.search.bad`` (a bad field, a time that is none),
            ``e.cmd.noti.list.badst``, ``e.cmd.noti.list.baddelivery``, ``e.cmd.noti.add.badtype``.
        PermissionDenied: ``e.cmd.noti.list.nopvg``: a user names another user.
    """
    status = _status(given.get("status"))
    if not any(name in given for name in SEARCH_FIELDS):
        return site.notifier.select(
            user=who.user,
            creator=given.get("user"),
            status=status,
            type=given.get("channel"),
            delivery=given.get("delivery"),
            limit=limit,
        )
    return site.notifier.search(
        user=who.user,
        creator=given.get("user"),
        to=given.get("to"),
        channel=given.get("channel"),
        recipient=given.get("recipient"),
        status=status,
        provider=given.get("provider"),
        msgid=given.get("msgid"),
        delivery=given.get("delivery"),
        since_ms=_moment(given.get("since"), "since"),
        until_ms=_moment(given.get("until"), "until"),
        limit=limit,
    )


def _moment(text: str | None, what: str) -> int | None:
    """Epoch ms of a form's time (``2026-01-31T12:00``, as a browser's date-time field sends
    it; UTC unless it names its zone), or of a number of epoch ms.

    Raises:
        InvalidInput: ``e.cmd.noti.search.bad``.
    """
    if text is None:
        return None
    if text.isdigit() and len(text) <= 16:
        return int(text)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidInput(
            f"{what} {text[:40]!r} is not a time such as 2026-01-31T12:00 (UTC) or epoch ms",
            code="e.cmd.noti.search.bad",
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return max(0, int(moment.timestamp() * 1000))


#: The details of timeline steps that are times (epoch ms), shown as times.
TIME_DETAILS = frozenset({"at", "until", "vendor_at", "due"})


def _details(detail: Mapping[str, Any]) -> list[tuple[str, str]]:
    """A timeline step's details as (name, text), as the record's page lists them."""
    return [
        (name, when(value) if name in TIME_DETAILS and type(value) is int else _shown(value))
        for name, value in detail.items()
        if value not in (None, "")
    ]


def _status(text: str | None) -> int | None:
    """A status given by number (``-1``, ``0``, ``1``, ``10``) or name (``sent`` …).

    Raises:
        InvalidInput: ``e.cmd.noti.list.badst``.
    """
    if text is None:
        return None
    names = {name: int(status) for status, name in STATUS_NAMES.items()}
    if text in names:
        return names[text]
    try:
        return int(Status(int(text)))
    except ValueError:
        raise InvalidInput(
            f"unknown status {text[:40]!r} (known: -1, 0, 1, 10, or {', '.join(names)})",
            code="e.cmd.noti.list.badst",
        ) from None


def _letter_of(site: Site, record: Notification, who: Caller) -> DeadLetter | None:
    """The dead letter of a failed or invalid record (the page shows it to whoever may read the
    record: its creator, a root member)."""
    if record.status not in (Status.FAILED, Status.INVALID):
        return None
    try:
        return site.redrive.get(record.id, user=who.user)
    except NotFound:
        return None


def _shown(value: Any) -> str:
    if isinstance(value, (dict, list)):
        import json

        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    return "" if value is None else str(value)


def _rows(record: Notification) -> list[tuple[str, str]]:
    """The record's fields as the page shows them (label, text), unset ones left out."""
    rows = [
        ("id", record.id),
        ("channel", record.channel.value),
        ("target", record.target),
        ("created by", record.creator),
        ("level", str(record.level)),
        ("status", f"{int(record.status)} {STATUS_NAMES[record.status]}"),
        ("error", record.errmsg),
        ("retries", f"{record.retry} of {record.retry_max}"),
        ("created", when(record.created_ms)),
        ("modified", when(record.modified_ms)),
        ("expires", when(record.expires_ms)),
        ("provider asked", record.provider or ""),
        ("sent by", record.sent_by or ""),
        ("vendor message id", record.msgid or ""),
        ("delivery", record.delivery or ""),
        ("delivery at", when(record.delivery_ms)),
        ("delivery code", record.delivery_code or ""),
        ("delivery text", record.delivery_text or ""),
        ("fallback", record.fallback or ""),
        ("fallback of", record.fallback_of or ""),
        ("notice", record.parent or ""),
        ("recipient", record.recipient or ""),
        ("category", record.category or ""),
        ("status callback", record.status_callback or ""),
        ("revoked", when(record.revoked_ms)),
    ]
    rows += [(f"{state} at", when(ms)) for state, ms in sorted(record.delivery_times.items())]
    return [(label, text) for label, text in rows if text]
