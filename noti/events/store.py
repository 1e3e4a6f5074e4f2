"""Events in Redis: dispatch, activate, finish and clean, each one atomic step; reading them
is :mod:`noti.events.reads`'s (:class:`EventStore` extends its reader).

The arrival order is the list ``noti:events:queue``: ``dispatch.lua`` appends to it (and
numbers the event with ``seq``) in the same step that tells whether a processor must be
queued, so a dispatch is one round trip. The processor only ever works on the head of that
list (``activate.lua``) and removes it when the event is done (``finish.lua``); both
check the caller still holds the processor lock, so a processor that lost it writes
nothing. ``activate.lua`` also sets aside, as poison, an event that was activated
``event_max_tries`` times without finishing. Key names come from :mod:`noti.core.keys`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import redis

from noti.core.deadletter import DeadLetter
from noti.core.keys import Keys
from noti.core.record import now_ms as clock_ms
from noti.events.event import POISON_CODE, EventStatus, Outcome, summarize
from noti.events.reads import EventReader
from noti.redis.conn import load_script
from noti.redis.outage import translate_errors

__all__ = ["POISON_CODE", "Activation", "EventStore"]

#: The event hash field prefix of a listener outcome recorded as it happened (+ listener id).
OUTCOME_FIELD = "o:"
#: The event hash field prefix of a listener's failed attempts in its retry policy (+ id).
ATTEMPTS_FIELD = "a:"
#: How long a stall marker is kept (ms).
_STALL_KEEP_MS = 86_400_000
_CLEAN_BATCH = 500


@dataclass(frozen=True, slots=True)
class Activation:
    """The event a processor just activated."""

    id: str
    name: str
    user: str
    payload: dict[str, Any]
    created_ms: int
    seq: int
    tries: int
    #: The listeners' version read in the same step (see :mod:`noti.events.listeners`).
    listeners_version: str
    #: Outcomes recorded by earlier processors of this event (taken over after a death or a
    #: stall), by listener id: those listeners are not run again.
    recorded: Mapping[str, Outcome] = field(default_factory=dict)
    #: Set when the event was queued again (:meth:`EventStore.requeue`): the names of the
    #: listeners to re-run (empty: every listener); the others keep their ``previous`` outcome.
    rerun: tuple[str, ...] | None = None
    #: The return data of the event's last step (when ``rerun`` is set).
    previous: tuple[Outcome, ...] = ()
    #: Failed attempts so far of the listeners whose retry policy runs them again, by id.
    attempts: Mapping[str, int] = field(default_factory=dict)


class LockLost(Exception):
    """The processor lock is not the caller's any more (internal to :mod:`noti.events`)."""


