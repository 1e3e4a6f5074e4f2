"""Cost per notification (issue scenario 9), for noti's drain (3) and I/O (4) configurations
and for plain Celery's drain baselines.

- CPU: the workers' process groups (user + sys from ``/proc``) and redis-server
  (``used_cpu_user + used_cpu_sys`` of ``INFO cpu``), over the timed interval of the drains
  of scenarios 3 and 4, divided by the notifications delivered in it. When 3 / 4 did not run
  in this process, one drain of each is run here.
- Redis round trips: separate, untimed drains whose workers run under
  :mod:`bench._counting_worker` (every ``send_packed_command`` counted, kombu's included),
  from ``worker_ready`` to the last delivery, divided by N.
- The producer: round trips per ``notify()`` call, and per plain ``.delay()``.
- BullMQ (issue 38): its worker and Redis CPU per job over the drains of scenarios 3 and 4
  (its best configuration of each repetition), against noti's of the same repetition; noti's
  worker CPU per notification must be at most BullMQ's in every repetition, the Redis CPU is
  shown beside it (held, no target). Run here too when 3 / 4 did not run.

    .venv/bin/python -m bench.cost_bench [--smoke]
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable
from typing import Any

from bench import peers, plain_celery
from bench._drain import Drain
from bench._harness import redis_server
from bench._noti import FAST, PHONE, SECRET, WorkerConfig
from bench._report import Row, attempt
from bench._runner import main
from bench.drain_bench import (
    SIZES,
    best,
    celery_drain_http,
    celery_drain_noop,
    noti_drain_http,
    noti_drain_sandbox,
)
from bench.enqueue_bench import round_trips_per_call, setup
from bench.fake_http import FakeHttp

__all__ = ["scenario_9"]

#: Round-trip counting runs: (sandbox drain, HTTP drain, plain Celery drain) sizes.
COUNTED = {False: (5_000, 2_000, 3_000), True: (500, 200, 300)}
PRODUCER_CALLS = 200


def _timed_drains(smoke: bool, config: WorkerConfig, errors: list[str]) -> dict[str, list[Drain | None]]:
    """One drain of each kind, for when scenarios 3 and 4 did not run."""
    n3, n4 = SIZES[3][smoke], SIZES[4][smoke]
    with redis_server() as url, FakeHttp(SECRET) as fake:
        return {
            "noti_sandbox": [attempt(errors, "noti drain", lambda: noti_drain_sandbox(url, n3, config))],
            "celery_noop": [attempt(errors, "celery drain", lambda: celery_drain_noop(url, n3))],
            "noti_http": [attempt(errors, "noti http", lambda: noti_drain_http(url, n4, fake, config))],
            "celery_http": [attempt(errors, "celery http", lambda: celery_drain_http(url, n4, fake))],
        }


def _bullmq_drains(smoke: bool, have: dict[str, Any]) -> dict[str, Any]:
    """BullMQ's best drains of scenarios 3 (``noop``) and 4 (``http``) and their errors
    (``noop_errors``, ``http_errors``): those of ``have`` (left by those scenarios), the
    others run here once, in each configuration."""
    out = dict(have)
    missing = [kind for kind in ("noop", "http") if kind not in out]
    if not missing:
        return out
    n3, n4 = SIZES[3][smoke], SIZES[4][smoke]
    module = peers.load("bullmq")
    with redis_server() as url, FakeHttp(SECRET) as fake:
        for kind in missing:
            drains: dict[str, list[Drain | None]] = {}
            errors: dict[str, list[str]] = {}
            for peer_config in peers.configurations("bullmq", smoke):
                config = peer_config.split(" ", 1)[1]
                errors[peer_config] = []

                def run(config: str = config, kind: str = kind) -> Drain:
                    if kind == "noop":
                        return module.drain_noop(url, n3, config)  # type: ignore[no-any-return]
                    return module.drain_http(url, n4, fake, config)  # type: ignore[no-any-return]

                drains[peer_config] = [attempt(errors[peer_config], f"{peer_config} {kind} drain", run)]
            best(drains, errors)
            out[kind], out[f"{kind}_errors"] = drains["bullmq"], errors["bullmq"]
    return out


def _bullmq_rows(noti: dict[str, list[Drain | None]], bullmq: dict[str, Any], errors: list[str]) -> list[Row]:
    """noti's worker and Redis CPU per notification against BullMQ's per job, repetition by
    repetition, for the sandbox drain and the 20 ms HTTP drain."""
    rows: list[Row] = []
    specs = (("drain", "noti_sandbox", "noop", "drain_noop"), ("I/O", "noti_http", "http", "drain_http"))
    for label, ours, kind, run in specs:
        failed = {"noti": [e for e in errors if e.startswith("noti")], "bullmq": bullmq[f"{kind}_errors"]}
        for what, cpu, need in (("worker", "worker_cpu_s", 1.0), ("Redis", "redis_cpu_s", None)):
            rows += peers.rows(
                9,
                f"{label}: {what} CPU / notification",
                "µs",
                _per_rep(noti[ours], cpu),
                {"bullmq": _per_rep(bullmq[kind], cpu)},
                run,
                {"bullmq": need},
                failed,
                lower_is_better=True,
            )
    for row in rows:
        if "Redis" in row.name:
            row.notes.append(
                "issue 38: Redis CPU per notification held against BullMQ's (printed, no target)"
            )
    return rows


def _per_rep(drains: list[Drain | None], what: str) -> list[float | None]:
    return [d.per_item_us(getattr(d, what)) if d is not None and d.timed else None for d in drains]


def _counted(dirname: str, run: Callable[[str], Drain]) -> float:
    with tempfile.TemporaryDirectory(prefix=f"noti-bench-rt-{dirname}-") as directory:
        drain = run(directory)
    assert drain.round_trips is not None
    return drain.round_trips


def _round_trips(smoke: bool, config: WorkerConfig, errors: list[str]) -> dict[str, float | None]:
    n3, n4, nc = COUNTED[smoke]
    with redis_server() as url, FakeHttp(SECRET) as fake:
        out: dict[str, float | None] = {
            "noti_sandbox": attempt(
                errors,
                "counting noti drain",
                lambda: _counted("sandbox", lambda d: noti_drain_sandbox(url, n3, config, counting=d)),
            ),
            "noti_http": attempt(
                errors,
                "counting noti http",
                lambda: _counted("http", lambda d: noti_drain_http(url, n4, fake, config, counting=d)),
            ),
            "celery_noop": attempt(
                errors,
                "counting celery drain",
                lambda: _counted("celery", lambda d: celery_drain_noop(url, nc, counting=d)),
            ),
        }
        setup(url)
        import noti

        out["notify"] = attempt(
            errors,
            "notify() round trips",
            lambda: round_trips_per_call(lambda i: noti.notify_sms(PHONE, f"rt {i}"), PRODUCER_CALLS),
        )
        out["delay"] = attempt(
            errors,
            ".delay() round trips",
            lambda: round_trips_per_call(lambda i: plain_celery.noop.delay(PHONE, f"rt {i}"), PRODUCER_CALLS),
        )
    return out


def _per(drains: list[Drain | None], what: str) -> list[float]:
    return [d.per_item_us(getattr(d, what)) for d in drains if d is not None and d.timed]


def scenario_9(
    reps: int, smoke: bool, config: WorkerConfig = FAST, ctx: dict[str, Any] | None = None
) -> list[Row]:
    errors: list[str] = []
    drains: dict[str, list[Drain | None]] = dict((ctx or {}).get("drains", {}))
    if not {"noti_sandbox", "celery_noop", "noti_http", "celery_http"} <= set(drains):
        drains = {**_timed_drains(smoke, config, errors), **drains}
    trips = _round_trips(smoke, config, errors)

    def one(key: str) -> list[float]:
        value = trips.get(key)
        return [] if value is None else [value]

    drain_base = "plain Celery prefork -c 2, INCR-only task (scenario 3's baseline)"
    http_base = "plain Celery threads -c 50, one POST per task (scenario 4's baseline)"
    sandbox, noop, http, post = (
        drains[k] for k in ("noti_sandbox", "celery_noop", "noti_http", "celery_http")
    )
    w, r = "worker_cpu_s", "redis_cpu_s"
    specs: list[tuple[str, str, list[float], list[float], str]] = [
        ("drain: worker CPU / notification", "µs", _per(sandbox, w), _per(noop, w), drain_base),
        ("drain: Redis CPU / notification", "µs", _per(sandbox, r), _per(noop, r), drain_base),
        ("drain: Redis round trips / notification", "", one("noti_sandbox"), one("celery_noop"), drain_base),
        ("I/O: worker CPU / notification", "µs", _per(http, w), _per(post, w), http_base),
        ("I/O: Redis CPU / notification", "µs", _per(http, r), _per(post, r), http_base),
        ("I/O: Redis round trips / notification", "", one("noti_http"), [], ""),
        (
            "producer: round trips per notify()",
            "",
            one("notify"),
            one("delay"),
            "plain Celery .delay(), no-op",
        ),
    ]
    rows = [
        Row(9, name, unit, ours, "(printed)", baseline=theirs, baseline_name=base, config=config.as_json())
        for name, unit, ours, theirs, base in specs
    ]
    for row in rows:  # a failure fails the rows it left without a figure
        if errors and (not row.noti or (row.baseline_name and not row.baseline)):
            row.error = "; ".join(errors)
    bullmq = _bullmq_drains(smoke, dict((ctx or {}).get("bullmq", {})))
    rows += _bullmq_rows(drains, bullmq, errors)
    n3, n4, nc = COUNTED[smoke]
    rows[2].notes.append(
        f"round trips counted in separate runs ({n3:,} SMS, {n4:,} webhooks, {nc:,} Celery tasks), "
        "from worker_ready to the last delivery, idle polling included"
    )
    return rows


SCENARIOS = {9: scenario_9}

if __name__ == "__main__":
    sys.exit(main(__doc__ or "", SCENARIOS, "cost"))
