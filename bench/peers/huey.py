"""huey 3.5 as a team chasing speed would run it: ``RedisHuey``, results off, stock otherwise.

The module is the app ``huey_consumer`` loads (``bench.peers.huey.huey``), configured from
``BENCH_BROKER_URL``; its tasks use huey's own Redis connection (``huey.storage.conn``).
Reads are huey's default blocking ``BRPOP`` (1 s timeout), so a worker is never idle-sleeping
while work exists: the consumer's polling options ``-d``/``-m``/``-b`` apply only after a
failed read, and are left at their defaults. Every consumer runs with ``-q`` (warnings only:
at INFO huey logs two lines per task; the Celery baseline runs at ``-l WARNING`` too).

- enqueue: a task called one at a time (one ``LPUSH``);
- counting drain and latency: one consumer, ``-k process -w`` :data:`PROCESSES`. A huey
  task costs four round trips (``BRPOP``, the revoked check's ``HMGET``, the task's
  ``INCR``, ``HDEL``), so its processes wait on Redis: on 20,000, ``-w 2`` 7,100/s,
  ``-w 3`` 8,600–9,200/s, ``-w 4`` 8,000–9,800/s, ``-w 6`` 9,500/s; threads
  (``-k thread -w 4``/``8``) 4,900/3,300/s;
- 20 ms HTTP drain: :data:`HTTP_CONSUMERS` consumers (all but one with ``-n``: one consumer
  enqueues periodic tasks, as huey's deployment guide has it), each ``-k thread -w``
  :data:`HTTP_THREADS` (greenlets would need gevent, which the bench does not install); on
  5,000: 1 × 50 1,690–1,780/s, 2 × 25 2,090–2,160/s, 2 × 50 3,080–3,270/s, 2 × 100
  2,920–3,150/s, 4 × 50 3,800–4,130/s, 6 × 25 4,040–4,410/s, 4 × 25 3,740–3,950/s (two
  consumers per core, as for the other libraries).

huey has no bulk enqueue (``TaskWrapper.map`` calls ``enqueue`` once per item), so the drains
are filled with huey's own messages (``Huey.serialize_task`` of ``task.s(...)``) LPUSHed in
chunks onto its queue key, as ``huey.enqueue`` pushes them one at a time; the fill is not
timed.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

import redis
from huey import RedisHuey
from huey.api import Task

from bench._drain import Drain, DrainFailed
from bench._harness import Worker
from bench._noti import PHONE, SECRET
from bench._probes import DONE_KEY, LAG_KEY, counted_drain, lag_latency, timed_drain
from bench._signed_post import post as signed_post
from bench.fake_http import FakeHttp
from bench.peers import broker_url

__all__ = ["drain_http", "drain_noop", "enqueue", "huey", "incr", "lag", "latency", "noop", "post"]

huey = RedisHuey("bench", results=False, url=os.environ.get("BENCH_BROKER_URL", "redis://127.0.0.1:6379/3"))
CHUNK = 1000
PROCESSES = 4
HTTP_CONSUMERS, HTTP_THREADS = 4, 25
#: How each run is set up, for the table's notes.
SETUP = {
    "enqueue": "a no-op task called one at a time (RedisHuey)",
    "drain_noop": f"huey_consumer -k process -w {PROCESSES}, INCR-only task",
    "drain_http": (
        f"{HTTP_CONSUMERS} huey_consumer x -k thread -w {HTTP_THREADS}, "
        "one keep-alive http.client POST per task"
    ),
    "latency": f"huey_consumer -k process -w {PROCESSES}, a task recording time.time()-t0",
}


@huey.task()
def noop(phone: str, text: str) -> None:
    """Does nothing: the cost of a huey task itself."""


@huey.task()
def incr() -> None:
    """The drain task: one INCR, so the driver can count what was done."""
    huey.storage.conn.incr(DONE_KEY)


@huey.task(context=True)
def post(url: str, body: str, task: Task) -> None:
    """One signed POST to the fake provider on this thread's keep-alive connection, the
    task's id as the webhook-id."""
    signed_post(url, body, task.id)


