"""The benchmarks still run (tiny sizes): scripts, not timed tests."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("module", ["bench.enqueue_bench", "bench.webman_bench"])
def test_benchmark_runs_in_smoke_mode(module: str, tmp_path: object) -> None:
    result = subprocess.run(
        [sys.executable, "-m", module, "--smoke"], cwd=ROOT, capture_output=True, text=True, timeout=240
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Celery" in result.stdout
