"""The cost of ``NOTI_REDIS_WAIT_REPLICAS=1`` (issue 19, point 2): ``notify()`` one at a time
and ``notify_many()`` acknowledged once a replica has the records (Redis ``WAIT`` on the
writing connection), against the same calls acknowledged by the primary alone, on one
primary with one replica on loopback, in the same run (the two take turns).

No target: the row prints what the guarantee costs here. On a network the cost grows with
the round trip to the replica.

    .venv/bin/python -m bench.replica_bench [--reps 3] [--smoke]
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator
from functools import partial
from typing import Any

import redis

from bench._harness import redis_server
from bench._noti import FAST, WorkerConfig, noti_env, point_driver, write_config
from bench._report import Row, attempt, errors_of, paired_ratio, present
from bench._runner import main
from bench.enqueue_bench import noti_notify, noti_notify_many

__all__ = ["scenario_11"]

SIZES = {"one": (5_000, 300), "many": (20_000, 2_000)}


@contextlib.contextmanager
def primary_with_replica() -> Iterator[str]:
    """A primary and a replica of it in sync; the primary's URL (no database)."""
    with redis_server() as primary:
        port = primary.rsplit(":", 1)[1]
        with redis_server() as replica:
            client = redis.Redis.from_url(replica)
            client.replicaof("127.0.0.1", port)
            deadline = time.monotonic() + 20
            while client.info("replication").get("master_link_status") != "up":
                if time.monotonic() > deadline:
                    raise RuntimeError("the replica did not sync in 20 s")
                time.sleep(0.05)
            yield primary


def measure(reps: int, smoke: bool) -> tuple[dict[str, list[float | None]], dict[str, list[str]]]:
    samples: dict[str, list[float | None]] = {}
    errors: dict[str, list[str]] = {}
    with primary_with_replica() as url:
        env = noti_env(url, write_config())
        flush = redis.Redis.from_url(url)
        for rep in range(reps):
            for kind, run in (("one", noti_notify), ("many", noti_notify_many)):
                for replicas in (1, 0):
                    name = f"{kind}/{replicas}"
                    flush.flushall()
                    point_driver({**env, "NOTI_REDIS_WAIT_REPLICAS": str(replicas)})
                    rate = attempt(
                        errors.setdefault(name, []), f"{name} rep {rep + 1}", partial(run, SIZES[kind][smoke])
                    )
                    samples.setdefault(name, []).append(rate)
        point_driver({**env, "NOTI_REDIS_WAIT_REPLICAS": "0"})
    return samples, errors


def scenario_11(
    reps: int, smoke: bool, config: WorkerConfig = FAST, ctx: dict[str, Any] | None = None
) -> list[Row]:
    s, errors = measure(reps, smoke)
    rows = []
    for kind, label in (("one", "notify() one at a time"), ("many", "notify_many()")):
        n = SIZES[kind][smoke]
        rows.append(
            Row(
                11,
                f"{label} x {n:,}, acknowledged by 1 replica (WAIT)",
                "/s",
                present(s[f"{kind}/1"]),
                "(printed)",
                baseline=present(s[f"{kind}/0"]),
                baseline_name="the same calls acknowledged by the primary alone (NOTI_REDIS_WAIT_REPLICAS=0)",
                ratio=paired_ratio(s[f"{kind}/1"], s[f"{kind}/0"]),
                error=errors_of(errors, f"{kind}/1", f"{kind}/0"),
            )
        )
    rows[0].notes.append("one primary and one replica on loopback; with and without WAIT take turns")
    return rows


SCENARIOS = {11: scenario_11}

if __name__ == "__main__":
    sys.exit(main(__doc__ or "", SCENARIOS, "replica"))
