"""Event tasks, all on the ``noti.events`` queue: the processor, its beat sweep, the clean job
(both housekeeping: no task events, :mod:`noti.celery.beat`), and
``noti.events.dispatch`` for applications that only know task names::

    celery_app.send_task("noti.events.dispatch", queue="noti.events",
                         kwargs={"name": "order.paid", "payload": {"id": 42}})
"""

from __future__ import annotations

import logging
from typing import Any

from celery import Task

from noti.celery.app import app
from noti.celery.tasks.calls import bind_call
from noti.errors import InvalidInput
from noti.events import events

__all__ = ["clean", "dispatch", "process", "sweep"]

log = logging.getLogger(__name__)


# Acked on receipt: the processor's state lives in Redis, not in its message. A processor
# whose worker dies is replaced through its expired lock (next dispatch or sweep), never by
# a redelivered message, which would only find the lock taken anyway.
@app.task(name="noti.events.process", bind=True, acks_late=False, ignore_result=True)
def process(self: Task) -> dict[str, Any]:
    """Run one event processor: exits at once if another is alive, else drains events in
    arrival order until none is left or a limit makes it hand over to a successor."""
    report = events().processor(task_id=self.request.id or "").run()
    return report.to_json()


@app.task(name="noti.events.sweep", send_events=False, ignore_result=True)
def sweep() -> bool:
    """Beat: queue a processor if events are waiting and none is alive (a dead processor's
    lock has expired) or already queued."""
    started = events().sweep()
    if started:
        log.info("event sweep: events were waiting without a processor; queued one")
    return started


@app.task(name="noti.events.clean", send_events=False, ignore_result=True)
def clean() -> int:
    """Beat: remove done events older than their keep window (``NOTI_EVENT_KEEP_DONE_S``)."""
    removed = events().clean_done()
    log.info("event clean: removed %d done events", removed)
    return removed


# Acked late and given back when its worker dies: the message is only done once its event is
# stored. A redelivered message dispatches again with the same idempotency key (its own id),
# which returns the event stored the first time instead of storing a second one.
@app.task(name="noti.events.dispatch", bind=True, acks_late=True, ignore_result=True, throws=(InvalidInput,))
def dispatch(self: Task, /, *args: Any, **kwargs: Any) -> str:
    """Dispatch an event from a task message, at most once per message; its id. Called as
    ``dispatch(name, payload=None, user=None)``. Bad input fails the task
    (:class:`~noti.errors.InvalidInput`, nothing stored): a message of another shape (no
    name, unknown keywords) with ``e.noti.event.badcall``."""
    name, payload, user = _dispatch_call(args, kwargs)
    task_id = self.request.id
    return events().dispatch(name, payload, user=user, idempotency_key=f"task:{task_id}" if task_id else None)


def _dispatch_shape(name: Any = None, payload: Any = None, user: Any = None) -> tuple[Any, Any, Any]:
    return name, payload, user


def _dispatch_call(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any, Any]:
    return bind_call(
        _dispatch_shape,
        args,
        kwargs,
        task="noti.events.dispatch",
        takes="(name, payload=None, user=None)",
        code="e.noti.event.badcall",
    )
