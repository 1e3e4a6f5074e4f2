"""The plain-Celery baseline: the same broker, JSON, no result backend, stock settings.

Its tasks are what a team would write on plain Celery: a no-op, an INCR-only task (the drain
baseline), one signed HTTP POST on a per-thread keep-alive connection (the I/O baseline),
and latency probes. ``BENCH_BROKER_URL`` names the broker (and the Redis the tasks write to);
``BENCH_WEBHOOK_SECRET`` the ``whsec_`` secret the POSTs are signed with.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import http.client
import os
import threading
import time
from typing import Any
from urllib.parse import urlsplit

import redis
from celery import Celery, Task

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
_local = threading.local()
DONE_KEY, LAG_KEY = "bench:done", "bench:lag"


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


def _key() -> bytes:
    secret = os.environ.get("BENCH_WEBHOOK_SECRET", "whsec_")
    encoded = secret.removeprefix("whsec_")
    return base64.b64decode(encoded + "=" * (-len(encoded) % 4))


def _connection(url: str) -> tuple[http.client.HTTPConnection, str]:
    parts = urlsplit(url)
    conn: http.client.HTTPConnection | None = getattr(_local, "conn", None)
    if conn is None:
        conn = _local.conn = http.client.HTTPConnection(parts.hostname or "", parts.port or 80, timeout=10)
    return conn, parts.path or "/"


@app.task(name="plain.post", bind=True)
def post(self: Task, url: str, body: str) -> None:
    """The I/O baseline: one signed POST (Standard Webhooks headers, as noti sends them) on this
    thread's keep-alive connection."""
    conn, path = _connection(url)
    data = body.encode()
    webhook_id, ts = str(self.request.id), int(time.time())
    digest = hmac.new(_key(), f"{webhook_id}.{ts}.".encode() + data, hashlib.sha256).digest()
    headers: dict[str, Any] = {
        "content-type": "application/json",
        "webhook-id": webhook_id,
        "webhook-timestamp": str(ts),
        "webhook-signature": "v1," + base64.b64encode(digest).decode(),
    }
    try:
        conn.request("POST", path, data, headers)
        response = conn.getresponse()
        response.read()
    except (http.client.HTTPException, OSError):
        conn.close()
        _local.conn = None
        raise
    if response.status != 200:
        raise RuntimeError(f"HTTP {response.status}")
