"""Imported by the bench's noti workers (``NOTI_IMPORTS``) so that Celery's task signals
are on, as a Celery user runs noti (issue 24: "with events, results and signals on"): one
receiver on each signal a delivery sends, doing what a light receiver does (reads the task
id and counts it in process memory). With no receiver connected, the worker skips the
signals altogether (:mod:`noti.celery.report`).

With ``BENCH_SIGNALS_DIR`` set, each worker process writes its counts there as it exits
(``<pid>.json``), and the drain checks that every notification's signals were received
(:func:`received`)."""

from __future__ import annotations

import atexit
import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

from celery import signals

#: Signals received in this worker process, by name.
RECEIVED: Counter[str] = Counter()


def _receiver(name: str) -> Any:
    def receive(sender: Any = None, **kwargs: Any) -> None:
        RECEIVED[name] += 1
        # the task's request context is pushed, as in a task's run: its id is the task's
        task_id = kwargs.get("task_id") or (kwargs.get("result") or {}).get("id")
        if getattr(getattr(sender, "request", None), "id", None) != task_id:
            RECEIVED["request_mismatch"] += 1

    receive.__name__ = f"bench_{name}"
    return receive


_RECEIVERS = {
    name: _receiver(name)
    for name in ("task_prerun", "task_postrun", "task_success", "task_failure", "task_retry")
}
for _name, _receive in _RECEIVERS.items():
    getattr(signals, _name).connect(_receive, weak=False)


def _write_counts() -> None:
    directory = os.environ.get("BENCH_SIGNALS_DIR")
    if directory and RECEIVED:
        (Path(directory) / f"{os.getpid()}.json").write_text(json.dumps(RECEIVED))


atexit.register(_write_counts)


def received(directory: str) -> Counter[str]:
    """The signals the workers that wrote to ``directory`` received, summed."""
    total: Counter[str] = Counter()
    for path in Path(directory).glob("*.json"):
        total.update(json.loads(path.read_text()))
    return total
