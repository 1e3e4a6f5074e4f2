"""The processes a chaos run starts and kills: one ``redis-server`` with AOF on, four
``celery -A noti worker`` processes and one ``celery -A noti beat``, all real subprocesses
(:class:`tests.servers.RedisProcess`, :class:`tests.servers.CeleryProcess`).

A worker slot runs one *incarnation* at a time (``w3.2``: slot 3, second start), each with its
own settings file naming it to the fake providers. A supervisor thread restarts any process
that exits without the run killing it, and keeps that as a crash.

**Redis restarts model a machine crash, the worst case the fsync policy allows.** A plain
SIGKILL of ``redis-server`` loses nothing in either mode: what it wrote is in the kernel
(shared/redis-ha-facts.md §5). So after the SIGKILL the incremental AOF file is cut back to
what the policy guarantees was on disk: with ``always`` all of it (Redis fsyncs before it
answers), with ``everysec`` its size one second before the kill (sampled every 20 ms). Redis
then starts on the same port from that file. ``crash="process"`` skips the cut.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import redis

from tests.servers import CeleryProcess, RedisProcess

__all__ = ["Cluster", "Incarnation", "RedisKill"]

#: How long Redis stays down after a kill (plus the time it takes to load its AOF).
REDIS_DOWN_S = 1.5
#: everysec: what an fsync once a second may not have written.
EVERYSEC_WINDOW_S = 1.0


@dataclass
class Incarnation:
    """One start of a worker slot (or of beat)."""

    name: str
    slot: int
    process: CeleryProcess
    started_at: float
    killed_at: float | None = None
    #: Exit status when it exited without being killed (a crash).
    crashed: int | None = None
    crashed_at: float | None = None

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.process.output().splitlines()[-lines:])
        except OSError:
            return "(no log)"


@dataclass(frozen=True, slots=True)
class RedisKill:
    """A Redis restart: SIGKILLed at ``killed_at`` (the process reaped: no reply can have
    left it later); its AOF kept what was written up to ``kept_until`` (== ``killed_at``
    when nothing was cut); answering again at ``up_at``."""

    killed_at: float
    kept_until: float
    cut_bytes: int
    up_at: float


@dataclass
class _AofSampler:
    """Samples the size of the incremental AOF file every 20 ms (everysec's cut point)."""

    directory: Path
    samples: deque[tuple[float, Path, int]] = field(default_factory=lambda: deque(maxlen=500))
    stop: threading.Event = field(default_factory=threading.Event)

    def incr_file(self) -> Path | None:
        manifest = self.directory / "appendonlydir" / "appendonly.aof.manifest"
        try:
            lines = manifest.read_text().splitlines()
        except OSError:
            return None
        names = [line.split()[1] for line in lines if line.split()[-1:] == ["i"]]
        return self.directory / "appendonlydir" / names[-1] if names else None

    def run(self) -> None:
        current: Path | None = None
        while not self.stop.wait(0.02):
            if current is None or not current.exists():
                current = self.incr_file()
                if current is None:
                    continue
            try:
                self.samples.append((time.time(), current, current.stat().st_size))
            except OSError:
                current = None

    def size_at(self, when: float) -> tuple[float, Path, int] | None:
        """The last sample taken at or before ``when``."""
        found = None
        for sample in list(self.samples):
            if sample[0] <= when:
                found = sample
        return found


class Cluster:
    """Redis, the workers and beat of one run, in ``workdir``."""

    def __init__(
        self,
        workdir: Path,
        *,
        fsync: str,
        crash: str,
        env: dict[str, str],
        config_for: Callable[[str], str],
        workers: int = 4,
    ) -> None:
        self.workdir = workdir
        self.fsync, self.crash = fsync, crash
        self.env = env
        #: The settings file of a process, by incarnation name.
        self._config_for = config_for
        (workdir / "redis").mkdir(parents=True, exist_ok=True)
        (workdir / "logs").mkdir(exist_ok=True)
        self.redis = RedisProcess(
            str(workdir / "redis"),
            *("--appendfsync", fsync, "--auto-aof-rewrite-percentage", "0"),
            *("--aof-use-rdb-preamble", "yes", "--aof-load-truncated", "yes"),
        )
        self.url = f"redis://127.0.0.1:{self.redis.port}/0"
        self.client = redis.Redis(port=self.redis.port, socket_timeout=5)
        self._sampler = _AofSampler(workdir / "redis")
        self._sampler_thread = threading.Thread(target=self._sampler.run, name="aof-sampler", daemon=True)
        self.slots = workers
        self.current: dict[int, Incarnation] = {}
        self.incarnations: list[Incarnation] = []
        self.redis_kills: list[RedisKill] = []
        self._generation: dict[int, int] = {}
        self._lock = threading.RLock()
        self._supervising = threading.Event()
        self._supervisor = threading.Thread(target=self._supervise, name="supervisor", daemon=True)

    # --- starting and stopping ----------------------------------------------------------------

    def start_redis(self) -> None:
        self.redis.start(self.client, timeout_s=30)
        self._sampler_thread.start()

    def _start(self, slot: int, kind: str) -> Incarnation:
        generation = self._generation[slot] = self._generation.get(slot, 0) + 1
        name = f"beat{generation}" if kind == "beat" else f"w{slot}.{generation}"
        config = self.workdir / f"{name}.toml"
        config.write_text(self._config_for(name))
        env = {**self.env, "NOTI_CONFIG": str(config)}
        log = self.workdir / "logs" / f"{name}.log"
        if kind == "beat":
            args: tuple[str, ...] = ("beat", "-l", "INFO")
        else:
            args = ("worker", "-P", "solo", "-l", "INFO", "--without-mingle", "--without-gossip")
            args += ("-n", f"{name}@%h")
        process = CeleryProcess(env, *args, log=log, name=name)
        incarnation = Incarnation(name, slot, process, time.time())
        with self._lock:
            self.current[slot] = incarnation
            self.incarnations.append(incarnation)
        return incarnation

    def start_all(self, ready_timeout_s: float = 90.0) -> None:
        """Start beat and the workers; wait until every worker says ``ready.``."""
        self._start(0, "beat")
        for slot in range(1, self.slots + 1):
            self._start(slot, "worker")
        deadline = time.monotonic() + ready_timeout_s
        for slot in range(1, self.slots + 1):
            incarnation = self.current[slot]
            while "ready." not in incarnation.process.output():
                if not incarnation.process.alive():
                    raise RuntimeError(f"worker {incarnation.name} exited:\n{incarnation.log_tail()}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"worker {incarnation.name} not ready:\n{incarnation.log_tail()}")
                time.sleep(0.1)
        self._supervisor.start()

    def stop_all(self) -> None:
        """SIGTERM every process (workers finish their sends), then Redis."""
        self._supervising.set()
        with self._lock:
            running = list(self.current.values())
        for incarnation in running:
            if incarnation.process.alive():
                try:
                    os.killpg(incarnation.process.proc.pid, 15)
                except ProcessLookupError:
                    pass
        for incarnation in running:
            try:
                incarnation.process.proc.wait(30)
            except subprocess.TimeoutExpired:
                incarnation.process.kill()
        self._sampler.stop.set()
        self.client.close()
        self.redis.stop()

    def remove(self) -> None:
        shutil.rmtree(self.workdir, ignore_errors=True)

    # --- faults -------------------------------------------------------------------------------

    def kill_worker(self, slot: int) -> Incarnation:
        """SIGKILL the worker in ``slot`` and start its next incarnation; the killed one."""
        with self._lock:
            victim = self.current[slot]
            victim.killed_at = time.time()
            victim.process.kill()
            self._start(slot, "worker")
        return victim

    def kill_redis(self) -> RedisKill:
        """SIGKILL Redis, cut its AOF as the fsync policy allows, start it again."""
        kill_sent = time.time()
        self.redis.kill()
        killed_at = time.time()
        kept_until, cut = killed_at, 0
        if self.crash == "os" and self.fsync == "everysec":
            sample = self._sampler.size_at(kill_sent - EVERYSEC_WINDOW_S)
            if sample is not None:
                kept_until, path, size = sample
                cut = max(0, path.stat().st_size - size)
                with path.open("r+b") as aof:
                    aof.truncate(size)
        time.sleep(REDIS_DOWN_S)
        self.redis.start(self.client, timeout_s=60)
        kill = RedisKill(killed_at, kept_until, cut, time.time())
        self.redis_kills.append(kill)
        return kill

    # --- the supervisor -----------------------------------------------------------------------

    def _supervise(self) -> None:
        while not self._supervising.wait(0.2):
            with self._lock:
                for slot, incarnation in list(self.current.items()):
                    code = incarnation.process.proc.poll()
                    if code is None or incarnation.killed_at is not None:
                        continue
                    incarnation.crashed, incarnation.crashed_at = code, time.time()
                    self._start(slot, "beat" if slot == 0 else "worker")

    def crashes(self) -> list[Incarnation]:
        with self._lock:
            return [i for i in self.incarnations if i.crashed is not None]
