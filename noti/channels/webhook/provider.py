"""Webhooks: POST a record's JSON content to its target URL, signed the Standard Webhooks way
(shared/providers.md §6.2-6.4).

The body is the record's ``noti_webhook_content`` as compact UTF-8 JSON; these exact bytes are
signed and sent. Headers: ``webhook-id`` (the record id: the same on every retry, so
receivers can drop duplicates), ``webhook-timestamp`` (unix seconds) and ``webhook-signature``
= ``v1,`` + base64(HMAC-SHA256(key, ``"{id}.{timestamp}.{body}"``)), where the key is the
base64-decoded part of the ``whsec_…`` secret. Redirects are never followed.

Whose key signs it (:mod:`noti.access.signing`):

- a URL under one of the provider's ``destinations`` (receivers the operator configured): the
  provider's ``secret``, and its ``headers`` are sent;
- any other URL (one a user chose): the secrets of the record's creator, and no provider
  header: an operator's credentials never reach a user-chosen URL. A creator without a
  signing key is refused at ``add`` (``e.cmd.noti.add.nosigningkey``);
- a status callback (:mod:`noti.sending.callbacks`): its creator's secrets too, with
  ``webhook-id`` = ``cb_`` + its record id. The id is signed, and a user's own webhooks carry
  their bare record id, so no body a user posts passes for a status callback.

Options (``[providers.<name>]`` with ``kind = "webhook"``):

=================  ==========  ===================================================================
option             default     meaning
=================  ==========  ===================================================================
``secret``         (required)  ``whsec_`` + base64 of a 24-64 byte key (secret); or a list of
                               1-5 such secrets, to rotate: see below. Signs only requests to
                               ``destinations``
``destinations``   []          URL prefixes of the receivers the operator configured
                               (``https://hooks.example.com/noti/``): scheme, host and port
                               equal, path under the prefix's, no user-info and no dot
                               segments in the target. Only these get ``secret`` and ``headers``
``allow_private``  false       allow targets on private, loopback, link-local or other non-public
                               addresses; refused by default (SSRF) at ``add`` for literal
                               addresses and ``localhost``, and at send time after resolving
``headers``        {}          extra request headers, values secret (e.g. ``Authorization``);
                               not ``webhook-*``, ``content-type``, ``host``; sent to
                               ``destinations`` only
``timeout_s``      10          seconds per request
=================  ==========  ===================================================================

Rotating the secret: set ``secret = ["whsec_NEW…", "whsec_OLD…"]``. Every request then
carries one signature per secret in ``webhook-signature``, space-separated, the first
secret's first (``v1,<new> v1,<old>``), as the Standard Webhooks spec provides for rotation;
a receiver verifies with whichever secret it has (the ``standardwebhooks``/``svix`` libraries
accept a header when any of its signatures matches). Give receivers the new secret, then drop
the old one from the list. docs/channels/webhook.md walks through it.

Classification of the receiver's answer (:data:`ERRORS`, exact status first, then its class):

=============================  ===================  =======================================
answer                         raised               why
=============================  ===================  =======================================
2xx                            (Receipt)            delivered; msgid = the webhook-id
3xx                            PermanentFailure     redirects are not followed
408, 425, 5xx                  TemporaryFailure     ``Retry-After`` honoured
429                            RateLimited          ``Retry-After`` (>= 1 s), else 30 s
410 Gone                       RecipientOptedOut    the endpoint is gone: target suppressed
other 4xx                      PermanentFailure     the receiver refused this message
``webhook-delivery:            PermanentFailure     the receiver asked to stop retrying
abort-message`` (not 2xx)
timeout after sending          AmbiguousOutcome     it may have been received
refused / unresolvable         ProviderOutage       nothing was sent
a non-public address           PermanentFailure     refused before sending (SSRF)
=============================  ===================  =======================================
"""

from __future__ import annotations

import asyncio
import base64
import functools
import hashlib
import hmac
import json
import logging
import re
import socket
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import Field, SecretStr, field_validator
from redis import Redis

from noti.access.signing import CALLBACK_ID_PREFIX, SigningKeys, secret_key
from noti.core.keys import Keys
from noti.core.privacy import mask_target
from noti.core.record import Channel
from noti.errors import (
    DeliveryError,
    InvalidInput,
    PermanentFailure,
    ProviderOutage,
    RateLimited,
    RecipientOptedOut,
    StoreUnavailable,
    TemporaryFailure,
)
from noti.providers import _http, _http11
from noti.providers._urls import Destination, non_public_reason, resolve_public
from noti.providers._urls import parsed as _parsed
from noti.providers.base import Message, Provider, ProviderOptions, Receipt

__all__ = ["ERRORS", "WebhookOptions", "WebhookProvider", "non_public_reason", "sign"]

