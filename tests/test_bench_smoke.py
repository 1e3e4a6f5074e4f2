"""The benchmarks still run (tiny sizes, every scenario): scripts, not timed tests."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

# beside the rest of the suite (make test's xdist workers) a smoke run can take minutes (215 s
# alone on 2 idle cores with scenarios 18 and 21, which each check out and run a revision
# before: 15 s each, and BullMQ, which npm installs first; two to three times that beside
# both CI suites): the subprocess's own timeout (900 s) ends it, not pytest's default 300 s
pytestmark = [pytest.mark.slow, pytest.mark.timeout(950)]


def test_every_benchmark_scenario_runs_in_smoke_mode() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "bench", "--smoke"], cwd=ROOT, capture_output=True, text=True, timeout=900
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "Celery" in result.stdout
    # every scenario reported rows (whether a tiny run meets a target says nothing)
    results = json.loads((ROOT / "bench" / "results" / "all-smoke.json").read_text())
    rows = results["rows"]
    assert {row["scenario"] for row in rows} >= set(range(20)), sorted({row["scenario"] for row in rows})
    # the rows with a floor show their fraction of it (scenario 0 measured it)
    fractions = {row["scenario"]: row["floor_fraction"] for row in rows if row["floor_fraction"] is not None}
    assert set(fractions) >= {1, 2, 3, 5, 8} and all(f > 0 for f in fractions.values()), fractions
    # and the machine's speed was probed before and after, for reading the table
    assert "machine before:" in result.stdout and "machine after:" in result.stdout
    for when in ("before", "after"):
        assert results["machine"][when]["loop_us"] > 0 and results["machine"][when]["ping_us"] > 0
    # issue 38: its targets against BullMQ are rows of their own, each to hold in every
    # repetition (huey's, dramatiq's, taskiq's and RQ's are context rows now), and the table
    # states the worker settings (events and signals on)
    targets = {row["name"]: row["target"] for row in rows}
    assert targets["notify() vs bullmq"] == "ahead of bullmq, every rep"
    assert targets["notify() vs huey"] == "(context)"
    assert any(t == ">= 1.5x bullmq, every rep" for n, t in targets.items() if n.startswith("notify_many"))
    assert (
        targets["latency sandbox p50 vs bullmq"]
        == targets["latency sandbox p99 vs bullmq"]
        == "<= bullmq, every rep"
    )
    assert targets["latency sandbox p99 vs taskiq"] == "(context)"
    assert any(
        t == "ahead of bullmq, every rep" for n, t in targets.items() if n.startswith("drain") and "SMS" in n
    )
    assert sum(t == ">= 1.5x bullmq, every rep" for n, t in targets.items() if "webhooks" in n) == 1
    assert targets["drain: worker CPU / notification vs bullmq"] == "<= bullmq, every rep"
    # BullMQ ran (npm installed it), or its rows say why it could not (no Node.js here, or
    # npm could not install it): skipped, not failed (a run that fails exits 1, above)
    bullmq = [row for row in rows if row["name"].endswith(("vs bullmq", "vs bullmq 1x50"))]
    assert len(bullmq) >= 9
    for row in bullmq:
        assert row["baseline"] or ": skipped: " in row["baseline_name"], row
    if shutil.which("node") and shutil.which("npm"):
        assert any(row["baseline"] for row in bullmq) or "SKIPPED" in result.stderr
    assert "task events on, task signals on" in result.stdout


def test_the_profile_of_the_hot_paths_runs_and_accounts_for_every_sample() -> None:
    if not (Path(sys.executable).with_name("py-spy").exists() or shutil.which("py-spy")):
        pytest.skip("py-spy is not installed (the bench extra)")
    result = subprocess.run(
        [sys.executable, "-m", "bench.profile_bench", "--smoke"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    assert "of which Redis running the script" in out and "huey's enqueue" in out
    # the measured reason for noti's own task events is printed beside Celery's path
    costs = {
        line.split(":")[0].strip(): float(line.split()[-1])
        for line in out.splitlines()
        if "x3, flush" in line or "TaskEvents:" in line
    }
    assert len(costs) == 2 and all(cost > 0 for cost in costs.values()), costs
    shares = [
        float(line.split("%")[0].split()[-1])
        for line in out.splitlines()
        if line.rstrip().endswith("µs") and "%" in line
    ]
    assert len(shares) == 6 and abs(sum(shares) - 100) < 1, shares
    # the frames that mark the parts are still found in py-spy's stacks: events, signals,
    # intake and noti's own send each take a share (the rest does not swallow them)
    events, signals, _, noti_own, intake, _ = shares
    assert events > 0 and signals > 0 and noti_own > 0 and intake > 0, shares
