"""Aliyun SMS: ``SendSms`` of dysmsapi 2017-05-25 (shared/providers.md §2).

One record is one ``SendSms`` call for one number, POSTed as a form and signed with
signature V1 (``HMAC-SHA1`` over the sorted, twice percent-encoded parameters, key
``AccessKeySecret + "&"``). V1 rather than V3 (``ACS3-HMAC-SHA256``) because its
published worked examples — among them one for this very ``SendSms`` call — let the tests
pin the signer to Aliyun's own answer instead of to our reading of the spec, and because
every parameter, signature included, travels in one form body with no header rules to get
wrong. HMAC-SHA1 is still a sound MAC (SHA-1 collisions do not forge HMACs); moving to V3
would change :func:`sign_v1` and the headers only.

Options (``[providers.<name>]``, ``kind = "aliyun"``):

=====================  ===============================  ==========================================
option                 default                          meaning
=====================  ===============================  ==========================================
``access_key_id``      required                         AccessKey ID (a RAM user's, ideally)
``access_key_secret``  required                         its secret (never printed)
``sign_name``          required (or ``sender_pool``)    approved signature (签名)
``template_code``      required                         approved template, ``SMS_…``
``template_params``    none                             the template's variable names
``text_param``         none                             the variable plain text fills
``template_scope``     ``mainland``                     ``international`` for a 国际/港澳台 template
``param_max_chars``    none                             refuse longer parameter values at add
``endpoint``           ``https://dysmsapi.aliyuncs.com``  API base URL; a path is kept (a proxy prefix)
``region``             ``cn-hangzhou``                  ``RegionId``
``sender_pool``        none                             take ``SignName`` from this number pool
                                                        (:mod:`noti.providers._sender`)
``timeout_s``          10                               seconds a request may take
``receipt_key``        none: pushed receipts refused    the ``key=`` of the SmsReport push URL
``receipt_poll``       none: poll without receipt_key   ``true``: poll too; ``false``: never
=====================  ===============================  ==========================================

Delivery receipts (SmsReport pushes, ``QuerySendDetails`` polls) are read by
:mod:`noti.channels.sms.aliyun_receipts` and :meth:`AliyunSmsProvider.poll_receipts`.

The text becomes ``TemplateParam``, a JSON *string* of string values (see
:mod:`noti.channels.sms._templates`); ``TemplateCode`` is the record's own template for this
provider's name when its ``template`` field has one, else ``template_code``. Numbers go out
as Aliyun wants them: mainland mobiles as 11 digits, international ones as country code +
number without ``+``. ``OutId`` is the record id, so receipts and ``QuerySendDetails`` name
the record. ``BizId`` is the receipt's msgid.

A message in doubt (an earlier attempt may have been sent: :mod:`noti.providers._lookup`) is
first looked up with ``QuerySendDetails`` (:meth:`AliyunSmsProvider.look_up`): found by its
``OutId``, the record is done without a second ``SendSms`` (no ``BizId``: the details carry
none); not found, it is sent; a failed query is an ``UnconfirmedOutcome``.

Outcomes (``Code``; HTTP 200 unless said):

==========================================  =======================================================
``OK``                                      delivered to Aliyun: ``Receipt(msgid=BizId)``
``isv.BUSINESS_LIMIT_CONTROL``              ``RateLimited`` for the window the message names:
                                            分钟级 60 s, 小时级 3,600 s, 天级 86,400 s (the windows
                                            roll, so only a full window is sure to have let the
                                            oldest counted send out); no window named: 3,600 s
``isv.DAY_LIMIT_CONTROL``,                  ``ProviderOutage``: the whole account cannot send
``isv.MONTH_LIMIT_CONTROL``,
``isv.AMOUNT_NOT_ENOUGH``,
``isv.OUT_OF_SERVICE``,
``isv.ACCOUNT_ABNORMAL``
sign/template not approved, RAM, IP,        ``ProviderMisconfigured``
product not opened; gateway
``SignatureDoesNotMatch``,
``InvalidAccessKeyId.*``,
``InvalidTimeStamp.*`` (clock)
bad number, bad or missing parameters,      ``PermanentFailure``
forbidden content
``isv.BLACK_KEY_CONTROL_LIMIT``             ``RecipientOptedOut`` when the message speaks of the
                                            number (号码/手机/退订/number/unsubscribe), else
                                            ``PermanentFailure`` (a blacklisted keyword)
``isp.SYSTEM_ERROR``; gateway               ``AmbiguousOutcome``: SendSms is not idempotent and
``InternalError`` (500) and other 5xx;      it may have been accepted
timeouts after sending; unreadable answers
gateway ``Throttling*`` (QPS),              ``TemporaryFailure`` (at least ``Retry-After``)
``SignatureNonceUsed``,
``ServiceUnavailable`` (503), other codes
==========================================  =======================================================
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal, Self
from urllib.parse import quote

import httpx
from pydantic import Field, SecretStr, model_validator

from noti.channels.sms import aliyun_receipts
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
    UnconfirmedOutcome,
)
from noti.providers import _http
from noti.providers._lookup import unconfirmed
from noti.providers._receipts import poll_each
from noti.providers._sender import pooled_send
from noti.providers.base import Message, Receipt

__all__ = ["ERRORS", "AliyunSmsProvider", "beijing_days", "classify", "limit_window_s", "sign_v1"]

API_VERSION = "2017-05-25"
#: Waits for ``isv.BUSINESS_LIMIT_CONTROL``, by the window its message names (first match).
LIMIT_WINDOWS_S: tuple[tuple[str, float], ...] = (
    ("分钟", 60.0),
    ("minute", 60.0),
    ("小时", 3600.0),
    ("hour", 3600.0),
    ("天", 86400.0),
    ("day", 86400.0),
)
#: Beijing time, whose calendar day ``QuerySendDetails``' ``SendDate`` names.
BEIJING_UTC_OFFSET_S = 8 * 3600
#: ``QuerySendDetails`` keeps 30 days; a look-up asks at most this many days back.
LOOKUP_DAYS = 30
#: Rows per ``QuerySendDetails`` page (Aliyun's maximum) and pages read per day at most.
LOOKUP_PAGE_SIZE = 50
LOOKUP_MAX_PAGES = 20
#: A poll asks the Beijing days of the send's time, give or take this (clocks differ).
POLL_SLACK_S = 60
#: Wait for a flow-control message that names no window we know.
UNKNOWN_WINDOW_S = 3600.0
#: Words in an ``isv.BLACK_KEY_CONTROL_LIMIT`` message that make it the number's blacklist.
NUMBER_BLACKLIST_WORDS = ("号码", "手机", "退订", "number", "mobile", "unsubscri")

ERRORS: dict[str, type[DeliveryError]] = {
    "isp.SYSTEM_ERROR": AmbiguousOutcome,
    "isv.DAY_LIMIT_CONTROL": ProviderOutage,
    "isv.MONTH_LIMIT_CONTROL": ProviderOutage,
    "isv.AMOUNT_NOT_ENOUGH": ProviderOutage,
    "isv.OUT_OF_SERVICE": ProviderOutage,
    "isv.ACCOUNT_ABNORMAL": ProviderOutage,
    "isv.MOBILE_NUMBER_ILLEGAL": PermanentFailure,
    "isv.MOBILE_COUNT_OVER_LIMIT": PermanentFailure,
    "isv.TEMPLATE_MISSING_PARAMETERS": PermanentFailure,
    "isv.INVALID_JSON_PARAM": PermanentFailure,
    "isv.PARAM_LENGTH_LIMIT": PermanentFailure,
    "isv.PARAM_NOT_SUPPORT_URL": PermanentFailure,
    "isv.SMS_CONTENT_ILLEGAL": PermanentFailure,
    "isv.INVALID_PARAMETERS": PermanentFailure,
    "isv.SMS_SIGNATURE_ILLEGAL": ProviderMisconfigured,
    "isv.SMS_TEMPLATE_ILLEGAL": ProviderMisconfigured,
    "isv.SMS_SIGN_ILLEGAL": ProviderMisconfigured,
    "isv.SMS_SIGNATURE_SCENE_ILLEGAL": ProviderMisconfigured,
    "isp.RAM_PERMISSION_DENY": ProviderMisconfigured,
    "isv.ACCOUNT_NOT_EXISTS": ProviderMisconfigured,
    "isv.PRODUCT_UN_SUBSCRIPT": ProviderMisconfigured,
    "isv.PRODUCT_UNSUBSCRIBE": ProviderMisconfigured,
    "isv.DENY_IP_RANGE": ProviderMisconfigured,
    "isv.EXTEND_CODE_ERROR": ProviderMisconfigured,
    "isv.DOMESTIC_NUMBER_NOT_SUPPORTED": ProviderMisconfigured,
    # Gateway answers (HTTP 4xx/5xx), common to every RPC API.
    "Throttling": TemporaryFailure,
    "Throttling.User": TemporaryFailure,
    "Throttling.Api": TemporaryFailure,
    "SignatureNonceUsed": TemporaryFailure,
    "ServiceUnavailable": TemporaryFailure,
    "InternalError": AmbiguousOutcome,
    "SignatureDoesNotMatch": ProviderMisconfigured,
    "IncompleteSignature": ProviderMisconfigured,
    "InvalidAccessKeyId.NotFound": ProviderMisconfigured,
    "InvalidAccessKeyId.Inactive": ProviderMisconfigured,
    "InvalidTimeStamp.Format": ProviderMisconfigured,
    "InvalidTimeStamp.Expired": ProviderMisconfigured,
    "Forbidden.RAM": ProviderMisconfigured,
    "MissingParameter": ProviderMisconfigured,
}


def _percent(value: str) -> str:
    """RFC 3986 percent-encoding of UTF-8 (``A-Z a-z 0-9 - _ . ~`` kept, space → ``%20``)."""
    return quote(value, safe="-_.~")


def sign_v1(params: Mapping[str, str], secret: str, *, method: str = "POST") -> str:
    """The V1 ``Signature`` of an RPC request's parameters (``Signature`` itself excluded)."""
    canonical = "&".join(
        f"{_percent(k)}={_percent(v)}" for k, v in sorted(params.items()) if k != "Signature"
    )
    string_to_sign = f"{method}&{_percent('/')}&{_percent(canonical)}"
    digest = hmac.new(f"{secret}&".encode(), string_to_sign.encode(), hashlib.sha1).digest()
    return base64.b64encode(digest).decode()


