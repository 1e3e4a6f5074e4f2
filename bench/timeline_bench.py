"""What the timeline and the address index cost on the hot path (issue 36): scenario 3's
sandbox drain, and ``notify()`` one at a time, with this revision against the revision before
the timeline, in the same run (the same way as scenario 18: :mod:`bench.registry_bench`).

21. drain 20,000 SMS, sandbox: this revision vs the last one before the timeline; and
    ``notify()`` one at a time (scenario 1's 20,000 SMS), each side in a process of its own

The drain's records are made by this revision in both runs (so the workers of the revision
before read records that carry a door and an address index entry: they ignore both). What
the timeline adds per record: one ``RPUSH`` in the claim script and one in the finish script,
and building the attempt's steps in Python; per ``notify()``: one ``ZADD`` to the address
index and an HMAC. The issue's target: no more than 10 % slower (ratio >= 0.90).

    .venv/bin/python -m bench.timeline_bench [--reps 3] [--smoke]
    NOTI_BENCH_BEFORE_TIMELINE=<rev> …   compare with another revision
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from bench._harness import redis_server
from bench._noti import FAST, WorkerConfig
from bench._report import Row, attempt, errors_of, paired_ratio, present
from bench._runner import main
from bench.drain_bench import SIZES, _interleaved, _rate, noti_drain_sandbox
from bench.enqueue_bench import SIZES as ENQUEUE_SIZES
from bench.registry_bench import ROOT, notify_rate, worktree

__all__ = ["BEFORE_TIMELINE", "scenario_21"]

#: The last commit of main before the timeline (issue 35's release).
BEFORE_TIMELINE = "ee40f3c"
TARGET = "<= 10 % slower (ratio >= 0.90)"


def _ok(row: Row) -> bool:
    return row.ratio is not None and row.ratio >= 0.90


def _notify_row(reps: int, smoke: bool, old: Path, rev: str) -> Row:
    n = ENQUEUE_SIZES[1][smoke]
    samples: dict[str, list[float | None]] = {"noti": [], "before": []}
    errors: dict[str, list[str]] = {"noti": [], "before": []}
    with redis_server() as url:
        for rep in range(reps):
            for side, path in (("noti", ROOT), ("before", old)):
                samples[side].append(
                    attempt(errors[side], f"{side} rep {rep + 1}", partial(notify_rate, url, n, str(path)))
                )
    return Row(
        21,
        f"notify() one at a time, {n:,} SMS: timeline + address index cost",
        "/s",
        present(samples["noti"]),
        TARGET,
        baseline=present(samples["before"]),
        baseline_name=f"the same calls, noti of {rev} (before the timeline)",
        check=_ok,
        ratio=paired_ratio(samples["noti"], samples["before"]),
        error=errors_of(errors, "noti", "before"),
    )


def scenario_21(
    reps: int, smoke: bool, config: WorkerConfig = FAST, ctx: dict[str, Any] | None = None
) -> list[Row]:
    """The sandbox drain, this revision's workers against the revision before the timeline."""
    n = SIZES[3][smoke]
    rev = os.environ.get("NOTI_BENCH_BEFORE_TIMELINE") or BEFORE_TIMELINE
    with worktree(rev) as old:
        with redis_server() as url:
            before = replace(config, extra_env=(("PYTHONPATH", str(old)),))
            runs = {
                "noti": partial(noti_drain_sandbox, url, n, config),
                "before": partial(noti_drain_sandbox, url, n, before),
            }
            drains, errors = _interleaved(reps, runs)
        notify_row = _notify_row(reps, smoke, old, rev)
    now, then = ([_rate(d) for d in drains[side]] for side in ("noti", "before"))
    return [
        Row(
            21,
            f"drain {n:,} SMS, sandbox: timeline cost [{config.label}]",
            "/s",
            present(now),
            TARGET,
            baseline=present(then),
            baseline_name=f"the same drain, workers of {rev} (before the timeline)",
            check=_ok,
            ratio=paired_ratio(now, then),
            config=config.as_json(),
            extra={side: [d and d.as_json() for d in ds] for side, ds in drains.items()},
            error=errors_of(errors, "noti", "before"),
        ),
        notify_row,
    ]


SCENARIOS = {21: scenario_21}

if __name__ == "__main__":
    sys.exit(main(__doc__ or "", SCENARIOS, "timeline"))
