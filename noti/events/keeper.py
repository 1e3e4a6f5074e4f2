"""The lock keeper: a small helper process that renews this process's processor lock while
this process runs, whether or not it can run Python.

The processor's renewal thread needs the GIL: a listener that holds it (a long computation
in C, a regex backtracking) stops the renewal, the lock expires although the processor is
alive and working, a successor takes the same event over, and the two overlap. The keeper
renews from another process, so a processor's lock lives exactly as long as its process
*runs*: it lets the lock expire when that process is gone or stopped (``SIGSTOP``, a
debugger: state ``T`` in ``/proc``), and keeps it alive through anything else.

One keeper per process, started by the first processor that takes the lock (``python -c``
running :func:`serve`), told over its standard input which lock to keep (one JSON line
per change: ``{"op": "hold", "url", "key", "value", "ttl_ms"}`` / ``{"op": "drop", "value"}``).
It renews every third of the time-to-live with ``renew.lua`` (only while the value is still
the caller's) and exits when its parent does or closes the pipe. Where it cannot start,
the renewal thread alone keeps the lock, as before.
"""

from __future__ import annotations

import json
import logging
import os
import select
import subprocess
import sys
import threading
import time
from typing import Any

__all__ = ["Keeper", "keeper", "process_exists", "process_runs", "serve"]

log = logging.getLogger(__name__)


def process_runs(pid: int) -> bool:
    """Is process ``pid`` alive and not stopped? (Where ``/proc`` is absent: alive.)"""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            text = stat.read()
    except FileNotFoundError:
        if not process_exists(pid):
            return False
        return not os.path.isdir("/proc/self")  # no /proc: alive is all that can be told
    except OSError:
        return True
    state = text[text.rfind(")") + 2 : text.rfind(")") + 3]
    return state not in ("T", "t", "Z", "X", "x")


class Keeper:
    """This process's keeper (see the module doc); every method is safe to call when the
    keeper could not be started (it then does nothing)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._pid = os.getpid()
        self._failed = False

    def _send(self, message: dict[str, Any]) -> bool:
        line = (json.dumps(message) + "\n").encode()
        with self._lock:
            for _ in range(2):
                proc = self._ensure()
                if proc is None or proc.stdin is None:
                    return False
                try:
                    proc.stdin.write(line)
                    proc.stdin.flush()
                    return True
                except (BrokenPipeError, OSError, ValueError):
                    self._proc = None  # it died: start another once
            return False

    def _ensure(self) -> subprocess.Popen[bytes] | None:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        if self._failed:
            return None
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-c", _MAIN, str(self._pid)],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                close_fds=True,
            )
        except OSError as exc:
            log.warning(
                "cannot start the event lock keeper (%s); the renewal thread alone keeps the lock", exc
            )
            self._failed = True
            return None
        return self._proc

    def start(self) -> None:
        """Start the keeper process now if it is not running (a worker that consumes events
        does at start-up, so that its first processor's lock is kept from the start)."""
        with self._lock:
            self._ensure()

    def hold(self, url: str, key: str, value: str, ttl_ms: int) -> bool:
        """Keep the lock ``key`` = ``value`` alive from now on; False without a keeper."""
        return self._send({"op": "hold", "url": url, "key": key, "value": value, "ttl_ms": ttl_ms})

    def drop(self, value: str) -> None:
        """Stop keeping the lock of ``value`` (the processor let go of it or lost it)."""
        if self._proc is not None:
            self._send({"op": "drop", "value": value})


_keepers: dict[int, Keeper] = {}
_keepers_lock = threading.Lock()


def keeper() -> Keeper:
    """The keeper of this process (a forked child gets its own, not its parent's)."""
    pid = os.getpid()
    with _keepers_lock:
        found = _keepers.get(pid)
        if found is None:
            found = _keepers[pid] = Keeper()
        return found


# --- the helper process -------------------------------------------------------------------------


#: The keeper's command line (``-c``: run from this module without importing it twice).
_MAIN = "import sys; from noti.events.keeper import serve; sys.exit(serve(int(sys.argv[1])))"


def serve(parent: int) -> int:
    """The keeper process's loop (see the module doc): renew the lock it is told to hold
    while process ``parent`` runs; return when ``parent`` is gone or closes the pipe."""
    import redis

    from noti.redis.conn import connect, load_script

    held: dict[str, Any] | None = None
    client: redis.Redis | None = None
    client_url = ""
    renew: Any = None
    due = 0.0
    pending = b""
    print(f"noti: event lock keeper {os.getpid()} ready for process {parent}", file=sys.stderr, flush=True)
    while True:
        wait = max(0.0, due - time.monotonic()) if held else 1.0
        readable, _, _ = select.select([0], [], [], min(wait, 1.0))
        if os.getppid() != parent or not process_exists(parent):
            return 0
        if readable:
            chunk = os.read(0, 65536)
            if not chunk:
                return 0
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                message = json.loads(line)
                if message["op"] == "hold":
                    held = message
                    due = time.monotonic()  # renewed at once: the hold may have waited for start-up
                elif held is not None and message.get("value") == held["value"]:
                    held = None
        if held is None or time.monotonic() < due:
            continue
        due = time.monotonic() + held["ttl_ms"] / 3000
        if not process_runs(parent):
            continue  # stopped: let the lock expire, as if it had died
        try:
            if client is None or client_url != held["url"]:
                client, client_url = connect(held["url"], socket_timeout_s=2.0), held["url"]
                renew = load_script(client, "renew", package="noti.events")
            if not int(renew(keys=[held["key"]], args=[held["value"], held["ttl_ms"]])):
                held = None  # lost: someone else holds it now
        except redis.RedisError:
            client = None  # try again at the next renewal


def process_exists(pid: int) -> bool:
    """Does process ``pid`` exist (running or not)?"""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