def limit_window_s(message: str) -> float:
    """Seconds to wait for an ``isv.BUSINESS_LIMIT_CONTROL`` whose message is ``message``."""
    lowered = message.lower()
    for word, seconds in LIMIT_WINDOWS_S:
        if word in lowered:
            return seconds
    return UNKNOWN_WINDOW_S


def classify(code: str, message: str, *, status: int = 200, provider: str = "") -> DeliveryError:
    """The outcome class of an answer that is not ``OK`` (see the module docstring)."""
    text = f"{provider}: {code or f'HTTP {status}'}: {message[:300]}".strip()
    vendor_code = code or f"http.{status}"
    if code == "isv.BUSINESS_LIMIT_CONTROL":
        wait_s = limit_window_s(message)
        return RateLimited(
            f"{text} (recipient flow control; waiting {wait_s:.0f} s)",
            retry_after_s=wait_s,
            provider=provider,
            vendor_code=vendor_code,
        )
    if code == "isv.BLACK_KEY_CONTROL_LIMIT":
        lowered = message.lower()
        opted_out = any(word in lowered for word in NUMBER_BLACKLIST_WORDS)
        cls: type[DeliveryError] = RecipientOptedOut if opted_out else PermanentFailure
        return cls(text, provider=provider, vendor_code=vendor_code)
    known = ERRORS.get(code)
    if known is None and code.startswith("Throttling"):
        known = TemporaryFailure
    if known is None:
        if status >= 500:
            known = AmbiguousOutcome
        elif status >= 400:
            known = ProviderMisconfigured
        else:
            known = TemporaryFailure
    return known(text, provider=provider, vendor_code=vendor_code)


