"""The webman bridge (issue scenario 8) next to plain Celery, on a private redis-server.

    .venv/bin/python -m bench.webman_bench            # 100,000 pushes, 10,000 consumed, 3 reps
    .venv/bin/python -m bench.webman_bench --smoke    # tiny sizes, a few seconds

Scenarios (messages per second; median of the repetitions, with min..max):

* ``webman push_many``: :meth:`Producer.push_many` (pipelined XADD) of 100,000, against
  Celery's ``apply_async`` of a no-op task through one producer connection (10,000: its
  cost per message is constant and 100,000 would take a minute a repetition).
* ``webman consume+ack``: one consumer thread (one process) with a no-op ``consume``
  (XREADGROUP, XACK, XDEL per message; prefetch 1 as the plugin's default, and 32), against
  a plain ``celery worker -P solo`` subprocess running a no-op task. Consumption is timed
  from the first message taken to the last one done, so start-up is not counted on either
  side. Celery's queue is filled with copies of one message (:mod:`bench._celery_fill`).

Repetitions are interleaved. Everything it starts (redis-server, Celery workers) it stops;
every wait is bounded.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

import redis
from celery import Celery

from bench import _harness as harness
from bench._celery_fill import fill
from bench._noti import FAST, WorkerConfig
from bench._report import Row, attempt, errors_of
from bench._runner import main
from noti.bridge.webman import Consumer, ConsumerMessage, Producer, QueueKeys, QueueNames
from noti.bridge.webman.connection import connect
from noti.bridge.webman.runner import BridgeRunner, ConsumerSpec
from noti.bridge.webman.settings import WebmanSettings

PHP_CLASS = "app\\queue\\bench\\NoOp"
CELERY_QUEUE = "bench"
WAIT_LIMIT_S = 300.0

celery_app = Celery("webman_bench", set_as_current=False)
celery_app.conf.update(
    task_ignore_result=True,
    task_serializer="json",
    accept_content=["json"],
    task_default_queue=CELERY_QUEUE,
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
)


@celery_app.task(name="bench.noop")
def noop(index: int) -> None:
    """The plain-Celery baseline's no-op task."""


class NoOp(Consumer):
    """The bridge's no-op consumer."""

    php_class = PHP_CLASS
    block_time_ms = 200
    run_mover = False

    def consume(self, message: ConsumerMessage) -> None:
        return None


def _wait(
    predicate: Callable[[], bool], what: str, limit_s: float = WAIT_LIMIT_S, step_s: float = 0.005
) -> float:
    deadline = time.monotonic() + limit_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up waiting for {what} after {limit_s:.0f} s")
        time.sleep(step_s)
    return time.perf_counter()


@contextmanager
def redis_server() -> Iterator[str]:
    """A private redis-server for this run; yields the URL of its database 0."""
    with harness.redis_server() as url:
        yield f"{url}/0"


def _producer(url: str) -> Producer:
    return Producer(connect(url), QueueKeys(QueueNames.from_class(PHP_CLASS), "webman_redis_queue_"))


# --- scenarios: each returns messages per second for one run --------------------------------


def webman_push(url: str, n: int) -> float:
    producer = _producer(url)
    producer.redis.delete(producer.keys.stream)
    payloads = [{"n": i, "text": "hello"} for i in range(n)]
    start = time.perf_counter()
    producer.push_many(payloads)
    return n / (time.perf_counter() - start)


def celery_push(url: str, n: int) -> float:
    redis.Redis.from_url(url).delete(CELERY_QUEUE)
    harness.repoint(celery_app, url)
    with celery_app.producer_or_acquire() as producer:
        start = time.perf_counter()
        for i in range(n):
            noop.apply_async(args=[i], producer=producer)
        return n / (time.perf_counter() - start)


