"""One chaos run, start to end: the fake providers, Redis, four workers and beat; the plan's
calls and faults; the drain; then everything the reconciliation reads.

Settings of the run (shortened so that recovery happens within minutes, otherwise noti's
defaults): a lease of 5 s (the late answers, 6-7 s, outlast it: the heartbeat must keep
it), a visibility timeout of 10 s (a killed worker's messages come back after it), the
lost-message sweep every 5 s for records untouched for 20 s, and retries after up to 1, 2
and 4 s (``exponential:1:4``, 3 attempts).
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos.cluster import Cluster, Incarnation, RedisKill
from chaos.plan import ADMIN, CALM, MEMBER, Call, Plan
from chaos.producer import CallResult, Producer
from chaos.providers import Attempt, Ledger, Providers

__all__ = ["RunData", "WorkerKill", "run"]

SETTINGS = {
    "NOTI_ROOT_ADMINS": ADMIN,
    "NOTI_ROOT_MEMBERS": f"{MEMBER},{CALM}",
    "NOTI_USER": ADMIN,
    "NOTI_LEASE_TIMEOUT_S": "5",
    "NOTI_VISIBILITY_TIMEOUT_S": "10",
    "NOTI_UNACKED_RESTORE_INTERVAL_S": "1",
    "NOTI_SWEEP_INTERVAL_S": "5",
    "NOTI_SWEEP_AFTER_S": "20",
}
#: The Redis list of level-1 SMS messages (priority step 9): the flood's backlog.
FLOOD_QUEUE = "noti.sms:9"


@dataclass(frozen=True, slots=True)
class WorkerKill:
    at: float
    slot: int
    incarnation: str


@dataclass
class RunData:
    """Everything a run observed, for :mod:`chaos.reconcile`."""

    plan: Plan
    fsync: str
    crash: str
    workdir: Path
    t0: float = 0.0
    results: list[CallResult] = field(default_factory=list)
    attempts: list[Attempt] = field(default_factory=list)
    #: Record id -> its hash at the end (None: no such record).
    records: dict[str, dict[str, str] | None] = field(default_factory=dict)
    #: Record id -> its timeline's steps at the end (noti/core/timeline.py), oldest first.
    timelines: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: Record ids in Redis's index of every record (finds records no call returned).
    indexed: set[str] = field(default_factory=set)
    #: Record id -> dead letters naming it.
    dead_letters: dict[str, int] = field(default_factory=dict)
    delayed: set[str] = field(default_factory=set)
    worker_kills: list[WorkerKill] = field(default_factory=list)
    redis_kills: list[RedisKill] = field(default_factory=list)
    crashes: list[dict[str, Any]] = field(default_factory=list)
    #: When the last fault was over (Redis answering, the last killed worker restarted).
    faults_end: float = 0.0
    #: When every returned id (and every record in Redis) was final; None: not by the deadline.
    drained_at: float | None = None
    deadline: float = 0.0
    #: (time, length of the level-1 SMS list) during the run.
    flood_backlog: list[tuple[float, int]] = field(default_factory=list)
    #: Seconds each user's calls ran behind the plan at worst.
    producer_lag_s: dict[str, float] = field(default_factory=dict)
    started_s: float = 0.0
    finished_s: float = 0.0


def _target(providers: Providers, call: Call) -> str:
    if call.channel == "sms":
        return f"+86139{call.seq:08d}"
    if call.channel == "email":
        return f"u{call.seq}@chaos.test"
    return providers.webhook_url(call.seq)


def _sample_backlog(client: Any, out: list[tuple[float, int]], stop: threading.Event) -> None:
    while not stop.wait(0.25):
        try:
            out.append((time.time(), int(client.llen(FLOOD_QUEUE))))
        except Exception:  # noqa: BLE001 - Redis may be down: no sample then
            continue


def _final_or_none(runtime: Any, ids: set[str]) -> set[str]:
    """The ids of ``ids`` whose record is not final yet (missing ones count as final here:
    the reconciliation tells lost from delivered)."""
    pipe = runtime.redis.pipeline(transaction=False)
    ordered = list(ids)
    for record_id in ordered:
        pipe.hget(runtime.keys.record(record_id), "noti_st")
    states = pipe.execute()
    return {i for i, st in zip(ordered, states, strict=True) if st == "1"}


def _drain(data: RunData, runtime: Any, ids: set[str]) -> None:
    """Wait until every id is final and no record at all waits, or the deadline."""
    from noti.errors import StoreUnavailable

    remaining = set(ids)
    waiting_index = runtime.keys.status_index(1)
    while time.time() < data.deadline:
        try:
            remaining = _final_or_none(runtime, remaining)
            if not remaining and not runtime.redis.zcard(waiting_index):
                data.drained_at = time.time()
                return
        except (StoreUnavailable, OSError, Exception):  # noqa: BLE001 - keep polling
            pass
        time.sleep(0.25)


def _collect(data: RunData, runtime: Any, ids: set[str]) -> None:
    redis = runtime.redis
    data.indexed = set(redis.zrange(runtime.keys.all_index, 0, -1))
    wanted = sorted(ids | data.indexed | {a.record_id for a in data.attempts if a.record_id})
    pipe = redis.pipeline(transaction=False)
    for record_id in wanted:
        pipe.hgetall(runtime.keys.record(record_id))
        pipe.lrange(runtime.keys.timeline(record_id), 0, -1)
    replies = pipe.execute()
    for record_id, fields, steps in zip(wanted, replies[0::2], replies[1::2], strict=True):
        data.records[record_id] = fields or None
        data.timelines[record_id] = [json.loads(s) for s in steps]
    for _, fields in redis.xrange(runtime.keys.dead_letters):
        rid = fields.get("record_id", "")
        data.dead_letters[rid] = data.dead_letters.get(rid, 0) + 1
    data.delayed = set(redis.zrange(runtime.keys.delayed, 0, -1))


def run(plan: Plan, *, fsync: str, crash: str = "os", log: Any = print) -> RunData:
    """Run ``plan`` with Redis's ``appendfsync`` = ``fsync``; everything it observed."""
    from bench._noti import point_driver

    started = time.time()
    workdir = Path(tempfile.mkdtemp(prefix=f"noti-chaos-{fsync}-"))
    data = RunData(plan, fsync, crash, workdir, started_s=started)
    ledger = Ledger(plan.seed, bad=plan.bad, flaky=plan.flaky)
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("NOTI_")}
    with Providers(ledger) as providers:
        cluster = Cluster(workdir, fsync=fsync, crash=crash, env={}, config_for=providers.config)
        env = {**base_env, **SETTINGS, "NOTI_REDIS_URL": cluster.url}
        cluster.env = env
        stop_sampling = threading.Event()
        try:
            cluster.start_redis()
            coordinator = workdir / "coordinator.toml"
            coordinator.write_text(providers.config("coordinator"))
            runtime = point_driver(
                {**SETTINGS, "NOTI_REDIS_URL": cluster.url, "NOTI_CONFIG": str(coordinator)}
            )
            log(f"  [{fsync}] starting 4 workers and beat (logs in {workdir / 'logs'})")
            cluster.start_all()
            data.t0 = time.time() + 1.0
            producer = Producer(plan.calls, data.t0, lambda call: _target(providers, call))
            producer.start()
            sampler = threading.Thread(
                target=_sample_backlog, args=(cluster.client, data.flood_backlog, stop_sampling), daemon=True
            )
            sampler.start()
            calls, faults = len(plan.calls), len(plan.faults)
            log(f"  [{fsync}] {calls} calls over {plan.size.produce_s:.0f} s, {faults} faults")
            for fault in plan.faults:
                pause = data.t0 + fault.at_s - time.time()
                if pause > 0:
                    time.sleep(pause)
                if fault.kind == "worker":
                    victim = cluster.kill_worker(fault.slot + 1)
                    assert victim.killed_at is not None
                    data.worker_kills.append(WorkerKill(victim.killed_at, victim.slot, victim.name))
                else:
                    kill = cluster.kill_redis()
                    log(
                        f"  [{fsync}] Redis killed at +{kill.killed_at - data.t0:.1f} s, "
                        f"{kill.cut_bytes} AOF bytes cut, up again after {kill.up_at - kill.killed_at:.1f} s"
                    )
            producer.join()
            data.faults_end = time.time()
            data.deadline = data.faults_end + plan.size.drain_deadline_s
            data.producer_lag_s = dict(producer.lag_s)
            ids = {r.record_id for r in producer.results if r.record_id}
            log(f"  [{fsync}] faults over; draining ({len(ids)} ids)")
            _drain(data, runtime, ids)
            time.sleep(1.0)  # anything still on the wire reaches the providers
            data.results = producer.results
            data.attempts = ledger.snapshot()
            _collect(data, runtime, ids)
            data.redis_kills = list(cluster.redis_kills)
            data.crashes = [_crash(i) for i in cluster.crashes()]
        finally:
            stop_sampling.set()
            cluster.stop_all()
    data.finished_s = time.time()
    return data


def _crash(incarnation: Incarnation) -> dict[str, Any]:
    return {
        "process": incarnation.name,
        "exit_status": incarnation.crashed,
        "at": incarnation.crashed_at,
        "log_tail": incarnation.log_tail(),
    }
