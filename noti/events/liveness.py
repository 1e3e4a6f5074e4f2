"""The event processor's liveness lock: the analogue of the seed's ``flock`` with a pid.

``noti:lock:events`` holds JSON naming the processor (a random token, host, pid, since,
Celery task id) and expires ``event_lock_ttl_s`` after its last renewal. Two renew it
every third of that: the keeper process (:mod:`noti.events.keeper`), which renews while
the processor's process runs even when a listener holds the GIL, and a thread of the
processor, which also notices when the lock was lost. When the process dies (or is
stopped) the lock expires, and the next dispatch or the sweep queues a new processor.
The lock is taken with ``SET NX PX`` (``acquire.lua``, which also drops the starting
marker): of two processors started at once, one gets it and the other exits at once.

The lock's value is the processor's fencing token: every write of a processor (activate,
each listener's outcome, finish, release) is a script that first checks the lock still
holds that value, so a processor that lost its lock writes nothing.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import socket
import threading
from dataclasses import dataclass

import redis

from noti.core.keys import Keys
from noti.events.keeper import keeper
from noti.redis.conn import load_script
from noti.redis.outage import Outage, translate_errors

__all__ = ["Holder", "ProcessorLock", "read_holder"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Holder:
    """Who holds (or held) the processor lock."""

    token: str
    host: str
    pid: int
    since_ms: int
    task_id: str = ""

    @property
    def name(self) -> str:
        """``host/pid/token``: how events name the processor that activated them."""
        return f"{self.host}/{self.pid}/{self.token}"

    def encode(self) -> str:
        return json.dumps(
            {
                "token": self.token,
                "host": self.host,
                "pid": self.pid,
                "since_ms": self.since_ms,
                "task": self.task_id,
            },
            separators=(",", ":"),
        )

    @classmethod
    def decode(cls, text: str) -> Holder:
        data = json.loads(text)
        return cls(data["token"], data["host"], int(data["pid"]), int(data["since_ms"]), data.get("task", ""))

    @classmethod
    def this_process(cls, *, since_ms: int, task_id: str = "") -> Holder:
        return cls(secrets.token_hex(4), socket.gethostname(), os.getpid(), since_ms, task_id)


def read_holder(client: redis.Redis, keys: Keys) -> tuple[Holder, int] | None:
    """The live processor and the ms left on its lock, or None when none is alive."""
    with translate_errors(client):
        pipe = client.pipeline(transaction=False)
        pipe.get(keys.event_lock)
        pipe.pttl(keys.event_lock)
        text, ttl = pipe.execute()
    if not text:
        return None
    try:
        return Holder.decode(text), max(int(ttl), 0)
    except (ValueError, KeyError, TypeError):
        return Holder("?", "?", 0, 0), max(int(ttl), 0)


class ProcessorLock:
    """One processor's hold on the lock: acquire once, renew in a thread, release."""

    def __init__(
        self, client: redis.Redis, keys: Keys, holder: Holder, *, ttl_s: float, keeper_url: str | None = None
    ) -> None:
        self.redis = client
        #: The Redis URL the keeper process renews the lock on (None: the thread alone).
        self.keeper_url = keeper_url
        self.keys = keys
        self.holder = holder
        self.value = holder.encode()
        self.ttl_ms = max(int(ttl_s * 1000), 100)
        self._acquire = load_script(client, "acquire", package="noti.events")
        self._renew = load_script(client, "renew", package="noti.events")
        self._release = load_script(client, "release", package="noti.events")
        self._lost = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def lost(self) -> bool:
        """True once a renewal found the lock gone or someone else's."""
        return self._lost.is_set()

    def acquire(self) -> bool:
        """Take the lock if no processor holds it, and start renewing it. Either way the
        starting marker is dropped (see ``acquire.lua``)."""
        with translate_errors(self.redis):
            taken = bool(
                int(
                    self._acquire(
                        keys=[self.keys.event_lock, self.keys.event_starting], args=[self.value, self.ttl_ms]
                    )
                )
            )
        if taken:
            if self.keeper_url is not None:
                keeper().hold(self.keeper_url, self.keys.event_lock, self.value, self.ttl_ms)
            self._thread = threading.Thread(target=self._renew_loop, name="noti-events-lock", daemon=True)
            self._thread.start()
        return taken

    def _renew_loop(self) -> None:
        interval_s = self.ttl_ms / 3000
        failures_since_ok = 0.0
        outage = Outage(f"event processor {self.holder.name}: lock renewal", logger=log)
        while not self._stop.wait(interval_s):
            try:
                if not int(self._renew(keys=[self.keys.event_lock], args=[self.value, self.ttl_ms])):
                    log.warning("event processor %s: the liveness lock was lost", self.holder.name)
                    self._lost.set()
                    return
                failures_since_ok = 0.0
                outage.ok()
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                # logged once; past the lock's time-to-live another processor may hold it
                failures_since_ok += interval_s
                outage.failed(exc)
                if failures_since_ok * 1000 >= self.ttl_ms:
                    log.warning(
                        "event processor %s: could not renew the liveness lock for %.1f s; taking it as lost",
                        self.holder.name,
                        failures_since_ok,
                    )
                    self._lost.set()
                    return
            except redis.RedisError:
                failures_since_ok += interval_s
                log.warning(
                    "event processor %s: cannot renew the liveness lock", self.holder.name, exc_info=True
                )
                if failures_since_ok * 1000 >= self.ttl_ms:
                    self._lost.set()
                    return

    def stop_renewing(self) -> None:
        self._stop.set()
        if self.keeper_url is not None:
            keeper().drop(self.value)
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None

    def release(self, *, mode: str, reason: str, processed: int, now_ms: int) -> int:
        """Let go of the lock (see ``release.lua``; ``mode`` is ``idle``, ``handover`` or
        ``stop``): -1 not ours, 0 events wait (idle mode only; the lock is kept), 1 released,
        2 released and a successor must be queued (handover mode only)."""
        k = self.keys
        with translate_errors(self.redis):
            return int(
                self._release(
                    keys=[k.event_lock, k.event_queue, k.event_starting, k.event_stop, k.event_backoff],
                    args=[
                        self.value,
                        mode,
                        self.ttl_ms,
                        now_ms,
                        reason,
                        processed,
                        self.holder.name,
                        self.holder.since_ms,
                    ],
                )
            )
