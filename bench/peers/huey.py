"""huey 3.5 as a team chasing speed would run it: ``RedisHuey``, results off, stock otherwise.

The module is the app ``huey_consumer`` loads (``bench.peers.huey.huey``), configured from
``BENCH_BROKER_URL``; its tasks use huey's own Redis connection (``huey.storage.conn``).
Reads are huey's default blocking ``BRPOP`` (1 s timeout), so a worker is never idle-sleeping
while work exists: the consumer's polling options ``-d``/``-m``/``-b`` (initial delay,
maximum delay, back-off) apply only to non-blocking storage and after a failed read, and are
left at their defaults. Every consumer runs with ``-q`` (warnings only: at its default INFO
level huey logs two lines per task; the Celery baseline runs at ``-l WARNING`` too).

- no-op drain and latency: one consumer, ``-k process -w 2`` (a worker process per core);
- 20 ms HTTP drain: two consumers (one per core, the second with ``-n``: one consumer enqueues
  periodic tasks, as huey's deployment guide has multiple consumers run), each
  ``-k thread -w 25``: the Celery baseline's 50 threads, split so that one GIL does not
  carry them all (one ``-k thread -w 50`` consumer drained ~15 % slower here; greenlets
  would need gevent, which the bench does not install).

huey has no bulk enqueue (``TaskWrapper.map`` calls ``enqueue`` once per item), so the drains
are filled with huey's own messages (``Huey.serialize_task`` of ``task.s(...)``) LPUSHed
in chunks onto its queue key, as ``huey.enqueue`` would push them one at a time; the fill
is not timed. The driver functions import the bench's harness when called, so the consumers
load only huey, redis and the signed POST.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import redis
from huey import RedisHuey
from huey.api import Task

from bench._signed_post import post as signed_post
from bench.peers import DONE_KEY, LAG_KEY, broker_url

if TYPE_CHECKING:
    from bench._drain import Drain
    from bench._harness import Worker
    from bench.fake_http import FakeHttp

__all__ = ["drain_http", "drain_noop", "enqueue", "huey", "incr", "lag", "latency", "noop", "post"]

huey = RedisHuey("bench", results=False, url=os.environ.get("BENCH_BROKER_URL", "redis://127.0.0.1:6379/15"))
CHUNK = 1000
HTTP_CONSUMERS, HTTP_THREADS = 2, 25


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
    from bench._harness import Worker
    from bench._noti import SECRET

    env = {"BENCH_BROKER_URL": broker_url(url, "huey"), "BENCH_WEBHOOK_SECRET": SECRET}
    argv = [sys.executable, "-m", "huey.bin.huey_consumer", f"{__name__}.huey", "-q", *args]
    return Worker.command(argv, env)


def _fill(tasks: Sequence[Task]) -> None:
    """Queue ``tasks`` as ``huey.enqueue`` would (its serialized message, LPUSHed onto its
    queue key), a chunk of messages per LPUSH; raise unless all of them are queued."""
    from bench._drain import DrainFailed

    storage = huey.storage
    messages = [huey.serialize_task(task) for task in tasks]
    for start in range(0, len(messages), CHUNK):
        storage.conn.lpush(storage.queue_key, *messages[start : start + CHUNK])
    if storage.queue_size() != len(tasks):
        raise DrainFailed(f"huey's queue holds {storage.queue_size()} messages for {len(tasks)}")


def enqueue(url: str, n: int) -> float:
    """``n`` ``noop(PHONE, text)`` calls, one at a time, per second (after one warm-up call)."""
    from bench._noti import PHONE

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
    """``n`` INCR-only tasks on ``huey_consumer -k process -w 2``: fill, start, time, verify."""
    from bench._drain import DrainFailed, time_drain
    from bench._harness import running

    conn = _use(url)
    _fill([incr.s() for _ in range(n)])
    workers = [_consumer(url, "-k", "process", "-w", "2")]
    with running(workers):
        drain = time_drain(lambda: int(conn.get(DONE_KEY) or 0), n, workers=workers, redis_client=conn)
    done, left = int(conn.get(DONE_KEY) or 0), huey.storage.queue_size()
    if done != n or left:
        raise DrainFailed(f"huey ran {done} tasks for {n}; {left} left queued")
    return drain


def drain_http(url: str, n: int, fake: FakeHttp) -> Drain:
    """``n`` POST tasks to ``fake`` on two ``huey_consumer -k thread -w 25``: fill, start,
    time, verify (the fake server must have seen each task's id once, correctly signed)."""
    from bench._drain import DrainFailed, time_drain
    from bench._harness import running
    from bench.drain_bench import _check_fake

    conn = _use(url)
    fake.reset()
    tasks = [post.s(fake.url, json.dumps({"n": i, "text": "hello"})) for i in range(n)]
    _fill(tasks)
    threads = ("-k", "thread", "-w", str(HTTP_THREADS))
    workers = [_consumer(url, *threads, *(("-n",) if i else ())) for i in range(HTTP_CONSUMERS)]
    with running(workers):
        drain = time_drain(fake.count, n, workers=workers, redis_client=conn, others=[fake.pid])
    _check_fake(fake, n, {task.id for task in tasks})
    if left := huey.storage.queue_size():
        raise DrainFailed(f"huey left {left} of {n} POST tasks queued")
    return drain


def latency(url: str, seconds: float) -> dict[str, Any]:
    """Latencies (ms) of ``lag(t0)`` sent at 200/s for ``seconds`` to ``huey_consumer -k
    process -w 2``, after a warm-up, as ``bench.latency_bench.celery_latency`` measures them."""
    from bench._harness import running, wait_for
    from bench.latency_bench import RATE, SETTLE_S, WARMUP, paced

    conn = _use(url)
    with running([_consumer(url, "-k", "process", "-w", "2")]):
        for _ in range(WARMUP):
            lag(time.time())
        wait_for(lambda: conn.llen(LAG_KEY) >= WARMUP, 60, 0.02)
        conn.delete(LAG_KEY)
        count = int(RATE * seconds)
        behind = paced(RATE, seconds, lambda i: lag(time.time()))
        wait_for(lambda: conn.llen(LAG_KEY) >= count, SETTLE_S, 0.02)
    values = [float(x) * 1000 for x in conn.lrange(LAG_KEY, 0, -1)]
    if len(values) != count:
        raise AssertionError(f"huey: {count} sent, {len(values)} ran")
    return {"ms": values, "behind_s": behind, "coarse": False}
