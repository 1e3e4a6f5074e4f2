"""The read model: a snapshot of the whole cluster's state, read from Redis in two round trips.

Both the Prometheus collector (:mod:`noti.observe.prometheus`) and ``noti status`` render a
:class:`Snapshot`; neither keeps counts of its own, so every exporter and every screen shows
the same cluster-wide numbers.

Round trip 1 (one pipeline; with a broker on another Redis, one pipeline there too): the
counters hash (:mod:`noti.redis.counters`), the record count per status, the delayed set (size,
entries due, the oldest due), the dead letters, the event queue and processor lock, the
worker heartbeats (:mod:`noti.observe.presence`), the number-pool registry, and from the
broker the length of every priority list of noti's queues, the oldest message of each
channel list and kombu's unacked count. Round trip 2: the records of those oldest messages
(when each became due), the head event's age and each pool's number states.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import redis

from noti.core.keys import Keys
from noti.core.record import DELIVERY_STATES, Channel, Status
from noti.events.liveness import Holder
from noti.numpool.script import decode_state
from noti.observe.presence import WorkerInfo, read_workers
from noti.redis.conn import connect
from noti.redis.counters import Family, parse
from noti.redis.outage import translate_errors

if TYPE_CHECKING:
    from noti.sending.runtime import Runtime

__all__ = [
    "EventsState",
    "Observer",
    "PoolState",
    "QueueState",
    "RateLineState",
    "Snapshot",
    "read_snapshot",
]

#: kombu's hash of unacknowledged messages (the Redis transport's ``unacked_key``).
UNACKED_KEY = "unacked"
#: The number states a pool reports (every state but "not in the pool").
POOL_STATES = ("idle+up", "idle+down", "busy+up", "busy+down")
#: The users shown per rate-limit line (those whose clocks run furthest ahead).
LEADS = 5
_STATUS_NAMES = {
    Status.WAITING: "waiting",
    Status.DONE: "done",
    Status.FAILED: "failed",
    Status.INVALID: "invalid",
}


@dataclass(frozen=True, slots=True)
class QueueState:
    """One Celery queue of noti on the broker."""

    name: str
    #: Messages waiting in the list of each priority step, step 0 (served first) first.
    steps: tuple[int, ...]
    #: For a channel queue: seconds since the notification of its oldest waiting message
    #: became due (created, or its delay or back-off ended); 0 when none waits; None for the
    #: other queues (their messages are not notifications).
    oldest_age_s: float | None

    @property
    def total(self) -> int:
        return sum(self.steps)

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "total": self.total,
            "steps": list(self.steps),
            "oldest_age_s": self.oldest_age_s,
        }


@dataclass(frozen=True, slots=True)
class EventsState:
    """The event queue and its processor (:mod:`noti.events`)."""

    #: Events not done yet (new and activated), in arrival order.
    backlog: int
    #: Seconds since the event at the head of the queue was dispatched (0 when none waits).
    oldest_age_s: float
    #: The live processor, with the ms left on its lock; None when none is alive.
    processor: Holder | None
    lock_ttl_ms: int = 0

    def as_json(self) -> dict[str, Any]:
        holder = self.processor
        return {
            "backlog": self.backlog,
            "oldest_age_s": self.oldest_age_s,
            "processor": None
            if holder is None
            else {
                "host": holder.host,
                "pid": holder.pid,
                "since_ms": holder.since_ms,
                "task": holder.task_id,
                "lock_ttl_ms": self.lock_ttl_ms,
            },
        }


@dataclass(frozen=True, slots=True)
class PoolState:
    """One sender-number pool: how many numbers are in each state."""

    name: str
    counts: Mapping[str, int]

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "counts": dict(self.counts), "total": sum(self.counts.values())}


@dataclass(frozen=True, slots=True)
class RateLineState:
    """The line in front of one rate-limited provider's tokens (:mod:`noti.providers.ratelimit`)."""

    provider: str
    #: Records whose senders wait in line for a token now.
    waiting: int
    #: Users whose clock runs ahead of now, most ahead first, with the seconds it is ahead:
    #: how much of the provider's time they have taken lately (a flood shows here).
    leads: tuple[tuple[str, float], ...]

    def as_json(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "waiting": self.waiting,
            "leads": [{"user": user, "ahead_s": ahead} for user, ahead in self.leads],
        }


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The cluster's state at :attr:`at_ms` (see the module)."""

    at_ms: int
    #: Every counter of :mod:`noti.redis.counters`: (family, label values, value).
    counters: tuple[tuple[Family, tuple[str, ...], int], ...]
    #: Records in each status (``waiting``, ``done``, ``failed``, ``invalid``).
    records: Mapping[str, int]
    #: noti's queues on the broker; empty when the broker is not Redis (nothing to read).
    queues: tuple[QueueState, ...]
    #: Messages fetched by workers and not acknowledged yet (kombu's unacked hash); None
    #: when the broker is not Redis.
    unacked: int | None
    #: Records in the delayed set (delays, retry back-offs, lease re-checks).
    delayed: int
    #: Entries of the delayed set that are due and not moved to their queue yet.
    delayed_due: int
    #: Seconds the oldest due entry has waited for the pump (0 when none is due).
    pump_lag_s: float
    dead_letters: int
    events: EventsState
    pools: tuple[PoolState, ...]
    workers: tuple[WorkerInfo, ...]
    #: The rate-limited providers' lines, by provider name.
    rate_lines: tuple[RateLineState, ...] = ()
    #: Records in each delivery status (``accepted``, ``delivered``, ``undelivered``, ``unknown``).
    deliveries: Mapping[str, int] = field(default_factory=dict)
    #: Sent records awaiting their vendor's receipt.
    receipts_awaited: int = 0
    #: Seconds the reading took.
    read_s: float = 0.0

    @property
    def workers_alive(self) -> list[WorkerInfo]:
        return [w for w in self.workers if w.alive(self.at_ms)]

    def counter_totals(self) -> dict[str, int]:
        """Each counter family's total over its labels (``sent``: 1234 …)."""
        totals: dict[str, int] = {}
        for family, _, value in self.counters:
            totals[family.code] = totals.get(family.code, 0) + value
        return totals

    def as_json(self) -> dict[str, Any]:
        counters: dict[str, list[dict[str, Any]]] = {}
        for family, labels, value in self.counters:
            counters.setdefault(family.code, []).append(
                {**dict(zip(family.labels, labels, strict=True)), "value": value}
            )
        return {
            "at_ms": self.at_ms,
            "workers": {
                "alive": len(self.workers_alive),
                "nodes": [w.as_json(self.at_ms) for w in self.workers],
            },
            "queues": [q.as_json() for q in self.queues],
            "unacked": self.unacked,
            "delayed": {"total": self.delayed, "due": self.delayed_due, "pump_lag_s": self.pump_lag_s},
            "dead_letters": self.dead_letters,
            "records": dict(self.records),
            "events": self.events.as_json(),
            "pools": [p.as_json() for p in self.pools],
            "rate_lines": [line.as_json() for line in self.rate_lines],
            "deliveries": {**self.deliveries, "awaiting_receipt": self.receipts_awaited},
            "counters": counters,
            "read_s": self.read_s,
        }


