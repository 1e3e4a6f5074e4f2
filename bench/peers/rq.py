"""RQ 3.0 as its documentation shows it: a ``Queue`` (``default``) on its own Redis database,
stock settings (pickle serializer, default job timeout and result TTL).

Only the enqueue side is measured (scenarios 1 and 2): RQ forks a process per job and drains
at ~56/s, so it is not in the drain scenarios and no RQ worker is started. The job is the
module-level ``noop(phone, text)`` (RQ records it as ``bench.peers.rq.noop``).

- :func:`enqueue`: ``queue.enqueue(noop, PHONE, text)`` one at a time;
- :func:`enqueue_many`: ``queue.enqueue_many([Queue.prepare_data(noop, (PHONE, text)), …])``,
  which (its docs say) enqueues all the jobs in a single Redis pipeline of its own; passing
  one in is optional, so the bench does not.
"""

from __future__ import annotations

import time

import redis
from rq import Queue

from bench._noti import PHONE
from bench.peers import broker_url

__all__ = ["SETUP", "enqueue", "enqueue_many", "noop"]

#: How each run is set up, for the table's notes.
SETUP = {
    "enqueue": "queue.enqueue() one at a time",
    "enqueue_many": "Queue.enqueue_many of Queue.prepare_data no-op jobs (one pipeline)",
}


def noop(phone: str, text: str) -> None:
    """Does nothing: the cost of an RQ job itself."""


def _queue(url: str) -> Queue:
    """RQ's default queue on its database of ``url``, that database emptied first."""
    conn = redis.Redis.from_url(broker_url(url, "rq"))
    conn.flushdb()
    return Queue(connection=conn)


def _check(queue: Queue, n: int) -> None:
    """Raise unless ``n`` jobs are queued."""
    if (queued := queue.count) != n:
        raise AssertionError(f"RQ's queue holds {queued} jobs for {n} enqueued")


def enqueue(url: str, n: int) -> float:
    """``n`` ``queue.enqueue(noop, PHONE, text)`` calls, one at a time, per second (after one
    warm-up call)."""
    queue = _queue(url)
    try:
        queue.enqueue(noop, PHONE, "warm-up")
        started = time.perf_counter()
        for i in range(n):
            queue.enqueue(noop, PHONE, f"message {i}")
        rate = n / (time.perf_counter() - started)
        _check(queue, n + 1)
    finally:
        queue.connection.close()
    return rate


def enqueue_many(url: str, n: int) -> float:
    """``n`` jobs in one ``queue.enqueue_many`` call, per second; the ``Queue.prepare_data``
    list is built before the timing, as noti's items are (it costs ~1 µs a job)."""
    queue = _queue(url)
    try:
        queue.enqueue(noop, PHONE, "warm-up")
        queue.connection.flushdb()
        prepared = [Queue.prepare_data(noop, (PHONE, f"message {i}")) for i in range(n)]
        started = time.perf_counter()
        jobs = queue.enqueue_many(prepared)
        rate = n / (time.perf_counter() - started)
        if len(jobs) != n:
            raise AssertionError(f"RQ's enqueue_many returned {len(jobs)} jobs for {n}")
        _check(queue, n)
    finally:
        queue.connection.close()
    return rate
