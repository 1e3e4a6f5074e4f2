"""CLI start-up (issue 18, point 6): wall time of ``noti list``, ``noti get ID`` and
``noti add sms …`` as a user runs them (a new process each, from start to exit), next to
``python -c "import redis"`` (the baseline: redis-py alone) and ``python -c "import noti.cli"``
in the same run. Target: each command <= 300 ms (median).

Two ways of starting noti, each its own rows, in the same rounds:

- ``python -m noti`` from the checkout, in the development venv (``.venv``, where noti is an
  editable install): the code measured is this checkout's, and every Python start also
  runs setuptools' editable finder (its ``.pth`` file), which a user's install does not
  have. These are the rows the target was set on.
- ``(installed)``: the ``noti`` console script of a wheel built from this checkout
  (``pip wheel``) and installed (``pip install --no-deps``) into a venv of its own whose
  dependencies are the development venv's (one ``.pth`` line naming its site-packages), run
  from outside the checkout: what ``pip install noti`` gives a user. Not in ``--smoke``
  runs (building the wheel fetches setuptools, as ``pip`` does).

Every command runs against a private redis-server holding 20 records (``noti list -limit 20``
prints all of them as a table), with a settings file (``NOTI_CONFIG``) as a deployment has.
The commands take turns (one run of each, then the next round), so a load change on the
machine touches them all alike. A warm-up round first lets Python cache noti's bytecode
(``PYTHONDONTWRITEBYTECODE`` is dropped from the commands' environment, as an installed
package has its bytecode), and the OS cache the files.

    .venv/bin/python -m bench.cli_bench [--reps 3] [--smoke]
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

from bench._harness import ROOT, redis_server
from bench._noti import FAST, PHONE, WorkerConfig, noti_env, write_config
from bench._report import Row, attempt
from bench._runner import main

__all__ = ["scenario_10"]

#: Runs of each command per repetition (each repetition's samples are all its runs).
RUNS = {False: 10, True: 2}
#: Records in the store for ``noti list``.
RECORDS = 20
TARGET_S = 0.3
#: The suffix of the samples of the installed console script (see the module's docstring).
INSTALLED = " (installed)"


def _out(*argv: str | Path) -> str:
    """The standard output of ``argv`` (it must succeed)."""
    done = subprocess.run([str(a) for a in argv], check=True, capture_output=True, text=True, timeout=300)
    return done.stdout


def _installed_noti(directory: str) -> list[str]:
    """The console script of noti installed from a wheel of this checkout into a venv of its
    own under ``directory`` (its dependencies: the development venv's site-packages)."""
    source, wheels, venv = (Path(directory) / name for name in ("source", "wheels", "installed"))
    # built from a copy: setuptools writes build/ and *.egg-info beside the sources it builds
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(ROOT / "noti", source / "noti", ignore=shutil.ignore_patterns("__pycache__"))
    _out(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", wheels, source)
    [wheel] = wheels.glob("noti-*.whl")
    _out(getattr(sys, "_base_executable", sys.executable), "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    site = _out(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip()
    dependencies = next(p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir())
    (Path(site) / "noti-bench-dependencies.pth").write_text(dependencies + "\n")
    # pip of the development venv, run by the new venv's Python, installs there; and
    # --ignore-installed leaves the development venv's editable noti alone
    _out(python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--ignore-installed", wheel)
    return [str(venv / "bin" / "noti")]


def _noti_command() -> tuple[list[str], str]:
    """How ``noti`` is started: ``python -m noti`` from the repository's root, so the code
    measured is this checkout's (the console script would import the installed package;
    it runs the same ``noti.cli:main``)."""
    return [sys.executable, "-m", "noti"], "`python -m noti`"


def _env(url: str, directory: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NOTI_", "CELERY_"))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return {**env, **noti_env(url, write_config(directory))}


def _wall_s(argv: Sequence[str], env: dict[str, str], cwd: Path = ROOT) -> float:
    """Seconds from starting ``argv`` in ``cwd`` to its exit (it must succeed)."""
    started = time.perf_counter()
    done = subprocess.run(list(argv), env=env, cwd=cwd, capture_output=True, text=True, timeout=60)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[-3:])} exited {done.returncode}: {done.stderr.strip()[:300]}")
    return elapsed


def _seed(noti: list[str], env: dict[str, str], directory: str) -> str:
    """Add the records ``noti list`` shows (one bulk ``noti add -f``); the id of one of them."""
    lines = Path(directory) / "records.jsonl"
    lines.write_text(
        "".join(f'{{"type": "sms", "to": "{PHONE}", "text": "record {i}"}}\n' for i in range(RECORDS))
    )
    subprocess.run([*noti, "add", "-f", str(lines)], env=env, cwd=ROOT, check=True, capture_output=True)
    listed = subprocess.run(
        [*noti, "list", "-limit", "1", "-json", "-c"],
        env=env,
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    )
    return str(json.loads(listed.stdout)[0]["id"])


def _noti_commands(noti: list[str], record_id: str, suffix: str = "") -> dict[str, list[str]]:
    return {
        f"list{suffix}": [*noti, "list", "-limit", str(RECORDS)],
        f"get{suffix}": [*noti, "get", record_id],
        f"add{suffix}": [*noti, "add", "sms", "-to", PHONE, "-text", "from the CLI bench"],
    }


def _commands(noti: list[str], record_id: str) -> dict[str, list[str]]:
    python = [sys.executable, "-c"]
    return {
        "import redis": [*python, "import redis"],
        "import noti.cli": [*python, "import noti.cli"],
        "python": [*python, "pass"],
        **_noti_commands(noti, record_id),
    }


def measure(reps: int, smoke: bool) -> tuple[dict[str, list[float]], list[str], str]:
    """Wall seconds of every command, all runs of all repetitions; failures; how noti ran."""
    noti, how = _noti_command()
    samples: dict[str, list[float]] = {}
    errors: list[str] = []
    with redis_server() as url, tempfile.TemporaryDirectory(prefix="noti-bench-cli-") as directory:
        env = _env(url, directory)
        record_id = _seed(noti, env, directory)
        commands = _commands(noti, record_id)
        cwd = {name: ROOT for name in commands}
        installed = None if smoke else attempt(errors, "installing noti", partial(_installed_noti, directory))
        if installed is not None:
            extra = _noti_commands(installed, record_id, INSTALLED)
            commands.update(extra)
            cwd.update(dict.fromkeys(extra, Path(directory)))  # outside the checkout
        samples = {name: [] for name in commands}
        for name, argv in commands.items():  # warm-up: bytecode written, files cached
            attempt(errors, f"{name} warm-up", partial(_wall_s, argv, env, cwd[name]))
        for _ in range(reps * RUNS[smoke]):
            for name, argv in commands.items():
                took = attempt(errors, name, partial(_wall_s, argv, env, cwd[name]))
                if took is not None:
                    samples[name].append(took)
    return samples, errors, how


def scenario_10(
    reps: int, smoke: bool, config: WorkerConfig = FAST, ctx: dict[str, Any] | None = None
) -> list[Row]:
    samples, errors, how = measure(reps, smoke)
    ms = {name: [s * 1000 for s in values] for name, values in samples.items()}
    base = ms["import redis"]
    runs = reps * RUNS[smoke]

    def row(name: str, key: str, target: str, check: bool) -> Row:
        return Row(
            10,
            name,
            "ms",
            ms[key],
            target,
            baseline=base,
            baseline_name='python -c "import redis" (redis-py alone), same rounds',
            check=(lambda r: r.median <= TARGET_S * 1000) if check else None,
            error="; ".join(errors) if errors and not ms[key] else None,
        )

    rows = [
        row(f"CLI: noti list ({RECORDS} records, table)", "list", "<= 300 ms", True),
        row("CLI: noti get ID", "get", "<= 300 ms", True),
        row("CLI: noti add sms", "add", "<= 300 ms", True),
        row('CLI: python -c "import noti.cli"', "import noti.cli", "(printed)", False),
    ]
    if f"list{INSTALLED}" in ms:
        rows += [
            row(f"CLI: noti list{INSTALLED}", f"list{INSTALLED}", "<= 300 ms", True),
            row(f"CLI: noti get ID{INSTALLED}", f"get{INSTALLED}", "<= 300 ms", True),
            row(f"CLI: noti add sms{INSTALLED}", f"add{INSTALLED}", "<= 300 ms", True),
        ]
    python = statistics.median(ms["python"]) if ms["python"] else float("nan")
    best = ", ".join(f"{k} {min(v):.0f}" for k, v in ms.items() if v)
    rows[0].notes += [
        f"wall time of a new process, start to exit, {runs} runs of each (median; min..max); "
        f"noti started as {how} in the development venv (an editable install); "
        "bytecode cached by a warm-up round",
        f"best of the runs, ms: {best}; python -c pass (interpreter start) median {python:.0f} ms",
    ]
    if f"list{INSTALLED}" in ms:
        rows[0].notes.append(
            f"rows{INSTALLED}: the `noti` console script of a wheel of this checkout installed "
            "in a venv of its own (dependencies: the development venv's), run outside the checkout: "
            "what `pip install noti` gives; same rounds"
        )
    elif not smoke:
        rows[0].notes.append(f"rows{INSTALLED}: not measured (installing the wheel failed)")
    if errors:
        rows[0].notes.append("failures: " + "; ".join(errors[:3]))
    return rows


SCENARIOS = {10: scenario_10}

if __name__ == "__main__":
    sys.exit(main(__doc__ or "", SCENARIOS, "cli"))
