"""Firebase Cloud Messaging: pushes through the FCM HTTP v1 API (``docs/channels/push.md``).

One ``POST {api_base}/v1/projects/{project_id}/messages:send`` per attempt, with
``Authorization: Bearer <access token>``. The access token comes from the service account's
``token_uri`` (Google's OAuth 2.0 token endpoint) for an RS256 JWT assertion signed with the
account's private key (``kid`` = ``private_key_id``, ``iss`` = ``client_email``, ``scope`` =
firebase.messaging, ``aud`` = ``token_uri``, an hour's life); it is cached in Redis for every
worker (:mod:`noti.channels.push._credentials`, ``noti:cred:fcm:<client_email>``) for its
``expires_in`` less ``refresh_grace_s``, and dropped when FCM answers 401 UNAUTHENTICATED
(:class:`StaleCredential`: the sender tries once more at once with a new one).

The message: ``token`` = the record's target; ``notification`` = ``title`` and ``body``;
``data`` = the record's ``data`` (FCM takes only string values: :meth:`FcmProvider.check`
refuses others at add time, so nothing is converted behind the app's back); ``android``:
``priority`` HIGH from ``high_level`` up, else NORMAL, ``ttl`` = ``ttl_s``, ``collapse_key``
= ``collapse``; ``apns`` headers for iOS devices reached through FCM: ``apns-priority`` 10 or
5, ``apns-expiration``, ``apns-collapse-id``. The receipt's msgid is FCM's message ``name``.

Classification (the ``errorCode`` of the ``FcmError`` detail, else the HTTP status):

=========================================  ===========================  ==========================
answer                                     raised                       why
=========================================  ===========================  ==========================
200 with ``name``                          (Receipt)                    accepted
404 UNREGISTERED                           RecipientOptedOut            the app instance is gone:
                                                                        the token is suppressed
400 INVALID_ARGUMENT naming the token      RecipientOptedOut            not a registration token
400 INVALID_ARGUMENT (another field)       PermanentFailure             the message is refused
403 SENDER_ID_MISMATCH                     PermanentFailure             another project's token
429 QUOTA_EXCEEDED                         RateLimited                  ``Retry-After`` (else
                                                                        ``rate_limit_wait_s``)
503 UNAVAILABLE                            ProviderOutage               overloaded; ``Retry-After``
500 INTERNAL, other 5xx                    AmbiguousOutcome             may have been sent
401 THIRD_PARTY_AUTH_ERROR                 ProviderMisconfigured        the APNs / web push
                                                                        credentials in Firebase
401 UNAUTHENTICATED (no errorCode)         StaleCredential              the access token: refreshed
403 / 404 without errorCode, 3xx           ProviderMisconfigured        project id, IAM, api_base
=========================================  ===========================  ==========================

The token endpoint's refusals (``invalid_grant``, ``invalid_client``, ``invalid_scope``) are
:class:`ProviderMisconfigured` (the key, the account or the clock); its failures
:class:`ProviderOutage` (nothing was sent).
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

import httpx
import redis
from pydantic import BaseModel, ConfigDict, Field, FilePath, SecretStr, ValidationError, model_validator

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
from noti.providers.base import Message, Receipt, options_problem

__all__ = ["ERRORS", "FCM_SCOPE", "FcmOptions", "FcmProvider", "ServiceAccount"]

log = logging.getLogger(__name__)

FCM_SCOPE = "https://www.googleapis.com/auth/firebase.messaging"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
#: The life of an assertion (Google takes at most an hour).
ASSERTION_LIFE_S = 3600
#: FCM's limit on a message's payload: data keys and values, notification title and body.
PAYLOAD_MAX = 4096
#: A Google Cloud project id: 6-30 lower-case letters, digits and hyphens.
PROJECT_ID = r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$"
#: Characters of an FCM registration token.
_FCM_TOKEN = re.compile(r"[A-Za-z0-9_:\-]+")
#: Data keys FCM keeps for itself ("from", "gcm", anything starting with "google").
_RESERVED_KEY = re.compile(r"^(from|gcm|google.*)$", re.IGNORECASE)

#: FcmError ``errorCode`` -> outcome class (FCM's reference: ErrorCode).
ERRORS: dict[str, type[DeliveryError]] = {
    "UNSPECIFIED_ERROR": TemporaryFailure,
    "INVALID_ARGUMENT": PermanentFailure,
    "UNREGISTERED": RecipientOptedOut,
    "SENDER_ID_MISMATCH": PermanentFailure,
    "QUOTA_EXCEEDED": RateLimited,
    "UNAVAILABLE": ProviderOutage,
    "INTERNAL": AmbiguousOutcome,
    "THIRD_PARTY_AUTH_ERROR": ProviderMisconfigured,
}


class ServiceAccount(BaseModel):
    """The fields of a Google service account key file noti uses (others are ignored)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    type: str = Field(pattern=r"^service_account$")
    project_id: str = Field(pattern=PROJECT_ID)
    private_key_id: str = Field(pattern=r"^[A-Za-z0-9]{1,128}$")
    private_key: SecretStr
    client_email: str = Field(pattern=r"^[A-Za-z0-9._%+-]{1,128}@[A-Za-z0-9.-]{1,253}$")
    token_uri: str = Field(default="https://oauth2.googleapis.com/token", pattern=_http.BASE_URL)