log = logging.getLogger(__name__)

#: Wait after a 429 that names no ``Retry-After``.
DEFAULT_RETRY_AFTER_S = 30.0
#: Shortest wait after a 429: a rate-limit wait is not an attempt, so ``Retry-After: 0``
#: would otherwise have the record sent again at once, without end.
MIN_RATE_LIMIT_WAIT_S = 1.0

#: Receiver answer -> outcome class: an exact status, a status class (``4xx``), or the
#: ``webhook-delivery: abort-message`` header (shared/providers.md §6.2, §6.3).
ERRORS: dict[str, type[DeliveryError]] = {
    "3xx": PermanentFailure,
    "408": TemporaryFailure,
    "410": RecipientOptedOut,
    "425": TemporaryFailure,
    "429": RateLimited,
    "4xx": PermanentFailure,
    "5xx": TemporaryFailure,
    "abort-message": PermanentFailure,
}

_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
_RESERVED_HEADERS = frozenset(
    {"content-type", "content-length", "host", "transfer-encoding", "connection"}
    | {"webhook-id", "webhook-timestamp", "webhook-signature"}
)


#: Most secrets a webhook provider signs with at once (a rotation needs two).
SECRETS_MAX = 5


class WebhookOptions(ProviderOptions):
    #: One ``whsec_`` secret, or several while rotating (the first one is the new one).
    secret: SecretStr | list[SecretStr]
    allow_private: bool = False
    headers: dict[str, SecretStr] = Field(default_factory=dict)
    #: URL prefixes of the receivers the operator configured: only requests to these are
    #: signed with ``secret`` and carry ``headers``.
    destinations: list[str] = Field(default_factory=list, max_length=100)

    @field_validator("destinations")
    @classmethod
    def _valid_destinations(cls, value: list[str]) -> list[str]:
        for text in value:
            try:
                Destination.parse(text)
            except ValueError as exc:
                raise ValueError(f"destination {text[:100]!r}: {exc}") from None
        return value

    @field_validator("secret")
    @classmethod
    def _valid_secret(cls, value: SecretStr | list[SecretStr]) -> SecretStr | list[SecretStr]:
        secrets = value if isinstance(value, list) else [value]
        if not 1 <= len(secrets) <= SECRETS_MAX:
            raise ValueError(f"give 1 to {SECRETS_MAX} secrets, not {len(secrets)}")
        texts = [s.get_secret_value() for s in secrets]
        if len(set(texts)) != len(texts):
            raise ValueError("the same secret is listed twice")
        for n, text in enumerate(texts, 1):
            try:
                secret_key(text)
            except ValueError as exc:  # never the secret itself in the message
                raise ValueError(f"secret {n} of {len(texts)}: {exc}") from None
        return value

    def secret_keys(self) -> list[bytes]:
        """The HMAC keys to sign with, the first (newest) secret's first."""
        secrets = self.secret if isinstance(self.secret, list) else [self.secret]
        return [secret_key(s.get_secret_value()) for s in secrets]

    @field_validator("headers")
    @classmethod
    def _valid_headers(cls, value: dict[str, SecretStr]) -> dict[str, SecretStr]:
        for name, secret in value.items():
            text = secret.get_secret_value()
            if not _TOKEN.match(name) or name.lower() in _RESERVED_HEADERS:
                raise ValueError(f"header {name!r} is not a name that may be set here")
            if not _FIELD_VALUE.fullmatch(text):
                raise ValueError(
                    f"header {name!r}: a value is visible ASCII with inner spaces or tabs only "
                    "(no line breaks, control characters, or leading/trailing white space)"
                )
        return value


#: RFC 9110 field-value: visible ASCII, inner spaces/tabs, nothing leading or trailing.
_FIELD_VALUE = re.compile(r"(?:[\x21-\x7e](?:[\x20\x09\x21-\x7e]*[\x21-\x7e])?)?")


