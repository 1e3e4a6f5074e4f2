"""The Notifier: adding, reading, removing and sending records, with the permission rules
of :mod:`noti.access.users` applied to every call. :mod:`noti.api` wraps it in module functions.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from noti.core.attempt import Revoked
from noti.core.delay import PublishItem, validate_idempotency_key
from noti.core.record import (
    Channel,
    Notification,
    Status,
    now_ms,
    parse_channel,
    parse_level,
)
from noti.errors import InvalidInput, NotFound
from noti.inputs import could_be_id, finite_number, integer, shown, user_name
from noti.redis.outage import translate_errors
from noti.sending.builder import RecordBuilder
from noti.sending.history import History, parse_delivery, parse_status
from noti.sending.runtime import Runtime

if TYPE_CHECKING:
    from noti.sending.sender import SendResult

# noti.providers and noti.sending.sender (the delivery side) are imported where they are used, so
# that reading records (``noti list``, ``noti get``) does not load them

__all__ = ["Notifier", "Publishing", "Revocation"]


class Publishing(Protocol):
    """What the notifier (and the redrive) need of a publisher of delivery messages: the
    port the Celery layer fills (:class:`noti.celery.publish.Publisher`), so nothing here
    imports it. A delivery message is a record's ``noti.deliver`` task message."""

    @property
    def shares_store(self) -> bool:
        """True when a record and its message may be written by one script (the broker is
        the store's Redis and the message is written in kombu's wire format)."""
        ...

    def message(
        self, record_id: str, channel: Channel, level: int, parent: str | None = None
    ) -> tuple[str, str]:
        """The Redis list and the payload of the delivery message of one record (``parent``:
        the notice it belongs to, shown by Flower)."""
        ...

    def published(self, messages: Iterable[tuple[str, str]]) -> None:
        """Tell the publisher that ``messages`` (of :meth:`message`) were written."""
        ...

    def publish(
        self, items: Iterable[PublishItem], *, traces: Mapping[str, Mapping[str, str]] | None = None
    ) -> int:
        """Publish the delivery message of each ``(record id, channel, level)``, carrying
        ``traces[record id]`` when given (else the current span's context); how many."""
        ...


#: Records revoked per script call by :meth:`Notifier.revoke`.
_REVOKE_BATCH = 500


@dataclass(frozen=True, slots=True)
class Revocation:
    """What :meth:`Notifier.revoke` did."""

    #: Invalid (-1) now, with ``noti_revoked_at``: never sent.
    revoked: list[str]
    #: A sender held them: marked, revoked at their next claim unless the send in progress
    #: delivers them first.
    held: list[str]


#: How long ``send`` claims a record for by default (``noti send -timeout``).
SEND_TIMEOUT_DEFAULT_S = 10.0


