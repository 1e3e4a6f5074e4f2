"""Draining a full queue (issue scenarios 3 and 4), noti against plain Celery in the same run.

3. 20,000 SMS queued, sandbox provider, noti's worker configuration (default: 4 × solo,
   batch mode) against ``celery worker -P prefork -c 2`` running an INCR-only task.
4. 5,000 webhooks to the fake 20 ms HTTP provider (:mod:`bench.fake_http`), the same noti
   configuration, against ``celery worker -P threads -c 50`` doing one signed POST per task
   on a per-thread keep-alive ``http.client`` connection.

The peers are drained in the same repetitions (:mod:`bench.peers`). Issue 38: noti against
BullMQ's best configuration of each repetition (one Node process with concurrency 50, 200,
two processes: ``bench.peers.bullmq.CONFIGS``, each shown as a row of its own): ahead of it in
scenario 3, >= 1.5x in scenario 4; dramatiq, huey and taskiq are shown for context.

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
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

import redis

from bench import peers, plain_celery
from bench._celery_fill import fill
from bench._counting_worker import INTERVAL_S, total
from bench._drain import Drain, DrainFailed
from bench._harness import Worker, redis_server
from bench._noti import (
    FAST,
    PHONE,
    SECRET,
    SMS_QUEUE,
    WEBHOOK_QUEUE,
    WorkerConfig,
    check_done,
    check_signals,
    done_count,
    noti_env,
    point_driver,
    start_workers,
    write_config,
)
from bench._probes import counted_drain, timed_drain
from bench._report import Row, attempt, errors_of, paired_ratio, present
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
#: The peers each scenario drains beside noti: the factor the issue wants noti ahead of
#: them by in every repetition (1.0: ahead), None where they are shown for context. Issue
#: 38: the sandbox drain ahead of BullMQ's best configuration, the 20 ms HTTP drain >= 1.5x
#: it; the peers of issue 24 (dramatiq, huey, taskiq) are context now.
PEERS: dict[int, dict[str, float | None]] = {
    3: {"bullmq": 1.0, "dramatiq": None, "huey": None, "taskiq": None},
    4: {"bullmq": 1.5, "taskiq": None, "dramatiq": None, "huey": None},
}
#: The peers drained in several configurations (:func:`bench.peers.configurations`): their
#: own row is the best configuration of each repetition.
CONFIGURED = ("bullmq",)


def _noti_prefill(
    url: str, items: list[dict[str, Any]], *, hook_url: str | None = None
) -> tuple[Any, list[str | None]]:
    import noti

    runtime = point_driver(noti_env(url, write_config(hook_url=hook_url)))
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
    drain = timed_drain(
        lambda: done_count(runtime), n, workers, runtime.redis, before_stop=_counter(counting)
    )
    check_done(runtime, ids)
    check_signals(workers, n)
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
    runtime, ids = _noti_prefill(url, items, hook_url=fake.url)
    workers = start_workers(
        config, noti_env(url, write_config(hook_url=fake.url)), WEBHOOK_QUEUE, counting=counting
    )
    count = partial(done_count, runtime)
    drain = timed_drain(count, n, workers, runtime.redis, others=[fake.pid], before_stop=_counter(counting))
    check_done(runtime, ids)
    check_signals(workers, n)
    fake.expect(n, set(map(str, ids)))
    return drain


def _counter(counting: str | None) -> Callable[[Drain], None] | None:
    """With ``counting``, the ``before_stop`` that sets the drain's round trips per
    notification, read while the workers still run (so their shutdown is not counted), once
    their reporters have caught up."""
    if counting is None:
        return None

    def count(drain: Drain) -> None:
        time.sleep(3 * INTERVAL_S)
        drain.round_trips = total(counting) / drain.total

    return count


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
    return Worker.celery("bench.plain_celery", env, *args, "--without-heartbeat", launcher=launcher)


def celery_drain_noop(url: str, n: int, *, counting: str | None = None) -> Drain:
    """The drain baseline: ``n`` INCR-only tasks on ``celery worker -P prefork -c 2``."""
    client = _plain(url)
    fill(plain_celery.incr, [()] * n)
    workers = [plain_worker(url, "-P", "prefork", "-c", "2", counting=counting)]
    drain = counted_drain(client, n, workers, "plain Celery", before_stop=_counter(counting))
    if client.llen("celery"):
        raise DrainFailed(f"plain Celery left {client.llen('celery')} tasks queued")
    return drain


def celery_drain_http(url: str, n: int, fake: FakeHttp) -> Drain:
    """The I/O baseline: ``n`` POST tasks on ``celery worker -P threads -c 50``."""
    client = _plain(url)
    fake.reset()
    fill(plain_celery.post, [(fake.url, json.dumps({"n": i, "text": "hello"})) for i in range(n)])
    workers = [plain_worker(url, "-P", "threads", "-c", str(HTTP_THREADS))]
    drain = timed_drain(fake.count, n, workers, client, others=[fake.pid])
    fake.expect(n)
    return drain


def _rate(drain: Drain | None) -> float | None:
    return drain.rate if drain is not None and drain.timed > 0 else None


def _interleaved(
    reps: int, runs: dict[str, Callable[[], Drain]]
) -> tuple[dict[str, list[Drain | None]], dict[str, list[str]]]:
    """Each drain once per repetition, in turn: the drains by run and repetition (None where
    it failed) and each run's failures."""
    drains: dict[str, list[Drain | None]] = {name: [] for name in runs}
    errors: dict[str, list[str]] = {name: [] for name in runs}
    for rep in range(reps):
        for name, run in runs.items():
            drains[name].append(attempt(errors[name], f"{name} rep {rep + 1}", run))
    return drains, errors


