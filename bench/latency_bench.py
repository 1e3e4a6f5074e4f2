"""Latency at a steady 200/s (issue scenario 5): ``notify()`` to the provider call.

noti runs its worker configuration (as in scenarios 3 and 4). The driver warms the workers
up with 50 sends, then sends 200/s for 10 s (1 s in smoke mode), paced by absolute
deadlines, each carrying its send time ``t0 = time.time()``:

- sandbox: in the SMS text; latency = the outbox entry's ``t`` (time.time() at the provider
  call; ``at``, whole ms, if ``t`` is missing) less ``t0``;
- 20 ms HTTP provider: in the webhook content; latency = the request's arrival at the fake
  server less ``t0``, so the provider's own 20 ms is not part of it (target: "above the
  20 ms").

Baseline: plain Celery ``lag.delay(t0)`` on ``celery worker -P prefork -c 2``, the task
recording ``time.time() - t0``, at the same rate. The peers (:mod:`bench.peers`) run the same
``lag`` task in the same repetitions: noti's sandbox p50 and p99 must be at most BullMQ's
(issue 38) in every repetition; huey, dramatiq and taskiq are shown for context.

    .venv/bin/python -m bench.latency_bench [--reps 3] [--smoke]
"""

from __future__ import annotations

import sys
import time
from functools import partial
from typing import Any

from bench import peers, plain_celery
from bench._harness import percentile, redis_server, running, wait_for
from bench._noti import (
    FAST,
    PHONE,
    SECRET,
    SMS_QUEUE,
    WEBHOOK_QUEUE,
    WorkerConfig,
    check_done,
    done_count,
    noti_env,
    point_driver,
    start_workers,
    write_config,
)
from bench._probes import RATE, SETTLE_S, WARMUP, lag_latency, paced
from bench._report import Row, attempt, errors_of, paired_ratio, present
from bench._runner import main
from bench.drain_bench import _plain, plain_worker
from bench.fake_http import FakeHttp

__all__ = ["celery_latency", "noti_latency", "scenario_5"]

#: The peers whose latency is measured beside noti's: 1.0 where noti's p50 and p99 must be
#: at most theirs in every repetition (issue 38: BullMQ's), None for context (huey's and
#: taskiq's were issue 24's targets).
PEERS: dict[str, float | None] = {"bullmq": 1.0, "huey": None, "dramatiq": None, "taskiq": None}


def noti_latency(
    url: str, provider: str, seconds: float, config: WorkerConfig = FAST, fake: FakeHttp | None = None
) -> dict[str, Any]:
    """Latencies (ms) of ``seconds`` × 200/s sends through ``provider`` (``sandbox``/``http``)."""
    import noti

    env = noti_env(url, write_config(hook_url=fake.url if fake is not None else None))
    runtime = point_driver(env)
    runtime.redis.flushall()
    sent: list[tuple[str, float]] = []
    if provider == "http":
        assert fake is not None
        target = fake.url

        def send(i: int) -> None:
            t0 = time.time()
            sent.append((noti.notify_webhook(target, content={"t0": t0, "n": i}), t0))
    else:

        def send(i: int) -> None:
            t0 = time.time()
            sent.append((noti.notify_sms(PHONE, f"t0={t0!r}"), t0))

    workers = start_workers(config, env, WEBHOOK_QUEUE if provider == "http" else SMS_QUEUE)
    with running(workers):
        for i in range(WARMUP):
            send(i)
        wait_for(lambda: done_count(runtime) >= WARMUP, 60, 0.02)
        sent.clear()
        runtime.redis.delete(runtime.keys.sandbox_outbox("sandbox"))
        if fake is not None:
            fake.reset()
        behind = paced(RATE, seconds, send)
        wait_for(lambda: done_count(runtime) >= WARMUP + len(sent), SETTLE_S, 0.02)
    check_done(runtime, [record_id for record_id, _ in sent])
    at = _provider_times(runtime, fake)
    missing = [record_id for record_id, _ in sent if record_id not in at]
    if missing or len(at) != len(sent):
        raise AssertionError(f"{len(sent)} sent, {len(at)} seen by the provider ({len(missing)} missing)")
    coarse = any(kind == "at" for _, kind in at.values())
    return {
        "ms": [(at[record_id][0] - t0) * 1000 for record_id, t0 in sent],
        "behind_s": behind,
        "coarse": coarse,
    }


