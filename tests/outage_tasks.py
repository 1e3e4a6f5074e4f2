"""A task listener for tests/test_redis_outage.py, imported into its worker with ``-I``: it
keeps the event processor busy for ``payload["sleep_s"]`` seconds."""

from __future__ import annotations

import time
from typing import Any

from celery import shared_task


@shared_task(name="tests.outage.slow")
def slow(event: dict[str, Any]) -> float:
    seconds = float(event["payload"].get("sleep_s", 1))
    time.sleep(seconds)
    return seconds
