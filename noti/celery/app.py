"""The Celery app: ``celery -A noti worker|beat|flower`` finds it as ``noti.celery``.

The configuration is derived from :class:`~noti.config.Settings` when Celery first reads it,
so importing noti reads nothing and connects to nothing.
"""

from __future__ import annotations

import math
from typing import Any

from celery import Celery
from celery.app.utils import Settings as Settings_
from celery.loaders.app import AppLoader

from noti.celery.beat import HOUSEKEEPING_TASKS, NO_SENT_EVENT, beat_schedule, redbeat_config
from noti.celery.queues import (
    EVENTS_QUEUE,
    INTAKE_QUEUE,
    MAINTENANCE_QUEUE,
    all_queues,
    priority_for_level,
    transport_options,
)
from noti.celery.transport import kombu_broker
from noti.config import Settings
from noti.core.keys import Keys
from noti.sending.runtime import get_runtime

__all__ = ["CONSUMER_STEPS", "IGNORED_CELERY_VARIABLES", "WORKER_STEPS", "app", "celery_config"]

#: The environment variables of a host project's Celery app that noti's app ignores (its
#: worker says so once, :mod:`noti.celery.worker`).
IGNORED_CELERY_VARIABLES = (
    "CELERY_BROKER_URL",
    "CELERY_BROKER_READ_URL",
    "CELERY_BROKER_WRITE_URL",
    "CELERY_RESULT_BACKEND",
)


def celery_config(settings: Settings) -> dict[str, Any]:
    """Celery settings derived from noti's (see the README's table for the reasons)."""
    broker_url, broker_options = kombu_broker(settings.broker)
    transport = transport_options(
        visibility_timeout_s=settings.visibility_timeout_s,
        restore_interval_s=settings.unacked_restore_interval_s,
    )
    transport.update(broker_options)
    prefetch = 1
    if settings.delivery_mode == "batch":
        # Celery multiplies this by the pool's size (the threads of -P threads too): the
        # window is per worker process, whatever the pool (a -c on the command line that
        # differs from NOTI_WORKER_CONCURRENCY scales it)
        processes = 1 if settings.worker_pool == "solo" else settings.worker_concurrency
        prefetch = max(1, math.ceil(settings.delivery_window / processes))
    return {
        "broker_url": broker_url,
        "broker_connection_retry_on_startup": True,
        # a worker waits for Redis as long as it is away (Celery's 100 tries end it after
        # about 48 minutes, and nothing restarts a worker that gave up)
        "broker_connection_max_retries": None,
        "broker_transport_options": transport,
        "visibility_timeout": settings.visibility_timeout_s,
        # noti.notify's results and every record's state, read from noti's own keys and
        # records (no second copy); the other tasks keep ignoring their results
        "result_backend": "noti.celery.backend:RecordBackend",
        "task_ignore_result": True,
        "task_serializer": "json",
        "result_serializer": "json",
        "accept_content": ["json"],
        "task_queues": all_queues(),
        "task_default_queue": INTAKE_QUEUE,
        "task_default_priority": priority_for_level(1),
        "task_routes": {
            "noti.notify": {"queue": INTAKE_QUEUE},
            "noti.maintenance.*": {"queue": MAINTENANCE_QUEUE},
            "noti.events.*": {"queue": EVENTS_QUEUE},
        },
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": prefetch,
        "worker_pool": settings.worker_pool,
        "worker_concurrency": settings.worker_concurrency,
        "worker_send_task_events": settings.worker_task_events,
        "task_send_sent_event": True,
        # where the pool can stop a task (not solo, not threads: steps.CancelWhereThePoolCan)
        "worker_cancel_long_running_tasks_on_connection_loss": True,
        "worker_hijack_root_logger": False,
        "timezone": "UTC",
        "enable_utc": True,
        "beat_scheduler": "noti.celery.scheduler:Scheduler",
        "beat_schedule": beat_schedule(settings),
        "beat_max_loop_interval": 5,
        # the user's task modules (event listeners' tasks): the worker imports them at start
        "imports": list(settings.imports),
        **redbeat_config(settings.redis_url, key_prefix=Keys(settings.key_prefix).beat_prefix),
    }


