"""noti's answers to Celery's remote control, for noti's workers only.

Celery's ``inspect scheduled`` lists the ETA tasks a worker holds in memory; noti keeps no
such task (delays and retry back-offs wait in Redis, :mod:`noti.core.delay`). Here it also lists
the notifications waiting in noti's delayed set, soonest first (up to
:data:`SCHEDULED_LIMIT`), under their record ids, each as the ``noti.deliver`` task it will
be. The set is shared by all workers, so only the worker whose pump holds the pump lock
answers with it. ``inspect stats`` gains a ``noti`` section: the notifications this worker
holds (``reserved``) and is sending (``active``), and, from the pump's worker, the size of
the delayed set.

``revoke`` (``celery control revoke <record id>``, Flower's button): before Celery's own
handling, the worker revokes the named records that wait (queued or delayed) in the record
store and sends ``task-revoked`` for each, so Flower shows a notification revoked while it
waited in the delayed set too. Every worker gets the broadcast; the one whose revoke took
effect reports it. A record a worker holds is revoked by that worker before its send.

Celery's command table is one per process: for another app's worker in the same process
the commands answer as Celery's own.
"""

from __future__ import annotations

import logging
import os
from datetime import UTC, datetime
from typing import Any

from celery import Celery
from celery.worker import control as celery_control
from celery.worker import state as worker_state
from kombu.utils.functional import maybe_list

from noti.celery.queues import DELIVER_TASK
from noti.celery.report import DeliveryReport
from noti.core.attempt import Revoked
from noti.core.delay import Pump
from noti.sending.runtime import get_runtime

__all__ = ["SCHEDULED_LIMIT", "pump_holding", "serve_pump"]

#: Most delayed notifications ``inspect scheduled`` lists.
SCHEDULED_LIMIT = 100

_celery_revoke = celery_control.Panel.data["revoke"]
_celery_scheduled = celery_control.Panel.data["scheduled"]
_celery_stats = celery_control.Panel.data["stats"]
#: The pump of this worker process and the app it works for (set by noti's worker bootstep).
_pump: Pump | None = None
_app: Celery | None = None


def serve_pump(pump: Pump | None, app: Celery | None) -> None:
    """Answer for ``app``'s workers, and for ``pump``'s delayed set while it holds the pump
    lock (None: stop)."""
    global _pump, _app
    _pump, _app = pump, app


def pump_holding() -> bool:
    """Whether this worker's pump holds the pump lock (it is the one that pumps)."""
    return _pump is not None and _pump.holding


def _ours(state: Any) -> bool:
    return _app is not None and state.app is _app


@celery_control.inspect_command(alias="dump_schedule")
def scheduled(state: Any, **kwargs: Any) -> list[dict[str, Any]]:
    """Celery's scheduled tasks, and on the pump's worker noti's delayed notifications."""
    entries: list[dict[str, Any]] = list(_celery_scheduled(state, **kwargs))
    if not _ours(state) or _pump is None or not _pump.holding:
        return entries
    for record_id, due_ms in get_runtime().delayed.soonest(SCHEDULED_LIMIT):
        entries.append(
            {
                "eta": datetime.fromtimestamp(due_ms / 1000, tz=UTC).isoformat(),
                "priority": None,
                "request": {
                    "id": record_id,
                    "name": DELIVER_TASK,
                    "args": [record_id],
                    "kwargs": {},
                    "type": DELIVER_TASK,
                    "hostname": state.hostname,
                    "time_start": None,
                    "acknowledged": False,
                    "delivery_info": None,
                    "worker_pid": os.getpid(),
                },
            }
        )
    return entries


@celery_control.inspect_command()
def stats(state: Any, **kwargs: Any) -> dict[str, Any]:
    """Celery's worker statistics, with noti's counts on noti's workers."""
    answer: dict[str, Any] = _celery_stats(state, **kwargs)
    if _ours(state):
        active = [r for r in worker_state.active_requests if r.name == DELIVER_TASK]
        reserved = [r for r in worker_state.reserved_requests if r.name == DELIVER_TASK]
        counts = {"reserved": len(reserved) - len(active), "active": len(active)}
        if _pump is not None and _pump.holding:
            counts["delayed"] = get_runtime().delayed.size()
        answer = {**answer, "noti": counts}
    return answer


@celery_control.control_command(variadic="task_id", signature="[id1 [id2 [... [idN]]]]")
def revoke(state: Any, task_id: Any, terminate: bool = False, signal: Any = None, **kwargs: Any) -> Any:
    """Celery's revoke, after revoking the named notifications that wait in the store."""
    if _ours(state):
        ids = [str(i) for i in maybe_list(task_id) or []]
        try:
            done = get_runtime().store.revoke(ids, reason="revoked") if ids else []
        except Exception:  # Celery's own handling still flags them for this worker
            logging.getLogger(__name__).exception("revoke: could not revoke %d record(s)", len(ids))
            done = []
        report = DeliveryReport(state.app.tasks[DELIVER_TASK], state.consumer)
        for record_id, result in zip(ids, done, strict=False):
            if result is Revoked.REVOKED:
                report.revoked_waiting(record_id)
    return _celery_revoke(state, task_id, terminate=terminate, signal=signal, **kwargs)
