"""dramatiq on its own ``RedisBroker``: default middleware, no results, ``dramatiq`` workers.

The module is the app ``python -m dramatiq bench.peers.dramatiq`` loads (the broker set with
:func:`dramatiq.set_broker` at import, on ``BENCH_BROKER_URL``) and the driver the scenarios
call. dramatiq 2's default middleware (AgeLimit, TimeLimit, ShutdownNotifications, Callbacks,
Pipelines, Retries) is kept as a team would have it; Prometheus is no longer among the
defaults in 2.x, so nothing opens a port. The broker's Lua script does every enqueue, fetch
(up to the prefetch) and ack in one round trip each.

Workers: ``--processes 2`` (the machine's cores) with dramatiq's default 8 threads for the
INCR drain and the latency probes (:data:`NOOP_THREADS`), 25 threads for the 20 ms POSTs
(:data:`HTTP_THREADS`, the issue's "dramatiq 2 × 25 threads"); 1 thread drained the INCRs no
faster than 8. Each process prefetches :data:`PREFETCH` messages (the documented
``dramatiq_queue_prefetch`` setting; default: twice the threads, in-progress ones included):
with the default, the consumer thread keeps finding its prefetch full and backs off (5 ms,
doubling), and the INCR drain ran at half the rate; the HTTP drain, bound by its 50 POSTs in
flight, and the latency probes were the same either way.
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from collections.abc import Sequence
from typing import Any

import dramatiq
import redis
from dramatiq.brokers.redis import RedisBroker

from bench._drain import Drain, DrainFailed, time_drain
from bench._harness import Worker, running, wait_for
from bench._noti import PHONE, SECRET
from bench._signed_post import post as signed_post
from bench.fake_http import FakeHttp
from bench.peers import DONE_KEY, LAG_KEY, broker_url

__all__ = [
    "drain_http",
    "drain_noop",
    "enqueue",
    "incr",
    "lag",
    "latency",
    "noop",
    "post",
    "use_broker",
    "worker",
]

NOOP_THREADS = 8
HTTP_THREADS = 25
PREFETCH = 256
CHUNK = 1000

_url = os.environ.get("BENCH_BROKER_URL", "redis://127.0.0.1:6379/4")
broker = RedisBroker(url=_url)  # type: ignore[no-untyped-call]
dramatiq.set_broker(broker)
_redis = redis.Redis.from_url(_url)


@dramatiq.actor
def noop(phone: str, text: str) -> None:
    """Does nothing: the cost of enqueueing a dramatiq message."""


@dramatiq.actor
def incr() -> None:
    """The drain task: one INCR, so the driver can count what was done."""
    _redis.incr(DONE_KEY)


@dramatiq.actor
def post(url: str, body: str, webhook_id: str) -> None:
    """One signed POST on this worker thread's keep-alive connection. The webhook id travels
    in the arguments (dramatiq's message id is only visible through the CurrentMessage
    middleware, which is not a default)."""
    signed_post(url, body, webhook_id)


@dramatiq.actor
def lag(t0: float) -> None:
    """Record how long after ``t0`` (the sender's ``time.time()``) this ran."""
    _redis.rpush(LAG_KEY, time.time() - t0)


ACTORS = (noop, incr, post, lag)


def use_broker(url: str) -> redis.Redis:
    """Point the actors of this process (the driver) at a new ``RedisBroker`` on ``url`` and
    flush its database; returns a client of it."""
    global broker, _url
    if url != _url:
        broker = RedisBroker(url=url)  # type: ignore[no-untyped-call]
        dramatiq.set_broker(broker)
        for actor in ACTORS:
            actor.broker = broker
            broker.declare_actor(actor)
        _url = url
    client = redis.Redis.from_url(url)
    client.flushdb()
    return client


def worker(url: str, threads: int) -> Worker:
    """``dramatiq bench.peers.dramatiq --processes 2 --threads <threads>`` on ``url``, with
    ``dramatiq_queue_prefetch=``:data:`PREFETCH`."""
    argv = [sys.executable, "-m", "dramatiq", __name__, "--processes", "2", "--threads", str(threads)]
    env = {"BENCH_BROKER_URL": url, "BENCH_WEBHOOK_SECRET": SECRET, "dramatiq_queue_prefetch": str(PREFETCH)}
    return Worker.command(argv, env)


def _fill(actor: dramatiq.Actor[Any, Any], args_list: Sequence[Sequence[Any]]) -> None:
    """Queue one ``actor`` message per item of ``args_list``, as ``actor.send(*args)`` would,
    but pipelined: each message is built by ``actor.message()`` and stored the way the
    broker's ``enqueue`` Lua command does (HSET ``<ns>:<queue>.msgs`` under a fresh
    ``redis_message_id``, RPUSH the id on ``<ns>:<queue>``)."""
    queue = f"{broker.namespace}:{actor.queue_name}"
    pipe = broker.client.pipeline(transaction=False)
    for args in args_list:
        message_id = str(uuid.uuid4())
        message = actor.message(*args).copy(options={"redis_message_id": message_id})
        pipe.hset(f"{queue}.msgs", message_id, message.encode())
        pipe.rpush(queue, message_id)
        if len(pipe) >= CHUNK:
            pipe.execute()
    pipe.execute()


def _check_empty(client: redis.Redis, actor: dramatiq.Actor[Any, Any]) -> None:
    queue = f"{broker.namespace}:{actor.queue_name}"
    left, unacked = client.llen(queue), client.hlen(f"{queue}.msgs")
    if left or unacked:
        raise DrainFailed(f"dramatiq left {left} messages queued, {unacked} not acknowledged")


def enqueue(url: str, n: int) -> float:
    """``n`` ``noop.send(PHONE, text)`` one at a time (one Lua EVALSHA each), per second."""
    client = use_broker(broker_url(url, "dramatiq"))
    noop.send(PHONE, "warm-up")
    started = time.perf_counter()
    for i in range(n):
        noop.send(PHONE, f"message {i}")
    rate = n / (time.perf_counter() - started)
    queued = client.llen(f"{broker.namespace}:{noop.queue_name}")
    if queued != n + 1:
        raise AssertionError(f"dramatiq queued {queued} messages for {n + 1} sends")
    return rate


def drain_noop(url: str, n: int) -> Drain:
    """``n`` INCR messages on 2 processes × :data:`NOOP_THREADS` threads: fill, start, time."""
    client = use_broker(broker_url(url, "dramatiq"))
    _fill(incr, [()] * n)
    workers = [worker(broker_url(url, "dramatiq"), NOOP_THREADS)]
    with running(workers):
        drain = time_drain(lambda: int(client.get(DONE_KEY) or 0), n, workers=workers, redis_client=client)
    done = int(client.get(DONE_KEY) or 0)
    if done != n:
        raise DrainFailed(f"dramatiq ran {done} INCR messages for {n}")
    _check_empty(client, incr)
    return drain


def drain_http(url: str, n: int, fake: FakeHttp) -> Drain:
    """``n`` POST messages to ``fake`` on 2 processes × :data:`HTTP_THREADS` threads."""
    from bench.drain_bench import _check_fake

    client = use_broker(broker_url(url, "dramatiq"))
    fake.reset()
    ids = [str(uuid.uuid4()) for _ in range(n)]
    _fill(post, [(fake.url, json.dumps({"n": i, "text": "hello"}), ids[i]) for i in range(n)])
    workers = [worker(broker_url(url, "dramatiq"), HTTP_THREADS)]
    with running(workers):
        drain = time_drain(fake.count, n, workers=workers, redis_client=client, others=[fake.pid])
    _check_fake(fake, n, set(ids))
    _check_empty(client, post)
    return drain


def latency(url: str, seconds: float) -> dict[str, Any]:
    """``lag.send(t0)`` at 200/s for ``seconds`` on 2 processes × :data:`NOOP_THREADS` threads,
    after 50 warm-up sends, as ``bench.latency_bench.celery_latency`` does; latencies in ms."""
    from bench.latency_bench import RATE, SETTLE_S, WARMUP, paced

    client = use_broker(broker_url(url, "dramatiq"))

    def send(i: int) -> None:
        lag.send(time.time())

    with running([worker(broker_url(url, "dramatiq"), NOOP_THREADS)]):
        for i in range(WARMUP):
            send(i)
        wait_for(lambda: client.llen(LAG_KEY) >= WARMUP, 60, 0.02)
        client.delete(LAG_KEY)
        count = int(RATE * seconds)
        behind = paced(RATE, seconds, send)
        wait_for(lambda: client.llen(LAG_KEY) >= count, SETTLE_S, 0.02)
    values = [float(x) * 1000 for x in client.lrange(LAG_KEY, 0, -1)]
    if len(values) != count:
        raise AssertionError(f"dramatiq: {count} sent, {len(values)} ran")
    return {"ms": values, "behind_s": behind, "coarse": False}
