"""How fast this machine is right now: two probes printed before and after a run.

The development machine is shared and its speed moves by 2x from one hour to the next
(plain Celery's own drain has measured 400-870/s). The probes let a reader place a table:
a pure-Python loop (CPU) and a loopback Redis PING from one client (the kernel's wake-ups,
which set every round trip and so the latency scenario). Neither is a target.
"""

from __future__ import annotations

import time
import timeit
from typing import Any

import redis

from bench._harness import redis_server

__all__ = ["describe", "probe"]


def probe(count: int = 2000) -> dict[str, float]:
    """``loop_us``: ``sum(range(1000))``; ``ping_us``: a PING round trip (best of 5 × ``count``)."""
    loop_us = min(timeit.repeat("sum(range(1000))", number=count, repeat=5)) / count * 1e6
    with redis_server() as url:
        client = redis.Redis.from_url(url)
        client.ping()
        best = float("inf")
        for _ in range(5):
            started = time.perf_counter()
            for _ in range(count):
                client.ping()
            best = min(best, (time.perf_counter() - started) / count)
        client.close()
    return {"loop_us": loop_us, "ping_us": best * 1e6}


def describe(when: str, measured: dict[str, Any]) -> str:
    """One line for the report."""
    return (
        f"machine {when}: sum(range(1000)) {measured['loop_us']:.1f} µs, "
        f"loopback Redis PING round trip {measured['ping_us']:.0f} µs"
    )
