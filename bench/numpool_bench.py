"""The number pool under contention (issue 20, point 3): 30 SMS over a pool of 3 sender
numbers, each send taking 20 ms (the sandbox's ``delay_ms``), through noti's workers; a send
that finds no free number waits for a release (a blocking pop woken by the hang-up), not a
1 s poll. Target: all 30 sent in under 0.5 s (the floor is 10 rounds of 20 ms = 0.2 s).

Measured from just before ``notify_many()`` to the last send's time in the sandbox's outbox;
the baseline is the same 30 SMS with no pool (no sender to wait for). The notes give the
hand-off: from a number's send ending to the next send on it starting, which is the release
→ wake-up → call path.

    .venv/bin/python -m bench.numpool_bench [--reps 3] [--smoke]
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench._harness import redis_server, running, wait_for
from bench._noti import FAST, SMS_QUEUE, WorkerConfig, check_done, noti_env, point_driver, start_workers
from bench._report import Row, attempt, errors_of, paired_ratio, present
from bench._runner import main

__all__ = ["scenario_14"]

SENDERS = ["+8610690001", "+8610690002", "+8610690003"]
SEND_MS = 20
SIZES = (30, 9)  # full, smoke
TARGET_S = 0.5


def write_config() -> Path:
    """SMS through ``pooled`` (20 ms sends, senders from pool P) or ``plain`` (20 ms, no pool)."""
    path = Path(tempfile.mkdtemp(prefix="noti-bench-pool-")) / "noti.toml"
    path.write_text(
        "[channels.sms]\n"
        'provider = "pooled"\n\n'
        "[providers.pooled]\n"
        'kind = "sandbox"\n'
        f"delay_ms = {SEND_MS}\n"
        'sender_pool = "P"\n'
        "sender_wait_s = 30\n\n"
        "[providers.plain]\n"
        'kind = "sandbox"\n'
        f"delay_ms = {SEND_MS}\n"
    )
    return path


def one_run(runtime: Any, provider: str, n: int, gaps: list[float]) -> float:
    """Send ``n`` SMS through ``provider``; seconds until the last was sent."""
    import noti
    from noti.providers.sandbox import read_outbox

    runtime.redis.delete(runtime.keys.sandbox_outbox(provider))
    t0 = time.time()
    items = [{"type": "sms", "to": f"+86139{i:08d}", "text": f"m{i}", "provider": provider} for i in range(n)]
    ids = noti.notify_many(items).ids
    wait_for(lambda: len(read_outbox(runtime.redis, runtime.keys, provider)) >= n, timeout=60, interval=0.01)

    def all_done() -> bool:
        try:
            check_done(runtime, ids)
        except AssertionError:
            return False
        return True

    wait_for(all_done, timeout=30)
    outbox = read_outbox(runtime.redis, runtime.keys, provider)
    if provider == "pooled":
        by_sender: dict[str, list[float]] = {}
        for entry in outbox:
            by_sender.setdefault(entry["sender"], []).append(float(entry["t"]))
        for times in by_sender.values():
            times.sort()
            gaps.extend(b - a - SEND_MS / 1000 for a, b in zip(times, times[1:], strict=False))
        if set(by_sender) - set(SENDERS):
            raise AssertionError(f"a sender outside the pool: {sorted(by_sender)}")
    return max(float(entry["t"]) for entry in outbox) - t0


def measure(
    reps: int, smoke: bool, config: WorkerConfig
) -> tuple[dict[str, list[float | None]], dict[str, list[str]], list[float]]:
    n = SIZES[smoke]
    samples: dict[str, list[float | None]] = {}
    errors: dict[str, list[str]] = {}
    gaps: list[float] = []
    with redis_server() as url:
        env = noti_env(url, write_config())
        runtime = point_driver(env)
        from noti.numpool import NumberPool

        pool = NumberPool("P", client=runtime.redis, keys=runtime.keys, user="bench")
        for number in SENDERS:
            pool.add(number)
            pool.register(number)
        with running(start_workers(config, env, SMS_QUEUE)):
            attempt([], "warm-up", lambda: one_run(runtime, "plain", 4, []))  # workers up, scripts loaded
            for rep in range(reps):
                for provider in ("pooled", "plain"):
                    samples.setdefault(provider, []).append(
                        attempt(
                            errors.setdefault(provider, []),
                            f"{provider} rep {rep + 1}",
                            lambda provider=provider: one_run(runtime, provider, n, gaps),  # type: ignore[misc]
                        )
                    )
        left = pool.numbers()
        if any(str(state) != "idle+up" for state in left.values()):
            errors.setdefault("pooled", []).append(f"numbers not given back: {json.dumps(left)}")
    return samples, errors, gaps


def scenario_14(
    reps: int, smoke: bool, config: WorkerConfig = FAST, ctx: dict[str, Any] | None = None
) -> list[Row]:
    n = SIZES[smoke]
    s, errors, gaps = measure(reps, smoke, config)
    row = Row(
        14,
        f"number pool: {n} SMS over {len(SENDERS)} senders, {SEND_MS} ms each",
        "s",
        present(s["pooled"]),
        f"< {TARGET_S} s",
        baseline=present(s["plain"]),
        baseline_name=f"the same {n} SMS, 20 ms each, no pool",
        check=lambda r: r.median < TARGET_S,
        ratio=paired_ratio(s["pooled"], s["plain"]),
        config=config.as_json(),
        error=errors_of(errors, "pooled", "plain"),
    )
    if gaps:
        ms = sorted(g * 1000 for g in gaps)
        row.extra["handoff_ms"] = {"median": statistics.median(ms), "max": ms[-1], "n": len(ms)}
        row.notes.append(
            f"hand-off (a send ends -> its number's next send): median {statistics.median(ms):.1f} ms, "
            f"max {ms[-1]:.1f} ms over {len(ms)}; floor {n // len(SENDERS) * SEND_MS / 1000:.2f} s"
        )
    return [row]


SCENARIOS = {14: scenario_14}

if __name__ == "__main__":
    sys.exit(main(__doc__ or "", SCENARIOS, "numpool"))
