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

    .venv/bin/python -m bench.cost_bench [--smoke]
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable
from typing import Any

from bench import plain_celery
from bench._drain import Drain
from bench._harness import redis_server
from bench._noti import FAST, PHONE, SECRET, WorkerConfig
from bench._report import Row, attempt
from bench._runner import main
from bench.drain_bench import (
    SIZES,
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
    n3, n4, nc = COUNTED[smoke]
    rows[2].notes.append(
        f"round trips counted in separate runs ({n3:,} SMS, {n4:,} webhooks, {nc:,} Celery tasks), "
        "from worker_ready to the last delivery, idle polling included"
    )
    return rows


SCENARIOS = {9: scenario_9}

if __name__ == "__main__":
    sys.exit(main(__doc__ or "", SCENARIOS, "cost"))
