"""A fake Firebase Cloud Messaging: Google's OAuth 2.0 token endpoint and FCM HTTP v1's send.

- ``POST /token`` (the service account's ``token_uri``) takes the form ``grant_type =
  urn:ietf:params:oauth:grant-type:jwt-bearer`` and ``assertion``, an RS256 JWT signed with
  the service account's private key, and checks it as Google does: the header's ``kid`` is
  the account's ``private_key_id`` and the signature verifies with its public key (else 400
  ``invalid_grant`` "Invalid JWT Signature."); ``iss`` is the account's ``client_email``
  (else 401 ``invalid_client``); ``aud`` is the token URI; ``scope`` holds
  ``https://www.googleapis.com/auth/firebase.messaging``; ``iat`` is not in the future and
  ``exp`` is after now and at most an hour after ``iat`` (else 400 ``invalid_grant``). It
  answers ``{access_token, expires_in, token_type: "Bearer"}``.
- ``POST /v1/projects/{project_id}/messages:send`` needs ``Authorization: Bearer`` with a
  token the endpoint issued and that has not expired (else 401 ``UNAUTHENTICATED``), the
  account's project (else 403 ``PERMISSION_DENIED``), and a JSON ``message`` with a
  ``token``; ``data`` values must be strings (400 with a ``google.rpc.BadRequest`` naming
  ``message.data[n].value``), ``android.ttl`` a duration ``"<seconds>s"`` of at most 4 weeks,
  ``android.priority`` NORMAL or HIGH, and the payload (``data`` keys and values,
  notification title and body) at most 4,096 bytes. A token that is not an FCM registration
  token is 400 ``INVALID_ARGUMENT`` ("The registration token is not a valid FCM registration
  token"), a token marked :meth:`FcmFake.unregister` is 404 ``UNREGISTERED``, one of another
  sender (:meth:`FcmFake.foreign`) 403 ``SENDER_ID_MISMATCH``. With
  :attr:`FcmFake.device_limit_per_min`, more sends to one token within a minute of the fake's
  clock are 429 ``QUOTA_EXCEEDED`` with ``Retry-After`` (the seconds left in that minute).
  Success is ``{"name": "projects/<p>/messages/<id>"}``.

Errors have Google's ``google.rpc.Status`` shape (``{"error": {code, message, status,
details}}``) with an ``FcmError`` detail naming the ``errorCode`` (:func:`fcm_error`).
Scripted replies (``fake.script``) answer sends; ``fake.token_script`` answers the token
endpoint. The clock is injectable; :meth:`FcmFake.expire_tokens` ends every access token.
"""

from __future__ import annotations

import json
import re
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import parse_qs

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.fakes import _jwt
from tests.fakes._server import FakeServer, Received, Reply

__all__ = ["FCM_SCOPE", "JWT_BEARER", "FcmFake", "fcm_error", "fcm_token", "service_account_key"]

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
FCM_SCOPE = "https://www.googleapis.com/auth/firebase.messaging"
TOKEN_PATH = "/token"
_SEND = re.compile(r"^/v1/projects/([^/]+)/messages:send$")
#: An FCM registration token: an instance id, ``:``, then ``APA91b`` and the token proper.
_REGISTRATION = re.compile(r"^[A-Za-z0-9_-]{8,}:APA91b[A-Za-z0-9_-]{20,}$")
TTL_MAX_S = 2_419_200
PAYLOAD_MAX = 4096

#: google.rpc status of each HTTP code FCM answers.
STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}
#: The HTTP code of each FCM ErrorCode (FCM's reference, ErrorCode).
ERROR_CODES = {
    "INVALID_ARGUMENT": 400,
    "UNREGISTERED": 404,
    "SENDER_ID_MISMATCH": 403,
    "QUOTA_EXCEEDED": 429,
    "UNAVAILABLE": 503,
    "INTERNAL": 500,
    "THIRD_PARTY_AUTH_ERROR": 401,
}
MESSAGES = {
    "INVALID_ARGUMENT": "Request contains an invalid argument.",
    "UNREGISTERED": "Requested entity was not found.",
    "SENDER_ID_MISMATCH": "SenderId mismatch",
    "QUOTA_EXCEEDED": "Quota exceeded for quota metric 'Device messages' of service 'fcm.googleapis.com'",
    "UNAVAILABLE": "The service is currently unavailable.",
    "INTERNAL": "Internal error encountered.",
    "THIRD_PARTY_AUTH_ERROR": "Auth error from APNS or Web Push Service",
}
UNAUTHENTICATED_TEXT = (
    "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie "
    "or other valid authentication credential."
)