class FcmOptions(PushOptions):
    #: A service account key file (JSON) from the Firebase console; or …
    service_account_file: FilePath | None = None
    #: … its JSON text inline (a secret).
    service_account: SecretStr | None = None
    #: The Firebase project; default: the service account's.
    project_id: str | None = Field(default=None, pattern=PROJECT_ID)
    api_base: str = Field(default="https://fcm.googleapis.com", pattern=_http.BASE_URL)
    #: An access token is reused for its ``expires_in`` less this.
    refresh_grace_s: float = Field(default=300.0, ge=0, le=1800)

    @model_validator(mode="after")
    def _one_account(self) -> FcmOptions:
        if (self.service_account_file is None) == (self.service_account is None):
            raise ValueError("set exactly one of 'service_account_file' and 'service_account'")
        return self


def _account_json(opts: FcmOptions, name: str) -> dict[str, Any]:
    """The service account JSON the options name; never quoted in an error (it holds the key)."""
    if opts.service_account is not None:
        text, where = opts.service_account.get_secret_value(), "service_account"
    else:
        path = opts.service_account_file
        assert path is not None
        try:
            text, where = path.read_text(encoding="utf-8"), "service_account_file"
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidConfig(
                f"[providers.{name}] service_account_file: cannot read {str(path)!r} ({type(exc).__name__})"
            ) from None
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise InvalidConfig(f"[providers.{name}] {where}: not a service account key (a JSON object)")
    return data


