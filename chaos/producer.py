"""The application side of a chaos run: one thread making the plan's ``noti.notify()`` calls
at their times, as a web application would, and noting what each returned and when.

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


class Producer(threading.Thread):
    """Makes ``calls`` from ``t0`` on; ``target_for(call)`` gives each call's target."""

    def __init__(self, calls: list[Call], t0: float, target_for: Callable[[Call], str]) -> None:
        super().__init__(name="producer", daemon=True)
        self.calls = calls
        self.t0 = t0
        self.target_for = target_for
        self.results: list[CallResult] = []
        #: Seconds the producer ran behind its plan at worst.
        self.max_lag_s = 0.0

    def run(self) -> None:
        import noti
        from noti.errors import StoreUnavailable

        for call in self.calls:
            due = self.t0 + call.at_s
            pause = due - time.time()
            if pause > 0:
                time.sleep(pause)
            else:
                self.max_lag_s = max(self.max_lag_s, -pause)
            result = CallResult(call)
            kwargs = call_kwargs(call, self.target_for(call))
            target = self.target_for(call)
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
            self.results.append(result)
