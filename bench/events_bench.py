"""Events under sparse traffic (issue 21, point 1): from ``dispatch`` to the event's
activation by a processor, with an idle worker and one event every 0.2-3 s (random gaps,
fixed seed), p50 / p99 / max.

Under sparse traffic every event finds the processor gone idle, so each one is the case
the starting marker used to get wrong: a dispatch within ``NOTI_EVENT_LOCK_TTL_S`` of an
earlier one found that dispatch's marker, queued nothing, and waited for the sweep (up to
~10 s). Each event's wait is read from the event itself (``activated_ms - created_ms``, both
stamped on this host). One ``celery worker -P threads -c 4`` consumes every queue, with its
delayed pump and event sweep as deployed.

    .venv/bin/python -m bench.events_bench [--reps 3] [--smoke]
"""

from __future__ import annotations

import random
import sys
import time
from functools import partial
from typing import Any

from bench._harness import Worker, percentile, redis_server, running, wait_for
from bench._noti import FAST, WorkerConfig, noti_env, point_driver, write_config
from bench._report import Row, attempt, errors_of, present
from bench._runner import main

__all__ = ["scenario_13"]

#: Events per repetition (smoke, full) and the gaps between them (seconds).
EVENTS = {True: 5, False: 50}
GAPS_S = {True: (0.2, 0.6), False: (0.2, 3.0)}
TARGET_P99_MS = 100.0


def sparse_waits(url: str, smoke: bool, seed: int) -> list[float]:
    """One repetition: the dispatch-to-activation waits (ms) of events sent one at a time."""
    env = noti_env(url, write_config())
    runtime = point_driver(env)
    runtime.redis.flushdb()
    from noti.events import Events

    api = Events(runtime)
    api.add_listener("order.*", {"type": "sms", "target": "{{ phone }}", "text": "Order {{ id }} paid"})
    worker = Worker.celery("noti", {**env, "NOTI_PUMP_INTERVAL_S": "0.2"}, "-P", "threads", "-c", "4")
    with running([worker]):
        # warm up: the worker is ready once it has processed an event (not measured)
        warm = api.dispatch("order.paid", {"id": 0, "phone": "+8613912345678"})
        wait_for(lambda: api.get(warm).done_ms, timeout=60)
        wait_for(lambda: not api.status().alive, timeout=30)
        gaps = random.Random(seed)
        ids = []
        low, high = GAPS_S[smoke]
        for n in range(EVENTS[smoke]):
            time.sleep(gaps.uniform(low, high))
            ids.append(api.dispatch("order.paid", {"id": n + 1, "phone": "+8613912345678"}))
        wait_for(lambda: all(api.get(i).done_ms for i in ids), timeout=60)
        waits = [float(api.get(i).activated_ms - api.get(i).created_ms) for i in ids]
        if any(api.get(i).failed for i in ids):
            raise AssertionError(f"an event failed: {api.get(ids[0]).error_message}")
    return waits


def scenario_13(
    reps: int, smoke: bool, config: WorkerConfig = FAST, ctx: dict[str, Any] | None = None
) -> list[Row]:
    errors: list[str] = []
    runs: list[list[float] | None] = []
    with redis_server() as url:
        for rep in range(reps):
            runs.append(
                attempt(errors, f"sparse events rep {rep + 1}", partial(sparse_waits, url, smoke, rep))
            )

    def stat(pick: Any) -> list[float | None]:
        return [None if r is None else pick(r) for r in runs]

    low, high = GAPS_S[smoke]
    notes = [
        f"{EVENTS[smoke]} events per repetition, one every {low}-{high} s (uniform), idle worker"
        " (-P threads -c 4, its pump and event sweep on); wait = activated_ms - created_ms",
    ]
    extra = {"waits_ms": runs}
    err = errors_of({"sparse": errors}, "sparse")
    rows = [
        Row(
            13,
            "events, sparse traffic: dispatch to activation p50",
            "ms",
            present(stat(lambda r: percentile(r, 50))),
            "(printed)",
            notes=notes,
            extra=extra,
            error=err,
        ),
        Row(
            13,
            "events, sparse traffic: dispatch to activation p99",
            "ms",
            present(stat(lambda r: percentile(r, 99))),
            f"<= {TARGET_P99_MS:.0f} ms",
            check=lambda row: row.median <= TARGET_P99_MS,
            error=err,
        ),
        Row(
            13,
            "events, sparse traffic: dispatch to activation max",
            "ms",
            present(stat(max)),
            "(printed)",
            error=err,
        ),
    ]
    return rows


SCENARIOS = {13: scenario_13}

if __name__ == "__main__":
    sys.exit(main(__doc__ or "", SCENARIOS, "events"))
