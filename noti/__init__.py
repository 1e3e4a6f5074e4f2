"""noti: notifications (SMS, WeChat template messages, e-mail, webhooks) delivered by Celery
workers from Redis, in priority order, once, with retries.

Applications call::

    import noti
    record_id = noti.notify_sms("+8613912345678", "Your code is 1234", lv=1)

Workers run ``celery -A noti worker``; beat runs ``celery -A noti beat``.
"""

from __future__ import annotations

from noti.api import (
    cancel,
    clean,
    delete,
    get,
    list_notifications,
    notify,
    notify_email,
    notify_many,
    notify_sms,
    notify_webhook,
    notify_weixin,
    revoke,
    schedule_many,
    send,
)
from noti.errors import (
    DeliveryError,
    InvalidConfig,
    InvalidInput,
    NotFound,
    NotiError,
    PermanentFailure,
    PermissionDenied,
    RateLimited,
    RetriesExhausted,
    StoreUnavailable,
    TemporaryFailure,
)
from noti.record import Channel, Notification, Status
from noti.runtime import configure

__all__ = [
    "Channel",
    "DeliveryError",
    "InvalidConfig",
    "InvalidInput",
    "NotFound",
    "NotiError",
    "Notification",
    "PermanentFailure",
    "PermissionDenied",
    "RateLimited",
    "RetriesExhausted",
    "Status",
    "StoreUnavailable",
    "TemporaryFailure",
    "cancel",
    "clean",
    "configure",
    "delete",
    "get",
    "list_notifications",
    "notify",
    "notify_email",
    "notify_many",
    "notify_sms",
    "notify_webhook",
    "notify_weixin",
    "revoke",
    "schedule_many",
    "send",
]
