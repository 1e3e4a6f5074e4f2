"""What the timeline and the address index cost on the hot path (issue 36): scenario 3's
sandbox drain, and ``notify()`` one at a time, with this revision against the revision before
the timeline, in the same run (as scenario 18 does: :func:`bench.registry_bench.against_revision`).

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

import sys
from typing import Any

from bench._noti import FAST, WorkerConfig
from bench._report import Row
from bench._runner import main
from bench.registry_bench import Cost, against_revision

__all__ = ["BEFORE_TIMELINE", "scenario_21"]

#: The last commit of main before the timeline (issue 35's release).
BEFORE_TIMELINE = "ee40f3c"
TIMELINE = Cost(
    21, "timeline + address index", "the timeline", BEFORE_TIMELINE, "NOTI_BENCH_BEFORE_TIMELINE", 0.90
)


def scenario_21(
    reps: int, smoke: bool, config: WorkerConfig = FAST, ctx: dict[str, Any] | None = None
) -> list[Row]:
    """The sandbox drain and notify(), this revision against the revision before the timeline."""
    return against_revision(TIMELINE, reps, smoke, config)


SCENARIOS = {21: scenario_21}

if __name__ == "__main__":
    sys.exit(main(__doc__ or "", SCENARIOS, "timeline"))
