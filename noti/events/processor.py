"""The event processor: one at a time, it drains events strictly in arrival order.

A run takes the liveness lock (or exits at once when another processor holds it), then
repeats: activate the head of the queue, run its listeners in creation order (a failing
listener is recorded and the others still run), mark it done with the return data. After
each event it checks its limits: past ``event_processor_max_runtime_s`` or with its
process's resident memory past ``event_processor_max_memory_mb`` it releases the lock and
queues its successor when events remain (the seed's "se relance avant de s'arrêter").
With nothing left to do it releases the lock in the same atomic step that checks the queue
is empty, so an event dispatched at that moment is never stranded.

A processor that dies leaves its event ``activated`` and its lock to expire; the next one
takes the same event again (``tries`` + 1). Notifications are added with the idempotency
key ``event:<event id>:<listener id>``, so none is created twice; task listeners are called
again with the same ``key``. An event whose processors died ``event_max_tries`` times is
poison: it is marked done (``e.noti.event.poison``) and dead-lettered instead of being taken
again, so it cannot block the queue (see ``activate.lua``).

A listener with a retry policy (``retries``, ``backoff_s``) that fails with retries left
ends the event's step there (``postpone.lua``): the event waits in the back-off set, out of
the arrival queue, so no later event waits for it, and once due goes to the end of the
queue; its next step runs that listener again, then the ones after it. One that gives up
gets its error with its attempts and a dead letter (``outcome.lua``).

A listener runs for its owner's own events, and for another user's only when it opted in to
them (:attr:`Listener.from_users`: that user by name, or ``*``) and its owner may read them
(:meth:`noti.access.users.User.can_touch`: root members and administrators). A root member's
listener without the option hears only that member's events. Other listeners are passed
over, with nothing recorded. What a listener makes for another user's event is capped at the
lesser of the two users' rights (:class:`~noti.events.actions.RunContext` ``level_cap``;
:meth:`~noti.events.actions.CompiledNotify.run`).
"""

from __future__ import annotations

import json
import logging
import os
import resource
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from noti.config import Settings
from noti.core.deadletter import DeadLetter, DeadLetters
from noti.core.record import now_ms
from noti.errors import InvalidInput, NotiError, StoreUnavailable
from noti.events.actions import CompiledTask, RunContext, TaskAction
from noti.events.event import Outcome
from noti.events.listeners import CompiledListener, Listener, ListenerRegistry, hearing, level_cap
from noti.events.liveness import Holder, ProcessorLock
from noti.events.store import Activation, EventStore, LockLost
from noti.events.templates import context

if TYPE_CHECKING:
    from noti.sending.notifier import Notifier

__all__ = ["Limits", "Processor", "RunReport", "StopReason", "resident_memory_mb"]

log = logging.getLogger(__name__)


class Backoff(Exception):
    """A listener failed with retries left: the event's step ends here, and the listener runs
    again after its back-off (internal to the processor)."""

    def __init__(self, listener: Listener, attempts: int, outcome: Outcome) -> None:
        super().__init__(f"listener {listener.name} failed (attempt {attempts})")
        self.listener = listener
        self.attempts = attempts
        self.outcome = outcome


class StopReason(StrEnum):
    """Why a processor run ended."""

    BUSY = "busy"  #: another processor holds the lock: this one exited at once
    IDLE = "idle"  #: no event left
    TIME = "time"  #: ran its time limit; hands over
    MEMORY = "memory"  #: passed its memory limit; hands over
    LOST = "lost"  #: its lock expired or was taken (it stopped without writing more)
    UNAVAILABLE = "unavailable"  #: Redis or the broker failed; the event stays activated
    ERROR = "error"  #: a bug; logged with its traceback


@dataclass(frozen=True, slots=True)
class Limits:
    """When a processor hands over, how long its lock lives without renewal, and how many
    times an event may be activated before it is set aside as poison."""

    max_runtime_s: float = 300.0
    max_memory_mb: float = 256.0
    lock_ttl_s: float = 10.0
    max_tries: int = 3

    @classmethod
    def from_settings(cls, settings: Settings) -> Limits:
        return cls(
            max_runtime_s=settings.event_processor_max_runtime_s,
            max_memory_mb=settings.event_processor_max_memory_mb,
            lock_ttl_s=settings.event_lock_ttl_s,
            max_tries=settings.event_max_tries,
        )


@dataclass(frozen=True, slots=True)
class RunReport:
    """What one processor run did."""

    reason: StopReason
    processed: int
    successor: bool
    processor: str

    def to_json(self) -> dict[str, object]:
        return {
            "reason": self.reason.value,
            "processed": self.processed,
            "successor": self.successor,
            "processor": self.processor,
        }


