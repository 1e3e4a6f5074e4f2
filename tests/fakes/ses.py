"""A fake Amazon SES (API v2) ``SendEmail`` and the SNS topic its feedback goes to.

**SendEmail** (``POST /v2/email/outbound-emails``, JSON) is checked as AWS checks it, with the
fake's own Signature Version 4 code (not noti's), in AWS's order:

=====================================================  =====  ===================================
the request                                            HTTP   ``x-amzn-ErrorType``
=====================================================  =====  ===================================
another path or method                                 404    ``UnknownOperationException``
no ``Authorization`` header                            403    ``MissingAuthenticationTokenException``
not ``AWS4-HMAC-SHA256 Credential=…, SignedHeaders=…,  400    ``IncompleteSignatureException``
Signature=…``; ``host`` or ``x-amz-date`` unsigned
an access key id the fake does not know                403    ``UnrecognizedClientException``
a scope of another region or service, or of another    403    ``InvalidSignatureException``
day than ``x-amz-date``
``x-amz-date`` more than 5 minutes off the fake's      403    ``InvalidSignatureException``
clock (:attr:`SesFake.clock_offset_s` moves it)               ("Signature expired: …")
``x-amz-content-sha256`` not the body's SHA-256        400    ``XAmzContentSHA256Mismatch``
the signature does not match                           403    ``SignatureDoesNotMatch``
a body that is not JSON, or no FromEmailAddress,       400    ``BadRequestException``
Destination.ToAddresses, Content.Simple Subject/Body,
or an address that is not one; Content.Simple.Headers
not a list of ``{Name, Value}`` (Name 1-126 printable
ASCII but ``:``, Value 1-870 printable ASCII or space,
AWS's MessageHeader), or naming twice a field a message
may hold once (AWS's "Amazon SES header fields" list)
a From address the account has not verified            400    ``MessageRejected``
a ``ConfigurationSetName`` the account does not have   404    ``NotFoundException``
=====================================================  =====  ===================================

An error answer carries ``x-amzn-ErrorType: <code>:http://internal.amazon.com/coral/…`` and
``x-amzn-RequestId`` headers and the body ``{"message": "…"}``, as the REST-JSON protocol of
SES v2 does; :func:`error_reply` makes the others a test scripts (``AccountSuspendedException``,
``SendingPausedException``, ``LimitExceededException``, ``TooManyRequestsException`` 429,
``InternalFailure`` 500 …). An accepted message is answered 200 ``{"MessageId": "…"}`` (SES's
form: 16 hex digits, a UUID, ``-000000``). SES keeps no idempotency key: the same request twice
sends twice (:attr:`SesFake.messages`).

**Feedback through SNS.** Each accepted message settles (by default at once; see
:attr:`SesFake.auto_receipts`) as its recipient's fate says (:meth:`SesFake.fate`:
``delivery`` by default, ``bounce`` (Permanent/General), ``transient`` (Transient/MailboxFull),
``complaint`` (a Delivery, then an abuse Complaint)), and when :attr:`SesFake.receipt_url` is
set each SES event (``notificationType`` Bounce / Complaint / Delivery, with ``mail.messageId``
and ``mail.tags``) is POSTed there as an SNS HTTP notification: ``Type: Notification``, the
event as the ``Message`` string, signed with the fake's RSA key (``SignatureVersion`` 1 =
SHA1withRSA or 2 = SHA256withRSA, :attr:`SesFake.signature_version`) over SNS's canonical
string, ``SigningCertURL`` = ``<fake>/SimpleNotificationService-<hash>.pem``, which the fake
serves. :meth:`SesFake.subscribe` posts a ``SubscriptionConfirmation``, confirmed by a GET of
its ``SubscribeURL`` (``/?Action=ConfirmSubscription&TopicArn=…&Token=…``), which the fake
answers and counts (:attr:`SesFake.confirmed`). Faults: ``bad_signature`` (signed by another
key), ``unsigned`` (no ``Signature``), ``cert_url`` (a ``SigningCertURL`` of the test's
choosing), ``duplicate_receipts``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
import uuid
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any
from urllib.parse import quote, urlencode

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from tests.fakes._mail import MailApiFake
from tests.fakes._server import Received, Reply
from tests.fakes._tls import certificate, common_name

__all__ = [
    "ACCESS_KEY_ID",
    "FROM",
    "REGION",
    "SECRET_ACCESS_KEY",
    "TOPIC_ARN",
    "SesFake",
    "error_reply",
    "ses_options",
    "sns_signature",
    "sns_string_to_sign",
]

ACCESS_KEY_ID = "AKIAIOSFODNN7EXAMPLE"
SECRET_ACCESS_KEY = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
REGION = "eu-west-1"
FROM = "noti@example.com"
TOPIC_ARN = "arn:aws:sns:eu-west-1:123456789012:ses-feedback"
PATH = "/v2/email/outbound-emails"
#: How far the request's x-amz-date may be from the fake's clock.
SKEW = timedelta(minutes=5)
_AUTH = re.compile(
    r"^AWS4-HMAC-SHA256 Credential=(?P<key>[^/,\s]+)/(?P<date>\d{8})/(?P<region>[^/]+)/"
    r"(?P<service>[^/]+)/aws4_request, ?SignedHeaders=(?P<signed>[a-z0-9;-]+), ?"
    r"Signature=(?P<sig>[0-9a-f]{64})$"
)
_ADDRESS = re.compile(r"^[^@\s<>]+@[^@\s<>]+\.[A-Za-z]{2,}$")
_NAMED = re.compile(r"^.*<(?P<addr>[^<>]+)>$")
#: MessageHeader's Name and Value (SES API v2 reference: their patterns and lengths).
_HEADER_NAME = re.compile(r"^[!-9;-@A-~]{1,126}$")
_HEADER_VALUE = re.compile(r"^[ -~]{1,870}$")
#: The fields "Amazon SES header fields" says cannot appear more than once (lower case).
_ONCE = frozenset(
    name.lower()
    for name in (
        "Accept-Language acceptLanguage Archived-At Auto-Submitted Bounces-to Comments "
        "Content-Alternative Content-Base Content-Class Content-Description Content-Disposition "
        "Content-Duration Content-ID Content-Language Content-Length Content-Location Content-MD5 "
        "Content-Transfer-Encoding Content-Type Date Delivered-To Disposition-Notification-Options "
        "Disposition-Notification-To DKIM-Signature DomainKey-Signature Errors-To From Importance "
        "In-Reply-To Keywords List-Archive List-Help List-Id List-Owner List-Post List-Subscribe "
        "List-Unsubscribe List-Unsubscribe-Post Message-Context Message-ID MIME-Version Organization "
        "Original-From Original-Message-ID Original-Recipient Original-Subject Precedence Priority "
        "References Reply-To Return-Path Return-Receipt-To Sender Solicitation Sensitivity Subject "
        "Thread-Index Thread-Topic User-Agent VBR-Info"
    ).split()
)


def error_reply(
    code: str, message: str = "", *, status: int = 400, headers: dict[str, str] | None = None
) -> Reply:
    """SES v2's error answer: ``x-amzn-ErrorType`` and ``{"message": …}``."""
    return Reply(
        status,
        {"message": message or code},
        {
            "x-amzn-ErrorType": f"{code}:http://internal.amazon.com/coral/com.amazonaws.sesv2/",
            "x-amzn-RequestId": str(uuid.uuid4()),
            **(headers or {}),
        },
    )


