"""Slack: a message to a channel through an incoming webhook of the operator's, or through a bot.

A target is either a robot name of the ``robots`` table (an incoming webhook, fixed to its
channel when it was made: one ``POST {webhook_base_url}/services/T…/B…/…`` per attempt, answered
``200 ok`` or an error word with its status), or a conversation id (``C…``, ``G…``, ``D…``)
posted to with ``chat.postMessage`` and the ``bot_token`` (``POST {api_base_url}/chat.postMessage``
with ``Authorization: Bearer xoxb-…``, answered ``{"ok": true, "ts": …}`` or ``{"ok": false,
"error": …}``; the bot must be in the channel). The receipt's msgid is the message's ``ts``
(chat.postMessage only; webhooks return none). Slack does not deduplicate.

``format = "text"`` posts the text (the title on the first line) with Slack's markup off and
``&``, ``<``, ``>`` escaped, so a text never mentions ``@channel`` or a user by accident;
``"markdown"`` posts a ``markdown`` block (standard Markdown, at most 12,000 characters; the
title in bold above the text), with the title or the text's start as the notification's text.

Options (``[providers.<name>]`` with ``kind = "slack"``):

=======================  =============================  =====================================
option                   default                        meaning
=======================  =============================  =====================================
``robots``               {}                             name -> ``token``: the webhook's
                                                        ``T…/B…/…`` (or its whole URL)
``bot_token``            –                              ``xoxb-…``: post to conversation ids
                                                        (one of the two is required)
``webhook_base_url``     ``https://hooks.slack.com``    incoming webhooks' root
``api_base_url``         ``https://slack.com/api``      Web API root
``target_rate_per_min``  60                             per channel or webhook (Slack: about
``target_burst``         1                              one a second, short bursts allowed)
``timeout_s``            10                             seconds per request
=======================  =============================  =====================================

Classification (the error word of the answer through :data:`HOOK_ERRORS` or
:data:`API_ERRORS`; anything else by its HTTP status,
:func:`noti.channels.chat._robots.status_error`): 429 is ``RateLimited`` for ``Retry-After``
(at least 1 s); a webhook's channel deleted, archived or restricted is the operator's to fix
(``ProviderMisconfigured``), while a conversation id that is unknown or archived is a bad
target (``PermanentFailure``), and a bot not in the channel is ``ProviderMisconfigured``
(invite it); bad or revoked tokens are ``ProviderMisconfigured``; ``internal_error`` and
``fatal_error`` may have posted (``AmbiguousOutcome``).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, SecretStr, field_validator, model_validator

from noti.channels.chat._robots import (
    BaseUrl,
    ChatOptions,
    Content,
    RobotOptions,
    RobotProvider,
    coded_error,
    json_or_none,
    no_code,
    robot_tokens,
    status_error,
)
from noti.errors import (
    AmbiguousOutcome,
    DeliveryError,
    InvalidInput,
    PermanentFailure,
    ProviderMisconfigured,
    RateLimited,
    TemporaryFailure,
)
from noti.providers import _http
from noti.providers.base import Message, Receipt

__all__ = ["API_ERRORS", "HOOK_ERRORS", "SlackOptions", "SlackProvider"]

#: Slack's limits: a message's ``text``, and a ``markdown`` block.
TEXT_MAX = 40_000
MARKDOWN_MAX = 12_000
#: Characters of the notification text of a markdown message.
FALLBACK_MAX = 3000

#: A conversation id: a channel (C), a private channel or group (G), a direct message (D).
CONVERSATION = re.compile(r"^[CGD][A-Z0-9]{8,20}$")
_HOOK_PATH = re.compile(r"^T[A-Z0-9]+/B[A-Z0-9]+/[A-Za-z0-9]+$")
_BOT_TOKEN = re.compile(r"^xox[bp]-[A-Za-z0-9-]{10,}$")

#: An incoming webhook's error word -> outcome class.
HOOK_ERRORS: dict[str, type[DeliveryError]] = {
    "invalid_payload": PermanentFailure,
    "no_text": PermanentFailure,
    "invalid_blocks": PermanentFailure,
    "too_many_attachments": PermanentFailure,
    "user_not_found": ProviderMisconfigured,
    "channel_not_found": ProviderMisconfigured,
    "channel_is_archived": ProviderMisconfigured,
    "action_prohibited": ProviderMisconfigured,
    "posting_to_general_channel_denied": ProviderMisconfigured,
    "no_service": ProviderMisconfigured,
    "no_active_hooks": ProviderMisconfigured,
    "invalid_token": ProviderMisconfigured,
    "rate_limited": RateLimited,
}

#: ``chat.postMessage``'s ``error`` -> outcome class.
API_ERRORS: dict[str, type[DeliveryError]] = {
    "channel_not_found": PermanentFailure,
    "is_archived": PermanentFailure,
    "msg_too_long": PermanentFailure,
    "msg_blocks_too_long": PermanentFailure,
    "no_text": PermanentFailure,
    "invalid_blocks": PermanentFailure,
    "too_many_attachments": PermanentFailure,
    "not_in_channel": ProviderMisconfigured,
    "restricted_action": ProviderMisconfigured,
    "ekm_access_denied": ProviderMisconfigured,
    "not_authed": ProviderMisconfigured,
    "invalid_auth": ProviderMisconfigured,
    "account_inactive": ProviderMisconfigured,
    "token_revoked": ProviderMisconfigured,
    "token_expired": ProviderMisconfigured,
    "missing_scope": ProviderMisconfigured,
    "no_permission": ProviderMisconfigured,
    "not_allowed_token_type": ProviderMisconfigured,
    "ratelimited": RateLimited,
    "rate_limited": RateLimited,
    "internal_error": AmbiguousOutcome,
    "fatal_error": AmbiguousOutcome,
    "service_unavailable": TemporaryFailure,
    "request_timeout": TemporaryFailure,
}


class SlackOptions(ChatOptions):
    bot_token: SecretStr | None = None
    webhook_base_url: BaseUrl = "https://hooks.slack.com"
    api_base_url: BaseUrl = "https://slack.com/api"
    target_rate_per_min: float = Field(default=60.0, ge=0, le=6000)
    target_burst: int = Field(default=1, ge=1, le=100)

    @field_validator("robots", mode="before")
    @classmethod
    def _path_from_url(cls, value: Any) -> Any:
        """A robot's ``token`` may be given as the webhook URL Slack shows."""
        return robot_tokens(value, _hook_path)

    @field_validator("robots")
    @classmethod
    def _webhooks(cls, value: dict[str, RobotOptions]) -> dict[str, RobotOptions]:
        for name, robot in value.items():
            if robot.secret is not None:
                raise ValueError(f"robot {name!r}: Slack webhooks are not signed: remove its secret")
            if not _HOOK_PATH.match(robot.token.get_secret_value()):
                raise ValueError(f"robot {name!r}: token is the webhook's T…/B…/… part (or its URL)")
        return value

    @field_validator("bot_token")
    @classmethod
    def _bot_token(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not _BOT_TOKEN.match(value.get_secret_value()):
            raise ValueError("a bot token starts with xoxb- (or a user token with xoxp-)")
        return value

    @model_validator(mode="after")
    def _some_way(self) -> SlackOptions:
        if not self.robots and self.bot_token is None:
            raise ValueError("set robots (incoming webhooks), bot_token (chat.postMessage), or both")
        return self


class SlackProvider(RobotProvider):
    """Messages to Slack channels: the operator's incoming webhooks, or a bot's chat.postMessage."""

    kind = "slack"
    vendor = "Slack"
    Options = SlackOptions
    options: SlackOptions

    def check_target(self, target: str) -> None:
        if target in self.options.robots:
            return
        if CONVERSATION.match(target):
            if self.options.bot_token is None:
                raise InvalidInput(
                    f"{self.name}: posting to a conversation id needs the provider's bot_token; "
                    "this provider posts through named incoming webhooks only",
                    code="e.cmd.noti.add.badtarget",
                )
            return
        raise InvalidInput(
            f"{self.name}: a Slack target is a conversation id (C0123ABCD) or the name of an "
            f"incoming webhook configured by the operator, not {target[:64]!r}",
            code="e.cmd.noti.add.badtarget",
        )

    def size_problem(self, content: Content) -> str:
        if content.markdown:
            size = len(_markdown(content))
            if size > MARKDOWN_MAX:
                return f"Slack takes at most {MARKDOWN_MAX} characters of markdown, this message is {size}"
            return ""
        size = len(_escaped(content.plain()))
        if size > TEXT_MAX:
            return f"Slack takes at most {TEXT_MAX} characters of text, this message is {size} once escaped"
        return ""

    def post(self, message: Message, content: Content) -> Receipt:
        if message.target in self.options.robots:
            return self._post_hook(message, content)
        return self._post_api(message, content)

    def _post_hook(self, message: Message, content: Content) -> Receipt:
        robot = self.robot(message.target)
        url = f"{self.options.webhook_base_url}/services/{robot.token.get_secret_value()}"
        response = self.post_json(url, _body(content))
        word = response.text.strip()
        if response.is_success and word == "ok":
            return Receipt(provider=self.name, msgid=None, raw=f"HTTP {response.status_code} ok")
        if word not in HOOK_ERRORS:
            raise self.refused(message, no_code(self.name, response))
        raise self.refused(message, self._coded(HOOK_ERRORS, word, response))

    def _post_api(self, message: Message, content: Content) -> Receipt:
        token = self.options.bot_token
        if token is None:  # the settings changed since the record was added
            raise self.refused(
                message,
                ProviderMisconfigured(f"{self.name}: no bot_token any more", provider=self.name),
            )
        response = self.post_json(
            f"{self.options.api_base_url}/chat.postMessage",
            {"channel": message.target, **_body(content)},
            headers={"authorization": f"Bearer {token.get_secret_value()}"},
        )
        data = json_or_none(response)
        if data is None or "ok" not in data:
            raise self.refused(message, no_code(self.name, response))
        if data["ok"] is True and response.is_success:
            ts = data.get("ts")
            return Receipt(
                provider=self.name,
                msgid=ts if isinstance(ts, str) and ts else None,
                raw=f"HTTP {response.status_code} ok channel={data.get('channel', '')}",
            )
        word = str(data.get("error") or "")
        if word not in API_ERRORS:
            error = status_error(self.name, response) if not response.is_success else None
            raise self.refused(message, error or self._coded(API_ERRORS, word or "unknown", response))
        raise self.refused(message, self._coded(API_ERRORS, word, response))

    def _coded(self, table: dict[str, type[DeliveryError]], word: str, response: Any) -> DeliveryError:
        retry_after = _http.retry_after_s(response, 1.0)
        return coded_error(
            self.name,
            table,
            word,
            word,
            status=response.status_code,
            wait_s=retry_after,
            retry_after_s=retry_after if "retry-after" in response.headers else None,
        )


def _hook_path(token: str) -> str | None:
    """The ``T…/B…/…`` of an incoming webhook's URL (None: ``token`` is no such URL)."""
    return token.rstrip("/").split("/services/", 1)[1] if "/services/" in token else None


def _escaped(text: str) -> str:
    """``text`` as Slack shows it literally (its three control characters escaped)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _markdown(content: Content) -> str:
    return f"**{content.title}**\n\n{content.text}" if content.title else content.text


def _body(content: Content) -> dict[str, Any]:
    """The message fields of a webhook's body and of chat.postMessage's."""
    if not content.markdown:
        return {"text": _escaped(content.plain()), "mrkdwn": False}
    fallback = _escaped(content.first_line(FALLBACK_MAX))
    return {"text": fallback, "blocks": [{"type": "markdown", "text": _markdown(content)}]}
