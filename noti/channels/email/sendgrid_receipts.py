"""SendGrid's Event Webhook, signed: what became of the messages SendGrid took.

SendGrid posts a JSON array of events to ``<public_url>/v1/receipts/<provider>``, signed with
ECDSA (P-256, SHA-256) over the ``X-Twilio-Email-Event-Webhook-Timestamp`` header's digits
followed by the raw body; the signature is base64 DER in
``X-Twilio-Email-Event-Webhook-Signature``, checked with the verification key SendGrid's
console shows (base64 of the DER public key; the provider's ``webhook_public_key``). A post
without both headers, dated more than ``webhook_max_age_s`` from this clock, or whose
signature does not verify is refused (``e.noti.receipt.signature``), nothing of it read.

Each event names its message by ``sg_message_id`` (``<X-Message-Id>.<filter suffix>``: the
part before the first dot is the record's ``noti_email_msgid``) and its record by the
``noti_id`` custom argument every send carries (SendGrid puts custom arguments at the
event's top level).

=========================================  ===================  ==============================
event                                      report               target
=========================================  ===================  ==============================
``processed``, ``deferred``                accepted             –
``delivered``                              delivered            –
``bounce`` of ``type`` ``bounce``          undelivered          suppressed (``bounce``)
``bounce`` of ``type`` ``blocked``         undelivered          kept (a block is the
                                                                receiver's, for now)
``dropped``                                undelivered          suppressed when SendGrid
                                                                dropped it for its own list
                                                                (Bounced / Spam Reporting /
                                                                Unsubscribed Address)
``spamreport``                             undelivered          suppressed (``complaint``)
``unsubscribe``, ``group_unsubscribe``     delivered            suppressed (``unsubscribe``)
``open``, ``click``, others                none                 –
=========================================  ===================  ==============================

SendGrid expects any 2xx; it retries other answers for up to 24 hours.
"""

from __future__ import annotations

import base64
import binascii
import time
from typing import Any

from noti.delivery.state import Delivery, DeliveryReport, ReceiptBatch, ReceiptReply, ReceiptRequest
from noti.errors import InvalidConfig
from noti.providers._receipts import forged, json_array, malformed, not_configured

__all__ = [
    "RECORD_ARG",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "load_public_key",
    "read_events",
    "verify",
]

SIGNATURE_HEADER = "x-twilio-email-event-webhook-signature"
TIMESTAMP_HEADER = "x-twilio-email-event-webhook-timestamp"
#: The custom argument each send carries with its record id.
RECORD_ARG = "noti_id"
_MAX_ID = 128
#: ``dropped`` reasons that mean SendGrid's own suppression list had the address.
DROPPED_SUPPRESS = {
    "Bounced Address": "bounce",
    "Spam Reporting Address": "complaint",
    "Unsubscribed Address": "unsubscribe",
}


def load_public_key(text: str) -> Any:
    """The ECDSA public key of a verification key as SendGrid shows it (base64 DER; a PEM
    with its header lines is taken too).

    Raises:
        ValueError: not such a key.
        InvalidConfig: the cryptography package is missing.
    """
    try:
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.hazmat.primitives.serialization import load_der_public_key
    except ImportError:
        raise InvalidConfig(
            "SendGrid receipts need the cryptography package: pip install 'noti[sendgrid]'"
        ) from None
    body = "".join(line for line in text.strip().splitlines() if not line.startswith("-----"))
    try:
        key = load_der_public_key(base64.b64decode(body, validate=True))
    except (binascii.Error, ValueError):
        raise ValueError("not a base64 DER public key (the Event Webhook's verification key)") from None
    if not isinstance(key, ec.EllipticCurvePublicKey):
        raise ValueError("not an elliptic-curve key (the Event Webhook's verification key is ECDSA P-256)")
    return key


