"""Draining a full queue (issue scenarios 3 and 4), noti against plain Celery in the same run.

3. 20,000 SMS queued, sandbox provider, noti's worker configuration (default: 2 × solo,
   batch mode) against ``celery worker -P prefork -c 2`` running an INCR-only task.
4. 5,000 webhooks to the fake 20 ms HTTP provider (:mod:`bench.fake_http`), the same noti
   configuration, against ``celery worker -P threads -c 50`` doing one signed POST per task
   on a per-thread keep-alive ``http.client`` connection.

The peers the issue names are drained in the same repetitions (:mod:`bench.peers`; noti
must be ahead of each): dramatiq and huey in scenario 3, taskiq and dramatiq in scenario 4.

Each run fills the queue first, then starts the workers, and times from the first
delivered to the N-th (:mod:`bench._drain`). Afterwards every record must be in status 10
and the sandbox outbox / fake server must have seen exactly N (else the row fails).
Repetitions are interleaved: noti, plain Celery, the peers, noti, …

    .venv/bin/python -m bench.drain_bench [--only 3,4] [--reps 3] [--smoke]
"""

from __future__ import annotations

import json
import sys
import time
from functools import partial
from typing import Any

import redis

from bench import peers, plain_celery
from bench._celery_fill import fill
from bench._counting_worker import INTERVAL_S, total
from bench._drain import Drain, DrainFailed, time_drain
from bench._harness import Worker, redis_server, running
from bench._noti import (
    FAST,
    PHONE,
    SECRET,
    SMS_QUEUE,
    WEBHOOK_QUEUE,
    WorkerConfig,
    check_done,
    done_count,
    noti_env,
    point_driver,
    start_workers,
    write_config,
)
from bench._report import Row, attempt
from bench._runner import main
from bench.fake_http import FakeHttp

__all__ = [
    "celery_drain_http",
    "celery_drain_noop",
    "noti_drain_http",
    "noti_drain_sandbox",
    "scenario_3",
    "scenario_4",
]

SIZES = {3: (20_000, 2_000), 4: (5_000, 300)}  # (full, smoke)
HTTP_THREADS = 50
#: The peers each scenario drains beside noti (the issue's "ahead of …"), with how they run.
PEERS = {
    3: {
        "dramatiq": "2 processes x 8 threads, prefetch 256, INCR-only actor",
        "huey": "huey_consumer -k process -w 2, INCR-only task",
    },
    4: {
        "taskiq": "2 workers x 100 async tasks, one aiohttp keep-alive POST each",
        "dramatiq": "2 processes x 25 threads, one keep-alive http.client POST per message",
    },
}


def _noti_prefill(url: str, items: list[dict[str, Any]]) -> tuple[Any, list[str | None]]:
    import noti

    runtime = point_driver(noti_env(url, write_config()))
    runtime.redis.flushall()
    result = noti.notify_many(items)
    if result.stored != len(items):
        raise DrainFailed(f"notify_many stored {result.stored} of {len(items)}: {result.refused[:3]}")
    return runtime, result.ids


def noti_drain_sandbox(
    url: str, n: int, config: WorkerConfig = FAST, *, counting: str | None = None
) -> Drain:
    """``n`` SMS through the sandbox: fill, start the workers, time the drain, verify."""
    items = [{"type": "sms", "to": PHONE, "text": f"drain {i}"} for i in range(n)]
    runtime, ids = _noti_prefill(url, items)
    workers = start_workers(config, noti_env(url, write_config()), SMS_QUEUE, counting=counting)
    with running(workers):
        drain = time_drain(lambda: done_count(runtime), n, workers=workers, redis_client=runtime.redis)
        _count_round_trips(drain, counting)
    check_done(runtime, ids)
    sent = runtime.redis.llen(runtime.keys.sandbox_outbox("sandbox"))
    if sent != n:
        raise DrainFailed(f"the sandbox outbox holds {sent} entries for {n} records")
    return drain


