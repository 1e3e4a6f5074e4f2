"""WeCom group robots (企业微信群机器人): a message to a group through one of the operator's robots.

One ``POST {base_url}/cgi-bin/webhook/send?key=<key>`` per attempt, UTF-8 JSON. WeCom robots
are not signed: the key is the credential. ``format = "text"`` is a ``text`` message (the
title on the first line; at most 2048 bytes of UTF-8); ``"markdown"`` a ``markdown`` message,
the title as a heading (at most 4096 bytes). WeCom returns no message id and does not
deduplicate.

Options (``[providers.<name>]`` with ``kind = "wecom"``):

=======================  ================================  ==================================
option                   default                           meaning
=======================  ================================  ==================================
``robots``               (required)                        name -> ``token`` (the webhook's
                                                           ``key``, or its whole URL); no
                                                           ``secret``
``base_url``             ``https://qyapi.weixin.qq.com``   API root (tests point it at a fake)
``target_rate_per_min``  19                                per robot (WeCom: 20 a minute)
``target_burst``         1
``timeout_s``            10                                seconds per request
=======================  ================================  ==================================

Classification (``errcode`` of the answer, through :data:`ERRORS`; an answer without one by
its HTTP status, :func:`noti.channels.chat._robots.status_error`):

=================  =====================  ===============================================
errcode            raised                 why
=================  =====================  ===============================================
0                  (Receipt)              posted
45009              RateLimited            api freq out of limit: waits a minute
93000              ProviderMisconfigured  invalid webhook url: the key is no robot's
40008, 44004,      PermanentFailure       this message: its type, empty, too long
40058
-1                 TemporaryFailure       WeCom is busy
other              TemporaryFailure       an unknown refusal: tried again
=================  =====================  ===============================================
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from noti.channels.chat._robots import (
    BaseUrl,
    ChatOptions,
    Content,
    RobotOptions,
    RobotProvider,
    query_token,
    robot_tokens,
)
from noti.errors import DeliveryError, PermanentFailure, ProviderMisconfigured, RateLimited, TemporaryFailure
from noti.providers.base import Message, Receipt

__all__ = ["ERRORS", "LIMITS", "WecomOptions", "WecomProvider"]

#: Bytes of UTF-8 content WeCom takes per message type.
LIMITS = {"text": 2048, "markdown": 4096}

#: WeCom ``errcode`` -> outcome class.
ERRORS: dict[str, type[DeliveryError]] = {
    "-1": TemporaryFailure,  # system busy
    "40008": PermanentFailure,  # invalid message type
    "40058": PermanentFailure,  # a parameter is invalid (content too long)
    "44004": PermanentFailure,  # empty content
    "45009": RateLimited,  # api freq out of limit (20 a minute per robot)
    "93000": ProviderMisconfigured,  # invalid webhook url
}


class WecomOptions(ChatOptions):
    base_url: BaseUrl = "https://qyapi.weixin.qq.com"
    robots: dict[str, RobotOptions] = Field(min_length=1, max_length=1000)
    target_rate_per_min: float = Field(default=19.0, ge=0, le=6000)
    target_burst: int = Field(default=1, ge=1, le=100)

    @field_validator("robots", mode="before")
    @classmethod
    def _key_from_url(cls, value: Any) -> Any:
        """A robot's ``token`` may be given as the webhook URL WeCom shows."""
        return robot_tokens(value, query_token("key"))

    @field_validator("robots")
    @classmethod
    def _unsigned(cls, value: dict[str, RobotOptions]) -> dict[str, RobotOptions]:
        for name, robot in value.items():
            if robot.secret is not None:
                raise ValueError(f"robot {name!r}: WeCom robots are not signed: remove its secret")
        return value


class WecomProvider(RobotProvider):
    """Messages to WeCom groups through the operator's group robots."""

    kind = "wecom"
    vendor = "WeCom"
    Options = WecomOptions
    options: WecomOptions

    def size_problem(self, content: Content) -> str:
        kind, shown = self._shown(content)
        size = len(shown.encode())
        if size > LIMITS[kind]:
            hint = " (markdown takes 4096)" if kind == "text" else ""
            return f"WeCom takes at most {LIMITS[kind]} bytes of UTF-8 {kind}{hint}, this message is {size}"
        return ""

    def post(self, message: Message, content: Content) -> Receipt:
        robot = self.robot(message.target)
        kind, shown = self._shown(content)
        params = {"key": robot.token.get_secret_value()}
        response = self.post_json(
            f"{self.options.base_url}/cgi-bin/webhook/send",
            {"msgtype": kind, kind: {"content": shown}},
            params=params,
        )
        return self.coded_answer(message, response, ERRORS, code=("errcode",), text=("errmsg",), wait_s=60.0)

    @staticmethod
    def _shown(content: Content) -> tuple[str, str]:
        if not content.markdown:
            return "text", content.plain()
        return "markdown", f"### {content.title}\n{content.text}" if content.title else content.text