def fcm_error(
    error_code: str | None,
    *,
    status: int | None = None,
    message: str | None = None,
    retry_after: str | None = None,
    violations: Sequence[tuple[str, str]] = (),
) -> Reply:
    """FCM's error answer: ``google.rpc.Status`` with an ``FcmError`` detail (none when
    ``error_code`` is None) and a ``google.rpc.BadRequest`` one for ``violations``."""
    code = status or ERROR_CODES.get(error_code or "", 400)
    details: list[dict[str, Any]] = []
    if error_code is not None:
        details.append(
            {"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": error_code}
        )
    if violations:
        details.append(
            {
                "@type": "type.googleapis.com/google.rpc.BadRequest",
                "fieldViolations": [{"field": f, "description": d} for f, d in violations],
            }
        )
    text = message or MESSAGES.get(error_code or "", "Request contains an invalid argument.")
    body = {
        "error": {"code": code, "message": text, "status": STATUS.get(code, "UNKNOWN"), "details": details}
    }
    return Reply(code, body, {"retry-after": retry_after} if retry_after is not None else {})


def _oauth_error(status: int, error: str, description: str) -> Reply:
    return Reply(status, {"error": error, "error_description": description})


def fcm_token(n: int = 0) -> str:
    """A well-formed FCM registration token (distinct for each ``n``)."""
    return f"dQw4w9WgXc{n:04d}:APA91bH" + ("x9Q2" * 36) + f"{n:06d}"


def service_account_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


