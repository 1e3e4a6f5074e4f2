"""Delayed notifications (issue scenario 7): noti's Redis delayed set against Celery countdowns.

For each side, on the same kind of private Redis:
- schedule N = 100,000 notifications due in an hour (the scheduling rate), and measure the
  workers' RSS before and after (noti keeps them in Redis; a Celery worker holds ETA tasks
  in memory);
- schedule P = 1,000 probes due over the next 10 s and measure how late each reached its
  provider / ran (p50, p99), while the N long-delayed ones are still held.

noti runs its worker configuration on ``noti.sms``; Celery ``-P threads -c 8``. Celery's
scheduling rate is timed on its first 10,000 ``apply_async(countdown=3600)``; the other
90,000 are copies of that message (:mod:`bench._celery_fill`), which saves ~60 s a run and
changes nothing the worker sees. The Celery side runs once whatever ``--reps`` says (it
takes 1-2 minutes).

    .venv/bin/python -m bench.delay_bench [--reps 3] [--smoke]
"""

from __future__ import annotations

import sys
import time
from typing import Any

from bench import plain_celery
from bench._celery_fill import fill
from bench._harness import percentile, redis_server, running, wait_for
from bench._noti import (
    FAST,
    PHONE,
    SMS_QUEUE,
    WorkerConfig,
    noti_env,
    point_driver,
    start_workers,
    write_config,
)
from bench._report import Row, attempt
from bench._runner import main
from bench.drain_bench import _plain, plain_worker

__all__ = ["bench_celery", "bench_noti", "scenario_7"]

#: (N, probes, probes start after s, probes spread over s, Celery loop-timed N)
SIZES = {False: (100_000, 1_000, 3.0, 10.0, 10_000), True: (2_000, 50, 1.0, 2.0, 1_000)}
#: How long after the last probe was due the Celery side waits for its probes to run.
CELERY_EXTRA_WAIT_S = 45.0
#: Then how long it waits for the worker to have taken every message before reading its RSS.
CELERY_QUEUE_WAIT_S = 15.0


def bench_noti(url: str, smoke: bool, config: WorkerConfig = FAST) -> dict[str, Any]:
    import noti
    from noti.providers.sandbox import read_outbox

    n, probes, start_s, span_s, _ = SIZES[smoke]
    env = noti_env(url, write_config())
    rt = point_driver(env)
    rt.redis.flushall()
    workers = start_workers(config, env, SMS_QUEUE)
    with running(workers):
        wait_for(lambda: rt.redis.exists(rt.keys.lock("pump")), 60)
        time.sleep(1)
        rss_before = sum(w.rss_mb() for w in workers)
        items = [{"type": "sms", "to": PHONE, "text": f"later {i}"} for i in range(n)]
        started = time.perf_counter()
        result = noti.schedule_many(items, delay=3600)
        enqueue_s = time.perf_counter() - started
        if result.stored != n:
            raise AssertionError(f"stored {result.stored} of {n}: {result.refused[:3]}")
        probe_items = [
            {"type": "sms", "to": PHONE, "text": f"probe {i}", "delay": start_s + span_s * i / probes}
            for i in range(probes)
        ]
        probe_ids = [i for i in noti.schedule_many(probe_items).ids if i]
        pipe = rt.redis.pipeline(transaction=False)
        for record_id in probe_ids:
            pipe.hget(rt.keys.record(record_id), "noti_timeout_at")
        due = dict(zip(probe_ids, (int(x) for x in pipe.execute()), strict=True))
        outbox = rt.keys.sandbox_outbox("sandbox")
        wait_for(lambda: rt.redis.llen(outbox) >= probes, start_s + span_s + 60, 0.1)
        rss_after = sum(w.rss_mb() for w in workers)
    sent = {e["id"]: e.get("t", e["at"] / 1000) * 1000 for e in read_outbox(rt.redis, rt.keys)}
    if set(sent) != set(probe_ids):
        raise AssertionError(f"the outbox holds {len(sent)} entries for {len(probe_ids)} probes")
    late = [sent[i] - due[i] for i in probe_ids]
    return _result(n / enqueue_s, rss_before, rss_after, late)