class _OwnSettings(Settings_):
    """Celery's settings object for noti's app, reading the broker and the result backend
    from noti's own configuration only.

    Celery's ``Settings`` prefers ``CELERY_BROKER_URL`` (``_READ_URL``, ``_WRITE_URL``) and
    ``CELERY_RESULT_BACKEND`` from the environment to any configured value. Those variables
    belong to the host project's Celery app (the usual names in Django and Flask
    deployments): read by noti's app they would put its messages on another Redis than its
    records. noti's come from ``NOTI_*`` (:func:`celery_config`); a worker that finds such a
    variable says once that it ignores it (:mod:`noti.celery.worker`)."""

    @property
    def broker_url(self) -> Any:
        return self.first("broker_url", "broker_host")

    @property
    def broker_read_url(self) -> Any:
        return self.get("broker_read_url") or self.broker_url

    @property
    def broker_write_url(self) -> Any:
        return self.get("broker_write_url") or self.broker_url

    @property
    def result_backend(self) -> Any:
        return self.first("result_backend", "CELERY_RESULT_BACKEND")


def _own(conf: Any) -> Any:
    """``conf`` made an :class:`_OwnSettings` (a settings view takes attribute writes as
    settings, hence ``object.__setattr__``)."""
    object.__setattr__(conf, "__class__", _OwnSettings)
    return conf


class NotiLoader(AppLoader):
    """noti's app loader: a starting worker imports the modules of ``NOTI_IMPORTS`` first
    (:func:`noti.imports.import_modules`), so one that cannot be imported stops it with
    ``e.noti.config.imports`` naming it, not with Celery's bare ImportError of its own
    import of the ``imports`` setting. (No signal is hooked: a host project's worker in the
    same process is left alone.) A channel one of them registers
    (:func:`noti.core.channel.register`) gets its queue declared then, before the worker
    picks the queues it consumes: the settings may have been read before it existed."""

    def import_default_modules(self) -> Any:
        from noti.imports import import_modules

        import_modules(get_runtime().settings.imports)
        declared = self.app.amqp.queues
        for queue in all_queues():
            if queue.name not in declared:
                declared.select_add(queue)
        return super().import_default_modules()


class NotiCelery(Celery):
    """noti's Celery app: its settings come from noti's configuration only (:class:`_OwnSettings`),
    no fix-up (Django's) attaches to it (noti's worker needs no host project's settings), and
    beat's housekeeping tasks are sent without a ``task-sent`` event (:mod:`noti.celery.beat`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, fixups=[], loader=NotiLoader, **kwargs)
        _own(self._conf)  # the pending settings, filled in place on first read

    def task(self, *args: Any, **opts: Any) -> Any:
        """Celery's ``task`` decorator, registering noti's tasks with noti's app only (Celery's
        default, ``shared=True``, would add them to every app of the process, a host
        project's included)."""
        opts.setdefault("shared", False)
        return super().task(*args, **opts)

    def send_task(self, name: str, *args: Any, **options: Any) -> Any:
        """Celery's ``send_task`` (every send goes through it: ``apply_async``, beat, ``celery
        call``), with no ``task-sent`` event for a housekeeping task (its worker sends none
        either: a ``task-sent`` alone would stay PENDING in Flower)."""
        if name in HOUSEKEEPING_TASKS:
            options.setdefault("event_dispatcher", NO_SENT_EVENT)
        return super().send_task(name, *args, **options)

    def _load_config(self) -> Any:
        # the settings object Celery builds when the configuration is first read
        return _own(super()._load_config())


app = NotiCelery(
    "noti",
    set_as_current=False,
    include=[
        "noti.celery.tasks.deliver",
        "noti.celery.tasks.intake",
        "noti.celery.tasks.maintenance",
        "noti.celery.tasks.events",
    ],
)
app.add_defaults(lambda: celery_config(get_runtime().settings))


#: The worker's and its consumer's bootsteps, by name: Celery loads them as it loads its own
#: when a worker starts, so the app imports none of the modules above it (they take the app
#: from the worker they run in).
WORKER_STEPS = (
    "noti.celery.worker:NotiProcess",  # the worker's settings and its log
    "noti.celery.steps:KombuCheck",
    "noti.celery.steps:DelayPump",
    "noti.celery.observe:Observing",  # the worker's heartbeat; its exporter with NOTI_METRICS_PORT
    "noti.bridge.webman.runner:WebmanBridge",  # does nothing unless [webman] enabled = true
)
CONSUMER_STEPS = ("noti.celery.steps:DeliveryDrain", "noti.celery.steps:CancelWhereThePoolCan")
app.steps["worker"].update(WORKER_STEPS)
app.steps["consumer"].update(CONSUMER_STEPS)
