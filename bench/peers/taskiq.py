"""taskiq on taskiq-redis's ``ListQueueBroker``: async tasks, no result backend, ``taskiq worker``.

The module is the app ``taskiq worker bench.peers.taskiq:broker`` loads (the broker on
``BENCH_BROKER_URL``, built at import) and the driver the scenarios call. ``ListQueueBroker``
is the plain Redis list broker, like Celery's: ``LPUSH`` to send, one ``BRPOP`` per message to
receive, no acknowledgement (so taskiq's ``--ack-type`` has nothing to act on).

Every task is a coroutine, as a team would write them on taskiq: the Redis writes go through
one ``redis.asyncio`` client per worker process, the POSTs through one kept-alive
``aiohttp.ClientSession`` per worker process (both created lazily by the first task, closed
on ``WORKER_SHUTDOWN``).

Workers (:func:`worker`): ``--workers`` :data:`WORKERS` (the machine's cores) with
``--max-async-tasks`` :data:`MAX_ASYNC_TASKS` per process, taskiq's default, spelled out:
200 POSTs in flight, so the 20 ms provider would allow 10,000/s, more than two cores can
issue (the drains are CPU-bound, at 1.5–1.7 cores: 50 or 200 async tasks drained no faster,
nor did 3 or 4 workers: 4,040–4,510/s and 6,570–6,840/s for 2, 3 and 4 alike). uvloop is
installed (``taskiq[uv]``), which taskiq's worker uses when present (3,700 → 4,600/s on the
HTTP drain). ``--max-prefetch`` stays at its default 0: the list broker fetches one message
per ``BRPOP`` whatever it is, and 100 drained no faster either. ``--log-level WARNING``,
because taskiq logs every task it executes at INFO.

The driver sends with ``task.kicker().with_broker(b).kiq(...)``: ``b`` is a
``ListQueueBroker`` of the driver's own event loop on the scenario's server (started with
``await b.startup()``, shut down after), the same ``kiq`` a team calls, on another broker
object (the module's is bound to the worker's URL and loop).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

import aiohttp
import redis
import redis.asyncio
from taskiq import AsyncTaskiqDecoratedTask, TaskiqEvents, TaskiqState
from taskiq.message import BrokerMessage
from taskiq_redis import ListQueueBroker

from bench._drain import Drain, DrainFailed
from bench._harness import Worker, running
from bench._noti import PHONE, SECRET
from bench._probes import DONE_KEY, LAG_KEY, RATE, SETTLE_S, WARMUP, counted_drain, timed_drain
from bench._signed_post import signed_headers
from bench.fake_http import FakeHttp
from bench.peers import broker_url

__all__ = [
    "broker",
    "drain_http",
    "drain_noop",
    "enqueue",
    "incr",
    "lag",
    "latency",
    "noop",
    "post",
    "worker",
]

WORKERS = 2
MAX_ASYNC_TASKS = 100
CONNECTIONS_PER_HOST = 100
CHUNK = 1000
#: How each run is set up, for the table's notes.
SETUP = {
    "enqueue": "task.kiq() awaited one at a time in one event loop (ListQueueBroker)",
    "drain_noop": f"taskiq worker --workers {WORKERS} --max-async-tasks {MAX_ASYNC_TASKS}, async INCR task",
    "drain_http": (
        f"taskiq worker --workers {WORKERS} --max-async-tasks {MAX_ASYNC_TASKS}, "
        "one aiohttp keep-alive POST per task"
    ),
    "latency": f"taskiq worker --workers {WORKERS}, an async task recording time.time()-t0",
}

_url = os.environ.get("BENCH_BROKER_URL", "redis://127.0.0.1:6379/5")
broker = ListQueueBroker(_url)
_redis: redis.asyncio.Redis | None = None
_session: aiohttp.ClientSession | None = None


def _client() -> redis.asyncio.Redis:
    """This worker process's asyncio Redis client, made on first use."""
    global _redis
    if _redis is None:
        _redis = redis.asyncio.Redis.from_url(_url)
    return _redis


