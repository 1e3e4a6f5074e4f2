"""The apprise provider (``kind = "apprise"``): the long tail of services apprise reaches
(Discord, Microsoft Teams, Matrix, Mattermost, Pushover, ntfy, Rocket.Chat, … over 100) as
targets of the chat channel, with noti's retries, records, rate lines and dead letters
around each send. Needs the ``apprise`` extra (``pip install noti[apprise]``).

Its ``urls`` table is the operator's: a target name -> one apprise URL
(``teams = "msteams://…"``, ``ops = "discord://webhook_id/webhook_token"``). The URLs carry
the services' tokens, so they are secret strings, checked when the settings are read (a URL
apprise does not understand is refused, without printing it), and a record's target only
*names* one (an unknown name is ``e.cmd.noti.add.badtarget``, the configured ones unlisted).
One URL per target: a partial success of several could not be retried without sending
twice. ``format = "markdown"`` is passed to apprise as markdown, which converts it for each
service; ``title`` is the notification's title.

What apprise tells about a send, and what noti does:

================================  ============================================================
apprise's outcome                 noti
================================  ============================================================
success                           delivered (no receipt follows; no message id)
timeout (apprise >= 2)            ``AmbiguousOutcome``: it may have been posted; retried on
                                  this provider only (``timeout_s`` bounds the send)
failure                           ``TemporaryFailure``: apprise does not say why, so every
                                  failure is retried by the record's policy (never permanent)
no service matched / bad URL      ``ProviderMisconfigured``
================================  ============================================================

apprise retries nothing itself (its URLs' ``retry`` stays at 0 unless the operator sets it)
and takes no idempotency key: a send that timed out may be posted twice. Rate lines: the
provider's (``rate_limit_per_s``) and each target's (``target_rate_per_min``, off by default).
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, ClassVar

from pydantic import Field, SecretStr, field_validator

from noti.channels.chat._robots import ROBOT_NAME, ChatOptions, ChatProvider, Content
from noti.errors import (
    AmbiguousOutcome,
    InvalidConfig,
    InvalidInput,
    ProviderMisconfigured,
    TemporaryFailure,
)
from noti.providers.base import Message, ProviderOptions, Receipt

__all__ = ["AppriseOptions", "AppriseProvider"]


@functools.cache
def _apprise() -> Any:
    """The apprise module (an optional extra).

    Raises:
        InvalidConfig: it is not installed.
    """
    try:
        import apprise
    except ImportError:
        raise InvalidConfig(
            "the apprise provider needs apprise: pip install 'noti[apprise]'", code="e.noti.config.dependency"
        ) from None
    return apprise


class AppriseOptions(ChatOptions):
    """``[providers.<name>]`` of ``kind = "apprise"``."""

    #: Target name -> the apprise URL reaching it (secret: it carries the service's token).
    urls: dict[str, SecretStr] = Field(default_factory=dict, max_length=1000)

    @field_validator("urls")
    @classmethod
    def _understood(cls, value: dict[str, SecretStr]) -> dict[str, SecretStr]:
        apprise = _apprise()
        for name, url in value.items():
            if not ROBOT_NAME.match(name):
                raise ValueError(
                    f"target name {name[:70]!r}: lower case letters, digits, '_', '.', '-', "
                    "starting with a letter, at most 64"
                )
            # the URL is never quoted: it holds the service's token
            if apprise.Apprise.instantiate(url.get_secret_value()) is None:
                raise ValueError(f"the URL of {name!r} is not one apprise understands (check its scheme)")
        return value


class AppriseProvider(ChatProvider):
    """Posts through apprise to the operator's named URLs."""

    kind = "apprise"
    vendor = "apprise"
    Options: ClassVar[type[ProviderOptions]] = AppriseOptions
    options: AppriseOptions

    def check_target(self, target: str) -> None:
        if target not in self.options.urls:
            raise InvalidInput(
                f"{self.name}: no apprise target called {target[:64]!r} is configured "
                "(targets are named in the provider's urls table by the operator)",
                code="e.cmd.noti.add.badtarget",
            )

    def size_problem(self, content: Content) -> str:
        return ""  # apprise splits or cuts a long body as each service requires

    def post(self, message: Message, content: Content) -> Receipt:
        apprise = _apprise()
        url = self.options.urls[message.target].get_secret_value()
        service = apprise.Apprise()
        if not service.add(url):
            raise self.refused(
                message,
                ProviderMisconfigured(
                    f"{self.name}: apprise does not understand the URL of {message.target!r}",
                    provider=self.name,
                    vendor_code="apprise.badurl",
                ),
            )
        options: dict[str, Any] = {
            "body": content.text,
            "title": content.title,
            "body_format": apprise.NotifyFormat.MARKDOWN if content.markdown else apprise.NotifyFormat.TEXT,
        }
        if _takes_timeout():
            options["timeout"] = self.options.timeout_s
        try:
            result = service.notify(**options)
        except Exception as exc:  # noqa: BLE001 - a plugin's failure is judged, not raised
            raise self.refused(
                message,
                TemporaryFailure(
                    f"{self.name}: apprise failed: {type(exc).__name__}",
                    provider=self.name,
                    vendor_code="apprise.exception",
                ),
            ) from None
        if result:
            return Receipt(provider=self.name, raw=f"apprise: posted to {message.target}")
        status = getattr(getattr(result, "status", None), "name", "FAILURE")
        if status == "TIMEOUT":
            raise self.refused(
                message,
                AmbiguousOutcome(
                    f"{self.name}: apprise timed out after {self.options.timeout_s:g} s: "
                    "it may have been posted",
                    provider=self.name,
                    vendor_code="apprise.timeout",
                ),
            )
        if status == "NOMATCH":
            raise self.refused(
                message,
                ProviderMisconfigured(
                    f"{self.name}: apprise matched no service for {message.target!r}",
                    provider=self.name,
                    vendor_code="apprise.nomatch",
                ),
            )
        raise self.refused(
            message,
            TemporaryFailure(
                f"{self.name}: apprise could not post to {message.target!r} (it does not say why)",
                provider=self.name,
                vendor_code="apprise.failure",
            ),
        )


@functools.cache
def _takes_timeout() -> bool:
    """Whether this apprise's ``notify`` bounds a send (``timeout``: apprise >= 2)."""
    return "timeout" in inspect.signature(_apprise().Apprise.notify).parameters
