"""A recipient's throttles as they stand (issue 35): per throttled category and channel the
recipient has an address on, how many sends the current period holds (delayed ones noted at
their future time included), the limit, and when the next send fits (:mod:`noti.lua.notify`
decides; this only reads)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import redis

from noti.core.keys import Keys
from noti.recipients.categories import Category
from noti.redis.outage import translate_errors

__all__ = ["ThrottleState", "throttle_states"]


@dataclass(frozen=True, slots=True)
class ThrottleState:
    """One category's throttle on one channel of one recipient."""

    category: str
    channel: str
    #: Sends in the period that ends now (and those noted later: delayed ones).
    sent: int
    limit: int
    period_ms: int
    over: str
    #: When the next send fits (ms; now when it does now).
    free_at_ms: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "category": self.category,
            "channel": self.channel,
            "sent": self.sent,
            "limit": self.limit,
            "period": self.period_ms / 1000,
            "over": self.over,
            "free_at_ms": self.free_at_ms,
        }


def throttle_states(
    client: redis.Redis,
    keys: Keys,
    owner: str,
    rid: str,
    categories: list[Category],
    channels: list[str],
    now: int,
) -> list[ThrottleState]:
    """The throttles of ``categories`` on ``channels`` for recipient ``rid`` of ``owner`` at
    ``now`` (one round trip)."""
    pairs = [(c, ch) for c in categories if c.throttle is not None and not c.critical for ch in channels]
    if not pairs:
        return []
    with translate_errors(client):
        pipe = client.pipeline(transaction=False)
        for category, channel in pairs:
            period = category.throttle.period_ms  # type: ignore[union-attr]
            pipe.zrangebyscore(
                keys.throttle(owner, rid, category.name, channel), f"({now - period}", "+inf", withscores=True
            )
        rows = pipe.execute()
    states = []
    for (category, channel), sends in zip(pairs, rows, strict=True):
        throttle = category.throttle
        assert throttle is not None
        times = [int(score) for _, score in sends]
        free = now
        if len(times) >= throttle.limit:
            free = max(now, times[len(times) - throttle.limit] + throttle.period_ms)
        states.append(
            ThrottleState(
                category.name, channel, len(times), throttle.limit, throttle.period_ms, throttle.over, free
            )
        )
    return states