def _rows(
    number: int,
    name: str,
    target: str,
    floor: float,
    baseline_name: str,
    config: WorkerConfig,
    drains: dict[str, list[Drain | None]],
    errors: dict[str, list[str]],
    run: str,
    notes: list[str] | None = None,
) -> list[Row]:
    """noti's row (against plain Celery, at least ``floor``/s to pass), then one per peer."""
    rates = {side: [_rate(d) for d in ds] for side, ds in drains.items()}
    row = Row(
        number,
        f"{name} [{config.label}]",
        "/s",
        present(rates["noti"]),
        target,
        baseline=present(rates["celery"]),
        baseline_name=baseline_name,
        check=lambda r: r.median >= floor,
        ratio=paired_ratio(rates["noti"], rates["celery"]),
        config=config.as_json(),
        notes=notes or [],
        extra={side: [d and d.as_json() for d in ds] for side, ds in drains.items()},
        error=errors_of(errors, "noti", "celery"),
    )
    needs: dict[str, float | None] = {}
    for peer, need in PEERS[number].items():
        needs[peer] = need
        needs |= {config: None for config in drains if config.startswith(f"{peer} ")}
    theirs = {peer: rates[peer] for peer in needs}
    return [row, *peers.rows(number, name, "/s", rates["noti"], theirs, run, needs, errors)]


def _peer_runs(number: int, smoke: bool, function: str, *args: Any) -> dict[str, Callable[[], Drain]]:
    """The runs of scenario ``number``'s peers: each configuration of a :data:`CONFIGURED`
    peer (its configuration's name passed last; the first only in a smoke run), the others once
    (a context peer not at all in a smoke run: :func:`bench.peers.scenario_runner`)."""
    runs: dict[str, Callable[[], Drain]] = {}
    for peer in PEERS[number]:
        if peer in CONFIGURED:
            for config in peers.configurations(peer, smoke):
                runs[config] = peers.runner(peer, function, *args, config.split(" ", 1)[1])
        else:
            runs[peer] = peers.scenario_runner(peer, PEERS[number][peer], smoke, function, *args)
    return runs


def best(drains: dict[str, list[Drain | None]], errors: dict[str, list[str]]) -> None:
    """Add each :data:`CONFIGURED` peer's best configuration of each repetition (the drain
    of the highest rate; None where one of them failed, as the best is then unknown) to
    ``drains``, under the peer's name, and its configurations' errors to ``errors``."""
    for peer in CONFIGURED:
        configs = [name for name in drains if name.startswith(f"{peer} ")]
        if not configs:
            continue
        reps = zip(*(drains[name] for name in configs), strict=True)
        drains[peer] = [None if None in rep else max(rep, key=lambda d: _rate(d) or 0.0) for rep in reps]
        errors[peer] = [e for name in configs for e in errors[name]]