#: Compact UTF-8 JSON, one encoder for every body (json.dumps builds one per call).
_COMPACT_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def sign(key: bytes | Sequence[bytes], webhook_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` value of ``body`` sent as ``webhook_id`` at ``timestamp``:
    ``v1,<base64>`` per key, space-separated, in the order of the keys."""
    keys = [key] if isinstance(key, bytes) else list(key)
    signed = f"{webhook_id}.{timestamp}.".encode() + body
    return " ".join(
        "v1," + base64.b64encode(hmac.new(k, signed, hashlib.sha256).digest()).decode() for k in keys
    )


@dataclass(frozen=True, slots=True)
class _Request:
    url: str
    headers: dict[str, str]
    body: bytes
    #: TLS SNI name when the URL's host was replaced by its checked address.
    server_hostname: str | None


@dataclass(frozen=True, slots=True)
class Answer:
    """A receiver's answer, whichever HTTP client got it."""

    status_code: int
    headers: Mapping[str, str]  # case-insensitive (httpx) or lower-case names (_http11)
    text: str


class WebhookProvider(Provider):
    """Signed JSON POSTs to the record's URL."""

    kind = "webhook"
    #: A 2xx is the receiving application's own answer: delivered.
    delivered_on_send = True
    channels = frozenset({Channel.WEBHOOK})
    Options = WebhookOptions
    options: WebhookOptions

    def __init__(self, name: str, options: Mapping[str, Any], *, redis: Redis, keys: Keys) -> None:
        super().__init__(name, options, redis=redis, keys=keys)
        self._hmac_keys = self.options.secret_keys()
        self._destinations = [Destination.parse(text) for text in self.options.destinations]
        self._user_keys = SigningKeys(redis, keys)

    @property
    def reaches_private(self) -> bool:
        """It may post to private, loopback and link-local addresses (``allow_private``):
        only users granted it may use it (:mod:`noti.access.grants`)."""
        return self.options.allow_private

    def check(self, message: Message) -> None:
        """Raises InvalidInput: no host, (without allow_private) a literal non-public address,
        or (a URL the operator did not configure) a creator without a signing key."""
        host, port = _host_port(message.target)
        if host is None:
            raise InvalidInput(f"{message.target!r} has no usable host", code="e.cmd.noti.add.badtarget")
        if not self.options.allow_private:
            reason = non_public_reason(host, port, numeric_only=True)
            if reason is not None:
                raise InvalidInput(
                    f"{self.name}: refused: {reason} (set allow_private to permit it)",
                    code="e.cmd.noti.add.badtarget",
                )
        if self.signs_for_creator(message) and not self._user_keys.signing(message.creator):
            what = "status callbacks" if message.status_of else "webhooks to URLs of your choice"
            raise InvalidInput(
                f"{what} are signed with a signing key of {message.creator}'s, who has none: make "
                "one with `noti signing-key add` or POST /v1/signing-keys (it is shown once)",
                code="e.cmd.noti.add.nosigningkey",
            )

    def operator_destination(self, target: str) -> bool:
        """Is ``target`` under one of the ``destinations`` the operator configured?"""
        return any(destination.covers(target) for destination in self._destinations)

    def signs_for_creator(self, message: Message) -> bool:
        """Is ``message`` signed with its creator's keys (a status callback, or a URL the
        operator did not configure), not with the provider's secret?"""
        return bool(message.status_of) or not self.operator_destination(message.target)

    def send(self, message: Message) -> Receipt:
        """POST the signed content; see the module docstring for the outcome classes."""
        request = self._request(message)
        with _http.map_transport_errors(self.name):
            response = _http.client().post(
                request.url,
                content=request.body,
                headers=request.headers,
                timeout=self.options.timeout_s,
                extensions={"sni_hostname": request.server_hostname} if request.server_hostname else {},
            )
        return self._receipt(message, Answer(response.status_code, response.headers, response.text))

    async def send_async(self, message: Message) -> Receipt:
        """:meth:`send` on the running loop with noti's HTTP/1.1 client (:mod:`._http11`; the
        DNS check in a thread)."""
        if self.options.allow_private and not self.signs_for_creator(message):
            request = self._request(message)
        else:  # resolving the target, or reading the creator's signing keys, blocks
            request = await asyncio.get_running_loop().run_in_executor(None, self._request, message)
        with _http11.map_errors(self.name):
            response = await _http11.post(
                request.url,
                request.body,
                request.headers,
                timeout_s=self.options.timeout_s,
                server_hostname=request.server_hostname,
            )
        return self._receipt(message, Answer(response.status, response.headers, response.text()))

    def _request(self, message: Message) -> _Request:
        """The signed request for ``message`` (resolving and pinning the target's address
        unless ``allow_private``)."""
        opts = self.options
        url = message.target
        pinned: dict[str, str] = {}
        if not opts.allow_private:
            url, pinned = self._pin_public_address(message)
        content = message.fields.get("content", {})
        if isinstance(content, str):
            body = content.encode()
        elif isinstance(content, Mapping):
            body = _COMPACT_JSON.encode(dict(content)).encode()
        else:
            raise PermanentFailure(f"{self.name}: webhook content is not a JSON object", provider=self.name)
        timestamp = int(time.time())
        webhook_id, keys, extra = self._signer(message)
        headers = {
            **extra,
            **pinned,
            "content-type": "application/json",
            "webhook-id": webhook_id,
            "webhook-timestamp": str(timestamp),
            "webhook-signature": sign(keys, webhook_id, timestamp, body),
        }
        server_hostname = _parsed(message.target).host if pinned else None
        return _Request(url, headers, body, server_hostname)

    def _signer(self, message: Message) -> tuple[str, list[bytes], dict[str, str]]:
        """The ``webhook-id``, the HMAC keys and the provider headers of ``message``'s request
        (see the module docstring: whose key signs what).

        Raises:
            PermanentFailure: the creator has no signing key (deleted since the add).
        """
        if not self.signs_for_creator(message):
            headers = {name: value.get_secret_value() for name, value in self.options.headers.items()}
            return message.id, self._hmac_keys, headers
        try:
            keys = self._user_keys.signing(message.creator)
        except StoreUnavailable as exc:
            raise TemporaryFailure(
                f"{self.name}: cannot read {message.creator}'s signing keys: {exc.message}",
                provider=self.name,
            ) from exc
        if not keys:
            raise PermanentFailure(
                f"{self.name}: {message.creator} has no signing key any more (noti signing-key add)",
                provider=self.name,
                vendor_code="nosigningkey",
            )
        webhook_id = CALLBACK_ID_PREFIX + message.id if message.status_of else message.id
        return webhook_id, keys, {}

    def _receipt(self, message: Message, answer: Answer) -> Receipt:
        """The receipt of a 2xx answer; raises the outcome class of any other."""
        if 200 <= answer.status_code < 300:
            log.debug("webhook %s: record %s answered %s", self.name, message.id, answer.status_code)
            return Receipt(provider=self.name, msgid=message.id, raw=f"HTTP {answer.status_code}")
        error = self._error(answer)
        log.info(
            "webhook %s: record %s to %s: HTTP %s",
            self.name,
            message.id,
            mask_target(message.target),
            answer.status_code,
        )
        raise error

    def _pin_public_address(self, message: Message) -> tuple[str, dict[str, str]]:
        """Resolve the target once, refuse non-public addresses, and connect to the address
        that was checked (``Host`` and TLS SNI keep the name), so a second DNS answer (DNS
        rebinding) cannot redirect the request. Returns the URL to use and the headers."""
        host, port = _host_port(message.target)
        if host is None:
            raise PermanentFailure(f"{self.name}: the target has no usable host", provider=self.name)
        try:
            reason, address = resolve_public(host, port)
        except (socket.gaierror, UnicodeError) as exc:
            raise ProviderOutage(
                f"{self.name}: cannot resolve the target's host: {exc}", provider=self.name
            ) from exc
        if reason is not None or address is None:
            raise PermanentFailure(
                f"{self.name}: refused: {reason or 'no address'} (set allow_private to permit it)",
                provider=self.name,
                vendor_code="ssrf",
            )
        return _pinned(message.target, address), {"host": _parsed(message.target).netloc.decode("ascii")}

    def _error(self, response: Answer) -> DeliveryError:
        """The outcome class of a non-2xx answer (see :data:`ERRORS`)."""
        status = response.status_code
        excerpt = response.text[:200]
        kwargs = {"provider": self.name, "vendor_code": f"http.{status}"}
        detail = f"{self.name}: the receiver answered HTTP {status}: {excerpt!r}"
        if response.headers.get("webhook-delivery", "").strip().lower() == "abort-message":
            return ERRORS["abort-message"](f"{detail} (abort-message)", **kwargs)
        cls = ERRORS.get(str(status)) or ERRORS.get(f"{status // 100}xx")
        if cls is None:  # 1xx or outside 100-599: not an HTTP answer we understand
            cls = TemporaryFailure
        if 300 <= status < 400:
            detail += f" to {response.headers.get('location', '?')!r}; redirects are not followed"
        if cls is RateLimited:
            return RateLimited(
                detail,
                retry_after_s=max(
                    MIN_RATE_LIMIT_WAIT_S, _http.retry_after_s(response, DEFAULT_RETRY_AFTER_S)
                ),
                **kwargs,
            )
        if issubclass(cls, TemporaryFailure):
            retry_after = _http.retry_after_s(response, 0.0) if "retry-after" in response.headers else None
            return cls(detail, retry_after_s=retry_after, **kwargs)
        return cls(detail, **kwargs)


@functools.lru_cache(maxsize=1024)
def _pinned(target: str, address: str) -> str:
    """``target`` with its host replaced by the checked ``address``."""
    return str(_parsed(target).copy_with(host=address))


def _host_port(url: str) -> tuple[str | None, int]:
    """The host and port of ``url`` as the HTTP client reads it (parsed once per URL);
    ``(None, 0)`` when it has no usable one."""
    try:
        destination = _http11.parse_destination(url)
    except _http11.Unencodable:
        return None, 0
    return destination.host, destination.port
