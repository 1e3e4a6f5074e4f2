"""What happened to a notification: its timeline (:mod:`noti.core.timeline`) and the search
that finds it (:mod:`noti.core.search`), under the permission rules of every read (a user
sees their own records, a root member anyone's; another user's record is answered as a
missing one). :class:`~noti.sending.notifier.Notifier` has these methods.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

from noti.core.record import (
    DELIVERY_STATES,
    Channel,
    Notification,
    Status,
    from_hash,
    parse_channel,
    validate_target,
)
from noti.core.search import Query, Search
from noti.core.timeline import Timeline, first_step, parse_steps, why_waiting
from noti.errors import InvalidInput, NotFound, NotiError
from noti.inputs import bad_character, could_be_id, integer, shown
from noti.redis.outage import translate_errors

if TYPE_CHECKING:
    from noti.access.users import User
    from noti.sending.runtime import Runtime

__all__ = ["SEARCH_MAX", "History", "parse_status"]

#: The most records one search answers.
SEARCH_MAX = 1000
#: The longest text a search field takes (an address, a vendor id, a provider, a recipient id).
FIELD_MAX = 2048


#: The newest steps :meth:`History.why_waiting` reads of each record.
WHY_STEPS = 8


class History:
    """Timelines and searches (mixed into the notifier: ``runtime`` and ``user`` are its)."""

    runtime: Runtime
    user: Callable[[str | None], User]

    def timeline(self, record_id: str, *, user: str | None = None) -> Timeline:
        """The record's steps, oldest first: its creation (from the record's own fields), then
        each step its scripts wrote.

        Raises:
            NotFound: ``e.cmd.noti.not_found``: no such record, or one the user may not see.
        """
        acting = self.user(user)
        store = self.runtime.store
        fields: dict[str, str] = {}
        raw: list[str] = []
        if could_be_id(record_id):  # the record and its steps in one round trip
            with translate_errors(store.redis):
                pipe = store.redis.pipeline(transaction=False)
                pipe.hgetall(store.keys.record(record_id))
                pipe.lrange(store.keys.timeline(record_id), 0, -1)
                fields, raw = pipe.execute()
        record = from_hash(fields) if fields and "noti_type" in fields else None
        if record is None or not acting.can_touch(record.creator):
            raise NotFound(f"no notification has the id {shown(record_id)}")
        steps = [first_step(record), *parse_steps(raw)]
        return Timeline(record_id, steps, int(fields.get("noti_tl_drop") or 0))

    def why_waiting(self, records: Sequence[Notification]) -> list[str]:
        """Why each of ``records`` (delayed ones, as :meth:`delayed` lists them) waits, read
        from its newest steps in one round trip (:func:`noti.core.timeline.why_waiting`:
        ``quiet hours``, ``throttle``, ``fallback``, ``scheduled``, ``retry n``, or "")."""
        if not records:
            return []
        store = self.runtime.store
        with translate_errors(store.redis):
            pipe = store.redis.pipeline(transaction=False)
            for record in records:
                pipe.lrange(store.keys.timeline(record.id), -WHY_STEPS, -1)
            raws = pipe.execute()
        return [why_waiting(parse_steps(raw)) for raw in raws]

    def search(
        self,
        *,
        user: str | None = None,
        creator: str | None = None,
        to: str | None = None,
        channel: str | None = None,
        recipient: str | None = None,
        status: Status | int | None = None,
        provider: str | None = None,
        msgid: str | None = None,
        delivery: str | None = None,
        since_ms: int | None = None,
        until_ms: int | None = None,
        limit: int = 100,
    ) -> list[Notification]:
        """Records newest first that match every filter given: ``to`` an address (a phone
        number, an e-mail address, an openid… as given to ``notify``; on ``channel``, or on every
        channel it is an address of), ``recipient`` a recipient id (of ``creator``, or of the
        acting user), a status, a provider (asked for or that sent it), the vendor's message
        id, a delivery status (``accepted``, ``delivered``, ``undelivered``, ``unknown``),
        created within ``since_ms`` … ``until_ms``. A non-root user finds their own only.

        Raises:
            InvalidInput: ``e.cmd.noti.search.bad`` (a field of the wrong type, too long, with a
            control character; an address no channel takes; a limit out of 1…1000),
            ``e.cmd.noti.list.badst``, ``e.cmd.noti.list.baddelivery``.
            PermissionDenied: ``e.cmd.noti.list.nopvg``: a non-root user names another creator.
        """
        acting = self.user(user)
        owner = acting.scope(creator, code="e.cmd.noti.list.nopvg", action="search notifications")
        kind = parse_channel(channel) if channel is not None else None
        to, recipient, provider, msgid = (
            _text(to, "to"),
            _text(recipient, "recipient"),
            _text(provider, "provider"),
            _text(msgid, "msgid"),
        )
        delivery = parse_delivery(delivery)
        store = self.runtime.store
        addresses: tuple[str, ...] = ()
        if to is not None:
            addresses = _address_keys(store.addresses.key, to, kind)
        rcpt = None
        if recipient is not None:
            rcpt = (store.keys.recipient_log(owner or acting.name, recipient), recipient)
        query = Query(
            addresses=addresses,
            creator=owner,
            recipient=rcpt,
            channel=kind,
            status=parse_status(status),
            provider=provider,
            msgid=msgid,
            delivery=delivery,
            since_ms=_time(since_ms, "since"),
            until_ms=_time(until_ms, "until"),
            limit=_search_limit(limit),
        )
        found = Search(store)(query)
        if addresses and not found and store.addresses.refresh():  # the database's secret changed
            addresses = _address_keys(store.addresses.key, to or "", kind)
            found = Search(store)(replace(query, addresses=addresses))
        if addresses:  # an index entry left by a record whose content a debounce replaced
            found = [r for r in found if store.addresses.key(r.channel, r.target) in addresses]
        return found


def _address_keys(key: Any, to: str, kind: Channel | None) -> tuple[str, ...]:
    """The index keys of ``to`` on ``kind``, or on every channel that takes it as an address."""
    out: list[str] = []
    for channel in [kind] if kind is not None else list(Channel):
        try:
            clean = validate_target(channel, to)
        except NotiError:
            continue
        out.append(cast(str, key(channel, clean)))
    if not out:
        where = f"a {kind.value} address" if kind is not None else "an address of any channel"
        raise InvalidInput(f"to={shown(to)} is not {where}", code="e.cmd.noti.search.bad")
    return tuple(out)


def _text(value: object, what: str) -> str | None:
    if value is None:
        return None
    if (
        not isinstance(value, str)
        or not value
        or len(value) > FIELD_MAX
        or bad_character(value, one_line=True)
    ):
        raise InvalidInput(
            f"{what} must be a text of 1 to {FIELD_MAX} characters without control characters, "
            f"got {shown(value)}",
            code="e.cmd.noti.search.bad",
        )
    return value


def _time(value: object, what: str) -> int | None:
    if value is None:
        return None
    ms = integer(value, what=what, code="e.cmd.noti.search.bad")
    if not 0 <= ms < 2**53:
        raise InvalidInput(
            f"{what} must be a time in ms since the epoch, got {shown(value)}", code="e.cmd.noti.search.bad"
        )
    return ms


def _search_limit(value: object) -> int:
    limit = integer(value, what="limit", code="e.cmd.noti.search.bad")
    if not 1 <= limit <= SEARCH_MAX:
        raise InvalidInput(
            f"limit must be from 1 to {SEARCH_MAX}, got {shown(value)}", code="e.cmd.noti.search.bad"
        )
    return limit


def parse_delivery(value: object) -> str | None:
    """A listing's or a search's delivery status: None, or one of :data:`DELIVERY_STATES`.

    Raises:
        InvalidInput: ``e.cmd.noti.list.baddelivery``.
    """
    if value is not None and value not in DELIVERY_STATES:
        raise InvalidInput(
            f"unknown delivery status {shown(value)} (known: {', '.join(DELIVERY_STATES)})",
            code="e.cmd.noti.list.baddelivery",
        )
    return value


def parse_status(value: Status | int | None) -> Status | None:
    """A listing's or a search's status: None, or one of -1, 0, 1, 10.

    Raises:
        InvalidInput: ``e.cmd.noti.list.badst``.
    """
    if value is None:
        return None
    try:
        if isinstance(value, (bool, float)) or (isinstance(value, str) and len(value) > 20):
            raise ValueError(value)
        return Status(int(value))
    except (TypeError, ValueError, OverflowError):
        known = ", ".join(str(int(s)) for s in Status)
        raise InvalidInput(
            f"unknown status {shown(value)} (known: {known})", code="e.cmd.noti.list.badst"
        ) from None
