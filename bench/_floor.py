"""The floor of one Redis (scenario 0 of ``make bench``, :mod:`bench.limits_bench`) and each
table row's fraction of it: how close a path is to what the machine allows."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import redis

from bench._harness import redis_server
from bench._report import Row

__all__ = ["FLOORS", "FLOOR_NAMES", "Floor", "apply_floors", "floor_now", "measure_floor", "needs_floor"]

PING_CALLS = {False: 5_000, True: 300}
EVALSHA_CALLS = {False: 10_000, True: 500}
LPUSH_ITEMS = {False: 200_000, True: 10_000}
PIPELINE = 500
ITEM = "x" * 300


@dataclass(frozen=True, slots=True)
class Floor:
    """Which floor a row is measured against: ``key`` in the floor's measurements; ``rate``
    True for a rate (fraction = figure / floor), False for a latency (floor / figure), where
    ``times`` floors make the least the row's path can cost."""

    scenario: int
    name_prefix: str
    key: str
    rate: bool = True
    times: float = 1.0

    def matches(self, row: Row) -> bool:
        # a peer row ("… vs dramatiq") repeats noti's figure: its fraction is on noti's own row
        return (
            row.scenario == self.scenario and row.name.startswith(self.name_prefix) and " vs " not in row.name
        )


#: The rows compared with a floor (scenario 0's measurements).
FLOORS = (
    Floor(1, "notify()", "evalsha_per_s"),
    Floor(2, "notify_many(", "lpush_per_s"),
    Floor(3, "drain ", "lpush_per_s"),
    Floor(5, "latency sandbox p50", "ping_ms", rate=False, times=2),
    Floor(5, "latency sandbox p99", "ping_ms", rate=False, times=2),
    Floor(8, "webman push_many(", "lpush_per_s"),
)
FLOOR_NAMES = {
    "evalsha_per_s": "one EVALSHA of a no-op script per round trip",
    "lpush_per_s": f"pipelined LPUSH of {len(ITEM)}-byte items, {PIPELINE} a pipeline",
    "ping_ms": "PING round trip",
}


def measure_floor(url: str, smoke: bool) -> dict[str, float]:
    """The floor's three measurements on the Redis at ``url`` (flushed)."""
    client = redis.Redis.from_url(f"{url}/0")
    client.flushall()
    client.ping()
    n = PING_CALLS[smoke]
    started = time.perf_counter()
    for _ in range(n):
        client.ping()
    ping_s = (time.perf_counter() - started) / n
    noop = client.register_script("return 0")
    noop(keys=["floor:k"])
    n = EVALSHA_CALLS[smoke]
    started = time.perf_counter()
    for _ in range(n):
        noop(keys=["floor:k"])
    evalsha_per_s = n / (time.perf_counter() - started)
    n = LPUSH_ITEMS[smoke]
    started = time.perf_counter()
    for first in range(0, n, PIPELINE):
        pipe = client.pipeline(transaction=False)
        for _ in range(min(PIPELINE, n - first)):
            pipe.lpush("floor:list", ITEM)
        pipe.execute()
    lpush_per_s = n / (time.perf_counter() - started)
    if client.llen("floor:list") != n:
        raise RuntimeError("the floor's LPUSH list does not hold what was pushed")
    client.flushall()
    client.close()
    return {"ping_ms": ping_s * 1000, "evalsha_per_s": evalsha_per_s, "lpush_per_s": lpush_per_s}


def apply_floors(rows: Sequence[Row], floor: dict[str, float]) -> None:
    """Set each mapped row's fraction of its floor (:data:`FLOORS`)."""
    for row in rows:
        for spec in FLOORS:
            if not spec.matches(row) or not row.noti or spec.key not in floor:
                continue
            least = floor[spec.key] * spec.times
            row.floor_fraction = row.median / least if spec.rate else least / row.median
            name = FLOOR_NAMES[spec.key]
            row.floor_name = name if spec.times == 1 else f"{spec.times:g} x {name}"


def needs_floor(rows: Sequence[Row]) -> bool:
    """Whether some row is compared with a floor."""
    return any(spec.matches(row) for row in rows for spec in FLOORS)


def floor_now(smoke: bool) -> dict[str, float]:
    """The floor measured once, on a fresh private Redis (when scenario 0 did not run)."""
    with redis_server() as url:
        return measure_floor(url, smoke)
