"""This process's notifier and publisher, wired to noti's own Celery app.

:mod:`noti.celery.publish` takes the app it publishes through from its caller; this module
hands it noti's app as a function, called only when a message goes through ``send_task`` (not
on a Redis broker), so ``notify()`` never builds the app. :func:`noti.api.notifier` returns
:func:`process_notifier`; the tasks, events and the webman bridge take the process's notifier
from here, never from :mod:`noti.api`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from noti.celery.publish import Publisher

if TYPE_CHECKING:
    from celery import Celery

    from noti.sending.notifier import Notifier

__all__ = ["noti_app", "process_notifier", "process_publisher"]

_process_notifier: Notifier | None = None


def noti_app() -> Celery:
    """noti's Celery app (built on first use: importing it reads the settings)."""
    from noti.celery.app import app

    return app


def process_notifier() -> Notifier:
    """The :class:`~noti.sending.notifier.Notifier` of this process's runtime, publishing to the noti
    Celery app's broker."""
    from noti.sending.notifier import Notifier  # noqa: F811 - the class, at run time
    from noti.sending.runtime import get_runtime

    global _process_notifier  # noqa: PLW0603 - the process's one notifier
    runtime = get_runtime()
    current = _process_notifier
    if current is None or current.runtime is not runtime:
        publisher = Publisher.for_settings(runtime.settings, noti_app, store_redis=runtime.redis)
        current = _process_notifier = Notifier(runtime, publisher)
    return current


def process_publisher() -> Publisher:
    """The publisher of :func:`process_notifier` (the maintenance jobs that read the broker's
    queues need the Celery publisher itself, not only the notifier's port)."""
    return cast(Publisher, process_notifier().publisher)
