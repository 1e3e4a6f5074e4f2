"""The bootsteps noti adds to a Celery worker (registered by name in :mod:`noti.celery.app`):
the kombu check before connecting, the delayed-set pump (which also closes due digest
windows), and the consumer's drain of the sends in flight when it stops. Each takes the app
from the worker it runs in."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

from celery import bootsteps

from noti.celery.publish import Publisher
from noti.celery.queues import ADOPT_INTERVAL_S, ForeignPriorities
from noti.celery.transport import worker_transport
from noti.core.delay import PublishItem, Pump
from noti.sending.runtime import Runtime, get_runtime
from noti.sending.traces import record_traces

__all__ = [
    "DRAIN_TIMEOUT_S",
    "EVENT_WATCH_INTERVAL_S",
    "CancelWhereThePoolCan",
    "DelayPump",
    "DeliveryDrain",
    "KombuCheck",
]


class KombuCheck(bootsteps.Step):
    """Worker bootstep: before the worker connects, check that the installed kombu still has
    what noti relies on beneath its public API (:func:`noti.celery.compat.check_kombu`): the
    worker refuses to start, naming kombu's version and what changed, if it does not."""

    def create(self, worker: Any) -> None:
        settings = get_runtime().settings
        bulk = worker.app.conf.broker_transport == worker_transport(settings.broker)  # NotiProcess set it
        if bulk or Publisher.for_settings(settings, worker.app).writes_wire_format:
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
        publisher = Publisher.for_settings(runtime.settings, worker.app, store_redis=runtime.redis)
        periodic: list[tuple[float, Callable[[], object]]] = [
            (EVENT_WATCH_INTERVAL_S, _start_stalled_event_processor),
            (runtime.settings.digest_tick_interval_s, _close_due_digests),
        ]
        if publisher.writes_wire_format:
            periodic.append((ADOPT_INTERVAL_S, ForeignPriorities(publisher.broker_redis).adopt))
        runtime.handler  # noqa: B018 - a bad NOTI_HANDLERS stops the worker here, naming it
        pump = Pump(
            runtime.delayed,
            functools.partial(_publish_due, runtime, publisher),
            interval_s=runtime.settings.pump_interval_s,
            periodic=periodic,
        )
        from noti.celery.control import serve_pump  # registers noti's inspect answers: workers only

        serve_pump(pump, worker.app)  # inspect scheduled / stats answer for its delayed set
        return pump


def _publish_due(runtime: Runtime, publisher: Publisher, items: Iterable[PublishItem]) -> int:
    """Publish the messages of records the pump found due, each carrying the trace context
    its record was made in (read only while noti traces), so a delayed or retried record
    goes on in the trace of the ``notify()`` that made it."""
    items = list(items)
    return publisher.publish(items, traces=record_traces(runtime, [item[0] for item in items]) or None)


#: How often the pump's worker checks that waiting events have a processor.
EVENT_WATCH_INTERVAL_S = 2.0


def _start_stalled_event_processor() -> None:
    from noti.events import events

    events().sweep()


#: How long one pass of the pump closes digest windows (the next pass goes on).
DIGEST_PASS_S = 0.5


def _close_due_digests() -> None:
    """Close the recipients' digest windows that are due and make their notices
    (:mod:`noti.recipients.digests`): in the pump's lock holder, not as a Celery task, so
    the windows close within ``NOTI_DIGEST_TICK_INTERVAL_S`` without a task a second in
    Flower (beat's ``noti.maintenance.digest_tick`` is the backstop)."""
    from noti.core.record import now_ms

    runtime = get_runtime()
    keys, now = runtime.keys, now_ms()
    pipe = runtime.redis.pipeline(transaction=False)
    pipe.zcount(keys.digests_due, "-inf", now)
    pipe.zcount(keys.digests_closing, "-inf", now)
    if not any(pipe.execute()):  # nothing due: the recipients layer is not even imported
        return
    from noti.recipients.api import recipients

    recipients().digests.tick(budget_s=DIGEST_PASS_S)


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


class CancelWhereThePoolCan(bootsteps.StartStopStep):
    """Consumer bootstep: tasks in progress are cancelled when the broker connection is lost
    (``worker_cancel_long_running_tasks_on_connection_loss``, noti's default) only where the
    pool can stop one (prefork, eventlet, gevent).

    Celery cancels a request through ``pool.terminate_job``, which the solo and threads pools
    do not have: Celery 5.5.0 lets that ``NotImplementedError`` out of the consumer and the
    worker stops (``Unrecoverable error``) whenever Redis goes away while one of their tasks
    runs, a user's listener task or noti's own; later releases catch it and log a traceback
    per task. In those pools the task runs to its end instead; its message, which cannot be
    acked on the lost connection, comes back after the visibility timeout (noti's records
    are final by then: the claim turns the redelivery away)."""

    requires = ("celery.worker.consumer.tasks:Tasks",)

    def start(self, c: Any) -> None:
        if not pool_can_terminate(c.pool):
            c.app.conf.worker_cancel_long_running_tasks_on_connection_loss = False


def pool_can_terminate(pool: Any) -> bool:
    """Whether ``pool`` can stop a task in progress (prefork sets ``terminate_job`` on the
    instance when it starts, eventlet and gevent define it; solo and threads inherit the
    base pool's, which raises)."""
    from celery.concurrency.base import BasePool

    if pool is None:
        return False
    return "terminate_job" in vars(pool) or type(pool).terminate_job is not BasePool.terminate_job


#: Seconds a stopping consumer waits for batch-mode sends in flight.
DRAIN_TIMEOUT_S = 15.0
