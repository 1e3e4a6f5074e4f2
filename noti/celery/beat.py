"""The beat schedule: which maintenance job runs how often (read by ``celery -A noti beat``).

Beat uses RedBeat: the schedule and a lock live in Redis, so a second beat process waits
as a hot standby instead of firing every job twice. Each run expires after one interval, so
a backlog of missed runs never piles up behind a stopped worker.

RedBeat's client waits through a Redis outage (:func:`redbeat_config`): every command, the
lock's extend included, is retried forever with a back-off capped at
:data:`OUTAGE_BACKOFF_CAP_S`, and the outage and the recovery are logged once each. The
holder resumes its tick where it stopped and an overdue entry fires once; a standby keeps
waiting for the lock. :class:`noti.celery.scheduler.Scheduler` (Celery's ``beat_scheduler``,
in its own module because importing RedBeat connects a receiver to Celery's ``beat_init``
signal, which no host project's beat should get from importing noti) stops waiting when
beat is told to stop: closing first tells the client to stop waiting; a lock it cannot
release is left to expire (``redbeat_lock_timeout``), and a standby takes over then. A lock
lost while beat waited (it expired, and another beat took it) still makes the next tick
raise ``LockNotOwnedError``, and beat exits for its supervisor to restart it: it never fires
alongside the new holder.

Every job is housekeeping (:data:`HOUSEKEEPING_TASKS`), and sends no task events, so Flower
lists notifications, not the store's upkeep (``noti.maintenance.delivery_tick`` alone ran
every 2 s and filled most of its list):

- none from the worker: each task is declared with ``send_events=False``, Celery's ``Task``
  attribute, for which the worker's default strategy sends no ``task-received`` and its
  ``Request.send_event`` none of the rest (started, succeeded, failed, retried, rejected,
  revoked, expired: ``celery/worker/strategy.py``, ``celery/worker/request.py``);
- no ``task-sent`` from whoever sends one (noti sets ``task_send_sent_event`` for its app):
  Celery publishes that event through the ``event_dispatcher`` the send is given
  (``celery/app/amqp.py``, ``send_task_message``), its own otherwise, and noti's app gives
  these tasks :data:`NO_SENT_EVENT`, which publishes nothing (``NotiCelery.send_task``,
  by name: beat's sends, ``.delay()`` and ``celery -A noti call`` alike).

What a run does is still seen: the worker logs each run (Celery's ``Task … succeeded in
…s: <result>`` at INFO, a failure at ERROR with its traceback), counts it in ``celery
inspect stats`` (``total``, by task name) and lists it in ``inspect active`` while it runs;
the records a job changes are counted in ``noti:metrics`` by the scripts that change them.
"""

from __future__ import annotations

from typing import Any

import redis

from noti.config import Settings
from noti.redis.outage import Outage, OutageRetry
from noti.redis.urls import SentinelUrl, split_password

__all__ = [
    "HOUSEKEEPING_TASKS",
    "LOCK_TIMEOUT_S",
    "NO_SENT_EVENT",
    "OUTAGE_BACKOFF_CAP_S",
    "beat_schedule",
    "redbeat_config",
]


#: Longest wait between two tries of RedBeat's client while Redis is unavailable (seconds).
OUTAGE_BACKOFF_CAP_S = 2.0
#: RedBeat's lock lives this long without an extend (beat ticks at least every 5 s): how
#: soon a standby takes over from a beat that died, or that stopped during an outage.
LOCK_TIMEOUT_S = 30


#: How often beat closes due digest windows besides the workers' pump.
DIGEST_BACKSTOP_S = 30.0

#: The tasks beat sends: housekeeping, which sends no task events (see the module).
HOUSEKEEPING_TASKS = frozenset(
    {
        "noti.maintenance.clean",
        "noti.maintenance.sweep_lost",
        "noti.maintenance.trim_dead_letters",
        "noti.maintenance.delivery_tick",
        "noti.maintenance.poll_receipts",
        "noti.maintenance.digest_tick",
        "noti.events.sweep",
        "noti.events.clean",
    }
)


