"""noti: notifications (SMS, WeChat template messages, e-mail, webhooks) delivered by Celery
workers from Redis, in priority order, once, with retries.

Applications call::

    import noti
    record_id = noti.notify_sms("+8613912345678", "Your code is 1234", lv=1)

Workers run ``celery -A noti worker``; beat runs ``celery -A noti beat``.

``import noti`` imports nothing else: each public name is loaded from its module on first
use (:func:`__getattr__`, PEP 562), so the CLI and a host project importing ``noti`` pay
only for what they call, and nothing of Celery is imported until noti's Celery layer is.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time, __getattr__ below
    from noti.api import (
        cancel,
        clean,
        delete,
        get,
        get_notice,
        list_notifications,
        notify,
        notify_chat,
        notify_email,
        notify_many,
        notify_push,
        notify_sms,
        notify_webhook,
        notify_weixin,
        revoke,
        schedule_many,
        search,
        send,
        timeline,
    )
    from noti.core.record import Channel, Notification, Status
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
    from noti.sending.handlers import STOP, NotificationHandler
    from noti.sending.runtime import configure

#: Public name -> the module it is defined in.
_SOURCES: dict[str, str] = {
    **dict.fromkeys(
        (
            "cancel",
            "clean",
            "delete",
            "get",
            "get_notice",
            "list_notifications",
            "notify",
            "notify_chat",
            "notify_email",
            "notify_many",
            "notify_push",
            "notify_sms",
            "notify_webhook",
            "notify_weixin",
            "revoke",
            "schedule_many",
            "search",
            "send",
            "timeline",
        ),
        "noti.api",
    ),
    **dict.fromkeys(
        (
            "DeliveryError",
            "InvalidConfig",
            "InvalidInput",
            "NotFound",
            "NotiError",
            "PermanentFailure",
            "PermissionDenied",
            "RateLimited",
            "RetriesExhausted",
            "StoreUnavailable",
            "TemporaryFailure",
        ),
        "noti.errors",
    ),
    **dict.fromkeys(("Channel", "Notification", "Status"), "noti.core.record"),
    "configure": "noti.sending.runtime",
    # the base of NOTI_HANDLERS' class and its "stop retrying" answer (docs/concepts/dead-letters.md)
    **dict.fromkeys(("NotificationHandler", "STOP"), "noti.sending.handlers"),
}

__all__ = [
    "STOP",
    "Channel",
    "DeliveryError",
    "InvalidConfig",
    "InvalidInput",
    "NotFound",
    "NotiError",
    "Notification",
    "NotificationHandler",
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
    "get_notice",
    "list_notifications",
    "notify",
    "notify_chat",
    "notify_email",
    "notify_many",
    "notify_push",
    "notify_sms",
    "notify_webhook",
    "notify_weixin",
    "revoke",
    "schedule_many",
    "search",
    "send",
    "timeline",
]


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use and kept here after."""
    source = _SOURCES.get(name)
    if source is None:  # a submodule (`from noti import upkeep`) is imported by the import system
        raise AttributeError(f"module 'noti' has no attribute {name!r}")
    value = getattr(import_module(source), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
