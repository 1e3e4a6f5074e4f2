"""Telegram: a message to a chat (a group, a channel, a user) through the operator's bot.

One ``POST {base_url}/bot<token>/sendMessage`` per attempt, JSON ``chat_id``, ``text`` and,
for ``format = "markdown"``, ``parse_mode`` (``markdown_mode``: ``MarkdownV2`` by default,
whose reserved characters the text must escape as Telegram documents; ``HTML``; or the
legacy ``Markdown``). The title, when there is one, is the first line (in bold, escaped, for
markdown). A target is a chat id (digits for a user, ``-…`` for a group, ``-100…`` for a
supergroup or channel) or ``@channelusername``; the bot must be in it. The text is at most
4096 characters, counted as Telegram does in UTF-16 code units, markup included (Telegram
counts after parsing the markup, so this is the safe side). The receipt's msgid is the
message's ``message_id``. Telegram does not deduplicate.

Options (``[providers.<name>]`` with ``kind = "telegram"``):

=======================  ==============================  ====================================
option                   default                         meaning
=======================  ==============================  ====================================
``bot_token``            (required, secret)              ``123456:AA…`` from @BotFather
``base_url``             ``https://api.telegram.org``    Bot API root (a local Bot API server,
                                                         or a fake in tests)
``markdown_mode``        ``MarkdownV2``                  ``parse_mode`` of markdown records
``rate_limit_per_s``     30                              the bot's own line (Telegram: about
``rate_burst``           30                              30 messages a second in all)
``target_rate_per_min``  19                              per chat (Telegram: 20 a minute in a
``target_burst``         1                               group, one a second in a chat)
``timeout_s``            10                              seconds per request
=======================  ==============================  ====================================

Classification (``error_code`` and ``description`` of the answer; anything else by its HTTP
status, :func:`noti.channels.chat._robots.status_error`):

=========================================  =====================  ===========================
answer                                     raised                 why
=========================================  =====================  ===========================
``ok: true``                               (Receipt)              sent; msgid = message_id
429                                        RateLimited            ``parameters.retry_after``
403 blocked / kicked / deactivated /       RecipientOptedOut      the chat does not want the
not a member                                                      bot: target suppressed
other 403                                  PermanentFailure       e.g. it may not start a chat
400 not enough rights                      ProviderMisconfigured  give the bot the right
400 (chat not found, can't parse           PermanentFailure       this message or this chat;
entities, too long, upgraded group…)                              a group upgraded to a
                                                                  supergroup names its new id
401, 404                                   ProviderMisconfigured  the bot token is wrong
=========================================  =====================  ===========================
"""

from __future__ import annotations

import html
import re
from typing import Any, Literal

from pydantic import Field, SecretStr, field_validator

from noti.channels.chat._robots import (
    BaseUrl,
    ChatOptions,
    ChatProvider,
    Content,
    coded_error,
    json_or_none,
    no_code,
    status_error,
    utf16_len,
)
from noti.errors import (
    DeliveryError,
    InvalidInput,
    PermanentFailure,
    ProviderMisconfigured,
    RateLimited,
    RecipientOptedOut,
)
from noti.providers import _http
from noti.providers.base import Message, Receipt

__all__ = ["ERRORS", "TelegramOptions", "TelegramProvider", "escape_markdown_v2"]

#: Telegram's limit on a message's text (UTF-16 code units).
TEXT_MAX = 4096
#: A chat id (a user: digits; a group: -digits; a supergroup or channel: -100digits) or a
#: public channel's or supergroup's ``@username``.
CHAT = re.compile(r"^(?:-?[1-9][0-9]{0,19}|@[A-Za-z][A-Za-z0-9_]{4,31})$")
_TOKEN = re.compile(r"^[0-9]{1,20}:[A-Za-z0-9_-]{30,100}$")
_MARKDOWN_V2 = re.compile(r"([_*\[\]()~`>#+\-=|{}.!\\])")
_MARKDOWN = re.compile(r"([_*`\[])")

#: What a 403 says when the chat does not want the bot (the target is suppressed).
_GONE = ("blocked by the user", "kicked from", "user is deactivated", "not a member")

#: Telegram ``error_code`` (``403.optout`` and ``400.rights``: kinds of 403 and 400 told
#: apart by their description) -> outcome class.
ERRORS: dict[str, type[DeliveryError]] = {
    "400": PermanentFailure,  # chat not found, can't parse entities, message is too long …
    "400.rights": ProviderMisconfigured,  # not enough rights to send text messages to the chat
    "401": ProviderMisconfigured,  # Unauthorized: the bot token
    "403": PermanentFailure,  # e.g. bot can't initiate conversation with a user
    "403.optout": RecipientOptedOut,  # bot was blocked by the user / kicked from the group
    "404": ProviderMisconfigured,  # Not Found: a malformed token or base_url
    "429": RateLimited,  # Too Many Requests: retry after N
}


