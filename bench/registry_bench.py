"""What the open channel registry costs on the hot path (issue 33): scenario 3's sandbox drain
with this revision's workers against the same drain with the workers of the revision before
the registry, in the same run.

18. drain 20,000 SMS, sandbox: this revision vs the last release before the channel registry;
    and ``notify()`` one at a time (scenario 1's 20,000 SMS), each side in a process of its own

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
from bench._report import Row, attempt, errors_of, paired_ratio, present
from bench._runner import main
from bench.drain_bench import SIZES, _interleaved, _rate, noti_drain_sandbox
from bench.enqueue_bench import SIZES as ENQUEUE_SIZES

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


#: One side of the notify() row: scenario 1's noti run in a fresh process (argv: url, n).
_NOTIFY = """
import sys
from bench.enqueue_bench import noti_notify, setup
setup(sys.argv[1])
print(noti_notify(int(sys.argv[2])))
"""


def notify_rate(url: str, n: int, path: str) -> float:
    """``notify()`` calls a second, ``n`` of them, in a process importing noti from ``path``."""
    done = subprocess.run(
        [sys.executable, "-c", _NOTIFY, url, str(n)],
        env={**os.environ, "PYTHONPATH": path},
        cwd=path,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return float(done.stdout.strip().splitlines()[-1])


def _notify_row(reps: int, smoke: bool, old: Path, rev: str) -> Row:
    """notify() one at a time: this revision against the one before, interleaved."""
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
        18,
        f"notify() one at a time, {n:,} SMS: registry cost",
        "/s",
        present(samples["noti"]),
        "<= 3 % slower (ratio >= 0.97)",
        baseline=present(samples["before"]),
        baseline_name=f"the same calls, noti of {rev} (before the channel registry)",
        check=lambda r: r.ratio is not None and r.ratio >= 0.97,
        ratio=paired_ratio(samples["noti"], samples["before"]),
        error=errors_of(errors, "noti", "before"),
    )


def scenario_18(
    reps: int, smoke: bool, config: WorkerConfig = FAST, ctx: dict[str, Any] | None = None
) -> list[Row]:
    """The sandbox drain, this revision's workers against the revision before the registry."""
    n = SIZES[3][smoke]
    rev = os.environ.get("NOTI_BENCH_BEFORE") or BEFORE_REGISTRY
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
        ),
        notify_row,
    ]


SCENARIOS = {18: scenario_18}

if __name__ == "__main__":
    sys.exit(main(__doc__ or "", SCENARIOS, "registry"))
