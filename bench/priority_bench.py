"""Priority (issue scenario 6): 20,000 level-1 SMS queued, then 100 level-1000 added.

The workers (noti's configuration) start on the full level-1 queue; once they deliver, the
driver adds 100 level-1000 SMS in one ``notify_many``. The sandbox outbox is the order of
delivery. Reported: how many level-1 were delivered after the level-1000 were written (their
records' creation time, stamped just before the one script call that stores them) and
before the last level-1000 was delivered,
against the bound ``Σ over processes (concurrency + prefetch count)`` — the messages a
worker may already hold when the urgent ones arrive. The prefetch count is what the live
workers report (``celery inspect stats``), else what noti's settings give.

    .venv/bin/python -m bench.priority_bench [--reps 3] [--smoke]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

from bench._harness import ROOT, redis_server, running, wait_for
from bench._noti import (
    FAST,
    PHONE,
    SMS_QUEUE,
    WorkerConfig,
    check_done,
    noti_env,
    point_driver,
    start_workers,
    write_config,
)
from bench._report import Row, attempt
from bench._runner import main

__all__ = ["noti_priority", "scenario_6"]

SIZES = {False: (20_000, 100), True: (3_000, 20)}  # smoke -> (level-1, level-1000)
STARTED_AFTER = 200  # level-1 delivered before the urgent ones are added


def _prefetch_per_process(runtime: Any, config: WorkerConfig, env: dict[str, str]) -> tuple[int, str]:
    """Prefetch count per worker process: asked of the live workers, else from the settings."""
    from noti.celery.app import app

    try:
        stats = app.control.inspect(timeout=2.0, limit=config.processes).stats() or {}
        counts = [int(s["prefetch_count"]) for s in stats.values() if "prefetch_count" in s]
        if len(counts) == config.processes:
            return max(counts), "inspect stats"
    except Exception:  # noqa: BLE001 - fall back to the settings
        pass
    code = "from noti.celery.app import app; print(app.conf.worker_prefetch_multiplier)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, **env, **config.env()},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return int(out.stdout.strip()) * config.concurrency, "settings"


def noti_priority(url: str, low: int, high: int, config: WorkerConfig = FAST) -> dict[str, Any]:
    """One run; the counts of the scenario."""
    import noti
    from noti.providers.sandbox import read_outbox

    env = noti_env(url, write_config())
    runtime = point_driver(env)
    runtime.redis.flushall()
    result = noti.notify_many({"type": "sms", "to": PHONE, "text": f"low {i}"} for i in range(low))
    if result.stored != low:
        raise AssertionError(f"stored {result.stored} of {low}")
    outbox = runtime.keys.sandbox_outbox("sandbox")
    workers = start_workers(config, env, SMS_QUEUE)
    with running(workers):
        wait_for(lambda: runtime.redis.llen(outbox) >= STARTED_AFTER, 60, 0.005)
        before = runtime.redis.llen(outbox)
        urgent = noti.notify_many(
            {"type": "sms", "to": PHONE, "text": f"high {i}", "lv": 1000} for i in range(high)
        )
        enqueued = time.perf_counter()
        ids = [str(i) for i in urgent.ids]
        levels = {runtime.redis.hget(runtime.keys.record(i), "noti_lv") for i in ids}
        if urgent.stored != high or levels != {"1000"}:
            raise AssertionError(f"stored {urgent.stored} of {high} urgent, at levels {levels}")
        wait_for(lambda: _all_done(runtime, ids), 60, 0.005)
        waited = time.perf_counter() - enqueued
        prefetch, source = _prefetch_per_process(runtime, config, env)
    check_done(runtime, ids)
    entries = read_outbox(runtime.redis, runtime.keys)[before:]
    last = max(i for i, e in enumerate(entries) if e["id"] in set(ids))
    # "added": when the urgent records were written (their creation time, stamped just before
    # the one script call that stores them with their messages), not when notify_many was
    # entered: level-1 sends while it was still validating the 100 are not "further" ones
    added_s = max(int(runtime.redis.hget(runtime.keys.record(i), "ct")) for i in ids) / 1000
    overtaken = sum(1 for e in entries[: last + 1] if e["lv"] == 1 and e.get("t", e["at"] / 1000) >= added_s)
    in_call = sum(1 for e in entries[: last + 1] if e["lv"] == 1) - overtaken
    bound = config.processes * (config.concurrency + prefetch)
    left = low - before
    if left <= bound:
        raise AssertionError(f"only {left} level-1 were still queued: too few to test the bound {bound}")
    return {
        "overtaken": overtaken,
        "level1_sent_while_notify_many_ran": in_call,
        "bound": bound,
        "prefetch_per_process": prefetch,
        "prefetch_from": source,
        "level1_left_at_enqueue": left,
        "last_urgent_after_s": waited,
        "urgent_positions": [i for i, e in enumerate(entries) if e["lv"] == 1000][:5],
    }


def _all_done(runtime: Any, ids: list[str]) -> bool:
    pipe = runtime.redis.pipeline(transaction=False)
    for record_id in ids:
        pipe.hget(runtime.keys.record(record_id), "noti_st")
    return all(state == "10" for state in pipe.execute())


def scenario_6(
    reps: int, smoke: bool, config: WorkerConfig = FAST, ctx: dict[str, Any] | None = None
) -> list[Row]:
    low, high = SIZES[smoke]
    errors: list[str] = []
    runs: list[dict[str, Any]] = []
    with redis_server() as url:
        for rep in range(reps):
            result = attempt(errors, f"noti rep {rep + 1}", lambda: noti_priority(url, low, high, config))
            if result is not None:
                runs.append(result)
    bound = max((r["bound"] for r in runs), default=0)
    notes = []
    if runs:
        r = runs[0]
        notes.append(
            f"bound = {config.processes} processes x (concurrency {config.concurrency} + prefetch "
            f"{r['prefetch_per_process']} from {r['prefetch_from']}) = {r['bound']}; last level-1000 "
            f"delivered {max(x['last_urgent_after_s'] for x in runs) * 1000:.0f} ms after enqueue (worst)"
        )
    return [
        Row(
            6,
            f"priority: level-1 delivered before {high} level-1000 [{config.label}]",
            "",
            [float(r["overtaken"]) for r in runs],
            f"<= {bound:,} (conc.+prefetch)",
            check=lambda row: all(r["overtaken"] <= r["bound"] for r in runs),
            config=config.as_json(),
            notes=notes,
            extra={"runs": json.loads(json.dumps(runs))},
            error="; ".join(errors) or None,
        )
    ]


SCENARIOS = {6: scenario_6}

if __name__ == "__main__":
    sys.exit(main(__doc__ or "", SCENARIOS, "priority"))
