"""A fake WeCom group robot (企业微信群机器人): ``POST /cgi-bin/webhook/send?key=<key>``.

Checked as WeCom does: the ``key`` names a robot (else ``93000 invalid webhook url``); the
body is JSON with ``msgtype`` ``text`` (``text.content``, at most 2048 bytes of UTF-8) or
``markdown`` (``markdown.content``, at most 4096 bytes); another type is ``40008 invalid
message type``, empty content ``44004``, longer content ``40058``. Each robot takes 20
messages a minute (``45009 api freq out of limit``). Answers are HTTP 200 ``{"errcode": …,
"errmsg": …}``; WeCom appends a hint and the caller's address to each errmsg.
"""

from __future__ import annotations

from typing import Any

from tests.fakes._chat import ChatFake
from tests.fakes._server import Received, Reply

__all__ = ["LIMITS", "MESSAGES", "WecomFake", "error_reply"]

#: Bytes of UTF-8 content WeCom takes per message type.
LIMITS = {"text": 2048, "markdown": 4096}

MESSAGES: dict[int, str] = {
    -1: "system busy",
    40008: "invalid message type",
    40058: "content exceed max length",
    44004: "empty content",
    45009: "api freq out of limit",
    93000: "invalid webhook url",
}


def error_reply(code: int) -> Reply:
    """WeCom's answer with ``errcode`` ``code`` (HTTP 200)."""
    hint = f"{MESSAGES.get(code, 'error')}, hint: [1700000000_1_fake], from ip: 127.0.0.1"
    more = f", more info at https://open.work.weixin.qq.com/devtool/query?e={code}"
    return Reply(200, {"errcode": code, "errmsg": hint + more})


class WecomFake(ChatFake):
    """WeCom's robot endpoint for the robots given (each named by its webhook key)."""

    WINDOWS = ((20, 60.0),)
    TOO_FAST = error_reply(45009)
    ACCEPTED = Reply(200, {"errcode": 0, "errmsg": "ok"})

    def verify(self, received: Received) -> Reply | None:
        if received.method != "POST" or received.path != "/cgi-bin/webhook/send":
            return Reply(404, "")
        if received.query.get("key", [""])[-1] not in self.robots:
            return self._refuse(93000)
        body = received.json_object() or {}
        kind = body.get("msgtype")
        if kind not in LIMITS:
            return self._refuse(40008)
        content = (body.get(kind) or {}).get("content")
        if not isinstance(content, str) or not content:
            return self._refuse(44004)
        if len(content.encode()) > LIMITS[kind]:
            return self._refuse(40058)
        return None

    def _refuse(self, code: int) -> Reply:
        return self.refuse(error_reply(code), MESSAGES[code])

    def conversation(self, received: Received) -> str:
        return received.query["key"][-1]

    def text_of(self, body: dict[str, Any]) -> str:
        return str((body.get(body.get("msgtype", "")) or {}).get("content", ""))
