"""The record store in Redis: create, schedule, claim, finish, revoke, delete and clean
records, and read them (:class:`~noti.core.reads.RecordReader`, which it extends).

Every change that touches a record and its indexes is one atomic step (a MULTI pipeline or
one of the Lua scripts in ``noti/lua``), so the indexes never disagree with the records.
Key names come from :mod:`noti.core.keys`; the ``create.lua`` calls are built in
:mod:`noti.core.creating`; what a claim, a finish and a revoke carry is in
:mod:`noti.core.attempt`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

import redis

from noti.core.attempt import (
    REVOKED_CODE,
    Claim,
    ErasedReceipt,
    Finish,
    Finished,
    Outcome,
    Revoked,
    claim_from_row,
)
from noti.core.creating import CreateCalls, CreatePipeline
from noti.core.deadletter import DeadLetter
from noti.core.keys import Keys
from noti.core.reads import RecordReader
from noti.core.record import DELIVERY_STATES, Channel, Notification, Status, now_ms, to_hash
from noti.core.search import AddressIndex
from noti.core.suppression import Suppressed, SuppressionList
from noti.core.timeline import finish_steps
from noti.errors import StoreUnavailable
from noti.redis.conn import ReplicaWait, load_script
from noti.redis.counters import added_field, finish_tally
from noti.redis.outage import translate_errors
from noti.redis.pipelines import HeldConnection, ScriptPipeline

__all__ = ["RecordStore"]


class RecordStore(RecordReader):
    """Notification records and their indexes in one Redis database, read and written."""

    def __init__(self, client: redis.Redis, keys: Keys, *, replica_wait: ReplicaWait | None = None) -> None:
        super().__init__(client, keys)
        #: Records created or scheduled are acknowledged only once replicas have them
        #: (``NOTI_REDIS_WAIT_REPLICAS``); None: once the primary has them.
        self.replica_wait = replica_wait
        self._claim = load_script(client, "claim")
        self._finish = load_script(client, "finish")
        self._delete = load_script(client, "delete")
        self._create = load_script(client, "create")
        #: The connection ``create_one`` keeps between calls (``notify()`` one at a time).
        self._held = HeldConnection(client)
        #: The address index's key names (:mod:`noti.core.search`).
        self.addresses = AddressIndex(client, keys)
        self._create_calls = CreateCalls(keys, self.addresses)
        self._schedule = load_script(client, "schedule")
        self._cancel = load_script(client, "cancel")
        self._revoke = load_script(client, "revoke")
        self._revive = load_script(client, "revive")
        self._renew = load_script(client, "renew")
        self._timeline_add = load_script(client, "timeline_add")
        self.suppressions = SuppressionList(client, keys)
        #: Each channel and the key of its opted-out set: what a claim checks (the claim
        #: script, and the broker transport's fetch when it claims).
        self.optouts: tuple[tuple[str, str], ...] = tuple(
            (c.value, keys.suppressed(c.value)) for c in Channel
        )

    # --- writing ----------------------------------------------------------------------------

    def create_many(
        self,
        records: Sequence[Notification],
        *,
        messages: Mapping[str, tuple[str, str]] | None = None,
        idempotency_keys: Mapping[str, str] | None = None,
        idempotency_ttl_s: float = 0.0,
        per_call: int = 100,
        per_round_trip: int = 1000,
    ) -> list[str]:
        """Store ``records``, each with its index entries and, when ``messages`` has one for
        its id, its delivery message ``(queue list, payload)``. A record with an entry in
        ``idempotency_keys`` (the Redis key: :meth:`Keys.idempotency` of its creator, or
        :meth:`Keys.task`) is stored only if that key was not used in the last
        ``idempotency_ttl_s``. ``create.lua`` stores ``per_call`` records atomically per call;
        calls are pipelined ``per_round_trip`` records at a time.

        Returns, per record, its id, or the id of the record its idempotency key named.

        Raises:
            StoreUnavailable: Redis could not be reached (round trips already made stay stored).
        """
        if len(records) == 1 and not idempotency_keys and self.creates_one_by_one:
            record = records[0]  # notify() one at a time: one round trip, no pipeline
            self.create_one(record, messages.get(record.id) if messages else None)
            return [record.id]
        ids: list[str] = []
        with self.create_pipeline(idempotency_ttl_s=idempotency_ttl_s, per_call=per_call) as creating:
            for start in range(0, len(records), per_round_trip):
                creating.send(
                    records[start : start + per_round_trip],
                    messages=messages,
                    idempotency_keys=idempotency_keys,
                )
                if start + per_round_trip >= len(records):
                    creating.confirm_ahead()  # the last round trip carries the replicas' wait
                ids.extend(creating.ids())
            creating.confirm()
        return ids

    @property
    def creates_one_by_one(self) -> bool:
        """True when :meth:`create_one` may store a record (no replica has to acknowledge it:
        with ``NOTI_REDIS_WAIT_REPLICAS`` records go through :meth:`create_many`)."""
        return self.replica_wait is None

    def create_one(self, record: Notification, message: tuple[str, str] | None = None) -> None:
        """Store one record without an idempotency key, with its index entries and, when
        given, its delivery message ``(queue list, payload)``: the ``create.lua`` call of
        :meth:`create_many` for one record, in one round trip on a connection kept between
        calls (the hot path of ``notify()``, see :class:`~noti.redis.pipelines.HeldConnection`).

        Raises:
            StoreUnavailable: Redis could not be reached (the record may be stored).
            RuntimeError: the store waits for replicas (see :attr:`creates_one_by_one`).
        """
        if self.replica_wait is not None:
            raise RuntimeError("records acknowledged by replicas go through create_many")
        keys, args = self._create_calls([record], {record.id: message} if message else {}, {}, ttl_ms=0)
        with translate_errors(self.redis):
            self._held.call_script(self._create, keys, args)

    def close(self) -> None:
        """Give back the connection :meth:`create_one` keeps."""
        self._held.close()

    def create_pipeline(self, *, idempotency_ttl_s: float = 0.0, per_call: int = 100) -> CreatePipeline:
        """A :class:`~noti.core.creating.CreatePipeline` on one connection of this store (use
        it as a context)."""
        return CreatePipeline(
            self.redis,
            self._create,
            self._create_calls,
            replica_wait=self.replica_wait,
            idempotency_ttl_s=idempotency_ttl_s,
            per_call=per_call,
        )

    def create(self, record: Notification) -> None:
        """Store one record (see :meth:`create_many`)."""
        self.create_many([record])

    def schedule(self, record: Notification, identifier_key: str, *, ttl_ms: int) -> tuple[bool, str]:
        """Store a delayed ``record`` under an identifier, or replace the one it names.

        While the record the identifier names is still waiting in the delayed set, never
        claimed and not taken by the pump, its content is replaced by ``record``'s and its
        delay restarts (it keeps its id); otherwise ``record`` is stored as new. Returns
        ``(replaced, id)``.
        """
        k = self.keys
        fields: list[Any] = []
        for name, value in to_hash(record).items():
            fields += [name, value]
        for _ in range(10):
            with translate_errors(self.redis), ScriptPipeline(self.redis, self._schedule) as scheduling:
                current = self.redis.get(identifier_key)
                call = (
                    [
                        identifier_key,
                        k.record(str(current)) if current else k.record(record.id),
                        k.record(record.id),
                        k.all_index,
                        k.user_index(record.creator),
                        k.status_index(int(Status.WAITING)),
                        k.waiting_index,
                        k.delayed,
                        k.metrics,
                        self.addresses.key(record.channel, record.target),
                    ],
                    [
                        current or "",
                        record.id,
                        record.created_ms,
                        record.level,
                        record.lease_until_ms,
                        ttl_ms,
                        added_field(record.channel.value, record.provider),
                        *fields,
                    ],
                )
                scheduling.send([call])
                if self.replica_wait is not None:  # in the same round trip as the call
                    self.replica_wait.ask(scheduling, self.redis)
                [(state, record_id)] = scheduling.results()
                if self.replica_wait is not None:
                    if int(state) >= 1:
                        self.replica_wait.confirm(scheduling, self.redis)
                    else:  # nothing written: the wait's answer is read and left
                        scheduling.results(raise_on_error=False)
            if int(state) >= 1:
                return int(state) == 2, str(record_id)
        raise StoreUnavailable(f"identifier {identifier_key} kept changing; try again")

    def cancel(self, record: Notification, identifier_key: str | None = None) -> bool:
        """Delete a scheduled record that no sender has touched yet; False if it was too late."""
        k = self.keys
        with translate_errors(self.redis):
            result = self._cancel(
                keys=[
                    k.record(record.id),
                    k.all_index,
                    k.user_index(record.creator),
                    k.waiting_index,
                    k.delayed,
                    *k.status_indexes,
                    identifier_key or k.record(record.id),
                    k.metrics,
                    self.addresses.key(record.channel, record.target),
                ],
                args=[record.id, record.creator],
            )
        return int(result) == 1

    def revive(self, record_id: str, *, at_ms: int | None = None) -> Notification | None:
        """Put a failed or invalid record back to waiting with its attempts reset.

        Returns the revived record, or None when it was missing or not failed/invalid.
        """
        k = self.keys
        now = now_ms() if at_ms is None else at_ms
        with translate_errors(self.redis):
            result = self._revive(
                keys=[k.record(record_id), k.waiting_index, *k.status_indexes, k.metrics],
                args=[record_id, now],
            )
        if int(result[0]) != 1:
            return None
        return self.find(record_id)

    def suppress(self, channel: str, target: str, *, why: Suppressed | None = None) -> None:
        """Remember that no notification of ``channel`` goes to ``target`` any more, and why
        (``why``'s reason, vendor code and text, record, user, provider; its channel and target
        are these): :mod:`noti.core.suppression`."""
        entry = why or Suppressed(channel, target, reason="optout", at_ms=now_ms())
        self.suppressions.add(dataclasses.replace(entry, channel=channel, target=target))

    def is_suppressed(self, channel: str, target: str) -> bool:
        """Whether ``target`` is suppressed for ``channel`` (the claim reports it to senders)."""
        return self.suppressions.contains(channel, target)

    def unsuppress(self, channel: str, target: str) -> bool:
        """Lift a suppression (and forget why); whether there was one."""
        return self.suppressions.remove(channel, target)

    def claim_many(
        self,
        ids: Sequence[str],
        *,
        owner: str,
        lease_ms: int,
        creator: str | None = None,
        at_ms: int | None = None,
    ) -> list[Claim]:
        """Try to take each record for sending, in one atomic script call.

        A record is taken only when it is waiting and its lease has expired; taking it sets
        ``noti_timeout_at = now + lease_ms`` and remembers ``owner`` for :meth:`finish`.
        """
        if not ids:
            return []
        now = now_ms() if at_ms is None else at_ms
        channels, sets = zip(*self.optouts, strict=True)
        with translate_errors(self.redis):
            rows = self._claim(
                keys=[*(self.keys.record(i) for i in ids), *sets],
                args=[now, int(lease_ms), owner, creator or "", len(ids), *channels],
            )
        return [claim_from_row(row) for row in rows]

    def claim(self, record_id: str, **kwargs: object) -> Claim:
        """Try to take one record (see :meth:`claim_many`)."""
        return self.claim_many([record_id], **kwargs)[0]  # type: ignore[arg-type]

    def renew(
        self, leases: Sequence[tuple[str, str]], *, lease_ms: int, at_ms: int | None = None
    ) -> list[bool]:
        """Extend the leases of ``(record id, owner)`` pairs to now + ``lease_ms``, in one call.

        Returns, per pair, whether the lease was still held.
        """
        if not leases:
            return []
        now = now_ms() if at_ms is None else at_ms
        with translate_errors(self.redis):
            held = self._renew(
                keys=[self.keys.record(record_id) for record_id, _ in leases],
                args=[now + lease_ms, *(owner for _, owner in leases)],
            )
        return [bool(x) for x in held]

    def finish(
        self,
        record_id: str,
        *,
        owner: str,
        outcome: Outcome,
        letter: DeadLetter | None = None,
        letter_max_len: int = 10_000,
        at_ms: int | None = None,
    ) -> bool:
        """Apply ``outcome`` if ``owner`` still holds the lease; False when it does not.

        A ``letter`` is appended to the dead-letter stream in the same atomic step.
        """
        item = Finish(record_id, owner, outcome, letter)
        return bool(self.finish_many([item], letter_max_len=letter_max_len, at_ms=at_ms)[0])

    def finish_many(
        self,
        items: Sequence[Finish],
        *,
        letter_max_len: int = 10_000,
        at_ms: int | None = None,
        unknown_after_ms: int = 3_600_000,
        changes_max_len: int = 100_000,
    ) -> list[bool | str | Finished]:
        """Apply the outcomes of many sends in one atomic script call (see :meth:`finish`),
        counting each one applied (:mod:`noti.redis.counters`) in the same step. A sent record
        whose outcome names a delivery status enters it (:mod:`noti.delivery`): an accepted
        one awaits its receipt for ``unknown_after_ms``.

        Returns, per item, whether it was applied (its owner still held the lease); for an
        applied one whose vendor's receipt came before it, that receipt's JSON
        (:meth:`noti.delivery.DeliveryReport.from_json`), for the caller to apply; for an
        applied one whose recipient was erased while it was sent, :attr:`Finished.ERASED_MEANWHILE`
        (and when both, the receipt as an :class:`~noti.core.attempt.ErasedReceipt`).
        """
        if not items:
            return []
        k = self.keys
        now = now_ms() if at_ms is None else at_ms
        args: list[Any] = [now, letter_max_len, unknown_after_ms, changes_max_len]
        tallies: dict[tuple[Any, ...], str] = {}
        for item in items:
            outcome = item.outcome
            args += [
                item.owner,
                int(outcome.status),
                outcome.errmsg,
                outcome.not_before_ms,
                outcome.retry,
                "" if outcome.expires_ms is None else outcome.expires_ms,
                json.dumps(dict(outcome.fields)),
                json.dumps(item.letter.fields()) if item.letter is not None else "",
            ]
            # the records of a batch mostly share their tally (one provider group's calls)
            tally_of = (outcome.status, item.provider, outcome.error_class, item.letter is None, item.calls)
            tally = tallies.get(tally_of)
            if tally is None:
                tally = tallies[tally_of] = finish_tally(
                    status=int(outcome.status),
                    provider=item.provider,
                    reason=outcome.error_class or "invalid",
                    dead_letter=item.letter is not None,
                    calls=item.calls,
                )
            args += [tally, finish_steps(item, now)]
        keys = [
            k.waiting_index,
            k.delayed,
            *k.status_indexes,
            k.dead_letters,
            k.metrics,
            k.delivery_watch,
            k.vendor_ids,
            k.vendor_id_age,
            k.early_receipts,
            k.status_changes,
            k.delivery_index("accepted"),
            k.delivery_index("delivered"),
        ]
        with translate_errors(self.redis):
            applied = self._finish(keys=[*keys, *(k.record(item.record_id) for item in items)], args=args)
        return [_finished(x) for x in applied]

    def revoke(
        self, record_ids: Sequence[str], *, reason: str, owner: str = "", at_ms: int | None = None
    ) -> list[Revoked]:
        """Revoke waiting records (Celery's ``revoke`` of their task ids): each becomes invalid
        (-1) with ``noti_revoked_at`` set, in one atomic script call, and is never sent or
        queued again. A record whose lease another sender than ``owner`` holds is left to it.

        Raises:
            StoreUnavailable: Redis cannot be reached.
        """
        if not record_ids:
            return []
        k = self.keys
        keys = [
            k.waiting_index,
            k.delayed,
            k.status_index(int(Status.INVALID)),
            k.status_index(int(Status.WAITING)),
            k.metrics,
        ]
        now = now_ms() if at_ms is None else at_ms
        errmsg = f"{REVOKED_CODE}: {reason}"
        with translate_errors(self.redis):
            codes = self._revoke(keys=[*keys, *(k.record(i) for i in record_ids)], args=[now, errmsg, owner])
        return [Revoked(int(code)) for code in codes]

    def note_steps(self, record_id: str, steps: Sequence[str]) -> bool:
        """Append steps (:func:`noti.core.timeline.step_text`) to a record's timeline that no
        change of the record comes with; False when there is no such record."""
        with translate_errors(self.redis):
            return bool(self._timeline_add(keys=[self.keys.record(record_id)], args=["\n".join(steps)]))

    def delete(self, record_id: str) -> Notification | None:
        """Remove a record and its index entries; the removed record, or None if there was none."""
        k = self.keys
        for _ in range(3):
            record = self.find(record_id)
            if record is None:
                return None
            with translate_errors(self.redis):
                done = self._delete(
                    keys=[
                        k.record(record_id),
                        k.all_index,
                        k.user_index(record.creator),
                        k.waiting_index,
                        k.delayed,
                        *k.status_indexes,
                        *(k.delivery_index(state) for state in DELIVERY_STATES),
                        k.delivery_watch,
                        self.addresses.key(record.channel, record.target),
                    ],
                    args=[record_id, record.creator],
                )
            if done == 1:
                return record
            if done == 0:
                return None
        return None  # pragma: no cover - the creator never changes

    def remove_done_before(self, cutoff_ms: int, limit: int | None = None) -> list[Notification]:
        """Delete the records done before ``cutoff_ms`` (at most ``limit``; None or 0 or less:
        all), oldest first; the records removed (the ``clean`` job)."""
        removed: list[Notification] = []
        for record_id in self.done_before(cutoff_ms, limit if limit and limit > 0 else None):
            record = self.delete(record_id)
            if record is not None:
                removed.append(record)
        return removed


def _finished(answer: Any) -> bool | str | Finished:
    """One of ``finish.lua``'s answers as :meth:`RecordStore.finish_many` gives it."""
    if isinstance(answer, list):  # {2, an early receipt}
        receipt = answer[1]
        return ErasedReceipt(receipt.decode() if isinstance(receipt, bytes) else receipt)
    if isinstance(answer, bytes):
        return answer.decode()
    if isinstance(answer, str):
        return answer
    return Finished(answer) if answer == Finished.ERASED_MEANWHILE.value else bool(answer)
