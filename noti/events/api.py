"""The events API applications and the CLI call: dispatch, listeners, supervision.

Every call takes the acting ``user`` (default ``NOTI_USER``) and applies :mod:`noti.access.users`:
anyone may dispatch events and add listeners; a listener belongs to its creator, whose
level cap its notifications get; only the owner or a root member may replace or remove
it; non-root users list and read only their own listeners and events. A listener runs for
its owner's own events only, unless its owner opted in to other users' (``from_users``,
which only root members and administrators may give: a listener hears only events its owner
may read); what it makes for another user's event gets the lesser of the two users' rights.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from noti.access.users import User, resolve_user
from noti.core.record import new_id, now_ms
from noti.errors import InvalidInput, NotFound, StoreUnavailable
from noti.events.actions import check_example, parse_action
from noti.events.event import (
    Event,
    EventStatus,
    encode_payload,
    matches,
    validate_event_name,
    validate_pattern,
)
from noti.events.listeners import (
    CompiledListener,
    Listener,
    ListenerRegistry,
    check_from_users,
    parse_from_users,
    retry_policy,
    validate_listener_name,
)
from noti.events.liveness import Holder, read_holder
from noti.events.processor import Limits, Processor
from noti.events.reads import EventCounts
from noti.events.store import POISON_CODE, EventStore
from noti.events.templates import context
from noti.inputs import check_name, finite_number, integer, shown
from noti.sending.runtime import Runtime, get_runtime

__all__ = ["Events", "ProcessorStatus", "events", "queue_processor"]

log = logging.getLogger(__name__)

PROCESS_TASK = "noti.events.process"
#: Longest ``idempotency_key`` :meth:`Events.dispatch` accepts.
IDEMPOTENCY_KEY_MAX = 200
_PUBLISH_RETRY = {"max_retries": 2, "interval_start": 0.1, "interval_step": 0.2, "interval_max": 0.5}


def queue_processor() -> None:
    """Queue one ``noti.events.process`` task on the ``noti.events`` queue.

    Raises:
        StoreUnavailable: the broker cannot be reached.
    """
    from kombu.exceptions import OperationalError

    from noti.celery.app import app
    from noti.celery.queues import EVENTS_QUEUE

    try:
        app.send_task(PROCESS_TASK, queue=EVENTS_QUEUE, routing_key=EVENTS_QUEUE, retry_policy=_PUBLISH_RETRY)
    except OperationalError as exc:
        raise StoreUnavailable(f"cannot queue the event processor: {exc}") from exc


@dataclass(frozen=True, slots=True)
class ProcessorStatus:
    """``noti event status``: is a processor alive, where, since when, and the backlog."""

    holder: Holder | None
    lock_ttl_ms: int
    counts: EventCounts
    #: How the last processor stopped: ``reason``, ``ms``, ``processed``, ``processor``…
    last_stop: Mapping[str, str] = field(default_factory=dict)

    @property
    def alive(self) -> bool:
        return self.holder is not None

    def to_json(self) -> dict[str, Any]:
        h = self.holder
        return {
            "alive": self.alive,
            "processor": h.name if h else None,
            "host": h.host if h else None,
            "pid": h.pid if h else None,
            "since_ms": h.since_ms if h else None,
            "task_id": (h.task_id or None) if h else None,
            "lock_ttl_ms": self.lock_ttl_ms if h else None,
            "backlog": self.counts.queued,
            "new": self.counts.new,
            "activated": self.counts.activated,
            "done": self.counts.done,
            "head": self.counts.head,
            "backoff": self.counts.backoff,
            "last_stop": dict(self.last_stop) or None,
        }


class Events:
    """Events and listeners over one runtime."""

    def __init__(self, runtime: Runtime, *, start_processor: Callable[[], None] = queue_processor) -> None:
        self.runtime = runtime
        self.settings = runtime.settings
        self.store = EventStore(runtime.redis, runtime.keys)
        self.listeners = ListenerRegistry(runtime.redis, runtime.keys)
        self.start_processor = start_processor

    def user(self, name: str | None) -> User:
        return resolve_user(self.settings, name)

    @property
    def _starting_ttl_ms(self) -> int:
        return int(self.settings.event_lock_ttl_s * 1000)

    # --- dispatch -----------------------------------------------------------------------------

    def dispatch(
        self,
        name: str,
        payload: Mapping[str, Any] | None = None,
        *,
        user: str | None = None,
        idempotency_key: str | None = None,
    ) -> str:
        """Store an event and make sure a processor is alive; the event id.

        One Redis round trip when a processor is alive; otherwise one more to queue one.
        With ``idempotency_key``, a second dispatch by the same user with the same key (within
        ``NOTI_IDEMPOTENCY_TTL_S``) stores nothing and returns the first event's id: the
        ``noti.events.dispatch`` task passes its own message id, so a redelivered message
        does not store its event twice.

        Raises:
            InvalidInput: ``e.noti.event.badname``, ``.badpayload``, ``.toolarge``, ``.badkey``;
            nothing stored.
            StoreUnavailable: Redis cannot be reached.
        """
        validate_event_name(name)
        text = encode_payload(payload, max_bytes=self.settings.event_payload_max_bytes)
        if idempotency_key is not None:
            check_name(
                idempotency_key,
                what="idempotency_key",
                code="e.noti.event.badkey",
                max_len=IDEMPOTENCY_KEY_MAX,
            )
        acting = self.user(user)
        created = now_ms()
        _, start, event_id = self.store.dispatch(
            new_id(created),
            name,
            acting.name,
            text,
            created_ms=created,
            starting_ttl_ms=self._starting_ttl_ms,
            idempotency_key=idempotency_key,
            idempotency_ttl_ms=int(self.settings.idempotency_ttl_s * 1000),
        )
        if start:
            self._start(f"event {event_id}")
        return event_id

    def _start(self, why: str) -> None:
        try:
            self.start_processor()
        except StoreUnavailable:
            # The event is stored; the beat sweep (or the next dispatch) starts a processor.
            log.warning("%s: could not queue the event processor; the sweep will", why, exc_info=True)
            self.store.forget_starting()

    def sweep(self) -> bool:
        """Queue a processor if events wait and none is alive or queued; True if queued."""
        if self.store.kick(starting_ttl_ms=self._starting_ttl_ms, marker="sweep"):
            self._start("sweep")
            return True
        return False

    def processor(self, *, task_id: str = "") -> Processor:
        """A processor run over this runtime (the ``noti.events.process`` task runs it)."""
        from noti.celery.process import process_notifier

        return Processor(
            self.store,
            self.listeners,
            process_notifier(),
            settings=self.settings,
            limits=Limits.from_settings(self.settings),
            start_successor=self.start_processor,
            dead_letters=self.runtime.dead_letters,
            task_id=task_id,
        )

    # --- supervision --------------------------------------------------------------------------

    def get(self, event_id: str, *, user: str | None = None) -> Event:
        """One event the acting user may see. Another user's event (for anyone but a root
        member) is answered as a missing one, with the same error and message, so an answer
        tells neither that it exists nor whose it is.

        Raises:
            NotFound: ``e.noti.event.not_found``: no such event, or one the user may not see.
        """
        acting = self.user(user)
        event = self.store.get(event_id)
        if event is None or not acting.can_touch(event.user):
            raise NotFound(f"no event has id {shown(event_id)}", code="e.noti.event.not_found")
        return event

    def select(
        self,
        *,
        user: str | None = None,
        creator: str | None = None,
        status: EventStatus | str | None = None,
        name: str | None = None,
        failed: bool = False,
        limit: int | None = 100,
    ) -> list[Event]:
        """Events newest first; a non-root user sees only their own. With ``failed``, only
        done events with an error (a listener failed, or poison), newest done first.

        Raises:
            InvalidInput: ``e.noti.event.badst``, ``e.noti.listener.badevent`` (name pattern),
            ``e.noti.event.badlimit``.
            PermissionDenied: ``e.noti.event.list.nopvg``.
        """
        creator = self.user(user).scope(creator, code="e.noti.event.list.nopvg", action="list events")
        st: EventStatus | None = None
        if status is not None:
            try:
                st = EventStatus(status)
            except ValueError:
                known = ", ".join(s.value for s in EventStatus)
                raise InvalidInput(
                    f"unknown event status {status!r} (known: {known})", code="e.noti.event.badst"
                ) from None
        if name is not None:
            validate_pattern(name)
        if limit is not None:
            limit = integer(limit, what="limit", code="e.noti.event.badlimit")
        count = limit if limit is not None and limit > 0 else 10**9
        return self.store.select(status=st, user=creator, name=name, failed=bool(failed), limit=count)

    def retry(self, event_id: str, *, listener: str | None = None, user: str | None = None) -> Event:
        """Re-run the failed listeners of a done event (or only ``listener``, one of them) in a
        new step: the event is queued again at the end of the arrival queue, and the processor
        re-runs those listeners in order, keeping the other outcomes. Notifications keep their
        idempotency key (``event:<event id>:<listener id>``), so one a listener already made is
        not made twice. An event set aside as poison runs all its listeners again (after a fix),
        and its dead letter is removed; so are the dead letters of the listeners re-run that
        gave up after their retry policy's attempts. Returns the event as queued again (``new``).

        Raises:
            NotFound: ``e.noti.event.not_found``. PermissionDenied: ``e.noti.event.retry.nopvg``.
            InvalidInput: ``e.noti.event.retry.notdone`` (not done yet),
            ``e.noti.event.retry.nofailure`` (no listener failed), ``e.noti.listener.badname``,
            ``e.noti.event.retry.badlistener`` (no failed listener of that name on the event).
        """
        event = self.store.get(event_id)
        if event is None:
            raise NotFound(f"no event has id {shown(event_id)}", code="e.noti.event.not_found")
        self.user(user).require_access(event.user, code="e.noti.event.retry.nopvg", action="retry events")
        if listener is not None:
            validate_listener_name(listener)
        if event.status is not EventStatus.DONE:
            raise InvalidInput(
                f"event {event.id} is {event.status.value}; only a done event can be retried",
                code="e.noti.event.retry.notdone",
            )
        poison = event.error_code == POISON_CODE
        failed = [o.listener for o in event.outcomes if o.failed]
        if listener is not None:
            if listener not in failed:
                raise InvalidInput(
                    f"event {event.id} has no failed listener {listener!r}"
                    f" (failed: {', '.join(failed) or 'none'})",
                    code="e.noti.event.retry.badlistener",
                )
            rerun = [listener]
        elif failed:
            rerun = failed
        elif poison:
            rerun = []
        else:
            raise InvalidInput(f"no listener of event {event.id} failed", code="e.noti.event.retry.nofailure")
        # the dead letters the re-run replaces, read before the event is queued: a re-run that
        # gives up again at once writes a new one, which must stay
        letters = [
            x.entry_id
            for x in self.runtime.dead_letters.entries()
            if x.record_id == event.id and x.source == "events" and (poison or x.target in rerun)
        ]
        state, start = self.store.requeue(
            event.id, rerun, now_ms=now_ms(), starting_ttl_ms=self._starting_ttl_ms
        )
        if state <= 0:
            raise InvalidInput(
                f"event {event.id} changed meanwhile; try again", code="e.noti.event.retry.notdone"
            )
        if letters:
            self.runtime.dead_letters.remove([x for x in letters if x])
        if start:
            self._start(f"event {event.id} (retry)")
        return self.get(event.id, user=user)

    def status(self) -> ProcessorStatus:
        """Is a processor alive, where, since when; the backlog; how the last one stopped."""
        found = read_holder(self.runtime.redis, self.runtime.keys)
        holder, ttl = found if found else (None, 0)
        return ProcessorStatus(holder, ttl, self.store.counts(), self.store.last_stop())

    def clean_done(self, *, keep_s: float | None = None) -> int:
        """Remove done events older than ``keep_s`` (default ``event_keep_done_s``); how many."""
        keep = self.settings.event_keep_done_s if keep_s is None else keep_s
        keep = finite_number(keep, what="keep (seconds)", code="e.noti.event.clean.badkeep", minimum=0)
        return self.store.clean_done(now_ms() - int(keep * 1000))

    # --- listeners ----------------------------------------------------------------------------

    def add_listener(
        self,
        event: str,
        action: object,
        *,
        name: str | None = None,
        filter: str | None = None,  # noqa: A002 - the issue's word
        user: str | None = None,
        example: Mapping[str, Any] | None = None,
        replace: bool = False,
        retries: object = 0,
        backoff: object = 0,
        from_users: object = None,
    ) -> Listener:
        """Register a listener for events named ``event`` (``*`` matches any characters).

        ``action`` is a Celery task name, ``{"task": NAME}``, or a notification template
        (``{"type": "sms", "target": "{{ customer.phone }}", "text": "Order {{ id }} paid"}``).
        Templates and ``filter`` (a Jinja expression: ``total > 100``) are compiled and
        checked now; with ``example`` (a payload) they are also rendered against it, and the
        notification they would make is validated, so unknown variables and bad targets are
        refused here rather than on the first event. With ``replace``, a listener of the same
        name (yours, or anyone's for root members) is replaced.

        With ``retries`` (0-20), a failure of this listener is not final: the processor runs
        it again up to that many times, ``backoff`` seconds (0-86400) after each failure, in a
        new step of the event queued at the end of the arrival queue; the event is done once
        the listener succeeded or gave up (see docs/events.md, *Listener retries*).

        A listener runs for its owner's own events only. With ``from_users`` (user names, or
        ``["*"]`` for everyone; a string is read as comma-separated names) it also runs for
        the events those users dispatch, which its owner must be allowed to read: only root
        members and administrators may name other users. What it makes for another user's
        event is capped at the lesser of the two users' levels and rights (see
        docs/howto/events.md, *Whose events a listener hears*).

        Raises:
            InvalidInput: ``e.noti.listener.*`` (badevent, badname, badaction, badtemplate,
            unsafe, badfilter, notask, undefined, exists, toolarge, badretries, badbackoff,
            badfrom, …) and the notification's own ``e.cmd.noti.add.*`` codes.
            PermissionDenied: ``e.noti.listener.replace.nopvg``, ``e.noti.listener.from.nopvg``.
        """
        acting = self.user(user)
        validate_pattern(event)
        count, backoff_s = retry_policy(retries, backoff)
        hears = check_from_users(acting, parse_from_users(from_users))
        created = now_ms()
        listener_id = new_id(created)
        listener_name = validate_listener_name(name if name is not None else listener_id)
        listener = Listener(
            listener_id,
            listener_name,
            event,
            acting.name,
            parse_action(action),
            filter,
            created,
            retries=count,
            backoff_s=backoff_s,
            from_users=hears,
        )
        compiled = CompiledListener.build(listener)
        if example is not None:
            self._check_example(compiled, example, acting)
        found = self.listeners.get(listener_name)
        if found is not None:
            existing, _ = found
            if not replace:
                raise InvalidInput(
                    f"a listener called {listener_name!r} exists already (remove it, or replace it)",
                    code="e.noti.listener.exists",
                )
            acting.require_access(
                existing.user,
                code="e.noti.listener.replace.nopvg",
                action=f"replace the listener {listener_name!r}",
            )
        if not self.listeners.put(listener, expected=found[1] if found else ""):
            raise InvalidInput(
                f"the listener {listener_name!r} was changed meanwhile; try again",
                code="e.noti.listener.exists",
            )
        return listener

    def _check_example(self, compiled: CompiledListener, example: Mapping[str, Any], acting: User) -> None:
        from noti.celery.process import process_notifier

        encode_payload(example, max_bytes=self.settings.event_payload_max_bytes)
        values = context(example, event_id="example", name="example", user=acting.name, created_ms=now_ms())
        if compiled.filter is not None:
            compiled.filter.test(values, prefix="e.noti.listener")
        check_example(compiled.action, values, process_notifier(), acting.name)

    def remove_listener(self, name: str, *, user: str | None = None) -> Listener:
        """Remove a listener: its owner or a root member may.

        Raises:
            NotFound: ``e.noti.listener.not_found``. PermissionDenied: ``e.noti.listener.del.nopvg``.
        """
        listener, text = self.listeners.require(name)
        self.user(user).require_access(
            listener.user, code="e.noti.listener.del.nopvg", action=f"remove the listener {name!r}"
        )
        if not self.listeners.delete(name, expected=text):
            raise NotFound(
                f"the listener {name!r} was changed or removed meanwhile", code="e.noti.listener.not_found"
            )
        return listener

    def list_listeners(self, *, user: str | None = None, event: str | None = None) -> list[Listener]:
        """Listeners in the order they run; a non-root user sees only their own. With
        ``event`` (an event name), only those whose pattern matches it (of these, an event
        runs its dispatcher's own and those that opted in to the dispatcher's events:
        :func:`~noti.events.listeners.hearing`)."""
        acting = self.user(user)
        listeners = self.listeners.all()
        if not acting.is_root:
            listeners = [x for x in listeners if x.user == acting.name]
        if event is not None:
            listeners = [x for x in listeners if matches(x.event, event)]
        return listeners


_lock = threading.Lock()
_by_runtime: weakref.WeakKeyDictionary[Runtime, Events] = weakref.WeakKeyDictionary()


def events() -> Events:
    """The :class:`Events` of this process's runtime."""
    runtime = get_runtime()
    with _lock:
        found = _by_runtime.get(runtime)
        if found is None:
            found = _by_runtime[runtime] = Events(runtime)
        return found
