"""``noti.deliver``: the delivery of one record, given its id."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from celery import Task
from celery.exceptions import Ignore, Retry

from noti.celery.app import app
from noti.celery.report import delivery_result
from noti.core.record import Status
from noti.core.retry import outcome_error
from noti.errors import NotiError, StoreUnavailable
from noti.sending.runtime import get_runtime
from noti.sending.sender import Sender
from noti.sending.traces import note_outcome
from noti.tracing import delivering

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
    throws=(NotiError,),
)
def deliver(self: Task, record_id: str) -> dict[str, str]:
    """Claim the record, send it through its provider and store the outcome (task mode;
    batch mode runs the same steps in :mod:`noti.celery.tasks.batching` and reports them
    the same way, :mod:`noti.celery.report`).

    Returns the delivery (:func:`~noti.celery.report.delivery_result`); raises the outcome's
    error (:func:`~noti.celery.report.outcome_error`) when the record failed or went invalid,
    and Celery's ``Retry`` when the next attempt is scheduled (the delayed set sends it again
    under the same task id; nothing is re-published here). A message whose record is not
    its to send (a duplicate, another worker's, already final) is ignored. When Redis does
    not answer, the message is retried in 5 s (a short countdown, far below the visibility
    timeout) up to 12 times; the record stays waiting meanwhile.
    """
    sender = Sender(get_runtime(), owner=f"{self.request.hostname or 'worker'}")
    request = self.request
    queue = (request.delivery_info or {}).get("routing_key") or ""
    # the trace its message carries goes on here (custom headers are the request's attributes)
    with delivering(request, record_id, queue.removeprefix("noti.") or None, task_id=request.id) as span:
        try:
            outcome = sender.deliver(record_id).outcome
        except StoreUnavailable as exc:
            raise self.retry(exc=exc, countdown=5) from exc
        note_outcome(span, outcome)
    if outcome is None:
        raise Ignore()
    if outcome.status is Status.DONE:
        return delivery_result(record_id, outcome)
    error = outcome_error(outcome)
    if outcome.status is Status.WAITING:
        due = datetime.fromtimestamp(outcome.not_before_ms / 1000, tz=UTC)
        raise Retry(str(error), exc=error, when=due)
    raise error