def scenario_3(
    reps: int, smoke: bool, config: WorkerConfig = FAST, ctx: dict[str, Any] | None = None
) -> list[Row]:
    """Drain, sandbox provider; the drains are left in ``ctx["drains"]`` for scenario 9."""
    n = SIZES[3][smoke]
    with redis_server() as url:
        quiet = replace(config, events=False)
        runs = {
            "noti": partial(noti_drain_sandbox, url, n, config),
            "noti_quiet": partial(noti_drain_sandbox, url, n, quiet),
            "celery": partial(celery_drain_noop, url, n),
            **_peer_runs(3, smoke, "drain_noop", url, n),
        }
        drains, errors = _interleaved(reps, runs)
    best(drains, errors)
    if ctx is not None:
        ctx.setdefault("drains", {}).update(noti_sandbox=drains["noti"], celery_noop=drains["celery"])
        ctx.setdefault("bullmq", {}).update(noop=drains["bullmq"], noop_errors=errors["bullmq"])
    baseline = "plain Celery prefork -c 2, INCR-only task"
    rows = _rows(
        3,
        f"drain {n:,} SMS, sandbox",
        ">= 10,000/s, events on",
        10_000,
        baseline,
        config,
        {side: ds for side, ds in drains.items() if side != "noti_quiet"},
        errors,
        "drain_noop",
    )
    on, off = ([_rate(d) for d in drains[side]] for side in ("noti", "noti_quiet"))
    rows.insert(
        1,
        Row(
            3,
            f"drain {n:,} SMS, sandbox [{quiet.label}]",
            "/s",
            present(off),
            "context: the cost of task events",
            baseline=present(on),
            baseline_name="noti with events on (the row above)",
            ratio=paired_ratio(off, on),
            config=quiet.as_json(),
            error=errors_of(errors, "noti_quiet"),
        ),
    )
    return rows


def scenario_4(
    reps: int, smoke: bool, config: WorkerConfig = FAST, ctx: dict[str, Any] | None = None
) -> list[Row]:
    """I/O-bound drain against the fake 20 ms HTTP provider."""
    n = SIZES[4][smoke]
    with redis_server() as url, FakeHttp(SECRET) as fake:
        runs = {
            "noti": partial(noti_drain_http, url, n, fake, config),
            "celery": partial(celery_drain_http, url, n, fake),
            **_peer_runs(4, smoke, "drain_http", url, n, fake),
        }
        drains, errors = _interleaved(reps, runs)
    best(drains, errors)
    if ctx is not None:
        ctx.setdefault("drains", {}).update(noti_http=drains["noti"], celery_http=drains["celery"])
        ctx.setdefault("bullmq", {}).update(http=drains["bullmq"], http_errors=errors["bullmq"])
    server = "uvloop" if _has_uvloop() else "asyncio"
    notes = []
    for side, ds in drains.items():
        if side in CONFIGURED:  # its best configuration's drains: each is listed under its own name
            continue
        fake_us = [d.per_item_us(d.other_cpu_s) for d in ds if d is not None and d.timed]
        if fake_us:
            notes.append(
                f"fake HTTP server ({server}) CPU during {side}'s drains: "
                f"{min(fake_us):.0f}..{max(fake_us):.0f} µs/request"
            )
    baseline = f"plain Celery threads -c {HTTP_THREADS}, one keep-alive http.client POST per task"
    name = f"drain {n:,} webhooks, 20 ms HTTP"
    return _rows(4, name, ">= 2,500/s", 2500, baseline, config, drains, errors, "drain_http", notes)


def _has_uvloop() -> bool:
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return False
    return True


SCENARIOS = {3: scenario_3, 4: scenario_4}

if __name__ == "__main__":
    sys.exit(main(__doc__ or "", SCENARIOS, "drain"))
