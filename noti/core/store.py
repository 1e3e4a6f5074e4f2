"""The record store in Redis: create, claim, finish, read, list, delete and clean records.

Every change that touches a record and its indexes is one atomic step (a MULTI pipeline or
one of the Lua scripts in ``noti/lua``), so the indexes never disagree with the records.
Key names come from :mod:`noti.core.keys`.
"""

from __future__ import annotations

import dataclasses
import enum
import itertools
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import redis

from noti.core.deadletter import DeadLetter
from noti.core.keys import Keys
from noti.core.record import DELIVERY_STATES, Channel, Notification, Status, from_hash, now_ms, to_hash
from noti.core.suppression import Suppressed, SuppressionList
from noti.errors import NotFound, StoreUnavailable
from noti.inputs import could_be_id, shown
from noti.redis.conn import ReplicaWait, load_script
from noti.redis.counters import added_field, finish_tally
from noti.redis.outage import translate_errors
from noti.redis.pipelines import HeldConnection, ScriptPipeline

__all__ = [
    "REVOKED_CODE",
    "UNSURE_FIELD",
    "Claim",
    "ClaimState",
    "CreatePipeline",
    "Finish",
    "Outcome",
    "RecordStore",
    "Revoked",
    "claim_from_row",
]

_PAGE = 500
#: Hash field ("1") of a record an earlier attempt of which may have been sent: set through the
#: outcome's fields (:func:`noti.core.retry.decide`, the sender) and kept until the record is sent
#: (finish.lua), so every later attempt asks the vendor first.
UNSURE_FIELD = "_unsure"


class ClaimState(enum.Enum):
    CLAIMED = 1  #: the caller holds the lease and may send
    LEASED = 2  #: waiting, but another sender holds it or it is not due yet
    FINAL = 3  #: not waiting any more (done, failed or invalid)
    FOREIGN = 4  #: made by another user than the one required
    NOT_DUE = 5  #: waiting for its time in the delayed set: leave it alone
    MISSING = 0  #: no such record


@dataclass(frozen=True, slots=True)
class Claim:
    """What a claim attempt found."""

    state: ClaimState
    record: Notification | None = None
    #: For LEASED: the ms when the lease ends; for NOT_DUE: when it is due.
    until_ms: int = 0
    #: For FINAL: the status found.
    status: Status | None = None
    #: For CLAIMED: claims since the record was last finished, this one included.
    claims: int = 0
    #: For CLAIMED: the target opted out of the record's channel.
    suppressed: bool = False
    #: For CLAIMED: a revoke found the record held by another sender; the claimer revokes it.
    revoke_requested: bool = False
    #: For CLAIMED: an earlier attempt ended without knowing whether it was sent (``_unsure``).
    unsure: bool = False

    @property
    def in_doubt(self) -> bool:
        """For CLAIMED: an earlier attempt may have been sent. Either it ended ambiguous
        (:attr:`unsure`), or it never recorded an outcome at all (the claim before this one
        is still counted in ``_inflight``: its sender died, maybe mid-send). The claim script
        wrote both marks already, so knowing costs no round trip."""
        return self.unsure or self.claims > 1


@dataclass(frozen=True, slots=True)
class Outcome:
    """The new state of a record after a send attempt (decided by :mod:`noti.core.retry`)."""

    status: Status
    errmsg: str
    retry: int
    #: For WAITING: when the next attempt is due (the record is re-queued then).
    not_before_ms: int = 0
    expires_ms: int | None = None
    #: Extra hash fields to set (provider that delivered, message id).
    fields: tuple[tuple[str, str], ...] = ()
    #: For FAILED / INVALID: the dead-letter class (``exhausted``, ``invalid``, ``config``,
    #: ``unexpected``, ``poison``).
    error_class: str = ""


class Revoked(enum.Enum):
    """What :meth:`RecordStore.revoke` did to a record."""

    REVOKED = 1  #: it waited; now invalid (-1) with ``noti_revoked_at``
    MISSING = 0  #: no such record
    HELD = 2  #: another sender holds its lease: the record is marked, its next claimer revokes it
    FINAL = 3  #: not waiting any more (done, failed, invalid or revoked before)


