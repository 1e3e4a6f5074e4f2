"""What the open channel registry costs on the hot path (issue 33): scenario 3's sandbox drain
with this revision's workers against the same drain with the workers of the revision before
the registry, in the same run.

18. drain 20,000 SMS, sandbox: this revision vs the last release before the channel registry

The revision before is checked out into a git worktree (``git worktree add --detach``) and
its workers run from it (``PYTHONPATH`` puts its ``noti`` ahead of the installed one); the
queue is filled by this revision in both runs, so the old workers also show that a record
written by this release is read by the one before, as the registry promises (same names, hash
fields, queues, keys). Repetitions are interleaved: this revision, the one before, this …
The issue's target: no more than 3 % slower (ratio >= 0.97).

    .venv/bin/python -m bench.registry_bench [--reps 3] [--smoke]
    NOTI_BENCH_BEFORE=<rev> …   compare with another revision
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from bench._harness import redis_server
from bench._noti import FAST, WorkerConfig
from bench._report import Row, errors_of, paired_ratio, present
from bench._runner import main
from bench.drain_bench import SIZES, _interleaved, _rate, noti_drain_sandbox

__all__ = ["BEFORE_REGISTRY", "scenario_18"]

#: The last commit of main before the channel registry (issue 32's release).
BEFORE_REGISTRY = "527a6ef"
ROOT = Path(__file__).resolve().parent.parent


@contextmanager
def worktree(rev: str) -> Iterator[Path]:
    """A detached checkout of ``rev`` in a temporary directory, removed afterwards."""
    where = Path(tempfile.mkdtemp(prefix="noti-before-"))
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", "--force", str(where), rev],
        check=True,
        capture_output=True,
    )
    try:
        yield where
    finally:
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(where)],
            check=False,
            capture_output=True,
        )


def scenario_18(
    reps: int, smoke: bool, config: WorkerConfig = FAST, ctx: dict[str, Any] | None = None
) -> list[Row]:
    """The sandbox drain, this revision's workers against the revision before the registry."""
    n = SIZES[3][smoke]
    rev = os.environ.get("NOTI_BENCH_BEFORE") or BEFORE_REGISTRY
    with worktree(rev) as old, redis_server() as url:
        before = replace(config, extra_env=(("PYTHONPATH", str(old)),))
        runs = {
            "noti": partial(noti_drain_sandbox, url, n, config),
            "before": partial(noti_drain_sandbox, url, n, before),
        }
        drains, errors = _interleaved(reps, runs)
    now, then = ([_rate(d) for d in drains[side]] for side in ("noti", "before"))
    return [
        Row(
            18,
            f"drain {n:,} SMS, sandbox: registry cost [{config.label}]",
            "/s",
            present(now),
            "<= 3 % slower (ratio >= 0.97)",
            baseline=present(then),
            baseline_name=f"the same drain, workers of {rev} (before the channel registry)",
            check=lambda r: r.ratio is not None and r.ratio >= 0.97,
            ratio=paired_ratio(now, then),
            config=config.as_json(),
            extra={side: [d and d.as_json() for d in ds] for side, ds in drains.items()},
            error=errors_of(errors, "noti", "before"),
        )
    ]


SCENARIOS = {18: scenario_18}

if __name__ == "__main__":
    sys.exit(main(__doc__ or "", SCENARIOS, "registry"))