def verify(
    provider: str, request: ReceiptRequest, key: Any, *, max_age_s: float, now_s: float | None = None
) -> None:
    """Check the post's signature and its time.

    Raises:
        ReceiptRejected: ``e.noti.receipt.signature``.
    """
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec

    signature = request.header(SIGNATURE_HEADER)
    stamp = request.header(TIMESTAMP_HEADER)
    if not signature or not stamp:
        raise forged(provider, "the post carries no X-Twilio-Email-Event-Webhook-Signature and -Timestamp")
    if not stamp.isascii() or not stamp.isdigit() or len(stamp) > 12:
        raise forged(provider, "X-Twilio-Email-Event-Webhook-Timestamp is not a time in seconds")
    age = (time.time() if now_s is None else now_s) - int(stamp)
    if abs(age) > max_age_s:
        raise forged(provider, f"the signature is dated {int(age)} s from now (at most {int(max_age_s)} s)")
    try:
        der = base64.b64decode(signature, validate=True)
    except (binascii.Error, ValueError):
        raise forged(provider, "the signature is not base64") from None
    try:
        key.verify(der, stamp.encode() + request.body, ec.ECDSA(hashes.SHA256()))
    except (InvalidSignature, ValueError):
        raise forged(provider, "the Event Webhook signature does not verify") from None


def _report(provider: str, event: dict[str, Any]) -> DeliveryReport | None:
    kind = event.get("event")
    sg_id = event.get("sg_message_id")
    vendor_id = sg_id.split(".", 1)[0] if isinstance(sg_id, str) else ""
    record_id = event.get(RECORD_ARG)
    record_id = record_id if isinstance(record_id, str) and 0 < len(record_id) <= _MAX_ID else None
    if not (0 < len(vendor_id) <= _MAX_ID):
        vendor_id = ""
    if not vendor_id or not isinstance(kind, str):
        return None  # nothing of ours can be named by it (a marketing event, …)
    status = str(event.get("status") or "")[:40]
    reason = str(event.get("reason") or event.get("response") or "")[:500]
    at = event.get("timestamp")
    base: dict[str, Any] = {
        "provider": provider,
        "record_id": record_id,
        "vendor_id": vendor_id,
        "at_ms": at * 1000 if isinstance(at, int) and not isinstance(at, bool) and 0 < at < 10**11 else 0,
    }
    if kind in ("processed", "deferred"):
        return DeliveryReport(**base, state=Delivery.ACCEPTED, text=kind)
    if kind == "delivered":
        return DeliveryReport(**base, state=Delivery.DELIVERED, text=reason or "delivered")
    if kind == "bounce":
        blocked = event.get("type") == "blocked"
        return DeliveryReport(
            **base,
            state=Delivery.UNDELIVERED,
            code=f"{'blocked' if blocked else 'bounce'}/{status}"
            if status
            else str(event.get("type") or kind),
            text=reason,
            suppress="" if blocked else "bounce",
        )
    if kind == "dropped":
        return DeliveryReport(
            **base,
            state=Delivery.UNDELIVERED,
            code=f"dropped/{status}" if status else "dropped",
            text=reason,
            suppress=DROPPED_SUPPRESS.get(reason, ""),
        )
    if kind == "spamreport":
        return DeliveryReport(
            **base, state=Delivery.UNDELIVERED, code="spamreport", text="spam report", suppress="complaint"
        )
    if kind in ("unsubscribe", "group_unsubscribe"):
        return DeliveryReport(**base, state=Delivery.DELIVERED, code=kind, text=kind, suppress="unsubscribe")
    return None


def read_events(provider: str, request: ReceiptRequest, key: Any | None, *, max_age_s: float) -> ReceiptBatch:
    """The reports of one signed post (events that say nothing of delivery are left out).

    Raises:
        ReceiptRejected: ``.provider`` (no ``webhook_public_key``), ``.signature``, ``.malformed``.
    """
    if request.method.upper() != "POST":
        raise malformed(provider, f"an Event Webhook post is a POST, not a {request.method[:10]}")
    if key is None:
        raise not_configured(provider, "webhook_public_key")
    verify(provider, request, key, max_age_s=max_age_s)
    events = json_array(request, provider)
    reports = [r for r in (_report(provider, e) for e in events) if r is not None]
    return ReceiptBatch(reports, ReceiptReply(200, b""))
