"""The Celery layer: the app and its configuration (``app``), the workers' broker transport
(``transport``), queues and priority steps (``queues``), publishing delivery messages
(``publish``), the beat schedule (``beat``) and the tasks (``tasks/``).

The core (the record, the store, leases, retries, delays, dead letters, handlers, providers)
imports nothing from here. The Python API and the maintenance jobs publish through
:mod:`noti.celery.publish`: :func:`~noti.celery.publish.process_notifier` builds the
process's publisher on first use (:meth:`~noti.celery.publish.Publisher.for_settings`) and
hands it to ``noti.notifier`` (and ``noti.api`` to ``noti.redrive``), which import nothing
from here; ``noti.upkeep`` sits beside this layer. The tasks, events and the webman bridge
take the process's notifier from there, never from ``noti.api``.
On a Redis broker publishing imports neither Celery nor kombu. ``celery -A noti`` finds the
app as ``noti.celery.celery``; building it reads the settings, so it is built on first use.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "celery":  # what `celery -A noti` (and `-A noti.celery`) looks for
        from noti.celery.app import app

        return app
    raise AttributeError(f"module 'noti.celery' has no attribute {name!r}")
