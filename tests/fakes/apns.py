"""A fake Apple Push Notification service (HTTP/2 over TLS: :mod:`tests.fakes._h2`).

``POST /3/device/<device token>`` is checked as APNs documents it ("Handling notification
responses from APNs"), each refusal being its HTTP status and ``{"reason": …}``:

- 405 ``MethodNotAllowed``; 404 ``BadPath``; 400 ``DuplicateHeaders`` (a header sent twice).
- ``authorization: bearer <JWT>``: missing → 403 ``MissingProviderToken``; not an ES256 JWT
  whose header ``kid`` is a key of the team, whose signature verifies with that key and
  whose ``iss`` is the team id → 403 ``InvalidProviderToken``; ``iat`` more than an hour
  old → 403 ``ExpiredProviderToken``. A JWT the fake has not seen before is a *token
  update*: a second one within 20 minutes of the last (fake clock) is 429
  ``TooManyProviderTokenUpdates`` (``token_updates`` counts the accepted ones).
- ``apns-topic``: missing → 400 ``MissingTopic``; not a bundle id → ``BadTopic``; not one of
  the team's topics → ``TopicDisallowed``; a device token of another app (:meth:`ApnsFake.for_topic`)
  → ``DeviceTokenNotForTopic``.
- ``apns-push-type`` one of Apple's types (else ``InvalidPushType``); ``apns-priority`` 10, 5
  or 1 (``background`` pushes 5 or 1) else ``BadPriority``; ``apns-expiration`` an integer
  (``BadExpirationDate``); ``apns-collapse-id`` at most 64 bytes (``BadCollapseId``);
  ``apns-id`` a canonical UUID (``BadMessageId``), echoed in the answer's ``apns-id`` header,
  one made up when absent.
- The device token: 64 hex digits, and not a token of the other environment
  (:meth:`ApnsFake.other_environment`), else 400 ``BadDeviceToken``; marked
  :meth:`ApnsFake.unregister` → 410 ``Unregistered`` with ``timestamp`` (ms). The payload:
  empty → 400 ``PayloadEmpty``, over 4,096 bytes → 413 ``PayloadTooLarge``.
- :attr:`ApnsFake.device_limit_per_min`: more pushes to one device token within a minute are
  429 ``TooManyRequests``.

Success is 200 with an empty body and the ``apns-id`` header. :func:`apns_error` builds the
other documented answers (500 ``InternalServerError``, 503 ``ServiceUnavailable``…) for
``fake.script``. The clock is injectable.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from tests.fakes import _jwt
from tests.fakes._h2 import H2FakeServer
from tests.fakes._server import Received, Reply
from tests.fakes._tls import Tls

__all__ = ["BUNDLE_ID", "KEY_ID", "TEAM_ID", "ApnsFake", "apns_error", "device_token"]

TEAM_ID = "ABCDE12345"
KEY_ID = "KEY1234567"
BUNDLE_ID = "com.example.noti"
PAYLOAD_MAX = 4096
TOKEN_MAX_AGE_S = 3600
TOKEN_UPDATE_SPACING_S = 1200
PUSH_TYPES = frozenset(
    {
        "alert",
        "background",
        "location",
        "voip",
        "complication",
        "fileprovider",
        "mdm",
        "liveactivity",
        "pushtotalk",
        "widgets",
        "controls",
    }
)
_DEVICE = re.compile(r"^/3/device/([^/]*)$")
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_BUNDLE = re.compile(r"^[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+(\.voip|\.complication|\.push-type\.[a-z]+)?$")
#: The HTTP status of each documented reason.
STATUS = {
    "BadCollapseId": 400,
    "BadDeviceToken": 400,
    "BadExpirationDate": 400,
    "BadMessageId": 400,
    "BadPriority": 400,
    "BadTopic": 400,
    "DeviceTokenNotForTopic": 400,
    "DuplicateHeaders": 400,
    "IdleTimeout": 400,
    "InvalidPushType": 400,
    "MissingDeviceToken": 400,
    "MissingTopic": 400,
    "PayloadEmpty": 400,
    "TopicDisallowed": 400,
    "BadCertificate": 403,
    "BadCertificateEnvironment": 403,
    "ExpiredProviderToken": 403,
    "Forbidden": 403,
    "InvalidProviderToken": 403,
    "MissingProviderToken": 403,
    "UnrelatedKeyIdInToken": 403,
    "BadEnvironmentKeyInToken": 403,
    "BadPath": 404,
    "MethodNotAllowed": 405,
    "ExpiredToken": 410,
    "Unregistered": 410,
    "PayloadTooLarge": 413,
    "TooManyProviderTokenUpdates": 429,
    "TooManyRequests": 429,
    "InternalServerError": 500,
    "ServiceUnavailable": 503,
    "Shutdown": 503,
}


def apns_error(reason: str, *, timestamp_ms: int | None = None, retry_after: str | None = None) -> Reply:
    """APNs' answer for ``reason``: its status and ``{"reason"}`` (410: with ``timestamp``)."""
    body: dict[str, Any] = {"reason": reason}
    status = STATUS[reason]
    if status == 410:
        body["timestamp"] = timestamp_ms if timestamp_ms is not None else int(time.time() * 1000)
    return Reply(status, body, {"retry-after": retry_after} if retry_after is not None else {})