class EventStore(EventReader):
    """The events of one key prefix, read (:class:`~noti.events.reads.EventReader`) and moved
    through the processor's steps."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        super().__init__(client, keys)
        scripts = {n: load_script(client, n, package="noti.events") for n in _SCRIPTS}
        self._dispatch, self._kick, self._activate = scripts["dispatch"], scripts["kick"], scripts["activate"]
        self._finish, self._clean, self._outcome = scripts["finish"], scripts["clean"], scripts["outcome"]
        self._retry, self._postpone = scripts["retry"], scripts["postpone"]

    # --- writing ----------------------------------------------------------------------------

    def idempotency_key(self, user: str, key: str) -> str:
        """The key remembering which event ``user`` dispatched with idempotency key ``key``."""
        return self.keys.event(f"idem:{user}:{key}")

    def dispatch(
        self,
        event_id: str,
        name: str,
        user: str,
        payload: str,
        *,
        created_ms: int,
        starting_ttl_ms: int,
        idempotency_key: str | None = None,
        idempotency_ttl_ms: int = 0,
    ) -> tuple[int, bool, str]:
        """Store a new event; its ``seq``, whether the caller must queue a processor, and its id.

        With ``idempotency_key``, an event ``user`` dispatched with the same key in the last
        ``idempotency_ttl_ms`` is not stored again: the answer is ``(0, start, its id)``.
        """
        k = self.keys
        idem = self.idempotency_key(user, idempotency_key) if idempotency_key is not None else ""
        with translate_errors(self.redis):
            seq, start, stored_id = self._dispatch(
                keys=[
                    k.event(event_id),
                    k.event_seq,
                    k.event_queue,
                    k.event_index,
                    k.event_status_index(EventStatus.NEW),
                    k.event_user_index(user),
                    k.event_lock,
                    k.event_starting,
                    idem or k.event(event_id),
                    k.metrics,
                ],
                args=[
                    event_id,
                    name,
                    user,
                    payload,
                    created_ms,
                    starting_ttl_ms,
                    max(int(idempotency_ttl_ms), 1) if idem else "",
                ],
            )
        return int(seq), bool(int(start)), str(stored_id)

    def kick(self, *, starting_ttl_ms: int, marker: str) -> bool:
        """True when events wait and no processor is alive or queued: the caller queues one."""
        k = self.keys
        with translate_errors(self.redis):
            start = self._kick(
                keys=[k.event_queue, k.event_lock, k.event_starting, k.event_backoff],
                args=[starting_ttl_ms, marker, clock_ms()],
            )
        return bool(int(start))

    def forget_starting(self) -> None:
        """Drop the starting marker (queueing the processor failed: let the next call retry)."""
        with translate_errors(self.redis):
            self.redis.delete(self.keys.event_starting)

    def activate(
        self,
        lock_value: str,
        *,
        now_ms: int,
        processor: str,
        max_tries: int = 0,
        dead_letter_max_len: int = 10_000,
        on_poison: Callable[[DeadLetter], object] | None = None,
    ) -> Activation | None:
        """Activate the head of the queue; None when the queue is empty.

        With ``max_tries`` (> 0), an event activated that many times already without
        finishing (each of its processors died) is not activated again: it is marked done
        with :data:`POISON_CODE`, its dead letter is appended to the dead-letter stream in the
        same step, ``on_poison`` is called with that letter, and the next event is taken.

        Raises:
            LockLost: the caller does not hold the processor lock.
        """
        k = self.keys
        with translate_errors(self.redis):
            row = self._activate(
                keys=[
                    k.event_lock,
                    k.event_queue,
                    k.event_status_index(EventStatus.NEW),
                    k.event_status_index(EventStatus.ACTIVATED),
                    k.listeners_version,
                    k.event_status_index(EventStatus.DONE),
                    k.dead_letters,
                    k.metrics,
                    k.event_backoff,
                ],
                args=[
                    lock_value,
                    now_ms,
                    processor,
                    k.event(""),
                    max(int(max_tries), 0),
                    dead_letter_max_len,
                    POISON_CODE,
                    k.event_stalled(""),
                ],
            )
        state = int(row[0])
        if state < 0:
            raise LockLost("the processor lock was lost")
        for poisoned_id, name, tries, payload, message in row[1]:
            letter = DeadLetter(
                record_id=poisoned_id,
                type=f"event:{name}",
                target="",
                attempts=int(tries),
                error_class="poison",
                errmsg=f"{POISON_CODE}: {message}",
                at_ms=now_ms,
                source="events",
                payload=payload,
            )
            if on_poison is not None:
                on_poison(letter)
        if state == 0:
            return None
        event_id, name, user, payload, created, seq, tries, version, flat, rerun, previous = row[2:13]
        pairs = [(flat[i], flat[i + 1]) for i in range(0, len(flat), 2)]
        recorded = {
            f[len(OUTCOME_FIELD) :]: Outcome.from_json(json.loads(v))
            for f, v in pairs
            if f.startswith(OUTCOME_FIELD)
        }
        attempts = {f[len(ATTEMPTS_FIELD) :]: int(v) for f, v in pairs if f.startswith(ATTEMPTS_FIELD)}
        return Activation(
            id=event_id,
            name=name,
            user=user,
            payload=json.loads(payload) if payload else {},
            created_ms=int(created),
            seq=int(seq),
            tries=int(tries),
            listeners_version=version,
            recorded=recorded,
            rerun=tuple(json.loads(rerun)) if rerun else None,
            previous=tuple(Outcome.from_json(o) for o in json.loads(previous)) if rerun and previous else (),
            attempts=attempts,
        )

    def requeue(
        self, event_id: str, rerun: Sequence[str], *, now_ms: int, starting_ttl_ms: int
    ) -> tuple[int, bool]:
        """Queue a done event again at the end of the arrival queue to re-run the listeners
        ``rerun`` (names; empty: all) (``retry.lua``): ``(1, start)`` when queued, where
        ``start`` says the caller must queue a processor; ``(0, False)`` when it is not done,
        ``(-1, False)`` when it is gone."""
        k = self.keys
        with translate_errors(self.redis):
            state, start = self._retry(
                keys=[
                    k.event(event_id),
                    k.event_queue,
                    k.event_status_index(EventStatus.NEW),
                    k.event_status_index(EventStatus.DONE),
                    k.event_lock,
                    k.event_starting,
                ],
                args=[event_id, json.dumps(list(rerun)), now_ms, starting_ttl_ms],
            )
        return int(state), bool(int(start))

    def holds(self, lock_value: str) -> bool:
        """Does the caller still hold the processor lock? (A processor asks before each
        listener: one that lost its lock runs no more listeners and makes no notification.)"""
        with translate_errors(self.redis):
            return cast(str | None, self.redis.get(self.keys.event_lock)) == lock_value

    def record_outcome(
        self,
        lock_value: str,
        event_id: str,
        listener_id: str,
        outcome: Outcome,
        *,
        dead_letter: DeadLetter | None = None,
        dead_letter_max_len: int = 10_000,
    ) -> None:
        """Record one listener's outcome on an activated event (``outcome.lua``), so that a
        processor taking the event over does not run that listener again; with
        ``dead_letter`` (a listener that gave up after its retries), append it in the same step.

        Raises:
            LockLost: the caller does not hold the processor lock (nothing was written).
        """
        text = json.dumps(outcome.to_json(), ensure_ascii=False, separators=(",", ":"))
        letter: list[str] = [""]
        if dead_letter is not None:
            letter = [str(dead_letter_max_len)]
            for name, value in dead_letter.fields().items():
                letter += [name, value]
        with translate_errors(self.redis):
            done = int(
                self._outcome(
                    keys=[self.keys.event_lock, self.keys.event(event_id), self.keys.dead_letters],
                    args=[lock_value, OUTCOME_FIELD + listener_id, text, *letter],
                )
            )
        if done < 0:
            raise LockLost("the processor lock was lost")

    def postpone(
        self,
        lock_value: str,
        event_id: str,
        listener_id: str,
        *,
        attempts: int,
        due_ms: int,
        retry: Mapping[str, Any],
    ) -> bool:
        """End an event's step because listener ``listener_id`` failed its ``attempts``-th time
        and its retry policy runs it again at ``due_ms`` (``postpone.lua``): the event waits,
        ``new``, in the back-off set, then goes to the end of the arrival queue. False when
        it was not activated.

        Raises:
            LockLost: the caller does not hold the processor lock (nothing was written).
        """
        k = self.keys
        text = json.dumps(dict(retry), ensure_ascii=False, separators=(",", ":"))
        with translate_errors(self.redis):
            done = int(
                self._postpone(
                    keys=[
                        k.event_lock,
                        k.event(event_id),
                        k.event_queue,
                        k.event_status_index(EventStatus.ACTIVATED),
                        k.event_status_index(EventStatus.NEW),
                        k.event_backoff,
                    ],
                    args=[lock_value, event_id, ATTEMPTS_FIELD + listener_id, attempts, due_ms, text],
                )
            )
        if done < 0:
            raise LockLost("the processor lock was lost")
        return done == 1

    def mark_stalled(self, processor: str) -> None:
        """Say that ``processor`` lost its lock while alive, so that the processor which took
        its event over is not counted as replacing a dead one (see ``activate.lua``)."""
        with translate_errors(self.redis):
            self.redis.set(self.keys.event_stalled(processor), 1, px=_STALL_KEEP_MS)

    def finish(self, lock_value: str, event_id: str, outcomes: list[Outcome], *, now_ms: int) -> bool:
        """Mark an activated event done with its return data; False if it was not activated.
        The outcomes recorded one by one (:meth:`record_outcome`) are dropped.

        Raises:
            LockLost: the caller does not hold the processor lock (nothing was written).
        """
        k = self.keys
        code, message = summarize(outcomes)
        result = json.dumps([o.to_json() for o in outcomes], ensure_ascii=False, separators=(",", ":"))
        with translate_errors(self.redis):
            done = int(
                self._finish(
                    keys=[
                        k.event_lock,
                        k.event_queue,
                        k.event_status_index(EventStatus.ACTIVATED),
                        k.event_status_index(EventStatus.DONE),
                        k.event(event_id),
                        k.metrics,
                    ],
                    args=[lock_value, event_id, now_ms, result, code, message],
                )
            )
        if done < 0:
            raise LockLost("the processor lock was lost")
        return done == 1

    def clean_done(self, before_ms: int, *, limit: int | None = None) -> int:
        """Remove done events finished before ``before_ms``; how many."""
        k = self.keys
        removed = 0
        while limit is None or removed < limit:
            batch = _CLEAN_BATCH if limit is None else min(_CLEAN_BATCH, limit - removed)
            with translate_errors(self.redis):
                count = int(
                    self._clean(
                        keys=[k.event_status_index(EventStatus.DONE), k.event_index],
                        args=[before_ms, batch, k.event(""), k.event_user_index("")],
                    )
                )
            removed += count
            if count < batch:
                break
        return removed


_SCRIPTS = ("dispatch", "kick", "activate", "finish", "clean", "outcome", "retry", "postpone")
