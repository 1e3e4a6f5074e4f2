"""Tasks imported into a test worker with ``-I``: a task listener for tests/test_redis_outage.py
that keeps the event processor busy for ``payload["sleep_s"]`` seconds, and a plain task for
tests/test_worker_reconnect.py that runs for a while and then says so in Redis."""

from __future__ import annotations

import os
import time
from typing import Any

import redis
from celery import shared_task


@shared_task(name="tests.outage.slow")
def slow(event: dict[str, Any]) -> float:
    seconds = float(event["payload"].get("sleep_s", 1))
    time.sleep(seconds)
    return seconds


@shared_task(name="tests.outage.busy")
def busy(seconds: float, key: str) -> float:
    """Sleep ``seconds``, then set ``key`` in the worker's Redis (the task ran to its end)."""
    time.sleep(seconds)
    redis.Redis.from_url(os.environ["NOTI_REDIS_URL"]).set(key, "done")
    return seconds