def device_token(n: int = 0) -> str:
    """A well-formed APNs device token (64 hex digits, distinct for each ``n``)."""
    return f"{n:08x}" + "a1b2c3d4" * 7


class ApnsFake(H2FakeServer):
    """APNs for one team: its signing keys (key id -> P-256 key) and its apps' topics."""

    def __init__(
        self,
        tls: Tls,
        *,
        team_id: str = TEAM_ID,
        keys: dict[str, ec.EllipticCurvePrivateKey] | None = None,
        topics: Iterable[str] = (BUNDLE_ID,),
        environment: str = "production",
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(tls)
        self.team_id = team_id
        self.keys = keys or {KEY_ID: ec.generate_private_key(ec.SECP256R1())}
        self.topics = set(topics)
        self.environment = environment
        self.clock = clock
        self.device_limit_per_min: int | None = None
        #: Pushes APNs accepted: device token, headers, payload (JSON), apns-id.
        self.sent: list[dict[str, Any]] = []
        self.token_updates = 0
        #: The least time between two provider-token updates of the team.
        self.token_update_spacing_s = float(TOKEN_UPDATE_SPACING_S)
        self._seen_jwts: set[str] = set()
        self._last_update: float | None = None
        self._unregistered: dict[str, int] = {}
        self._other_env: set[str] = set()
        self._token_topic: dict[str, str] = {}
        self._per_minute: dict[tuple[str, int], int] = {}
        self._state = threading.Lock()

    # --- set-up --------------------------------------------------------------------------------

    def p8(self, key_id: str = KEY_ID) -> str:
        """The ``.p8`` file Apple lets the team download for ``key_id`` (PKCS #8 PEM)."""
        return (
            self.keys[key_id]
            .private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
            .decode()
        )

    def unregister(self, token: str, at_ms: int | None = None) -> None:
        """The app was removed from the device of ``token``: 410 Unregistered from now."""
        with self._state:
            self._unregistered[token] = at_ms if at_ms is not None else int(self.clock() * 1000)

    def other_environment(self, token: str) -> None:
        """``token`` is a token of the other environment (sandbox vs production): BadDeviceToken."""
        with self._state:
            self._other_env.add(token)

    def for_topic(self, token: str, topic: str) -> None:
        """``token`` belongs to the app ``topic``: pushes to it under another topic are refused."""
        with self._state:
            self._token_topic[token] = topic

    def forget_token_updates(self) -> None:
        """As if the last provider-token update were long ago."""
        with self._state:
            self._last_update = None

    # --- checks --------------------------------------------------------------------------------

    def _next(self, received: Received) -> Reply:
        reply = super()._next(received)
        apns_id = received.headers.get("apns-id")
        if apns_id is None or not _UUID.match(apns_id):
            apns_id = str(uuid.uuid4()).upper()
        headers = {"apns-id": apns_id, **reply.headers}
        if self.environment == "sandbox":
            headers.setdefault("apns-unique-id", str(uuid.uuid4()))
        return Reply(reply.status, reply.body, headers, hang_s=reply.hang_s, close=reply.close)

    def verify(self, received: Received) -> Reply | None:
        if received.method != "POST":
            return apns_error("MethodNotAllowed")
        matched = _DEVICE.match(received.path)
        if matched is None:
            return apns_error("BadPath")
        if any("\n" in value for value in received.headers.values()):
            return apns_error("DuplicateHeaders")
        refusal = self._check_jwt(received.headers.get("authorization"))
        if refusal is not None:
            return refusal
        return self._check_headers(received.headers) or self._check_push(matched.group(1), received)

    def _check_jwt(self, authorization: str | None) -> Reply | None:
        if not authorization:
            return apns_error("MissingProviderToken")
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token:
            return apns_error("InvalidProviderToken")
        try:
            decoded, _, _ = _jwt.decode(token)
            key = self.keys.get(str(decoded.header.get("kid")))
            if key is None:
                raise _jwt.BadToken("unknown kid")
            _jwt.verify(token, key.public_key(), "ES256")
        except _jwt.BadToken:
            return apns_error("InvalidProviderToken")
        iat, now = decoded.claims.get("iat"), self.clock()
        if decoded.claims.get("iss") != self.team_id or not isinstance(iat, int) or iat > now + 60:
            return apns_error("InvalidProviderToken")
        if now - iat > TOKEN_MAX_AGE_S:
            return apns_error("ExpiredProviderToken")
        with self._state:
            if token not in self._seen_jwts:
                if self._last_update is not None and now - self._last_update < self.token_update_spacing_s:
                    return apns_error("TooManyProviderTokenUpdates")
                self._seen_jwts.add(token)
                self._last_update = now
                self.token_updates += 1
        return None

    def _check_headers(self, headers: dict[str, str]) -> Reply | None:
        topic = headers.get("apns-topic")
        if not topic:
            return apns_error("MissingTopic")
        if not _BUNDLE.match(topic):
            return apns_error("BadTopic")
        if topic not in self.topics:
            return apns_error("TopicDisallowed")
        push_type = headers.get("apns-push-type", "alert")
        if push_type not in PUSH_TYPES:
            return apns_error("InvalidPushType")
        priority = headers.get("apns-priority", "10" if push_type != "background" else "5")
        if priority not in ("10", "5", "1") or (push_type == "background" and priority == "10"):
            return apns_error("BadPriority")
        if not re.fullmatch(r"\d{1,10}", headers.get("apns-expiration", "0")):
            return apns_error("BadExpirationDate")
        if len(headers.get("apns-collapse-id", "").encode()) > 64:
            return apns_error("BadCollapseId")
        if "apns-id" in headers and not _UUID.match(headers["apns-id"]):
            return apns_error("BadMessageId")
        return None

    def _check_push(self, token: str, received: Received) -> Reply | None:
        if not token:
            return apns_error("MissingDeviceToken")
        if not re.fullmatch(r"[0-9a-fA-F]{64}", token):
            return apns_error("BadDeviceToken")
        if not received.body:
            return apns_error("PayloadEmpty")
        if len(received.body) > PAYLOAD_MAX:
            return apns_error("PayloadTooLarge")
        with self._state:
            if token in self._other_env:
                return apns_error("BadDeviceToken")
            owner = self._token_topic.get(token)
            if owner is not None and owner != received.headers["apns-topic"]:
                return apns_error("DeviceTokenNotForTopic")
            if token in self._unregistered:
                return apns_error("Unregistered", timestamp_ms=self._unregistered[token])
            if self.device_limit_per_min is not None:
                minute = (token, int(self.clock() // 60))
                self._per_minute[minute] = self._per_minute.get(minute, 0) + 1
                if self._per_minute[minute] > self.device_limit_per_min:
                    return apns_error("TooManyRequests")
        return None

    def succeed(self, received: Received) -> Reply:
        token = received.path.rsplit("/", 1)[1]
        try:
            payload = json.loads(received.body)
        except ValueError:
            payload = None
        with self._state:
            self.sent.append(
                {
                    "token": token,
                    "headers": dict(received.headers),
                    "payload": payload,
                    "apns_id": received.headers.get("apns-id"),
                }
            )
        return Reply(200, b"")

    @property
    def push_calls(self) -> list[Received]:
        return list(self.requests)
