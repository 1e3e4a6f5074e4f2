"""Celery tasks. Applications may call ``noti.tasks.notify.delay(type=…, target=…, …)``."""

from noti.tasks.deliver import deliver
from noti.tasks.intake import notify
from noti.tasks.maintenance import clean

__all__ = ["clean", "deliver", "notify"]
