"""Amazon SES feedback (bounces, complaints, deliveries) as delivery reports.

SES publishes one JSON event per message and recipient to an SNS topic (identity
notifications carry ``notificationType``; configuration-set event publishing ``eventType``);
:mod:`noti.channels.email._sns` verifies the SNS message, this module reads the event in its
``Message``. Each event names the message by ``mail.messageId`` (what ``SendEmail`` returned,
the record's ``noti_email_msgid``) and, through event publishing, the record by the
``noti_id`` tag every send carries (``mail.tags.noti_id``).

======================================  ===================  =================================
event                                   report               target
======================================  ===================  =================================
Bounce, ``bounceType`` Permanent        undelivered          suppressed (``bounce``)
Bounce, Transient or Undetermined       undelivered          kept: the next message may go
Complaint                               undelivered          suppressed (``complaint``)
Delivery                                delivered            –
Reject, Rendering Failure               undelivered          –
Send, DeliveryDelay                     accepted             –
anything else (Open, Click, …)          none                 –
SES's notices that a topic is set up    none                 –
======================================  ===================  =================================

SES's notices name no message: ``AmazonSnsSubscriptionSucceeded`` (identity notifications,
when a topic is chosen) and the text "Successfully validated SNS topic for Amazon SES event
publishing." (not JSON; a configuration set's event destination). They are answered 2xx with no
report: refused, SNS would post them again and again.

The code is ``<bounceType>/<bounceSubType>`` (``Permanent/General``), ``complaint/<feedback
type>`` or the event's name; the text is the first recipient's ``diagnosticCode`` (``smtp; 550
5.1.1 user unknown``), the complaint's feedback type or the SMTP response. A complaint that
comes after the delivery leaves the record delivered (the first final word stays) and still
suppresses its target.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from noti.delivery.state import Delivery, DeliveryReport
from noti.providers._receipts import malformed

__all__ = ["RECORD_TAG", "SETUP_NOTICE", "SETUP_TEXT", "reports_of_event"]

#: The ``EmailTags`` name each send carries with its record id.
RECORD_TAG = "noti_id"
#: What SES posts when a topic is set up (module docstring): no report, no refusal.
SETUP_NOTICE = "AmazonSnsSubscriptionSucceeded"
SETUP_TEXT = "Successfully validated SNS topic for Amazon SES event publishing."
_MAX_ID = 128


def _object(value: Any, what: str, provider: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise malformed(provider, f"the SES event has no {what} object")
    return value


def _ms(value: Any) -> int:
    """Epoch ms of an ISO 8601 time (``2016-01-27T14:59:38.237Z``); 0 when it is not one."""
    if not isinstance(value, str):
        return 0
    try:
        return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return 0


def _record_id(mail: dict[str, Any]) -> str | None:
    tags = mail.get("tags")
    values = tags.get(RECORD_TAG) if isinstance(tags, dict) else None
    value = values[0] if isinstance(values, list) and values else None
    return value if isinstance(value, str) and 0 < len(value) <= _MAX_ID else None


def reports_of_event(provider: str, text: str) -> list[DeliveryReport]:
    """The report of one SES event (the ``Message`` of a verified SNS notification): none for
    an event that says nothing of delivery.

    Raises:
        ReceiptRejected: ``e.noti.receipt.malformed``: not a JSON object, no ``mail`` with a
            ``messageId``, or a bounce/complaint/delivery without its object.
    """
    if text.strip() == SETUP_TEXT:
        return []
    try:
        event = json.loads(text)
    except (ValueError, RecursionError):
        raise malformed(provider, "the SNS Message is not the JSON of an SES event") from None
    event = _object(event, "top-level", provider)
    kind = event.get("notificationType") or event.get("eventType")
    if kind == SETUP_NOTICE:
        return []
    mail = _object(event.get("mail"), "mail", provider)
    message_id = mail.get("messageId")
    if not isinstance(message_id, str) or not 0 < len(message_id) <= _MAX_ID:
        raise malformed(provider, "the SES event's mail has no messageId")
    base: dict[str, Any] = {"provider": provider, "record_id": _record_id(mail), "vendor_id": message_id}
    if kind == "Bounce":
        bounce = _object(event.get("bounce"), "bounce", provider)
        bounce_type = str(bounce.get("bounceType") or "Undetermined")[:40]
        subtype = str(bounce.get("bounceSubType") or "")[:60]
        recipients = bounce.get("bouncedRecipients")
        first = recipients[0] if isinstance(recipients, list) and recipients else {}
        first = first if isinstance(first, dict) else {}
        words = first.get("diagnosticCode") or first.get("status") or bounce_type
        return [
            DeliveryReport(
                **base,
                state=Delivery.UNDELIVERED,
                code=f"{bounce_type}/{subtype}" if subtype else bounce_type,
                text=str(words)[:500],
                at_ms=_ms(bounce.get("timestamp")),
                suppress="bounce" if bounce_type == "Permanent" else "",
            )
        ]
    if kind == "Complaint":
        complaint = _object(event.get("complaint"), "complaint", provider)
        feedback = str(complaint.get("complaintFeedbackType") or "unknown")[:60]
        return [
            DeliveryReport(
                **base,
                state=Delivery.UNDELIVERED,
                code=f"complaint/{feedback}",
                text=feedback,
                at_ms=_ms(complaint.get("timestamp")),
                suppress="complaint",
            )
        ]
    if kind == "Delivery":
        delivery = _object(event.get("delivery"), "delivery", provider)
        return [
            DeliveryReport(
                **base,
                state=Delivery.DELIVERED,
                text=str(delivery.get("smtpResponse") or "")[:500],
                at_ms=_ms(delivery.get("timestamp")),
            )
        ]
    if kind in ("Reject", "Rendering Failure"):
        detail = event.get("reject") or event.get("failure") or {}
        reason = detail.get("reason") or detail.get("errorMessage") if isinstance(detail, dict) else ""
        return [
            DeliveryReport(**base, state=Delivery.UNDELIVERED, code=str(kind), text=str(reason or kind)[:500])
        ]
    if kind in ("Send", "DeliveryDelay"):
        return [DeliveryReport(**base, state=Delivery.ACCEPTED, text=str(kind))]
    return []
