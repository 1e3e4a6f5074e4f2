"""Per-provider rate limits shared by all workers: a token bucket in one Lua script.

A provider configured with ``rate_limit_per_s`` (and optionally ``rate_burst``) takes a
token before every request; the bucket lives in Redis (``noti:rate:<provider>``) and uses
the Redis server's clock, so every worker process on every host shares one limit.
"""

from __future__ import annotations

import math

import redis

from noti.keys import Keys
from noti.redisconn import load_script, translate_errors

__all__ = ["RateLimiter"]


class RateLimiter:
    """Token buckets, one per provider name."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.redis = client
        self.keys = keys
        self._take = load_script(client, "token_bucket")

    def acquire(self, name: str, *, rate_per_s: float, burst: int | None = None) -> float:
        """Take a token for ``name``; 0 when taken, else the seconds until one is available."""
        size = burst if burst is not None else max(1, math.ceil(rate_per_s))
        with translate_errors(self.redis):
            wait_ms = int(self._take(keys=[self.keys.rate_bucket(name)], args=[rate_per_s, size]))
        return wait_ms / 1000
