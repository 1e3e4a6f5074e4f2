"""The worker's part in observing noti: its heartbeat, and the opt-in metrics exporter.

:class:`Observing` is a worker bootstep of noti's app only (so it never runs in a host
project's worker): the worker's main process writes its heartbeat
(:mod:`noti.observe.presence`; ``noti status`` and ``noti_workers_alive`` count the live
ones), and with ``NOTI_METRICS_PORT`` set it serves the Prometheus metrics
(:mod:`noti.observe.prometheus`). The metrics are read from Redis at each scrape and are
cluster-wide: every exporter shows the same numbers. A port that cannot be listened on is
logged as an error and the worker goes on delivering without its exporter.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import bootsteps

from noti.errors import NotiError
from noti.observe.presence import Presence
from noti.sending.runtime import get_runtime

__all__ = ["Observing", "WorkerObserver"]

log = logging.getLogger(__name__)


class WorkerObserver:
    """The heartbeat of one worker and, when asked for, its metrics server."""

    def __init__(self, presence: Presence, *, port: int | None, bind: str) -> None:
        self.presence = presence
        self.port = port
        self.bind = bind
        self.server: Any = None
        self._observer: Any = None

    def start(self) -> None:
        self.presence.start()
        if self.port is None:
            return
        from noti.observe.prometheus import NotiCollector, serve
        from noti.observe.snapshot import Observer

        observer = self._observer = Observer(get_runtime())
        try:
            self.server = serve(NotiCollector(observer.snapshot), port=self.port, bind=self.bind)
        except NotiError as exc:
            log.error("metrics exporter not started: %s", exc)
            return
        host, port = self.server.address
        log.info("metrics exporter: serving http://%s:%d/metrics", host, port)

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None
        if self._observer is not None:
            self._observer.close()
            self._observer = None
        self.presence.stop()


def _pump_holding() -> bool:
    from noti.celery.control import pump_holding

    return pump_holding()


class Observing(bootsteps.StartStopStep):  # type: ignore[misc]
    """Worker bootstep: the heartbeat and the opt-in exporter (see the module)."""

    label = "noti observing"

    def create(self, worker: Any) -> WorkerObserver:
        runtime = get_runtime()
        settings = runtime.settings
        pool = getattr(worker.pool_cls, "__module__", str(worker.pool_cls)).rsplit(".", 1)[-1]
        presence = Presence(
            runtime.redis,
            runtime.keys,
            name=str(worker.hostname),
            queues=sorted(worker.app.amqp.queues.consume_from),
            pool=pool,
            concurrency=int(worker.concurrency or 0),
            mode=settings.delivery_mode,
            pump=_pump_holding,
        )
        return WorkerObserver(presence, port=settings.metrics_port, bind=settings.metrics_bind)