class Notifier(History):
    """The operations of noti over one runtime and one publisher of delivery messages."""

    def __init__(self, runtime: Runtime, publisher: Publishing) -> None:
        self.runtime = runtime
        self.publisher = publisher
        #: Builds and checks records (inputs, permissions, grants, the providers' own checks).
        self.builder = RecordBuilder(runtime)
        self.user = self.builder.user
        self.build = self.builder.build
        self.with_fallback = self.builder.with_fallback

    # --- adding (built by noti.sending.builder) -------------------------------------------------

    def add(
        self,
        type: str,  # noqa: A002
        target: str,
        /,
        *,
        idempotency_key: str | None = None,
        task_id: str | None = None,
        fallback: object = None,
        **kwargs: Any,
    ) -> Notification:
        """Validate, store and queue one notification; the stored record.

        ``fallback`` (a mapping: ``type``, ``to``, its fields, ``after_s``) is stored with it
        and sent if no delivery receipt comes in time (:mod:`noti.delivery.fallback`).

        A record with a delay waits in the delayed set and is queued when due. With an
        ``identifier``, scheduling again while the first is still delayed replaces its
        content and restarts its delay (the record keeps its id); once it has been queued,
        a new record is made. With ``idempotency_key``, a second call with the same key
        (within ``NOTI_IDEMPOTENCY_TTL_S``) stores nothing and returns the first record.
        ``task_id`` (the ``noti.notify`` Celery task's id) is an idempotency key of its own
        kind: ``noti:task:<id>``, the same whoever the user, so the task's result backend
        finds the record from the task id alone (:mod:`noti.celery.backend`).

        Raises:
            InvalidInput: bad input; nothing is stored.
            StoreUnavailable: Redis cannot be reached.
        """
        record = self.build(type, target, **kwargs)
        standby = None
        if fallback is not None:
            record, standby = self.with_fallback(
                record,
                fallback,
                user=kwargs.get("user"),
                level_cap=kwargs.get("level_cap"),
                providers_allowed=kwargs.get("providers_allowed"),
            )
        if idempotency_key is not None:
            validate_idempotency_key(idempotency_key, identifier=record.identifier)
        if task_id is not None:
            validate_idempotency_key(task_id, identifier=record.identifier)
            if idempotency_key is not None:
                raise InvalidInput(
                    "give an idempotency_key or a task_id, not both", code="e.cmd.noti.add.badkey"
                )
        return self.store_one(record, idempotency_key=idempotency_key, task_id=task_id, fallback=standby)

    def store_one(
        self,
        record: Notification,
        *,
        idempotency_key: str | None = None,
        task_id: str | None = None,
        fallback: Notification | None = None,
    ) -> Notification:
        """Store and queue a record :meth:`build` made (see :meth:`add`); the stored record.

        Raises:
            NotFound: ``e.cmd.noti.add.keyused``: the idempotency key names a deleted record.
            StoreUnavailable: Redis cannot be reached.
        """
        store = self.runtime.store
        if record.identifier is not None:
            key = store.keys.identifier(record.creator, record.identifier)
            ttl_ms = max(0, record.lease_until_ms - record.created_ms) + int(
                self.runtime.settings.idempotency_ttl_s * 1000
            )
            _, record_id = store.schedule(record, key, ttl_ms=ttl_ms)
            return store.get(record_id)
        keys = None
        if task_id is not None:
            keys = {record.id: store.keys.task(task_id)}
        elif idempotency_key is not None:
            keys = {record.id: store.keys.idempotency(record.creator, idempotency_key)}
        records = [record]
        if fallback is not None:  # stored in the same call; under a key of its own when deduplicated
            records.append(fallback)
            if keys is not None:
                keys[fallback.id] = keys[record.id] + ":fallback"
        record_id = self.store_and_queue(records, idempotency_keys=keys)[0]
        if record_id == record.id:
            return record
        existing = store.find(record_id)
        if existing is None:
            raise NotFound(
                f"idempotency key {idempotency_key or task_id!r} names record {record_id}, which was deleted",
                code="e.cmd.noti.add.keyused",
            )
        return existing

    def store_and_queue(
        self, records: Sequence[Notification], *, idempotency_keys: Mapping[str, str] | None = None
    ) -> list[str]:
        """Store validated records and queue the undelayed ones: when the broker is the store's
        Redis, each record and its message are written by one script (together or not at all),
        a thousand records per round trip. ``idempotency_keys`` maps a record id to the Redis
        key of its idempotency key. Returns the ids stored, or for a record whose idempotency
        key was used already, the id that key names (then nothing is stored).

        Raises:
            StoreUnavailable: Redis cannot be reached.
        """
        store, ttl_s = self.runtime.store, self.runtime.settings.idempotency_ttl_s
        if self.publisher.shares_store:
            messages = self.delivery_messages(records)
            stored = store.create_many(
                records, messages=messages, idempotency_keys=idempotency_keys, idempotency_ttl_s=ttl_s
            )
            self.published(records, stored, messages)
            return stored
        ids = store.create_many(records, idempotency_keys=idempotency_keys, idempotency_ttl_s=ttl_s)
        now_items = [
            (record.id, record.channel, record.level)
            for record_id, record in zip(ids, records, strict=True)
            if record_id == record.id and not record.lease_until_ms
        ]
        if now_items:
            self.publisher.publish(now_items)
        return ids

    def published(
        self, records: Sequence[Notification], stored: Sequence[str], messages: Mapping[str, tuple[str, str]]
    ) -> None:
        """After ``create.lua`` stored ``records`` (``stored``: the id each call answered),
        tell the publisher which of their messages went out (a record whose idempotency key
        named another one wrote none)."""
        self.publisher.published(
            messages[r.id] for r, i in zip(records, stored, strict=True) if i == r.id and r.id in messages
        )

    def delivery_messages(self, records: Iterable[Notification]) -> dict[str, tuple[str, str]]:
        """By record id, the delivery message ``(queue list, payload)`` of each record due now,
        for ``create.lua`` to write with it (when the publisher shares the store)."""
        message = self.publisher.message
        return {r.id: message(r.id, r.channel, r.level) for r in records if not r.lease_until_ms}

    def notify(self, type: str, target: str, /, **kwargs: Any) -> str:  # noqa: A002
        """:meth:`add`, returning only the id."""
        return self.add(type, target, **kwargs).id

    # --- reading ------------------------------------------------------------------------------

    def get(self, record_id: str, *, user: str | None = None) -> Notification:
        """One record the acting user may see. Another user's record (for anyone but a root
        member) is answered as a missing one: the same error and message after the same
        reads, so an answer tells neither that it exists nor whose it is.

        Raises:
            NotFound: ``e.cmd.noti.not_found``: no such record, or one the user may not see.
        """
        acting = self.user(user)
        record = self.runtime.store.find(record_id)
        if record is None or not acting.can_touch(record.creator):
            raise NotFound(f"no notification has the id {shown(record_id)}")
        return record

    def select(
        self,
        *,
        user: str | None = None,
        creator: str | None = None,
        status: Status | int | None = None,
        limit: int | None = None,
        delivery: str | None = None,
        type: str | None = None,  # noqa: A002 - the seed's word
    ) -> list[Notification]:
        """Records newest first; a non-root user sees only their own. ``delivery`` keeps
        those in one delivery status (``accepted``, ``delivered``, ``undelivered``,
        ``unknown``), ``type`` those of one channel.

        Raises:
            PermissionDenied: ``e.cmd.noti.list.nopvg`` when a non-root user names another creator.
            InvalidInput: an unknown status (``e.cmd.noti.list.badst``), delivery status
            (``e.cmd.noti.list.baddelivery``) or type (``e.cmd.noti.add.badtype``), a limit that
            is not an integer (``e.cmd.noti.list.badlimit``; 0 or less: no limit), a creator
            that is no user name (``e.cmd.noti.baduser``).
        """
        creator = self.user(user).scope(creator, code="e.cmd.noti.list.nopvg", action="list notifications")
        st = parse_status(status)
        limit = _limit(limit, "e.cmd.noti.list.badlimit")
        delivery = parse_delivery(delivery)
        channel = parse_channel(type) if type is not None else None
        return self.runtime.store.select(
            creator=creator, status=st, limit=limit, delivery=delivery, channel=channel
        )

    # --- removing -----------------------------------------------------------------------------

    def delete(self, record_id: str, *, user: str | None = None) -> Notification:
        """Delete one record: its creator or a root member may.

        Raises:
            NotFound: ``e.cmd.noti.del.not_a_msg``.
            PermissionDenied: ``e.cmd.noti.del.nopvg``.
        """
        store = self.runtime.store
        record = store.find(record_id)
        if record is None:
            raise NotFound(f"{shown(record_id)} is not a notification", code="e.cmd.noti.del.not_a_msg")
        self.user(user).require_access(
            record.creator, code="e.cmd.noti.del.nopvg", action="delete notifications"
        )
        removed = store.delete(record_id)
        if removed is None:
            raise NotFound(f"{shown(record_id)} is not a notification", code="e.cmd.noti.del.not_a_msg")
        if removed.fallback:  # a deleted notification's waiting fallback is not sent either
            store.revoke([removed.fallback], reason=f"its notification {record_id} was deleted")
        return removed

    def clean(
        self, *, user: str | None = None, keep_s: float | None = None, limit: int | None = None
    ) -> list[Notification]:
        """Remove done records older than ``keep_s`` (default: the keep window); root only.

        Raises:
            PermissionDenied: ``e.cmd.noti.clean.nopvg``.
            InvalidInput: ``e.cmd.noti.clean.badkeep`` (a negative or non-finite keep),
            ``e.cmd.noti.clean.badlimit``.
        """
        self.user(user).require_root("e.cmd.noti.clean.nopvg", "clean notifications")
        return self.clean_done(keep_s=keep_s, limit=limit)

    def clean_done(self, *, keep_s: float | None = None, limit: int | None = None) -> list[Notification]:
        """:meth:`clean` without the permission check, for the beat job."""
        if keep_s is None:
            keep_s = self.runtime.settings.keep_done_s
        keep_s = finite_number(keep_s, what="keep (seconds)", code="e.cmd.noti.clean.badkeep", minimum=0)
        limit = _limit(limit, "e.cmd.noti.clean.badlimit")
        return self.runtime.store.remove_done_before(now_ms() - int(keep_s * 1000), limit)

    # --- delayed records ------------------------------------------------------------------------

    def delayed(self, *, user: str | None = None, limit: int | None = None) -> list[tuple[Notification, int]]:
        """Records waiting for a time (scheduled, or backing off), soonest first, with their due ms."""
        acting = self.user(user)
        limit = _limit(limit, "e.cmd.noti.delayed.badlimit")
        return self.runtime.store.delayed_where(
            lambda r: r.status is Status.WAITING and acting.can_touch(r.creator), limit
        )

    def cancel(self, ident: str, *, user: str | None = None, creator: str | None = None) -> Notification:
        """Cancel a scheduled record by id, or by identifier (of ``creator``, default the user).

        Raises:
            NotFound: ``e.cmd.noti.cancel.not_found``.
            PermissionDenied: ``e.cmd.noti.cancel.nopvg``.
            InvalidInput: ``e.cmd.noti.cancel.queued``: it has been queued or attempted already.
        """
        acting = self.user(user)
        store = self.runtime.store
        record = store.find(ident)
        if record is None and could_be_id(ident):
            owner = acting.name if creator is None else user_name(creator)
            with translate_errors(store.redis):
                record_id = store.redis.get(store.keys.identifier(owner, ident))
            record = store.find(str(record_id)) if record_id else None
        if record is None:
            raise NotFound(
                f"no scheduled notification has the id or identifier {shown(ident)}",
                code="e.cmd.noti.cancel.not_found",
            )
        acting.require_access(record.creator, code="e.cmd.noti.cancel.nopvg", action="cancel notifications")
        ident_key = store.keys.identifier(record.creator, record.identifier) if record.identifier else None
        if not store.cancel(record, ident_key):
            raise InvalidInput(
                f"{record.id} has been queued or attempted already; delete it with `noti del` instead",
                code="e.cmd.noti.cancel.queued",
            )
        return record

    def revoke(
        self,
        record_ids: Sequence[str] = (),
        *,
        user: str | None = None,
        creator: str | None = None,
        channel: str | None = None,
        below_level: int | None = None,
        every: bool = False,
    ) -> Revocation:
        """Revoke waiting notifications, queued or delayed: each becomes invalid (-1) with
        ``noti_revoked_at`` and is never sent, re-queued or swept back (the messages already
        queued for them are taken and dropped by the workers). Either ``record_ids``, or with
        ``every`` all waiting records of ``creator`` (yours unless you are a root member: then
        anyone's, or everyone's when None), optionally only of ``channel`` and below level
        ``below_level``. A record a sender holds right now is marked instead: its next claim
        revokes it, unless the send in progress delivers it first.

        Raises:
            InvalidInput: ``e.cmd.noti.revoke.what``: neither ids nor ``every``, or both.
            NotFound: ``e.cmd.noti.revoke.not_found``: an id names no record, or another
            user's (answered alike, as :meth:`get` does). PermissionDenied:
            ``e.cmd.noti.revoke.nopvg``: ``every`` for another ``creator``.
        """
        acting = self.user(user)
        store = self.runtime.store
        if isinstance(record_ids, (str, bytes)) or not isinstance(record_ids, Sequence):
            raise InvalidInput(
                f"record_ids must be a list of ids, got {type(record_ids).__name__}",
                code="e.cmd.noti.revoke.what",
            )
        if bool(record_ids) == every:
            raise InvalidInput(
                "name record ids, or ask for every waiting record", code="e.cmd.noti.revoke.what"
            )
        if record_ids:
            records = store.find_many(list(record_ids))
            for record_id, record in zip(record_ids, records, strict=True):
                if record is None or not acting.can_touch(record.creator):
                    raise NotFound(f"no notification {shown(record_id)}", code="e.cmd.noti.revoke.not_found")
            chosen = list(record_ids)
            # a revoked notification's fallback goes with it (a fallback revoked alone does not
            # take its notification)
            standby = [
                r.fallback for r in records if r is not None and r.fallback and r.status is Status.WAITING
            ]
            chosen += [f for f in standby if f not in chosen]
        else:
            owner = acting.scope(creator, code="e.cmd.noti.revoke.nopvg", action="revoke notifications")
            kind = parse_channel(channel).value if channel is not None else None
            ceiling = parse_level(below_level) if below_level is not None else None
            chosen = store.waiting_ids(creator=owner, channel=kind, below_level=ceiling)
        result = Revocation([], [])
        reason = f"revoked by {acting.name}"
        for start in range(0, len(chosen), _REVOKE_BATCH):
            batch = chosen[start : start + _REVOKE_BATCH]
            for record_id, done in zip(batch, store.revoke(batch, reason=reason), strict=True):
                if done is Revoked.REVOKED:
                    result.revoked.append(record_id)
                elif done is Revoked.HELD:
                    result.held.append(record_id)
        return result

    # --- sending in this process --------------------------------------------------------------

    def send(
        self,
        record_id: str | None = None,
        *,
        user: str | None = None,
        creator: str | None = None,
        limit: int | None = None,
        timeout_s: float = SEND_TIMEOUT_DEFAULT_S,
    ) -> Iterator[SendResult]:
        """Send waiting records now, in this process, highest level first, oldest first.

        Each record is claimed for ``timeout_s`` (at most 600 s) first, so a worker or another
        ``send`` never sends it too. A non-root user only picks their own records.

        Raises:
            PermissionDenied: ``e.cmd.noti.send.nopvg``.
            InvalidInput: a timeout that is not a positive finite number
            (``e.cmd.noti.send.badtimeout``), a limit that is not an integer (``.badlimit``).
            NotFound: ``record_id`` names no record.
        """
        from noti.sending.now import send_now

        acting = self.user(user)
        timeout_s = finite_number(
            timeout_s, what="timeout (seconds)", code="e.cmd.noti.send.badtimeout", above=0
        )
        return send_now(
            self.runtime,
            acting,
            record_id,
            creator=creator,
            limit=_limit(limit, "e.cmd.noti.send.badlimit"),
            timeout_s=timeout_s,
        )


def _limit(value: object, code: str) -> int | None:
    """A listing's or a sweep's ``limit``: None, or an integer (0 or less: no limit).

    Raises:
        InvalidInput: with ``code`` for anything else (a string, a float, a bool).
    """
    if value is None:
        return None
    number = integer(value, what="limit", code=code)
    return number if number > 0 else None
