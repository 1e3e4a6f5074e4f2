"""DingTalk custom robots (自定义机器人): a message to a group through one of the operator's robots.

One ``POST {base_url}/robot/send?access_token=…`` per attempt, UTF-8 JSON. A robot with the
"sign" security setting adds ``timestamp`` (ms) and ``sign`` = base64(HMAC-SHA256(key=secret,
msg="{timestamp}\\n{secret}")), URL-encoded; DingTalk accepts a timestamp within an hour.
``format = "text"`` is a ``text`` message (the title on the first line); ``"markdown"`` a
``markdown`` message whose ``title`` (the preview in the chat list) is the title or the text's
first line, the title also heading the text. At most :data:`TEXT_MAX_BYTES` of UTF-8.
DingTalk returns no message id; it does not deduplicate (a send in doubt is sent again).

Options (``[providers.<name>]`` with ``kind = "dingtalk"``):

=======================  ==============================  ====================================
option                   default                         meaning
=======================  ==============================  ====================================
``robots``               (required)                      name -> ``token`` (the webhook's
                                                         ``access_token``, or its whole URL)
                                                         and ``secret`` (``SEC…``, when the
                                                         robot signs)
``base_url``             ``https://oapi.dingtalk.com``   API root (tests point it at a fake)
``target_rate_per_min``  19                              per robot (DingTalk: 20 a minute,
                                                         then 10 minutes' ban)
``target_burst``         1
``timeout_s``            10                              seconds per request
=======================  ==============================  ====================================

Classification (``errcode`` of the HTTP 200 answer, through :data:`ERRORS`; an answer without
one by its HTTP status, :func:`noti.channels.chat._robots.status_error`):

=================================  =====================  ===================================
errcode                            raised                 why
=================================  =====================  ===================================
0                                  (Receipt)              posted
130101, 410100                     RateLimited            too fast: waits 10 minutes
310000                             ProviderMisconfigured  sign, keyword or IP check failed
300001, 400101, 400102, 400106,    ProviderMisconfigured  the robot's token, the robot or its
400013                                                    group is gone or stopped
400105, 430101-430104, 460101,     PermanentFailure       this message: its type, its content,
40035                                                     its length
-1                                 TemporaryFailure       DingTalk is busy
other                              TemporaryFailure       an unknown refusal: tried again
=================================  =====================  ===================================
"""

from __future__ import annotations

import time
from typing import Any

from pydantic import Field, field_validator

from noti.channels.chat._robots import (
    BaseUrl,
    ChatOptions,
    Content,
    RobotOptions,
    RobotProvider,
    hmac_sha256_b64,
    query_token,
    robot_tokens,
)
from noti.errors import DeliveryError, PermanentFailure, ProviderMisconfigured, RateLimited, TemporaryFailure
from noti.providers.base import Message, Receipt

__all__ = ["ERRORS", "DingTalkOptions", "DingTalkProvider", "sign"]

#: Most bytes of UTF-8 a message's text (with its title) may take.
TEXT_MAX_BYTES = 20_000
#: Most characters of a markdown message's preview title.
TITLE_MAX = 64
#: DingTalk bans a robot that went over 20 a minute for 10 minutes.
BANNED_S = 600.0

#: DingTalk ``errcode`` -> outcome class.
ERRORS: dict[str, type[DeliveryError]] = {
    "-1": TemporaryFailure,  # system busy
    "40035": PermanentFailure,  # a parameter is missing: the body
    "130101": RateLimited,  # send too fast, exceed 20 times per minute
    "300001": ProviderMisconfigured,  # token is not exist
    "310000": ProviderMisconfigured,  # sign not match / keywords not in content / IP not allowed
    "400013": ProviderMisconfigured,  # the group was dissolved
    "400101": ProviderMisconfigured,  # access_token does not exist
    "400102": ProviderMisconfigured,  # the robot is stopped
    "400105": PermanentFailure,  # unsupported message type
    "400106": ProviderMisconfigured,  # the robot does not exist
    "410100": RateLimited,  # sending too fast, throttled
    "430101": PermanentFailure,  # an unsafe link
    "430102": PermanentFailure,  # unsuitable text
    "430103": PermanentFailure,  # an unsuitable image
    "430104": PermanentFailure,  # unsuitable content
    "460101": PermanentFailure,  # the message is too long
}


def sign(secret: str, timestamp_ms: int) -> str:
    """DingTalk's ``sign`` of a request made at ``timestamp_ms`` (before URL-encoding)."""
    return hmac_sha256_b64(secret.encode(), f"{timestamp_ms}\n{secret}".encode())


class DingTalkOptions(ChatOptions):
    base_url: BaseUrl = "https://oapi.dingtalk.com"
    robots: dict[str, RobotOptions] = Field(min_length=1, max_length=1000)
    target_rate_per_min: float = Field(default=19.0, ge=0, le=6000)
    target_burst: int = Field(default=1, ge=1, le=100)

    @field_validator("robots", mode="before")
    @classmethod
    def _token_from_url(cls, value: Any) -> Any:
        """A robot's ``token`` may be given as the webhook URL DingTalk shows."""
        return robot_tokens(value, query_token("access_token"))


class DingTalkProvider(RobotProvider):
    """Messages to DingTalk groups through the operator's custom robots."""

    kind = "dingtalk"
    vendor = "DingTalk"
    Options = DingTalkOptions
    options: DingTalkOptions

    def size_problem(self, content: Content) -> str:
        size = len(self._shown(content).encode())
        if size > TEXT_MAX_BYTES:
            return f"DingTalk takes at most {TEXT_MAX_BYTES} bytes of UTF-8 text, this message is {size}"
        return ""

    def post(self, message: Message, content: Content) -> Receipt:
        robot = self.robot(message.target)
        params = {"access_token": robot.token.get_secret_value()}
        if robot.secret is not None:
            timestamp = int(time.time() * 1000)
            params["timestamp"] = str(timestamp)
            params["sign"] = sign(robot.secret.get_secret_value(), timestamp)
        response = self.post_json(f"{self.options.base_url}/robot/send", self._body(content), params=params)
        return self.coded_answer(
            message, response, ERRORS, code=("errcode",), text=("errmsg",), wait_s=BANNED_S
        )

    def _shown(self, content: Content) -> str:
        return self._body(content)["markdown"]["text"] if content.markdown else content.plain()

    def _body(self, content: Content) -> dict[str, Any]:
        if not content.markdown:
            return {"msgtype": "text", "text": {"content": content.plain()}}
        text = f"### {content.title}\n\n{content.text}" if content.title else content.text
        return {"msgtype": "markdown", "markdown": {"title": content.first_line(TITLE_MAX), "text": text}}
