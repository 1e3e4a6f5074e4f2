"""Soak (issue 19, point 6): 1,000,000 SMS through noti's workers (the sandbox provider), fed
by ``notify_many`` in chunks while they drain, and the workers' resident memory over the run:
its growth from the end of a warm-up (the first tenth) to the end is what the row reports.

The backlog is kept under :data:`BACKLOG` notifications (a chunk is added once the workers
are within that of the last), so the run measures the workers, not a queue piling up in
Redis. Done records stay in Redis (cleaning is beat's job, hourly), so Redis grows; the
workers must not. No baseline: the row prints the growth and the drain rate over the soak.

    .venv/bin/python -m bench.soak_bench [--reps 1] [--smoke]
"""

from __future__ import annotations

import sys
import time
from typing import Any

from bench._harness import redis_server
from bench._noti import (
    FAST,
    PHONE,
    SMS_QUEUE,
    WorkerConfig,
    done_count,
    noti_env,
    point_driver,
    start_workers,
    write_config,
)
from bench._report import Row, attempt
from bench._runner import main

__all__ = ["scenario_12"]

SIZES = {False: 1_000_000, True: 20_000}
CHUNK = 20_000
BACKLOG = 60_000
#: Growth over the soak, MiB, under which the row counts as flat.
FLAT_MB = 20.0


def soak(n: int, config: WorkerConfig) -> dict[str, Any]:
    import noti

    with redis_server() as url:
        env = noti_env(url, write_config())
        runtime = point_driver(env)
        workers = start_workers(config, env, SMS_QUEUE)
        try:
            rss: list[tuple[int, float]] = []
            started = time.perf_counter()
            sent = 0
            while sent < n:
                size = min(CHUNK, n - sent)
                items = [{"type": "sms", "to": PHONE, "text": f"soak {sent + i}"} for i in range(size)]
                result = noti.notify_many(items)
                if result.stored != size:
                    raise RuntimeError(f"notify_many stored {result.stored} of {size}")
                sent += size
                while sent - done_count(runtime) > BACKLOG:
                    time.sleep(0.2)
                    if any(w.proc.poll() is not None for w in workers):
                        raise RuntimeError(f"a worker died: {workers[0].tail()}")
                rss.append((done_count(runtime), sum(w.rss_mb() for w in workers)))
            deadline = time.monotonic() + 600
            while done_count(runtime) < n:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{n - done_count(runtime)} not done after 10 minutes")
                time.sleep(0.2)
            elapsed = time.perf_counter() - started
            rss.append((n, sum(w.rss_mb() for w in workers)))
        finally:
            for worker in workers:
                worker.terminate()
            for worker in workers:
                worker.stop()
    warm = next(mb for done, mb in rss if done >= n // 10)
    return {
        "n": n,
        "rate": n / elapsed,
        "rss_warm_mb": warm,
        "rss_end_mb": rss[-1][1],
        "rss_peak_mb": max(mb for _, mb in rss),
        "growth_mb": rss[-1][1] - warm,
    }


def scenario_12(
    reps: int, smoke: bool, config: WorkerConfig = FAST, ctx: dict[str, Any] | None = None
) -> list[Row]:
    n = SIZES[smoke]
    errors: list[str] = []
    runs = [r for r in (attempt(errors, f"soak rep {i + 1}", lambda: soak(n, config)) for i in range(1)) if r]
    row = Row(
        12,
        f"soak: {n:,} SMS, worker RSS growth after the first tenth [{config.label}]",
        "MiB",
        [r["growth_mb"] for r in runs],
        f"<= {FLAT_MB:.0f} MiB (flat)",
        check=(lambda r: r.median <= FLAT_MB) if not smoke else None,
        error="; ".join(errors) if errors and not runs else None,
    )
    for r in runs:
        row.notes.append(
            f"{r['n']:,} drained at {r['rate']:,.0f}/s fed in chunks of {CHUNK:,} (backlog <= {BACKLOG:,}); "
            f"workers' RSS {r['rss_warm_mb']:.0f} MiB after the first tenth, "
            f"{r['rss_end_mb']:.0f} at the end, "
            f"peak {r['rss_peak_mb']:.0f} (all {config.processes} processes); one run whatever --reps"
        )
    return [row]


SCENARIOS = {12: scenario_12}

if __name__ == "__main__":
    sys.exit(main(__doc__ or "", SCENARIOS, "soak"))
