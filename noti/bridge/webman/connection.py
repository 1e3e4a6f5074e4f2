"""Redis clients for webman queues.

Replies are decoded as UTF-8 with ``surrogateescape``: a payload that is not valid UTF-8 (PHP
writes such bytes as they are) reaches the codec as text it can recognise and reject, instead
of failing the whole XREADGROUP reply, and ``raw.encode("utf-8", "surrogateescape")`` gives its
bytes back.
"""

from __future__ import annotations

import redis

from noti.redis.conn import connect as connect_redis

__all__ = ["connect"]


def connect(url: str, *, socket_timeout_s: float = 30.0) -> redis.Redis:
    """A client for ``url`` (a ``redis+sentinel://`` one too: :func:`noti.redis.conn.connect`);
    ``socket_timeout_s`` must exceed the longest XREADGROUP BLOCK."""
    return connect_redis(
        url,
        socket_timeout_s=socket_timeout_s,
        encoding_errors="surrogateescape",
        protocol=2,  # the reply shapes the bridge parses (redis-py 8 may default to RESP3)
    )
