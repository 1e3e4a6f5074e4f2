"""SendGrid: e-mail through the v3 Mail Send API, events through the signed Event Webhook.

One ``POST {base_url}/v3/mail/send`` per attempt (JSON, ``Authorization: Bearer <api_key>``):
one personalization to the record's address, the subject, a ``text/plain`` part and the
optional ``text/html`` one, and the custom argument ``noti_id=<record id>`` (SendGrid echoes
it in every event). A record's unsubscribe link goes in the message's ``headers`` object
(``List-Unsubscribe``, ``List-Unsubscribe-Post``; neither is one SendGrid reserves).
SendGrid answers **202** with an empty body and ``X-Message-Id``: the receipt's msgid (events
name the message as ``<X-Message-Id>.<suffix>``).

Options (``[providers.<name>]`` with ``kind = "sendgrid"``):

======================  ============================  ==========================================
option                  default                       meaning
======================  ============================  ==========================================
``api_key``             (required, secret)            a key with the ``mail.send`` scope
``from_addr``           (required)                    a verified Sender Identity's address
                                                      (``Name <a@b.c>`` gives the name too)
``reply_to``            –                             ``reply_to``
``base_url``            ``https://api.sendgrid.com``  (``https://api.eu.sendgrid.com`` for EU
                                                      subusers; tests point it at a fake)
``webhook_public_key``  –: no receipts                the Event Webhook's verification key
                                                      (base64, as the console shows it)
``webhook_max_age_s``   300                           a signed post dated further from this
                                                      clock is refused
``timeout_s``           10
======================  ============================  ==========================================

Classification (SendGrid keeps no idempotency key: an answer that never came may be a sent
message, ``AmbiguousOutcome``):

================================  =====================  ===================================
answer                            raised                 why
================================  =====================  ===================================
202 with ``X-Message-Id``         (Receipt)
400                               PermanentFailure       this message is refused (the errors
                                                         name the field)
401, 403, 404                     ProviderMisconfigured  key, scope, sender identity, base_url
413                               PermanentFailure       too large
429                               RateLimited            until ``X-RateLimit-Reset`` (or
                                                         ``Retry-After``), at least 1 s
503                               ProviderOutage         not taken: fail over
other 5xx                         AmbiguousOutcome       it may have been taken
other 4xx                         TemporaryFailure
================================  =====================  ===================================

Receipts: :mod:`noti.channels.email.sendgrid_receipts`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from email.utils import parseaddr
from typing import Any

import httpx
import redis
from pydantic import Field, SecretStr, field_validator

from noti.channels.email import sendgrid_receipts, unsubscribe_headers
from noti.channels.email._api import HTTP_URL, ApiEmailProvider, EmailAddress
from noti.core.keys import Keys
from noti.delivery.state import ReceiptBatch, ReceiptRequest
from noti.errors import (
    AmbiguousOutcome,
    DeliveryError,
    InvalidConfig,
    PermanentFailure,
    ProviderMisconfigured,
    ProviderOutage,
    RateLimited,
    TemporaryFailure,
)
from noti.providers import _http
from noti.providers.base import Message, ProviderOptions, Receipt

__all__ = ["SendGridOptions", "SendGridProvider"]

PATH = "/v3/mail/send"
MIN_RATE_LIMIT_WAIT_S = 1.0
#: The longest wait a 429's X-RateLimit-Reset is believed for.
MAX_RATE_LIMIT_WAIT_S = 3600.0


class SendGridOptions(ProviderOptions):
    api_key: SecretStr = Field(min_length=1)
    from_addr: EmailAddress
    reply_to: EmailAddress | None = None
    base_url: str = Field(default="https://api.sendgrid.com", pattern=HTTP_URL)
    webhook_public_key: str | None = None
    webhook_max_age_s: float = Field(default=300.0, gt=0, le=86400)

    @field_validator("base_url")
    @classmethod
    def _strip_slash(cls, value: str) -> str:
        return value.rstrip("/")


def _person(value: str) -> dict[str, str]:
    name, address = parseaddr(value)
    return {"email": address, "name": name} if name else {"email": address}


class SendGridProvider(ApiEmailProvider):
    """E-mail through one SendGrid account (one API key; SendGrid takes ASCII addresses only)."""

    kind = "sendgrid"
    vendor = "SendGrid"
    Options = SendGridOptions
    options: SendGridOptions

    def __init__(self, name: str, options: Mapping[str, Any], *, redis: redis.Redis, keys: Keys) -> None:
        super().__init__(name, options, redis=redis, keys=keys)
        self._public_key: Any = None
        text = self.options.webhook_public_key
        if text is not None:
            try:
                self._public_key = sendgrid_receipts.load_public_key(text)
            except ValueError as exc:
                raise InvalidConfig(f"[providers.{name}] webhook_public_key: {exc}") from None

    def body(self, message: Message) -> dict[str, Any]:
        """The Mail Send request of ``message``."""
        content = [{"type": "text/plain", "value": str(message.fields.get("text", ""))}]
        html = message.fields.get("html")
        if html:
            content.append({"type": "text/html", "value": str(html)})
        body: dict[str, Any] = {
            "personalizations": [{"to": [{"email": message.target}]}],
            "from": _person(self.options.from_addr),
            "subject": str(message.fields.get("subject", "")),
            "content": content,
            "custom_args": {sendgrid_receipts.RECORD_ARG: message.id},
        }
        if self.options.reply_to:
            body["reply_to"] = _person(self.options.reply_to)
        headers = unsubscribe_headers(message.fields)
        if headers:
            body["headers"] = dict(headers)
        return body

    def send(self, message: Message) -> Receipt:
        with _http.map_transport_errors(self.name):
            response = _http.client().post(
                self.options.base_url + PATH,
                json=self.body(message),
                headers={"authorization": f"Bearer {self.options.api_key.get_secret_value()}"},
                timeout=self.options.timeout_s,
            )
        if not response.is_success:
            raise self.refused(message, self._error(response))
        message_id = response.headers.get("x-message-id", "").strip()
        return self.receipt(message, response, message_id, "X-Message-Id")

    def _error(self, response: httpx.Response) -> DeliveryError:
        status = response.status_code
        words = _first_error(response.content)
        detail = f"{self.name}: HTTP {status}: {words[:300]}"
        kwargs: dict[str, Any] = {"provider": self.name, "vendor_code": f"http.{status}"}
        if status == 429:
            return RateLimited(detail, retry_after_s=_rate_limit_wait(response), **kwargs)
        cls: type[DeliveryError]
        if status in (400, 413):
            cls = PermanentFailure
        elif status in (401, 403, 404):
            cls = ProviderMisconfigured
        elif status == 503:
            cls = ProviderOutage
        elif status >= 500:
            cls = AmbiguousOutcome
        else:
            cls = TemporaryFailure
        return cls(detail, **kwargs)

    def read_receipt(self, request: ReceiptRequest) -> ReceiptBatch:
        """A signed Event Webhook post (:mod:`noti.channels.email.sendgrid_receipts`).

        Raises:
            ReceiptRejected: ``.provider`` (no ``webhook_public_key``), ``.signature``, ``.malformed``.
        """
        return sendgrid_receipts.read_events(
            self.name, request, self._public_key, max_age_s=self.options.webhook_max_age_s
        )


def _first_error(content: bytes) -> str:
    """``message (field)`` of SendGrid's first error, or the body's start."""
    try:
        data = json.loads(content)
    except ValueError:
        return content[:200].decode("utf-8", "replace")
    errors = data.get("errors") if isinstance(data, dict) else None
    first = errors[0] if isinstance(errors, list) and errors and isinstance(errors[0], dict) else {}
    message, field = first.get("message"), first.get("field")
    return f"{message} ({field})" if field else str(message or "")


def _rate_limit_wait(response: httpx.Response) -> float:
    """Seconds until ``X-RateLimit-Reset`` (epoch seconds), else ``Retry-After``; at least 1."""
    reset = response.headers.get("x-ratelimit-reset", "")
    if reset.isdigit():
        wait = min(MAX_RATE_LIMIT_WAIT_S, int(reset) - time.time())
    else:
        wait = _http.retry_after_s(response, MIN_RATE_LIMIT_WAIT_S)
    return max(MIN_RATE_LIMIT_WAIT_S, wait)
