"""Loaded into a host project's own worker (``celery -A proj worker -I tests.host_worker_probe``)
by ``tests/test_examples.py``: the task ``probe.report`` writes down what that worker's
process looks like, so the test can check that noti left it alone (issue 18 point 2)."""

from __future__ import annotations

import gc
import json
import weakref
from typing import Any

from celery import current_app, shared_task, signals


def _receivers() -> list[str]:
    """Every receiver connected to a Celery signal in this process, as ``signal:module.name``."""
    found = []
    for name, signal in vars(signals).items():
        if not isinstance(signal, signals.Signal):
            continue
        for _, receiver in signal.receivers:
            target: Any = receiver() if isinstance(receiver, weakref.ReferenceType) else receiver
            module = getattr(target, "__module__", None) or type(target).__module__
            found.append(f"{name}:{module}.{getattr(target, '__qualname__', type(target).__qualname__)}")
    return found


@shared_task(name="probe.report")
def report(path: str) -> None:
    import noti.celery.worker

    app = current_app._get_current_object()
    facts = {
        "current_app": app.main,
        "broker_url": app.conf.broker_url,
        "noti_tasks_in_host_app": sorted(name for name in app.tasks if name.startswith("noti.")),
        "in_noti_worker": noti.celery.worker.in_noti_worker(),
        "frozen_objects": gc.get_freeze_count(),
        "signal_receivers": _receivers(),
    }
    with open(path, "w") as out:
        json.dump(facts, out)
