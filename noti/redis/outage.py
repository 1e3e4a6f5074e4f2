"""The one place where redis-py's errors become noti's: :func:`translate_errors` turns a
connection error or a refused write into :class:`~noti.errors.StoreUnavailable`, and
:class:`Outage` / :class:`OutageRetry` wait for a Redis that is away, saying so once when it
goes and once when it is back.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from noti.errors import StoreUnavailable

__all__ = ["Outage", "OutageRetry", "refuses_writes", "translate_errors"]

log = logging.getLogger(__name__)

#: Error replies of a Redis that takes no writes for now: full (``maxmemory`` with
#: ``noeviction``), unable to persist (a full disk: ``MISCONF``), or short of the replicas
#: ``min-replicas-to-write`` asks for. Nothing was written; the caller may try again later.
_REFUSED_WRITES = ("OOM", "MISCONF", "NOREPLICAS")


def refuses_writes(exc: BaseException) -> bool:
    """True for an error reply of a Redis that takes no writes for now (full, unable to
    persist, short of replicas, or a replica): nothing was written, and waiting may help."""
    return isinstance(exc, redis.ResponseError) and _error_code(exc) in (*_REFUSED_WRITES, "READONLY")


def _error_code(exc: redis.ResponseError) -> str:
    """The error code of a Redis error reply (``OOM``, ``READONLY`` …): redis-py keeps it as
    ``status_code`` where it turns the reply into a class of its own (and strips it from the
    message), else it starts the message."""
    status = getattr(exc, "status_code", None)
    if status:
        return str(status)
    first = str(exc).split(" ", 1)[0]
    return first if first.isupper() else ""


def _reason(exc: BaseException) -> str:
    """The first line of ``exc``'s message (its class name when it has none)."""
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


class Outage:
    """What one long-running part of a process (a loop, or a client's connections) knows of a
    Redis outage: it logs the first failure and the recovery, once each (the failures in
    between at debug level), and gives the capped exponential back-off before the next try.

    The one place for noti's outage back-off and logging: :class:`OutageRetry` reports to one
    from inside redis-py, and the worker's loops (delay pump, webman bridge, event lock
    renewal) call :meth:`failed` / :meth:`ok` themselves. Thread-safe. Never copied:
    redis-py deep-copies a client's ``Retry`` into each of its connections, and every copy
    must report to the same outage.
    """

    def __init__(
        self,
        what: str,
        *,
        cap_s: float = 2.0,
        base_s: float = 0.1,
        logger: logging.Logger | None = None,
    ) -> None:
        #: Who waits, as the log lines name it (``"beat"``, ``"delay pump"``).
        self.what = what
        self.cap_s = cap_s
        self.base_s = base_s
        self._backoff = ExponentialBackoff(cap=cap_s, base=base_s)
        self._log = logger or log
        self._lock = threading.Lock()
        self._since: float | None = None
        self._failures = 0
        self._giving_up = threading.Event()

    def __deepcopy__(self, memo: dict[int, Any]) -> Outage:
        return self

    @property
    def down(self) -> bool:
        """True from the first failure until the next success."""
        return self._since is not None

    @property
    def giving_up(self) -> bool:
        """True once :meth:`give_up` was called: the next failure is final."""
        return self._giving_up.is_set()

    def give_up(self) -> None:
        """Stop waiting (the process is stopping): an :class:`OutageRetry` raises the next
        failure instead of retrying it."""
        self._giving_up.set()

    def failed(self, exc: BaseException) -> float:
        """Note a failed try; the seconds to wait before the next one (capped at ``cap_s``)."""
        with self._lock:
            first = self._since is None
            if first:
                self._since = time.monotonic()
            self._failures += 1
            failures = self._failures
        if first:
            self._log.warning(
                "%s: Redis unavailable (%s); waiting for it, trying again at least every %g s",
                self.what,
                _reason(exc),
                self.cap_s,
            )
        else:
            self._log.debug("%s: Redis still unavailable (%s)", self.what, _reason(exc))
        return float(self._backoff.compute(failures))

    def ok(self) -> None:
        """Note a successful try: logs the recovery if Redis was unavailable."""
        if self._since is None:
            return
        with self._lock:
            since, failures = self._since, self._failures
            self._since, self._failures = None, 0
        if since is not None:
            self._log.warning(
                "%s: Redis is back after %.1f s (%d failed tries); carrying on",
                self.what,
                time.monotonic() - since,
                failures,
            )


class OutageRetry(Retry):
    """redis-py's :class:`~redis.retry.Retry` with an :class:`Outage`'s back-off, reporting to it:
    a client built with it (``retry=``, ``retry_on_error=[ConnectionError, TimeoutError]``)
    waits through an outage (forever with ``retries=-1``) inside each command, and the
    process logs the outage and the recovery once. After :meth:`Outage.give_up` a failure is
    raised at once, so a stopping process is not held by a dead Redis."""

    def __init__(self, outage: Outage, *, retries: int = -1) -> None:
        super().__init__(
            ExponentialBackoff(cap=outage.cap_s, base=outage.base_s),
            retries,
            # OSError: redis-py < 7.2 retries only the socket's connect, whose refusal is
            # then still an OSError (later versions retry the whole connect, as a ConnectionError)
            (redis.ConnectionError, redis.TimeoutError, socket.timeout, OSError),
        )
        self.outage = outage

    def __repr__(self) -> str:
        times = "forever" if self._retries < 0 else f"{self._retries} times"
        return f"<OutageRetry {self.outage.what!r}: {times}, back-off up to {self.outage.cap_s:g} s>"

    def call_with_retry(
        self, do: Callable[[], Any], fail: Callable[..., Any], *args: Any, **kwargs: Any
    ) -> Any:
        # redis-py's own call, whatever its version takes (``is_retryable`` and
        # ``with_failure_count`` are newer than 5.0)
        def failed(error: Exception, *count: int) -> None:
            fail(error, *count)
            self.outage.failed(error)
            if self.outage.giving_up:
                raise error

        result = super().call_with_retry(do, failed, *args, **kwargs)
        self.outage.ok()
        return result


@contextlib.contextmanager
def translate_errors(client: redis.Redis) -> Iterator[None]:
    """Turn Redis connection failures into :class:`StoreUnavailable` with one clear line."""
    try:
        yield
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        where = getattr(client, "noti_url", "Redis")
        raise StoreUnavailable(f"cannot reach Redis at {where}: {_reason(exc)}") from exc
    except redis.ResponseError as exc:
        code = _error_code(exc)
        if code in ("LOADING", "MASTERDOWN", "READONLY", "BUSY"):
            raise StoreUnavailable(f"Redis is not ready: {code} {_reason(exc)}") from exc
        if code == "NOSCRIPT":  # still lost after the reload every script call makes: a failover
            raise StoreUnavailable(f"Redis lost noti's scripts again: {_reason(exc)}") from exc
        if code in _REFUSED_WRITES:
            raise StoreUnavailable(f"Redis refuses writes: {code} {_reason(exc)}") from exc
        raise