class _NoSentEvent:
    """Stands where Celery's event dispatcher publishes a sent task's ``task-sent`` event."""

    def publish(self, *args: Any, **kwargs: Any) -> None:
        """Publish nothing."""

    def __repr__(self) -> str:
        return "NO_SENT_EVENT"


#: The ``event_dispatcher`` a housekeeping task is sent with: no ``task-sent`` event.
NO_SENT_EVENT = _NoSentEvent()


def _every(task: str, seconds: float) -> dict[str, Any]:
    return {"task": task, "schedule": seconds, "options": {"expires": seconds}}


def beat_schedule(settings: Settings) -> dict[str, dict[str, Any]]:
    """Celery ``beat_schedule`` entries built from the settings' intervals."""
    return {
        "noti-clean-done": _every("noti.maintenance.clean", settings.clean_interval_s),
        "noti-sweep-lost": _every("noti.maintenance.sweep_lost", settings.sweep_interval_s),
        "noti-trim-dead-letters": _every(
            "noti.maintenance.trim_dead_letters", settings.dead_letter_trim_interval_s
        ),
        "noti-delivery-tick": _every("noti.maintenance.delivery_tick", settings.delivery_tick_interval_s),
        "noti-poll-receipts": _every("noti.maintenance.poll_receipts", settings.receipt_poll_interval_s),
        # the workers' pump closes digest windows every NOTI_DIGEST_TICK_INTERVAL_S: beat's
        # run is the backstop (and keeps a task a second out of Flower)
        "noti-digest-tick": _every("noti.maintenance.digest_tick", DIGEST_BACKSTOP_S),
        "noti-events-sweep": _every("noti.events.sweep", settings.event_sweep_interval_s),
        "noti-events-clean": _every("noti.events.clean", settings.clean_interval_s),
    }


def redbeat_config(redis_url: str, *, key_prefix: str) -> dict[str, Any]:
    """The ``redbeat_*`` Celery settings for the Redis at ``redis_url``.

    The password goes in ``redbeat_redis_options["password"]``, not in the URL: Celery masks
    the value of a key naming a password wherever it shows the configuration (``celery
    inspect conf``, Flower), but masks URLs only in the broker and backend settings.
    """
    sentinel_url = SentinelUrl.parse(redis_url)
    if sentinel_url is None:
        url, password = split_password(redis_url)
    else:  # RedBeat's own Sentinel settings, from which noti's Scheduler builds its client
        host, port = sentinel_url.sentinels[0]
        url, password = f"redis-sentinel://{host}:{port}/{sentinel_url.db}", sentinel_url.password
    options: dict[str, Any] = {
        # redis-py retries inside every command, the lock's EVALSHA and the pipelines
        # included (RedBeat's retry_period wraps only first-level calls: redbeat PR #314)
        "retry": OutageRetry(Outage("beat", cap_s=OUTAGE_BACKOFF_CAP_S)),
        "retry_on_error": [redis.ConnectionError, redis.TimeoutError],
        "socket_timeout": 5,
        "socket_connect_timeout": 2,
    }
    if password is not None:
        options["password"] = password
    if sentinel_url is not None:
        options.update(
            sentinels=[list(address) for address in sentinel_url.sentinels],
            service_name=sentinel_url.service,
            db=sentinel_url.db,
            sentinel_kwargs=sentinel_url.sentinel_kwargs(),  # its password masked by Celery
        )
        if sentinel_url.username is not None:
            options["username"] = sentinel_url.username
    return {
        "redbeat_redis_url": url,
        "redbeat_redis_options": options,
        "redbeat_key_prefix": key_prefix,
        "redbeat_lock_timeout": LOCK_TIMEOUT_S,
    }
