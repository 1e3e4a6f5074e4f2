"""The beat schedule: which maintenance job runs how often (read by ``celery -A noti beat``).

Beat uses RedBeat: the schedule and a lock live in Redis, so a second beat process waits
as a hot standby instead of firing every job twice.
"""

from __future__ import annotations

from typing import Any

from noti.config import Settings

__all__ = ["beat_schedule"]


def beat_schedule(settings: Settings) -> dict[str, dict[str, Any]]:
    """Celery ``beat_schedule`` entries built from the settings' intervals."""
    return {
        "noti-clean-done": {
            "task": "noti.maintenance.clean",
            "schedule": settings.clean_interval_s,
            "options": {"expires": settings.clean_interval_s},
        },
        "noti-sweep-lost": {
            "task": "noti.maintenance.sweep_lost",
            "schedule": settings.sweep_interval_s,
            "options": {"expires": settings.sweep_interval_s},
        },
        "noti-trim-dead-letters": {
            "task": "noti.maintenance.trim_dead_letters",
            "schedule": settings.dead_letter_trim_interval_s,
            "options": {"expires": settings.dead_letter_trim_interval_s},
        },
        "noti-events-sweep": {
            "task": "noti.events.sweep",
            "schedule": settings.event_sweep_interval_s,
            "options": {"expires": settings.event_sweep_interval_s},
        },
        "noti-events-clean": {
            "task": "noti.events.clean",
            "schedule": settings.clean_interval_s,
            "options": {"expires": settings.clean_interval_s},
        },
    }
