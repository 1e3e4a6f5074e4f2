"""A fake Feishu / Lark custom bot (自定义机器人): ``POST /open-apis/bot/v2/hook/<hook_id>``.

Checked as Feishu does: the hook id names a bot (else ``19001 param invalid: incoming webhook
access token invalid``); a bot with signature verification needs ``timestamp`` (unix seconds,
within an hour of now) and ``sign`` = base64(HMAC-SHA256(key="{timestamp}\\n{secret}",
msg=b"")) in the JSON body (else ``19021 sign match fail or timestamp is not within one hour
from current time``); a bot with keywords needs one in the message (``19024 Key Words Not
Found``); a bot with an IP allow-list refuses others (``19022 Ip Not Allowed``, switched on
with :attr:`FeishuFake.ip_denied`). The body is at most 20 KB of JSON with ``msg_type``
``text`` (``content.text``), ``post`` (``content.post.<lang>.title/content``) or
``interactive`` (``card``); anything else is ``9499 Bad Request``. Each bot takes 5 messages
a second and 100 a minute (``11232 frequency limited``). Answers are HTTP 200 with ``code``
and ``msg`` (and the old ``StatusCode`` / ``StatusMessage`` on success).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import time
from typing import Any

from tests.fakes._chat import ChatFake
from tests.fakes._server import Received, Reply

__all__ = ["BODY_MAX", "MESSAGES", "FeishuFake", "error_reply", "sign"]

#: Feishu's limit on a request body.
BODY_MAX = 20 * 1024

MESSAGES: dict[int, str] = {
    9499: "Bad Request",
    11232: "frequency limited psm[lark.oapi.app_platform_runtime]appID[1]",
    19001: "param invalid: incoming webhook access token invalid",
    19021: "sign match fail or timestamp is not within one hour from current time",
    19022: "Ip Not Allowed",
    19024: "Key Words Not Found",
}

_PATH = re.compile(r"^/open-apis/bot/v2/hook/(?P<hook>[^/]+)$")


def error_reply(code: int) -> Reply:
    """Feishu's answer with ``code`` (HTTP 200, ``data`` empty)."""
    return Reply(200, {"code": code, "data": {}, "msg": MESSAGES.get(code, "error")})


def sign(secret: str, timestamp_s: int) -> str:
    """The ``sign`` of a body at ``timestamp_s`` (the fake's own code, not noti's): the
    string ``"{timestamp}\\n{secret}"`` is the HMAC key, the message is empty."""
    digest = hmac.new(f"{timestamp_s}\n{secret}".encode(), b"", hashlib.sha256).digest()
    return base64.b64encode(digest).decode()


class FeishuFake(ChatFake):
    """Feishu's bot hook endpoint for the bots given (each named by its hook id)."""

    WINDOWS = ((5, 1.0), (100, 60.0))
    TOO_FAST = error_reply(11232)
    ACCEPTED = Reply(
        200, {"StatusCode": 0, "StatusMessage": "success", "code": 0, "data": {}, "msg": "success"}
    )

    #: The caller's address is not on the bots' allow-lists.
    ip_denied = False

    def reset(self) -> None:
        super().reset()
        self.ip_denied = False

    def verify(self, received: Received) -> Reply | None:
        match = _PATH.match(received.path)
        if received.method != "POST" or match is None:
            return Reply(404, "404 page not found")
        bot = self.robots.get(match["hook"])
        if bot is None:
            return self._refuse(19001)
        if len(received.body) > BODY_MAX:
            return self._refuse(9499)
        body = received.json_object()
        if body is None:
            return self._refuse(9499)
        if bot.secret is not None:
            try:
                timestamp = int(body.get("timestamp", ""))
            except (TypeError, ValueError):
                return self._refuse(19021)
            fresh = abs(time.time() - timestamp) <= 3600
            if not fresh or not hmac.compare_digest(str(body.get("sign", "")), sign(bot.secret, timestamp)):
                return self._refuse(19021)
        if self.ip_denied:
            return self._refuse(19022)
        shown = _shown_text(body)
        if shown is None:
            return self._refuse(9499)
        if bot.keywords and not any(word in shown for word in bot.keywords):
            return self._refuse(19024)
        return None

    def _refuse(self, code: int) -> Reply:
        return self.refuse(error_reply(code), MESSAGES[code])

    def conversation(self, received: Received) -> str:
        match = _PATH.match(received.path)
        assert match is not None
        return match["hook"]

    def text_of(self, body: dict[str, Any]) -> str:
        return _shown_text(body) or ""


def _shown_text(body: dict[str, Any]) -> str | None:
    """What a group reads of a text, post or interactive message (None: not well formed)."""
    kind, content = body.get("msg_type"), body.get("content")
    if kind == "text" and isinstance(content, dict):
        text = content.get("text")
        return text if isinstance(text, str) and text else None
    if kind == "post" and isinstance(content, dict) and isinstance(content.get("post"), dict):
        for page in content["post"].values():
            if not isinstance(page, dict) or not isinstance(page.get("content"), list):
                return None
            lines = [
                "".join(str(e.get("text", "")) for e in row if isinstance(e, dict))
                for row in page["content"]
                if isinstance(row, list)
            ]
            return "\n".join([str(page.get("title", "")), *lines]).strip() or None
        return None
    if kind == "interactive" and isinstance(body.get("card"), dict):
        card = body["card"]
        header = ((card.get("header") or {}).get("title") or {}).get("content", "")
        parts = [str(e.get("content", "")) for e in card.get("elements", []) if isinstance(e, dict)]
        return "\n".join([header, *parts]).strip() or None
    return None