def noti_drain_http(
    url: str, n: int, fake: FakeHttp, config: WorkerConfig = FAST, *, counting: str | None = None
) -> Drain:
    """``n`` webhooks to the fake HTTP provider: fill, start the workers, time, verify."""
    fake.reset()
    items = [{"type": "webhook", "to": fake.url, "content": {"n": i, "text": "hello"}} for i in range(n)]
    runtime, ids = _noti_prefill(url, items)
    workers = start_workers(config, noti_env(url, write_config()), WEBHOOK_QUEUE, counting=counting)
    with running(workers):
        drain = time_drain(
            lambda: done_count(runtime), n, workers=workers, redis_client=runtime.redis, others=[fake.pid]
        )
        _count_round_trips(drain, counting)
    check_done(runtime, ids)
    _check_fake(fake, n, set(map(str, ids)))
    return drain


def _count_round_trips(drain: Drain, counting: str | None) -> None:
    """With ``counting``, set the drain's round trips per notification, read while the workers
    still run (so their shutdown is not counted), once their reporters have caught up."""
    if counting is not None:
        time.sleep(3 * INTERVAL_S)
        drain.round_trips = total(counting) / drain.total


def _check_fake(fake: FakeHttp, n: int, ids: set[str] | None = None) -> None:
    stats = fake.stats()
    seen = [a[0] for a in stats["arrivals"]]
    if stats["good"] != n or stats["bad"] or stats["unsigned"] or len(seen) != n:
        counts = {k: v for k, v in stats.items() if k != "arrivals"}
        raise DrainFailed(f"the fake server saw {len(seen)} POSTs for {n}: {counts}")
    if ids is not None and set(seen) != ids:
        raise DrainFailed(f"the fake server saw other webhook-ids than the records' ({len(set(seen) - ids)})")


def _plain(url: str) -> redis.Redis:
    broker = f"{url}/1"
    plain_celery.use_broker(broker)
    client = redis.Redis.from_url(broker)
    client.flushdb()
    return client


def plain_worker(url: str, *args: str, counting: str | None = None) -> Worker:
    """A plain Celery worker on the bench's broker (db 1 of ``url``)."""
    env = {"BENCH_BROKER_URL": f"{url}/1", "BENCH_WEBHOOK_SECRET": SECRET}
    launcher = ("celery",) if counting is None else ("bench._counting_worker", counting)
    return Worker("bench.plain_celery", env, *args, "--without-heartbeat", launcher=launcher)


def celery_drain_noop(url: str, n: int, *, counting: str | None = None) -> Drain:
    """The drain baseline: ``n`` INCR-only tasks on ``celery worker -P prefork -c 2``."""
    client = _plain(url)
    fill(plain_celery.incr, [()] * n)
    workers = [plain_worker(url, "-P", "prefork", "-c", "2", counting=counting)]
    with running(workers):
        drain = time_drain(
            lambda: int(client.get(plain_celery.DONE_KEY) or 0), n, workers=workers, redis_client=client
        )
        _count_round_trips(drain, counting)
    done = int(client.get(plain_celery.DONE_KEY) or 0)
    if done != n or client.llen("celery"):
        raise DrainFailed(f"plain Celery ran {done} tasks for {n}; {client.llen('celery')} left queued")
    return drain


def celery_drain_http(url: str, n: int, fake: FakeHttp) -> Drain:
    """The I/O baseline: ``n`` POST tasks on ``celery worker -P threads -c 50``."""
    client = _plain(url)
    fake.reset()
    fill(plain_celery.post, [(fake.url, json.dumps({"n": i, "text": "hello"})) for i in range(n)])
    workers = [plain_worker(url, "-P", "threads", "-c", str(HTTP_THREADS))]
    with running(workers):
        drain = time_drain(fake.count, n, workers=workers, redis_client=client, others=[fake.pid])
    _check_fake(fake, n)
    return drain


def _rates(drains: list[Drain | None]) -> list[float]:
    return [d.rate for d in drains if d is not None and d.timed > 0]


