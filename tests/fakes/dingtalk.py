"""A fake DingTalk custom robot (自定义机器人): ``POST /robot/send?access_token=…``.

Checked as DingTalk does: the ``access_token`` names a robot (else ``300001 token is not
exist``); a robot with a signing secret (``SEC…``) needs ``timestamp`` (ms, within an hour of
now) and ``sign`` = base64(HMAC-SHA256(key=secret, msg="{timestamp}\\n{secret}")), as a query
parameter (URL-encoded, so parse_qs gives it back decoded), else ``310000``; a robot with
keywords needs one of them in the message, else ``310000 keywords not in content``. The body
is UTF-8 JSON with ``msgtype`` ``text`` (``text.content``) or ``markdown`` (``markdown.title``
and ``markdown.text``); another type is ``400105``. Each robot takes 20 messages a minute
(``130101 send too fast``). Answers are HTTP 200 ``{"errcode": …, "errmsg": …}``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from typing import Any

from tests.fakes._chat import ChatFake
from tests.fakes._server import Received, Reply

__all__ = ["MESSAGES", "DingTalkFake", "error_reply", "sign"]

#: DingTalk's wording of the errors the fake produces (match on errcode, never on errmsg).
MESSAGES: dict[int, str] = {
    -1: "系统繁忙",
    40035: "缺少参数 json",
    130101: "send too fast, exceed 20 times per minute",
    300001: "token is not exist",
    310000: "sign not match, more: [https://ding-doc.dingtalk.com/doc#/serverapi2/qf2nxq]",
    400013: "群已被解散",
    400101: "access_token不存在",
    400102: "机器人已停用",
    400105: "不支持的消息类型",
    400106: "机器人不存在",
    410100: "发送速度太快而限流",
    430101: "含有不安全的外链",
    430102: "含有不合适的文本",
    430103: "含有不合适的图片",
    430104: "含有不合适的内容",
    460101: "message too long",
}


def error_reply(code: int, errmsg: str | None = None) -> Reply:
    """DingTalk's answer with ``errcode`` ``code`` (HTTP 200, as DingTalk answers)."""
    return Reply(200, {"errcode": code, "errmsg": errmsg or MESSAGES.get(code, "error")})


def sign(secret: str, timestamp_ms: int) -> str:
    """The ``sign`` of a request at ``timestamp_ms`` (the fake's own code, not noti's)."""
    digest = hmac.new(secret.encode(), f"{timestamp_ms}\n{secret}".encode(), hashlib.sha256).digest()
    return base64.b64encode(digest).decode()


class DingTalkFake(ChatFake):
    """DingTalk's robot endpoint for the robots given (each named by its access token)."""

    WINDOWS = ((20, 60.0),)
    TOO_FAST = error_reply(130101)
    ACCEPTED = Reply(200, {"errcode": 0, "errmsg": "ok"})

    def verify(self, received: Received) -> Reply | None:
        if received.method != "POST" or received.path != "/robot/send":
            return Reply(404, {"errcode": 404, "errmsg": "请求的URI地址不存在"})
        query = {name: values[-1] for name, values in received.query.items()}
        robot = self.robots.get(query.get("access_token", ""))
        if robot is None:
            return self._refuse(300001)
        if robot.secret is not None:
            refusal = self._signature_refusal(robot.secret, query)
            if refusal is not None:
                return refusal
        if not received.headers.get("content-type", "").startswith("application/json"):
            return self._refuse(40035)
        body = received.json_object()
        if body is None:
            return self._refuse(40035)
        shown = _shown_text(body)
        if shown is None:
            return self._refuse(400105 if body.get("msgtype") not in ("text", "markdown") else 40035)
        if robot.keywords and not any(word in shown for word in robot.keywords):
            return self._refuse(310000, "keywords not in content")
        return None

    def _signature_refusal(self, secret: str, query: dict[str, str]) -> Reply | None:
        try:
            timestamp = int(query["timestamp"])
        except (KeyError, ValueError):
            return self._refuse(310000, "sign not match, timestamp is missing")
        if abs(time.time() * 1000 - timestamp) > 3600 * 1000:
            return self._refuse(310000, "invalid timestamp")
        if not hmac.compare_digest(query.get("sign", ""), sign(secret, timestamp)):
            return self._refuse(310000)
        return None

    def _refuse(self, code: int, errmsg: str | None = None) -> Reply:
        reply = error_reply(code, errmsg)
        return self.refuse(reply, reply.body["errmsg"])

    def conversation(self, received: Received) -> str:
        return received.query["access_token"][-1]

    def text_of(self, body: dict[str, Any]) -> str:
        return _shown_text(body) or ""


def _shown_text(body: dict[str, Any]) -> str | None:
    """What a group reads of a text or markdown message (None: not a well-formed one)."""
    msgtype = body.get("msgtype")
    if msgtype == "text":
        content = (body.get("text") or {}).get("content")
        return content if isinstance(content, str) and content else None
    if msgtype == "markdown":
        part = body.get("markdown") or {}
        title, text = part.get("title"), part.get("text")
        ok = isinstance(title, str) and title and isinstance(text, str) and text
        return f"{title}\n{text}" if ok else None
    return None