def webman_consume(url: str, n: int, prefetch: int = 1) -> float:
    producer = _producer(url)
    client = producer.redis
    client.delete(producer.keys.stream)
    producer.push_many([{"n": i} for i in range(n)])
    runner = BridgeRunner(
        [ConsumerSpec("noop", NoOp, options={"prefetch_count": prefetch})],
        webman=WebmanSettings(redis_url=url),
        noti_redis_url=url,
        dead_letters=None,
    )
    runner.start()
    try:
        first = _wait(lambda: client.xlen(producer.keys.stream) < n, "the first message taken")
        left = client.xlen(producer.keys.stream)
        last = _wait(lambda: client.xlen(producer.keys.stream) == 0, "the webman stream to drain")
    finally:
        runner.stop()
    return left / max(last - first, 1e-9)


def celery_consume(url: str, n: int) -> float:
    client = redis.Redis.from_url(url)
    client.delete(CELERY_QUEUE, "unacked", "unacked_index")
    harness.repoint(celery_app, url)
    fill(noop, [(i,) for i in range(n)], queue=CELERY_QUEUE)
    worker = harness.Worker.celery(
        "bench.webman_bench:celery_app",
        {"CELERY_BROKER_URL": url},
        *("-P", "solo", "-Q", CELERY_QUEUE, "--without-heartbeat"),
    )
    with harness.running([worker]):
        first = _wait(lambda: client.llen(CELERY_QUEUE) < n, "Celery's first message taken")
        left = client.llen(CELERY_QUEUE)
        last = _wait(
            lambda: client.llen(CELERY_QUEUE) == 0 and client.hlen("unacked") == 0,
            "the Celery queue to drain",
        )
    return left / max(last - first, 1e-9)


# --- the scenario -----------------------------------------------------------------------

#: smoke -> (pushed, Celery loop, consumed)
SIZES = {False: (100_000, 10_000, 10_000), True: (500, 500, 300)}


def scenario_8(
    reps: int, smoke: bool, config: WorkerConfig = FAST, ctx: dict[str, Any] | None = None
) -> list[Row]:
    push_n, loop_n, consume_n = SIZES[smoke]
    runs: dict[str, tuple[Callable[[str], float], str]] = {
        "push": (lambda url: webman_push(url, push_n), "webman push_many"),
        "celery_push": (lambda url: celery_push(url, loop_n), "celery push"),
        "consume1": (lambda url: webman_consume(url, consume_n), "webman consume prefetch 1"),
        "consume32": (lambda url: webman_consume(url, consume_n, 32), "webman consume prefetch 32"),
        "celery_consume": (lambda url: celery_consume(url, consume_n), "celery consume"),
    }
    samples: dict[str, list[float]] = {k: [] for k in runs}
    errors: dict[str, list[str]] = {k: [] for k in runs}
    with redis_server() as url:
        for rep in range(reps):
            for key, (run, label) in runs.items():
                rate = attempt(errors[key], f"{label} rep {rep + 1}", partial(run, url))
                if rate is not None:
                    samples[key].append(rate)
    consume_base = "plain Celery worker -P solo, no-op task (one process)"
    return [
        Row(
            8,
            f"webman push_many({push_n:,})",
            "/s",
            samples["push"],
            ">= 50,000/s",
            baseline=samples["celery_push"],
            baseline_name=f"plain Celery apply_async loop on one producer, {loop_n:,} messages",
            check=lambda r: r.median >= 50_000,
            error=errors_of(errors, "push", "celery_push"),
        ),
        Row(
            8,
            f"webman consume+ack {consume_n:,}, 1 thread, prefetch 1",
            "/s",
            samples["consume1"],
            ">= 2,000/s per process",
            baseline=samples["celery_consume"],
            baseline_name=consume_base,
            check=lambda r: r.median >= 2_000,
            error=errors_of(errors, "consume1", "celery_consume"),
        ),
        Row(
            8,
            f"webman consume+ack {consume_n:,}, 1 thread, prefetch 32",
            "/s",
            samples["consume32"],
            ">= 2,000/s per process",
            baseline=samples["celery_consume"],
            baseline_name=consume_base,
            check=lambda r: r.median >= 2_000,
            error=errors_of(errors, "consume32", "celery_consume"),
        ),
    ]


SCENARIOS = {8: scenario_8}

if __name__ == "__main__":
    sys.exit(main(__doc__ or "", SCENARIOS, "webman"))
