"""noti's Prometheus metrics: a collector that reads a :class:`~noti.observe.snapshot.Snapshot`
at each scrape, and the HTTP server that serves it (``noti metrics``, and the worker's
opt-in exporter, ``NOTI_METRICS_PORT``).

Nothing is counted in the exporting process: the counters live in Redis
(:mod:`noti.redis.counters`) and the gauges are read there, so every exporter shows the same
cluster-wide numbers and any one of them is enough. :data:`METRICS` is the one list of the
names served; the docs' table is generated from it (``noti.observe.docs``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from noti.errors import InvalidInput, NotiError
from noti.observe.snapshot import Snapshot
from noti.redis.counters import FAMILIES, LATENCY_BOUNDS_S

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

__all__ = ["METRICS", "MetricsServer", "MetricSpec", "NotiCollector", "serve"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """One metric noti serves: its name (as served: counters end in ``_total``), type,
    labels and meaning."""

    name: str
    type: str
    labels: tuple[str, ...]
    help: str
    #: For counters: the family of :mod:`noti.redis.counters` it is read from.
    family: str = ""


def _counter(name: str, code: str, help_: str = "") -> MetricSpec:
    family = FAMILIES[code]
    return MetricSpec(f"{name}_total", "counter", family.labels, help_ or family.help, code)


#: Every metric noti serves, in the order served.
METRICS: tuple[MetricSpec, ...] = (
    _counter("noti_notifications_added", "added"),
    _counter("noti_notifications_sent", "sent"),
    _counter("noti_notifications_retried", "retried"),
    _counter("noti_notifications_failed", "failed"),
    _counter("noti_notifications_invalid", "invalid"),
    _counter("noti_notifications_dead_lettered", "dead_lettered"),
    _counter("noti_notifications_revoked", "revoked"),
    _counter("noti_notifications_cancelled", "cancelled"),
    _counter("noti_notifications_revived", "revived"),
    MetricSpec(
        "noti_provider_latency_seconds",
        "histogram",
        ("channel", "provider"),
        "Provider calls by how long they took (a batch sent in one call counts each of its "
        "notifications with the batch's time)",
    ),
    _counter("noti_deliveries", "delivery"),
    _counter("noti_receipts", "receipts"),
    _counter("noti_fallbacks", "fallbacks"),
    _counter("noti_notices_suppressed", "suppressed"),
    _counter("noti_notices_held", "held"),
    _counter("noti_digest_events", "digested"),
    _counter("noti_digests", "digests"),
    _counter("noti_notices_deduplicated", "deduplicated"),
    _counter("noti_notices_throttled", "throttled"),
    MetricSpec("noti_delivery_records", "gauge", ("state",), "Records in each delivery status"),
    MetricSpec("noti_receipts_awaited", "gauge", (), "Sent records awaiting their vendor's receipt"),
    _counter("noti_events_dispatched", "events_dispatched"),
    _counter("noti_events_processed", "events_done"),
    MetricSpec("noti_records", "gauge", ("status",), "Records in the store by status"),
    MetricSpec(
        "noti_queue_messages",
        "gauge",
        ("queue", "step"),
        "Messages waiting in a Celery queue's list of one priority step (0 is served first)",
    ),
    MetricSpec(
        "noti_queue_oldest_age_seconds",
        "gauge",
        ("queue",),
        "Channel queues: seconds since the notification of the oldest waiting message became due "
        "(0 when none waits)",
    ),
    MetricSpec(
        "noti_broker_unacked_messages",
        "gauge",
        (),
        "Messages workers fetched and have not acknowledged yet (kombu's unacked hash)",
    ),
    MetricSpec(
        "noti_delayed_records",
        "gauge",
        (),
        "Records in the delayed set (delays, retry back-offs, lease re-checks)",
    ),
    MetricSpec(
        "noti_delayed_due_records", "gauge", (), "Delayed entries due and not moved to their queue yet"
    ),
    MetricSpec(
        "noti_delayed_pump_lag_seconds",
        "gauge",
        (),
        "Seconds the oldest due delayed entry has waited for the pump (0 when none is due)",
    ),
    MetricSpec("noti_dead_letters", "gauge", (), "Entries in the dead-letter stream"),
    MetricSpec("noti_events_backlog", "gauge", (), "Events not processed yet"),
    MetricSpec(
        "noti_events_oldest_age_seconds",
        "gauge",
        (),
        "Seconds since the event at the head of the queue was dispatched (0 when none waits)",
    ),
    MetricSpec("noti_events_processor_up", "gauge", (), "1 while an event processor holds its liveness lock"),
    MetricSpec(
        "noti_numpool_numbers", "gauge", ("pool", "state"), "Numbers of a sender-number pool by state"
    ),
    MetricSpec(
        "noti_rate_line_waiting",
        "gauge",
        ("provider",),
        "Records waiting in line for a rate-limited provider's tokens",
    ),
    MetricSpec(
        "noti_rate_user_lead_max_seconds",
        "gauge",
        ("provider",),
        "How far ahead of now the busiest user's clock runs at a rate-limited provider (0: none ahead)",
    ),
    MetricSpec("noti_workers_alive", "gauge", (), "noti workers whose heartbeat is recent"),
    MetricSpec(
        "noti_worker_heartbeat_age_seconds",
        "gauge",
        ("worker",),
        "Seconds since each known worker's last heartbeat",
    ),
    MetricSpec("noti_store_up", "gauge", (), "1 when the snapshot of this scrape could be read from Redis"),
    MetricSpec("noti_scrape_read_seconds", "gauge", (), "Seconds this scrape spent reading Redis"),
)
_BY_NAME = {m.name: m for m in METRICS}


class NotiCollector(Collector):
    """A custom collector: each scrape reads one snapshot (two Redis round trips) and turns it
    into :data:`METRICS`. When Redis cannot be read, the scrape says so (``noti_store_up 0``)
    instead of failing."""

    def __init__(self, snapshot: Callable[[], Snapshot]) -> None:
        self._snapshot = snapshot

    def describe(self) -> Iterator[Metric]:
        return iter(())  # unchecked: names are fixed (METRICS), and describing must not read Redis

    def collect(self) -> Iterator[Metric]:
        try:
            snap = self._snapshot()
        except NotiError as exc:
            log.warning("metrics: cannot read the snapshot: %s", exc)
            yield _gauge("noti_store_up", 0)
            return
        yield from metrics_of(snap)


def metrics_of(snap: Snapshot) -> Iterator[Metric]:
    """The metric families of one snapshot, in the order of :data:`METRICS`."""
    counters: dict[str, list[tuple[tuple[str, ...], int]]] = {}
    for family, labels, value in snap.counters:
        counters.setdefault(family.code, []).append((labels, value))
    for metric in METRICS:
        if metric.type == "counter":
            counter = CounterMetricFamily(metric.name, metric.help, labels=list(metric.labels))
            for labels, value in sorted(counters.get(metric.family, [])):
                counter.add_metric(list(labels), value)
            yield counter
        elif metric.type == "histogram":
            yield _latency(metric, counters)
    yield _labelled("noti_records", [((s,), n) for s, n in snap.records.items()])
    yield _labelled(
        "noti_queue_messages",
        [((q.name, str(step)), n) for q in snap.queues for step, n in enumerate(q.steps)],
    )
    yield _labelled(
        "noti_queue_oldest_age_seconds",
        [((q.name,), q.oldest_age_s) for q in snap.queues if q.oldest_age_s is not None],
    )
    yield _gauge("noti_broker_unacked_messages", snap.unacked)
    yield _gauge("noti_delayed_records", snap.delayed)
    yield _gauge("noti_delayed_due_records", snap.delayed_due)
    yield _gauge("noti_delayed_pump_lag_seconds", snap.pump_lag_s)
    yield _labelled("noti_delivery_records", [((state,), n) for state, n in snap.deliveries.items()])
    yield _gauge("noti_receipts_awaited", snap.receipts_awaited)
    yield _gauge("noti_dead_letters", snap.dead_letters)
    yield _gauge("noti_events_backlog", snap.events.backlog)
    yield _gauge("noti_events_oldest_age_seconds", snap.events.oldest_age_s)
    yield _gauge("noti_events_processor_up", 1 if snap.events.processor is not None else 0)
    yield _labelled(
        "noti_numpool_numbers", [((p.name, state), n) for p in snap.pools for state, n in p.counts.items()]
    )
    yield _labelled("noti_rate_line_waiting", [((line.provider,), line.waiting) for line in snap.rate_lines])
    yield _labelled(
        "noti_rate_user_lead_max_seconds",
        [((line.provider,), max((lead for _, lead in line.leads), default=0.0)) for line in snap.rate_lines],
    )
    yield _gauge("noti_workers_alive", len(snap.workers_alive))
    yield _labelled(
        "noti_worker_heartbeat_age_seconds",
        [((w.name,), max(0.0, (snap.at_ms - w.seen_ms) / 1000)) for w in snap.workers],
    )
    yield _gauge("noti_store_up", 1)
    yield _gauge("noti_scrape_read_seconds", snap.read_s)


def _gauge(name: str, value: float | None) -> GaugeMetricFamily:
    """An unlabelled gauge of :data:`METRICS`; no sample when the value is unknown (None)."""
    spec = _BY_NAME[name]
    if value is None:  # e.g. the broker is not Redis
        return GaugeMetricFamily(name, spec.help, labels=[])
    return GaugeMetricFamily(name, spec.help, value=value)


def _labelled(name: str, samples: Iterable[tuple[Sequence[str], float]]) -> GaugeMetricFamily:
    """A labelled gauge of :data:`METRICS` (label values in the order of its labels)."""
    spec = _BY_NAME[name]
    gauge = GaugeMetricFamily(name, spec.help, labels=list(spec.labels))
    for values, number in samples:
        gauge.add_metric(list(values), number)
    return gauge


def _latency(
    metric: MetricSpec, counters: dict[str, list[tuple[tuple[str, ...], int]]]
) -> HistogramMetricFamily:
    """The provider latency histogram from the ``lat`` bucket counts and the ``latsum`` sums."""
    histogram = HistogramMetricFamily(metric.name, metric.help, labels=list(metric.labels))
    buckets: dict[tuple[str, str], dict[str, int]] = {}
    for (channel, le, provider), count in counters.get("lat", []):
        per = buckets.setdefault((channel, provider), {})
        per[le] = per.get(le, 0) + count
    sums = {(channel, provider): micros for (channel, provider), micros in counters.get("latsum", [])}
    bounds = [f"{b:g}" for b in LATENCY_BOUNDS_S] + ["+Inf"]
    for key in sorted(buckets):
        cumulative = 0
        rows = []
        for le in bounds:
            cumulative += buckets[key].get(le, 0)
            rows.append((le, float(cumulative)))
        histogram.add_metric(list(key), rows, sum_value=sums.get(key, 0) / 1e6)
    return histogram


class MetricsServer:
    """A running metrics HTTP server (``/metrics``, and any other path) on a daemon thread."""

    def __init__(self, server: WSGIServer, thread: threading.Thread) -> None:
        self._server = server
        self._thread = thread

    @property
    def address(self) -> tuple[str, int]:
        """The address and port it listens on (the port chosen when 0 was asked for)."""
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


def serve(collector: Collector, *, port: int, bind: str) -> MetricsServer:
    """Serve ``collector`` over HTTP on ``bind``:``port`` (0: a free port).

    Raises:
        InvalidInput: ``e.cmd.noti.metrics.portinuse`` the port is taken;
            ``e.cmd.noti.metrics.badbind`` the address cannot be listened on.
    """
    from prometheus_client import start_http_server

    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    try:
        server, thread = start_http_server(port, addr=bind, registry=registry)
    except OSError as exc:
        import errno

        if exc.errno == errno.EADDRINUSE:
            raise InvalidInput(
                f"cannot serve metrics on {bind}:{port}: the port is in use ({exc.strerror})",
                code="e.cmd.noti.metrics.portinuse",
            ) from None
        raise InvalidInput(
            f"cannot serve metrics on {bind}:{port}: {exc.strerror or exc}",
            code="e.cmd.noti.metrics.badbind",
        ) from None
    return MetricsServer(server, thread)


def metric_names() -> list[str]:
    """The name of every metric served."""
    return [m.name for m in METRICS]


def check_port(value: object) -> int:
    """A port number 0-65535 from ``value`` (0: any free port).

    Raises:
        InvalidInput: ``e.cmd.noti.metrics.badport``.
    """
    try:
        port = int(str(value).strip())
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise InvalidInput(
            f"port {value!r} is not a number from 0 to 65535", code="e.cmd.noti.metrics.badport"
        )
    return port