def scenario_3(
    reps: int, smoke: bool, config: WorkerConfig = FAST, ctx: dict[str, Any] | None = None
) -> list[Row]:
    """Drain, sandbox provider; the drains are left in ``ctx["drains"]`` for scenario 9."""
    n = SIZES[3][smoke]
    errors: list[str] = []
    ours: list[Drain | None] = []
    theirs: list[Drain | None] = []
    others: dict[str, list[Drain | None]] = {peer: [] for peer in PEERS[3]}
    with redis_server() as url:
        for rep in range(reps):
            ours.append(attempt(errors, f"noti rep {rep + 1}", lambda: noti_drain_sandbox(url, n, config)))
            theirs.append(attempt(errors, f"celery rep {rep + 1}", lambda: celery_drain_noop(url, n)))
            for peer, drains in others.items():
                drain_noop = partial(peers.load(peer).drain_noop, url, n)
                drains.append(attempt(errors, f"{peer} rep {rep + 1}", drain_noop))
    if ctx is not None:
        ctx.setdefault("drains", {}).update(noti_sandbox=ours, celery_noop=theirs)
    row = Row(
        3,
        f"drain {n:,} SMS, sandbox [{config.label}]",
        "/s",
        _rates(ours),
        ">= 2,800/s (~3x)",
        baseline=_rates(theirs),
        baseline_name="plain Celery prefork -c 2, INCR-only task",
        check=lambda r: r.median >= 2800,
        config=config.as_json(),
        extra={"noti": [d and d.as_json() for d in ours], "baseline": [d and d.as_json() for d in theirs]},
        error="; ".join(errors) or None,
    )
    return [row, *_peer_rows(row, others, PEERS[3])]


def scenario_4(
    reps: int, smoke: bool, config: WorkerConfig = FAST, ctx: dict[str, Any] | None = None
) -> list[Row]:
    """I/O-bound drain against the fake 20 ms HTTP provider."""
    n = SIZES[4][smoke]
    errors: list[str] = []
    ours: list[Drain | None] = []
    theirs: list[Drain | None] = []
    others: dict[str, list[Drain | None]] = {peer: [] for peer in PEERS[4]}
    with redis_server() as url, FakeHttp(SECRET) as fake:
        for rep in range(reps):
            ours.append(attempt(errors, f"noti rep {rep + 1}", lambda: noti_drain_http(url, n, fake, config)))
            theirs.append(attempt(errors, f"celery rep {rep + 1}", lambda: celery_drain_http(url, n, fake)))
            for peer, drains in others.items():
                drain_http = partial(peers.load(peer).drain_http, url, n, fake)
                drains.append(attempt(errors, f"{peer} rep {rep + 1}", drain_http))
    if ctx is not None:
        ctx.setdefault("drains", {}).update(noti_http=ours, celery_http=theirs)
    notes = []
    for side, drains in (("noti's drains", ours), ("the baseline's", theirs), *others.items()):
        fake_us = [d.per_item_us(d.other_cpu_s) for d in drains if d is not None and d.timed]
        if fake_us:
            notes.append(
                f"fake HTTP server CPU during {side}: {min(fake_us):.0f}..{max(fake_us):.0f} µs/request "
                f"({'uvloop' if _has_uvloop() else 'asyncio'})"
            )
    row = Row(
        4,
        f"drain {n:,} webhooks, 20 ms HTTP [{config.label}]",
        "/s",
        _rates(ours),
        ">= 2,500/s",
        baseline=_rates(theirs),
        baseline_name=f"plain Celery threads -c {HTTP_THREADS}, one keep-alive http.client POST per task",
        check=lambda r: r.median >= 2500,
        config=config.as_json(),
        notes=notes,
        extra={"noti": [d and d.as_json() for d in ours], "baseline": [d and d.as_json() for d in theirs]},
        error="; ".join(errors) or None,
    )
    return [row, *_peer_rows(row, others, PEERS[4])]


def _peer_rows(row: Row, others: dict[str, list[Drain | None]], labels: dict[str, str]) -> list[Row]:
    """One row per peer: noti's drains of ``row`` against that peer's, noti ahead to pass."""
    return [
        Row(
            row.scenario,
            f"{row.name.split(' [')[0]} vs {peer}",
            row.unit,
            row.noti,
            f"ahead of {peer}",
            baseline=_rates(drains),
            baseline_name=f"{peer} {peers.version(peer)}: {labels[peer]}",
            check=lambda r: (r.ratio or 0) > 1,
            extra={"baseline": [d and d.as_json() for d in drains]},
            error=row.error,
        )
        for peer, drains in others.items()
    ]


def _has_uvloop() -> bool:
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return False
    return True


SCENARIOS = {3: scenario_3, 4: scenario_4}

if __name__ == "__main__":
    sys.exit(main(__doc__ or "", SCENARIOS, "drain"))