def _http() -> aiohttp.ClientSession:
    """This worker process's kept-alive HTTP session (up to :data:`CONNECTIONS_PER_HOST`
    connections per host), made on first use, inside the worker's event loop."""
    global _session
    if _session is None:
        _session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit_per_host=CONNECTIONS_PER_HOST))
    return _session


@broker.on_event(TaskiqEvents.WORKER_SHUTDOWN)
async def _close(state: TaskiqState) -> None:
    """Close the session and the Redis client of this worker process."""
    if _session is not None:
        await _session.close()
    if _redis is not None:
        await _redis.aclose()


@broker.task
async def noop(phone: str, text: str) -> None:
    """Does nothing: the cost of sending a taskiq task."""


@broker.task
async def incr() -> None:
    """The drain task: one INCR, so the driver can count what was done."""
    await _client().incr(DONE_KEY)


@broker.task
async def post(url: str, body: str, webhook_id: str) -> None:
    """One signed POST (Standard Webhooks headers, as noti sends them) on this process's
    session; raise unless 200. The webhook id travels in the arguments, as for dramatiq."""
    data = body.encode()
    async with _http().post(url, data=data, headers=signed_headers(webhook_id, data)) as response:
        await response.read()
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status}")


@broker.task
async def lag(t0: float) -> None:
    """Record how long after ``t0`` (the sender's ``time.time()``) this ran."""
    await _client().rpush(LAG_KEY, time.time() - t0)


def worker(url: str) -> Worker:
    """``taskiq worker bench.peers.taskiq:broker`` on ``url`` (see the module)."""
    argv = [sys.executable, "-m", "taskiq", "worker", f"{__name__}:broker", "--workers", str(WORKERS)]
    argv += ["--max-async-tasks", str(MAX_ASYNC_TASKS), "--log-level", "WARNING"]
    return Worker(argv, {"BENCH_BROKER_URL": url, "BENCH_WEBHOOK_SECRET": SECRET})


def _flushed(url: str) -> redis.Redis:
    """A client of taskiq's database on the scenario's server ``url``, flushed."""
    client = redis.Redis.from_url(broker_url(url, "taskiq"))
    client.flushdb()
    return client


def _with_broker(url: str, run: Callable[[ListQueueBroker], Awaitable[Any]]) -> Any:
    """``run(b)`` in a new event loop, ``b`` a started driver-side broker on ``url``'s database."""

    async def main() -> Any:
        driver = ListQueueBroker(broker_url(url, "taskiq"))
        await driver.startup()
        try:
            return await run(driver)
        finally:
            await driver.shutdown()

    return asyncio.run(main())


