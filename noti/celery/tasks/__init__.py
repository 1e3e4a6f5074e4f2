"""Celery tasks. Applications may call ``noti.tasks.notify.delay(type=…, target=…, …)``."""

from noti.celery.tasks.deliver import deliver
from noti.celery.tasks.intake import notify
from noti.celery.tasks.maintenance import clean

__all__ = ["clean", "deliver", "notify"]