def bench_celery(url: str, smoke: bool) -> dict[str, Any]:
    n, probes, start_s, span_s, timed = SIZES[smoke]
    client = _plain(url)
    app, noop, stamp = plain_celery.app, plain_celery.noop, plain_celery.stamp
    with running([plain_worker(url, "-P", "threads", "-c", "8")]) as workers:
        wait_for(lambda: client.keys("_kombu.binding*"), 60)
        time.sleep(2)
        rss_before = workers[0].rss_mb()
        started = time.perf_counter()
        with app.producer_or_acquire() as producer:
            for i in range(timed):
                noop.apply_async(args=[PHONE, f"later {i}"], countdown=3600, producer=producer)
        rate = timed / (time.perf_counter() - started)
        fill(noop, [(PHONE, f"later {i}") for i in range(timed, n)], countdown=3600)
        now = time.time()
        due = [int((now + start_s + span_s * i / probes) * 1000) for i in range(probes)]
        with app.producer_or_acquire() as producer:
            for eta_ms in due:
                stamp.apply_async(args=[eta_ms], countdown=eta_ms / 1000 - time.time(), producer=producer)
        try:
            wait_for(lambda: client.llen("bench:late") >= probes, start_s + span_s + CELERY_EXTRA_WAIT_S, 0.5)
        except TimeoutError:
            pass
        gave_up_ms = time.time() * 1000
        try:
            wait_for(lambda: client.llen("celery") == 0, CELERY_QUEUE_WAIT_S, 0.5)
        except TimeoutError:
            pass
        rss_after = workers[0].rss_mb()
        left = client.llen("celery")  # read now: a stopping worker puts its ETA tasks back
    late = [float(x) for x in client.lrange("bench:late", 0, -1)]
    ran = len(late)
    # a probe that had not run when the wait ended is at least that late; which ones did not is
    # unknown, so the latest due are assumed (the smallest bound): p99 is then a lower bound
    late += [gave_up_ms - d for d in sorted(due, reverse=True)[: probes - ran]]
    return {**_result(rate, rss_before, rss_after, late), "probes_run": ran, "left": left}


def _result(rate: float, rss_before: float, rss_after: float, late: list[float]) -> dict[str, Any]:
    return {
        "enqueue_per_s": rate,
        "rss_before_mb": rss_before,
        "rss_after_mb": rss_after,
        "rss_growth_mb": rss_after - rss_before,
        "late_p50_ms": percentile(late, 50),
        "late_p99_ms": percentile(late, 99),
        "late_max_ms": max(late) if late else float("nan"),
        "early": sum(1 for x in late if x < 0),
        "probes_run": len(late),
    }


def scenario_7(
    reps: int, smoke: bool, config: WorkerConfig = FAST, ctx: dict[str, Any] | None = None
) -> list[Row]:
    n, probes, _, span_s, timed = SIZES[smoke]
    errors: list[str] = []
    ours: list[dict[str, Any]] = []
    theirs: list[dict[str, Any]] = []
    with redis_server() as url:
        for rep in range(reps):
            result = attempt(errors, f"noti rep {rep + 1}", lambda: bench_noti(url, smoke, config))
            if result is not None:
                ours.append(result)
            if rep == 0:
                result = attempt(errors, "celery", lambda: bench_celery(url, smoke))
                if result is not None:
                    theirs.append(result)

    def pick(runs: list[dict[str, Any]], key: str) -> list[float]:
        return [float(r[key]) for r in runs]

    notes = [f"{probes:,} probes due over {span_s:.0f} s; Celery side: 1 run, rate timed on {timed:,}"]
    if theirs and theirs[0]["probes_run"] < probes:
        notes.append(
            f"Celery ran {theirs[0]['probes_run']} of {probes} probes within {CELERY_EXTRA_WAIT_S:.0f} s "
            "of the last one's due time: its lateness p99 is a lower bound"
        )
    if theirs and theirs[0]["left"]:
        notes.append(f"Celery's queue still held {theirs[0]['left']:,} messages when its RSS was read")
    early = sum(r["early"] for r in ours)
    if early:
        notes.append(f"noti delivered {early} probes early")
    common: dict[str, Any] = {
        "config": config.as_json(),
        "baseline_name": "plain Celery apply_async(countdown=3600), worker -P threads -c 8",
        "error": "; ".join(errors) or None,
        "notes": notes,
    }
    return [
        Row(
            7,
            f"schedule_many({n:,}, delay=1 h)",
            "/s",
            pick(ours, "enqueue_per_s"),
            ">= 20,000/s",
            baseline=pick(theirs, "enqueue_per_s"),
            check=lambda r: r.median >= 20_000,
            extra={"noti": ours, "baseline": theirs},
            **common,
        ),
        Row(
            7,
            f"worker RSS growth holding {n:,} [{config.label}]",
            "MiB",
            pick(ours, "rss_growth_mb"),
            "<= 20 MiB",
            baseline=pick(theirs, "rss_growth_mb"),
            check=lambda r: r.median <= 20,
            **common,
        ),
        Row(
            7,
            "delayed lateness p99",
            "ms",
            pick(ours, "late_p99_ms"),
            "<= 1,000 ms",
            baseline=pick(theirs, "late_p99_ms"),
            check=lambda r: r.median <= 1000,
            **common,
        ),
    ]


SCENARIOS = {7: scenario_7}

if __name__ == "__main__":
    sys.exit(main(__doc__ or "", SCENARIOS, "delay"))
