"""Tencent Cloud SMS: ``SendSms`` of API 3.0, version 2021-01-11 (shared/providers.md §3).

One record is one ``SendSms`` call for one number: a JSON POST signed with
``TC3-HMAC-SHA256`` (a key derived from the *UTC* date of ``X-TC-Timestamp``, the service
``sms`` and ``tc3_request``; headers ``content-type;host;x-tc-action`` signed, values
lower-cased). The answer is always HTTP 200: ``Response.Error`` when the whole request was
refused, else one ``SendStatusSet`` entry per number, each to be checked — which codes come
back where is not documented, so both places go through one :func:`classify`.

Options (``[providers.<name>]``, ``kind = "tencent"``):

=====================  ==================================  =======================================
option                 default                             meaning
=====================  ==================================  =======================================
``secret_id``          required                            API key SecretId
``secret_key``         required                            its SecretKey (never printed)
``sdk_app_id``         required                            ``SmsSdkAppId``, e.g. ``1400006666``
``sign_name``          none; required for ``mainland``     approved signature content (签名)
``template_id``        required                            approved template id
``template_params``    one of these two is required        names of the variables {1}, {2}, … in
``text_param``                                             order / the one variable plain text fills
``template_scope``     ``mainland``                        ``international`` for a 国际/港澳台 template
``sender_id``          none                                ``SenderId`` (international)
``param_max_chars``    none                                12 for a personal (non-enterprise) account
``region``             ``ap-guangzhou``                    ``X-TC-Region`` (required by this version)
``endpoint``           ``https://sms.tencentcloudapi.com``   API base URL; a path is kept (proxy prefix)
``timeout_s``          10                                  seconds a request may take
``receipt_key``        none: pushed receipts refused       the ``key=`` of the status callback URL
``receipt_poll``       none: poll when no ``receipt_key``  ``true``: poll too; ``false``: never
=====================  ==================================  =======================================

Delivery receipts (the status callback, ``PullSmsSendStatus``) are read by
:mod:`noti.channels.sms.tencent_receipts`.

``TemplateParamSet`` is the parameter values in ``template_params`` order (see
:mod:`noti.channels.sms._templates`); ``TemplateId`` is the record's own template for this
provider's name when its ``template`` field has one, else ``template_id`` — its parameters
then in the JSON object's order, or by number when every key is one (``{"1": …, "2": …}``:
the template's {1}, {2}, …); numbers are sent in E.164 (``+8613912345678``);
``SessionContext`` is the record id. ``SerialNo`` is the receipt's msgid.

A message in doubt (an earlier attempt may have been sent: :mod:`noti.providers._lookup`) is
first looked up with ``PullSmsSendStatusByPhoneNumber`` (:meth:`TencentSmsProvider.look_up`):
found by its ``SessionContext``, the record is done with its ``SerialNo`` and not sent again;
not found, it is sent; a failed pull is an ``UnconfirmedOutcome``.

Outcomes (the ``Code`` of ``Response.Error`` or of our number's ``SendStatusSet`` entry):

==================================================  =============================================
``Ok``                                              ``Receipt(msgid=SerialNo)``
``LimitExceeded.PhoneNumberThirtySecondLimit``      ``RateLimited`` 30 s
``LimitExceeded.PhoneNumberOneHourLimit``           ``RateLimited`` 3,600 s
``LimitExceeded.PhoneNumberDailyLimit``,            ``RateLimited`` 86,400 s (whether "daily" is a
``…SameContentDailyLimit``                          calendar or a rolling day is not documented: a
                                                    full day is right for both)
``LimitExceeded.DeliveryFrequencyLimit``,           ``RateLimited`` 3,600 s (window not stated)
other ``LimitExceeded.PhoneNumber*``
``FailedOperation.MarketingSendTimeConstraint``     ``RateLimited`` until 08:00 Beijing time
app daily caps, balance, arrears, app disabled      ``ProviderOutage``
``FailedOperation.PhoneNumberInBlacklist``          ``RecipientOptedOut`` (unsubscribed / carrier
                                                    do-not-disturb list)
bad number, template parameters, content, mixed     ``PermanentFailure``
or wrong-region batches
``AuthFailure.*`` (keys, signature, clock skew),    ``ProviderMisconfigured``
sign/template not approved, SdkAppId, IP
whitelist, permissions
``InternalError*`` (timeouts, unknown), no entry    ``AmbiguousOutcome``: SendSms is not
for our number, timeouts after sending              idempotent and it may have been accepted
``RequestLimitExceeded*`` (QPS), anything else      ``TemporaryFailure``
==================================================  =============================================
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Self
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, model_validator

from noti.channels.sms import tencent_receipts
from noti.channels.sms._templates import (
    TemplateSmsOptions,
    TemplateSmsProvider,
    template_still_fits,
)
from noti.delivery.state import DeliveryReport, PendingDelivery, ReceiptBatch, ReceiptRequest
from noti.errors import (
    AmbiguousOutcome,
    DeliveryError,
    PermanentFailure,
    ProviderMisconfigured,
    ProviderOutage,
    RateLimited,
    RecipientOptedOut,
    TemporaryFailure,
)
from noti.providers import _http
from noti.providers._lookup import unconfirmed
from noti.providers._sender import pooled_send
from noti.providers.base import Message, Receipt

__all__ = ["ERRORS", "RATE_LIMITS_S", "TencentSmsProvider", "classify", "tc3_authorization"]

SERVICE = "sms"
ACTION = "SendSms"
#: The status look-up of a message in doubt (receipts by number and time).
PULL_ACTION = "PullSmsSendStatusByPhoneNumber"
#: Look-up window: from the record's creation (less a clock slack), at most 7 days back;
#: the rows of one pull (Tencent's maximum; its ``Offset`` is fixed at 0, so one pull is all
#: there is: a full one cannot tell).
LOOKUP_SLACK_S = 60
LOOKUP_MAX_S = 7 * 86400
LOOKUP_PAGE_SIZE = 100
API_VERSION = "2021-01-11"
CONTENT_TYPE = "application/json; charset=utf-8"
#: Beijing time (no daylight saving) and the hour marketing SMS may be sent again.
BEIJING_UTC_OFFSET_S = 8 * 3600
MARKETING_OPENS_AT_S = 8 * 3600

#: Per-recipient frequency limits and the wait for each.
RATE_LIMITS_S: dict[str, float] = {
    "LimitExceeded.PhoneNumberThirtySecondLimit": 30.0,
    "LimitExceeded.PhoneNumberOneHourLimit": 3600.0,
    "LimitExceeded.PhoneNumberDailyLimit": 86400.0,
    "LimitExceeded.PhoneNumberSameContentDailyLimit": 86400.0,
    "LimitExceeded.DeliveryFrequencyLimit": 3600.0,
}
#: Wait for a per-number limit this table does not name.
UNKNOWN_WINDOW_S = 3600.0

ERRORS: dict[str, type[DeliveryError]] = {
    "InternalError.RequestTimeException": ProviderMisconfigured,  # our clock is > 10 min off
    "InternalError.SigFieldMissing": ProviderMisconfigured,
    "InternalError.SigVerificationFail": ProviderMisconfigured,
    "InternalError.RestApiInterfaceNotExist": ProviderMisconfigured,
    "InternalError.JsonParseFail": PermanentFailure,
    "FailedOperation.JsonParseFail": PermanentFailure,
    "FailedOperation.FailResolvePacket": PermanentFailure,
    "LimitExceeded.PhoneNumberCountLimit": PermanentFailure,
    "LimitExceeded.AppDailyLimit": ProviderOutage,
    "LimitExceeded.DailyLimit": ProviderOutage,
    "LimitExceeded.AppMainlandChinaDailyLimit": ProviderOutage,
    "LimitExceeded.AppGlobalDailyLimit": ProviderOutage,
    "LimitExceeded.AppCountryOrRegionDailyLimit": ProviderOutage,
    "FailedOperation.InsufficientBalanceInSmsPackage": ProviderOutage,
    "UnauthorizedOperation.SerivceSuspendDueToArrears": ProviderOutage,
    "UnauthorizedOperation.SdkAppIdIsDisabled": ProviderOutage,
    "FailedOperation.PhoneNumberInBlacklist": RecipientOptedOut,
    "InvalidParameterValue.IncorrectPhoneNumber": PermanentFailure,
    "FailedOperation.PhoneNumberParseFail": PermanentFailure,
    "MissingParameter.EmptyPhoneNumberSet": PermanentFailure,
    "InvalidParameterValue.TemplateParameterFormatError": PermanentFailure,
    "InvalidParameterValue.TemplateParameterLengthLimit": PermanentFailure,
    "InvalidParameterValue.ProhibitedUseUrlInTemplateParameter": PermanentFailure,
    "InvalidParameterValue.ContentLengthLimit": PermanentFailure,
    "InvalidParameter.DirtyWordFound": PermanentFailure,
    "FailedOperation.ContainSensitiveWord": PermanentFailure,
    "FailedOperation.TemplateParamSetNotMatchApprovedTemplate": PermanentFailure,
    "UnsupportedOperation.ContainDomesticAndInternationalPhoneNumber": PermanentFailure,
    "UnsupportedOperation.ChineseMainlandTemplateToGlobalPhone": PermanentFailure,
    "UnsupportedOperation.GlobalTemplateToChineseMainlandPhone": PermanentFailure,
    "UnsupportedOperation.UnsuportedRegion": PermanentFailure,
    "FailedOperation.SignatureIncorrectOrUnapproved": ProviderMisconfigured,
    "FailedOperation.TemplateIncorrectOrUnapproved": ProviderMisconfigured,
    "FailedOperation.TemplateUnapprovedOrNotExist": ProviderMisconfigured,
    "FailedOperation.MissingSignatureList": ProviderMisconfigured,
    "FailedOperation.MissingTemplateList": ProviderMisconfigured,
    "InvalidParameterValue.SdkAppIdNotExist": ProviderMisconfigured,
    "InvalidParameter.AppidAndBizId": ProviderMisconfigured,
    "UnauthorizedOperation.SmsSdkAppIdVerifyFail": ProviderMisconfigured,
    "UnauthorizedOperation.RequestIpNotInWhitelist": ProviderMisconfigured,
    "UnauthorizedOperation.RequestPermissionDeny": ProviderMisconfigured,
    "UnauthorizedOperation.IndividualUserMarketingSmsPermissionDeny": ProviderMisconfigured,
    "InvalidAction": ProviderMisconfigured,
    "NoSuchVersion": ProviderMisconfigured,
    "UnsupportedRegion": ProviderMisconfigured,
}
#: Codes not in :data:`ERRORS`, by prefix (first match).
PREFIXES: tuple[tuple[str, type[DeliveryError]], ...] = (
    ("AuthFailure", ProviderMisconfigured),
    ("UnauthorizedOperation", ProviderMisconfigured),
    ("MissingParameter", ProviderMisconfigured),
    ("InternalError", AmbiguousOutcome),
    ("RequestLimitExceeded", TemporaryFailure),
    ("InvalidParameter", PermanentFailure),
    ("UnsupportedOperation", PermanentFailure),
)


def _sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def tc3_authorization(
    *,
    secret_id: str,
    secret_key: str,
    service: str,
    timestamp: int,
    headers: Mapping[str, str],
    payload: bytes,
    method: str = "POST",
) -> str:
    """The ``Authorization`` header of a TC3-HMAC-SHA256 request that signs ``headers``."""
    signed = {name.lower(): value.strip().lower() for name, value in headers.items()}
    names = sorted(signed)
    canonical_headers = "".join(f"{name}:{signed[name]}\n" for name in names)
    signed_headers = ";".join(names)
    canonical_request = f"{method}\n/\n\n{canonical_headers}\n{signed_headers}\n{_sha256_hex(payload)}"
    date = time.strftime("%Y-%m-%d", time.gmtime(timestamp))
    scope = f"{date}/{service}/tc3_request"
    string_to_sign = f"TC3-HMAC-SHA256\n{timestamp}\n{scope}\n{_sha256_hex(canonical_request.encode())}"
    key = _hmac(_hmac(_hmac(f"TC3{secret_key}".encode(), date), service), "tc3_request")
    signature = hmac.new(key, string_to_sign.encode(), hashlib.sha256).hexdigest()
    return (
        f"TC3-HMAC-SHA256 Credential={secret_id}/{scope}, "
        f"SignedHeaders={signed_headers}, Signature={signature}"
    )


def marketing_wait_s(now_s: float) -> float:
    """Seconds from ``now_s`` until the next 08:00 Beijing time (at least 60)."""
    into_day = (now_s + BEIJING_UTC_OFFSET_S) % 86400
    return max(60.0, (MARKETING_OPENS_AT_S - into_day) % 86400)


def classify(code: str, message: str, *, provider: str = "", now_s: float | None = None) -> DeliveryError:
    """The outcome class of a ``Code`` that is not ``Ok`` (see the module docstring)."""
    text = f"{provider}: {code}: {message[:300]}"
    wait_s = RATE_LIMITS_S.get(code)
    if wait_s is None and code.startswith("LimitExceeded.PhoneNumber") and code not in ERRORS:
        wait_s = UNKNOWN_WINDOW_S
    if code == "FailedOperation.MarketingSendTimeConstraint":
        wait_s = marketing_wait_s(time.time() if now_s is None else now_s)
    if wait_s is not None:
        return RateLimited(
            f"{text} (recipient flow control; waiting {wait_s:.0f} s)",
            retry_after_s=wait_s,
            provider=provider,
            vendor_code=code,
        )
    known = ERRORS.get(code)
    if known is None:
        known = next((cls for prefix, cls in PREFIXES if code.startswith(prefix)), TemporaryFailure)
    return known(text, provider=provider, vendor_code=code)


class TencentOptions(TemplateSmsOptions):
    secret_id: str = Field(min_length=1)
    secret_key: SecretStr
    sdk_app_id: str = Field(pattern=r"^[0-9]{1,20}$")
    sign_name: str | None = None
    template_id: str = Field(min_length=1)
    sender_id: str | None = None
    region: str = Field(default="ap-guangzhou", min_length=1)
    endpoint: str = Field(default="https://sms.tencentcloudapi.com", pattern=_http.BASE_URL)

    @model_validator(mode="after")
    def _sendable(self) -> Self:
        if self.param_names() is None:
            raise ValueError(
                "set template_params (the template's variables in order) or text_param "
                "(its only variable); a template without variables takes template_params = []"
            )
        if self.template_scope == "mainland" and not self.sign_name and self.sender_pool is None:
            raise ValueError("sign_name (or sender_pool) is required for a mainland template")
        return self


class TencentSmsProvider(TemplateSmsProvider):
    """Sends SMS templates through Tencent Cloud's ``SendSms`` (2021-01-11; the
    ``X-TC-Timestamp`` from :attr:`clock`)."""

    kind = "tencent"
    Options = TencentOptions
    options: TencentOptions

    def vendor_number(self, kind: Literal["mainland", "international"], number: str) -> str:
        """Every number in E.164."""
        return f"+86{number}" if kind == "mainland" else number

    def request_body(self, message: Message) -> dict[str, Any]:
        """The ``SendSms`` request body for ``message``.

        Raises:
            InvalidInput: the message no longer fits the (changed) settings.
        """
        opts = self.options
        own = self.template_of(message)
        values = self.values(message)
        if own is not None and all(key.isdecimal() for key in values):
            values = dict(sorted(values.items(), key=lambda item: int(item[0])))
        body: dict[str, Any] = {
            "PhoneNumberSet": [self._number(message.target)],
            "SmsSdkAppId": opts.sdk_app_id,
            "TemplateId": own or opts.template_id,
            "TemplateParamSet": list(values.values()),
            "SessionContext": message.id,
        }
        sign_name, sender_id = opts.sign_name, opts.sender_id
        if message.sender is not None:  # from the pool: the sign (mainland) or SenderId
            if opts.template_scope == "mainland":
                sign_name = message.sender
            else:
                sender_id = message.sender
        if sign_name:
            body["SignName"] = sign_name
        if sender_id:
            body["SenderId"] = sender_id
        return body

    def signed_headers(self, payload: bytes, *, timestamp: int, action: str = ACTION) -> dict[str, str]:
        """Every header of an ``action`` request carrying ``payload``, ``Authorization`` included."""
        opts = self.options
        signed = {
            "content-type": CONTENT_TYPE,
            "host": urlsplit(opts.endpoint).netloc,
            "x-tc-action": action,
        }
        return {
            **signed,
            "x-tc-version": API_VERSION,
            "x-tc-timestamp": str(timestamp),
            "x-tc-region": opts.region,
            "authorization": tc3_authorization(
                secret_id=opts.secret_id,
                secret_key=opts.secret_key.get_secret_value(),
                service=SERVICE,
                timestamp=timestamp,
                headers=signed,
                payload=payload,
            ),
        }

    def _call(self, action: str, body: dict[str, Any], now_s: float) -> tuple[str, dict[str, Any]]:
        """POST a signed ``action``; the ``RequestId`` and the ``Response`` object.

        Raises:
            DeliveryError: the transport failed, the answer is unreadable, or it is an
                ``Error`` (classified).
        """
        payload = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
        headers = self.signed_headers(payload, timestamp=int(now_s), action=action)
        with _http.map_transport_errors(self.name):
            response = _http.client().post(
                _http.join_path(self.options.endpoint, "/"),
                content=payload,
                headers=headers,
                timeout=self.options.timeout_s,
            )
        data = _http.json_object(response, self.name)
        answer = data.get("Response")
        if not isinstance(answer, dict):
            raise AmbiguousOutcome(
                f"{self.name}: HTTP {response.status_code} without a Response object: "
                f"{response.text[:200]!r}",
                provider=self.name,
                vendor_code=f"http.{response.status_code}",
            )
        error = answer.get("Error")
        if isinstance(error, dict):
            raise classify(
                str(error.get("Code") or ""), str(error.get("Message") or ""), provider=self.name, now_s=now_s
            )
        return str(answer.get("RequestId") or ""), answer

    @pooled_send
    def send_new(self, message: Message) -> Receipt:
        with template_still_fits(self.name):
            body = self.request_body(message)
        now_s = self.clock()
        request_id, answer = self._call(ACTION, body, now_s)
        entry = self._status_of(answer.get("SendStatusSet"), body["PhoneNumberSet"][0])
        if entry is None:
            raise AmbiguousOutcome(
                f"{self.name}: no SendStatusSet entry for the number (RequestId={request_id})",
                provider=self.name,
                vendor_code="noti.nostatus",
            )
        code = str(entry.get("Code") or "")
        if code == "Ok":
            serial = entry.get("SerialNo")
            return Receipt(
                provider=self.name, msgid=str(serial) if serial else None, raw=f"RequestId={request_id}"
            )
        raise classify(code, str(entry.get("Message") or ""), provider=self.name, now_s=now_s)

    def look_up(self, message: Message) -> Receipt | None:
        """``PullSmsSendStatusByPhoneNumber`` of the record's number since the record was made
        (at most :data:`LOOKUP_MAX_S` back), matched by ``SessionContext`` (the record id);
        the receipt names its ``SerialNo``. Tencent lists a message once its delivery report
        is in (seconds, usually): a look-up right after the send may miss it, so in-doubt
        records are retried after the back-off (docs/channels/sms-once.md).

        Raises:
            DeliveryError: the pull failed.
        """
        number = self._number_if_sendable(message.target)
        if number is None:
            return None
        now_s = self.clock()
        since_s = message.created_ms / 1000 - LOOKUP_SLACK_S if message.created_ms else now_s - 86400
        body: dict[str, Any] = {
            "BeginTime": int(max(since_s, now_s - LOOKUP_MAX_S)),
            "EndTime": int(now_s + LOOKUP_SLACK_S),
            "Offset": 0,
            "Limit": LOOKUP_PAGE_SIZE,
            "PhoneNumber": number,
            "SmsSdkAppId": self.options.sdk_app_id,
        }
        # Tencent documents Offset as fixed at 0: one page is all a pull can read
        _, answer = self._call(PULL_ACTION, body, now_s)
        rows = answer.get("PullSmsSendStatusSet")
        rows = [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []
        for row in rows:
            if row.get("SessionContext") == message.id:
                serial = row.get("SerialNo")
                return Receipt(
                    provider=self.name,
                    msgid=str(serial) if serial else None,
                    raw=f"PullSmsSendStatusByPhoneNumber: ReportStatus={row.get('ReportStatus')}",
                )
        if len(rows) >= LOOKUP_PAGE_SIZE:  # a full page: the window was not read to its end
            raise unconfirmed(
                self.name,
                f"{len(rows)} or more reports for this number in the window (a pull reads one page)",
                vendor_code="noti.lookup.truncated",
            )
        return None

    def read_pushed(self, request: ReceiptRequest) -> ReceiptBatch:
        """A status callback (:mod:`noti.channels.sms.tencent_receipts`)."""
        return tencent_receipts.read_callback(self.name, request)

    def poll_receipts(self, pending: Sequence[PendingDelivery]) -> list[DeliveryReport]:
        """``PullSmsSendStatus``: every report Tencent has not handed out yet (of any record,
        pending or not: a pulled report is not pulled again), until a pull is not full or
        :data:`~noti.channels.sms.tencent_receipts.MAX_PULLS` were made. Nothing pending: no pull.

        Raises:
            DeliveryError: the first pull failed (a later failure keeps what was pulled).
        """
        if not pending:
            return []
        body = {"Limit": tencent_receipts.PULL_LIMIT, "SmsSdkAppId": self.options.sdk_app_id}
        return tencent_receipts.pull_reports(
            self.name, lambda: self._call(tencent_receipts.PULL_ACTION, body, self.clock())[1]
        )

    @staticmethod
    def _status_of(statuses: object, number: str) -> dict[str, Any] | None:
        """Our number's entry of ``SendStatusSet`` (the only entry, when it names none)."""
        if not isinstance(statuses, list):
            return None
        entries = [s for s in statuses if isinstance(s, dict)]
        for entry in entries:
            if entry.get("PhoneNumber") == number:
                return entry
        if len(entries) == 1 and not entries[0].get("PhoneNumber"):
            return entries[0]
        return None
