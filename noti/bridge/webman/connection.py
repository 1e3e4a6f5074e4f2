"""Redis clients for webman queues.

Replies are decoded as UTF-8 with ``surrogateescape``: a payload that is not valid UTF-8 (PHP
writes such bytes as they are) reaches the codec as text it can recognise and reject, instead
of failing the whole XREADGROUP reply, and ``raw.encode("utf-8", "surrogateescape")`` gives its
bytes back.
"""

from __future__ import annotations

import redis

from noti.redisconn import masked_url

__all__ = ["connect"]


def connect(url: str, *, socket_timeout_s: float = 30.0) -> redis.Redis:
    """A client for ``url``; ``socket_timeout_s`` must exceed the longest XREADGROUP BLOCK."""
    client: redis.Redis = redis.Redis.from_url(
        url,
        decode_responses=True,
        encoding_errors="surrogateescape",
        socket_timeout=socket_timeout_s,
        socket_connect_timeout=3,
        health_check_interval=30,
        retry_on_timeout=False,
        protocol=2,  # the reply shapes the bridge parses (redis-py 8 may default to RESP3)
    )
    client.noti_url = masked_url(url)  # type: ignore[attr-defined]
    return client
