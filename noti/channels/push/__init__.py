"""The mobile push channel: a notification to one app install's device token (providers:
Firebase Cloud Messaging HTTP v1, Apple Push Notification service)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar

from noti.core.channel import ChannelSpec, bad_target
from noti.core.record import json_object_field, name_field, text_field

__all__ = ["PUSH_BODY_MAX", "PUSH_DATA_MAX_BYTES", "PushChannel"]

PUSH_TITLE_MAX = 256
PUSH_BODY_MAX = 4000
#: A push's data: a JSON object of at most this many bytes encoded (both vendors cap the
#: whole payload at 4 KiB; each provider checks its own total).
PUSH_DATA_MAX_BYTES = 4096
PUSH_COLLAPSE_MAX = 64
#: A device token: an FCM registration token (letters, digits, ``:``, ``_``, ``-``) or an
#: APNs token (hex).
_TOKEN = re.compile(r"[A-Za-z0-9_:.\-]{1,4096}")


class PushChannel(ChannelSpec):
    """Mobile push: the target is a device token (1-4,096 characters of letters, digits and
    ``_ : . -``); ``body`` is 1-4,000 characters, ``title`` one line of at most 256, ``data``
    a JSON object of at most 4 KiB, ``collapse`` a collapse key of at most 64 characters
    without spaces (a newer push with the same key replaces an undelivered older one)."""

    name = "push"
    title = "mobile push"
    fields: ClassVar[Mapping[str, str]] = {
        "title": "noti_push_title",
        "body": "noti_push_body",
        "data": "noti_push_data",
        "collapse": "noti_push_collapse",
    }
    required = ("body",)
    json_fields = frozenset({"data"})
    target_help = "A device token (an FCM registration token or an APNs device token)"
    field_help: ClassVar[Mapping[str, str]] = {
        "title": "Push title (one line)",
        "body": "Push body",
        "data": "Push data for the app (a JSON object)",
        "collapse": "Push collapse key: a newer push with the same key replaces an undelivered one",
    }
    stdin_field = "body"
    docs = "channels/push.md"

    def check_target(self, target: str) -> str:
        if not _TOKEN.fullmatch(target):
            raise bad_target(
                "a device token is 1-4,096 characters of letters, digits and _ : . - "
                "(an FCM registration token or an APNs device token)"
            )
        return target

    def check_fields(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, value in fields.items():
            if name == "title":
                out[name] = text_field("push title", value, PUSH_TITLE_MAX, one_line=True)
            elif name == "body":
                out[name] = text_field("push body", value, PUSH_BODY_MAX)
            elif name == "data":
                out[name] = json_object_field("push data", value, PUSH_DATA_MAX_BYTES)
            else:
                out[name] = name_field("push collapse key", value, PUSH_COLLAPSE_MAX)
        return out
