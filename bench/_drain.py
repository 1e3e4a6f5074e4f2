"""Timing a drain: from the first delivered to the N-th, with the CPU spent meanwhile.

The queue is filled before the workers start; :func:`time_drain` polls a cheap counter
(LLEN / ZCARD / the fake server's count) every 20 ms, so start-up is not timed. The CPU of
the workers' process groups (``/proc``), of redis-server (``INFO cpu``) and of any other
process (the fake HTTP server) is read at the first and at the last poll.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from bench._harness import Worker, pid_cpu_s, redis_cpu_s

__all__ = ["Drain", "DrainFailed", "time_drain"]

POLL_S = 0.02


class DrainFailed(RuntimeError):
    """The drain stalled, or its result did not check out."""


@dataclass
class Drain:
    """One timed drain. CPU figures are seconds over the timed interval."""

    total: int  #: what was queued
    timed: int  #: delivered within the timed interval (total less those done at the first poll)
    seconds: float
    worker_cpu_s: float
    redis_cpu_s: float
    other_cpu_s: float = 0.0
    round_trips: float | None = None  #: per notification, from a separate counting run

    @property
    def rate(self) -> float:
        return self.timed / self.seconds if self.seconds > 0 else float("nan")

    def per_item_us(self, cpu_s: float) -> float:
        return cpu_s / self.timed * 1e6 if self.timed else float("nan")

    def as_json(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "rate": self.rate,
            "worker_cpu_us": self.per_item_us(self.worker_cpu_s),
            "redis_cpu_us": self.per_item_us(self.redis_cpu_s),
            "other_cpu_us": self.per_item_us(self.other_cpu_s),
        }


def _cpu(workers: Sequence[Worker], redis_client: Any, others: Sequence[int]) -> tuple[float, float, float]:
    return (
        sum(w.cpu_s() for w in workers),
        redis_cpu_s(redis_client),
        sum(pid_cpu_s(pid) for pid in others),
    )


def time_drain(
    count: Callable[[], int],
    total: int,
    *,
    workers: Sequence[Worker],
    redis_client: Any,
    others: Sequence[int] = (),
    stall_s: float = 30.0,
    start_s: float = 60.0,
) -> Drain:
    """Wait until ``count()`` reaches ``total``; time it from the first poll that saw progress
    (if that poll already saw ``total``, ``timed`` is 0 and the rate is nan).

    Raises:
        DrainFailed: nothing was delivered within ``start_s``, progress stopped for
            ``stall_s``, or a worker exited (the message ends with its log).
    """
    started = time.monotonic()
    first: tuple[float, int, tuple[float, float, float]] | None = None
    last_progress, last_seen = started, -1
    while True:
        done = count()
        now = time.monotonic()
        if first is None and done > 0:
            first = (time.perf_counter(), done, _cpu(workers, redis_client, others))
        if done >= total:
            break
        if done != last_seen:
            last_progress, last_seen = now, done
        dead = [w for w in workers if w.proc.poll() is not None]
        limit = stall_s if first is not None else start_s
        if dead or now - last_progress > limit:
            why = f"worker exited ({dead[0].proc.returncode})" if dead else f"no progress for {limit:.0f} s"
            logs = (dead or list(workers))[:1]
            raise DrainFailed(f"{why}: {done}/{total} done\n" + "".join(w.tail() for w in logs))
        time.sleep(POLL_S)
    end, cpu_end = time.perf_counter(), _cpu(workers, redis_client, others)
    assert first is not None
    t0, done0, cpu0 = first  # all done at the first poll: timed = 0, rate = nan (too few to time)
    return Drain(
        total=total,
        timed=total - done0,
        seconds=end - t0,
        worker_cpu_s=cpu_end[0] - cpu0[0],
        redis_cpu_s=cpu_end[1] - cpu0[1],
        other_cpu_s=cpu_end[2] - cpu0[2],
    )
