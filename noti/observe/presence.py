"""Which workers are alive: each noti worker writes a heartbeat into Redis.

Every :data:`HEARTBEAT_S` seconds a worker (its main process: the node Celery names, e.g.
``w1@host``) writes one field of the hash :attr:`~noti.core.keys.Keys.workers`: its node name ->
JSON (host, pid, queues, pool, concurrency, delivery mode, whether it runs the delayed pump,
when it started, when it wrote this). A worker counts as alive while its last heartbeat is
younger than :data:`ALIVE_S`; a worker that stops cleanly removes its field, one that dies
leaves it to age (fields older than :data:`FORGET_S` are dropped by the next heartbeat of any
worker). One ``HSET`` per worker every few seconds, nothing per notification; reading them is
one ``HGETALL`` (:func:`read_workers`), without asking the workers anything (Celery's
``inspect ping`` waits a second for the replies of every node).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import redis

from noti.core.keys import Keys
from noti.redis.outage import Outage

__all__ = ["ALIVE_S", "HEARTBEAT_S", "Presence", "WorkerInfo", "read_workers"]

log = logging.getLogger(__name__)

#: How often a worker writes its heartbeat (seconds).
HEARTBEAT_S = 5.0
#: A worker whose last heartbeat is older than this is not counted as alive.
ALIVE_S = 3 * HEARTBEAT_S
#: Heartbeats older than this are forgotten (a worker that died long ago).
FORGET_S = 3600.0
#: How often a worker looks for heartbeats to forget (one HGETALL).
_PRUNE_EVERY_S = 600.0


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """One worker's last heartbeat."""

    #: Celery's node name (``w1@host``).
    name: str
    host: str
    pid: int
    queues: tuple[str, ...]
    pool: str
    concurrency: int
    mode: str
    #: Whether it held the delayed pump's lock (the one worker that pumps) at its heartbeat.
    pump: bool
    started_ms: int
    seen_ms: int

    def alive(self, now_ms: int) -> bool:
        """Whether its last heartbeat is recent enough (:data:`ALIVE_S`)."""
        return now_ms - self.seen_ms <= ALIVE_S * 1000

    def as_json(self, now_ms: int) -> dict[str, Any]:
        return {
            "name": self.name,
            "host": self.host,
            "pid": self.pid,
            "queues": list(self.queues),
            "pool": self.pool,
            "concurrency": self.concurrency,
            "mode": self.mode,
            "pump": self.pump,
            "started_ms": self.started_ms,
            "seen_ms": self.seen_ms,
            "alive": self.alive(now_ms),
        }

    def encode(self) -> str:
        data = self.as_json(self.seen_ms)
        del data["alive"], data["name"]
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def decode(cls, name: str, text: str) -> WorkerInfo | None:
        """The heartbeat ``text`` of worker ``name``; None when it is not one (anyone who can
        reach Redis may write there)."""
        try:
            data = json.loads(text)
            return cls(
                name=name,
                host=str(data.get("host", "")),
                pid=int(data.get("pid", 0)),
                queues=tuple(str(q) for q in data.get("queues", ())),
                pool=str(data.get("pool", "")),
                concurrency=int(data.get("concurrency", 0)),
                mode=str(data.get("mode", "")),
                pump=bool(data.get("pump", False)),
                started_ms=int(data.get("started_ms", 0)),
                seen_ms=int(data["seen_ms"]),
            )
        except (ValueError, TypeError, KeyError, AttributeError):
            return None


def read_workers(fields: Mapping[str, str]) -> list[WorkerInfo]:
    """The heartbeats of the hash ``fields`` (``HGETALL`` of :attr:`Keys.workers`), by name."""
    found = (WorkerInfo.decode(name, text) for name, text in fields.items())
    return sorted((w for w in found if w is not None), key=lambda w: w.name)


class Presence:
    """Writes one worker's heartbeat every :data:`HEARTBEAT_S` in a thread (see the module).

    ``pump`` tells at each heartbeat whether this worker holds the delayed pump's lock. While
    Redis is away the thread waits like the other loops (the outage is logged once)."""

    def __init__(
        self,
        client: redis.Redis,
        keys: Keys,
        *,
        name: str,
        queues: Sequence[str],
        pool: str,
        concurrency: int,
        mode: str,
        pump: Callable[[], bool] = lambda: False,
        interval_s: float = HEARTBEAT_S,
    ) -> None:
        self.redis = client
        self.keys = keys
        self.name = name
        self._info = WorkerInfo(
            name=name,
            host=socket.gethostname(),
            pid=os.getpid(),
            queues=tuple(queues),
            pool=pool,
            concurrency=concurrency,
            mode=mode,
            pump=False,
            started_ms=int(time.time() * 1000),
            seen_ms=0,
        )
        self._pump = pump
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._outage = Outage("worker heartbeat", logger=log)
        self._pruned = 0.0

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="noti-heartbeat", daemon=True)
        self._thread.start()

    def stop(self, timeout: float | None = 5.0) -> None:
        """Stop the heartbeats and remove this worker's field (it is not alive any more)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        try:
            self.redis.hdel(self.keys.workers, self.name)
        except redis.RedisError as exc:  # Redis away: the field ages out instead
            log.warning("worker heartbeat: could not remove %s (%s); it ages out", self.name, exc)

    def beat(self) -> None:
        """Write the heartbeat now (and now and then forget long-dead workers).

        Raises:
            redis.RedisError: Redis did not take it.
        """
        now = time.time()
        beat = replace(self._info, pump=bool(self._pump()), seen_ms=int(now * 1000))
        self.redis.hset(self.keys.workers, self.name, beat.encode())
        if now - self._pruned >= _PRUNE_EVERY_S:
            self._pruned = now
            self._forget(int(now * 1000))

    def _forget(self, now_ms: int) -> None:
        fields: dict[str, str] = self.redis.hgetall(self.keys.workers)  # type: ignore[assignment]
        old = [
            name
            for name, text in fields.items()
            if (w := WorkerInfo.decode(name, text)) is None or now_ms - w.seen_ms > FORGET_S * 1000
        ]
        if old:
            self.redis.hdel(self.keys.workers, *old)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.beat()
            except redis.RedisError as exc:
                self._stop.wait(self._outage.failed(exc))
                continue
            except Exception:  # a bug must not stop the heartbeats for good
                log.exception("worker heartbeat failed; trying again")
            else:
                self._outage.ok()
            self._stop.wait(self._interval_s)
