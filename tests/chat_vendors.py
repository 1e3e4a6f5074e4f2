"""The chat vendors as tests/test_channel_chat.py meets them: each vendor's fake, the provider
options that reach it, a target that delivers, the credentials the fake refuses, a message over
the vendor's limit, and the table of the vendor's errors with the class each must raise.

Slack is two entries: its incoming webhooks (a robot name) and chat.postMessage (a channel id).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from noti.errors import (
    AmbiguousOutcome,
    DeliveryError,
    PermanentFailure,
    ProviderMisconfigured,
    RateLimited,
    RecipientOptedOut,
    TemporaryFailure,
)
from tests.fakes import dingtalk, feishu, slack, telegram, wecom
from tests.fakes._chat import ChatFake, Robot
from tests.fakes._server import Reply

__all__ = ["VENDORS", "Vendor", "toml_table"]

DING_TOKEN, DING_SECRET = "d1ngta1k0ps" + "0" * 53, "SEC" + "ab12" * 16
FEISHU_HOOK, FEISHU_SECRET = "2f0b6a1c-1c1f-4a8e-9e55-6c1a2b3c4d5e", "fe1shuS1gn1ngSecret"
WECOM_KEY = "693a91f6-7aaa-4bc4-97a0-0ec2f1a5a000"
SLACK_HOOK = "T0FAKE000/B0FAKE000/abcdEFGHijklMNOPqrstUVWX"
SLACK_CHANNEL = "C0FAKE0001"
TELEGRAM_CHAT = "-1001234567890"


@dataclass(frozen=True)
class Vendor:
    """One way of reaching a conversation, with what its tests need."""

    #: The test id ("slack_api"); the provider kind is :attr:`kind`.
    id: str
    kind: str
    make_fake: Callable[[], ChatFake]
    #: Provider options reaching ``fake`` (``target`` delivers).
    options: Callable[[ChatFake], dict[str, Any]]
    target: str
    #: What the fake names the target's conversation (a token, a key, a channel id).
    conversation: str
    #: Option overrides the fake refuses (a wrong secret, key or token), and its answer's code.
    wrong_credential: Callable[[ChatFake], dict[str, Any]]
    wrong_code: str
    #: Vendor code -> (the fake's answer, the class noti raises).
    errors: dict[str, tuple[Reply, type[DeliveryError]]]
    #: Fields within the channel's limits and over the vendor's.
    oversize: dict[str, str]
    #: The vendor's message type for a plain text, a titled text and a markdown message.
    types: tuple[str, str, str]
    #: Whether the vendor returns a message id.
    msgid: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


def _ding_options(fake: ChatFake, secret: str = DING_SECRET) -> dict[str, Any]:
    return {
        "kind": "dingtalk",
        "base_url": fake.url,
        "robots": {"ops": {"token": DING_TOKEN, "secret": secret}},
    }


def _feishu_options(fake: ChatFake, secret: str = FEISHU_SECRET) -> dict[str, Any]:
    return {
        "kind": "feishu",
        "base_url": fake.url,
        "robots": {"ops": {"token": FEISHU_HOOK, "secret": secret}},
    }


def _wecom_options(fake: ChatFake, key: str = WECOM_KEY) -> dict[str, Any]:
    return {"kind": "wecom", "base_url": fake.url, "robots": {"ops": {"token": key}}}


def _slack_options(fake: ChatFake, hook: str = SLACK_HOOK, token: str = slack.BOT_TOKEN) -> dict[str, Any]:
    return {
        "kind": "slack",
        "webhook_base_url": fake.url,
        "api_base_url": fake.url + "/api",
        "robots": {"ops": {"token": hook}},
        "bot_token": token,
    }


def _telegram_options(fake: ChatFake, token: str = telegram.BOT_TOKEN) -> dict[str, Any]:
    return {"kind": "telegram", "base_url": fake.url, "bot_token": token}


def _by_outcome(
    reply: Callable[[str], Reply], outcomes: dict[type[DeliveryError], str]
) -> dict[str, tuple[Reply, type[DeliveryError]]]:
    """Cases for a vendor's error codes or words: each one's answer (``reply``) and the class it
    must raise, listed by outcome (codes separated by spaces) as docs/channels/chat.md's errors
    table lists them (stated here, not read from the provider's table)."""
    return {code: (reply(code), cls) for cls, codes in outcomes.items() for code in codes.split()}


def _tg(code: int, description: str, **kwargs: Any) -> Reply:
    return telegram.error_reply(code, description, **kwargs)


VENDORS: list[Vendor] = [
    Vendor(
        id="dingtalk",
        kind="dingtalk",
        make_fake=lambda: dingtalk.DingTalkFake(Robot(DING_TOKEN, DING_SECRET)),
        options=_ding_options,
        target="ops",
        conversation=DING_TOKEN,
        wrong_credential=lambda fake: _ding_options(fake, secret="SEC" + "cd34" * 16),
        wrong_code="310000",
        errors={
            **_by_outcome(
                lambda code: dingtalk.error_reply(int(code)),
                {
                    TemporaryFailure: "-1 999999",
                    PermanentFailure: "40035 400105 430101 430102 430103 430104 460101",
                    RateLimited: "130101 410100",
                    ProviderMisconfigured: "300001 310000 400013 400101 400102 400106",
                },
            ),
            "http.500": (Reply(500, "<html>oops</html>"), AmbiguousOutcome),
            "http.502": (Reply(502, "bad gateway"), TemporaryFailure),
            "http.200": (Reply(200, "<html>?</html>"), AmbiguousOutcome),
        },
        oversize={"text": "中" * 7000},
        types=("text", "text", "markdown"),
    ),
    Vendor(
        id="feishu",
        kind="feishu",
        make_fake=lambda: feishu.FeishuFake(Robot(FEISHU_HOOK, FEISHU_SECRET)),
        options=_feishu_options,
        target="ops",
        conversation=FEISHU_HOOK,
        wrong_credential=lambda fake: _feishu_options(fake, secret="n0tTheS1gn1ngSecret"),
        wrong_code="19021",
        errors={
            **_by_outcome(
                lambda code: feishu.error_reply(int(code)),
                {
                    PermanentFailure: "9499",
                    RateLimited: "11232",
                    ProviderMisconfigured: "19001 19021 19022 19024",
                    TemporaryFailure: "424242",
                },
            ),
            "http.429": (Reply(429, "slow down", {"retry-after": "3"}), RateLimited),
            "http.503": (Reply(503, "busy"), TemporaryFailure),
        },
        oversize={"text": "中" * 7000},
        types=("text", "post", "interactive"),
    ),
    Vendor(
        id="wecom",
        kind="wecom",
        make_fake=lambda: wecom.WecomFake(Robot(WECOM_KEY)),
        options=_wecom_options,
        target="ops",
        conversation=WECOM_KEY,
        wrong_credential=lambda fake: _wecom_options(fake, key="00000000-0000-0000-0000-000000000000"),
        wrong_code="93000",
        errors={
            **_by_outcome(
                lambda code: wecom.error_reply(int(code)),
                {
                    TemporaryFailure: "-1",
                    PermanentFailure: "40008 40058 44004",
                    RateLimited: "45009",
                    ProviderMisconfigured: "93000",
                },
            ),
            "http.404": (Reply(404, ""), ProviderMisconfigured),
        },
        oversize={"text": "x" * 2049},
        types=("text", "text", "markdown"),
    ),
    Vendor(
        id="slack",
        kind="slack",
        make_fake=lambda: slack.SlackFake(hooks=(SLACK_HOOK,), channels=(SLACK_CHANNEL,)),
        options=_slack_options,
        target="ops",
        conversation=SLACK_HOOK,
        wrong_credential=lambda fake: _slack_options(fake, hook="T0FAKE000/B0FAKE000/wrongwrongwrongwrong"),
        wrong_code="no_service",
        errors={
            **_by_outcome(
                slack.hook_error,
                {
                    # the webhook's channel or the webhook itself: the operator's to fix
                    ProviderMisconfigured: "channel_not_found channel_is_archived action_prohibited"
                    " posting_to_general_channel_denied no_service no_active_hooks invalid_token"
                    " user_not_found",
                    # this message
                    PermanentFailure: "invalid_payload no_text invalid_blocks too_many_attachments",
                    # HTTP 429 with Retry-After
                    RateLimited: "rate_limited",
                },
            ),
            "http.500": (Reply(500, "rollup_error"), AmbiguousOutcome),
        },
        oversize={"text": "x" * 12_001, "format": "markdown"},
        types=("text", "text", "markdown"),
    ),
    Vendor(
        id="slack_api",
        kind="slack",
        make_fake=lambda: slack.SlackFake(channels=(SLACK_CHANNEL,)),
        options=_slack_options,
        target=SLACK_CHANNEL,
        conversation=SLACK_CHANNEL,
        wrong_credential=lambda fake: _slack_options(fake, token="xoxb-0000000000-0000000000000-wrongwrong"),
        wrong_code="invalid_auth",
        errors={
            **_by_outcome(
                slack.api_error,
                {
                    # the target conversation, or this message
                    PermanentFailure: "channel_not_found is_archived msg_too_long msg_blocks_too_long"
                    " no_text invalid_blocks too_many_attachments",
                    # the bot (invite it to the channel) or its token
                    ProviderMisconfigured: "not_in_channel invalid_auth not_authed account_inactive"
                    " token_revoked token_expired missing_scope no_permission not_allowed_token_type"
                    " restricted_action ekm_access_denied",
                    RateLimited: "ratelimited rate_limited",
                    # it may have been posted
                    AmbiguousOutcome: "internal_error fatal_error",
                    # not posted; and a word Slack adds later is tried again, not dropped
                    TemporaryFailure: "service_unavailable request_timeout some_new_error",
                },
            ),
            "http.503": (Reply(503, "", {"retry-after": "7"}), TemporaryFailure),
        },
        oversize={"text": "x" * 12_001, "format": "markdown"},
        types=("text", "text", "markdown"),
        msgid=True,
    ),
    Vendor(
        id="telegram",
        kind="telegram",
        make_fake=lambda: telegram.TelegramFake(
            chats=(TELEGRAM_CHAT,), blocked=("424242",), kicked=("-4242",)
        ),
        options=_telegram_options,
        target=TELEGRAM_CHAT,
        conversation=TELEGRAM_CHAT,
        wrong_credential=lambda fake: _telegram_options(fake, token="987654321:" + "Z" * 35),
        wrong_code="401",
        errors={
            "400": (_tg(400, "Bad Request: chat not found"), PermanentFailure),
            "400.rights": (
                _tg(400, "Bad Request: not enough rights to send text messages to the chat"),
                ProviderMisconfigured,
            ),
            "401": (_tg(401, "Unauthorized"), ProviderMisconfigured),
            "403": (_tg(403, "Forbidden: bot can't initiate conversation with a user"), PermanentFailure),
            "403.optout": (_tg(403, "Forbidden: bot was blocked by the user"), RecipientOptedOut),
            "404": (_tg(404, "Not Found"), ProviderMisconfigured),
            "429": (_tg(429, "Too Many Requests: retry after 17", retry_after=17), RateLimited),
            "http.502": (Reply(502, "<html>Bad Gateway</html>"), TemporaryFailure),
        },
        oversize={"text": "x" * 4097},
        types=("", "", "MarkdownV2"),
        msgid=True,
    ),
]


_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, dict):
        items = ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items())
        return "{ " + items + " }"
    return json.dumps(str(value))


def _toml_key(key: str) -> str:
    return key if _BARE.match(key) else json.dumps(key)


def toml_table(name: str, options: dict[str, Any]) -> str:
    """``[providers.<name>]`` with ``options`` (nested tables inline)."""
    lines = [f"[providers.{name}]"] + [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in options.items()]
    return "\n".join(lines) + "\n"
