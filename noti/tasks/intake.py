"""``noti.notify``: create a notification from a task message.

For applications that only know the task name::

    celery_app.send_task("noti.notify", queue="noti.intake",
                         kwargs={"type": "sms", "target": "+8613912345678", "text": "hi"})
"""

from __future__ import annotations

from typing import Any

from noti.app import app

__all__ = ["notify"]


@app.task(name="noti.notify", acks_late=True)
def notify(type: str, target: str, lv: int = 1, user: str | None = None, **fields: Any) -> str:  # noqa: A002
    """Validate, store and queue one notification; the new record id.

    Bad input fails the task with :class:`~noti.errors.InvalidInput` (nothing is stored).
    """
    from noti.api import notify as api_notify

    return api_notify(type, target, lv=lv, user=user, **fields)
