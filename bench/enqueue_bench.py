"""Enqueueing: noti's notify() / notify_many() against plain Celery in the same run.

Scenarios (issue "Performance", 1 and 2), each median of ``--reps`` runs on a private Redis:
- ``notify()`` one at a time vs plain ``.delay()`` of a no-op task with the same payload;
- ``notify_many()`` in one call vs Celery publishing the same number in a loop on one
  held producer (Celery has no batch publish).

    .venv/bin/python -m bench.enqueue_bench [--n 20000] [--bulk 50000] [--reps 3] [--smoke]
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import redis

from bench._harness import print_table, redis_server, summarize, write_results

PHONE = "+8613912345678"


def _setup(url: str) -> Any:
    os.environ["NOTI_REDIS_URL"] = f"{url}/0"
    os.environ["NOTI_CHANNELS__SMS__PROVIDER"] = "sandbox"
    os.environ["BENCH_BROKER_URL"] = f"{url}/1"
    import noti.runtime

    noti.runtime.configure()
    from bench.plain_celery import app

    app.conf.broker_url = f"{url}/1"
    return app


def noti_notify(n: int) -> float:
    import noti

    noti.notify_sms(PHONE, "warm-up")
    started = time.perf_counter()
    for i in range(n):
        noti.notify_sms(PHONE, f"message {i}")
    return n / (time.perf_counter() - started)


def celery_delay(n: int) -> float:
    from bench.plain_celery import noop

    noop.delay(PHONE, "warm-up")
    started = time.perf_counter()
    for i in range(n):
        noop.delay(PHONE, f"message {i}")
    return n / (time.perf_counter() - started)


def noti_notify_many(n: int) -> float:
    import noti

    items = [{"type": "sms", "to": PHONE, "text": f"message {i}"} for i in range(n)]
    started = time.perf_counter()
    result = noti.notify_many(items)
    elapsed = time.perf_counter() - started
    assert result.stored == n, result.refused[:3]
    return n / elapsed


def celery_loop_publish(n: int) -> float:
    from bench.plain_celery import app, noop

    started = time.perf_counter()
    with app.producer_or_acquire() as producer:
        for i in range(n):
            noop.apply_async(args=[PHONE, f"message {i}"], producer=producer)
    return n / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--bulk", type=int, default=50_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, to check the script runs")
    args = parser.parse_args()
    n, bulk, reps = (500, 1000, 1) if args.smoke else (args.n, args.bulk, args.reps)
    samples: dict[str, list[float]] = {k: [] for k in ("notify", "delay", "notify_many", "loop")}
    with redis_server() as url:
        _setup(url)
        flush = redis.Redis.from_url(url)
        for _ in range(reps):  # interleaved, so noise hits both sides alike
            for name, fn, size in (
                ("notify", noti_notify, n),
                ("delay", celery_delay, n),
                ("notify_many", noti_notify_many, bulk),
                ("loop", celery_loop_publish, bulk),
            ):
                flush.flushall()
                samples[name].append(fn(size))
    stats = {k: summarize(v) for k, v in samples.items()}
    one = stats["notify"]["median"] / stats["delay"]["median"]
    many = stats["notify_many"]["median"] / stats["loop"]["median"]

    def row(label: str, key: str, ratio: str) -> list[str]:
        s = stats[key]
        return [label, f"{s['median']:,.0f}", f"{s['min']:,.0f}..{s['max']:,.0f}", ratio]

    print_table(
        f"enqueue (median of {reps}; msgs/s)",
        ["scenario", "median", "min..max", "vs plain Celery"],
        [
            row(f"1 noti notify() x {n:,}", "notify", f"{one:.2f}x"),
            row(f"  plain Celery .delay() x {n:,}", "delay", "baseline"),
            row(f"2 noti notify_many({bulk:,})", "notify_many", f"{many:.2f}x"),
            row(f"  plain Celery apply_async loop x {bulk:,}", "loop", "baseline"),
        ],
    )
    path = write_results(
        "enqueue-smoke" if args.smoke else "enqueue",
        {"n": n, "bulk": bulk, "reps": reps, "samples": samples, "stats": stats},
    )
    print(f"results: {path}")


if __name__ == "__main__":
    main()
