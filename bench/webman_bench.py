"""Benchmark of the webman bridge next to plain Celery, on a private redis-server.

    .venv/bin/python -m bench.webman_bench            # 100,000 pushes, 20,000 consumed, 3 runs each
    .venv/bin/python -m bench.webman_bench --smoke    # tiny sizes, a few seconds

Scenarios (messages per second; median of the runs, with min..max):

* ``webman push_many``: :meth:`Producer.push_many` (pipelined XADD), against Celery's
  ``apply_async`` of a no-op task through one producer connection.
* ``webman consume+ack``: one consumer thread with a no-op ``consume`` (XREADGROUP, XACK,
  XDEL per message; prefetch 1 as the plugin's default, and 32), against a plain
  ``celery worker -P solo`` subprocess running a no-op task. Consumption is timed from the
  first message taken to the last one done, so start-up is not counted on either side.

Writes ``bench/results/webman.json`` (``webman-smoke.json`` with ``--smoke``). Everything it
starts (redis-server, Celery workers) it stops; every wait is bounded.
"""

from __future__ import annotations

import argparse
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import redis
from celery import Celery

from bench import _harness as harness
from noti.bridge.webman import Consumer, ConsumerMessage, Producer, QueueKeys, QueueNames
from noti.bridge.webman.connection import connect
from noti.bridge.webman.runner import BridgeRunner, ConsumerSpec
from noti.bridge.webman.settings import WebmanSettings

HERE = Path(__file__).resolve().parent
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
    celery_app.conf.broker_url = url
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
    celery_app.conf.broker_url = url
    with celery_app.producer_or_acquire() as producer:
        for i in range(n):
            noop.apply_async(args=[i], producer=producer)
    log = tempfile.NamedTemporaryFile(prefix="webman-bench-celery-", suffix=".log", delete=False)
    cmd = [
        sys.executable, "-m", "celery", "--workdir", str(HERE), "-A", "webman_bench:celery_app", "-b", url,
        "worker", "-P", "solo", "-Q", CELERY_QUEUE, "--without-mingle", "--without-gossip",
        "--without-heartbeat", "-l", "WARNING",
    ]  # fmt: skip
    worker = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        first = _wait(lambda: client.llen(CELERY_QUEUE) < n, "Celery's first message taken")
        left = client.llen(CELERY_QUEUE)
        last = _wait(
            lambda: client.llen(CELERY_QUEUE) == 0 and client.hlen("unacked") == 0,
            "the Celery queue to drain",
        )
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(30)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait(10)
        Path(log.name).unlink(missing_ok=True)
    return left / max(last - first, 1e-9)


# --- reporting ------------------------------------------------------------------------------


def measure(name: str, runs: int, once: Callable[[], float]) -> dict[str, Any]:
    rates = [once() for _ in range(runs)]
    print(f"  {name}: " + ", ".join(f"{r:,.0f}" for r in rates), file=sys.stderr)
    return {
        "scenario": name,
        "runs": rates,
        "median": statistics.median(rates),
        "min": min(rates),
        "max": max(rates),
    }


def table(rows: list[dict[str, Any]]) -> str:
    header = f"{'scenario':<44} {'msgs/s (median)':>16} {'min..max':>22} {'vs plain Celery':>16}"
    lines = [header, "-" * len(header)]
    for row in rows:
        ratio = f"{row['ratio']:.2f}x" if row.get("ratio") else "(baseline)"
        spread = f"{row['min']:,.0f}..{row['max']:,.0f}"
        lines.append(f"{row['scenario']:<44} {row['median']:>16,.0f} {spread:>22} {ratio:>16}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: check that it works")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--push", type=int, default=100_000, help="messages pushed per run")
    parser.add_argument("--consume", type=int, default=20_000, help="messages consumed per run")
    args = parser.parse_args(argv)
    push_n, consume_n, runs = (500, 300, 1) if args.smoke else (args.push, args.consume, args.runs)
    with redis_server() as url:
        print(
            f"redis-server at {url}; {runs} run(s); push {push_n:,}, consume {consume_n:,}", file=sys.stderr
        )
        celery_in = measure("plain Celery apply_async (no-op task)", runs, lambda: celery_push(url, push_n))
        celery_out = measure(
            "plain Celery worker -P solo (no-op task)", runs, lambda: celery_consume(url, consume_n)
        )
        pushed = measure("webman push_many (pipelined XADD)", runs, lambda: webman_push(url, push_n))
        one = measure(
            "webman consume+ack, 1 thread, prefetch 1", runs, lambda: webman_consume(url, consume_n)
        )
        many = measure(
            "webman consume+ack, 1 thread, prefetch 32", runs, lambda: webman_consume(url, consume_n, 32)
        )
    pushed["ratio"] = pushed["median"] / celery_in["median"]
    for row in (one, many):
        row["ratio"] = row["median"] / celery_out["median"]
    rows = [pushed, celery_in, one, many, celery_out]
    print(table(rows))
    path = harness.write_results(
        "webman-smoke" if args.smoke else "webman",
        {"smoke": args.smoke, "runs": runs, "push_n": push_n, "consume_n": consume_n, "rows": rows},
    )
    print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