class Observer:
    """Reads :class:`Snapshot` s of one runtime's Redis (and broker)."""

    def __init__(self, runtime: Runtime) -> None:
        from noti.celery.queues import PRIORITY_STEPS, queue_key, queue_names

        settings = runtime.settings
        self.client = runtime.redis
        self.keys = runtime.keys
        self.queues = tuple(queue_names())
        self.list_key = queue_key
        self.steps = len(PRIORITY_STEPS)
        self.rate_limited = tuple(
            sorted(name for name, options in settings.providers.items() if options.get("rate_limit_per_s"))
        )
        self.broker: redis.Redis | None = None
        if settings.broker == settings.redis_url:
            self.broker = self.client
        elif settings.broker.split("://", 1)[0] in ("redis", "rediss"):
            self.broker = connect(settings.broker)

    def snapshot(self, *, now_ms: int | None = None) -> Snapshot:
        """The cluster's state now.

        Raises:
            StoreUnavailable: Redis (or the broker) cannot be reached.
        """
        return read_snapshot(
            self.client,
            self.keys,
            broker=self.broker,
            queues=self.queues,
            steps=self.steps,
            list_key=self.list_key,
            rate_limited=self.rate_limited,
            now_ms=now_ms,
        )

    def close(self) -> None:
        """Close the broker's client when it is not the runtime's."""
        if self.broker is not None and self.broker is not self.client:
            self.broker.close()


