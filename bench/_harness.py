"""Shared pieces of the benchmarks: a private redis-server, worker subprocesses, RSS, stats.

Benchmarks are scripts, not tests: each starts what it needs on loopback, bounds every
wait, cleans up, prints a table and writes JSON under ``bench/results/``.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests import servers
from tests.servers import free_port

__all__ = [
    "Worker",
    "free_port",
    "group_cpu_s",
    "percentile",
    "pid_cpu_s",
    "print_table",
    "redis_cpu_s",
    "redis_server",
    "repoint",
    "running",
    "summarize",
    "wait_for",
    "write_results",
]

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"


def wait_for(predicate: Callable[[], Any], timeout: float, interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"not reached within {timeout} s")


@contextmanager
def redis_server() -> Iterator[str]:
    """A throw-away redis-server on a free loopback port; yields its URL (no database)."""
    try:
        with servers.redis_server() as url:
            yield url
    except FileNotFoundError as exc:
        sys.exit(str(exc))


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int | str) -> list[str] | None:
    """Fields of ``/proc/PID/stat`` after the command name (index 0 = state), or None if gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


def pid_cpu_s(pid: int) -> float:
    """User + system CPU seconds of one process so far (0 if it is gone)."""
    fields = _stat_fields(pid)
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS if fields else 0.0


def group_cpu_s(pgid: int) -> float:
    """User + system CPU seconds of every live process in process group ``pgid``."""
    total = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(entry.name)
        if fields and int(fields[2]) == pgid:
            total += int(fields[11]) + int(fields[12])
    return total / _CLOCK_TICKS


def redis_cpu_s(client: Any) -> float:
    """The redis-server's own CPU seconds so far (``used_cpu_user + used_cpu_sys``)."""
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def repoint(app: Any, broker_url: str) -> None:
    """Make a Celery ``app`` of this process publish to ``broker_url`` from now on: benchmarks
    move between private Redis servers, so its cached connection and producer pools are
    dropped when the URL changes. (They are not closed: kombu's global pool registry would
    hand the closed pool back for an equal URL.)"""
    if app.conf.broker_url == broker_url:
        return
    app.conf.broker_url = broker_url
    app._pool = None
    if "amqp" in app.__dict__:
        app.amqp._producer_pool = None


class Worker:
    """A worker program in its own process group, its output in a log file: ``argv`` run
    from the repository's root with ``env`` added to this process's environment.
    :meth:`celery` builds a ``celery worker`` command line."""

    def __init__(self, argv: Sequence[str], env: dict[str, str]) -> None:
        #: What was added to the environment.
        self.env = dict(env)
        self.log = tempfile.NamedTemporaryFile(prefix="noti-bench-worker-", suffix=".log", delete=False)
        self.proc = subprocess.Popen(
            list(argv),
            env={**os.environ, **env},
            cwd=ROOT,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self._terminated = False

    @classmethod
    def celery(
        cls, app: str, env: dict[str, str], *args: str, launcher: Sequence[str] = ("celery",)
    ) -> Worker:
        """``celery -A app worker`` (warnings only, no mingle or gossip) with ``args``;
        ``launcher`` is the module run with ``python -m`` (``celery``, or a wrapper such as
        ``bench._counting_worker`` followed by its own arguments)."""
        celery_args = ["-A", app, "worker", "-l", "WARNING", "--without-mingle", "--without-gossip"]
        return cls([sys.executable, "-m", *launcher, *celery_args, *args], env)

    def rss_mb(self) -> float:
        """Resident memory of the worker and its children, MiB."""
        total = 0
        pids = [self.proc.pid]
        try:
            children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text().split()
            pids += [int(c) for c in children]
        except OSError:
            pass
        for pid in pids:
            try:
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
            except OSError:
                continue
        return total / 1024

    @property
    def pgid(self) -> int:
        """The worker's process group (its own pid: it leads a new session)."""
        return self.proc.pid

    def cpu_s(self) -> float:
        """User + system CPU seconds of the worker's whole process group so far."""
        return group_cpu_s(self.pgid)

    def tail(self, lines: int = 15) -> str:
        """The end of the worker's log, for error messages."""
        try:
            return "\n".join(Path(self.log.name).read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def terminate(self) -> None:
        """Ask the worker to stop (SIGTERM to its process group, once); :meth:`stop` waits."""
        if self.proc.poll() is None and not self._terminated:
            self._terminated = True
            try:
                os.killpg(self.pgid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def stop(self, keep_log: bool = False) -> None:
        """SIGTERM the process group, SIGKILL it after 20 s; remove the log unless asked."""
        if self.proc.poll() is None:
            try:
                self.terminate()
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.pgid, signal.SIGKILL)
                self.proc.wait(10)
            except ProcessLookupError:
                pass
        try:  # children left behind by a killed parent
            os.killpg(self.pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.log.close()
        if not keep_log:
            Path(self.log.name).unlink(missing_ok=True)


@contextmanager
def running(workers: Sequence[Worker]) -> Iterator[Sequence[Worker]]:
    """Stop every worker on the way out, whatever happened (all asked at once, then waited for)."""
    try:
        yield workers
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            worker.stop()


def percentile(values: Sequence[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


def summarize(samples: Sequence[float]) -> dict[str, float]:
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples)}


def print_table(title: str, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(header)]
    print(f"\n{title}")
    print("  ".join(str(h).ljust(w) for h, w in zip(header, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)))


def write_results(name: str, data: dict[str, Any]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(data, indent=2))
    return path
