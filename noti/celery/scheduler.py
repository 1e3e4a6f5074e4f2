"""Beat's scheduler: RedBeat's, which stops waiting for Redis once beat is closing.

Apart from :mod:`noti.celery.beat` (the schedule and RedBeat's settings) because importing
RedBeat connects its lock receiver to Celery's ``beat_init`` signal: only ``celery -A noti
beat`` imports this module (``beat_scheduler``), so a host project's beat in a process that
imported noti's app gets no receiver of RedBeat's (it would fail on the host's scheduler).
"""

from __future__ import annotations

import logging
from typing import Any

import redis
from redbeat import RedBeatScheduler

from noti.redis.conn import connect
from noti.redis.outage import OutageRetry
from noti.redis.urls import SentinelUrl

__all__ = ["Scheduler"]

log = logging.getLogger(__name__)


class Scheduler(RedBeatScheduler):
    """RedBeat's scheduler that gives up waiting for Redis once it is closing.

    With a ``redis+sentinel://`` URL it hands RedBeat a client of noti's
    (:func:`~noti.redis.conn.connect`, which finds the primary through the sentinels and waits
    through an outage with the ``retry`` of ``redbeat_redis_options``): RedBeat's own Sentinel
    client would drop that ``retry``, and beat would exit on the first failed lock extend.
    """

    def __init__(self, app: Any, *args: Any, **kwargs: Any) -> None:
        conf = app.conf
        options = conf.redbeat_redis_options
        if (
            str(conf.redbeat_redis_url).startswith("redis-sentinel")
            and getattr(app, "redbeat_redis", None) is None
        ):
            address = SentinelUrl(
                sentinels=tuple((str(host), int(port)) for host, port in options["sentinels"]),
                service=options["service_name"],
                db=int(options.get("db", 0)),
                username=options.get("username"),
            )
            app.redbeat_redis = connect(
                address.public(),
                retry=options.get("retry"),
                password=options.get("password"),
                sentinel_password=(options.get("sentinel_kwargs") or {}).get("password"),
            )
        super().__init__(app, *args, **kwargs)

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