def read_snapshot(
    client: redis.Redis,
    keys: Keys,
    *,
    broker: redis.Redis | None,
    queues: Sequence[str],
    steps: int,
    list_key: Callable[[str, int], str],
    rate_limited: Sequence[str] = (),
    now_ms: int | None = None,
) -> Snapshot:
    """Read the cluster's state (see the module): ``client`` is the record store's Redis,
    ``broker`` the broker's (``client`` itself when they are one; None when the broker is
    not Redis); ``queues`` are noti's queue names, ``steps`` the number of priority steps,
    ``list_key(queue, step)`` the broker list of a queue's step, and ``rate_limited`` the
    providers whose rate-limit lines to read.

    Raises:
        StoreUnavailable: Redis (or the broker) cannot be reached.
    """
    started = time.perf_counter()
    now = int(time.time() * 1000) if now_ms is None else now_ms
    channel_queues = {c.queue for c in Channel}
    lists = [(q, list_key(q, step)) for q in queues for step in range(steps)]
    tail_lists = [(q, key) for q, key in lists if q in channel_queues]

    # round trip 1
    with translate_errors(client):
        pipe = client.pipeline(transaction=False)
        pipe.hgetall(keys.metrics)
        for status in _STATUS_NAMES:
            pipe.zcard(keys.status_index(int(status)))
        pipe.zcard(keys.delayed)
        pipe.zcount(keys.delayed, "-inf", now)
        pipe.zrange(keys.delayed, 0, 0, withscores=True)
        pipe.xlen(keys.dead_letters)
        pipe.llen(keys.event_queue)
        pipe.zcard(keys.event_backoff)  # not processed yet either: waiting for a listener's retry
        pipe.lindex(keys.event_queue, 0)
        pipe.get(keys.event_lock)
        pipe.pttl(keys.event_lock)
        pipe.hgetall(keys.workers)
        pipe.smembers(keys.numpools)
        for name in rate_limited:
            pipe.zcard(keys.rate_line(name))
            pipe.zrevrangebyscore(keys.rate_clock(name), "+inf", now, start=0, num=LEADS, withscores=True)
        for delivery_state in DELIVERY_STATES:
            pipe.zcard(keys.delivery_index(delivery_state))
        pipe.zcard(keys.delivery_watch)
        own = len(pipe)
        on_broker = pipe if broker is client else None
        if on_broker is not None:
            _read_queues(on_broker, lists, tail_lists)
        replies = pipe.execute()
    broker_replies = replies[own:]
    if broker is not None and broker is not client:
        with translate_errors(broker):
            broker_pipe = broker.pipeline(transaction=False)
            _read_queues(broker_pipe, lists, tail_lists)
            broker_replies = broker_pipe.execute()
    metrics, *by_status = replies[:5]
    (
        delayed,
        delayed_due,
        oldest_delayed,
        dead,
        queued,
        backoff,
        event_head,
        lock_text,
        lock_ttl,
        workers,
        pools,
    ) = replies[5:16]
    backlog = int(queued) + int(backoff)
    line_replies = replies[16 : own - len(DELIVERY_STATES) - 1]
    *delivery_counts, awaited = replies[own - len(DELIVERY_STATES) - 1 : own]
    rate_lines = tuple(
        RateLineState(
            name,
            int(line_replies[2 * n]),
            tuple((str(user), round((float(at) - now) / 1000, 3)) for user, at in line_replies[2 * n + 1]),
        )
        for n, name in enumerate(rate_limited)
    )
    lengths: list[int] = []
    tails: list[tuple[str, str]] = []  # (queue, record id) of each oldest channel message
    unacked: int | None = None
    if broker is not None:
        lengths = [int(n) for n in broker_replies[: len(lists)]]
        unacked = int(broker_replies[-1])
        for (queue, _), raw in zip(tail_lists, broker_replies[len(lists) : -1], strict=True):
            record_id = _record_id(raw)
            if record_id is not None:
                tails.append((queue, record_id))
    pool_names = sorted(str(name) for name in pools)

    # round trip 2
    with translate_errors(client):
        pipe = client.pipeline(transaction=False)
        for _, record_id in tails:
            pipe.hmget(keys.record(record_id), "ct", "noti_timeout_at", "noti_st")
        if event_head:
            pipe.hget(keys.event(str(event_head)), "created_ms")
        for name in pool_names:
            pipe.hvals(keys.numpool(name, "numstate"))
        second = iter(pipe.execute() if len(pipe) else [])

    waited: dict[str, float] = {}
    for queue, _ in tails:
        age = _waited_s(next(second), now)
        if age is not None:
            waited[queue] = max(waited.get(queue, 0.0), age)
    event_age = 0.0
    if event_head:
        created = next(second)
        if created:
            event_age = max(0.0, (now - int(created)) / 1000)
    pool_states = []
    for name in pool_names:
        counts = dict.fromkeys(POOL_STATES, 0)
        for raw in next(second):
            state = decode_state(raw)
            if state is not None and state in counts:
                counts[state] += 1
        pool_states.append(PoolState(name, counts))
    queue_states = []
    if broker is not None:
        for n, queue in enumerate(queues):
            depth = tuple(lengths[n * steps : (n + 1) * steps])
            age = (waited.get(queue, 0.0) if sum(depth) else 0.0) if queue in channel_queues else None
            queue_states.append(QueueState(queue, depth, age))

    pump_lag = 0.0
    if oldest_delayed and float(oldest_delayed[0][1]) <= now:
        pump_lag = (now - float(oldest_delayed[0][1])) / 1000
    holder = None
    if lock_text:
        try:
            holder = Holder.decode(str(lock_text))
        except (ValueError, KeyError, TypeError):
            holder = Holder("?", "?", 0, 0)
    return Snapshot(
        at_ms=now,
        counters=tuple(parse(cast(dict[str, str], metrics))),
        records={name: int(n) for name, n in zip(_STATUS_NAMES.values(), by_status, strict=True)},
        queues=tuple(queue_states),
        unacked=unacked,
        delayed=int(delayed),
        delayed_due=int(delayed_due),
        pump_lag_s=pump_lag,
        dead_letters=int(dead),
        events=EventsState(
            backlog=int(backlog),
            oldest_age_s=event_age,
            processor=holder,
            lock_ttl_ms=max(int(lock_ttl), 0) if holder else 0,
        ),
        pools=tuple(pool_states),
        workers=tuple(read_workers(cast(dict[str, str], workers))),
        rate_lines=rate_lines,
        deliveries={state: int(n) for state, n in zip(DELIVERY_STATES, delivery_counts, strict=True)},
        receipts_awaited=int(awaited),
        read_s=time.perf_counter() - started,
    )


