"""A fake Telegram Bot API: ``POST /bot<token>/sendMessage``.

Checked as the Bot API does: the token in the path is the bot's (another well-formed token:
401 ``Unauthorized``; a malformed one: 404 ``Not Found``); the body is JSON with
``chat_id`` (an integer id, or ``@channelusername``) and ``text`` (1-4096 characters,
counted in UTF-16 code units), ``parse_mode`` one of ``MarkdownV2``, ``HTML``, ``Markdown``
(MarkdownV2's reserved characters ``.!-=+#|{}`` must be escaped: "can't parse entities").
An unknown chat is 400 ``chat not found``; a user who blocked the bot 403 ``bot was blocked by
the user``; a group that removed it 403 ``bot was kicked from the group chat``. Each chat
takes 20 messages a minute (429 ``Too Many Requests: retry after N`` with
``parameters.retry_after``). Every answer is ``{"ok": …}`` with ``result`` or ``error_code``
and ``description``, the HTTP status being the error code.
"""

from __future__ import annotations

import math
import re
import time
from typing import Any

from tests.fakes._chat import ChatFake
from tests.fakes._server import Received, Reply

__all__ = ["BOT_TOKEN", "TelegramFake", "error_reply"]

BOT_TOKEN = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"
_PATH = re.compile(r"^/bot(?P<token>[^/]*)/(?P<method>[A-Za-z]+)$")
_TOKEN = re.compile(r"^[0-9]+:[A-Za-z0-9_-]{30,}$")
_MARKDOWN_V2_RESERVED = re.compile(r"(?<!\\)[.!\-=+#|{}]")


def error_reply(code: int, description: str, *, retry_after: int | None = None) -> Reply:
    """The Bot API's refusal (HTTP status = ``code``)."""
    body: dict[str, Any] = {"ok": False, "error_code": code, "description": description}
    if retry_after is not None:
        body["parameters"] = {"retry_after": retry_after}
    return Reply(code, body)


def too_many(retry_after: int) -> Reply:
    return error_reply(429, f"Too Many Requests: retry after {retry_after}", retry_after=retry_after)


class TelegramFake(ChatFake):
    """One bot, member of ``chats`` (ids or ``@usernames``); ``blocked`` users blocked it,
    ``kicked`` groups removed it."""

    WINDOWS = ((20, 60.0),)

    def __init__(
        self,
        *,
        chats: tuple[str, ...] = (),
        blocked: tuple[str, ...] = (),
        kicked: tuple[str, ...] = (),
        token: str = BOT_TOKEN,
    ) -> None:
        super().__init__()
        self.chats = set(chats)
        self.blocked = set(blocked)
        self.kicked = set(kicked)
        self.token = token
        self._message_id = 0

    def verify(self, received: Received) -> Reply | None:
        match = _PATH.match(received.path)
        if match is None or not _TOKEN.match(match["token"]):
            return self._refuse(error_reply(404, "Not Found"))
        if match["token"] != self.token:
            return self._refuse(error_reply(401, "Unauthorized"))
        if match["method"] != "sendMessage":
            return self._refuse(error_reply(404, "Not Found: method not found"))
        body = received.json_object()
        if body is None:
            return self._refuse(error_reply(400, "Bad Request: message text is empty"))
        chat = str(body.get("chat_id", ""))
        if chat in self.blocked:
            return self._refuse(error_reply(403, "Forbidden: bot was blocked by the user"))
        if chat in self.kicked:
            return self._refuse(error_reply(403, "Forbidden: bot was kicked from the group chat"))
        if chat not in self.chats:
            return self._refuse(error_reply(400, "Bad Request: chat not found"))
        text = body.get("text")
        if not isinstance(text, str) or not text.strip():
            return self._refuse(error_reply(400, "Bad Request: message text is empty"))
        mode = body.get("parse_mode")
        if mode not in (None, "MarkdownV2", "HTML", "Markdown"):
            return self._refuse(error_reply(400, f"Bad Request: unsupported parse_mode {mode}"))
        if mode == "MarkdownV2":
            reserved = _MARKDOWN_V2_RESERVED.search(text)
            if reserved is not None:
                return self._refuse(
                    error_reply(
                        400,
                        "Bad Request: can't parse entities: Character "
                        f"'{reserved.group()}' is reserved and must be escaped with the preceding '\\'",
                    )
                )
        if len(text.encode("utf-16-le")) // 2 > 4096:
            return self._refuse(error_reply(400, "Bad Request: message is too long"))
        return None

    def _refuse(self, reply: Reply) -> Reply:
        return self.refuse(reply, reply.body["description"])

    def conversation(self, received: Received) -> str:
        return str(received.json()["chat_id"])

    def too_fast(self, wait_s: float) -> Reply:
        return too_many(max(1, math.ceil(wait_s)))

    def new_msgid(self, conversation: str) -> str:
        with self._lock:
            self._message_id += 1
            return str(self._message_id)

    def accepted(self, conversation: str, body: dict[str, Any], msgid: str) -> Reply:
        chat_type = "private" if conversation.isdigit() else "supergroup"
        result = {
            "message_id": int(msgid),
            "date": int(time.time()),
            "chat": {"id": conversation, "type": chat_type},
            "text": body["text"],
        }
        return Reply(200, {"ok": True, "result": result})

    def text_of(self, body: dict[str, Any]) -> str:
        return str(body.get("text", ""))
