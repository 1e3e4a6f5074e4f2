"""What Celery's own tools see of each notification a batch worker delivers.

Batch mode runs no Celery ``Request`` per message (that is where its speed comes from), so
the batcher tells Celery's tools itself, per notification, what a Request would have told
them, under the task id of the message (the record id: :mod:`noti.celery.publish`):

- the worker's request registry (``celery.worker.state``): a message is *reserved* when it
  is received and *active* while its record is being sent, so ``celery inspect active`` /
  ``reserved`` / ``query_task``, ``inspect stats`` and Flower's Active column are true;
- task events for Flower: ``task-received`` and ``task-started`` when the record is claimed
  for sending, then exactly one of ``task-succeeded`` (delivered; the result names the
  provider and its message id), ``task-failed`` (noti's exception with its code: a
  permanent failure, retries exhausted, a provider misconfigured), ``task-retried`` (why,
  and when the next attempt is due; that attempt is received again under the same id) or
  ``task-revoked``. A message whose record is not this worker's to send (a duplicate, one
  another worker holds, one already final) sends none, so Flower's Processed counts the
  attempts the record store counts. Events are written as JSON when they happen and
  published in bulk (``task.multi``) by the batcher's timer (:mod:`noti.celery.taskevents`);
- Celery's task signals (``task_prerun``, ``task_success``, ``task_failure``,
  ``task_retry``, ``task_revoked``, ``task_postrun``), sent by the task, with the task's
  request context pushed, exactly as the task-mode path sends them. Whether anyone listens
  is checked once per batch: with no receiver connected they cost nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Sequence
from typing import Any

from billiard.einfo import ExceptionInfo
from celery import signals, states
from celery.app.task import Context
from celery.worker import state as worker_state

from noti.celery.taskevents import TaskEvents
from noti.core.attempt import Outcome
from noti.core.record import Status
from noti.core.retry import outcome_error
from noti.errors import NotiError

__all__ = ["DeliveryReport", "HeldRequest", "delivery_result"]


def delivery_result(record_id: str, outcome: Outcome) -> dict[str, str]:
    """A delivered notification's task result: its id, the provider that took it, the
    provider's message id (``""`` when the provider returns none) and its delivery status
    then (``accepted``: a receipt is awaited; ``delivered``: the answer was the delivery)."""
    fields = dict(outcome.fields)
    msgid = next((value for name, value in outcome.fields if name.endswith("msgid")), "")
    return {
        "id": record_id,
        "provider": fields.get("noti_sent_by", ""),
        "msgid": msgid,
        "delivery": fields.get("noti_dlv", ""),
    }


class HeldRequest:
    """A message a batch worker holds, as Celery's worker reads a Request in its registry:
    ``celery inspect`` and ``revoke``, and the consumer when the broker connection is lost
    (``acknowledged``, ``cancel``, ``eventer``) or the worker shuts down."""

    __slots__ = (
        "__weakref__",
        "id",
        "record_id",
        "message",
        "received",
        "time_start",
        "report",
        "eventer",
        "context",
    )

    def __init__(self, task_id: str, record_id: str, message: Any, received: float, report: DeliveryReport):
        self.id = task_id
        self.record_id = record_id
        self.message = message
        #: ``time.monotonic()`` when the message was received.
        self.received = received
        #: ``time.time()`` when its send started (None while only reserved).
        self.time_start: float | None = None
        self.report = report
        #: Celery's consumer hands each registered request its new event dispatcher after a
        #: reconnect; the batch worker reports through its own (:class:`DeliveryReport`).
        self.eventer: Any = None
        #: Its task's request context for signal receivers, once made.
        self.context: Context | None = None

    @property
    def acknowledged(self) -> bool:
        """Whether the message has been acked (or rejected) already."""
        return bool(self.message.acknowledged)

    @property
    def name(self) -> str:
        return self.report.task.name  # type: ignore[no-any-return]

    @property
    def task(self) -> Any:
        """The task (``revoke`` reads its result backend)."""
        return self.report.task

    def info(self, safe: bool = False) -> dict[str, Any]:
        headers = self.message.headers
        return {
            "id": self.id,
            "name": self.name,
            "args": headers.get("argsrepr") if safe else [self.record_id],
            "kwargs": headers.get("kwargsrepr") if safe else {},
            "type": self.name,
            "hostname": self.report.hostname,
            "time_start": self.time_start,
            "acknowledged": self.message.acknowledged,
            "delivery_info": self.message.delivery_info,
            "worker_pid": os.getpid(),
        }

    def terminate(self, pool: Any, signal: Any = None) -> None:
        """A send in progress cannot be cut short (a provider may already have it); its
        record was revoked before the send if the revoke came in time."""

    def cancel(self, pool: Any, signal: Any = None, emit_retry: bool = True) -> None:
        """Celery cancels the unacked late-ack requests in progress when the broker connection
        is lost (``worker_cancel_long_running_tasks_on_connection_loss``) and at a cold
        shutdown, so that the broker delivers them again. A send in progress is not cut
        short: it finishes and records its outcome; its message, which cannot be acked on the
        lost connection, comes back after the visibility timeout and finds the record final."""

    def humaninfo(self) -> str:
        return f"{self.name}[{self.id}]"


class DeliveryReport:
    """Tells the worker's registry, Flower (events) and signal receivers about the batch
    worker's notifications (see the module)."""

    def __init__(self, task: Any, consumer: Any, events: TaskEvents | None = None) -> None:
        self.task = task
        self.hostname = consumer.hostname
        #: The batch worker's task events (whoever publishes them passes them: the batcher).
        self.events = events
        #: The consumer's event dispatcher (None: the worker has none).
        self._eventer = consumer.event_dispatcher

    def _events_on(self) -> TaskEvents | None:
        """The task events, when they are sent now (remote control may switch them)."""
        events = self.events
        return events if events is not None and events.on else None

    def reserved(self, held: HeldRequest) -> None:
        """``held`` was received: ``inspect reserved`` lists it (unless this worker holds a
        message of the same task id already: a duplicate never takes over its entry)."""
        if held.id not in worker_state.requests:
            worker_state.task_reserved(held)

    def started(self, batch: Sequence[tuple[HeldRequest, int]]) -> None:
        """The records of ``batch`` (each with the attempts already made) are being sent."""
        now = time.time()
        events = self._events_on()
        name = self.task.name
        for held, retries in batch:
            held.time_start = now
            worker_state.task_accepted(held)
            if events is not None:
                headers = held.message.headers
                events.started(
                    now,
                    held.id,
                    name,
                    headers.get("argsrepr") or repr([held.record_id]),
                    headers.get("kwargsrepr") or "{}",
                    headers.get("root_id") or held.id,
                    headers.get("parent_id"),
                    retries,
                )
        if signals.task_prerun.receivers:
            for held, retries in batch:
                with self._context(held, retries):
                    signals.task_prerun.send(
                        sender=self.task, task_id=held.id, task=self.task, args=[held.record_id], kwargs={}
                    )

    def concluded(self, held: HeldRequest, outcome: Outcome | None, retries: int) -> None:
        """``held``'s send ended with ``outcome`` (None: nothing was sent, the record was
        not this worker's to send). Its message is acked."""
        if outcome is None:
            self._release(held)
            return
        worker_state.task_ready(held, successful=outcome.status is Status.DONE)
        runtime = time.monotonic() - held.received
        events = self._events_on()
        if outcome.status is Status.DONE:
            result = delivery_result(held.record_id, outcome)
            if events is not None:
                events.succeeded(time.time(), held.id, json.dumps(result), runtime)
            if signals.task_success.receivers:
                with self._context(held, retries):  # one push for both, as a task's run is one
                    signals.task_success.send(sender=self.task, result=result)
                    self._postrun(held, retries, result, states.SUCCESS, pushed=True)
                return
            self._postrun(held, retries, result, states.SUCCESS)
            return
        error = outcome_error(outcome)
        if outcome.status is Status.WAITING:
            due = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(outcome.not_before_ms / 1000))
            reason = f"{error!r}; next attempt at {due}"
            if events is not None:
                events.add(
                    "task-retried", time.time(), (("uuid", held.id), ("exception", reason), ("traceback", ""))
                )
            if signals.task_retry.receivers:
                with self._context(held, retries) as request:  # one push with postrun's
                    signals.task_retry.send(sender=self.task, request=request, reason=reason, einfo=None)
                    self._postrun(held, retries, reason, states.RETRY, pushed=True)
                return
            self._postrun(held, retries, reason, states.RETRY)
            return
        if events is not None:
            events.add(
                "task-failed", time.time(), (("uuid", held.id), ("exception", repr(error)), ("traceback", ""))
            )
        if signals.task_failure.receivers:
            try:  # receivers (error trackers) read the traceback of einfo
                raise error
            except NotiError:
                einfo = ExceptionInfo()
            with self._context(held, retries):  # one push with postrun's
                signals.task_failure.send(
                    sender=self.task,
                    task_id=held.id,
                    exception=error,
                    args=[held.record_id],
                    kwargs={},
                    traceback=einfo.traceback,
                    einfo=einfo,
                )
                self._postrun(held, retries, error, states.FAILURE, pushed=True)
            return
        self._postrun(held, retries, error, states.FAILURE)

    def revoked(self, held: HeldRequest, retries: int) -> None:
        """``held``'s record was revoked before its send: nothing was sent."""
        worker_state.task_ready(held)
        self._announce_revoked(held.id, held.record_id, self._context(held, retries))

    def revoked_waiting(self, record_id: str) -> None:
        """A waiting record was revoked when Celery's revoke came: no message of it is held
        here (:mod:`noti.celery.control`)."""
        request = {"id": record_id, "args": [record_id], "kwargs": {}, "hostname": self.hostname}
        self._announce_revoked(record_id, record_id, _PushedRequest(self.task, self._new_context(request)))

    def _announce_revoked(self, task_id: str, record_id: str, pushed: _PushedRequest) -> None:
        """``task-revoked`` and ``task_revoked`` (with ``pushed``, the task's request), as
        Celery announces a task revoked before it ran (no prerun, so no postrun either)."""
        # through Celery's dispatcher (rare, and sent without a batcher too): the one the
        # task events are bound to now, after a consumer restart too
        eventer = self.events.dispatcher if self.events is not None else self._eventer
        if eventer is not None and self.task.send_events:
            eventer.send(  # before any task-received: say what it would have said
                "task-revoked",
                uuid=task_id,
                name=self.task.name,
                args=repr([record_id]),
                kwargs="{}",
                terminated=False,
                signum=None,
                expired=False,
            )
        if signals.task_revoked.receivers:
            with pushed as request:
                signals.task_revoked.send(
                    sender=self.task, request=request, terminated=False, signum=None, expired=False
                )

    @staticmethod
    def _release(held: HeldRequest) -> None:
        """Forget ``held`` without an outcome. The registry is keyed by task id, and a
        duplicate of a message this worker is sending (a redelivery, a sweep) has the same id:
        only ``held``'s own entries go, never the one being sent."""
        if worker_state.requests.get(held.id) is held:
            del worker_state.requests[held.id]
        worker_state.reserved_requests.discard(held)
        worker_state.active_requests.discard(held)

    def _postrun(
        self, held: HeldRequest, retries: int, retval: Any, state: str, *, pushed: bool = False
    ) -> None:
        """``task_postrun`` for ``held`` (``pushed``: its request context is pushed already)."""
        if not signals.task_postrun.receivers:
            return
        with contextlib.nullcontext() if pushed else self._context(held, retries):
            signals.task_postrun.send(
                sender=self.task,
                task_id=held.id,
                task=self.task,
                args=[held.record_id],
                kwargs={},
                retval=retval,
                state=state,
            )

    def _context(self, held: HeldRequest, retries: int) -> _PushedRequest:
        """``held``'s request context, made once and pushed for each of its signals: the
        receivers of its prerun and of its outcome see one request, as in a task's run."""
        context = held.context
        if context is None:
            context = held.context = self._new_context(self._request(held, retries))
        return _PushedRequest(self.task, context)

    def _new_context(self, request: dict[str, Any]) -> Context:
        """``request`` as ``Task.push_request`` makes a context of it: over the request in
        place (none here: the task's default)."""
        return _context_of({**self.task.request.__dict__, **request, "is_eager": False})

    def _request(self, held: HeldRequest, retries: int) -> dict[str, Any]:
        """The request context of ``held``'s task, as a Celery request would set it."""
        headers = held.message.headers
        return {
            "id": held.id,
            "args": [held.record_id],
            "kwargs": {},
            "retries": retries,
            "root_id": headers.get("root_id") or held.id,
            "parent_id": headers.get("parent_id"),
            "hostname": self.hostname,
            "delivery_info": held.message.delivery_info,
        }


class _PushedRequest:
    """The task's request context while a signal is sent (receivers read ``sender.request``,
    as they do in task mode)."""

    __slots__ = ("task", "request")

    def __init__(self, task: Any, request: Context) -> None:
        self.task, self.request = task, request

    def __enter__(self) -> Context:
        self.task.request_stack.push(self.request)  # what Task.push_request pushes
        return self.request

    def __exit__(self, *exc: object) -> None:
        self.task.pop_request()


#: The fields Celery's ``Context`` does not count as custom headers (its own attributes and
#: the protocol's; ``Context._get_custom_headers``).
_CONTEXT_FIELDS = frozenset({*Context.__dict__, "lang", "task", "argsrepr", "kwargsrepr", "compression"})


def _context_of(fields: dict[str, Any]) -> Context:
    """``Context(**fields)``. When no field is a custom header (always, for the requests made
    here) the context is filled directly: ``Context.__init__`` would build and search a set of
    its ~60 attribute names to find that out, the costliest part of a notification's signals."""
    if not _CONTEXT_FIELDS.issuperset(fields):
        return Context(**fields)
    context = Context.__new__(Context)
    context.__dict__.update(fields)
    context.__dict__.setdefault("headers", None)  # what __init__ finds: no custom header
    return context
