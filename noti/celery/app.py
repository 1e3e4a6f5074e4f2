"""The Celery app: ``celery -A noti worker|beat|flower`` finds it as ``noti.celery``.

The configuration is derived from :class:`~noti.config.Settings` when Celery first reads it,
so importing noti reads nothing and connects to nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from celery import Celery, bootsteps
from celery.app.utils import Settings as Settings_
from celery.loaders.app import AppLoader

from noti.celery.beat import beat_schedule, redbeat_config
from noti.celery.publish import Publisher
from noti.celery.queues import (
    ADOPT_INTERVAL_S,
    EVENTS_QUEUE,
    INTAKE_QUEUE,
    MAINTENANCE_QUEUE,
    ForeignPriorities,
    all_queues,
    priority_for_level,
    transport_options,
)
from noti.celery.transport import kombu_broker, worker_transport
from noti.celery.worker import IGNORED_CELERY_VARIABLES, NotiProcess
from noti.config import Settings
from noti.core.delay import Pump
from noti.core.keys import Keys
from noti.runtime import get_runtime

__all__ = ["IGNORED_CELERY_VARIABLES", "app", "celery_config"]


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
    same process is left alone.)"""

    def import_default_modules(self) -> Any:
        from noti.imports import import_modules

        import_modules(get_runtime().settings.imports)
        return super().import_default_modules()


class NotiCelery(Celery):
    """noti's Celery app: its settings come from noti's configuration only (:class:`_OwnSettings`),
    and no fix-up (Django's) attaches to it: noti's worker needs no host project's settings."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, fixups=[], loader=NotiLoader, **kwargs)
        _own(self._conf)  # the pending settings, filled in place on first read

    def task(self, *args: Any, **opts: Any) -> Any:
        """Celery's ``task`` decorator, registering noti's tasks with noti's app only (Celery's
        default, ``shared=True``, would add them to every app of the process, a host
        project's included)."""
        opts.setdefault("shared", False)
        return super().task(*args, **opts)

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


class KombuCheck(bootsteps.Step):
    """Worker bootstep: before the worker connects, check that the installed kombu still has
    what noti relies on beneath its public API (:func:`noti.celery.compat.check_kombu`): the
    worker refuses to start, naming kombu's version and what changed, if it does not."""

    def create(self, worker: Any) -> None:
        settings = get_runtime().settings
        bulk = worker.app.conf.broker_transport == worker_transport(settings.broker)  # NotiProcess set it
        if bulk or Publisher.for_settings(settings).writes_wire_format:
            from noti.celery.compat import check_kombu

            check_kombu(bulk_transport=bulk)


class DelayPump(bootsteps.StartStopStep):
    """Worker bootstep: runs the delayed-set pump (one active copy across all workers). The
    same lock holder also looks for waiting events without a live processor every few seconds,
    so event processing never depends on beat alone to recover, and, on a Redis broker, moves
    the messages foreign Celery producers queued at priority lists noti does not read
    (:class:`~noti.celery.queues.ForeignPriorities`) to its own."""

    def create(self, worker: Any) -> Pump:
        runtime = get_runtime()
        publisher = Publisher.for_settings(runtime.settings, store_redis=runtime.redis)
        periodic: list[tuple[float, Callable[[], object]]] = [
            (EVENT_WATCH_INTERVAL_S, _start_stalled_event_processor)
        ]
        if publisher.writes_wire_format:
            periodic.append((ADOPT_INTERVAL_S, ForeignPriorities(publisher.broker_redis).adopt))
        runtime.handler  # noqa: B018 - a bad NOTI_HANDLERS stops the worker here, naming it
        pump = Pump(
            runtime.delayed,
            publisher.publish,
            interval_s=runtime.settings.pump_interval_s,
            periodic=periodic,
        )
        from noti.celery.control import serve_pump  # registers noti's inspect answers: workers only

        serve_pump(pump)  # inspect scheduled / stats answer for its delayed set
        return pump


#: How often the pump's worker checks that waiting events have a processor.
EVENT_WATCH_INTERVAL_S = 2.0


def _start_stalled_event_processor() -> None:
    from noti.events import events

    events().sweep()


class DeliveryDrain(bootsteps.StartStopStep):
    """Consumer bootstep: when the consumer stops, batch-mode sends still waiting on their
    providers get up to :data:`DRAIN_TIMEOUT_S` to finish and be acked while the broker
    channel is still open (else their messages are redelivered, and the claim sorts it out)."""

    requires = ("celery.worker.consumer.tasks:Tasks",)

    def stop(self, c: Any) -> None:
        batcher = c.strategies.get("noti.deliver")
        drain = getattr(batcher, "drain", None)
        if drain is not None:
            drain(DRAIN_TIMEOUT_S)

    shutdown = stop


#: Seconds a stopping consumer waits for batch-mode sends in flight.
DRAIN_TIMEOUT_S = 15.0

app.steps["worker"].add(NotiProcess)
app.steps["worker"].add(KombuCheck)
app.steps["worker"].add(DelayPump)
app.steps["consumer"].add(DeliveryDrain)
from noti.celery.observe import Observing  # noqa: E402 - beside its registration

app.steps["worker"].add(Observing)  # the worker's heartbeat; its exporter with NOTI_METRICS_PORT
from noti.bridge.webman.runner import WebmanBridge  # noqa: E402 - beside its registration

app.steps["worker"].add(WebmanBridge)  # does nothing unless [webman] enabled = true
