"""``noti.deliver``: the delivery of one record, given its id."""

from __future__ import annotations

from typing import Any

from celery import Task

from noti.celery.app import app
from noti.errors import StoreUnavailable
from noti.runtime import get_runtime
from noti.sender import Sender

__all__ = ["deliver"]


class DeliverTask(Task):
    """Runs its messages a batch at a time when ``delivery_mode = "batch"`` (the default) and
    the worker has an event loop (every pool but gevent/eventlet); else one by one."""

    def start_strategy(self, app: Any, consumer: Any, **kwargs: Any) -> Any:
        if get_runtime().settings.delivery_mode == "batch" and consumer.hub is not None:
            from noti.celery.tasks.batching import DeliveryBatcher

            return DeliveryBatcher(self, app, consumer, **kwargs)
        return super().start_strategy(app, consumer, **kwargs)


@app.task(
    base=DeliverTask,
    name="noti.deliver",
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    max_retries=12,
)
def deliver(self: Task, record_id: str) -> str:
    """Claim the record, send it through its provider and store the outcome (task mode;
    batch mode runs the same steps in :mod:`noti.celery.tasks.batching`).

    Returns the seed's mark: ``OK``, ``KO`` or ``!!`` (nothing to do). When Redis does not
    answer, the message is retried in 5 s (a short countdown, far below the visibility
    timeout) up to 12 times; the record stays waiting meanwhile.
    """
    sender = Sender(get_runtime(), owner=f"{self.request.hostname or 'worker'}")
    try:
        return sender.deliver(record_id).mark
    except StoreUnavailable as exc:
        raise self.retry(exc=exc, countdown=5) from exc
