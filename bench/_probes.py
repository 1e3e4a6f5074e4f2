"""What the baselines' runs share, whichever library runs them: the paced sender and the
``lag`` probe of the latency scenario, and timing a drain until its work is settled.

Plain Celery (:mod:`bench.plain_celery`) and every peer (:mod:`bench.peers`) run the same
two probe tasks: one that ``INCR``s :data:`DONE_KEY` (the drains count them) and one that
``RPUSH``es ``time.time() - t0`` onto :data:`LAG_KEY` (the latency scenario reads them).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from bench._drain import Drain, DrainFailed, time_drain
from bench._harness import Worker, running, wait_for

__all__ = [
    "DONE_KEY",
    "LAG_KEY",
    "RATE",
    "SETTLE_S",
    "WARMUP",
    "counted_drain",
    "lag_latency",
    "paced",
    "settled",
    "timed_drain",
]

DONE_KEY, LAG_KEY = "bench:done", "bench:lag"
#: The latency scenario's steady rate, its warm-up sends, and how long the last may take.
RATE = 200
WARMUP = 50
SETTLE_S = 30.0


def paced(rate: float, seconds: float, send: Callable[[int], None]) -> float:
    """Call ``send(i)`` ``rate`` times a second for ``seconds``, on absolute deadlines; returns
    how far behind schedule the sender fell at worst (s)."""
    count = int(rate * seconds)
    start = time.perf_counter()
    behind = 0.0
    for i in range(count):
        due = start + i / rate
        wait = due - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
        else:
            behind = max(behind, -wait)
        send(i)
    return behind


def timed_drain(
    count: Callable[[], int],
    n: int,
    workers: Sequence[Worker],
    client: Any,
    *,
    others: Sequence[int] = (),
    before_stop: Callable[[Drain], object] | None = None,
) -> Drain:
    """Time the drain of ``n`` by ``count()`` (:func:`~bench._drain.time_drain`) on the
    started ``workers``, and stop them on the way out; ``before_stop(drain)`` runs while
    they still run (wait for their acks, read their round-trip counters)."""
    with running(workers):
        drain = time_drain(count, n, workers=workers, redis_client=client, others=others)
        if before_stop is not None:
            before_stop(drain)
    return drain


def settled(predicate: Callable[[], bool]) -> Callable[[Drain], None]:
    """A ``before_stop`` that waits (up to :data:`SETTLE_S`) until ``predicate()`` holds: the
    workers' bookkeeping, such as acks, done, so what they leave behind can be checked."""
    return lambda drain: wait_for(predicate, SETTLE_S, 0.02)


def counted_drain(client: Any, n: int, workers: Sequence[Worker], what: str, **kw: Any) -> Drain:
    """:func:`timed_drain` of ``n`` tasks that each ``INCR`` :data:`DONE_KEY` on ``client``;
    raises :class:`~bench._drain.DrainFailed` unless exactly ``n`` ran."""
    drain = timed_drain(lambda: int(client.get(DONE_KEY) or 0), n, workers, client, **kw)
    done = int(client.get(DONE_KEY) or 0)
    if done != n:
        raise DrainFailed(f"{what} ran {done} counting tasks for {n}")
    return drain


def lag_latency(
    client: Any, workers: Sequence[Worker], send: Callable[[float], None], seconds: float, what: str
) -> dict[str, Any]:
    """Latencies (ms) of the ``lag`` probe: with ``workers`` running, :data:`WARMUP` sends,
    then ``send(time.time())`` :data:`RATE` times a second for ``seconds``; each run of the
    task pushed ``time.time() - t0`` onto :data:`LAG_KEY` of ``client``."""
    count = int(RATE * seconds)
    with running(workers):
        for _ in range(WARMUP):
            send(time.time())
        wait_for(lambda: client.llen(LAG_KEY) >= WARMUP, 60, 0.02)
        client.delete(LAG_KEY)
        behind = paced(RATE, seconds, lambda i: send(time.time()))
        wait_for(lambda: client.llen(LAG_KEY) >= count, SETTLE_S, 0.02)
    values = [float(x) * 1000 for x in client.lrange(LAG_KEY, 0, -1)]
    if len(values) != count:
        raise AssertionError(f"{what}: {count} sent, {len(values)} ran")
    return {"ms": values, "behind_s": behind, "coarse": False}