def _read_queues(pipe: Any, lists: Sequence[tuple[str, str]], tail_lists: Sequence[tuple[str, str]]) -> None:
    """Queue, on ``pipe``, the length of every list, the oldest message of each channel list
    (kombu LPUSHes and takes from the right: the oldest is the last) and the unacked count."""
    for _, key in lists:
        pipe.llen(key)
    for _, key in tail_lists:
        pipe.lindex(key, -1)
    pipe.hlen(UNACKED_KEY)


def _record_id(raw: Any) -> str | None:
    """The record id a ``noti.deliver`` message carries (its only argument), or None."""
    if not raw:
        return None
    try:
        message = json.loads(raw)
        body = message["body"]
        if message.get("properties", {}).get("body_encoding") == "base64":
            body = base64.b64decode(body)
        args = json.loads(body)[0]
        if isinstance(args, list) and len(args) == 1 and isinstance(args[0], str):
            return args[0]
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
        pass
    return None


def _waited_s(row: Sequence[Any], now_ms: int) -> float | None:
    """Seconds a queued record has been due (``[ct, noti_timeout_at, noti_st]``); None when it
    is not waiting to be sent now (finished, held by a sender, or gone)."""
    created, due, status = row
    if status != "1" or created is None:
        return None
    since = max(int(created), int(due or 0))
    if since > now_ms:  # leased by a sender, or not due yet: its message waits for nothing
        return None
    return (now_ms - since) / 1000
