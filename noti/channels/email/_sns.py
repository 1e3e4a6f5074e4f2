"""Amazon SNS HTTP(S) messages: verified before anything in them is believed.

SES reports bounces, complaints and deliveries through an SNS topic subscribed to
``<public_url>/v1/receipts/<provider>``. SNS signs each message it posts; the checks, in order
(each refusal is :class:`~noti.errors.ReceiptRejected`, nothing of the message used):

1. a POST whose body is a JSON object with a known ``Type`` (``Notification``,
   ``SubscriptionConfirmation``, ``UnsubscribeConfirmation``), else ``.malformed``;
2. its ``TopicArn`` is one of the provider's ``sns_topic_arns``, else ``.signature``: SNS
   signs every topic's messages, including those of a topic anybody made in their own AWS
   account and subscribed to this URL, so a valid signature alone proves nothing about whose
   topic it is (no topic configured: ``.provider``, receipts are not taken);
3. ``SignatureVersion`` ``1`` (SHA1withRSA) or ``2`` (SHA256withRSA) and a base64
   ``Signature``, else ``.signature``;
4. ``SigningCertURL`` starts with the allowed prefix (default
   ``https://sns.<region>.amazonaws.com/``) and the rest is a plain path ending in ``.pem``
   (at most 1,024 letters, digits and ``. _ / -``; no ``..`` or ``//``: nothing
   percent-encoded, no user, query, fragment, backslash, space or control character; SNS's are
   ``SimpleNotificationService-<hex>.pem``), else ``.signature``: what a prefix test alone
   lets through, a server may read as another path, and a URL the HTTP client cannot even
   build is a refusal, not an internal error. The certificate is fetched from there only (no
   redirect followed, at most 16 KiB, ``timeout_s``) and kept in this process
   (:class:`CertificateCache`); a fetch that fails is ``e.noti.receipt.certificate`` (HTTP
   503: SNS delivers again later);
5. the signature verifies with the certificate's RSA key over SNS's canonical string
   (``Key\\nValue\\n`` for ``Message``, ``MessageId``, ``Subject`` if present, ``Timestamp``,
   ``TopicArn``, ``Type``; a confirmation signs ``Message``, ``MessageId``, ``SubscribeURL``,
   ``Timestamp``, ``Token``, ``TopicArn``, ``Type``), else ``.signature``.

A verified ``SubscriptionConfirmation`` is confirmed by a GET of its ``SubscribeURL`` when that
URL starts with the same allowed prefix, its path as plain as a certificate's and its query
printable ASCII without space, ``#`` or backslash (else ``.signature``), unless the provider's
``confirm_subscriptions`` is false (then the URL is logged for an operator). SNS posts a
message again when it is not answered 2xx; applying one twice changes nothing.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from noti.delivery.state import ReceiptRequest
from noti.errors import InvalidConfig, StoreUnavailable
from noti.providers import _http
from noti.providers._receipts import forged, malformed, not_configured

__all__ = [
    "CERT_MAX_BYTES",
    "CertificateCache",
    "SnsMessage",
    "check_prefix",
    "confirm",
    "read_message",
    "string_to_sign",
]

log = logging.getLogger(__name__)

CERT_MAX_BYTES = 16 * 1024
#: The keys SNS signs, in the order it signs them, by message type.
SIGNED_KEYS: dict[str, tuple[str, ...]] = {
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
SIGNED_KEYS["UnsubscribeConfirmation"] = SIGNED_KEYS["SubscriptionConfirmation"]
_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
#: What a certificate's or a subscription's URL may hold between the prefix and its query.
_PLAIN_PATH = re.compile(r"[A-Za-z0-9._/-]*")
#: The longest such path (SNS's certificate URLs are under 100 characters).
PATH_MAX = 1024


@dataclass(frozen=True, slots=True)
class SnsMessage:
    """A verified SNS message."""

    type: str
    message_id: str
    topic_arn: str
    message: str
    subscribe_url: str = ""


def check_prefix(prefix: str) -> str:
    """``prefix`` as an allowed URL prefix: https with a host and a path ending in ``/``; plain
    http only to a loopback host (tests).

    Raises:
        ValueError: anything else.
    """
    parts = urlsplit(prefix)
    if parts.scheme not in ("https", "http") or not parts.hostname or parts.username or parts.query:
        raise ValueError("must be an https URL prefix such as https://sns.eu-west-1.amazonaws.com/")
    if parts.scheme == "http" and parts.hostname not in _LOOPBACK:
        raise ValueError("must be https (plain http is allowed to a loopback host only)")
    return prefix if prefix.endswith("/") else prefix + "/"


def _plain(path: str) -> bool:
    """``path`` (what follows the prefix) is at most :data:`PATH_MAX` of letters, digits and
    ``. _ / -``, with no ``..`` and no ``//``: no user, query, fragment, percent-encoding,
    backslash or control character, nothing a server may read as another host or directory
    (the prefix ends in ``/``, so the host is the prefix's)."""
    return (
        len(path) <= PATH_MAX
        and _PLAIN_PATH.fullmatch(path) is not None
        and ".." not in path
        and "//" not in path
        and not path.startswith("/")
    )


def _allowed(url: str, prefix: str) -> bool:
    """``url`` is under ``prefix``, with nothing a prefix test alone would let through."""
    return url.startswith(prefix) and _plain(url[len(prefix) :])


def string_to_sign(message: dict[str, Any]) -> bytes:
    """SNS's canonical string of ``message`` (see the module docstring)."""
    keys = SIGNED_KEYS[message["Type"]]
    return "".join(f"{k}\n{message[k]}\n" for k in keys if k in message).encode()


class CertificateCache:
    """Signing certificates' public keys by URL, fetched once per process (bounded; the
    least recently used goes first). Thread-safe: the HTTP API answers on a thread pool."""

    def __init__(self, *, most: int = 32) -> None:
        self.most = most
        self._keys: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()

    def key(self, provider: str, url: str, timeout_s: float) -> Any:
        """The RSA public key of the certificate at ``url``.

        Raises:
            StoreUnavailable: ``e.noti.receipt.certificate``: it could not be fetched now.
            ReceiptRejected: ``.signature``: what was fetched is no RSA certificate.
        """
        with self._lock:
            found = self._keys.get(url)
            if found is not None:
                self._keys.move_to_end(url)
                return found
        pem = _fetch(provider, url, timeout_s)
        key = _rsa_key(provider, pem)
        with self._lock:
            self._keys[url] = key
            while len(self._keys) > self.most:
                self._keys.popitem(last=False)
        return key

    def clear(self) -> None:
        with self._lock:
            self._keys.clear()


#: The certificates of this process (every SES provider's).
CERTIFICATES = CertificateCache()


def _unreachable(provider: str, why: str) -> StoreUnavailable:
    return StoreUnavailable(
        f"{provider}: the SNS signing certificate could not be fetched ({why}); SNS delivers again",
        code="e.noti.receipt.certificate",
    )


def _fetch(provider: str, url: str, timeout_s: float) -> bytes:
    try:
        with _http.client().stream("GET", url, timeout=timeout_s, follow_redirects=False) as answer:
            if answer.status_code != 200:
                raise _unreachable(provider, f"HTTP {answer.status_code}")
            body = b""
            for chunk in answer.iter_bytes():
                body += chunk
                if len(body) > CERT_MAX_BYTES:
                    raise forged(provider, f"the signing certificate is over {CERT_MAX_BYTES} bytes")
            return body
    except httpx.InvalidURL:  # not an HTTPError; _allowed lets none through
        raise forged(provider, "the SigningCertURL is not a URL") from None
    except httpx.HTTPError as exc:
        raise _unreachable(provider, type(exc).__name__) from None


def _rsa_key(provider: str, pem: bytes) -> Any:
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives.asymmetric import rsa
    except ImportError:  # the receipts of this provider need the extra
        raise InvalidConfig("SES receipts need the cryptography package: pip install 'noti[ses]'") from None
    try:
        key = x509.load_pem_x509_certificate(pem).public_key()
    except ValueError:
        raise forged(provider, "the SigningCertURL does not serve a PEM certificate") from None
    if not isinstance(key, rsa.RSAPublicKey):
        raise forged(provider, "the signing certificate's key is not RSA")
    return key


def read_message(
    provider: str,
    request: ReceiptRequest,
    *,
    topic_arns: Iterable[str],
    cert_prefix: str,
    timeout_s: float,
    certificates: CertificateCache = CERTIFICATES,
) -> SnsMessage:
    """The SNS message ``request`` carries, verified (the module docstring's checks).

    Raises:
        ReceiptRejected: ``.malformed``, ``.signature``, ``.provider`` (no topic configured).
        StoreUnavailable: ``e.noti.receipt.certificate`` (SNS delivers it again).
    """
    if request.method.upper() != "POST":
        raise malformed(provider, f"an SNS message is a POST, not a {request.method[:10]}")
    topics = frozenset(topic_arns)
    if not topics:
        raise not_configured(provider, "sns_topic_arns")
    try:
        data = json.loads(request.body)
    except (ValueError, RecursionError):
        raise malformed(provider, "the body is not JSON") from None
    if not isinstance(data, dict):
        raise malformed(provider, "the body is not a JSON object")
    kind = data.get("Type")
    if kind not in SIGNED_KEYS:
        raise malformed(provider, f"Type {str(kind)[:40]!r} is not an SNS message type")
    for name in SIGNED_KEYS[kind]:
        if name != "Subject" and not isinstance(data.get(name), str):
            raise malformed(provider, f"the {kind} has no {name}")
    if "Subject" in data and not isinstance(data["Subject"], str):
        raise malformed(provider, "Subject is not a string")
    if data["TopicArn"] not in topics:
        raise forged(provider, "the message is of a topic not in sns_topic_arns")
    version = data.get("SignatureVersion")
    if version not in ("1", "2"):
        raise forged(provider, "no SignatureVersion 1 or 2: the message is not signed as SNS signs")
    try:
        signature = base64.b64decode(str(data.get("Signature") or ""), validate=True)
    except (binascii.Error, ValueError):
        raise forged(provider, "the Signature is not base64") from None
    if not signature:
        raise forged(provider, "the message carries no Signature")
    cert_url = data.get("SigningCertURL")
    if not isinstance(cert_url, str) or not cert_url.endswith(".pem") or not _allowed(cert_url, cert_prefix):
        raise forged(provider, f"the SigningCertURL is not under {cert_prefix}")
    key = certificates.key(provider, cert_url, timeout_s)
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding

    digest = hashes.SHA1() if version == "1" else hashes.SHA256()  # noqa: S303 - SNS's version 1
    try:
        key.verify(signature, string_to_sign(data), padding.PKCS1v15(), digest)
    except InvalidSignature:
        raise forged(provider, "the SNS signature does not verify") from None
    return SnsMessage(
        type=kind,
        message_id=data["MessageId"],
        topic_arn=data["TopicArn"],
        message=data["Message"],
        subscribe_url=str(data.get("SubscribeURL") or ""),
    )


def confirm(provider: str, message: SnsMessage, *, cert_prefix: str, timeout_s: float) -> None:
    """Confirm a verified subscription: GET its ``SubscribeURL`` (under the allowed prefix only).

    Raises:
        ReceiptRejected: ``.signature``: the URL is not under the prefix.
        StoreUnavailable: ``e.noti.receipt.certificate``-like ``e.noti.receipt.confirm``: SNS
            did not answer 200 (it sends the confirmation again).
    """
    url = message.subscribe_url
    if not _allowed_confirm(url, cert_prefix):
        raise forged(provider, f"the SubscribeURL is not under {cert_prefix}")
    try:
        answer = _http.client().get(url, timeout=timeout_s, follow_redirects=False)
    except httpx.InvalidURL:  # not an HTTPError; _allowed_confirm lets none through
        raise forged(provider, "the SubscribeURL is not a URL") from None
    except httpx.HTTPError as exc:
        raise StoreUnavailable(
            f"{provider}: confirming the SNS subscription failed ({type(exc).__name__})",
            code="e.noti.receipt.confirm",
        ) from None
    if answer.status_code != 200:
        raise StoreUnavailable(
            f"{provider}: confirming the SNS subscription failed (HTTP {answer.status_code})",
            code="e.noti.receipt.confirm",
        )
    log.info("%s: SNS subscription to %s confirmed", provider, message.topic_arn)


def _allowed_confirm(url: str, prefix: str) -> bool:
    """A ``SubscribeURL``: under the prefix, a plain path (SNS's is the prefix itself) and a
    query (``Action``, ``TopicArn``, ``Token``) of printable ASCII without space, ``#`` or
    backslash."""
    if not url.startswith(prefix):
        return False
    path, _, query = url[len(prefix) :].partition("?")
    return _plain(path) and query.isascii() and query.isprintable() and not any(c in query for c in " #\\")
