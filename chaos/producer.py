"""The application side of a chaos run: the plan's ``noti.notify()`` calls made at their
times, one thread per user, as a web application would, noting what each returned and when.

A call that raises ``StoreUnavailable`` (Redis is down) is made again 0.1 s later with the
same arguments, as an application retrying would (with the same idempotency key, if it has
one); every raise is kept, since a call that raised may still have stored its record.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from chaos.plan import Call

__all__ = ["CallResult", "Producer"]

RETRY_PAUSE_S = 0.1


@dataclass(slots=True)
class CallResult:
    """What one planned call did."""

    call: Call
    #: When the attempt that went through started / returned (time.time()).
    started: float = 0.0
    returned: float | None = None
    record_id: str | None = None
    #: (start, end) of each attempt that raised StoreUnavailable.
    raised: list[tuple[float, float]] = field(default_factory=list)
    #: Any other error (a bug of the run or of noti): the run fails.
    error: str | None = None


def call_kwargs(call: Call, target: str) -> dict[str, Any]:
    """The ``noti.notify`` arguments of a planned call."""
    kwargs: dict[str, Any] = {"lv": call.level, "user": call.user}
    if call.channel == "sms":
        kwargs["text"] = call.tag
    elif call.channel == "email":
        kwargs.update(subject=f"chaos {call.tag}", text=f"chaos run notification {call.tag}")
    else:
        kwargs["content"] = {"tag": call.tag}
    if call.delay_s is not None:
        kwargs["delay"] = call.delay_s
    if call.identifier is not None:
        kwargs["identifier"] = call.identifier
    if call.idempotency_key is not None:
        kwargs["idempotency_key"] = call.idempotency_key
    return kwargs


class Producer:
    """Makes ``calls`` from ``t0`` on, one thread per user (a web application serves its
    users concurrently: one user's slow or flooding calls do not hold up another's);
    ``target_for(call)`` gives each call's target."""

    def __init__(self, calls: list[Call], t0: float, target_for: Callable[[Call], str]) -> None:
        self.t0 = t0
        self.target_for = target_for
        self.results: list[CallResult] = []
        #: Seconds a user's calls ran behind the plan at worst, by user.
        self.lag_s: dict[str, float] = {}
        self._lock = threading.Lock()
        by_user: dict[str, list[Call]] = {}
        for call in calls:
            by_user.setdefault(call.user, []).append(call)
        self._threads = [
            threading.Thread(target=self._run, args=(user, mine), name=f"producer-{user}", daemon=True)
            for user, mine in by_user.items()
        ]

    @property
    def max_lag_s(self) -> float:
        return max(self.lag_s.values(), default=0.0)

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def join(self) -> None:
        for thread in self._threads:
            thread.join()

    def _run(self, user: str, calls: list[Call]) -> None:
        import noti
        from noti.errors import StoreUnavailable

        lag = 0.0
        for call in calls:
            pause = self.t0 + call.at_s - time.time()
            if pause > 0:
                time.sleep(pause)
            else:
                lag = max(lag, -pause)
            result = CallResult(call)
            target = self.target_for(call)
            kwargs = call_kwargs(call, target)
            while True:
                result.started = time.time()
                try:
                    result.record_id = noti.notify(call.channel, target, **kwargs)
                    result.returned = time.time()
                except StoreUnavailable:
                    result.raised.append((result.started, time.time()))
                    time.sleep(RETRY_PAUSE_S)
                    continue
                except Exception as exc:  # noqa: BLE001 - kept and reported: the run fails
                    result.error = f"{type(exc).__name__}: {exc}"
                break
            with self._lock:
                self.results.append(result)
        with self._lock:
            self.lag_s[user] = lag
