"""How close noti is to the machine: the floor of one Redis, and how a drain scales.

Scenario 0, the floor (measured on a private redis-server like every scenario's, by the same
redis-py client noti uses):

- ``PING`` round trip: what any Redis call costs at least (latency rows are compared with
  two of them: a notification needs at least one call to be queued and one to be fetched);
- one ``EVALSHA`` of a no-op script per round trip, one caller: what a producer making one
  script call per notification can reach at most (``notify()`` one at a time);
- pipelined ``LPUSH`` of a 300-byte item, 500 a pipeline: what one client can write into
  Redis at most, item by item (``notify_many``, the drain, webman's ``push_many``).

Each mapped row of the table then shows its figure as a fraction of its floor (:data:`FLOORS`):
a rate divided by the floor's rate, a latency's floor divided by the latency. 100 % would be
the machine's limit for that path.

Scenario 15, scaling: the sandbox drain of scenario 3 with 1, 2, 4 and 8 worker processes,
each with its rate, worker CPU and Redis CPU per notification, and Redis' own share of a core
during the drain. Where Redis' share nears one core, Redis and not the workers bounds the
drain; ``1e6 / Redis CPU µs`` per notification is the projected ceiling of one Redis primary
(one core). Beside it, ``notify_many`` from 1 and from 2 producer processes at once, which
are bound by Redis alone.

    .venv/bin/python -m bench.limits_bench [--only 0,15] [--reps 3] [--smoke]
"""

from __future__ import annotations

import multiprocessing
import statistics
import sys
from dataclasses import replace
from functools import partial
from typing import Any

import redis

from bench._drain import Drain
from bench._floor import FLOOR_NAMES, measure_floor
from bench._harness import redis_server
from bench._noti import FAST, WorkerConfig
from bench._report import Row, attempt, errors_of, present
from bench._runner import main
from bench.drain_bench import SIZES, noti_drain_sandbox
from bench.enqueue_bench import noti_notify_many, setup

__all__ = ["producers_rate", "scenario_0", "scenario_15"]

PROCESSES = {False: (1, 2, 4, 8), True: (1, 2)}
PRODUCER_ITEMS = {False: 50_000, True: 2_000}


def scenario_0(
    reps: int, smoke: bool, config: WorkerConfig = FAST, ctx: dict[str, Any] | None = None
) -> list[Row]:
    errors: list[str] = []
    samples: list[dict[str, float]] = []
    with redis_server() as url:
        for rep in range(reps):
            got = attempt(errors, f"floor rep {rep + 1}", lambda: measure_floor(url, smoke))
            if got is not None:
                samples.append(got)
    if ctx is not None and samples:
        ctx["floor"] = {key: statistics.median(s[key] for s in samples) for key in samples[0]}
    error = errors_of({"floor": errors}, "floor")
    rows = []
    for key, unit in (("ping_ms", "ms"), ("evalsha_per_s", "/s"), ("lpush_per_s", "/s")):
        rows.append(Row(0, f"floor: {FLOOR_NAMES[key]}", unit, [s[key] for s in samples], "(the floor)"))
        rows[-1].error = error
    return rows


def _producer(url: str, n: int, ready: Any, go: Any, out: Any) -> None:
    """One producer process: ``notify_many`` of ``n`` SMS when told to go; its seconds."""
    setup(url)
    ready.set()
    go.wait()
    out.put(n / noti_notify_many(n))


def producers_rate(url: str, n: int, processes: int) -> float:
    """``processes`` producer processes each storing ``n`` SMS with ``notify_many`` at the
    same moment: notifications stored per second, all of them over the slowest's time."""
    redis.Redis.from_url(f"{url}/0").flushall()
    context = multiprocessing.get_context("spawn")
    go, out = context.Event(), context.Queue()
    readies = [context.Event() for _ in range(processes)]
    procs = [context.Process(target=_producer, args=(url, n, r, go, out)) for r in readies]
    for proc in procs:
        proc.start()
    for ready in readies:
        if not ready.wait(60):
            raise RuntimeError("a producer process did not start")
    go.set()
    seconds = [out.get(timeout=120) for _ in procs]
    for proc in procs:
        proc.join(30)
    return float(processes * n / max(seconds))


def scenario_15(
    reps: int, smoke: bool, config: WorkerConfig = FAST, ctx: dict[str, Any] | None = None
) -> list[Row]:
    n = SIZES[3][smoke]
    counts = PROCESSES[smoke]
    drains: dict[int, list[Drain | None]] = {k: [] for k in counts}
    made: dict[int, list[float | None]] = {1: [], 2: []}
    errors: dict[str, list[str]] = {}
    with redis_server() as url:
        for rep in range(reps):
            for k in counts:
                run = partial(noti_drain_sandbox, url, n, replace(config, processes=k))
                label = f"drain x{k} rep {rep + 1}"
                drains[k].append(attempt(errors.setdefault(f"drain{k}", []), label, run))
            for p in made:
                make = partial(producers_rate, url, PRODUCER_ITEMS[smoke], p)
                label = f"producers x{p} rep {rep + 1}"
                made[p].append(attempt(errors.setdefault(f"make{p}", []), label, make))
    rows: list[Row] = []
    for k in counts:
        done = [d for d in drains[k] if d is not None and d.timed]
        worker_us = [d.per_item_us(d.worker_cpu_s) for d in done]
        redis_us = [d.per_item_us(d.redis_cpu_s) for d in done]
        redis_share = [d.redis_cpu_s / d.seconds for d in done]
        row = Row(
            15,
            f"drain {n:,} SMS, {k} process{'es' if k > 1 else ''} [{replace(config, processes=k).label}]",
            "/s",
            [d.rate for d in done],
            "(scaling)",
            error=errors_of(errors, f"drain{k}"),
        )
        if done:
            ceiling = 1e6 / statistics.median(redis_us)
            row.notes.append(
                f"{k} process(es): worker CPU {statistics.median(worker_us):.0f} µs, Redis CPU "
                f"{statistics.median(redis_us):.1f} µs per notification; Redis busy "
                f"{statistics.median(redis_share):.0%} of a core; one Redis core's ceiling "
                f"~{ceiling:,.0f}/s"
            )
            row.extra = {
                "worker_cpu_us": worker_us,
                "redis_cpu_us": redis_us,
                "redis_core_share": redis_share,
                "redis_ceiling_per_s": ceiling,
            }
        rows.append(row)
    for p, samples in made.items():
        rows.append(
            Row(
                15,
                f"notify_many({PRODUCER_ITEMS[smoke]:,}) from {p} producer process"
                + ("es at once" if p > 1 else ""),
                "/s",
                present(samples),
                "(scaling)",
                error=errors_of(errors, f"make{p}"),
            )
        )
    return rows


SCENARIOS = {0: scenario_0, 15: scenario_15}

if __name__ == "__main__":
    sys.exit(main(__doc__ or "", SCENARIOS, "limits"))
