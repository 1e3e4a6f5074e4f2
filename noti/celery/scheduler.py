"""Beat's scheduler: RedBeat's, which stops waiting for Redis once beat is closing.

Apart from :mod:`noti.celery.beat` (the schedule and RedBeat's settings) because importing
RedBeat connects its lock receiver to Celery's ``beat_init`` signal: only ``celery -A noti
beat`` imports this module (``beat_scheduler``), so a host project's beat in a process that
imported noti's app gets no receiver of RedBeat's (it would fail on the host's scheduler).
"""

from __future__ import annotations

import logging

import redis
from redbeat import RedBeatScheduler

from noti.redisconn import OutageRetry

__all__ = ["Scheduler"]

log = logging.getLogger(__name__)


class Scheduler(RedBeatScheduler):
    """RedBeat's scheduler that gives up waiting for Redis once it is closing."""

    def close(self) -> None:
        retry = self.app.conf.redbeat_redis_options.get("retry")
        if isinstance(retry, OutageRetry):
            retry.outage.give_up()
        try:
            super().close()
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            self.lock = None
            log.warning(
                "beat: Redis unavailable while stopping (%s); the beat lock was not released "
                "and expires within %d s",
                exc,
                self.lock_timeout,
            )
            super().close()  # the rest of Celery's close, lock-free now
