"""Records that wait for a time: the delayed set and the pump that queues them when due.

A record waiting for a retry back-off, or whose lease must be re-checked, has its id in the
``noti:delayed`` sorted set, scored by the ms it is due. No Celery ETA message is held in
worker memory for it (celery-facts §2: on Redis those are redelivered past the visibility
timeout). The pump takes due ids with ``pump.lua``, which leaves each taken id in the set
re-armed a little later, publishes their delivery messages, and only then confirms them
(``pump_ack.lua``). A pump that dies in between loses nothing: the ids fire again, and the
record claim makes a duplicate message harmless.

One pump runs at a time per key prefix: every worker starts a :class:`Pump`, and the one
that holds the lock ``noti:lock:pump`` does the work; another takes over within the lock's
time-to-live when it stops.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import cast

import redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import LockError, RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from noti.core.keys import Keys
from noti.core.record import Channel, now_ms
from noti.errors import InvalidInput, StoreUnavailable
from noti.inputs import check_name, finite_number, shown
from noti.redis.conn import load_script
from noti.redis.outage import Outage, translate_errors

__all__ = ["DelayedQueue", "Pump", "due_ms", "validate_idempotency_key", "validate_identifier"]

#: The longest delay accepted (a year): beyond it a typo is likelier than intent.
MAX_DELAY_S = 366 * 86400
IDENTIFIER_MAX = 200


def iso_time(text: str, *, what: str = "eta") -> datetime:
    """The time an ISO 8601 text names (``2026-11-22T10:00``, ``2026-11-22 10:00:00+08:00``;
    without a zone: local time, as :func:`due_ms` reads a naive datetime).

    Raises:
        InvalidInput: ``e.cmd.noti.add.baddelay``.
    """
    try:
        return datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidInput(
            f"{what} {shown(text)} is not an ISO 8601 time "
            "such as 2026-11-22T10:00 or 2026-11-22T10:00+08:00",
            code="e.cmd.noti.add.baddelay",
        ) from None


def due_ms(*, delay: object = None, eta: object = None, now_ms: int) -> int:
    """When a record with this ``delay`` (seconds) or ``eta`` (datetime) is due; 0 = now.

    Raises:
        InvalidInput: ``e.cmd.noti.add.baddelay``: both given, a negative, non-numeric,
        non-finite or over-a-year delay, an eta that is not a datetime or is more than a
        year away or ago (year 1 is a typo, not "now").
    """
    if delay is not None and eta is not None:
        raise InvalidInput("give a delay or an eta, not both", code="e.cmd.noti.add.baddelay")
    if delay is not None:
        seconds = finite_number(
            delay, what="delay (seconds)", code="e.cmd.noti.add.baddelay", minimum=0, maximum=MAX_DELAY_S
        )
        return now_ms + int(seconds * 1000) if seconds > 0 else 0
    if eta is not None:
        if not isinstance(eta, datetime):
            raise InvalidInput(f"eta must be a datetime, got {shown(eta)}", code="e.cmd.noti.add.baddelay")
        try:
            at = int(eta.timestamp() * 1000)
        except (ValueError, OverflowError, OSError):  # year 1 in local time, past the platform's range
            at = None
        if at is None or at - now_ms > MAX_DELAY_S * 1000 or now_ms - at > MAX_DELAY_S * 1000:
            raise InvalidInput(
                f"eta {eta.isoformat()} is more than a year away or ago", code="e.cmd.noti.add.baddelay"
            )
        return at if at > now_ms else 0
    return 0


def validate_idempotency_key(key: object, *, identifier: str | None = None) -> str:
    """An idempotency key: 1-200 characters, no control character or line break; not
    together with a debounce identifier.

    Raises:
        InvalidInput: ``e.cmd.noti.add.badkey``.
    """
    checked = check_name(key, what="idempotency_key", code="e.cmd.noti.add.badkey", max_len=IDENTIFIER_MAX)
    if identifier is not None:
        raise InvalidInput(
            "give an idempotency_key or an identifier, not both: an identifier already replaces "
            "the notification it names",
            code="e.cmd.noti.add.badkey",
        )
    return checked


def validate_identifier(identifier: object) -> str:
    """A debounce identifier: 1-200 characters without white space or control characters.

    Raises:
        InvalidInput: ``e.cmd.noti.add.badident``.
    """
    return check_name(
        identifier, what="an identifier", code="e.cmd.noti.add.badident", max_len=IDENTIFIER_MAX, spaces=False
    )


log = logging.getLogger(__name__)

#: What a delivery message is published for: ``(record id, channel, level)``, and for a record
#: of a notice (:mod:`noti.recipients`) the notice's id, which the message names as its parent.
PublishItem = tuple[str, Channel, int] | tuple[str, Channel, int, str]
PublishFn = Callable[[Iterable[PublishItem]], int]


class DelayedQueue:
    """The delayed set of one key prefix."""

    #: How long a taken-but-unconfirmed id waits before it fires again: longer than a pass
    #: takes, short enough that what a pump killed mid-pass took is only a little late (a
    #: duplicate message, should the pass still be going, is refused by the claim).
    REARM_MS = 5_000

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.redis = client
        self.keys = keys
        self._take = load_script(client, "pump")
        self._ack = load_script(client, "pump_ack")

    def schedule(self, record_id: str, due_ms: int) -> None:
        """Make ``record_id`` due at ``due_ms`` (moving it if it was already scheduled)."""
        with translate_errors(self.redis):
            self.redis.zadd(self.keys.delayed, {record_id: due_ms})

    def recheck(self, record_id: str, due_ms: int) -> None:
        """Look at ``record_id`` again at ``due_ms``, unless it is in the set already."""
        with translate_errors(self.redis):
            self.redis.zadd(self.keys.delayed, {record_id: due_ms}, nx=True)

    def due_at(self, record_id: str) -> int | None:
        with translate_errors(self.redis):
            score = self.redis.zscore(self.keys.delayed, record_id)
        return None if score is None else int(score)

    def soonest(self, limit: int) -> list[tuple[str, int]]:
        """Up to ``limit`` waiting ids with their due ms, soonest first.

        Raises:
            StoreUnavailable: Redis cannot be reached.
        """
        with translate_errors(self.redis):
            rows = cast(
                list[tuple[str, float]], self.redis.zrange(self.keys.delayed, 0, limit - 1, withscores=True)
            )
        return [(str(member), int(score)) for member, score in rows]

    def size(self) -> int:
        with translate_errors(self.redis):
            return int(self.redis.zcard(self.keys.delayed))

    def pump_once(self, publish: PublishFn, *, batch: int = 500, at_ms: int | None = None) -> int:
        """Publish the records due now (at most ``batch``); the number of ids taken."""
        now = now_ms() if at_ms is None else at_ms
        rearm = now + self.REARM_MS
        with translate_errors(self.redis):
            ids: list[str] = self._take(keys=[self.keys.delayed], args=[now, batch, rearm])
            if not ids:
                return 0
            pipe = self.redis.pipeline(transaction=False)
            for record_id in ids:
                pipe.hmget(self.keys.record(record_id), "noti_type", "noti_lv", "noti_st", "noti_parent")
            rows = pipe.execute()
        items: list[PublishItem] = [
            (record_id, Channel(kind), int(level), parent)
            if parent
            else (record_id, Channel(kind), int(level))
            for record_id, (kind, level, status, parent) in zip(ids, rows, strict=True)
            if status == "1" and Channel.known(kind)
        ]
        if items:
            publish(items)
        with translate_errors(self.redis):
            self._ack(keys=[self.keys.delayed], args=[rearm, *ids])
        return len(ids)


class Pump:
    """Runs :meth:`DelayedQueue.pump_once` every ``interval_s`` in a thread, while holding the
    pump lock. ``start()`` / ``stop()`` may be called again after a stop.

    While Redis or the broker is unavailable it waits (an :class:`~noti.redis.outage.Outage`:
    the outage and the recovery are logged once each, tries at most every 2 s), then goes on;
    the lock, if it expired meanwhile, is taken again by whichever worker gets it first."""

    #: The pump lock's time-to-live (renewed every pass): how long due records wait when the
    #: worker that pumps dies (the others look every quarter of it).
    LOCK_TTL_S = 3.0

    def __init__(
        self,
        delayed: DelayedQueue,
        publish: PublishFn,
        *,
        interval_s: float,
        periodic: Sequence[tuple[float, Callable[[], object]]] = (),
    ) -> None:
        self._delayed = delayed
        self._publish = publish
        self._interval_s = interval_s
        #: Other light jobs the pump's lock holder runs every so many seconds.
        self._periodic = list(periodic)
        self._last_run = [0.0] * len(self._periodic)
        self._stop_event = threading.Event()
        self._thread: threading.Thread | None = None
        self._outage = Outage("delay pump", logger=log)
        #: Whether this pump holds the pump lock (the one that pumps, of all workers).
        self.holding = False

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop_event.clear()
        self._thread = threading.Thread(target=self._run, name="noti-delay-pump", daemon=True)
        self._thread.start()

    def stop(self, timeout: float | None = 5.0) -> None:
        self._stop_event.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def _run_periodic(self) -> None:
        now = time.monotonic()
        for n, (every_s, job) in enumerate(self._periodic):
            if now - self._last_run[n] >= every_s:
                self._last_run[n] = now
                try:
                    job()
                except (StoreUnavailable, RedisConnectionError, RedisTimeoutError):
                    raise  # an outage: the pump waits for Redis
                except Exception:
                    log.exception("delay pump: periodic job %r failed", job)

    def _run(self) -> None:
        lock = self._delayed.redis.lock(
            self._delayed.keys.lock("pump"), timeout=self.LOCK_TTL_S, thread_local=False
        )
        owned = False
        while not self._stop_event.is_set():
            try:
                if owned:
                    lock.reacquire()
                else:
                    owned = lock.acquire(blocking=False)
                self.holding = owned
                if owned:
                    while self._delayed.pump_once(self._publish) >= 500:
                        pass
                    self._run_periodic()
            except LockError:
                log.warning("delay pump: lost the pump lock; another worker pumps now")
                owned = self.holding = False
            except (StoreUnavailable, RedisConnectionError, RedisTimeoutError) as exc:
                # Redis (or the broker) is down: wait for it, saying so once
                self._stop_event.wait(self._outage.failed(exc))
                continue
            except Exception:  # a bug in a pass must not stop the pump
                log.exception("delay pump: pass failed; trying again")
            else:
                self._outage.ok()
            self._stop_event.wait(self._interval_s if owned else self.LOCK_TTL_S / 4)
        self.holding = False
        if owned:
            try:
                lock.release()
            except (LockError, RedisError):
                pass