def _provider_times(runtime: Any, fake: FakeHttp | None) -> dict[str, tuple[float, str]]:
    """Record id -> (time of the provider call, which clock)."""
    if fake is not None:
        return {webhook_id: (arrival, "arrival") for webhook_id, arrival in fake.stats()["arrivals"]}
    from noti.providers.sandbox import read_outbox

    times = {}
    for entry in read_outbox(runtime.redis, runtime.keys):
        if "t" in entry:
            times[entry["id"]] = (float(entry["t"]), "t")
        else:
            times[entry["id"]] = (entry["at"] / 1000, "at")
    return times


def celery_latency(url: str, seconds: float) -> dict[str, Any]:
    """The baseline: ``lag.delay(t0)`` at 200/s on ``celery worker -P prefork -c 2``."""
    client = _plain(url)
    workers = [plain_worker(url, "-P", "prefork", "-c", "2")]
    return lag_latency(client, workers, plain_celery.lag.delay, seconds, "plain Celery")


def scenario_5(
    reps: int, smoke: bool, config: WorkerConfig = FAST, ctx: dict[str, Any] | None = None
) -> list[Row]:
    """p50 and p99 for the sandbox and the 20 ms HTTP provider, against plain Celery."""
    seconds = 1.0 if smoke else 10.0
    names = ["sandbox", "http", "celery", *PEERS]
    errors: dict[str, list[str]] = {name: [] for name in names}
    runs: dict[str, list[dict[str, Any] | None]] = {name: [] for name in names}
    with redis_server() as url, FakeHttp(SECRET) as fake:
        for rep in range(reps):
            for name, run in (
                ("sandbox", partial(noti_latency, url, "sandbox", seconds, config)),
                ("celery", partial(celery_latency, url, seconds)),
                ("http", partial(noti_latency, url, "http", seconds, config, fake)),
                *(
                    (peer, peers.scenario_runner(peer, need, smoke, "latency", url, seconds))
                    for peer, need in PEERS.items()
                ),
            ):
                runs[name].append(attempt(errors[name], f"{name} rep {rep + 1}", run))
    done = {name: present(rs) for name, rs in runs.items()}

    def pct(name: str, p: float) -> list[float | None]:
        return [None if r is None else percentile(r["ms"], p) for r in runs[name]]

    notes = [f"{int(RATE * seconds):,} samples per run at {RATE}/s after {WARMUP} warm-up sends"]
    if any(r["coarse"] for r in done["sandbox"]):
        notes.append("sandbox outbox entries had no 't': latency from 'at' (whole ms)")
    worst = max((r["behind_s"] for rs in done.values() for r in rs), default=0.0)
    if worst > 0.05:
        notes.append(f"a sender fell {worst * 1000:.0f} ms behind its schedule")
    notes.append("http: to the request's arrival at the fake server (excludes its 20 ms answer time)")
    common: dict[str, Any] = {
        "config": config.as_json(),
        "baseline_name": "plain Celery prefork -c 2, .delay(t0) of a task recording time.time()-t0",
        "notes": notes,
    }
    extra = {k: [r and _summary(r) for r in v] for k, v in runs.items()}
    rows = []
    for provider, label, limits in (("sandbox", "sandbox", (2, 8)), ("http", "20 ms HTTP", (3, 10))):
        for p, limit in zip((50, 99), limits, strict=True):
            rows.append(
                Row(
                    5,
                    f"latency {label} p{p} [{config.label}]",
                    "ms",
                    present(pct(provider, p)),
                    f"<= {limit} ms" + (" (+20)" if provider == "http" else ""),
                    baseline=present(pct("celery", p)),
                    check=partial(_within, limit),
                    ratio=paired_ratio(pct(provider, p), pct("celery", p)),
                    extra=extra if provider == "sandbox" and p == 50 else {},
                    error=errors_of(errors, provider, "celery"),
                    **common,
                )
            )
    theirs_errors = {"noti": errors["sandbox"], **{peer: errors[peer] for peer in PEERS}}
    for p in (50, 99):
        theirs = {peer: pct(peer, p) for peer in PEERS}
        name = f"latency sandbox p{p}"
        rows += peers.rows(
            5, name, "ms", pct("sandbox", p), theirs, "latency", PEERS, theirs_errors, lower_is_better=True
        )
    return rows


def _within(limit: float, row: Row) -> bool:
    return row.median <= limit


def _summary(run: dict[str, Any]) -> dict[str, Any]:
    ms = run["ms"]
    return {
        "n": len(ms),
        **{f"p{p}": percentile(ms, p) for p in (50, 90, 99)},
        "max": max(ms) if ms else None,
        "behind_s": run["behind_s"],
        "coarse": run["coarse"],
    }


SCENARIOS = {5: scenario_5}

if __name__ == "__main__":
    sys.exit(main(__doc__ or "", SCENARIOS, "latency"))
