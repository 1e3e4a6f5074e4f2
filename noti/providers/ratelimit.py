"""Per-provider rate limits shared by all workers: a token bucket with a line in front of it.

A provider configured with ``rate_limit_per_s`` (and optionally ``rate_burst``) takes a token
before every request. The bucket lives in Redis (``noti:rate:<provider>``) and uses the Redis
server's clock, so every worker process on every host shares one limit.

When tokens are short, who gets the next one is decided by precedence, not by luck: the
senders that ask for a token stand in a line (``noti:rate:<provider>:line``), one place per
record, ordered

1. by the record's level, higher first (the level a root member gave it);
2. within a level, by the record's user: each place a user takes moves that user's clock one
   token's time ahead (start-time fair queueing, ``noti:rate:<provider>:clock``), so a user
   with many records waiting stands behind a user with few, instead of in front of them;
3. then by record id (ids sort by age to the millisecond; within one, in no set order).

A token goes to a place only when every place before it has been served: a record at place
``n`` waits ``(n + 1 - tokens) / rate`` seconds. A sender waits in line for up to
:data:`HOLD_S` a turn and :data:`MAX_IN_LINE_S` in all; a longer wait gives its place up and
the record is postponed by that wait (the delayed set, not an attempt), so one user's flood
never holds the worker's message window. A place whose sender does not ask again within its
wait and :data:`LINGER_S` (a worker that died) is forgotten. A user's clock runs at most
:data:`HORIZON_S` ahead, so a user who flooded earlier is not starved for long afterwards.

So one user flooding delays another user's notification by about one token's time (for the
other user's first waiting record), plus the time its worker takes to fetch it; a record of a
higher level waits only for the tokens of records above it.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import redis

from noti.core.keys import Keys
from noti.redis.conn import load_script
from noti.redis.outage import translate_errors

__all__ = ["HOLD_S", "HORIZON_S", "LINGER_S", "MAX_IN_LINE_S", "Place", "RateLimiter"]

#: The longest wait for a turn a sender waits through in line; a longer one gives the place up.
HOLD_S = 0.25
#: The longest a sender stays in line for one record (its last ask gives the place up if the
#: token is not there): the record is then postponed, freeing the worker's window.
MAX_IN_LINE_S = 1.0
#: How late after its expected turn a sender may ask again before its place is forgotten.
LINGER_S = 0.5
#: How far ahead of now a user's clock may run (the fair-queueing memory of a flood).
HORIZON_S = 60.0


class RateLimiter:
    """Token buckets, one per provider name, each with its line (see the module docstring)."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.redis = client
        self.keys = keys
        self._take = load_script(client, "rate_gate")

    def acquire(
        self,
        name: str,
        *,
        rate_per_s: float,
        burst: int | None = None,
        contender: str,
        level: int = 1,
        user: str = "",
        hold_s: float = HOLD_S,
    ) -> float:
        """Ask ``name``'s bucket for a token for ``contender`` (a record id) of ``level`` and
        ``user``: 0 when it was taken, else the seconds until the contender's turn. A wait
        over ``hold_s`` gives the contender's place up (ask again as a newcomer).

        Raises:
            StoreUnavailable: Redis did not answer.
        """
        size = burst if burst is not None else max(1, math.ceil(rate_per_s))
        keys = [
            self.keys.rate_bucket(name),
            self.keys.rate_line(name),
            self.keys.rate_back(name),
            self.keys.rate_clock(name),
        ]
        args: list[str | int | float] = [
            rate_per_s,
            size,
            contender,
            level,
            user,
            int(hold_s * 1000),
            int(LINGER_S * 1000),
            int(HORIZON_S * 1000),
        ]
        with translate_errors(self.redis):
            wait_ms = int(self._take(keys=keys, args=args))
        return wait_ms / 1000

    def place(
        self, name: str, *, rate_per_s: float, burst: int | None, contender: str, level: int, user: str
    ) -> Place:
        """A contender's place in ``name``'s line, to :meth:`Place.ask` from until it is done."""
        return Place(self, name, rate_per_s, burst, contender, level, user)


@dataclass(slots=True)
class Place:
    """One record's place in a provider's line: ask, wait the answer, ask again.

    The sender's loop (blocking, or on an asyncio loop) is::

        wait_s, done = place.ask()
        while not done:
            sleep(wait_s)
            wait_s, done = place.ask()
        # wait_s == 0: send now; else postpone the record by wait_s

    """

    limiter: RateLimiter
    name: str
    rate_per_s: float
    burst: int | None
    contender: str
    level: int
    user: str
    _deadline: float = field(default=0.0, init=False)

    def ask(self) -> tuple[float, bool]:
        """Ask once: ``(seconds, done)``. Done with 0 means the token was taken; done with a
        wait means the place was given up (postpone by it); not done, sleep the wait and ask
        again. The ask made once :data:`MAX_IN_LINE_S` has passed is the last one.

        Raises:
            StoreUnavailable: Redis did not answer.
        """
        now = time.monotonic()
        if not self._deadline:
            self._deadline = now + MAX_IN_LINE_S
        last = now >= self._deadline
        wait_s = self.limiter.acquire(
            self.name,
            rate_per_s=self.rate_per_s,
            burst=self.burst,
            contender=self.contender,
            level=self.level,
            user=self.user,
            hold_s=0.0 if last else HOLD_S,
        )
        return wait_s, last or wait_s <= 0 or wait_s > HOLD_S
