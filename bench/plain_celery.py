"""The plain-Celery baseline: the same broker, JSON, no result backend, stock settings.

Its tasks are what a team would write on plain Celery: a no-op, an INCR-only task (the drain
baseline), one signed HTTP POST on a per-thread keep-alive connection (the I/O baseline),
and latency probes. ``BENCH_BROKER_URL`` names the broker (and the Redis the tasks write to);
``BENCH_WEBHOOK_SECRET`` the ``whsec_`` secret the POSTs are signed with.
"""

from __future__ import annotations

import os
import time

import redis
from celery import Celery, Task

from bench._probes import DONE_KEY, LAG_KEY
from bench._signed_post import post as signed_post

app = Celery("plain", broker=os.environ.get("BENCH_BROKER_URL", "redis://127.0.0.1:6379/15"))
app.conf.update(
    task_serializer="json",
    accept_content=["json"],
    result_backend=None,
    task_ignore_result=True,
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
)
_redis = redis.Redis.from_url(app.conf.broker_url)


@app.task(name="plain.noop")
def noop(*args: object) -> None:
    """Does nothing: the cost of a Celery task itself."""


@app.task(name="plain.stamp")
def stamp(due_ms: int) -> None:
    """Record how late this task ran compared with when it was due."""
    _redis.rpush("bench:late", int(time.time() * 1000) - due_ms)


@app.task(name="plain.incr")
def incr() -> None:
    """The drain baseline: one INCR, so the driver can count what was done."""
    _redis.incr(DONE_KEY)


@app.task(name="plain.lag")
def lag(t0: float) -> None:
    """The latency baseline: how long after ``t0`` (the sender's time.time()) this ran."""
    _redis.rpush(LAG_KEY, time.time() - t0)


def use_broker(url: str) -> None:
    """Point this module (the app and the tasks' Redis client) at ``url``, in the driver."""
    global _redis
    from bench._harness import repoint

    os.environ["BENCH_BROKER_URL"] = url
    repoint(app, url)
    _redis = redis.Redis.from_url(url)


@app.task(name="plain.post", bind=True)
def post(self: Task, url: str, body: str) -> None:
    """The I/O baseline: one signed POST (Standard Webhooks headers, as noti sends them) on this
    thread's keep-alive connection."""
    signed_post(url, body, str(self.request.id))
