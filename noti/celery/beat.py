"""The beat schedule: which maintenance job runs how often (read by ``celery -A noti beat``).

Beat uses RedBeat: the schedule and a lock live in Redis, so a second beat process waits
as a hot standby instead of firing every job twice. Each run expires after one interval, so
a backlog of missed runs never piles up behind a stopped worker.
"""

from __future__ import annotations

from typing import Any

from noti.config import Settings

__all__ = ["beat_schedule"]


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
        "noti-events-sweep": _every("noti.events.sweep", settings.event_sweep_interval_s),
        "noti-events-clean": _every("noti.events.clean", settings.clean_interval_s),
    }
