"""The beat scheduler (Celery's ``beat_scheduler``): RedBeat, stopping promptly when told
to during a Redis outage.

RedBeat's client waits through an outage inside each command (:func:`noti.beat.redbeat_config`),
so a beat blocked there would also hold SIGTERM until Redis came back: Celery's handler
closes the scheduler, and closing releases the lock in Redis. Here closing first tells the
client to stop waiting; a lock it cannot release is left to expire (``redbeat_lock_timeout``),
and a standby takes over then. A lock lost while beat waited (it expired, and another beat
took it) still makes the next tick raise ``LockNotOwnedError``, and beat exits for its
supervisor to restart it: it never fires alongside the new holder.
"""

from __future__ import annotations

import logging
import redis
from redbeat import RedBeatScheduler

from noti.redisconn import OutageRetry

__all__ = ["Scheduler"]

log = logging.getLogger(__name__)


class Scheduler(RedBeatScheduler):  # type: ignore[misc]
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