class _Collector(ListQueueBroker):
    """A ``ListQueueBroker`` whose ``kick`` keeps each serialized message (and its list)
    instead of pushing it: what ``kiq`` would have ``LPUSH``ed."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.kicked: list[tuple[str, bytes]] = []

    async def kick(self, message: BrokerMessage) -> None:
        self.kicked.append((message.labels.get("queue_name") or self.queue_name, message.message))


def _fill(
    client: redis.Redis, task: AsyncTaskiqDecoratedTask[Any, Any], args_list: Sequence[Sequence[Any]]
) -> None:
    """Queue one ``task`` message per item of ``args_list`` on ``client``'s database, as
    ``task.kiq(*args)`` would, but pipelined: the messages are made by ``kiq`` on a
    :class:`_Collector` (which never connects), then ``LPUSH``ed in chunks."""

    async def collect() -> list[tuple[str, bytes]]:
        collector = _Collector("redis://127.0.0.1")
        for args in args_list:
            await task.kicker().with_broker(collector).kiq(*args)
        return collector.kicked

    pipe = client.pipeline(transaction=False)
    for queue, data in asyncio.run(collect()):
        pipe.lpush(queue, data)
        if len(pipe) >= CHUNK:
            pipe.execute()
    pipe.execute()


def _check_empty(client: redis.Redis) -> None:
    left = client.llen(broker.queue_name)
    if left:
        raise DrainFailed(f"taskiq left {left} messages queued")


def enqueue(url: str, n: int) -> float:
    """``n`` ``noop.kiq(PHONE, text)`` awaited one after another, per second: the sync driver
    runs one event loop (``asyncio.run``) for the whole batch; only the loop of kiqs is timed
    (not the broker's startup, nor one warm-up kiq)."""
    client = _flushed(url)

    async def run(driver: ListQueueBroker) -> float:
        await noop.kicker().with_broker(driver).kiq(PHONE, "warm-up")
        started = time.perf_counter()
        for i in range(n):
            await noop.kicker().with_broker(driver).kiq(PHONE, f"message {i}")
        return n / (time.perf_counter() - started)

    rate: float = _with_broker(url, run)
    queued = client.llen(broker.queue_name)
    if queued != n + 1:
        raise AssertionError(f"taskiq queued {queued} messages for {n + 1} kiqs")
    return rate


def drain_noop(url: str, n: int) -> Drain:
    """``n`` INCR tasks on :func:`worker`: fill, start the workers, time the drain, verify."""
    client = _flushed(url)
    _fill(client, incr, [()] * n)
    drain = counted_drain(client, n, [worker(broker_url(url, "taskiq"))], "taskiq")
    _check_empty(client)
    return drain


def drain_http(url: str, n: int, fake: FakeHttp) -> Drain:
    """``n`` POST tasks to ``fake`` on :func:`worker`, checked by the fake server's counts."""
    client = _flushed(url)
    fake.reset()
    ids = [str(uuid.uuid4()) for _ in range(n)]
    _fill(client, post, [(fake.url, json.dumps({"n": i, "text": "hello"}), ids[i]) for i in range(n)])
    drain = timed_drain(fake.count, n, [worker(broker_url(url, "taskiq"))], client, others=[fake.pid])
    fake.expect(n, set(ids))
    _check_empty(client)
    return drain


async def _paced(rate: float, seconds: float, send: Callable[[int], Coroutine[Any, Any, Any]]) -> float:
    """``bench._probes.paced`` in an event loop (taskiq sends from one): await ``send(i)``
    ``rate`` times a second for ``seconds`` on absolute deadlines; how far behind schedule
    it fell at worst (s)."""
    count = int(rate * seconds)
    start = time.perf_counter()
    behind = 0.0
    for i in range(count):
        wait = start + i / rate - time.perf_counter()
        if wait > 0:
            await asyncio.sleep(wait)
        else:
            behind = max(behind, -wait)
        await send(i)
    return behind


async def _until(predicate: Callable[[], bool], timeout: float) -> None:
    """Poll ``predicate`` every 20 ms without blocking the loop; TimeoutError after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"not reached within {timeout} s")
        await asyncio.sleep(0.02)


def latency(url: str, seconds: float) -> dict[str, Any]:
    """``lag.kiq(t0)`` at 200/s for ``seconds`` on :func:`worker`, after 50 warm-up kiqs, as
    ``bench._probes.lag_latency`` does, all in one event loop; latencies in ms."""
    client = _flushed(url)
    count = int(RATE * seconds)

    async def run(driver: ListQueueBroker) -> float:
        async def send(i: int) -> None:
            await lag.kicker().with_broker(driver).kiq(time.time())

        for i in range(WARMUP):
            await send(i)
        await _until(lambda: client.llen(LAG_KEY) >= WARMUP, 60)
        client.delete(LAG_KEY)
        behind = await _paced(RATE, seconds, send)
        await _until(lambda: client.llen(LAG_KEY) >= count, SETTLE_S)
        return behind

    with running([worker(broker_url(url, "taskiq"))]):
        behind: float = _with_broker(url, run)
    values = [float(x) * 1000 for x in client.lrange(LAG_KEY, 0, -1)]
    if len(values) != count:
        raise AssertionError(f"taskiq: {count} sent, {len(values)} ran")
    return {"ms": values, "behind_s": behind, "coarse": False}