def escape_markdown_v2(text: str) -> str:
    """``text`` shown literally under ``parse_mode = MarkdownV2``."""
    return _MARKDOWN_V2.sub(r"\\\1", text)


class TelegramOptions(ChatOptions):
    bot_token: SecretStr
    base_url: BaseUrl = "https://api.telegram.org"
    markdown_mode: Literal["MarkdownV2", "HTML", "Markdown"] = "MarkdownV2"
    rate_limit_per_s: float | None = Field(default=30.0, gt=0)
    rate_burst: int | None = Field(default=30, ge=1)
    target_rate_per_min: float = Field(default=19.0, ge=0, le=6000)
    target_burst: int = Field(default=1, ge=1, le=100)

    @field_validator("bot_token")
    @classmethod
    def _token_shape(cls, value: SecretStr) -> SecretStr:
        if not _TOKEN.match(value.get_secret_value()):
            raise ValueError("a bot token is <bot id>:<secret>, as @BotFather gives it")
        return value

    @field_validator("robots")
    @classmethod
    def _no_robots(cls, value: dict[str, Any]) -> dict[str, Any]:
        if value:
            raise ValueError("Telegram posts as the bot of bot_token: name chats as targets, not robots")
        return value


class TelegramProvider(ChatProvider):
    """Messages to Telegram chats as the operator's bot."""

    kind = "telegram"
    vendor = "Telegram"
    Options = TelegramOptions
    options: TelegramOptions

    def check_target(self, target: str) -> None:
        if not CHAT.match(target):
            raise InvalidInput(
                f"{self.name}: a Telegram target is a chat id (12345, -1001234567890) or "
                f"@channelusername, not {target[:64]!r}",
                code="e.cmd.noti.add.badtarget",
            )

    def size_problem(self, content: Content) -> str:
        size = utf16_len(self._text(content))
        if size > TEXT_MAX:
            return (
                f"Telegram takes at most {TEXT_MAX} characters (UTF-16, markup included), "
                f"this message is {size}"
            )
        return ""

    def post(self, message: Message, content: Content) -> Receipt:
        body: dict[str, Any] = {"chat_id": _chat_id(message.target), "text": self._text(content)}
        if content.markdown:
            body["parse_mode"] = self.options.markdown_mode
        url = f"{self.options.base_url}/bot{self.options.bot_token.get_secret_value()}/sendMessage"
        response = self.post_json(url, body)
        data = json_or_none(response)
        if data is None or "ok" not in data:
            raise self.refused(message, no_code(self.name, response))
        result = data.get("result")
        if data["ok"] is True and response.is_success and isinstance(result, dict):
            message_id = result.get("message_id")
            return Receipt(
                provider=self.name,
                msgid=str(message_id) if message_id is not None else None,
                raw=f"HTTP {response.status_code} ok",
            )
        raise self.refused(message, self._error(response, data))

    def _error(self, response: Any, data: dict[str, Any]) -> DeliveryError:
        code = str(data.get("error_code") or response.status_code)
        description = str(data.get("description") or "")
        found = data.get("parameters")
        parameters: dict[str, Any] = found if isinstance(found, dict) else {}
        lowered = description.lower()
        if code == "403" and any(words in lowered for words in _GONE):
            code = "403.optout"
        elif code == "400" and ("not enough rights" in lowered or "have no rights" in lowered):
            code = "400.rights"
        elif code == "400" and parameters.get("migrate_to_chat_id"):
            description += f" (the group is now {parameters['migrate_to_chat_id']}: send to that id)"
        if code not in ERRORS:
            return status_error(self.name, response)
        retry_after = parameters.get("retry_after")
        wait_s = (
            float(retry_after) if isinstance(retry_after, int | float) else _http.retry_after_s(response, 1.0)
        )
        return coded_error(self.name, ERRORS, code, description, status=response.status_code, wait_s=wait_s)

    def _text(self, content: Content) -> str:
        if not content.title:
            return content.text
        if not content.markdown:
            return content.plain()
        mode = self.options.markdown_mode
        if mode == "MarkdownV2":
            title = f"*{escape_markdown_v2(content.title)}*"
        elif mode == "HTML":
            title = f"<b>{html.escape(content.title)}</b>"
        else:
            title = "*" + _MARKDOWN.sub(r"\\\1", content.title) + "*"
        return f"{title}\n{content.text}"


def _chat_id(target: str) -> int | str:
    """The target as ``chat_id``: a number, or the ``@username``."""
    return target if target.startswith("@") else int(target)
