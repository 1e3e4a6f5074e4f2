"""Enqueueing (issue scenarios 1 and 2): noti's notify() / notify_many() against plain Celery.

1. ``notify()`` one at a time, 20,000 SMS to the sandbox, against plain ``.delay()`` of a
   no-op task with the same payload (phone number, text).
2. ``notify_many()`` of 50,000 in one call, against Celery publishing in a loop on one held
   producer (Celery has no batch publish). The loop runs 10,000 (smoke: 1,000): its cost per
   message is constant, and 50,000 would take ~30 s a repetition.

The peers are measured in the same repetitions (:mod:`bench.peers`). Issue 38: ``notify()``
ahead of BullMQ's ``await queue.add()`` one at a time (scenario 1), ``notify_many`` >= 1.5x
BullMQ's ``addBulk`` of 1,000 jobs per call (scenario 2); huey, RQ, dramatiq and taskiq are
shown for context. Repetitions are interleaved (noti, Celery, peers, noti, …) on one
private Redis, flushed before each run. :func:`round_trips_per_call` counts the producer's
Redis round trips (scenario 9).

    .venv/bin/python -m bench.enqueue_bench [--only 1,2] [--reps 3] [--smoke]
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import redis

from bench import peers, plain_celery
from bench._harness import redis_server
from bench._noti import FAST, PHONE, WorkerConfig, noti_env, point_driver, write_config
from bench._report import Row, attempt, errors_of, paired_ratio, present
from bench._runner import main

__all__ = [
    "celery_delay",
    "celery_loop_publish",
    "noti_notify",
    "noti_notify_many",
    "round_trips_per_call",
    "scenario_1",
    "scenario_2",
]

SIZES = {1: (20_000, 500), 2: (50_000, 2_000), "loop": (10_000, 1_000)}


def setup(url: str) -> redis.Redis:
    """Point noti (db 0) and the plain Celery app (db 1) of this process at ``url``."""
    point_driver(noti_env(url, write_config()))
    plain_celery.use_broker(f"{url}/1")
    return redis.Redis.from_url(url)


def noti_notify(n: int) -> float:
    import noti

    noti.notify_sms(PHONE, "warm-up")
    started = time.perf_counter()
    for i in range(n):
        noti.notify_sms(PHONE, f"message {i}")
    return n / (time.perf_counter() - started)


def celery_delay(n: int) -> float:
    noop = plain_celery.noop
    noop.delay(PHONE, "warm-up")
    started = time.perf_counter()
    for i in range(n):
        noop.delay(PHONE, f"message {i}")
    return n / (time.perf_counter() - started)


def noti_notify_many(n: int, items: list[dict[str, Any]] | None = None) -> float:
    """``notify_many`` of ``n`` SMS (``items``, else one phone and numbered texts) per second."""
    import noti

    if items is None:
        items = [{"type": "sms", "to": PHONE, "text": f"message {i}"} for i in range(n)]
    started = time.perf_counter()
    result = noti.notify_many(items)
    elapsed = time.perf_counter() - started
    if result.stored != n:
        raise AssertionError(f"stored {result.stored} of {n}: {result.refused[:3]}")
    return n / elapsed


def celery_loop_publish(n: int) -> float:
    """Celery's best bulk enqueue: ``apply_async`` on one held producer inside kombu 5.7's
    ``Producer.batch()``, so the LPUSHes go out pipelined (the issue's "pipelined batch
    publish")."""
    app, noop = plain_celery.app, plain_celery.noop
    started = time.perf_counter()
    with app.producer_or_acquire() as producer, producer.batch(max_size=1000):
        for i in range(n):
            noop.apply_async(args=[PHONE, f"message {i}"], producer=producer)
    return n / (time.perf_counter() - started)


def round_trips_per_call(call: Callable[[int], object], n: int) -> float:
    """Redis round trips per ``call(i)`` in this process (``send_packed_command`` calls)."""
    from redis.connection import AbstractConnection

    original = AbstractConnection.send_packed_command
    count = 0

    def counted(self: Any, command: Any, check_health: bool = True) -> Any:
        nonlocal count
        count += 1
        return original(self, command, check_health)  # type: ignore[no-untyped-call]

    call(-1)  # connections made and scripts loaded before counting
    AbstractConnection.send_packed_command = counted  # type: ignore[method-assign]
    try:
        for i in range(n):
            call(i)
    finally:
        AbstractConnection.send_packed_command = original  # type: ignore[method-assign]
    return count / n


#: ``run(url, n)``: enqueue ``n`` on the redis-server at ``url``, return the rate.
Run = Callable[[str, int], float]
#: The peers beside noti: the issue's target against each, in every repetition (None: shown
#: for context). Issue 38: notify() ahead of BullMQ's add(), notify_many >= 1.5x its addBulk;
#: the targets of issue 24 (ahead of huey, >= 2x RQ's enqueue_many) are context now.
PEERS: dict[int, dict[str, float | None]] = {
    1: {"bullmq": 1.0, "huey": None, "rq": None, "dramatiq": None, "taskiq": None},
    2: {"bullmq": 1.5, "rq": None},
}


def _in_driver(run: Callable[[int], float]) -> Run:
    """A noti or plain-Celery run (this process is pointed at the server by :func:`setup`)."""
    return lambda url, n: run(n)


def _interleaved(
    reps: int, runs: dict[str, tuple[Run, int]]
) -> tuple[dict[str, list[float | None]], dict[str, list[str]]]:
    """Each run once per repetition, in turn, on one server flushed before each; the rates
    by run and repetition (None where it failed) and each run's failures."""
    samples: dict[str, list[float | None]] = {name: [] for name in runs}
    errors: dict[str, list[str]] = {name: [] for name in runs}
    with redis_server() as url:
        flush = setup(url)
        for rep in range(reps):
            for name, (run, size) in runs.items():
                flush.flushall()
                samples[name].append(attempt(errors[name], f"{name} rep {rep + 1}", partial(run, url, size)))
    return samples, errors


def scenario_1(
    reps: int, smoke: bool, config: WorkerConfig = FAST, ctx: dict[str, Any] | None = None
) -> list[Row]:
    n = SIZES[1][smoke]
    runs = {"noti": (_in_driver(noti_notify), n), "celery": (_in_driver(celery_delay), n)}
    runs |= {peer: (peers.runner(peer, "enqueue"), n) for peer in PEERS[1]}
    s, errors = _interleaved(reps, runs)
    name = f"notify() x {n:,}, one at a time"
    row = Row(
        1,
        name,
        "/s",
        present(s["noti"]),
        ">= 1.5x .delay()",
        baseline=present(s["celery"]),
        baseline_name="plain Celery .delay() of a no-op task, same phone and text",
        check=lambda r: (r.ratio or 0) >= 1.5,
        ratio=paired_ratio(s["noti"], s["celery"]),
        error=errors_of(errors, "noti", "celery"),
    )
    theirs = {peer: s[peer] for peer in PEERS[1]}
    return [row, *peers.rows(1, "notify()", "/s", s["noti"], theirs, "enqueue", PEERS[1], errors)]


def scenario_2(
    reps: int, smoke: bool, config: WorkerConfig = FAST, ctx: dict[str, Any] | None = None
) -> list[Row]:
    n, loop = SIZES[2][smoke], SIZES["loop"][smoke]
    runs = {"noti": (_in_driver(noti_notify_many), n), "celery": (_in_driver(celery_loop_publish), loop)}
    runs |= {peer: (peers.runner(peer, "enqueue_many"), n) for peer in PEERS[2]}
    s, errors = _interleaved(reps, runs)
    row = Row(
        2,
        f"notify_many({n:,})",
        "/s",
        present(s["noti"]),
        ">= 25,000/s, >= 5x loop",
        baseline=present(s["celery"]),
        baseline_name=(
            f"plain Celery apply_async on one producer in Producer.batch() (pipelined), {loop:,} messages"
        ),
        check=lambda r: r.median >= 25_000 and (r.ratio or 0) >= 5,
        ratio=paired_ratio(s["noti"], s["celery"]),
        error=errors_of(errors, "noti", "celery"),
    )
    theirs = {peer: s[peer] for peer in PEERS[2]}
    return [row, *peers.rows(2, row.name, "/s", s["noti"], theirs, "enqueue_many", PEERS[2], errors)]


SCENARIOS = {1: scenario_1, 2: scenario_2}

if __name__ == "__main__":
    sys.exit(main(__doc__ or "", SCENARIOS, "enqueue"))
