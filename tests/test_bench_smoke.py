"""The benchmarks still run (tiny sizes, every scenario): scripts, not timed tests."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow


def test_every_benchmark_scenario_runs_in_smoke_mode() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "bench", "--smoke"], cwd=ROOT, capture_output=True, text=True, timeout=400
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "Celery" in result.stdout
    # every scenario reported rows (whether a tiny run meets a target says nothing)
    results = json.loads((ROOT / "bench" / "results" / "all-smoke.json").read_text())
    rows = results["rows"]
    assert {row["scenario"] for row in rows} >= set(range(17)), sorted({row["scenario"] for row in rows})
    # the rows with a floor show their fraction of it (scenario 0 measured it)
    fractions = {row["scenario"]: row["floor_fraction"] for row in rows if row["floor_fraction"] is not None}
    assert set(fractions) >= {1, 2, 3, 5, 8} and all(f > 0 for f in fractions.values()), fractions
    # and the machine's speed was probed before and after, for reading the table
    assert "machine before:" in result.stdout and "machine after:" in result.stdout
    for when in ("before", "after"):
        assert results["machine"][when]["loop_us"] > 0 and results["machine"][when]["ping_us"] > 0