def ses_options(fake: SesFake, **changes: Any) -> dict[str, Any]:
    """An ``ses`` provider's options that send through ``fake``'s account (from its verified
    address) and take its feedback through SNS (the fake's topic, certificates under its URL)."""
    return {
        "kind": "ses",
        "region": REGION,
        "access_key_id": ACCESS_KEY_ID,
        "secret_access_key": SECRET_ACCESS_KEY,
        "from_addr": f"Noti <{FROM}>",
        "endpoint": fake.url,
        "sns_topic_arns": [fake.topic_arn],
        "sns_url_prefix": fake.url + "/",
        "timeout_s": 1,
        **changes,
    }


# --- Signature Version 4, the fake's own ----------------------------------------------------


def _uri(value: str) -> str:
    return quote(value, safe="-_.~")


def _expected_signature(received: Received, signed: list[str], secret: str, date: str, amz_date: str) -> str:
    path = "/".join(_uri(s) for s in received.path.split("/"))
    query = sorted((_uri(k), _uri(v)) for k, vs in received.query.items() for v in vs)
    headers = "".join(f"{h}:{' '.join(received.headers.get(h, '').split())}\n" for h in signed)
    canonical = "\n".join(
        [
            received.method,
            path,
            "&".join(f"{k}={v}" for k, v in query),
            headers,
            ";".join(signed),
            hashlib.sha256(received.body).hexdigest(),
        ]
    )
    scope = f"{date}/{REGION}/ses/aws4_request"
    text = f"AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
    key = ("AWS4" + secret).encode()
    for part in (date, REGION, "ses", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


# --- SNS ---------------------------------------------------------------------------------------

#: The keys SNS signs, in the order it signs them, by message type.
_SIGNED_KEYS = {
    "Notification": ("Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"),
    "SubscriptionConfirmation": (
        "Message",
        "MessageId",
        "SubscribeURL",
        "Timestamp",
        "Token",
        "TopicArn",
        "Type",
    ),
}


def sns_string_to_sign(message: dict[str, Any]) -> bytes:
    """SNS's canonical string: ``Key\\nValue\\n`` for each signed key present, in order."""
    keys = _SIGNED_KEYS.get(message.get("Type", ""), _SIGNED_KEYS["SubscriptionConfirmation"])
    return "".join(f"{k}\n{message[k]}\n" for k in keys if k in message).encode()


def sns_signature(key: rsa.RSAPrivateKey, message: dict[str, Any], version: str) -> str:
    digest = hashes.SHA1() if version == "1" else hashes.SHA256()  # noqa: S303 - SNS's version 1
    return base64.b64encode(key.sign(sns_string_to_sign(message), padding.PKCS1v15(), digest)).decode()


@cache
def _rsa_pair(label: str) -> tuple[rsa.RSAPrivateKey, bytes]:
    """A key and its self-signed certificate (PEM), made once per test process (RSA key
    generation takes a moment)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    cert = certificate(common_name("sns.amazonaws.com"), key.public_key(), signing_key=key, days=365)
    return key, cert.public_bytes(serialization.Encoding.PEM)


class SesFake(MailApiFake):
    """One SES account in :data:`REGION` that verified ``verified`` (addresses or domains)."""

    FATES = ("delivery", "bounce", "transient", "complaint")

    def __init__(
        self,
        *,
        access_key_id: str = ACCESS_KEY_ID,
        secret_access_key: str = SECRET_ACCESS_KEY,
        verified: tuple[str, ...] = (FROM,),
        configuration_sets: tuple[str, ...] = ("noti",),
    ) -> None:
        super().__init__()
        self.keys = {access_key_id: secret_access_key}
        self.verified = set(verified)
        self.configuration_sets = set(configuration_sets)
        #: Seconds the fake's clock is ahead of the machine's (a stale request: > 300).
        self.clock_offset_s = 0.0
        self.topic_arn = TOPIC_ARN
        self._key, self.certificate = _rsa_pair("sns")
        self._other_key, _ = _rsa_pair("other")
        self.cert_path = f"/SimpleNotificationService-{hashlib.md5(self.certificate).hexdigest()}.pem"  # noqa: S324
        self.reset()

    def reset(self) -> None:
        """Forget messages, script, fates, faults and pushes (a fresh account, same keys)."""
        super().reset()
        self.clock_offset_s = 0.0
        self.topic_arn = TOPIC_ARN
        self.signature_version = "1"
        self.cert_url: str | None = None
        self.duplicate_receipts = False
        self.confirmed: list[str] = []
        self.cert_fetches = 0

    # --- SendEmail ------------------------------------------------------------------------

    def verify(self, received: Received) -> Reply | None:
        if received.method == "GET":
            return (
                None
                if received.path in (self.cert_path, "/")
                else error_reply("UnknownOperationException", status=404)
            )
        if received.method != "POST" or received.path != PATH:
            return error_reply("UnknownOperationException", status=404)
        return self._authenticate(received) or self._check(received)

    def _authenticate(self, received: Received) -> Reply | None:
        header = received.headers.get("authorization")
        if not header:
            return error_reply(
                "MissingAuthenticationTokenException", "Missing Authentication Token", status=403
            )
        match = _AUTH.match(header)
        amz_date = received.headers.get("x-amz-date", "")
        signed = match["signed"].split(";") if match else []
        if (
            match is None
            or not re.fullmatch(r"\d{8}T\d{6}Z", amz_date)
            or not {"host", "x-amz-date"} <= set(signed)
        ):
            return error_reply(
                "IncompleteSignatureException",
                "Authorization header requires 'Credential', 'Signature' and 'SignedHeaders' "
                "parameters, and host and x-amz-date signed.",
            )
        secret = self.keys.get(match["key"])
        if secret is None:
            return error_reply(
                "UnrecognizedClientException",
                "The security token included in the request is invalid.",
                status=403,
            )
        if match["region"] != REGION or match["service"] != "ses" or match["date"] != amz_date[:8]:
            return error_reply(
                "InvalidSignatureException",
                f"Credential should be scoped to a valid region and service, and to the date of "
                f"x-amz-date: {match['date']}/{match['region']}/{match['service']}",
                status=403,
            )
        now = datetime.now(UTC) + timedelta(seconds=self.clock_offset_s)
        sent = datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
        stamp = now.strftime("%Y%m%dT%H%M%SZ")
        if sent < now - SKEW:
            return error_reply(
                "InvalidSignatureException",
                f"Signature expired: {amz_date} is now earlier than "
                f"{(now - SKEW).strftime('%Y%m%dT%H%M%SZ')} ({stamp} - 5 min.)",
                status=403,
            )
        if sent > now + SKEW:
            return error_reply(
                "InvalidSignatureException",
                f"Signature not yet current: {amz_date} is still later than "
                f"{(now + SKEW).strftime('%Y%m%dT%H%M%SZ')} ({stamp} + 5 min.)",
                status=403,
            )
        content = received.headers.get("x-amz-content-sha256")
        if content is not None and content != hashlib.sha256(received.body).hexdigest():
            return error_reply(
                "XAmzContentSHA256Mismatch",
                "The provided 'x-amz-content-sha256' header does not match what was computed.",
            )
        expected = _expected_signature(received, signed, secret, match["date"], amz_date)
        if not hmac.compare_digest(expected, match["sig"]):
            return error_reply(
                "SignatureDoesNotMatch",
                "The request signature we calculated does not match the signature you provided. "
                "Check your AWS Secret Access Key and signing method. Consult the service "
                "documentation for details.",
                status=403,
            )
        return None

    def _check(self, received: Received) -> Reply | None:
        try:
            body = json.loads(received.body)
        except ValueError:
            return error_reply("BadRequestException", "The request body is not valid JSON.")
        if not isinstance(body, dict):
            return error_reply("BadRequestException", "The request body must be a JSON object.")
        sender = body.get("FromEmailAddress")
        to = (body.get("Destination") or {}).get("ToAddresses")
        simple = (body.get("Content") or {}).get("Simple") or {}
        subject = (simple.get("Subject") or {}).get("Data")
        parts = simple.get("Body") or {}
        if not isinstance(sender, str) or not sender:
            return error_reply("BadRequestException", "Missing required parameter: FromEmailAddress")
        if not isinstance(to, list) or not to or len(to) > 50:
            return error_reply("BadRequestException", "Destination.ToAddresses: 1 to 50 addresses")
        if (
            not isinstance(subject, str)
            or not subject
            or not any(isinstance((parts.get(p) or {}).get("Data"), str) for p in ("Text", "Html"))
        ):
            return error_reply(
                "BadRequestException", "Content.Simple needs a Subject and a Text or Html Body"
            )
        headers = _headers_problem(simple.get("Headers"))
        if headers:
            return error_reply("BadRequestException", headers)
        address = _address(sender)
        if address is None or not all(isinstance(a, str) and _address(a) for a in to):
            return error_reply("BadRequestException", "Illegal address")
        if address not in self.verified and address.rpartition("@")[2] not in self.verified:
            return error_reply(
                "MessageRejected",
                f"Email address is not verified. The following identities failed the check in "
                f"region {REGION.upper()}: {address}",
            )
        config = body.get("ConfigurationSetName")
        if config is not None and config not in self.configuration_sets:
            return error_reply(
                "NotFoundException", f"Configuration set <{config}> does not exist.", status=404
            )
        return None

    def succeed(self, received: Received) -> Reply:
        if received.method == "GET" and received.path == self.cert_path:
            with self._lock:
                self.cert_fetches += 1
            return Reply(200, self.certificate, {"content-type": "application/x-pem-file"})
        if received.method == "GET":
            return self._confirm(received)
        message_id = f"{secrets.token_hex(8)}-{uuid.uuid4()}-000000"
        self.accept(message_id, received.json())
        return Reply(200, {"MessageId": message_id}, {"x-amzn-RequestId": str(uuid.uuid4())})

    def headers_of(self, body: dict[str, Any]) -> dict[str, str]:
        """``Content.Simple.Headers`` as ``{Name: Value}``."""
        return {h["Name"]: h["Value"] for h in body["Content"]["Simple"].get("Headers") or []}

    # --- SNS ------------------------------------------------------------------------------

    def _confirm(self, received: Received) -> Reply:
        query = {k: v[-1] for k, v in received.query.items()}
        if query.get("Action") != "ConfirmSubscription" or query.get("TopicArn") != self.topic_arn:
            return Reply(400, "<ErrorResponse><Error><Code>InvalidParameter</Code></Error></ErrorResponse>")
        with self._lock:
            self.confirmed.append(query.get("Token", ""))
        arn = f"{self.topic_arn}:{uuid.uuid4()}"
        return Reply(
            200,
            f"<ConfirmSubscriptionResponse><ConfirmSubscriptionResult><SubscriptionArn>{arn}"
            "</SubscriptionArn></ConfirmSubscriptionResult></ConfirmSubscriptionResponse>",
            {"content-type": "text/xml"},
        )

    def sns_message(self, kind: str, fields: dict[str, str]) -> dict[str, Any]:
        """An SNS HTTP message of ``kind`` (``Notification``, ``SubscriptionConfirmation``)
        carrying ``fields`` (``Message``, ``Subject``, ``Token`` …), signed as the faults say."""
        message: dict[str, Any] = {
            "Type": kind,
            "MessageId": str(uuid.uuid4()),
            "TopicArn": self.topic_arn,
            **fields,
            "Timestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z",
            "SignatureVersion": self.signature_version,
            "SigningCertURL": self.cert_url or f"{self.url}{self.cert_path}",
        }
        if kind == "Notification":
            message["UnsubscribeURL"] = f"{self.url}/?Action=Unsubscribe&SubscriptionArn={self.topic_arn}:x"
        if not self.unsigned:
            key = self._other_key if self.bad_signature else self._key
            message["Signature"] = sns_signature(key, message, self.signature_version)
        return message

    def post_sns(self, *messages: dict[str, Any]) -> None:
        """POST ``messages`` to :attr:`receipt_url` as SNS does, in order (on one of the
        pusher's threads)."""
        assert self.receipt_url is not None, "set receipt_url first"
        requests = []
        for message in messages:
            headers = {
                "content-type": "text/plain; charset=UTF-8",
                "x-amz-sns-message-type": message["Type"],
                "x-amz-sns-message-id": message["MessageId"],
                "x-amz-sns-topic-arn": message["TopicArn"],
                "user-agent": "Amazon Simple Notification Service Agent",
            }
            request = (self.receipt_url, headers, json.dumps(message).encode())
            requests += [request, request] if self.duplicate_receipts else [request]
        self.pusher.push(requests)

    def subscribe(self) -> str:
        """Post a ``SubscriptionConfirmation`` to :attr:`receipt_url`; its token."""
        token = secrets.token_hex(32)
        query = urlencode({"Action": "ConfirmSubscription", "TopicArn": self.topic_arn, "Token": token})
        message = self.sns_message(
            "SubscriptionConfirmation",
            {
                "Token": token,
                "Message": f"You have chosen to subscribe to the topic {self.topic_arn}.",
                "SubscribeURL": f"{self.url}/?{query}",
            },
        )
        self.post_sns(message)
        return token

    def settle(self, *ids: str) -> None:
        """Push the SES events of these messages (all not settled yet when none are named)."""
        bodies = self.to_settle(ids)
        if self.receipt_url is None:
            return
        for message_id, body in bodies:
            events = self.events(message_id, body)
            self.post_sns(*(self.sns_message("Notification", {"Message": json.dumps(e)}) for e in events))

    def events(self, message_id: str, body: dict[str, Any]) -> list[dict[str, Any]]:
        """The SES events a message ends with, by its recipient's fate."""
        to = body["Destination"]["ToAddresses"]
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        mail = {
            "timestamp": now,
            "messageId": message_id,
            "source": body["FromEmailAddress"],
            "sendingAccountId": "123456789012",
            "destination": to,
            "tags": {t["Name"]: [t["Value"]] for t in body.get("EmailTags") or []},
        }
        kind = self.fate_of(to[0])
        delivery = {
            "notificationType": "Delivery",
            "mail": mail,
            "delivery": {
                "timestamp": now,
                "recipients": to,
                "processingTimeMillis": 546,
                "smtpResponse": "250 ok:  Message 64111812 accepted",
                "reportingMTA": "a8-70.smtp-out.amazonses.com",
            },
        }
        if kind == "delivery":
            return [delivery]
        if kind == "complaint":
            complaint = {
                "complainedRecipients": [{"emailAddress": a} for a in to],
                "timestamp": now,
                "feedbackId": f"{secrets.token_hex(8)}-{uuid.uuid4()}-000000",
                "complaintFeedbackType": "abuse",
            }
            return [delivery, {"notificationType": "Complaint", "mail": mail, "complaint": complaint}]
        permanent = kind == "bounce"
        bounce = {
            "bounceType": "Permanent" if permanent else "Transient",
            "bounceSubType": "General" if permanent else "MailboxFull",
            "bouncedRecipients": [
                {
                    "emailAddress": a,
                    "action": "failed",
                    "status": "5.1.1" if permanent else "4.2.2",
                    "diagnosticCode": "smtp; 550 5.1.1 user unknown"
                    if permanent
                    else "smtp; 452 4.2.2 mailbox full",
                }
                for a in to
            ],
            "timestamp": now,
            "feedbackId": f"{secrets.token_hex(8)}-{uuid.uuid4()}-000000",
            "reportingMTA": "dsn; a27-23.smtp-out.eu-west-1.amazonses.com",
        }
        return [{"notificationType": "Bounce", "mail": mail, "bounce": bounce}]


def _headers_problem(headers: object) -> str:
    """What SES would refuse in ``Content.Simple.Headers`` ("" when nothing)."""
    if headers is None:
        return ""
    if not isinstance(headers, list):
        return "Content.Simple.Headers must be a list"
    seen: set[str] = set()
    for n, header in enumerate(headers):
        name = header.get("Name") if isinstance(header, dict) else None
        value = header.get("Value") if isinstance(header, dict) else None
        if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name):
            return f"Content.Simple.Headers.{n}.Name: 1-126 printable ASCII characters but ':'"
        if not isinstance(value, str) or not _HEADER_VALUE.fullmatch(value):
            return f"Content.Simple.Headers.{n}.Value: 1-870 printable ASCII characters"
        if name.lower() in _ONCE and name.lower() in seen:
            return f"Header {name} can't appear more than once"
        seen.add(name.lower())
    return ""


def _address(value: str) -> str | None:
    """The address of ``a@b.c`` or ``Name <a@b.c>``; None when it is not one."""
    named = _NAMED.match(value)
    address = named["addr"] if named else value
    return address if _ADDRESS.match(address) else None
