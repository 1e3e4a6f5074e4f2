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
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from bench._harness import redis_server
from bench._noti import FAST, WorkerConfig
from bench._report import Row, attempt, errors_of, paired_ratio, present
from bench._runner import main
from bench.drain_bench import SIZES, _interleaved, _rate, noti_drain_sandbox
from bench.enqueue_bench import SIZES as ENQUEUE_SIZES

__all__ = ["BEFORE_REGISTRY", "Cost", "against_revision", "scenario_18"]

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


def notify_row(reps: int, smoke: bool, old: Path, rev: str, cost: Cost) -> Row:
    """notify() one at a time: this revision against ``rev`` (checked out at ``old``), interleaved."""
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
        cost.scenario,
        f"notify() one at a time, {n:,} SMS: {cost.what} cost",
        "/s",
        present(samples["noti"]),
        cost.target,
        baseline=present(samples["before"]),
        baseline_name=f"the same calls, noti of {rev} (before {cost.before})",
        check=cost.met,
        ratio=paired_ratio(samples["noti"], samples["before"]),
        error=errors_of(errors, "noti", "before"),
    )


@dataclass(frozen=True)
class Cost:
    """What a change costs on the hot path, measured against the revision before it."""

    scenario: int
    #: "registry", "timeline + address index", … (in the rows' names)
    what: str
    #: "the channel registry", … (in the baselines' names)
    before: str
    #: The revision before it (an environment variable may name another).
    rev: str
    env: str
    min_ratio: float

    @property
    def target(self) -> str:
        return f"<= {round((1 - self.min_ratio) * 100)} % slower (ratio >= {self.min_ratio:.2f})"

    def met(self, row: Row) -> bool:
        return row.ratio is not None and row.ratio >= self.min_ratio


def against_revision(cost: Cost, reps: int, smoke: bool, config: WorkerConfig) -> list[Row]:
    """Scenario 3's sandbox drain and ``notify()`` one at a time, this revision against the
    revision before a change (its workers and its ``notify()``), interleaved, in the same run."""
    n = SIZES[3][smoke]
    rev = os.environ.get(cost.env) or cost.rev
    with worktree(rev) as old:
        with redis_server() as url:
            before = replace(config, extra_env=(("PYTHONPATH", str(old)),))
            runs = {
                "noti": partial(noti_drain_sandbox, url, n, config),
                "before": partial(noti_drain_sandbox, url, n, before),
            }
            drains, errors = _interleaved(reps, runs)
        calls = notify_row(reps, smoke, old, rev, cost)
    now, then = ([_rate(d) for d in drains[side]] for side in ("noti", "before"))
    return [
        Row(
            cost.scenario,
            f"drain {n:,} SMS, sandbox: {cost.what} cost [{config.label}]",
            "/s",
            present(now),
            cost.target,
            baseline=present(then),
            baseline_name=f"the same drain, workers of {rev} (before {cost.before})",
            check=cost.met,
            ratio=paired_ratio(now, then),
            config=config.as_json(),
            extra={side: [d and d.as_json() for d in ds] for side, ds in drains.items()},
            error=errors_of(errors, "noti", "before"),
        ),
        calls,
    ]


REGISTRY = Cost(18, "registry", "the channel registry", BEFORE_REGISTRY, "NOTI_BENCH_BEFORE", 0.97)


def scenario_18(
    reps: int, smoke: bool, config: WorkerConfig = FAST, ctx: dict[str, Any] | None = None
) -> list[Row]:
    """The sandbox drain, this revision's workers against the revision before the registry."""
    return against_revision(REGISTRY, reps, smoke, config)


SCENARIOS = {18: scenario_18}

if __name__ == "__main__":
    sys.exit(main(__doc__ or "", SCENARIOS, "registry"))
