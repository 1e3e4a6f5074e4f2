"""Throw-away servers on loopback for the tests and the benchmarks: a private redis-server."""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import redis

__all__ = ["ApiProcess", "RedisProcess", "debug_command_args", "free_port", "pings", "redis_server"]

INSTALL_HINT = "redis-server is not installed (Debian/Ubuntu: apt-get install redis-server)"


#: Ports handed out by :func:`free_port` in the last few minutes, one empty file per port, shared
#: by every process of the tests on this machine (xdist's workers, the two suites `make test`
#: runs side by side, the benchmarks and the chaos run they start).
PORTS_DIR = Path(tempfile.gettempdir()) / "noti-test-ports"
#: How long a port stays reserved: long enough for its server to be up and bound.
PORT_RESERVED_S = 300.0


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now and handed to no other process of the tests lately.

    Binding port 0 finds a port nobody listens on, but the socket is closed before the server
    meant for it binds, and until then the kernel may give the same port to the next process
    that asks: two xdist workers starting their redis-servers at once could get one port (and
    the one whose server failed to bind would then talk to the other's). So each port found is
    also reserved, by creating a file named after it under :data:`PORTS_DIR` while holding an
    exclusive lock there; a port reserved by anyone in the last :data:`PORT_RESERVED_S` seconds
    is passed over, and older reservations are cleared.
    """
    PORTS_DIR.mkdir(exist_ok=True)
    with (PORTS_DIR / ".lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        now = time.time()
        for _ in range(200):
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = int(s.getsockname()[1])
            mark = PORTS_DIR / str(port)
            try:
                if now - mark.stat().st_mtime < PORT_RESERVED_S:
                    continue
            except FileNotFoundError:
                pass
            mark.touch()
            if random.random() < 0.05:  # now and then, forget the reservations long past
                for old in PORTS_DIR.iterdir():
                    with contextlib.suppress(OSError):
                        if old.name.isdigit() and now - old.stat().st_mtime > PORT_RESERVED_S:
                            old.unlink()
            return port
    raise RuntimeError(f"no free loopback port that is not reserved in {PORTS_DIR}")


def pings(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False


def debug_command_args(binary: str | None = None) -> list[str]:
    """``--enable-debug-command local`` when the installed redis-server (7 and later) knows it:
    the hostile-input corpus compares ``DEBUG DIGEST`` before and after each case."""
    binary = binary or shutil.which("redis-server")
    if binary is None:
        return []
    version = subprocess.run([binary, "--version"], capture_output=True, text=True, check=False).stdout
    found = re.search(r"v=(\d+)\.", version)
    return ["--enable-debug-command", "local"] if found and int(found.group(1)) >= 7 else []


@contextmanager
def redis_server(*args: str) -> Iterator[str]:
    """Run ``redis-server`` on a free loopback port, nothing persisted; yields its URL
    (``redis://127.0.0.1:PORT``, no database number). ``args`` are extra server options.

    Raises:
        FileNotFoundError: redis-server is not installed (the message says how to install it).
    """
    binary = shutil.which("redis-server")
    if binary is None:
        raise FileNotFoundError(INSTALL_HINT)
    workdir = tempfile.mkdtemp(prefix="noti-redis-")
    proc: subprocess.Popen[bytes] | None = None
    client: redis.Redis | None = None
    try:
        for _ in range(5):
            port = free_port()
            proc = subprocess.Popen(
                [
                    binary,
                    "--port",
                    str(port),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--dir",
                    workdir,
                    "--loglevel",
                    "warning",
                    *args,
                ],
                stdout=subprocess.DEVNULL,
            )
            client = redis.Redis(port=port)
            if _answers_as(client, proc, timeout_s=10):
                break
            # the port was taken before this server bound it (by a process that does not use
            # free_port): another port
            _stop(proc)
            client.close()
        else:
            raise RuntimeError("redis-server did not start on a free port in 5 tries")
        yield f"redis://127.0.0.1:{port}"
    finally:
        if client is not None:
            client.close()
        if proc is not None:
            _stop(proc)
        shutil.rmtree(workdir, ignore_errors=True)


def _answers_as(client: redis.Redis, proc: subprocess.Popen[bytes], timeout_s: float) -> bool:
    """Whether the redis-server ``proc`` answers ``client`` within ``timeout_s``: PONG, and its
    own process id in ``INFO server`` (a PONG alone may come from another server that holds the
    port, when ``proc`` could not bind it and is exiting)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        if pings(client):
            try:
                return bool(client.info("server").get("process_id") == proc.pid)
            except redis.ConnectionError:
                return False
        time.sleep(0.02)
    return False


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:  # a server that refuses to stop must not outlive its test
        proc.kill()
        proc.wait(10)


class RedisProcess:
    """A ``redis-server`` on a fixed loopback port and data directory with AOF on, which a test
    can SIGKILL and start again with its data (see shared/redis-ha-facts.md §5)."""

    def __init__(self, workdir: str, *args: str) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise FileNotFoundError(INSTALL_HINT)
        self._binary = binary
        self.workdir = workdir
        self.port = free_port()
        self._args = args
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, client: redis.Redis, timeout_s: float = 10.0) -> None:
        """Start the server and wait until ``client`` (on its port) gets PONG."""
        self.proc = subprocess.Popen(
            [
                self._binary,
                *("--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.workdir),
                *("--save", "", "--appendonly", "yes", "--appendfsync", "everysec"),
                *("--loglevel", "warning"),
                *self._args,
            ],
            stdout=subprocess.DEVNULL,
        )
        if not _answers_as(client, self.proc, timeout_s):
            raise RuntimeError(f"redis-server did not start on port {self.port}")

    def kill(self) -> None:
        """SIGKILL the server (what a crash or an OOM kill does)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


#: The repository: ``celery -A noti`` runs from here.
ROOT = Path(__file__).resolve().parent.parent

#: The PHP class of the webman queue whose messages :data:`SMS_AND_WEBMAN_CONFIG` turns into
#: notifications.
WEBMAN_NOTIFY_CLASS = "app\\queue\\Notify"


def sms_and_webman_config(php_class: str = WEBMAN_NOTIFY_CLASS, **consumer: int) -> str:
    """A worker's settings file: SMS through the sandbox, and the webman bridge on, with noti's
    notification consumer on ``php_class``'s queue; ``consumer``: more of its settings
    (``processes=2``)."""
    settings = "".join(f"{key} = {value}\n" for key, value in consumer.items())
    return f"""
[channels.sms]
provider = "sandbox"

[webman]
enabled = true

[webman.consumers.notify]
class = "noti.bridge.webman.notifications:NotificationConsumer"
{settings}
[webman.consumers.notify.options]
php_class = '{php_class}'
block_time_ms = 300
"""


#: :func:`sms_and_webman_config` on :data:`WEBMAN_NOTIFY_CLASS`'s queue.
SMS_AND_WEBMAN_CONFIG = sms_and_webman_config()


def run_noti(env: dict[str, str], *args: str, preload: str | None = None) -> str:
    """``noti ARGS`` in a fresh process with ``env``, from the repository; its standard output
    (it must succeed). ``preload``: a module imported first (a test's task listeners, which
    ``noti listener add -task`` checks are registered)."""
    run = "import runpy, sys; sys.argv[0] = 'noti'; runpy.run_module('noti', run_name='__main__')"
    if preload is not None:
        run = f"import {preload}; {run}"
    done = subprocess.run(
        [sys.executable, "-c", run, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


class _LoggedProcess:
    """A subprocess in its own process group, its output in ``log`` (a temporary file when
    None, left for a failing test to read)."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path, log: Path | None, name: str) -> None:
        if log is None:
            with tempfile.NamedTemporaryFile(prefix=f"noti-{name}-", suffix=".log", delete=False) as made:
                log = Path(made.name)
        self.log = log
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                argv, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.alive():
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        """SIGTERM to the process group (what is in flight is finished), SIGKILL after 20 s."""
        if self.alive():
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()


class CeleryProcess(_LoggedProcess):
    """A ``celery -A <app> <args>`` subprocess (worker, beat, Flower; noti's app unless told
    otherwise) in its own process group, logging to ``log`` (a temporary file when None, left
    for a failing test to read)."""

    def __init__(
        self,
        env: dict[str, str],
        *args: str,
        log: Path | None = None,
        name: str = "celery",
        app: str = "noti",
        cwd: Path = ROOT,
    ) -> None:
        self.name = name
        super().__init__([sys.executable, "-m", "celery", "-A", app, *args], env, cwd, log, name)

    def count(self, text: str) -> int:
        return self.output().count(text)


class ApiProcess(_LoggedProcess):
    """``noti serve`` (the HTTP API under uvicorn) as a subprocess on a free loopback port, in
    its own process group, logging to a temporary file (left for a failing test to read)."""

    def __init__(self, env: dict[str, str], *args: str, port: int | None = None, cwd: Path = ROOT) -> None:
        self._env, self._args, self._cwd = env, args, cwd
        self._own_port = port is None  # chosen here: another one if it is taken after all
        self._start(port or free_port(), None)

    def _start(self, port: int, log: Path | None) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{self.port}"
        serve = ["noti", "serve", "-bind", "127.0.0.1", "-port", str(port), *self._args]
        super().__init__([sys.executable, "-m", *serve], self._env, self._cwd, log, "serve")

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Until ``GET /v1/health`` answers 200; fails with the server's output otherwise."""
        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                if self._own_port and "address already in use" in self.output():
                    self._start(free_port(), self.log)  # taken by a process that does not use free_port
                    continue
                raise AssertionError(f"noti serve exited {self.proc.returncode}:\n{self.output()}")
            try:
                if httpx.get(f"{self.url}/v1/health", timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"noti serve did not answer in {timeout} s:\n{self.output()}")
