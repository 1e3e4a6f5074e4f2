"""noti's side of the benchmarks: its settings file, its environment, its worker processes,
pointing this (driver) process at a private Redis, and checking that records got done.
"""

from __future__ import annotations

import base64
import os
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench._harness import Worker, repoint

__all__ = [
    "PHONE",
    "check_signals",
    "SECRET",
    "WorkerConfig",
    "check_done",
    "done_count",
    "noti_env",
    "point_driver",
    "start_workers",
    "write_config",
]

PHONE = "+8613912345678"
#: The webhook secret of the bench's ``hook`` provider (and of the fake HTTP server).
SECRET = "whsec_" + base64.b64encode(bytes(range(32))).decode()
SMS_QUEUE, WEBHOOK_QUEUE = "noti.sms", "noti.webhook"


@dataclass(frozen=True)
class WorkerConfig:
    """How noti's workers run on the one "host": ``processes`` × ``celery worker -P pool``.

    The default is the configuration README recommends: two ``-P solo`` batch-mode
    processes per core (a process's consumer waits on its Redis round trips part of the
    time; a second one per core fills it: on this 2-core machine 4 processes drained ~15–20 %
    faster than 2, sandbox and 20 ms HTTP alike, with the same latency)."""

    processes: int = 4
    pool: str = "solo"
    concurrency: int = 1
    mode: str = "batch"
    #: Task events on (``worker_send_task_events``), as a Flower user runs noti.
    events: bool = True
    #: A receiver connected to each task signal a delivery sends (:mod:`bench._signal_receivers`);
    #: results need no switch: the result backend reads the records the workers write anyway.
    signals: bool = True
    #: More environment of the workers (``PYTHONPATH`` of another revision: bench.registry_bench).
    extra_env: tuple[tuple[str, str], ...] = ()

    @property
    def label(self) -> str:
        conc = "" if self.pool == "solo" else f" -c {self.concurrency}"
        off = [name for name, on in (("events", self.events), ("signals", self.signals)) if not on]
        return f"{self.processes}x{self.pool}{conc} {self.mode}" + (
            f", {' and '.join(off)} off" if off else ""
        )

    @property
    def settings(self) -> str:
        """The worker settings the table states (issue 24)."""
        return (
            f"{self.processes} x celery worker -P {self.pool}"
            + ("" if self.pool == "solo" else f" -c {self.concurrency}")
            + f", NOTI_DELIVERY_MODE={self.mode}, task events {'on' if self.events else 'off'}"
            + f", task signals {'on (a receiver on each)' if self.signals else 'off (no receiver)'}"
            + ", results: noti's result backend (the records)"
        )

    def env(self) -> dict[str, str]:
        return {
            "NOTI_DELIVERY_MODE": self.mode,
            "NOTI_WORKER_POOL": self.pool,
            "NOTI_WORKER_CONCURRENCY": str(self.concurrency),
            "NOTI_WORKER_TASK_EVENTS": "true" if self.events else "false",
            "NOTI_IMPORTS": "bench._signal_receivers" if self.signals else "",
            **dict(self.extra_env),
        }

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "label": self.label}


FAST = WorkerConfig()


def write_config(directory: str | None = None, *, hook_url: str | None = None) -> Path:
    """A settings file: SMS through the sandbox (no delay), webhooks through ``hook``, whose
    operator-configured receiver is ``hook_url`` (the fake HTTP server: signed with ``hook``'s
    secret, as a deployment's own receivers are)."""
    path = Path(directory or tempfile.mkdtemp(prefix="noti-bench-")) / "noti.toml"
    destinations = f'destinations = ["{hook_url.rstrip("/")}/"]\n' if hook_url else ""
    path.write_text(
        "[channels.sms]\n"
        'provider = "sandbox"\n\n'
        "[channels.webhook]\n"
        'provider = "hook"\n\n'
        "[providers.sandbox]\n\n"
        "[providers.hook]\n"
        'kind = "webhook"\n'
        f'secret = "{SECRET}"\n'
        "allow_private = true\n" + destinations
    )
    return path


def noti_env(url: str, config: Path) -> dict[str, str]:
    """The environment of noti's workers and of this driver for a Redis at ``url`` (no db)."""
    return {
        "NOTI_REDIS_URL": f"{url}/0",
        "NOTI_CONFIG": str(config),
        "NOTI_USER": "bench",
        "NOTI_ROOT_ADMINS": "bench",
    }


def point_driver(env: dict[str, str]) -> Any:
    """Make this process's noti API use ``env`` (a new runtime, and the Celery app's broker);
    returns the runtime."""
    os.environ.update(env)
    import noti.sending.runtime
    from noti.celery.app import app

    runtime = noti.sending.runtime.configure()
    repoint(app, runtime.settings.broker)
    return runtime


def start_workers(
    config: WorkerConfig, env: dict[str, str], queue: str, *, counting: str | None = None
) -> list[Worker]:
    """Start ``config.processes`` noti workers consuming ``queue``. With ``counting`` (a
    directory), they run under :mod:`bench._counting_worker`, which counts Redis round trips."""
    launcher: Sequence[str] = ("celery",) if counting is None else ("bench._counting_worker", counting)
    if config.signals:
        env = {
            **env,
            "BENCH_SIGNALS_DIR": env.get("BENCH_SIGNALS_DIR") or tempfile.mkdtemp(prefix="noti-signals-"),
        }
    args = ["-P", config.pool, "-Q", queue, "--without-heartbeat"]
    if config.pool != "solo":
        args += ["-c", str(config.concurrency)]
    return [
        Worker.celery("noti", {**env, **config.env()}, *args, "-n", f"w{i + 1}@%h", launcher=launcher)
        for i in range(config.processes)
    ]


def check_signals(workers: Sequence[Worker], n: int) -> None:
    """Once ``workers`` (started with signals on) have exited: raise unless their receivers
    got ``task_prerun``, ``task_success`` and ``task_postrun`` once per delivery, each with
    its task's request context pushed."""
    directory = workers[0].env.get("BENCH_SIGNALS_DIR") if workers else None
    if not directory:
        return
    from bench._signal_receivers import received

    counts = received(directory)
    wrong = {
        name: counts[name] for name in ("task_prerun", "task_success", "task_postrun") if counts[name] != n
    }
    if counts["request_mismatch"]:
        wrong["request_mismatch"] = counts["request_mismatch"]
    if wrong:
        raise AssertionError(f"signals for {n} deliveries: {wrong}")


def done_count(runtime: Any) -> int:
    """Records in status 10 (one ZCARD)."""
    from noti.core.record import Status

    return int(runtime.redis.zcard(runtime.keys.status_index(int(Status.DONE))))


def check_done(runtime: Any, ids: Sequence[str | None]) -> None:
    """Raise unless every record of ``ids`` is in status 10."""
    pipe = runtime.redis.pipeline(transaction=False)
    for record_id in ids:
        pipe.hget(runtime.keys.record(str(record_id)), "noti_st")
    states = pipe.execute()
    bad = [(i, s) for i, s in zip(ids, states, strict=True) if s != "10"]
    if bad or None in ids:
        raise AssertionError(f"{len(bad)} of {len(ids)} records not done, e.g. {bad[:3]}")