def resident_memory_mb() -> float:
    """This process's resident memory now (``/proc``), or its peak where ``/proc`` is absent."""
    try:
        with open("/proc/self/statm") as statm:
            pages = int(statm.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Processor:
    """One processor run over an event store and its listeners."""

    def __init__(
        self,
        store: EventStore,
        listeners: ListenerRegistry,
        notifier: Notifier,
        *,
        settings: Settings,
        limits: Limits,
        start_successor: Callable[[], None],
        dead_letters: DeadLetters | None = None,
        task_id: str = "",
        memory_mb: Callable[[], float] = resident_memory_mb,
        keeper: bool = True,
    ) -> None:
        self.store = store
        self.listeners = listeners
        self.notifier = notifier
        self.settings = settings
        self.limits = limits
        self.start_successor = start_successor
        self.dead_letters = dead_letters
        self.holder = Holder.this_process(since_ms=now_ms(), task_id=task_id)
        self._memory_mb = memory_mb
        #: Whether the keeper process (:mod:`noti.events.keeper`) renews the lock too.
        self.keeper = keeper
        #: Events this run has marked done so far.
        self.processed = 0

    def run(self) -> RunReport:
        """Process events until none is left or a limit is reached (see the module doc)."""
        lock = ProcessorLock(
            self.store.redis,
            self.store.keys,
            self.holder,
            ttl_s=self.limits.lock_ttl_s,
            keeper_url=self.settings.redis_url if self.keeper else None,
        )
        name = self.holder.name
        if not lock.acquire():
            log.info("event processor %s: another processor is alive; exiting", name)
            return RunReport(StopReason.BUSY, 0, False, name)
        log.info("event processor %s: started", name)
        started = time.monotonic()
        try:
            reason = self._loop(lock, started)
        except LockLost:
            reason = StopReason.LOST
            self._say_stalled(name)
        except StoreUnavailable as exc:
            # Its lock expires unrenewed; once Redis is back the sweep (the delay pump's worker
            # every 2 s, beat's noti.events.sweep) queues a processor, which takes this event again
            log.warning(
                "event processor %s: Redis or the broker failed (%s); stopping, a new processor "
                "resumes once Redis is back",
                name,
                exc,
            )
            reason = StopReason.UNAVAILABLE
        except Exception:
            log.exception("event processor %s: unexpected error; stopping", name)
            reason = StopReason.ERROR
        finally:
            lock.stop_renewing()
        processed = self.processed
        successor = False
        if reason in (StopReason.TIME, StopReason.MEMORY, StopReason.ERROR):
            successor = self._hand_over(lock, reason)
        elif reason is StopReason.LOST:
            successor = self._restart_if_orphaned(name)
        log.info("event processor %s: stopped (%s) after %d events", name, reason.value, processed)
        return RunReport(reason, processed, successor, name)

    def _hand_over(self, lock: ProcessorLock, reason: StopReason) -> bool:
        """Release the lock; queue a successor if events wait (not after a bug: the sweep or
        the next dispatch will). True when a successor was queued."""
        name = self.holder.name
        try:
            released = lock.release(
                mode="stop" if reason is StopReason.ERROR else "handover",
                reason=reason.value,
                processed=self.processed,
                now_ms=now_ms(),
            )
        except StoreUnavailable:
            log.warning("event processor %s: could not release its lock; it will expire", name)
            return False
        if released != 2 or reason is StopReason.ERROR:
            return False
        try:
            self.start_successor()
        except StoreUnavailable:
            log.warning("event processor %s: could not queue its successor; the sweep will", name)
            try:
                self.store.forget_starting()  # so that the next dispatch queues one at once
            except StoreUnavailable:
                pass
            return False
        return True

    def _restart_if_orphaned(self, name: str) -> bool:
        """After losing the lock: queue a processor if events wait and nobody took over."""
        try:
            if self.store.kick(starting_ttl_ms=int(self.limits.lock_ttl_s * 1000), marker=name):
                self.start_successor()
                return True
        except StoreUnavailable:
            log.warning("event processor %s: could not check for a successor; the sweep will", name)
        return False

    def _loop(self, lock: ProcessorLock, started: float) -> StopReason:
        while True:
            if lock.lost:
                raise LockLost("the processor lock was lost")
            activation = self.store.activate(
                lock.value,
                now_ms=now_ms(),
                processor=self.holder.name,
                max_tries=self.limits.max_tries,
                dead_letter_max_len=self._dead_letter_max_len,
                on_poison=self._poisoned,
            )
            if activation is None:
                released = lock.release(mode="idle", reason="idle", processed=self.processed, now_ms=now_ms())
                if released == 0:
                    continue  # an event arrived between the two steps
                if released < 0:
                    raise LockLost("the processor lock was lost")
                return StopReason.IDLE
            try:
                outcomes = self.run_listeners(activation, fence=lock)
            except Backoff as wait:
                self._postpone(lock, activation, wait)
            else:
                self.store.finish(lock.value, activation.id, outcomes, now_ms=now_ms())
                self.processed += 1
            if time.monotonic() - started >= self.limits.max_runtime_s:
                return StopReason.TIME
            if self._memory_mb() >= self.limits.max_memory_mb:
                return StopReason.MEMORY

    def _say_stalled(self, name: str) -> None:
        """This processor is alive but lost its lock (it stalled past the lock's time-to-live):
        say so, so that the one that took its event over is not counted as replacing a dead
        one (poison is for events whose processors really died)."""
        log.warning(
            "event processor %s: lost its lock while alive (stalled past NOTI_EVENT_LOCK_TTL_S?);"
            " stopping without writing more: the processor that took over goes on",
            name,
        )
        try:
            self.store.mark_stalled(name)
        except StoreUnavailable:
            pass

    def _check(self, fence: ProcessorLock) -> None:
        """Raise :class:`LockLost` unless this processor still holds its lock (asked of Redis)."""
        if fence.lost or not self.store.holds(fence.value):
            raise LockLost("the processor lock was lost")

    @property
    def _dead_letter_max_len(self) -> int:
        return self.dead_letters.max_len if self.dead_letters else 10_000

    def _run_one(
        self,
        ready: CompiledListener,
        run: RunContext,
        values: Mapping[str, Any],
        task: str | None,
        fence: ProcessorLock | None,
    ) -> Outcome:
        """Run one listener (its filter, then, the lock checked, its action): its outcome,
        failures included (a listener's bug must not stop the others).

        Raises:
            StoreUnavailable, LockLost: the step must stop (the event is taken again).
        """
        try:
            if ready.filter is not None and not ready.filter.test(values):
                return Outcome(run.listener_name, task=task, skipped="filter")
            if fence is not None:
                self._check(fence)
            return ready.action.run(run, values, self.notifier)
        except (StoreUnavailable, LockLost):
            raise
        except NotiError as exc:
            return Outcome(run.listener_name, task=task, error_code=exc.code, error_message=exc.message)
        except Exception as exc:  # noqa: BLE001 - a listener's bug must not stop the others
            log.exception("event %s: listener %s failed", run.event_id, run.listener_name)
            code = (
                "e.noti.event.task.failed"
                if isinstance(ready.action, CompiledTask)
                else "e.noti.event.failed"
            )
            return Outcome(
                run.listener_name, task=task, error_code=code, error_message=f"{type(exc).__name__}: {exc}"
            )

    def _apply_policy(
        self, listener: Listener, event: Activation, outcome: Outcome, *, retrying: bool
    ) -> tuple[Outcome, DeadLetter | None]:
        """The listener's retry policy applied to its outcome: the outcome to record (with
        ``attempts`` when it ran more than once) and, when it gave up, its dead letter.

        Raises:
            Backoff: it failed with retries left (only when ``retrying``: a processor's step).
        """
        before = event.attempts.get(listener.id, 0)
        if not outcome.failed or listener.retries == 0:
            return (replace(outcome, attempts=before + 1) if before else outcome), None
        failed = before + 1
        if retrying and failed <= listener.retries:
            raise Backoff(listener, failed, outcome)
        outcome = replace(
            outcome,
            attempts=failed,
            error_message=f"{outcome.error_message} (gave up after {failed} attempts)",
        )
        letter = DeadLetter(
            record_id=event.id,
            type=f"event:{event.name}",
            target=listener.name,
            attempts=failed,
            error_class="exhausted",
            errmsg=f"{outcome.error_code}: listener {listener.name!r}: {outcome.error_message}",
            at_ms=now_ms(),
            source="events",
            payload=json.dumps(dict(event.payload), ensure_ascii=False, separators=(",", ":")),
        )
        return outcome, letter

    def _postpone(self, lock: ProcessorLock, event: Activation, wait: Backoff) -> None:
        """End ``event``'s step: ``wait.listener`` runs again after its back-off."""
        now = now_ms()
        due = now + int(wait.listener.backoff_s * 1000)
        log.info(
            "event %s: listener %s failed (attempt %d of %d); again in %.3g s",
            event.id,
            wait.listener.name,
            wait.attempts,
            wait.listener.retries + 1,
            wait.listener.backoff_s,
        )
        self.store.postpone(
            lock.value,
            event.id,
            wait.listener.id,
            attempts=wait.attempts,
            due_ms=due,
            retry={
                "listener": wait.listener.name,
                "attempts": wait.attempts,
                "retries": wait.listener.retries,
                "due_ms": due,
                "error_code": wait.outcome.error_code,
                "error_message": wait.outcome.error_message,
            },
        )

    def _gave_up(self, letter: DeadLetter) -> None:
        log.error("event %s: listener %s gave up: %s", letter.record_id, letter.target, letter.errmsg)
        if self.dead_letters is not None:
            self.dead_letters.notify_hook(letter)

    def _poisoned(self, letter: DeadLetter) -> None:
        log.error("event %s (%s): set aside as poison: %s", letter.record_id, letter.type, letter.errmsg)
        if self.dead_letters is not None:
            self.dead_letters.notify_hook(letter)

    def listeners_of(self, event: Activation) -> list[tuple[Listener, CompiledListener | InvalidInput]]:
        """The listeners ``event`` runs, in creation order: those matching its name that hear
        its dispatcher (:func:`~noti.events.listeners.hearing`)."""
        matching = self.listeners.matching(event.name, event.listeners_version)
        return hearing(matching, event.user, self.settings)

    @staticmethod
    def _plan(
        event: Activation, matching: list[tuple[Listener, CompiledListener | InvalidInput]]
    ) -> list[Outcome | tuple[Listener, CompiledListener | InvalidInput]]:
        """What to do for each listener: run it, or (an event queued again by a retry) keep
        its outcome from the last step. A retry re-runs the listeners it names (all: every
        one) that still exist, keeps the other outcomes in their order, and runs no listener
        added since; an event with no return data (set aside as poison) runs them all."""
        if event.rerun is None or not event.previous:
            return list(matching)
        by_name = {listener.name: (listener, ready) for listener, ready in matching}
        wanted = set(event.rerun) or {o.listener for o in event.previous}
        plan: list[Outcome | tuple[Listener, CompiledListener | InvalidInput]] = []
        for old in event.previous:
            found = by_name.get(old.listener)
            plan.append(found if found is not None and old.listener in wanted else old)
        return plan

    def run_listeners(self, event: Activation, *, fence: ProcessorLock | None = None) -> list[Outcome]:
        """Run every listener of ``event`` (see :meth:`listeners_of`); one outcome each,
        failures included. A listener whose outcome an earlier processor recorded (``event``
        was taken over) is not run again: its recorded outcome is used.

        With ``fence`` (the processor's lock), the lock is checked before each listener runs
        (so before each notification is made) and each listener's outcome is recorded as
        it happens, by a script that checks the lock too.

        Raises:
            LockLost: the lock was lost; nothing more was run or written.
            StoreUnavailable: Redis or the broker failed; the event must be taken again.
        """
        matching = self.listeners_of(event)
        values = context(
            event.payload, event_id=event.id, name=event.name, user=event.user, created_ms=event.created_ms
        )
        outcomes: list[Outcome] = []
        caps: dict[str, int] = {}  # owner -> the level cap of what their listeners make here
        for item in self._plan(event, matching):
            if isinstance(item, Outcome):  # kept from the event's last step (a retry)
                outcomes.append(item)
                continue
            listener, ready = item
            task = listener.action.task if isinstance(listener.action, TaskAction) else None
            recorded = event.recorded.get(listener.id)
            if recorded is not None:
                outcomes.append(recorded)
                continue
            if isinstance(ready, InvalidInput):
                outcomes.append(
                    Outcome(listener.name, task=task, error_code=ready.code, error_message=ready.message)
                )
                continue
            if listener.user not in caps:
                caps[listener.user] = level_cap(self.settings, listener.user, event.user)
            run = RunContext(
                event_id=event.id,
                name=event.name,
                user=event.user,
                payload=event.payload,
                created_ms=event.created_ms,
                listener_name=listener.name,
                owner=listener.user,
                key=f"event:{event.id}:{listener.id}",
                level_cap=caps[listener.user],
            )
            outcome = self._run_one(ready, run, values, task, fence)
            outcome, letter = self._apply_policy(listener, event, outcome, retrying=fence is not None)
            outcomes.append(outcome)
            if fence is not None:
                self.store.record_outcome(
                    fence.value,
                    event.id,
                    listener.id,
                    outcome,
                    dead_letter=letter,
                    dead_letter_max_len=self._dead_letter_max_len,
                )
                if letter is not None:
                    self._gave_up(letter)
        if event.tries > 1:
            log.info("event %s: resumed (try %d)", event.id, event.tries)
        return outcomes
