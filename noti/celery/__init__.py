"""The Celery layer, from the ground up: queues and priority steps (``queues``), the workers'
broker transport (``transport``), publishing delivery messages (``publish``), the beat
schedule (``beat``), the app and its configuration (``app``), the process's notifier wired to
that app (``process``), the worker's bootsteps (``steps``), remote-control answers
(``control``), task events (``taskevents``), outcome reports (``report``), the result backend
(``backend``) and the tasks (``tasks/``). No module here imports one that imports it back:
the app names its worker's bootsteps as strings, as Celery names its own.

The core (the record, the store, leases, retries, delays, dead letters, handlers, providers)
imports nothing from here. The Python API and the maintenance jobs publish through
:func:`~noti.celery.process.process_notifier`, which builds the process's publisher on first
use (:meth:`~noti.celery.publish.Publisher.for_settings`, given noti's app as a function
called only on the ``send_task`` path) and hands it to ``noti.sending.notifier`` (and ``noti.api`` to
``noti.sending.redrive``), which import nothing from here, nor does ``noti.sending.upkeep``: its lost-message
sweep takes the publisher as a port (:class:`~noti.sending.upkeep.Requeuing`).
The tasks, events and the webman bridge take the process's notifier from there, never from
``noti.api``. On a Redis broker publishing imports neither Celery nor kombu. ``celery -A
noti`` finds the app as ``noti.celery.celery``; building it reads the settings, so it is
built on first use.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "celery":  # what `celery -A noti` (and `-A noti.celery`) looks for
        from noti.celery.app import app

        return app
    raise AttributeError(f"module 'noti.celery' has no attribute {name!r}")