class FcmFake(FakeServer):
    """Google's token endpoint and FCM's send endpoint for one service account and project."""

    def __init__(
        self,
        key: rsa.RSAPrivateKey | None = None,
        *,
        project_id: str = "noti-push-test",
        client_email: str = "noti-sender@noti-push-test.iam.gserviceaccount.com",
        expires_in: int = 3599,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__()
        self.key = key or service_account_key()
        self.project_id = project_id
        self.client_email = client_email
        self.private_key_id = secrets.token_hex(20)
        self.expires_in = expires_in
        self.clock = clock
        #: Sends over this many to one token within a minute are QUOTA_EXCEEDED (None: no limit).
        self.device_limit_per_min: int | None = None
        #: Messages FCM accepted, each with the ``name`` it answered.
        self.sent: list[dict[str, Any]] = []
        self.token_calls = 0
        self._tokens: dict[str, float] = {}
        self._unregistered: set[str] = set()
        self._foreign: set[str] = set()
        self._per_minute: dict[tuple[str, int], int] = {}
        self._token_script: deque[Reply] = deque()
        self._state = threading.Lock()
        self._ids = 0

    # --- set-up --------------------------------------------------------------------------------

    def service_account(self, **overrides: Any) -> dict[str, Any]:
        """The service account JSON as the Firebase console downloads it, pointing here."""
        pem = self.key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ).decode()
        account = {
            "type": "service_account",
            "project_id": self.project_id,
            "private_key_id": self.private_key_id,
            "private_key": pem,
            "client_email": self.client_email,
            "client_id": "109876543210987654321",
            "auth_uri": "https://accounts.google.com/o/oauth2/auth",
            "token_uri": f"{self.url}{TOKEN_PATH}",
            "auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
            "client_x509_cert_url": "https://www.googleapis.com/robot/v1/metadata/x509/noti-sender",
            "universe_domain": "googleapis.com",
        }
        account.update(overrides)
        return account

    def unregister(self, token: str) -> None:
        """The app instance of ``token`` is gone: sends to it are 404 UNREGISTERED."""
        with self._state:
            self._unregistered.add(token)

    def foreign(self, token: str) -> None:
        """``token`` belongs to another sender: sends to it are 403 SENDER_ID_MISMATCH."""
        with self._state:
            self._foreign.add(token)

    def expire_tokens(self) -> None:
        """Every access token issued so far expires now."""
        with self._state:
            self._tokens = dict.fromkeys(self._tokens, 0.0)

    def token_script(self, *replies: Reply) -> None:
        """Answer the next token requests with these replies (after the assertion's checks)."""
        with self._state:
            self._token_script.extend(replies)

    @property
    def send_calls(self) -> list[Received]:
        return [r for r in self.requests if r.path != TOKEN_PATH]

    @property
    def issued(self) -> list[str]:
        with self._state:
            return list(self._tokens)

    # --- the token endpoint --------------------------------------------------------------------

    def _token(self, received: Received) -> Reply:
        with self._state:
            self.token_calls += 1
        if not received.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
            return _oauth_error(400, "invalid_request", "Invalid Content-Type")
        form = parse_qs(received.body.decode(errors="replace"))
        grant = form.get("grant_type", [""])[0]
        if grant != JWT_BEARER:
            return _oauth_error(400, "unsupported_grant_type", f"Invalid grant_type: {grant}")
        assertion = form.get("assertion", [""])[0]
        refusal = self._check_assertion(assertion)
        if refusal is not None:
            return refusal
        with self._state:
            scripted = self._token_script.popleft() if self._token_script else None
        if scripted is not None:
            return scripted
        token = "ya29.c." + secrets.token_urlsafe(48)
        with self._state:
            self._tokens[token] = self.clock() + self.expires_in
        return Reply(200, {"access_token": token, "expires_in": self.expires_in, "token_type": "Bearer"})

    def _check_assertion(self, assertion: str) -> Reply | None:
        try:
            decoded, _, _ = _jwt.decode(assertion)
        except _jwt.BadToken:
            return _oauth_error(400, "invalid_grant", "Invalid JWT: malformed assertion.")
        if decoded.claims.get("iss") != self.client_email:
            return _oauth_error(401, "invalid_client", "The OAuth client was not found.")
        if decoded.header.get("kid") != self.private_key_id:
            return _oauth_error(400, "invalid_grant", "Invalid JWT Signature.")
        try:
            _jwt.verify(assertion, self.key.public_key(), "RS256")
        except _jwt.BadToken:
            return _oauth_error(400, "invalid_grant", "Invalid JWT Signature.")
        claims = decoded.claims
        if claims.get("aud") != f"{self.url}{TOKEN_PATH}":
            return _oauth_error(400, "invalid_grant", "Invalid JWT: Failed audience check.")
        scope = claims.get("scope")
        if not isinstance(scope, str) or FCM_SCOPE not in scope.split():
            return _oauth_error(400, "invalid_scope", "Invalid OAuth scope or ID token audience provided.")
        iat, exp, now = claims.get("iat"), claims.get("exp"), self.clock()
        if (
            not isinstance(iat, int)
            or not isinstance(exp, int)
            or iat > now + 60
            or exp <= now
            or exp - iat > 3600
        ):
            return _oauth_error(
                400,
                "invalid_grant",
                "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable "
                "timeframe. Check your iat and exp values in the JWT claim.",
            )
        return None

    # --- the send endpoint ---------------------------------------------------------------------

    def verify(self, received: Received) -> Reply | None:
        if received.path == TOKEN_PATH and received.method == "POST":
            return self._token(received)
        matched = _SEND.match(received.path)
        if received.method != "POST" or matched is None:
            return Reply(
                404, "<!DOCTYPE html><title>Error 404 (Not Found)</title>", {"content-type": "text/html"}
            )
        auth = received.headers.get("authorization", "")
        with self._state:
            expiry = self._tokens.get(auth.removeprefix("Bearer ")) if auth.startswith("Bearer ") else None
        if expiry is None or expiry <= self.clock():
            return fcm_error(None, status=401, message=UNAUTHENTICATED_TEXT)
        if matched.group(1) != self.project_id:
            return fcm_error(
                None,
                status=403,
                message=f"Permission 'cloudmessaging.messages.create' denied on resource "
                f"'//cloudresourcemanager.googleapis.com/projects/{matched.group(1)}' (or it may not exist).",
            )
        try:
            message = json.loads(received.body)["message"]
            assert isinstance(message, dict)
        except (ValueError, KeyError, TypeError, AssertionError):
            return fcm_error(None, status=400, violations=[("message", "Invalid JSON payload received.")])
        return self._check_message(message)

    def _check_message(self, message: dict[str, Any]) -> Reply | None:
        token = message.get("token")
        if not isinstance(token, str) or not token:
            return fcm_error(
                None, status=400, violations=[("message", "Recipient of the message is not set.")]
            )
        data = message.get("data") or {}
        for n, (key, value) in enumerate(data.items()):
            if not isinstance(value, str):
                text = f"Invalid value at 'message.data[{n}].value' (TYPE_STRING), {json.dumps(value)}"
                return fcm_error(
                    None, status=400, message=text, violations=[(f"message.data[{n}].value", text)]
                )
            if key in ("from", "gcm") or key.lower().startswith("google"):
                return fcm_error("INVALID_ARGUMENT", message=f"Invalid data payload key: {key}")
        android = message.get("android") or {}
        ttl = android.get("ttl")
        if ttl is not None and (
            not isinstance(ttl, str)
            or not re.fullmatch(r"\d+(\.\d{1,9})?s", ttl)
            or float(ttl[:-1]) > TTL_MAX_S
        ):
            return fcm_error(None, status=400, violations=[("message.android.ttl", "Invalid TTL")])
        if android.get("priority", "NORMAL") not in ("NORMAL", "HIGH"):
            return fcm_error(None, status=400, violations=[("message.android.priority", "Invalid value")])
        notification = message.get("notification") or {}
        size = sum(len(str(k).encode()) + len(str(v).encode()) for k, v in data.items())
        size += sum(len(str(notification.get(k, "")).encode()) for k in ("title", "body"))
        if size > PAYLOAD_MAX:
            return fcm_error("INVALID_ARGUMENT", message="Message is too big")
        if not _REGISTRATION.match(token):
            return fcm_error(
                "INVALID_ARGUMENT", message="The registration token is not a valid FCM registration token"
            )
        with self._state:
            if token in self._unregistered:
                return fcm_error("UNREGISTERED")
            if token in self._foreign:
                return fcm_error("SENDER_ID_MISMATCH")
            if self.device_limit_per_min is not None:
                now = self.clock()
                minute = (token, int(now // 60))
                self._per_minute[minute] = self._per_minute.get(minute, 0) + 1
                if self._per_minute[minute] > self.device_limit_per_min:
                    return fcm_error("QUOTA_EXCEEDED", retry_after=str(max(1, 60 - int(now % 60))))
        return None

    def succeed(self, received: Received) -> Reply:
        message = received.json()["message"]
        with self._state:
            self._ids += 1
            name = f"projects/{self.project_id}/messages/0:{int(self.clock() * 1000)}%{self._ids:016x}"
            self.sent.append({**message, "name": name})
        return Reply(200, {"name": name})