@huey.task()
def lag(t0: float) -> None:
    """How long after ``t0`` (the sender's time.time()) this ran."""
    huey.storage.conn.rpush(LAG_KEY, time.time() - t0)


def _use(url: str) -> redis.Redis:
    """Point this process's huey at its database on ``url`` and empty that database."""
    broker = broker_url(url, "huey")
    if huey.storage_kwargs.get("url") != broker:
        huey.storage.pool.disconnect()
        huey.storage_kwargs["url"] = broker
        huey.storage = huey.create_storage()
    conn: redis.Redis = huey.storage.conn
    conn.flushdb()
    return conn


def _consumer(url: str, *args: str) -> Worker:
    """``huey_consumer bench.peers.huey.huey -q ARGS`` on ``url``'s huey database."""
    env = {"BENCH_BROKER_URL": broker_url(url, "huey"), "BENCH_WEBHOOK_SECRET": SECRET}
    argv = [sys.executable, "-m", "huey.bin.huey_consumer", f"{__name__}.huey", "-q", *args]
    return Worker(argv, env)


def _fill(tasks: Sequence[Task]) -> None:
    """Queue ``tasks`` as ``huey.enqueue`` would (its serialized message, LPUSHed onto its
    queue key), a chunk of messages per LPUSH; raise unless all of them are queued."""
    storage = huey.storage
    messages = [huey.serialize_task(task) for task in tasks]
    for start in range(0, len(messages), CHUNK):
        storage.conn.lpush(storage.queue_key, *messages[start : start + CHUNK])
    if storage.queue_size() != len(tasks):
        raise DrainFailed(f"huey's queue holds {storage.queue_size()} messages for {len(tasks)}")


def enqueue(url: str, n: int) -> float:
    """``n`` ``noop(PHONE, text)`` calls, one at a time, per second (after one warm-up call)."""
    _use(url)
    noop(PHONE, "warm-up")
    started = time.perf_counter()
    for i in range(n):
        noop(PHONE, f"message {i}")
    rate = n / (time.perf_counter() - started)
    queued = huey.storage.queue_size()
    if queued != n + 1:
        raise AssertionError(f"huey's queue holds {queued} messages for {n + 1} enqueued")
    return rate


def drain_noop(url: str, n: int) -> Drain:
    """``n`` INCR-only tasks on one process consumer: fill, start, time, verify."""
    conn = _use(url)
    _fill([incr.s() for _ in range(n)])
    drain = counted_drain(conn, n, [_consumer(url, "-k", "process", "-w", str(PROCESSES))], "huey")
    if left := huey.storage.queue_size():
        raise DrainFailed(f"huey left {left} of {n} tasks queued")
    return drain


def drain_http(url: str, n: int, fake: FakeHttp) -> Drain:
    """``n`` POST tasks to ``fake`` on the thread consumers: fill, start, time, verify (the
    fake server must have seen each task's id once, correctly signed)."""
    conn = _use(url)
    fake.reset()
    tasks = [post.s(fake.url, json.dumps({"n": i, "text": "hello"})) for i in range(n)]
    _fill(tasks)
    threads = ("-k", "thread", "-w", str(HTTP_THREADS))
    workers = [_consumer(url, *threads, *(("-n",) if i else ())) for i in range(HTTP_CONSUMERS)]
    drain = timed_drain(fake.count, n, workers, conn, others=[fake.pid])
    fake.expect(n, {task.id for task in tasks})
    if left := huey.storage.queue_size():
        raise DrainFailed(f"huey left {left} of {n} POST tasks queued")
    return drain


def latency(url: str, seconds: float) -> dict[str, Any]:
    """Latencies (ms) of ``lag(t0)`` sent at 200/s for ``seconds`` to the process consumer."""
    conn = _use(url)
    workers = [_consumer(url, "-k", "process", "-w", str(PROCESSES))]
    return lag_latency(conn, workers, lag, seconds, "huey")
