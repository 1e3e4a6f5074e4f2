"""The plain-Celery baseline: the same broker, JSON, no result backend, stock settings."""

from __future__ import annotations

import os
import time

import redis
from celery import Celery

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
