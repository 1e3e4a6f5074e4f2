"""What both push providers share: the options they take besides their vendor's credentials
(how a record's level becomes the push's priority, how long an undelivered push is kept by
the vendor, the waits after a refusal with no ``Retry-After``), a record's fields, and
:class:`PushProvider`: the credential every worker shares, and a vendor's refusal made its
outcome class, logged, its credential dropped when stale."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any, ClassVar

import httpx
from pydantic import Field

from noti.channels.push._credentials import SharedCredential
from noti.core.privacy import mask_target
from noti.core.record import Channel
from noti.errors import DeliveryError, InvalidInput, RateLimited, StaleCredential, TemporaryFailure
from noti.providers import _http
from noti.providers.base import Message, Provider, ProviderOptions

__all__ = ["PushOptions", "PushProvider", "answer_object", "push_text", "retry_after"]


class PushOptions(ProviderOptions):
    #: Records of this level and above are sent at high priority (FCM ``HIGH``, APNs 10: shown
    #: at once, waking the device); below it at normal priority (FCM ``NORMAL``, APNs 5: the
    #: device may hold it to save power). Default 2: the default level 1 is normal.
    high_level: int = Field(default=2, ge=1)
    #: Seconds the vendor keeps a push for a device that is offline, counted from each send
    #: attempt (FCM ``android.ttl``, APNs ``apns-expiration``); 0: deliver now or never.
    ttl_s: int = Field(default=86400, ge=0, le=2_419_200)
    #: The wait after a rate-limit refusal that names no ``Retry-After``.
    rate_limit_wait_s: float = Field(default=60.0, gt=0, le=3600)
    #: How long a send waits for the credential another worker is making.
    credential_wait_s: float = Field(default=15.0, ge=0, le=60)

    def high(self, level: int) -> bool:
        return level >= self.high_level


def push_text(fields: Mapping[str, Any]) -> tuple[str | None, str, dict[str, Any], str | None]:
    """A push record's ``title``, ``body``, ``data`` (an object; {} when absent, decoded when
    stored as JSON text) and ``collapse``."""
    data = fields.get("data") or {}
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except ValueError:
            data = None
    if not isinstance(data, dict):
        raise InvalidInput("push data must be a JSON object", code="e.cmd.noti.add.badcontent")
    title = fields.get("title")
    collapse = fields.get("collapse")
    return (
        str(title) if title else None,
        str(fields.get("body", "")),
        data,
        str(collapse) if collapse else None,
    )


def answer_object(response: httpx.Response) -> dict[str, Any]:
    """A vendor's answer as a JSON object ({} when it is none)."""
    try:
        data = json.loads(response.content)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def retry_after(response: httpx.Response) -> float | None:
    """The seconds the answer's ``Retry-After`` names, or None when it names none."""
    wait_s = _http.retry_after_s(response, -1.0)
    return wait_s if wait_s >= 0 else None


class PushProvider(Provider):
    """Base of the push providers (FCM, APNs)."""

    channels = frozenset({Channel.PUSH})
    Options: ClassVar[type[ProviderOptions]] = PushOptions
    options: PushOptions
    #: The vendor's acceptance is all noti learns (no delivery receipts): counted as delivered.
    delivered_on_send = True

    def shared_credential(self, account: str) -> SharedCredential:
        """The vendor credential of ``account`` (the key file's account, the team's key) that
        every worker shares (:mod:`noti.channels.push._credentials`)."""
        return SharedCredential(
            self.redis,
            self.keys,
            kind=self.kind,
            account=account,
            provider=self.name,
            wait_s=self.options.credential_wait_s,
            make_timeout_s=self.options.timeout_s,
        )

    def vendor_error(
        self, cls: type[DeliveryError], text: str, vendor_code: str, retry_after_s: float | None
    ) -> DeliveryError:
        """The ``cls`` error of a vendor's refusal: a :class:`RateLimited` waits ``Retry-After``
        (``retry_after_s``), else ``rate_limit_wait_s``, at least 1 s; another temporary failure
        at least ``retry_after_s``."""
        if cls is RateLimited:
            wait = max(1.0, retry_after_s if retry_after_s is not None else self.options.rate_limit_wait_s)
            return RateLimited(text, retry_after_s=wait, provider=self.name, vendor_code=vendor_code)
        if issubclass(cls, TemporaryFailure):
            return cls(text, retry_after_s=retry_after_s, provider=self.name, vendor_code=vendor_code)
        return cls(text, provider=self.name, vendor_code=vendor_code)

    def refused(
        self, message: Message, error: DeliveryError, credential: SharedCredential, value: str
    ) -> DeliveryError:
        """Log a refusal (the device token masked) and return it to raise; the credential
        ``value`` it was sent with is dropped when the vendor called it stale, so the retry
        makes a new one."""
        logging.getLogger(type(self).__module__).info(
            "%s %s: %s to %s refused: %s",
            self.kind,
            message.id,
            self.name,
            mask_target(message.target),
            error.vendor_code,
        )
        if isinstance(error, StaleCredential):
            credential.drop(value)
        return error
