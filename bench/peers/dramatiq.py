"""dramatiq on its own ``RedisBroker``: default middleware, no results, ``dramatiq`` workers.

The module is the app ``python -m dramatiq bench.peers.dramatiq`` loads (the broker set with
:func:`dramatiq.set_broker` at import, on ``BENCH_BROKER_URL``) and the driver the scenarios
call. dramatiq 2's default middleware (AgeLimit, TimeLimit, ShutdownNotifications, Callbacks,
Pipelines, Retries) is kept as a team would have it; Prometheus is no longer among the
defaults in 2.x, so nothing opens a port. The broker's Lua script does every enqueue, fetch
(up to the prefetch) and ack in one round trip each.

Workers, each process prefetching :data:`PREFETCH` messages (the documented
``dramatiq_queue_prefetch`` setting; with the default, twice the threads, the consumer
keeps finding its prefetch full and backs off, 5 ms doubling, and the counting drain ran at
half the rate). The process and thread counts are the best of those tried here (two
processes per core: each waits on Redis round trips much of the time):

- counting drain and latency: :data:`PROCESSES` processes × :data:`THREADS` threads; on
  20,000: 2 × 8 5,900–10,500/s (bimodal), 3 × 8 8,400–10,100/s, 4 × 8 8,400–9,400/s,
  4 × 4 9,600–10,100/s, 6 × 2 8,900–10,000/s, 4 × 2 10,200–11,200/s;
- 20 ms HTTP drain: :data:`HTTP_PROCESSES` × :data:`HTTP_THREADS` threads, one keep-alive
  ``http.client`` connection per thread (the issue quoted 2 × 25, which caps at 50 POSTs in
  flight, 2,500/s); on 5,000: 2 × 25 2,260/s, 2 × 50 3,460–3,990/s, 2 × 100 3,340–4,720/s,
  2 × 200 2,150–2,490/s, 4 × 25 3,660–4,440/s, 6 × 50 4,100–4,440/s, 4 × 100
  4,130–4,580/s, 4 × 50 4,700–5,080/s.

The drains wait for dramatiq's acks (its ``.msgs`` hash empty) before stopping the workers:
the fake server counts a POST before the worker that sent it has acked it.
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

from bench._drain import Drain, DrainFailed
from bench._harness import Worker
from bench._noti import PHONE, SECRET
from bench._probes import DONE_KEY, LAG_KEY, counted_drain, lag_latency, settled, timed_drain
from bench._signed_post import post as signed_post
from bench.fake_http import FakeHttp
from bench.peers import broker_url

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

PROCESSES, THREADS = 4, 2
HTTP_PROCESSES, HTTP_THREADS = 4, 50
PREFETCH = 256
CHUNK = 1000
#: How each run is set up, for the table's notes.
SETUP = {
    "enqueue": "actor.send() one at a time (RedisBroker)",
    "drain_noop": f"{PROCESSES} processes x {THREADS} threads, prefetch {PREFETCH}, INCR-only actor",
    "drain_http": (
        f"{HTTP_PROCESSES} processes x {HTTP_THREADS} threads, prefetch {PREFETCH}, "
        "one keep-alive http.client POST per message"
    ),
    "latency": f"{PROCESSES} processes x {THREADS} threads, an actor recording time.time()-t0",
}

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


def worker(url: str, processes: int, threads: int) -> Worker:
    """``dramatiq bench.peers.dramatiq --processes P --threads T`` on ``url``, with
    ``dramatiq_queue_prefetch=``:data:`PREFETCH`."""
    argv = [
        sys.executable,
        "-m",
        "dramatiq",
        __name__,
        "--processes",
        str(processes),
        "--threads",
        str(threads),
    ]
    env = {"BENCH_BROKER_URL": url, "BENCH_WEBHOOK_SECRET": SECRET, "dramatiq_queue_prefetch": str(PREFETCH)}
    return Worker(argv, env)


def _fill(actor: dramatiq.Actor[Any, Any], args_list: Sequence[Sequence[Any]]) -> None:
    """Queue one ``actor`` message per item of ``args_list``, as ``actor.send(*args)`` would,
    but pipelined: each message is built by ``actor.message()`` and stored the way the
    broker's ``enqueue`` Lua command does (HSET ``<ns>:<queue>.msgs`` under a fresh
    ``redis_message_id``, RPUSH the id on ``<ns>:<queue>``)."""
    queue = _queue(actor)
    pipe = broker.client.pipeline(transaction=False)
    for args in args_list:
        message_id = str(uuid.uuid4())
        message = actor.message(*args).copy(options={"redis_message_id": message_id})
        pipe.hset(f"{queue}.msgs", message_id, message.encode())
        pipe.rpush(queue, message_id)
        if len(pipe) >= CHUNK:
            pipe.execute()
    pipe.execute()


def _queue(actor: dramatiq.Actor[Any, Any]) -> str:
    return f"{broker.namespace}:{actor.queue_name}"


def _acked(client: redis.Redis, actor: dramatiq.Actor[Any, Any]) -> bool:
    """Nothing of ``actor``'s queue waits for an ack (every message's entry is gone)."""
    return client.hlen(f"{_queue(actor)}.msgs") == 0


def _check_empty(client: redis.Redis, actor: dramatiq.Actor[Any, Any]) -> None:
    left, unacked = client.llen(_queue(actor)), client.hlen(f"{_queue(actor)}.msgs")
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
    queued = client.llen(_queue(noop))
    if queued != n + 1:
        raise AssertionError(f"dramatiq queued {queued} messages for {n + 1} sends")
    return rate


def drain_noop(url: str, n: int) -> Drain:
    """``n`` INCR messages on :data:`PROCESSES` × :data:`THREADS`: fill, start, time, verify."""
    client = use_broker(broker_url(url, "dramatiq"))
    _fill(incr, [()] * n)
    workers = [worker(broker_url(url, "dramatiq"), PROCESSES, THREADS)]
    drain = counted_drain(client, n, workers, "dramatiq", before_stop=settled(lambda: _acked(client, incr)))
    _check_empty(client, incr)
    return drain


def drain_http(url: str, n: int, fake: FakeHttp) -> Drain:
    """``n`` POST messages to ``fake`` on :data:`HTTP_PROCESSES` × :data:`HTTP_THREADS`."""
    client = use_broker(broker_url(url, "dramatiq"))
    fake.reset()
    ids = [str(uuid.uuid4()) for _ in range(n)]
    _fill(post, [(fake.url, json.dumps({"n": i, "text": "hello"}), ids[i]) for i in range(n)])
    workers = [worker(broker_url(url, "dramatiq"), HTTP_PROCESSES, HTTP_THREADS)]
    drain = timed_drain(
        fake.count, n, workers, client, others=[fake.pid], before_stop=settled(lambda: _acked(client, post))
    )
    fake.expect(n, set(ids))
    _check_empty(client, post)
    return drain


def latency(url: str, seconds: float) -> dict[str, Any]:
    """``lag.send(t0)`` at 200/s for ``seconds`` on :data:`PROCESSES` × :data:`THREADS`;
    latencies in ms."""
    client = use_broker(broker_url(url, "dramatiq"))
    workers = [worker(broker_url(url, "dramatiq"), PROCESSES, THREADS)]
    return lag_latency(client, workers, lag.send, seconds, "dramatiq")
