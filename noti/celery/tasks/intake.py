"""``noti.notify``: create a notification from a task message.

For applications that only know the task name::

    celery_app.send_task("noti.notify", queue="noti.intake",
                         kwargs={"type": "sms", "target": "+8613912345678", "text": "hi"})
"""

from __future__ import annotations

from typing import Any

from celery import Task

from noti.celery.app import app

__all__ = ["notify"]


@app.task(name="noti.notify", bind=True, acks_late=True)
def notify(
    self: Task,
    type: str,  # noqa: A002
    target: str,
    lv: int = 1,
    user: str | None = None,
    **fields: Any,
) -> str:
    """Validate, store and queue one notification; the new record id.

    The task id is the notification's idempotency key (unless the caller gives one), so a
    message redelivered after a worker crash creates nothing twice. Bad input fails the task
    with :class:`~noti.errors.InvalidInput` (nothing is stored).
    """
    from noti.api import notify as api_notify

    if fields.get("identifier") is None:
        fields.setdefault("idempotency_key", f"task:{self.request.id}")
    return api_notify(type, target, lv=lv, user=user, **fields)
