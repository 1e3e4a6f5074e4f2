"""The chat channel: a message to a group or a conversation through a chat robot or bot
(providers: DingTalk, Feishu/Lark and WeCom group robots, Slack, Telegram)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from noti.core.channel import ChannelSpec, bad_target
from noti.core.record import text_field
from noti.errors import InvalidInput
from noti.inputs import shown

__all__ = ["CHAT_FORMATS", "CHAT_TEXT_MAX", "ChatChannel"]

#: The longest text noti takes; each vendor's provider checks its own, smaller limit.
CHAT_TEXT_MAX = 20_000
CHAT_TITLE_MAX = 256
CHAT_TARGET_MAX = 256
#: ``format``: plain text, or the vendor's markdown.
CHAT_FORMATS = ("text", "markdown")


class ChatChannel(ChannelSpec):
    """Chat: the target names a conversation (1-256 characters, no white space): a robot
    configured in the provider's ``robots`` table, a Slack channel id (``C0123ABC``) or a
    Telegram chat id (``-1001234567890``, ``@channelname``). ``text`` is 1-20,000 characters,
    ``title`` one line of at most 256, ``format`` ``text`` (the default) or ``markdown``."""

    name = "chat"
    title = "chat"
    fields: ClassVar[Mapping[str, str]] = {
        "text": "noti_chat_text",
        "title": "noti_chat_title",
        "format": "noti_chat_format",
    }
    required = ("text",)
    target_help = "A conversation: a configured robot's name, a Slack channel id or a Telegram chat id"
    field_help: ClassVar[Mapping[str, str]] = {
        "text": "Chat message text",
        "title": "Chat message title (markdown messages, cards)",
        "format": "Chat message format: text or markdown",
    }
    stdin_field = "text"
    docs = "channels/chat.md"

    def check_target(self, target: str) -> str:
        if len(target) > CHAT_TARGET_MAX or any(c.isspace() for c in target):
            raise bad_target(
                "a chat target is 1-256 characters without spaces: a robot's name, a Slack "
                "channel id or a Telegram chat id"
            )
        return target

    def check_fields(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, value in fields.items():
            if name == "text":
                out[name] = text_field("chat text", value, CHAT_TEXT_MAX)
            elif name == "title":
                out[name] = text_field("chat title", value, CHAT_TITLE_MAX, one_line=True)
            elif value not in CHAT_FORMATS:
                raise InvalidInput(
                    f"chat format must be text or markdown, not {shown(value)}",
                    code="e.cmd.noti.add.badfield",
                )
            else:
                out[name] = value
        return out
