"""The tasks applications call by name: ``noti.tasks.notify.delay(type="sms", target=…, text=…)``.

They live in :mod:`noti.celery.tasks` with the rest of the Celery layer; this module is their
public address.
"""

from noti.celery.tasks.intake import notify

__all__ = ["notify"]
