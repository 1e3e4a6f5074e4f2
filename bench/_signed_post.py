"""The baselines' one provider call: a signed POST to the fake HTTP provider.

Every baseline (plain Celery and the peer libraries) does what a team would write on that
library: one POST per task with Standard Webhooks headers, as noti sends them, signed with
``BENCH_WEBHOOK_SECRET`` (the fake server checks the signature). Thread-based workers keep one
keep-alive ``http.client`` connection per thread (:func:`post`); asyncio workers build the
same headers with :func:`signed_headers` for their own client.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import http.client
import os
import threading
import time
from urllib.parse import urlsplit

__all__ = ["post", "signed_headers"]

_local = threading.local()


def _key() -> bytes:
    secret = os.environ.get("BENCH_WEBHOOK_SECRET", "whsec_")
    encoded = secret.removeprefix("whsec_")
    return base64.b64decode(encoded + "=" * (-len(encoded) % 4))


def signed_headers(webhook_id: str, data: bytes) -> dict[str, str]:
    """The headers of one POST of ``data`` as webhook ``webhook_id``, signed now."""
    ts = int(time.time())
    digest = hmac.new(_key(), f"{webhook_id}.{ts}.".encode() + data, hashlib.sha256).digest()
    return {
        "content-type": "application/json",
        "webhook-id": webhook_id,
        "webhook-timestamp": str(ts),
        "webhook-signature": "v1," + base64.b64encode(digest).decode(),
    }


def _connection(url: str) -> tuple[http.client.HTTPConnection, str]:
    parts = urlsplit(url)
    conn: http.client.HTTPConnection | None = getattr(_local, "conn", None)
    if conn is None:
        conn = _local.conn = http.client.HTTPConnection(parts.hostname or "", parts.port or 80, timeout=10)
    return conn, parts.path or "/"


def post(url: str, body: str, webhook_id: str) -> None:
    """POST ``body`` to ``url`` on this thread's keep-alive connection; raise unless 200."""
    conn, path = _connection(url)
    data = body.encode()
    try:
        conn.request("POST", path, data, signed_headers(webhook_id, data))
        response = conn.getresponse()
        response.read()
    except (http.client.HTTPException, OSError):
        conn.close()
        _local.conn = None
        raise
    if response.status != 200:
        raise RuntimeError(f"HTTP {response.status}")
