"""The base of noti's housekeeping tasks (beat's jobs): they send no task events, so Flower
lists notifications, not the store's upkeep.

Beat sends ``noti.maintenance.delivery_tick`` every 2 s, and each run made a row in Flower
(``task-sent`` from beat, ``task-received``, ``task-started``, ``task-succeeded`` from the
worker): the ticks filled its task list and its workers' Processed counts. A
:class:`Housekeeping` task makes none of those events:

- the worker's: Celery's ``Task.send_events`` attribute, ``False`` here. The worker's default
  strategy sends ``task-received`` only for a task whose ``send_events`` is true, and its
  ``Request.send_event`` sends the rest (started, succeeded, failed, retried, rejected,
  revoked, expired) under the same condition (``celery/worker/strategy.py``,
  ``celery/worker/request.py``);
- the sender's ``task-sent`` (noti sets ``task_send_sent_event``, for every task of the app):
  Celery publishes it through the ``event_dispatcher`` that ``apply_async`` passes down to the
  message's sending (``celery/app/amqp.py``, ``send_task_message``), its own otherwise;
  :meth:`Housekeeping.apply_async` passes :data:`NO_SENT_EVENT`, which publishes nothing.
  Beat sends its entries with ``apply_async``. A send by name from a process that has not
  imported the task (``celery call noti.maintenance.clean``) still gets its ``task-sent``
  from that process: Flower then lists it as PENDING, as it lists any task no worker reports.

What a run does is still seen: the worker logs each run (Celery's ``Task … received`` and
``… succeeded in …s: <result>`` lines at INFO, a failure at ERROR with its traceback), counts
it in ``celery inspect stats`` (``total``, by task name), lists it in ``inspect active``
while it runs, and the records a job changes are counted in ``noti:metrics`` by the scripts
that change them. Every beat entry's task is one of these (``tests/test_flower_truth.py``).
"""

from __future__ import annotations

from typing import Any

from celery import Task

__all__ = ["NO_SENT_EVENT", "Housekeeping"]


class _NoSentEvent:
    """Stands where Celery's event dispatcher publishes a sent task's ``task-sent`` event."""

    def publish(self, *args: Any, **kwargs: Any) -> None:
        """Publish nothing."""

    def __repr__(self) -> str:
        return "NO_SENT_EVENT"


#: The ``event_dispatcher`` a housekeeping task is sent with: no ``task-sent`` event.
NO_SENT_EVENT = _NoSentEvent()


class Housekeeping(Task):
    """A task that sends no task events, from its sender or its worker (the module's docstring)."""

    send_events = False

    def apply_async(self, *args: Any, **options: Any) -> Any:
        """Celery's ``apply_async``, with no ``task-sent`` event."""
        options.setdefault("event_dispatcher", NO_SENT_EVENT)
        return super().apply_async(*args, **options)
