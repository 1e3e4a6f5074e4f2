"""A built-in consumer that turns webman messages into noti notifications.

A PHP application sends a notification with the plugin's own producer, to the queue of the
PHP class this consumer is registered for (``php_class``; register it with
``options = { php_class = "app\\\\queue\\\\Notify" }``), for example::

    Notify::createQueueProducer()->pushMessage([
        'type' => 'sms', 'to' => '+8613912345678', 'text' => 'Your code is 4321', 'lv' => 5,
    ]);

``data`` must be an object with:

==================  ========  ==============================================================
key                 required  meaning
==================  ========  ==============================================================
``type``            yes       ``sms``, ``weixin``, ``email`` or ``webhook``
``to``              yes       the target: phone number, openid, e-mail address or URL
``lv``              no        priority level (int or numeric string, default 1; capped by
                              the acting user's role)
the channel's keys  per type  ``text`` (sms); ``subject``, ``text``, ``html`` (email);
                              ``tmpl``, ``pnb``, ``content``, ``url`` (weixin); ``content``
                              (webhook); ``provider``, ``retry_max``, ``idempotency_key`` …:
                              whatever :func:`noti.notify` accepts
==================  ========  ==============================================================

The acting user is ``[webman] notify_user`` (default ``NOTI_USER``); a ``user`` key is
refused. A message of another shape, or one :func:`noti.notify` refuses (``InvalidInput``, or
``PermissionDenied``: a provider the user may not name), is
dead-lettered at once with the reason and acked: retrying cannot fix it. Anything else that
fails (Redis down …) is retried with the plugin's back-off.
"""

from __future__ import annotations

from typing import Any, ClassVar

from noti.bridge.webman.codec import Reason
from noti.bridge.webman.consumer import Consumer, ConsumerMessage
from noti.celery.process import process_notifier
from noti.core.door import through
from noti.errors import InvalidInput, MalformedMessage, PermissionDenied
from noti.sending.runtime import get_runtime

__all__ = ["NotificationConsumer", "NotificationRequest"]

_REQUIRED = ("type", "to")


class NotificationRequest:
    """The ``data`` of a notification message, checked."""

    def __init__(self, type_: str, target: str, level: object, fields: dict[str, Any]) -> None:
        self.type = type_
        self.target = target
        self.level = level
        self.fields = fields

    @classmethod
    def from_data(cls, data: Any) -> NotificationRequest:
        """Read a message's ``data``.

        Raises:
            MalformedMessage: not an object, a required key missing or not a string, a ``user`` key.
        """
        if not isinstance(data, dict):
            raise MalformedMessage(
                f"notification data must be an object, got {type(data).__name__}",
                reason=Reason.BAD_FIELD_TYPE,
            )
        for key in _REQUIRED:
            if not isinstance(data.get(key), str) or not data[key]:
                raise MalformedMessage(
                    f"notification data needs a non-empty string {key!r}", reason=Reason.MISSING_KEY
                )
        if "user" in data:
            raise MalformedMessage(
                "notification data may not choose the acting user ('user')", reason=Reason.BAD_FIELD_TYPE
            )
        fields = {k: v for k, v in data.items() if k not in ("type", "to", "lv")}
        return cls(data["type"], data["to"], data.get("lv", 1), fields)


class NotificationConsumer(Consumer):
    """Creates one noti notification per webman message."""

    php_class = "app\\queue\\Notification"
    #: Acting user of the notifications; None = ``[webman] notify_user``, else ``NOTI_USER``.
    notify_user: str | None = None

    SETTINGS: ClassVar[frozenset[str]] = Consumer.SETTINGS | {"notify_user"}

    def consume(self, message: ConsumerMessage) -> None:
        """Validate and create the notification; dead-letter what can never be created."""
        try:
            request = NotificationRequest.from_data(message.data)
            user = self.notify_user or get_runtime().settings.webman.notify_user
            with through("webman"):
                process_notifier().notify(
                    request.type, request.target, lv=request.level, user=user, **request.fields
                )
        except (MalformedMessage, InvalidInput, PermissionDenied) as exc:
            message.disable_fail_retry()
            self.handle_dead_letter(message.id, message, exc)
