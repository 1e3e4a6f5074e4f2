"""The webhook channel: a JSON object POSTed, signed, to an http(s) URL."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from noti.core.channel import ChannelSpec, bad_target
from noti.core.record import HTTP_URL, URL_MAX, json_object_field

__all__ = ["WEBHOOK_CONTENT_MAX_BYTES", "WebhookChannel"]

#: A webhook's body: a JSON object of at most this many bytes encoded.
WEBHOOK_CONTENT_MAX_BYTES = 64 * 1024


class WebhookChannel(ChannelSpec):
    """Webhooks: the target is an http(s) URL of at most 2,048 characters; ``content`` a JSON
    object of at most 64 KiB."""

    name = "webhook"
    title = "webhook"
    fields: ClassVar[Mapping[str, str]] = {"content": "noti_webhook_content"}
    required = ("content",)
    json_fields = frozenset({"content"})
    target_help = "An http(s) URL"
    field_help: ClassVar[Mapping[str, str]] = {"content": "The webhook's body (a JSON object)"}
    stdin_field = "content"
    docs = "channels/webhook.md"

    def check_target(self, target: str) -> str:
        if len(target) > URL_MAX or not HTTP_URL.fullmatch(target):
            raise bad_target(f"{target!r} is not an http(s) URL")
        return target

    def check_fields(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        return {
            name: json_object_field("webhook content", value, WEBHOOK_CONTENT_MAX_BYTES)
            for name, value in fields.items()
        }