class AliyunOptions(TemplateSmsOptions):
    access_key_id: str = Field(min_length=1)
    access_key_secret: SecretStr
    sign_name: str | None = Field(default=None, min_length=1)
    template_code: str = Field(min_length=1)
    endpoint: str = Field(default="https://dysmsapi.aliyuncs.com", pattern=_http.BASE_URL)
    region: str = Field(default="cn-hangzhou", min_length=1)

    @model_validator(mode="after")
    def _signed(self) -> Self:
        if self.sign_name is None and self.sender_pool is None:
            raise ValueError("set sign_name, or sender_pool to take sign names from a number pool")
        return self


class AliyunSmsProvider(TemplateSmsProvider):
    """Sends SMS templates through Aliyun's ``SendSms`` (the ``Timestamp`` from :attr:`clock`)."""

    kind = "aliyun"
    Options = AliyunOptions
    options: AliyunOptions

    def vendor_number(self, kind: Literal["mainland", "international"], number: str) -> str:
        """Mainland mobiles as 11 digits, international ones without ``+``."""
        return number if kind == "mainland" else number.lstrip("+")

    def _signed(self, action: str, params: dict[str, str]) -> dict[str, str]:
        """``params`` of an ``action`` call, with the common parameters and the signature."""
        opts = self.options
        signed = {
            "AccessKeyId": opts.access_key_id,
            "Action": action,
            "Format": "JSON",
            "RegionId": opts.region,
            "SignatureMethod": "HMAC-SHA1",
            "SignatureNonce": str(uuid.uuid4()),
            "SignatureVersion": "1.0",
            "Timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.clock())),
            "Version": API_VERSION,
            **params,
        }
        signed["Signature"] = sign_v1(signed, opts.access_key_secret.get_secret_value())
        return signed

    def request_params(self, message: Message) -> dict[str, str]:
        """The signed parameters of the ``SendSms`` call for ``message``.

        Raises:
            InvalidInput: the message no longer fits the (changed) settings.
        """
        opts = self.options
        values = self.values(message)
        params = {
            "PhoneNumbers": self._number(message.target),
            "SignName": message.sender or opts.sign_name or "",
            "TemplateCode": self.template_of(message) or opts.template_code,
            "OutId": message.id,
        }
        if values:
            params["TemplateParam"] = json.dumps(values, ensure_ascii=False, separators=(",", ":"))
        return self._signed("SendSms", params)

    def _call(self, params: dict[str, str]) -> tuple[httpx.Response, dict[str, Any]]:
        """POST a signed call; the answer and its JSON object.

        Raises:
            DeliveryError: the transport failed, or the answer is not a JSON object.
        """
        body = "&".join(f"{_percent(k)}={_percent(v)}" for k, v in params.items())
        with _http.map_transport_errors(self.name):
            response = _http.client().post(
                _http.join_path(self.options.endpoint, "/"),
                content=body.encode(),
                headers={
                    "content-type": "application/x-www-form-urlencoded; charset=utf-8",
                    "accept": "application/json",
                },
                timeout=self.options.timeout_s,
            )
        return response, _http.json_object(response, self.name)

    def _refusal(self, response: httpx.Response, data: dict[str, Any], code: str) -> DeliveryError:
        """The outcome class of an answer that is not ``OK``."""
        error = classify(
            code,
            # Aliyun echoes the string-to-sign (phone number, template values) in this message
            "" if code == "SignatureDoesNotMatch" else str(data.get("Message") or ""),
            status=response.status_code,
            provider=self.name,
        )
        if (
            isinstance(error, TemporaryFailure)
            and not isinstance(error, RateLimited)  # its window is the vendor's own word
            and "retry-after" in response.headers
        ):
            error.retry_after_s = _http.retry_after_s(response, 0.0)
        return error

    def look_up(self, message: Message) -> Receipt | None:
        """``QuerySendDetails`` of the record's number on each Beijing day since the record was
        made (newest first, at most :data:`LOOKUP_DAYS`), matched by ``OutId`` (the record id).
        Its details carry no ``BizId``, so the receipt names none.

        Raises:
            DeliveryError: the query failed (not allowed to this RAM user, Aliyun down…).
        """
        number = self._number_if_sendable(message.target)
        if number is None:
            return None
        for day in beijing_days(message.created_ms / 1000, self.clock()):
            for row in self._details(number, day):
                if row.get("OutId") == message.id:
                    return Receipt(
                        provider=self.name,
                        raw=f"QuerySendDetails: SendDate={row.get('SendDate')} "
                        f"SendStatus={row.get('SendStatus')}",
                    )
        return None

    def _details(self, number: str, day: str, *, biz_id: str | None = None) -> Iterator[dict[str, Any]]:
        """The ``QuerySendDetails`` rows of ``number`` on ``day`` (``yyyyMMdd``, Beijing), of one
        send when ``biz_id`` is given, page by page (at most :data:`LOOKUP_MAX_PAGES`).

        Raises:
            DeliveryError: a query failed; :class:`UnconfirmedOutcome` (``noti.lookup.truncated``)
                when the day has more rows than were read.
        """
        page = 1
        while True:
            params = {
                "PhoneNumber": number,
                "SendDate": day,
                "PageSize": str(LOOKUP_PAGE_SIZE),
                "CurrentPage": str(page),
            }
            if biz_id is not None:
                params["BizId"] = biz_id
            response, data = self._call(self._signed("QuerySendDetails", params))
            code = str(data.get("Code") or "")
            if response.status_code != 200 or code != "OK":
                raise self._refusal(response, data, code)
            box = data.get("SmsSendDetailDTOs")
            details = box.get("SmsSendDetailDTO") if isinstance(box, dict) else None
            rows = [d for d in details if isinstance(d, dict)] if isinstance(details, list) else []
            yield from rows
            total = int(data.get("TotalCount") or 0)
            if len(rows) < LOOKUP_PAGE_SIZE or page * LOOKUP_PAGE_SIZE >= total:
                return
            if page >= LOOKUP_MAX_PAGES:  # the day was not read to its end: no "not sent"
                raise unconfirmed(
                    self.name,
                    f"more than {LOOKUP_MAX_PAGES * LOOKUP_PAGE_SIZE} messages to this number on {day}",
                    vendor_code="noti.lookup.truncated",
                )
            page += 1

    def read_pushed(self, request: ReceiptRequest) -> ReceiptBatch:
        """An SmsReport push (:mod:`noti.channels.sms.aliyun_receipts`)."""
        return aliyun_receipts.read_report(self.name, request)

    def poll_receipts(self, pending: Sequence[PendingDelivery]) -> list[DeliveryReport]:
        """``QuerySendDetails`` of each pending record (its number, the Beijing day it was sent,
        its ``BizId`` when known), matched by ``OutId``: ``SendStatus`` 3 is delivered, 2
        undelivered (``ErrCode``), 1 (waiting for the carrier) no report yet.

        Raises:
            DeliveryError: the first query failed (see :func:`noti.providers._receipts.poll_each`).
        """
        return poll_each(self.name, pending, self._poll_one)

    def _poll_one(self, item: PendingDelivery) -> DeliveryReport | None:
        number = self._number_if_sendable(item.target)
        if number is None:
            return None
        sent_s = item.sent_ms / 1000
        days = beijing_days(sent_s - POLL_SLACK_S, min(self.clock(), sent_s + POLL_SLACK_S))
        try:
            for day in days:
                for row in self._details(number, day, biz_id=item.vendor_id):
                    if row.get("OutId") == item.record_id:
                        return aliyun_receipts.report_of_detail(self.name, item, row)
        except UnconfirmedOutcome:  # too many messages to this number that day: ask next round
            return None
        return None

    @pooled_send
    def send_new(self, message: Message) -> Receipt:
        with template_still_fits(self.name):
            params = self.request_params(message)
        response, data = self._call(params)
        code = str(data.get("Code") or "")
        request_id = str(data.get("RequestId") or "")
        if response.status_code == 200 and code == "OK":
            biz_id = data.get("BizId")
            return Receipt(
                provider=self.name, msgid=str(biz_id) if biz_id else None, raw=f"RequestId={request_id}"
            )
        if response.status_code == 200 and not code:
            raise AmbiguousOutcome(
                f"{self.name}: an answer without Code: {response.text[:200]!r}",
                provider=self.name,
                vendor_code="http.200",
            )
        raise self._refusal(response, data, code)


def beijing_days(since_s: float, now_s: float) -> list[str]:
    """``SendDate`` values (``yyyyMMdd``, Beijing time) from ``now_s`` back to ``since_s``,
    newest first, at most :data:`LOOKUP_DAYS` (a ``since_s`` of 0: today only)."""
    first = since_s if since_s > 0 else now_s
    days: list[str] = []
    at = now_s
    while len(days) < LOOKUP_DAYS:
        day = time.strftime("%Y%m%d", time.gmtime(at + BEIJING_UTC_OFFSET_S))
        if day not in days:
            days.append(day)
        if at <= first:
            break
        at = max(first, at - 86400)
    return days
