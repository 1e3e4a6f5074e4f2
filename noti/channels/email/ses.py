"""Amazon SES: e-mail through the SES API v2 ``SendEmail``, feedback through SNS.

One ``POST {endpoint}/v2/email/outbound-emails`` per attempt (JSON, a ``Simple`` message: the
subject, the text and the optional HTML, UTF-8), signed with AWS Signature Version 4
(:mod:`noti.channels.email._sigv4`, service ``ses``). It carries the tag ``noti_id=<record
id>`` (``EmailTags``) and, when set, the configuration set. A record's unsubscribe link goes
in the Simple message's ``Headers`` (``List-Unsubscribe``, ``List-Unsubscribe-Post``: a list
of ``{Name, Value}``, values of at most 870 printable ASCII characters, which the channel's
limit keeps to). The receipt's msgid is SES's ``MessageId``.

Options (``[providers.<name>]`` with ``kind = "ses"``):

=========================  ======================================  ==============================
option                     default                                 meaning
=========================  ======================================  ==============================
``region``                 (required)                              ``eu-west-1`` …
``access_key_id``          (required)                              an IAM key allowed
                                                                   ``ses:SendEmail``
``secret_access_key``      (required, secret)
``session_token``          –                                       temporary credentials' token
``from_addr``              (required)                              a verified identity's address
``reply_to``               –                                       ``ReplyToAddresses``
``configuration_set``      –                                       ``ConfigurationSetName``
``endpoint``               ``https://email.<region>.amazonaws.com`` (tests point it at a fake)
``sns_topic_arns``         ``[]``: no receipts                     the SNS topics whose messages
                                                                   are taken at
                                                                   ``/v1/receipts/<name>``
``sns_url_prefix``         ``https://sns.<region>.amazonaws.com/`` where signing certificates and
                                                                   subscription confirmations
                                                                   may be fetched from
``confirm_subscriptions``  ``true``                                confirm a verified
                                                                   SubscriptionConfirmation
``timeout_s``              10
=========================  ======================================  ==============================

Classification (the ``x-amzn-ErrorType`` of the answer, else its HTTP status). SES keeps no
idempotency key: a request whose answer is lost may have sent the message
(``AmbiguousOutcome``: retried on this provider only, never failed over).

=============================================  =====================  =======================
answer                                         raised                 why
=============================================  =====================  =======================
200 with a ``MessageId``                       (Receipt)
TooManyRequestsException (429),                RateLimited            ``Retry-After``, else 1 s
ThrottlingException
MessageRejected                                PermanentFailure       content or (sandbox)
                                                                      recipient refused
BadRequestException                            PermanentFailure       this message cannot go
MailFromDomainNotVerifiedException,            ProviderMisconfigured  our identity, key,
NotFoundException, AccountSuspendedException,                         clock or configuration
SignatureDoesNotMatch, InvalidSignatureException,                     set
UnrecognizedClientException, AccessDenied…,
IncompleteSignature…, MissingAuthentication…
SendingPausedException, LimitExceededException  ProviderOutage        the account cannot send
                                                                      now: fail over
503 (ServiceUnavailable)                       ProviderOutage         not processed
other 5xx (InternalFailure …)                  AmbiguousOutcome       it may have been sent
other 4xx                                      TemporaryFailure
=============================================  =====================  =======================

Receipts: :mod:`noti.channels.email._sns` (the SNS message, verified) and
:mod:`noti.channels.email.ses_receipts` (the SES event in it).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from typing import Any

import httpx
import redis
from pydantic import Field, SecretStr, field_validator

from noti.channels.email import _sigv4, _sns, ses_receipts, unsubscribe_headers
from noti.channels.email._api import HTTP_URL, ApiEmailProvider, EmailAddress
from noti.core.keys import Keys
from noti.delivery.state import ReceiptBatch, ReceiptReply, ReceiptRequest
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

__all__ = ["ERRORS", "SesOptions", "SesProvider"]

log = logging.getLogger(__name__)

PATH = "/v2/email/outbound-emails"
DEFAULT_RETRY_AFTER_S = 1.0

#: ``x-amzn-ErrorType`` -> outcome class.
ERRORS: dict[str, type[DeliveryError]] = {
    "TooManyRequestsException": RateLimited,
    "ThrottlingException": RateLimited,
    "MessageRejected": PermanentFailure,
    "BadRequestException": PermanentFailure,
    "MailFromDomainNotVerifiedException": ProviderMisconfigured,
    "NotFoundException": ProviderMisconfigured,
    "AccountSuspendedException": ProviderMisconfigured,
    "SendingPausedException": ProviderOutage,
    "LimitExceededException": ProviderOutage,
    "SignatureDoesNotMatch": ProviderMisconfigured,
    "InvalidSignatureException": ProviderMisconfigured,
    "IncompleteSignatureException": ProviderMisconfigured,
    "IncompleteSignature": ProviderMisconfigured,
    "UnrecognizedClientException": ProviderMisconfigured,
    "InvalidClientTokenId": ProviderMisconfigured,
    "MissingAuthenticationTokenException": ProviderMisconfigured,
    "MissingAuthenticationToken": ProviderMisconfigured,
    "AccessDeniedException": ProviderMisconfigured,
    "ExpiredTokenException": ProviderMisconfigured,
    "XAmzContentSHA256Mismatch": ProviderMisconfigured,
    "ServiceUnavailable": ProviderOutage,
    "InternalFailure": AmbiguousOutcome,
}

_REGION = r"^[a-z]{2}(-[a-z]+)+-\d{1,2}$"
_TOPIC = re.compile(r"^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}$")


class SesOptions(ProviderOptions):
    region: str = Field(pattern=_REGION)
    access_key_id: str = Field(pattern=r"^[A-Z0-9]{16,128}$")
    secret_access_key: SecretStr = Field(min_length=1)
    session_token: SecretStr | None = None
    from_addr: EmailAddress
    reply_to: EmailAddress | None = None
    configuration_set: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_-]{1,64}$")
    endpoint: str | None = Field(default=None, pattern=HTTP_URL)
    sns_topic_arns: tuple[str, ...] = ()
    sns_url_prefix: str | None = None
    confirm_subscriptions: bool = True

    @field_validator("sns_topic_arns")
    @classmethod
    def _topics(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for arn in value:
            if not _TOPIC.match(arn):
                raise ValueError(
                    f"{arn[:80]!r} is not an SNS topic ARN (arn:aws:sns:<region>:<account>:<name>)"
                )
        return value

    @field_validator("sns_url_prefix")
    @classmethod
    def _prefix(cls, value: str | None) -> str | None:
        return None if value is None else _sns.check_prefix(value)


class SesProvider(ApiEmailProvider):
    """E-mail through one AWS account's SES in one region (SES has no SMTPUTF8: ASCII
    addresses only)."""

    kind = "ses"
    vendor = "SES"
    Options = SesOptions
    options: SesOptions

    def __init__(self, name: str, options: Mapping[str, Any], *, redis: redis.Redis, keys: Keys) -> None:
        super().__init__(name, options, redis=redis, keys=keys)
        opts = self.options
        self.endpoint = (opts.endpoint or f"https://email.{opts.region}.amazonaws.com").rstrip("/")
        self.sns_prefix = opts.sns_url_prefix or f"https://sns.{opts.region}.amazonaws.com/"
        self.credentials = _sigv4.Credentials(
            opts.access_key_id,
            opts.secret_access_key.get_secret_value(),
            opts.session_token.get_secret_value() if opts.session_token else None,
        )
        if opts.sns_topic_arns:
            try:
                import cryptography  # noqa: F401 - the receipts verify RSA signatures
            except ImportError:
                raise InvalidConfig(
                    f"[providers.{name}] sns_topic_arns: SES receipts need the cryptography package "
                    "(pip install 'noti[ses]')"
                ) from None

    def body(self, message: Message) -> dict[str, Any]:
        """The ``SendEmail`` request of ``message``."""
        opts = self.options
        text = str(message.fields.get("text", ""))
        parts: dict[str, Any] = {"Text": {"Data": text, "Charset": "UTF-8"}}
        html = message.fields.get("html")
        if html:
            parts["Html"] = {"Data": str(html), "Charset": "UTF-8"}
        simple: dict[str, Any] = {
            "Subject": {"Data": str(message.fields.get("subject", "")), "Charset": "UTF-8"},
            "Body": parts,
        }
        headers = unsubscribe_headers(message.fields)
        if headers:
            simple["Headers"] = [{"Name": name, "Value": value} for name, value in headers]
        body: dict[str, Any] = {
            "FromEmailAddress": opts.from_addr,
            "Destination": {"ToAddresses": [message.target]},
            "Content": {"Simple": simple},
            "EmailTags": [{"Name": ses_receipts.RECORD_TAG, "Value": message.id}],
        }
        if opts.reply_to:
            body["ReplyToAddresses"] = [opts.reply_to]
        if opts.configuration_set:
            body["ConfigurationSetName"] = opts.configuration_set
        return body

    def send(self, message: Message) -> Receipt:
        payload = json.dumps(self.body(message), ensure_ascii=False, separators=(",", ":")).encode()
        url = self.endpoint + PATH
        headers = _sigv4.sign(
            "POST",
            url,
            {"content-type": "application/json"},
            payload,
            credentials=self.credentials,
            region=self.options.region,
            service="ses",
        )
        with _http.map_transport_errors(self.name):
            response = _http.client().post(
                url, content=payload, headers=headers, timeout=self.options.timeout_s
            )
        if not response.is_success:
            raise self.refused(message, self._error(response))
        data = _http.json_object(response, self.name)
        return self.receipt(message, response, data.get("MessageId"), "a MessageId")

    def _error(self, response: httpx.Response) -> DeliveryError:
        status = response.status_code
        code = response.headers.get("x-amzn-errortype", "").split(":", 1)[0].strip()
        text = ""
        try:
            data = json.loads(response.content)
        except ValueError:
            data = None
        if isinstance(data, dict):
            code = code or str(data.get("__type") or data.get("code") or "").rpartition("#")[2]
            text = str(data.get("message") or data.get("Message") or "")
        detail = f"{self.name}: HTTP {status} {code or '-'}: {text[:300]}"
        kwargs: dict[str, Any] = {"provider": self.name, "vendor_code": code or f"http.{status}"}
        cls = ERRORS.get(code)
        if cls is RateLimited or status == 429:
            wait = _http.retry_after_s(response, DEFAULT_RETRY_AFTER_S)
            return RateLimited(detail, retry_after_s=max(DEFAULT_RETRY_AFTER_S, wait), **kwargs)
        if cls is None:
            if status == 503:
                cls = ProviderOutage
            elif status >= 500:
                cls = AmbiguousOutcome
            elif status in (401, 403):
                cls = ProviderMisconfigured
            else:
                cls = TemporaryFailure
        return cls(detail, **kwargs)

    # --- receipts ----------------------------------------------------------------------------

    def read_receipt(self, request: ReceiptRequest) -> ReceiptBatch:
        """An SNS message of one of ``sns_topic_arns``, verified (:mod:`noti.channels.email._sns`):
        a notification's SES event as reports; a subscription confirmed. SNS wants any 2xx.

        Raises:
            ReceiptRejected: ``.provider`` (no topic configured), ``.signature``, ``.malformed``.
            StoreUnavailable: the signing certificate or the confirmation could not be fetched.
        """
        opts = self.options
        message = _sns.read_message(
            self.name,
            request,
            topic_arns=opts.sns_topic_arns,
            cert_prefix=self.sns_prefix,
            timeout_s=opts.timeout_s,
        )
        if message.type == "SubscriptionConfirmation":
            if opts.confirm_subscriptions:
                _sns.confirm(self.name, message, cert_prefix=self.sns_prefix, timeout_s=opts.timeout_s)
            else:
                log.warning(
                    "%s: SNS asks to confirm the subscription to %s: confirm_subscriptions is off",
                    self.name,
                    message.topic_arn,
                )
            return ReceiptBatch([], ReceiptReply(200, b""))
        if message.type != "Notification":
            log.info("%s: SNS %s for %s", self.name, message.type, message.topic_arn)
            return ReceiptBatch([], ReceiptReply(200, b""))
        return ReceiptBatch(ses_receipts.reports_of_event(self.name, message.message), ReceiptReply(200, b""))
