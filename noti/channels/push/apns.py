"""Apple Push Notification service: pushes over HTTP/2 with token-based authentication
(``docs/channels/push.md``).

One ``POST {base_url}/3/device/<device token>`` per attempt on an HTTP/2 connection of this
provider's own (APNs speaks only HTTP/2; httpx's ``http2``, i.e. the ``h2`` package of the
``push`` extra), with headers:

- ``authorization: bearer <provider token>``: an ES256 JWT (header ``kid`` = ``key_id``,
  claims ``iss`` = ``team_id`` and ``iat``) signed with the team's ``.p8`` key. It is cached
  in Redis for every worker (``noti:cred:apns:<team>.<key>``) and reused for
  ``jwt_reuse_s`` (default 50 minutes; APNs refuses one older than an hour and answers
  ``TooManyProviderTokenUpdates`` to a team that changes its token more often than every 20
  minutes, so at most 55 and at least 20 minutes). It is replaced early only when APNs
  answers ``ExpiredProviderToken`` (:class:`StaleCredential`: dropped if still cached, and
  the sender tries once more at once).
- ``apns-topic`` = ``topic`` (the app's bundle id), ``apns-push-type: alert``,
  ``apns-priority`` 10 for records of level ``high_level`` and above, else 5,
  ``apns-expiration`` = now + ``ttl_s`` (0 with ``ttl_s = 0``: now or never),
  ``apns-collapse-id`` = the record's ``collapse``, and ``apns-id`` = a UUID made from the
  record id (:func:`apns_id`: the same for every attempt of a record), which is the
  receipt's msgid. APNs does not de-duplicate on it: it only echoes it.

The payload is the record's ``data`` (custom keys) with ``aps.alert`` = ``{title, body}``, at
most 4,096 bytes (:meth:`ApnsProvider.check` refuses more, and a ``data`` key ``aps``).

Classification (``reason`` of the answer, else its HTTP status):

=========================================================  =====================  ================
reason                                                     raised                 why
=========================================================  =====================  ================
410 Unregistered, 410 ExpiredToken, 400 BadDeviceToken     RecipientOptedOut      the token is dead
                                                                                  (or of the other
                                                                                  environment)
400 DeviceTokenNotForTopic, BadCollapseId,                 PermanentFailure       this push is refused
BadExpirationDate, BadMessageId, BadPriority,
DuplicateHeaders, MissingDeviceToken, PayloadEmpty;
413 PayloadTooLarge
400 IdleTimeout                                            TemporaryFailure       retried
403 ExpiredProviderToken                                   StaleCredential        a new JWT at once
429 TooManyRequests                                        RateLimited            to this device
429 TooManyProviderTokenUpdates                            ProviderOutage         the team's JWTs
503 ServiceUnavailable, Shutdown                           ProviderOutage         ``Retry-After``
500 InternalServerError                                    AmbiguousOutcome       may have been sent
400 BadTopic, MissingTopic, TopicDisallowed,               ProviderMisconfigured  the options
InvalidPushType; 403 InvalidProviderToken,
MissingProviderToken, BadCertificate,
BadCertificateEnvironment, Forbidden,
UnrelatedKeyIdInToken, BadEnvironmentKeyInToken;
404 BadPath; 405 MethodNotAllowed
=========================================================  =====================  ================
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import re
import ssl
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Literal

import httpx
import redis
from pydantic import Field, FilePath, SecretStr, model_validator

from noti.channels.push import _jwt
from noti.channels.push._options import PushOptions, PushProvider, answer_object, push_text, retry_after
from noti.core.keys import Keys
from noti.core.privacy import mask_target
from noti.errors import (
    AmbiguousOutcome,
    DeliveryError,
    InvalidConfig,
    InvalidInput,
    PermanentFailure,
    ProviderMisconfigured,
    ProviderOutage,
    RateLimited,
    RecipientOptedOut,
    StaleCredential,
    TemporaryFailure,
)
from noti.providers import _http
from noti.providers.base import Message, Receipt

__all__ = ["ENVIRONMENTS", "ERRORS", "ApnsOptions", "ApnsProvider", "apns_id"]

log = logging.getLogger(__name__)

ENVIRONMENTS = {
    "production": "https://api.push.apple.com",
    "sandbox": "https://api.sandbox.push.apple.com",
}
#: APNs' limit on a (non-VoIP) notification's payload.
PAYLOAD_MAX = 4096
COLLAPSE_MAX_BYTES = 64
#: The wait after TooManyProviderTokenUpdates (APNs names none; the team's JWT settles).
TOKEN_UPDATES_WAIT_S = 60.0
#: The namespace of :func:`apns_id` (UUID v5 of the record id).
APNS_ID_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "noti:apns-id")
#: An APNs device token: hex digits (32 bytes today; Apple says the length may change).
_DEVICE_TOKEN = re.compile(r"[0-9a-fA-F]{32,400}")
#: A bundle id (``com.example.app``), with APNs' suffixes for VoIP and complications.
BUNDLE_ID = r"^[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+(\.voip|\.complication|\.push-type\.[a-z]+)?$"

#: APNs ``reason`` -> outcome class (Apple: "Handling notification responses from APNs").
ERRORS: dict[str, type[DeliveryError]] = {
    "BadCollapseId": PermanentFailure,
    "BadDeviceToken": RecipientOptedOut,
    "BadExpirationDate": PermanentFailure,
    "BadMessageId": PermanentFailure,
    "BadPriority": PermanentFailure,
    "BadTopic": ProviderMisconfigured,
    "DeviceTokenNotForTopic": PermanentFailure,
    "DuplicateHeaders": PermanentFailure,
    "IdleTimeout": TemporaryFailure,
    "InvalidPushType": ProviderMisconfigured,
    "MissingDeviceToken": PermanentFailure,
    "MissingTopic": ProviderMisconfigured,
    "PayloadEmpty": PermanentFailure,
    "TopicDisallowed": ProviderMisconfigured,
    "BadCertificate": ProviderMisconfigured,
    "BadCertificateEnvironment": ProviderMisconfigured,
    "ExpiredProviderToken": StaleCredential,
    "Forbidden": ProviderMisconfigured,
    "InvalidProviderToken": ProviderMisconfigured,
    "MissingProviderToken": ProviderMisconfigured,
    "UnrelatedKeyIdInToken": ProviderMisconfigured,
    "BadEnvironmentKeyInToken": ProviderMisconfigured,
    "BadPath": ProviderMisconfigured,
    "MethodNotAllowed": ProviderMisconfigured,
    "ExpiredToken": RecipientOptedOut,
    "Unregistered": RecipientOptedOut,
    "PayloadTooLarge": PermanentFailure,
    "TooManyProviderTokenUpdates": ProviderOutage,
    "TooManyRequests": RateLimited,
    "InternalServerError": AmbiguousOutcome,
    "ServiceUnavailable": ProviderOutage,
    "Shutdown": ProviderOutage,
}
#: The class of an answer whose reason is not in :data:`ERRORS`, by HTTP status.
_BY_STATUS: dict[int, type[DeliveryError]] = {
    400: PermanentFailure,
    410: RecipientOptedOut,
    413: PermanentFailure,
    429: RateLimited,
    500: AmbiguousOutcome,
    503: ProviderOutage,
}


class _MaskPush(logging.Filter):
    """Masks what must not reach a log from the HTTP/2 header codec (hpack), which logs the
    headers at DEBUG: the provider token, and the device token (personal data) in the request
    path. (httpx's request lines are masked by :mod:`noti.providers._http`: below.)"""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(_masked(arg) for arg in record.args)
        return True


def _masked(value: object) -> object:
    if isinstance(value, tuple):
        return tuple(_masked(v) for v in value)
    text = value.decode("latin-1") if isinstance(value, bytes) else value
    if not isinstance(text, str):
        return value
    if text[:7].lower() == "bearer ":
        text = "bearer ***"
    elif text.startswith(DEVICE_PATH):
        text = DEVICE_PATH + mask_target(text[len(DEVICE_PATH) :])
    else:
        return value
    return text.encode("latin-1") if isinstance(value, bytes) else text


DEVICE_PATH = "/3/device/"
_http.mask_in_path(r"(/3/device/)[^/?\s]+")
for _name in ("hpack.hpack", "hpack.table"):
    _library_log = logging.getLogger(_name)
    if not any(isinstance(f, _MaskPush) for f in _library_log.filters):
        _library_log.addFilter(_MaskPush())


def apns_id(record_id: str) -> str:
    """The ``apns-id`` of a record: a UUID v5 of its id, the same at every attempt."""
    return str(uuid.uuid5(APNS_ID_NAMESPACE, record_id))


class ApnsOptions(PushOptions):
    key_id: str = Field(pattern=r"^[A-Z0-9]{10}$")
    team_id: str = Field(pattern=r"^[A-Z0-9]{10}$")
    #: The ``.p8`` authentication key inline (a secret); or …
    private_key: SecretStr | None = None
    #: … the path of the ``.p8`` file.
    private_key_file: FilePath | None = None
    #: The app's bundle id (``apns-topic``).
    topic: str = Field(max_length=255, pattern=BUNDLE_ID)
    environment: Literal["production", "sandbox"] = "production"
    #: Overrides the environment's host (tests point it at a fake); https only.
    base_url: str | None = Field(default=None, pattern=r"^https://[^\s/?#]+(?:/[^\s?#]*)?$")
    #: Certificate authorities to trust instead of the system's (tests: the fake's).
    ca_file: FilePath | None = None
    #: How long a provider token (JWT) is reused: 20 to 55 minutes.
    jwt_reuse_s: float = Field(default=3000.0, ge=1200, le=3300)

    @model_validator(mode="after")
    def _one_key(self) -> ApnsOptions:
        if (self.private_key is None) == (self.private_key_file is None):
            raise ValueError("set exactly one of 'private_key' and 'private_key_file'")
        return self


class ApnsProvider(PushProvider):
    """Pushes to APNs device tokens of one app (topic) with one team's key."""

    kind = "apns"
    Options = ApnsOptions
    options: ApnsOptions

    #: The clock of the JWT's ``iat`` and of ``apns-expiration`` (tests move it).
    clock: Callable[[], float] = staticmethod(time.time)

    def __init__(self, name: str, options: Mapping[str, Any], *, redis: redis.Redis, keys: Keys) -> None:
        """Raises InvalidConfig: the options, the key or the ``push`` extra are not there."""
        super().__init__(name, options, redis=redis, keys=keys)
        opts = self.options
        if importlib.util.find_spec("h2") is None:
            raise InvalidConfig(f"[providers.{name}] APNs needs HTTP/2 (the h2 package): {_jwt.EXTRA_HINT}")
        if opts.private_key is not None:
            pem = opts.private_key.get_secret_value()
        else:
            assert opts.private_key_file is not None
            try:
                pem = opts.private_key_file.read_text(encoding="ascii")
            except (OSError, UnicodeDecodeError) as exc:
                raise InvalidConfig(
                    f"[providers.{name}] private_key_file: cannot read it ({type(exc).__name__})"
                ) from None
        self._key = _jwt.es256_key(pem, f"[providers.{name}] private_key")
        self.base_url = (opts.base_url or ENVIRONMENTS[opts.environment]).rstrip("/")
        self._jwt = self.shared_credential(f"{opts.team_id}.{opts.key_id}")
        self._lock = threading.Lock()
        self._http: httpx.Client | None = None
        self._pid = 0

    def _client(self) -> httpx.Client:
        """This provider's HTTP/2 client in this process (a new one after a fork)."""
        with self._lock:
            if self._http is None or self._pid != os.getpid():
                ca_file = self.options.ca_file
                context = ssl.create_default_context(cafile=str(ca_file) if ca_file else None)
                # a client span per request while noti traces (the device token masked in its URL)
                transport = httpx.HTTPTransport(http1=False, http2=True, verify=context)
                self._http = httpx.Client(
                    transport=_http.traced(transport),
                    follow_redirects=False,
                    headers={"user-agent": "noti"},
                )
                self._pid = os.getpid()
            return self._http

    def close(self) -> None:
        with self._lock:
            if self._http is not None and self._pid == os.getpid():
                self._http.close()
            self._http = None

    # --- add time ------------------------------------------------------------------------------

    def check(self, message: Message) -> None:
        """Refuse what APNs would: a target that is not a hex device token, a ``data`` key
        ``aps``, a collapse id over 64 bytes, a payload over 4,096 bytes.

        Raises:
            InvalidInput: ``e.cmd.noti.add.badtarget``, ``badfield`` or ``badcontent``.
        """
        if not _DEVICE_TOKEN.fullmatch(message.target) or len(message.target) % 2:
            raise InvalidInput(
                f"{self.name}: an APNs device token is hex digits (64 for today's devices)",
                code="e.cmd.noti.add.badtarget",
            )
        _, _, data, collapse = push_text(message.fields)
        if "aps" in data:
            raise InvalidInput(
                f"{self.name}: the data key 'aps' is APNs' own (noti writes the alert there)",
                code="e.cmd.noti.add.badcontent",
            )
        if collapse is not None and len(collapse.encode()) > COLLAPSE_MAX_BYTES:
            raise InvalidInput(
                f"{self.name}: an APNs collapse id is at most {COLLAPSE_MAX_BYTES} bytes",
                code="e.cmd.noti.add.badfield",
            )
        size = len(self.payload(message))
        if size > PAYLOAD_MAX:
            raise InvalidInput(
                f"{self.name}: an APNs payload is at most {PAYLOAD_MAX} bytes; this one is {size}",
                code="e.cmd.noti.add.badcontent",
            )

    # --- sending -------------------------------------------------------------------------------

    def payload(self, message: Message) -> bytes:
        """The JSON payload: ``data``'s keys and ``aps.alert``."""
        title, body, data, _ = push_text(message.fields)
        alert = {"body": body} if title is None else {"title": title, "body": body}
        return json.dumps(
            {**data, "aps": {"alert": alert}}, ensure_ascii=False, separators=(",", ":")
        ).encode()

    def headers(self, message: Message, jwt: str) -> dict[str, str]:
        """The request's headers (the JWT is the provider token)."""
        opts = self.options
        _, _, _, collapse = push_text(message.fields)
        expiration = int(self.clock()) + opts.ttl_s if opts.ttl_s else 0
        headers = {
            "authorization": f"bearer {jwt}",
            "apns-topic": opts.topic,
            "apns-push-type": "alert",
            "apns-priority": "10" if opts.high(message.level) else "5",
            "apns-expiration": str(expiration),
            "apns-id": apns_id(message.id),
        }
        if collapse is not None:
            headers["apns-collapse-id"] = collapse
        return headers

    def send(self, message: Message) -> Receipt:
        """Send one push; see the module docstring for the outcome classes."""
        jwt = self._jwt.get(self._make_jwt)
        url = f"{self.base_url}{DEVICE_PATH}{message.target}"
        with _http.map_transport_errors(self.name):
            response = self._client().post(
                url,
                content=self.payload(message),
                headers=self.headers(message, jwt),
                timeout=self.options.timeout_s,
            )
        if response.status_code == 200:
            msgid = response.headers.get("apns-id") or apns_id(message.id)
            log.info("apns %s: %s to %s: %s", message.id, self.name, mask_target(message.target), msgid)
            return Receipt(provider=self.name, msgid=msgid.lower(), raw="HTTP 200")
        raise self.refused(message, self._error(response), self._jwt, jwt)

    def _error(self, response: httpx.Response) -> DeliveryError:
        status = response.status_code
        data = answer_object(response)
        reason = str(data.get("reason") or "")[:100]
        cls = ERRORS.get(reason) or _BY_STATUS.get(status)
        if cls is None:
            cls = AmbiguousOutcome if status >= 500 else ProviderMisconfigured
        vendor_code = reason or f"http.{status}"
        text = f"{self.name}: APNs HTTP {status} {vendor_code}"
        timestamp = data.get("timestamp")
        if status == 410 and isinstance(timestamp, int) and not isinstance(timestamp, bool):
            since = datetime.fromtimestamp(timestamp / 1000, UTC).isoformat(timespec="seconds")
            text += f" (the token is not valid since {since})"
        if reason == "BadDeviceToken":
            text += " (a bad token, or one of the other environment than this provider's)"
        wait_s = retry_after(response)
        if reason == "TooManyProviderTokenUpdates" and wait_s is None:  # a ProviderOutage
            wait_s = TOKEN_UPDATES_WAIT_S
        return self.vendor_error(cls, text, vendor_code, wait_s)

    def _make_jwt(self) -> tuple[str, float]:
        """A new provider token and how long it is reused."""
        opts = self.options
        token = _jwt.sign_jwt(
            {"alg": "ES256", "kid": opts.key_id}, {"iss": opts.team_id, "iat": int(self.clock())}, self._key
        )
        log.info("apns: %s made a provider token for team %s key %s", self.name, opts.team_id, opts.key_id)
        return token, opts.jwt_reuse_s