class FcmProvider(PushProvider):
    """Pushes to FCM registration tokens for one Firebase project."""

    kind = "fcm"
    Options = FcmOptions
    options: FcmOptions

    #: The clock of the assertion's ``iat`` and of ``ttl_s`` (tests move it).
    clock: Callable[[], float] = staticmethod(time.time)

    def __init__(self, name: str, options: Mapping[str, Any], *, redis: redis.Redis, keys: Keys) -> None:
        """Raises InvalidConfig: options, the service account or its key are not usable."""
        super().__init__(name, options, redis=redis, keys=keys)
        opts = self.options
        try:
            self.account = ServiceAccount(**_account_json(opts, name))
        except ValidationError as exc:
            raise InvalidConfig(
                options_problem(name, exc).replace(
                    f"[providers.{name}] ", f"[providers.{name}] service account "
                )
            ) from None
        self._key = _jwt.rs256_key(
            self.account.private_key.get_secret_value(), f"[providers.{name}] service account private_key"
        )
        self.project_id = opts.project_id or self.account.project_id
        self.endpoint = _http.join_path(opts.api_base, f"/v1/projects/{self.project_id}/messages:send")
        self._token = self.shared_credential(self.account.client_email)

    # --- add time ------------------------------------------------------------------------------

    def check(self, message: Message) -> None:
        """Refuse what FCM would: a target that is no registration token, non-string ``data``
        values, reserved ``data`` keys, a payload over 4,096 bytes.

        Raises:
            InvalidInput: ``e.cmd.noti.add.badtarget`` or ``e.cmd.noti.add.badcontent``.
        """
        if not _FCM_TOKEN.fullmatch(message.target):
            raise InvalidInput(
                f"{self.name}: an FCM registration token has only letters, digits and _ : -",
                code="e.cmd.noti.add.badtarget",
            )
        title, body, data, _ = push_text(message.fields)
        for key, value in data.items():
            if not isinstance(value, str):
                raise InvalidInput(
                    f"{self.name}: FCM data values must be strings; data.{key} is "
                    f"{type(value).__name__} (send it as text, e.g. {json.dumps(json.dumps(value))[:60]})",
                    code="e.cmd.noti.add.badcontent",
                )
            if _RESERVED_KEY.match(key):
                raise InvalidInput(
                    f"{self.name}: FCM keeps the data key {key!r} for itself (from, gcm, google…)",
                    code="e.cmd.noti.add.badcontent",
                )
        size = sum(len(k.encode()) + len(str(v).encode()) for k, v in data.items())
        size += len(body.encode()) + len((title or "").encode())
        if size > PAYLOAD_MAX:
            raise InvalidInput(
                f"{self.name}: an FCM payload (title, body, data keys and values) is at most "
                f"{PAYLOAD_MAX} bytes; this one is {size}",
                code="e.cmd.noti.add.badcontent",
            )

    # --- sending -------------------------------------------------------------------------------

    def payload(self, message: Message) -> dict[str, Any]:
        """The ``messages:send`` body for ``message``."""
        title, body, data, collapse = push_text(message.fields)
        opts = self.options
        high = opts.high(message.level)
        notification = {"body": body} if title is None else {"title": title, "body": body}
        android: dict[str, Any] = {"priority": "HIGH" if high else "NORMAL", "ttl": f"{opts.ttl_s}s"}
        apns_headers = {
            "apns-priority": "10" if high else "5",
            "apns-expiration": str(int(self.clock()) + opts.ttl_s if opts.ttl_s else 0),
        }
        if collapse is not None:
            android["collapse_key"] = collapse
            apns_headers["apns-collapse-id"] = collapse
        fcm: dict[str, Any] = {
            "token": message.target,
            "notification": notification,
            "android": android,
            "apns": {"headers": apns_headers},
        }
        if data:
            fcm["data"] = {str(k): str(v) for k, v in data.items()}
        return {"message": fcm}

    def send(self, message: Message) -> Receipt:
        """Send one push; see the module docstring for the outcome classes."""
        token = self._token.get(self._fetch_token)
        with _http.map_transport_errors(self.name):
            response = _http.client().post(
                self.endpoint,
                json=self.payload(message),
                headers={"authorization": f"Bearer {token}"},
                timeout=self.options.timeout_s,
            )
        if response.is_success:
            data = _http.json_object(response, self.name)
            name = data.get("name")
            if not isinstance(name, str) or not name:
                raise AmbiguousOutcome(
                    f"{self.name}: HTTP {response.status_code} without a message name",
                    provider=self.name,
                    vendor_code=f"http.{response.status_code}",
                )
            log.info("fcm %s: %s to %s: %s", message.id, self.name, mask_target(message.target), name)
            return Receipt(provider=self.name, msgid=name, raw=f"HTTP {response.status_code}")
        raise self.refused(message, self._error(response), self._token, token)

    def _error(self, response: httpx.Response) -> DeliveryError:
        """The outcome class of an FCM error answer (``google.rpc.Status``)."""
        status = response.status_code
        error = answer_object(response).get("error")
        error = error if isinstance(error, dict) else {}
        raw_details = error.get("details")
        details = [d for d in raw_details if isinstance(d, dict)] if isinstance(raw_details, list) else []
        fcm_code = next((str(d.get("errorCode")) for d in details if "errorCode" in d), None)
        fields = [
            str(v.get("field"))
            for d in details
            for v in (d.get("fieldViolations") or [])
            if isinstance(v, dict)
        ]
        text = str(error.get("message") or response.text[:200])[:300]
        vendor_code = fcm_code or str(error.get("status") or f"http.{status}")
        cls: type[DeliveryError]
        if fcm_code in ERRORS:
            cls = ERRORS[fcm_code]
            if fcm_code == "INVALID_ARGUMENT" and _names_the_token(text, fields):
                cls = RecipientOptedOut
        elif status == 401:
            cls = StaleCredential
        elif status == 429:
            cls = RateLimited
        elif status == 503:
            cls = ProviderOutage
        elif status >= 500 or 200 <= status < 300:
            cls = AmbiguousOutcome
        elif status == 400:
            cls = PermanentFailure if "message.token" not in fields else RecipientOptedOut
        else:
            cls = ProviderMisconfigured
        message = f"{self.name}: FCM HTTP {status} {vendor_code}: {text}"
        return self.vendor_error(cls, message, vendor_code, retry_after(response))

    # --- the access token ----------------------------------------------------------------------

    def assertion(self, now: int) -> str:
        """The signed JWT exchanged for an access token."""
        account = self.account
        return _jwt.sign_jwt(
            {"alg": "RS256", "typ": "JWT", "kid": account.private_key_id},
            {
                "iss": account.client_email,
                "scope": FCM_SCOPE,
                "aud": account.token_uri,
                "iat": now,
                "exp": now + ASSERTION_LIFE_S,
            },
            self._key,
        )

    def _fetch_token(self) -> tuple[str, float]:
        """A new access token and the seconds it may be reused.

        Raises:
            ProviderMisconfigured: the token endpoint refused the assertion.
            ProviderOutage: it could not be asked or did not answer (nothing was sent).
        """
        form = {"grant_type": JWT_BEARER, "assertion": self.assertion(int(self.clock()))}
        where = f"{self.name}: token endpoint"
        try:
            with _http.map_transport_errors(self.name):
                response = _http.client().post(
                    self.account.token_uri, data=form, timeout=self.options.timeout_s
                )
            data = _http.json_object(response, self.name)
        except AmbiguousOutcome as exc:  # nothing was sent to anyone: the token service failed
            raise ProviderOutage(f"{where}: {exc.message}", provider=self.name) from exc
        token, expires_in = data.get("access_token"), data.get("expires_in")
        if response.status_code == 200 and isinstance(token, str) and token and isinstance(expires_in, int):
            grace = self.options.refresh_grace_s
            ttl = expires_in - grace if expires_in > 2 * grace else expires_in / 2
            log.info(
                "fcm: %s fetched an access token for %s (%d s)",
                self.name,
                self.account.client_email,
                expires_in,
            )
            return token, ttl
        code = str(data.get("error") or f"http.{response.status_code}")[:100]
        text = f"{where}: HTTP {response.status_code} {code}: {str(data.get('error_description', ''))[:200]}"
        if response.status_code >= 500 or response.status_code == 429:
            raise ProviderOutage(text, provider=self.name, vendor_code=code)
        raise ProviderMisconfigured(text, provider=self.name, vendor_code=code)


def _names_the_token(text: str, fields: list[str]) -> bool:
    """An INVALID_ARGUMENT about the registration token itself (FCM: "The registration token
    is not a valid FCM registration token"), not about the message's other fields."""
    return "message.token" in fields or (not fields and "registration token" in text.lower())
