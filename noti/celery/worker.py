"""What only noti's own worker process does, started by a bootstep of noti's app.

:class:`NotiProcess` is a worker bootstep of noti's app, so it runs in every worker of that
app (``celery -A noti worker``, and an in-process worker of the tests) and in no other. It
says once which host-project Celery variables are ignored, makes the worker consume through
the bulk transport, and connects the process hooks (freeze the start-up objects, stop the
send loop and close the runtime in pool children) to Celery's signals, and redacts credentials
from every log record of the process (:mod:`noti.access.redact`) then, never at
import: a host project's worker whose code imports ``noti.tasks`` (to call
``notify.delay()``) finds Celery's signals as they were, and none of noti's hooks runs there.
"""

from __future__ import annotations

import gc
import logging
import os
from typing import Any

from celery import bootsteps
from celery.signals import worker_process_init, worker_process_shutdown, worker_ready

from noti.access.redact import install as install_redaction
from noti.redis.urls import masked_url
from noti.sending.runtime import get_runtime

__all__ = ["NotiProcess", "enter_noti_worker", "in_noti_worker"]

log = logging.getLogger(__name__)

#: Set when this process runs noti's worker (and so in its pool's children, forked from it).
_in_noti_worker = False
#: Set once this process has frozen its start-up objects.
_frozen = False


def in_noti_worker() -> bool:
    """Whether this process is noti's worker (or one of its pool's children)."""
    return _in_noti_worker


class NotiProcess(bootsteps.Step):
    """Worker bootstep: makes this process noti's worker. Created with the worker's other
    steps, after the worker's logging is set up and before its consumer (Celery's last step)
    opens the broker connection, so that connection uses the bulk transport."""

    def __init__(self, worker: Any, **kwargs: Any) -> None:
        super().__init__(worker, **kwargs)
        enter_noti_worker(worker.app)
        if _consumes_events(worker.app):
            # event processors run here: their lock keeper is ready before the first one
            worker_ready.connect(_start_lock_keeper, weak=False)
            worker_process_init.connect(_start_lock_keeper, weak=False)


def _consumes_events(app: Any) -> bool:
    from noti.celery.queues import EVENTS_QUEUE

    consumed = app.amqp.queues.consume_from
    return not consumed or EVENTS_QUEUE in consumed


def _start_lock_keeper(**_: Any) -> None:
    from noti.events.keeper import keeper

    keeper().start()


def enter_noti_worker(app: Any) -> None:
    """Make this process noti's worker for ``app`` (once): the hooks above, connected now."""
    global _in_noti_worker
    if _in_noti_worker:
        return
    _in_noti_worker = True
    install_redaction()  # no credential in the worker's logs (pool children are forked after this)
    _warn_of_celery_variables(app)
    if get_runtime().settings.broker_bulk_fetch:
        # Workers consume through noti.celery.transport; producers, beat and Flower keep
        # kombu's Redis transport (the URL stays redis://, which Flower's broker view needs).
        from noti.celery.transport import worker_transport

        app.conf.broker_transport = worker_transport(get_runtime().settings.broker)
    worker_ready.connect(_freeze_startup_objects, weak=False)
    worker_process_init.connect(_freeze_startup_objects, weak=False)
    worker_process_shutdown.connect(_close_runtime, weak=False)


def _warn_of_celery_variables(app: Any) -> None:
    """Say once which host-project Celery variables noti's worker ignores."""
    from noti.celery.app import IGNORED_CELERY_VARIABLES  # the app names this module, not the reverse

    found = [name for name in IGNORED_CELERY_VARIABLES if os.environ.get(name)]
    if found:
        log.warning(
            "noti ignores %s: they configure another Celery app; noti's broker is %s (NOTI_REDIS_URL "
            "or NOTI_BROKER_URL), where its records are",
            ", ".join(found),
            masked_url(str(app.conf.broker_url)),
        )


def _freeze_startup_objects(**_: Any) -> None:
    """Move everything a worker process holds once started (modules, classes, Celery's and
    noti's long-lived objects) to the collector's permanent generation.

    A full (generation 2) collection walks every tracked object; in a started worker that is
    ~90,000 objects, and it took 50–70 ms here, during which the process neither fetched nor
    sent: a process holding urgent messages let the others send hundreds of lower-level ones
    first (the priority bound of the performance issue, exceeded once in six runs), and the
    notifications it held waited as long. Frozen, a full collection walks only what the
    process allocated since. (A frozen object is still freed when its last reference goes;
    only a reference cycle among frozen objects would outlive its use, and these live as long
    as the process.) Runs once per process: in the main process when the worker is ready and
    in each pool child when it starts (a child forked later inherits its parent's freeze)."""
    global _frozen
    if not _frozen:
        _frozen = True
        gc.freeze()


def _close_runtime(**_: Any) -> None:
    from noti.sending.loop import send_loop

    send_loop().stop()
    get_runtime().close()
