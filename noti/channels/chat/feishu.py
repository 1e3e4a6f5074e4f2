"""Feishu / Lark custom bots (自定义机器人): a message to a group through one of the operator's bots.

One ``POST {base_url}/open-apis/bot/v2/hook/<hook_id>`` per attempt, UTF-8 JSON of at most
20 KB. A bot with signature verification gets ``timestamp`` (unix seconds, as a string) and
``sign`` = base64(HMAC-SHA256(key="{timestamp}\\n{secret}", msg=b"")) in the body; Feishu
accepts a timestamp within an hour. ``format = "text"`` is a ``text`` message, or a ``post``
(rich text) with the title as its heading when there is a title; ``"markdown"`` an
``interactive`` card with one ``markdown`` element, the title in the card's header. Lark
(the international edition) is the same API under ``https://open.larksuite.com``. Feishu
returns no message id for a bot's message, and does not deduplicate.

Options (``[providers.<name>]`` with ``kind = "feishu"``):

=======================  ============================  ======================================
option                   default                       meaning
=======================  ============================  ======================================
``robots``               (required)                    name -> ``token`` (the hook id, or the
                                                       whole webhook URL) and ``secret`` (the
                                                       signing secret, when the bot signs)
``base_url``             ``https://open.feishu.cn``    API root (Lark: open.larksuite.com)
``post_language``        ``zh_cn``                     the language key of ``post`` messages
``target_rate_per_min``  97                            per bot (Feishu: 5 a second and 100 a
``target_burst``         3                             minute: 3 + 97/60 per second, 3 + 97
                                                       per minute)
``timeout_s``            10                            seconds per request
=======================  ============================  ======================================

Classification (``code`` of the answer, through :data:`ERRORS`; an answer without one by its
HTTP status, :func:`noti.channels.chat._robots.status_error`):

===============  =====================  ==================================================
code             raised                 why
===============  =====================  ==================================================
0                (Receipt)              posted
11232            RateLimited            frequency limited: ``Retry-After`` /
                                        ``x-ogw-ratelimit-reset``, else 60 s
19001            ProviderMisconfigured  the hook id is not a bot's
19021            ProviderMisconfigured  the signature (or the clock) is wrong
19022            ProviderMisconfigured  our address is not on the bot's allow-list
19024            ProviderMisconfigured  the message lacks the bot's keywords
9499             PermanentFailure       Feishu refused this message (bad request)
other            TemporaryFailure       an unknown refusal: tried again
===============  =====================  ==================================================
"""

from __future__ import annotations

import json
import time
from typing import Any, Literal

from pydantic import Field, field_validator

from noti.channels.chat._robots import (
    BaseUrl,
    ChatOptions,
    Content,
    RobotOptions,
    RobotProvider,
    hmac_sha256_b64,
    robot_tokens,
)
from noti.errors import DeliveryError, PermanentFailure, ProviderMisconfigured, RateLimited
from noti.providers.base import Message, Receipt

__all__ = ["ERRORS", "FeishuOptions", "FeishuProvider", "sign"]

#: Feishu's limit on a request body.
BODY_MAX_BYTES = 20 * 1024
#: Room kept in the body for ``timestamp`` and ``sign`` when sizing a message at ``add``.
SIGNATURE_ROOM = 100

#: Feishu ``code`` -> outcome class.
ERRORS: dict[str, type[DeliveryError]] = {
    "9499": PermanentFailure,  # Bad Request
    "11232": RateLimited,  # frequency limited
    "19001": ProviderMisconfigured,  # param invalid: incoming webhook access token invalid
    "19021": ProviderMisconfigured,  # sign match fail or timestamp is not within one hour
    "19022": ProviderMisconfigured,  # Ip Not Allowed
    "19024": ProviderMisconfigured,  # Key Words Not Found
}

_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def sign(secret: str, timestamp_s: int) -> str:
    """Feishu's ``sign`` of a body sent at ``timestamp_s``: ``"{timestamp}\\n{secret}"`` is
    the HMAC key and the message is empty."""
    return hmac_sha256_b64(f"{timestamp_s}\n{secret}".encode(), b"")


class FeishuOptions(ChatOptions):
    base_url: BaseUrl = "https://open.feishu.cn"
    robots: dict[str, RobotOptions] = Field(min_length=1, max_length=1000)
    post_language: Literal["zh_cn", "en_us", "ja_jp"] = "zh_cn"
    target_rate_per_min: float = Field(default=97.0, ge=0, le=6000)
    target_burst: int = Field(default=3, ge=1, le=100)

    @field_validator("robots", mode="before")
    @classmethod
    def _hook_from_url(cls, value: Any) -> Any:
        """A robot's ``token`` may be given as the webhook URL Feishu shows."""
        return robot_tokens(value, _hook_id)


class FeishuProvider(RobotProvider):
    """Messages to Feishu or Lark groups through the operator's custom bots."""

    kind = "feishu"
    vendor = "Feishu"
    Options = FeishuOptions
    options: FeishuOptions

    def size_problem(self, content: Content) -> str:
        size = len(_COMPACT.encode(self._body(content)).encode()) + SIGNATURE_ROOM
        if size > BODY_MAX_BYTES:
            return f"Feishu takes at most {BODY_MAX_BYTES} bytes of request, this message makes {size}"
        return ""

    def post(self, message: Message, content: Content) -> Receipt:
        robot = self.robot(message.target)
        body = self._body(content)
        if robot.secret is not None:
            timestamp = int(time.time())
            body = {
                "timestamp": str(timestamp),
                "sign": sign(robot.secret.get_secret_value(), timestamp),
                **body,
            }
        url = f"{self.options.base_url}/open-apis/bot/v2/hook/{robot.token.get_secret_value()}"
        response = self.post_json(url, body)
        return self.coded_answer(
            message,
            response,
            ERRORS,
            code=("code", "StatusCode"),
            text=("msg", "StatusMessage"),
            wait_s=_reset_s(response),
        )

    def _body(self, content: Content) -> dict[str, Any]:
        if content.markdown:
            card: dict[str, Any] = {"elements": [{"tag": "markdown", "content": content.text}]}
            if content.title:
                card["header"] = {"title": {"tag": "plain_text", "content": content.title}}
            return {"msg_type": "interactive", "card": card}
        if not content.title:
            return {"msg_type": "text", "content": {"text": content.text}}
        rows = [[{"tag": "text", "text": line}] for line in content.text.split("\n")]
        page = {"title": content.title, "content": rows}
        return {"msg_type": "post", "content": {"post": {self.options.post_language: page}}}


def _hook_id(token: str) -> str | None:
    """The hook id of a Feishu webhook URL (None: ``token`` is no such URL)."""
    return token.rstrip("/").rsplit("/hook/", 1)[1] if "/hook/" in token else None


def _reset_s(response: Any) -> float:
    """The wait a frequency limit names (``Retry-After``, ``x-ogw-ratelimit-reset``), else 60 s."""
    for name in ("retry-after", "x-ogw-ratelimit-reset"):
        try:
            return max(0.0, float(response.headers.get(name, "")))
        except ValueError:
            continue
    return 60.0