#: The code at the start of a revoked record's ``noti_errmsg``.
REVOKED_CODE = "e.cmd.noti.revoked"


@dataclass(frozen=True, slots=True)
class Finish:
    """One send's outcome to record, fenced by the lease ``owner`` that claimed it."""

    record_id: str
    owner: str
    outcome: Outcome
    #: Appended to the dead-letter stream in the same atomic step.
    letter: DeadLetter | None = None
    #: The provider whose answer decided the outcome ("": none answered), for the counters.
    provider: str = ""
    #: Each provider call of the attempt, ``(provider, seconds)``: the latency histogram.
    calls: tuple[tuple[str, float], ...] = ()


class RecordStore:
    """Notification records and their indexes in one Redis database."""

    def __init__(self, client: redis.Redis, keys: Keys, *, replica_wait: ReplicaWait | None = None) -> None:
        self.redis = client
        self.keys = keys
        #: Records created or scheduled are acknowledged only once replicas have them
        #: (``NOTI_REDIS_WAIT_REPLICAS``); None: once the primary has them.
        self.replica_wait = replica_wait
        self._claim = load_script(client, "claim")
        self._finish = load_script(client, "finish")
        self._delete = load_script(client, "delete")
        self.create_script = load_script(client, "create")
        #: The connection ``create_one`` keeps between calls (``notify()`` one at a time).
        self._held = HeldConnection(client)
        #: The ``added`` counter field by (channel, provider named).
        self._added: dict[tuple[Channel, str | None], str] = {}
        self._schedule = load_script(client, "schedule")
        self._cancel = load_script(client, "cancel")
        self._revoke = load_script(client, "revoke")
        self._revive = load_script(client, "revive")
        self._renew = load_script(client, "renew")
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
        keys, args = self.create_call([record], {record.id: message} if message else {}, {}, ttl_ms=0)
        with translate_errors(self.redis):
            self._held.call_script(self.create_script, keys, args)

    def create_call(
        self,
        records: Sequence[Notification],
        messages: Mapping[str, tuple[str, str]],
        idempotency_keys: Mapping[str, str],
        *,
        ttl_ms: int,
    ) -> tuple[list[str], list[Any]]:
        """The keys and arguments of one ``create.lua`` call for records sharing their
        creator, status and queue (see the script); an idempotency key lives ``ttl_ms``."""
        k, first = self.keys, records[0]
        hashes = [to_hash(record) for record in records]
        alone = len(hashes) == 1  # notify(): all its fields are "shared", none its own
        shared = (
            hashes[0].items()
            if alone
            else set(hashes[0].items()).intersection(*(h.items() for h in hashes[1:]))
        )
        keys = [
            k.all_index,
            k.user_index(first.creator),
            k.status_index(int(first.status)),
            k.waiting_index,
            k.delayed,
            messages.get(first.id, (k.all_index, ""))[0],
            k.metrics,
        ]
        args: list[Any] = [int(first.status), len(shared), *itertools.chain.from_iterable(shared)]
        added = self._added
        for record, fields in zip(records, hashes, strict=True):
            record_key = k.record(record.id)
            idempotency_key = idempotency_keys.get(record.id)
            keys += [record_key, idempotency_key or record_key]
            own = () if alone else fields.items() - shared
            label = added.get((record.channel, record.provider))
            if label is None:
                label = added[(record.channel, record.provider)] = added_field(
                    record.channel.value, record.provider
                )
            args += [
                record.id,
                record.created_ms,
                record.level,
                record.lease_until_ms,
                messages.get(record.id, ("", ""))[1],
                ttl_ms if idempotency_key else 0,
                len(own),
                label,
                *itertools.chain.from_iterable(own),
            ]
        return keys, args

    def close(self) -> None:
        """Give back the connection :meth:`create_one` keeps."""
        self._held.close()

    def create_pipeline(self, *, idempotency_ttl_s: float = 0.0, per_call: int = 100) -> CreatePipeline:
        """A :class:`CreatePipeline` on one connection of this store (use it as a context)."""
        return CreatePipeline(self, idempotency_ttl_s=idempotency_ttl_s, per_call=per_call)

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

    def delayed_entries(self, limit: int | None = None) -> list[tuple[Notification, int]]:
        """Records in the delayed set with their due ms, soonest first."""
        with translate_errors(self.redis):
            rows = cast(
                list[tuple[str, float]],
                self.redis.zrange(self.keys.delayed, 0, (limit or 0) - 1, withscores=True),
            )
        records = self.find_many([record_id for record_id, _ in rows])
        return [(r, int(score)) for r, (_, score) in zip(records, rows, strict=True) if r is not None]

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
    ) -> list[bool | str]:
        """Apply the outcomes of many sends in one atomic script call (see :meth:`finish`),
        counting each one applied (:mod:`noti.redis.counters`) in the same step. A sent record
        whose outcome names a delivery status enters it (:mod:`noti.delivery`): an accepted
        one awaits its receipt for ``unknown_after_ms``.

        Returns, per item, whether it was applied (its owner still held the lease); for an
        applied one whose vendor's receipt came before it, that receipt's JSON
        (:meth:`noti.delivery.DeliveryReport.from_json`), for the caller to apply.
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
            args.append(tally)
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
        return [x.decode() if isinstance(x, bytes) else x if isinstance(x, str) else bool(x) for x in applied]

    def waiting_ids(
        self, *, creator: str | None = None, channel: str | None = None, below_level: int | None = None
    ) -> list[str]:
        """Ids of the waiting records (queued or delayed) of ``creator`` and ``channel`` (None:
        any) with a level below ``below_level`` (None: any), in no particular order. The
        waiting index is scanned (``ZSCAN``), so a record that waits through the whole scan is
        found even while workers finish others.

        Raises:
            StoreUnavailable: Redis cannot be reached.
        """
        found: list[str] = []
        cursor = 0
        while True:
            with translate_errors(self.redis):
                cursor, page = self.redis.zscan(self.keys.waiting_index, cursor, count=_PAGE)
                ids = [str(member) for member, _ in page]
                pipe = self.redis.pipeline(transaction=False)
                for record_id in ids:
                    pipe.hmget(self.keys.record(record_id), "noti_c", "noti_type", "noti_lv", "noti_st")
                rows = cast(list[list[str | None]], pipe.execute())
            for record_id, (made_by, kind, level, status) in zip(ids, rows, strict=True):
                if status != "1" or (creator is not None and made_by != creator):
                    continue
                if channel is not None and kind != channel:
                    continue
                if below_level is not None and int(level or 1) >= below_level:
                    continue
                found.append(record_id)
            if cursor == 0:
                return list(dict.fromkeys(found))  # ZSCAN may return a member twice

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
                    ],
                    args=[record_id, record.creator],
                )
            if done == 1:
                return record
            if done == 0:
                return None
        return None  # pragma: no cover - the creator never changes

    # --- reading ----------------------------------------------------------------------------

    def find(self, record_id: str) -> Notification | None:
        """The record, or None."""
        return self.find_many([record_id])[0]

    def get(self, record_id: str) -> Notification:
        """The record.

        Raises:
            NotFound: no record has this id.
        """
        record = self.find(record_id)
        if record is None:
            raise NotFound(f"no notification has the id {shown(record_id)}")
        return record

    def find_many(self, ids: Sequence[str]) -> list[Notification | None]:
        """The records with these ids, None where there is none, in one round trip (a value
        that cannot be an id — not a string, a control character, a lone surrogate — names
        none, without asking Redis)."""
        if not ids:
            return []
        asked = [record_id for record_id in ids if could_be_id(record_id)]
        if not asked:
            return [None] * len(ids)
        with translate_errors(self.redis):
            pipe = self.redis.pipeline(transaction=False)
            for record_id in asked:
                pipe.hgetall(self.keys.record(record_id))
            rows = iter(pipe.execute())
        found = [next(rows) if could_be_id(record_id) else None for record_id in ids]
        return [from_hash(row) if row and "noti_type" in row else None for row in found]

    def iter_index(self, index: str, *, newest_first: bool = True) -> Iterator[str]:
        """Ids of an index, page by page."""
        start = 0
        while True:
            with translate_errors(self.redis):
                if newest_first:
                    page = cast(list[str], self.redis.zrevrange(index, start, start + _PAGE - 1))
                else:
                    page = cast(list[str], self.redis.zrange(index, start, start + _PAGE - 1))
            yield from page
            if len(page) < _PAGE:
                return
            start += _PAGE

    def select(
        self,
        *,
        creator: str | None = None,
        status: Status | None = None,
        limit: int | None = None,
        delivery: str | None = None,
        channel: Channel | None = None,
    ) -> list[Notification]:
        """Records, newest first, optionally of one creator, one status, one delivery status
        and/or one channel (with ``delivery``: latest to enter it first).

        Reads the smallest index that answers the question and stops at ``limit``.
        """
        k = self.keys
        if creator is not None:
            index = k.user_index(creator)
        elif delivery is not None:
            index = k.delivery_index(delivery)
        elif status is not None:
            index = k.status_index(int(status))
        else:
            index = k.all_index
        found: list[Notification] = []
        for page in _pages(self.iter_index(index), _PAGE):
            for record in self.find_many(page):
                if record is None:
                    continue
                if status is not None and record.status != status:
                    continue
                if delivery is not None and record.delivery != delivery:
                    continue
                if channel is not None and record.channel is not channel:
                    continue
                found.append(record)
                if limit is not None and len(found) >= limit:
                    return found
        return found

    def waiting_head(self, count: int) -> list[str]:
        """The first ``count`` waiting ids in send order: highest level, then oldest, first."""
        with translate_errors(self.redis):
            return cast(list[str], self.redis.zrange(self.keys.waiting_index, 0, count - 1))

    def remove_done_before(self, cutoff_ms: int, limit: int | None = None) -> list[Notification]:
        """Delete the records done before ``cutoff_ms`` (at most ``limit``; None or 0 or less:
        all), oldest first; the records removed (the ``clean`` job)."""
        removed: list[Notification] = []
        for record_id in self.done_before(cutoff_ms, limit if limit and limit > 0 else None):
            record = self.delete(record_id)
            if record is not None:
                removed.append(record)
        return removed

    def done_before(self, cutoff_ms: int, limit: int | None = None) -> list[str]:
        """Ids of records done at or before ``cutoff_ms``, oldest first."""
        with translate_errors(self.redis):
            return cast(
                list[str],
                self.redis.zrangebyscore(
                    self.keys.status_index(int(Status.DONE)),
                    "-inf",
                    cutoff_ms,
                    start=0 if limit else None,
                    num=limit or None,
                ),
            )

    def count(self, status: Status | None = None) -> int:
        k = self.keys
        with translate_errors(self.redis):
            return int(self.redis.zcard(k.all_index if status is None else k.status_index(int(status))))


def _pages(ids: Iterable[str], size: int) -> Iterator[list[str]]:
    page: list[str] = []
    for record_id in ids:
        page.append(record_id)
        if len(page) == size:
            yield page
            page = []
    if page:
        yield page


def claim_from_row(row: list[Any]) -> Claim:
    """The claim a ``claim_record.lua`` row describes (``claim.lua``, ``bulk_fetch.lua``)."""
    state = ClaimState(int(row[0]))
    if state is ClaimState.CLAIMED:
        fields = iter(row[1:])
        data = dict(zip(fields, fields, strict=True))
        return Claim(
            state,
            record=from_hash(data),
            claims=int(data.get("_inflight", "1")),
            suppressed=data.get("_suppressed") == "1",
            revoke_requested="noti_revoke_requested" in data,
            unsure=bool(data.get(UNSURE_FIELD)),
        )
    if state in (ClaimState.LEASED, ClaimState.NOT_DUE):
        return Claim(state, until_ms=int(row[1]))
    if state is ClaimState.FINAL:
        return Claim(state, status=Status(int(row[1])))
    return Claim(state)


class CreatePipeline:
    """Batches of records written by ``create.lua`` on one held connection: :meth:`send`
    writes a batch and returns at once, :meth:`ids` reads what the oldest batch not read
    yet stored, so a bulk send prepares its next batch while Redis stores this one.

    Each ``create.lua`` call stores up to ``per_call`` records sharing creator, status and
    queue, atomically, each with its index entries and its delivery message.
    """

    #: Lua's ``unpack`` fails near 8,000 values: a call's index and queue writes stay far below.
    MAX_PER_CALL = 1000

    def __init__(self, store: RecordStore, *, idempotency_ttl_s: float, per_call: int) -> None:
        if not 1 <= per_call <= self.MAX_PER_CALL:
            raise ValueError(f"per_call must be 1 to {self.MAX_PER_CALL}, got {per_call}")
        self._client = store.redis
        self._replica_wait = store.replica_wait
        self._pipeline = ScriptPipeline(store.redis, store.create_script)
        self._store = store
        self._ttl_ms = int(idempotency_ttl_s * 1000)
        self._per_call = per_call

    def __enter__(self) -> CreatePipeline:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._pipeline.close()

    def send(
        self,
        records: Sequence[Notification],
        *,
        messages: Mapping[str, tuple[str, str]] | None = None,
        idempotency_keys: Mapping[str, str] | None = None,
    ) -> None:
        """Write ``records``, each with its delivery message ``(queue list, payload)`` when
        ``messages`` has one for its id. A record with an entry in ``idempotency_keys`` (a
        Redis key, see :meth:`RecordStore.create_many`) is stored only if that key was not
        used within the time-to-live.

        Raises:
            StoreUnavailable: Redis could not be reached.
        """
        messages = messages or {}
        idempotency_keys = idempotency_keys or {}
        calls = [
            self._store.create_call(group, messages, idempotency_keys, ttl_ms=self._ttl_ms)
            for group in _create_groups(records, messages, self._per_call)
        ]
        with translate_errors(self._client):
            self._pipeline.send(calls)

    def ids(self) -> list[str]:
        """Per record of the oldest batch not read yet: its id, or the id of the record its
        idempotency key named (then it was not stored).

        Raises:
            StoreUnavailable: Redis could not be reached (the batches sent may be stored).
        """
        with translate_errors(self._client):
            return [record_id for stored in self._pipeline.results() for record_id in stored]

    def confirm_ahead(self) -> None:
        """After the last :meth:`send`, before its :meth:`ids`: write the wait for the
        replicas behind it when the store asks for one, so :meth:`confirm` costs no round
        trip of its own."""
        if self._replica_wait is not None:
            with translate_errors(self._client):
                self._replica_wait.ask(self._pipeline, self._client)

    def confirm(self) -> None:
        """Once every batch is read: wait until replicas have them, when the store asks for
        it (:class:`~noti.redis.conn.ReplicaWait`).

        Raises:
            StoreUnavailable: ``e.noti.store.unconfirmed``, or Redis could not be reached.
        """
        if self._replica_wait is not None:
            self._replica_wait.confirm(self._pipeline, self._client)


def _create_groups(
    records: Sequence[Notification], messages: Mapping[str, tuple[str, str]], size: int
) -> Iterator[Sequence[Notification]]:
    """``records`` cut into runs of at most ``size`` that share creator, status and the
    queue of their message (one ``create.lua`` call each)."""
    start = 0
    group_of = None
    for i, record in enumerate(records):
        message = messages.get(record.id)
        group = (record.creator, record.status, message[0] if message else None)
        if i - start == size or (i > start and group != group_of):
            yield records[start:i]
            start = i
        group_of = group
    if start < len(records):
        yield records[start:]
