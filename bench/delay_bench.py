"""Delayed notifications: noti's Redis delayed set against Celery ``countdown`` tasks.

For each side, in the same run and on the same kind of private Redis:
- schedule N notifications due in an hour (enqueue rate), and measure the worker's RSS
  before and after (noti keeps them in Redis; Celery workers hold ETA tasks in memory);
- schedule P probes due over the next ~10 s and measure how late each reached its
  provider / ran (p50, p99), while the N long-delayed ones are still held.

    .venv/bin/python -m bench.delay_bench [--n 100000] [--probes 1000] [--smoke]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import redis

from bench._harness import Worker, percentile, print_table, redis_server, wait_for, write_results
from noti.providers.sandbox import read_outbox

PHONE = "+8613912345678"
PROBE_START_S, PROBE_SPAN_S = 3.0, 10.0


def bench_noti(url: str, n: int, probes: int) -> dict[str, Any]:
    config = Path(tempfile.mkdtemp()) / "noti.toml"
    config.write_text('[channels.sms]\nprovider = "sandbox"\n')
    env = {"NOTI_REDIS_URL": f"{url}/0", "NOTI_CONFIG": str(config), "NOTI_USER": "bench"}
    os.environ.update(env)
    import noti.runtime

    noti.runtime.configure()
    rt = noti.runtime.get_runtime()
    worker = Worker("noti", env, "-P", "threads", "-c", "8")
    try:
        wait_for(lambda: rt.redis.exists(rt.keys.lock("pump")), 60)
        time.sleep(1)
        rss_before = worker.rss_mb()
        items = [{"type": "sms", "to": PHONE, "text": f"later {i}"} for i in range(n)]
        started = time.perf_counter()
        result = noti.schedule_many(items, delay=3600)
        enqueue_s = time.perf_counter() - started
        assert result.stored == n, result.refused[:3]
        probe_items = [
            {
                "type": "sms",
                "to": PHONE,
                "text": f"probe {i}",
                "delay": PROBE_START_S + PROBE_SPAN_S * i / probes,
            }
            for i in range(probes)
        ]
        probe_ids = [i for i in noti.schedule_many(probe_items).ids if i]
        pipe = rt.redis.pipeline(transaction=False)
        for record_id in probe_ids:
            pipe.hget(rt.keys.record(record_id), "noti_timeout_at")
        due = dict(zip(probe_ids, (int(x) for x in pipe.execute()), strict=True))
        outbox = rt.keys.sandbox_outbox("sandbox")
        wait_for(lambda: rt.redis.llen(outbox) >= probes, PROBE_START_S + PROBE_SPAN_S + 60, 0.5)
        rss_after = worker.rss_mb()

        sent = {e["id"]: e["at"] for e in read_outbox(rt.redis, rt.keys)}
        late = [sent[i] - due[i] for i in probe_ids if i in sent]
        return {
            "enqueue_per_s": n / enqueue_s,
            "rss_before_mb": rss_before,
            "rss_after_mb": rss_after,
            "late_p50_ms": percentile(late, 50),
            "late_p99_ms": percentile(late, 99),
            "late_max_ms": max(late),
            "early": sum(1 for x in late if x < 0),
        }
    finally:
        worker.stop()


def bench_celery(url: str, n: int, probes: int) -> dict[str, Any]:
    broker = f"{url}/1"
    os.environ["BENCH_BROKER_URL"] = broker
    from bench.plain_celery import app, noop, stamp

    app.conf.broker_url = broker
    client = redis.Redis.from_url(broker)
    worker = Worker("bench.plain_celery", {"BENCH_BROKER_URL": broker}, "-P", "threads", "-c", "8")
    try:
        wait_for(lambda: client.exists("_kombu.binding.celery") or client.keys("_kombu.binding*"), 60)
        time.sleep(2)
        rss_before = worker.rss_mb()
        started = time.perf_counter()
        with app.producer_or_acquire() as producer:
            for i in range(n):
                noop.apply_async(args=[PHONE, f"later {i}"], countdown=3600, producer=producer)
        enqueue_s = time.perf_counter() - started
        now = time.time()
        with app.producer_or_acquire() as producer:
            for i in range(probes):
                delay = PROBE_START_S + PROBE_SPAN_S * i / probes
                eta_ms = int((now + delay) * 1000)
                stamp.apply_async(args=[eta_ms], countdown=(eta_ms / 1000 - time.time()), producer=producer)
        try:
            wait_for(lambda: client.llen("bench:late") >= probes, PROBE_START_S + PROBE_SPAN_S + 120, 0.5)
        except TimeoutError:
            pass
        try:
            wait_for(lambda: client.llen("celery") == 0, 60, 0.5)
        except TimeoutError:
            pass
        rss_after = worker.rss_mb()
        late = [int(x) for x in client.lrange("bench:late", 0, -1)]
        return {
            "enqueue_per_s": n / enqueue_s,
            "rss_before_mb": rss_before,
            "rss_after_mb": rss_after,
            "late_p50_ms": percentile(late, 50),
            "late_p99_ms": percentile(late, 99),
            "late_max_ms": max(late) if late else float("nan"),
            "early": sum(1 for x in late if x < 0),
            "probes_run": len(late),
            "left_in_queue": client.llen("celery"),
        }
    finally:
        worker.stop()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--probes", type=int, default=1000)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, to check the script runs")
    args = parser.parse_args()
    n, probes = (2000, 50) if args.smoke else (args.n, args.probes)
    with redis_server() as url:
        ours = bench_noti(url, n, probes)
        theirs = bench_celery(url, n, probes)
    rows = []
    for name, data in (("noti delayed set", ours), ("celery countdown", theirs)):
        rows.append(
            [
                name,
                f"{data['enqueue_per_s']:,.0f}",
                f"{data['rss_before_mb']:.1f}",
                f"{data['rss_after_mb'] - data['rss_before_mb']:+.1f}",
                f"{data['late_p50_ms']:.0f}",
                f"{data['late_p99_ms']:.0f}",
                data["early"],
            ]
        )
    print_table(
        f"delayed: {n:,} scheduled an hour ahead + {probes:,} probes due over {PROBE_SPAN_S:.0f} s",
        ["", "schedule/s", "worker RSS MiB", "RSS growth", "late p50 ms", "late p99 ms", "early"],
        rows,
    )
    ratio = ours["enqueue_per_s"] / theirs["enqueue_per_s"]
    print(f"\nschedule rate ratio noti/celery: {ratio:.1f}x")
    path = write_results(
        "delay-smoke" if args.smoke else "delay",
        {"n": n, "probes": probes, "noti": ours, "celery": theirs, "ratio": ratio},
    )
    print(f"results: {path}")


if __name__ == "__main__":
    main()
