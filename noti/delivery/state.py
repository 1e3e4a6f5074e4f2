"""What a vendor said about the delivery of a message, and what a receipt looks like on the
way in: the types shared by the providers (which read their vendor's receipts), the HTTP API
(which hands pushed receipts over) and the delivery book (which applies them to records).

A record's delivery status is separate from its send status (``noti_st``) and moves forward
only::

    (none) ──sent──▶ accepted ──▶ delivered | undelivered        (terminal: the first one wins)
                         │
                         └── no receipt in time ──▶ unknown ──▶ delivered | undelivered

A late ``accepted`` never overwrites ``delivered``; a ``delivered`` after ``unknown`` does
(the receipt came late, but it came). The rule is applied in Redis, by ``delivery.lua``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from urllib.parse import parse_qsl, urlsplit

__all__ = [
    "Delivery",
    "DeliveryReport",
    "PendingDelivery",
    "ReceiptBatch",
    "ReceiptReply",
    "ReceiptRequest",
]


class Delivery(StrEnum):
    """A record's delivery status (``noti_dlv``)."""

    ACCEPTED = "accepted"  #: the vendor took the message; no receipt yet
    DELIVERED = "delivered"  #: the vendor reports it reached the phone / the user / the relay
    UNDELIVERED = "undelivered"  #: the vendor reports it did not (``noti_dlv_code`` says why)
    UNKNOWN = "unknown"  #: no receipt within ``NOTI_DELIVERY_UNKNOWN_AFTER_S``

    @property
    def final(self) -> bool:
        return self in (Delivery.DELIVERED, Delivery.UNDELIVERED)


@dataclass(frozen=True, slots=True)
class DeliveryReport:
    """One vendor's word on one message. It names the record by noti's id when the vendor
    echoes it (Aliyun ``out_id``, Tencent ``SessionContext``, the Twilio callback URL's
    ``noti_id``) or by the vendor's message id alone (WeChat ``MsgID``, Twilio ``MessageSid``)."""

    #: The configured provider name (``[providers.<name>]``) the receipt came through.
    provider: str
    state: Delivery
    record_id: str | None = None
    vendor_id: str | None = None
    #: The vendor's own code and words (``DELIVRD``, ``30003``, ``failed:user block``).
    code: str = ""
    text: str = ""
    #: When the vendor says it happened (epoch ms); 0 = when noti applies it.
    at_ms: int = 0
    #: Why the record's target is to be suppressed for its channel (``bounce``, ``complaint``,
    #: ``unsubscribe``: :mod:`noti.core.suppression`), or "": the delivery book suppresses it
    #: once the report passes the checks that a receipt speaks for its provider's send.
    suppress: str = ""

    def __post_init__(self) -> None:
        if not self.record_id and not self.vendor_id:
            raise ValueError("a delivery report names its record or the vendor's message id")

    def to_json(self) -> str:
        return json.dumps(
            {
                "provider": self.provider,
                "state": self.state.value,
                "record_id": self.record_id,
                "vendor_id": self.vendor_id,
                "code": self.code,
                "text": self.text,
                "at_ms": self.at_ms,
                **({"suppress": self.suppress} if self.suppress else {}),
            },
            ensure_ascii=False,
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str) -> DeliveryReport:
        data = json.loads(text)
        return cls(
            provider=data["provider"],
            state=Delivery(data["state"]),
            record_id=data.get("record_id"),
            vendor_id=data.get("vendor_id"),
            code=data.get("code", ""),
            text=data.get("text", ""),
            at_ms=int(data.get("at_ms", 0)),
            suppress=str(data.get("suppress", "")),
        )


@dataclass(frozen=True, slots=True)
class PendingDelivery:
    """A sent record whose receipt a polled vendor is asked for."""

    record_id: str
    target: str
    #: The vendor's message id (``BizId``, ``SerialNo``, message SID); None when it gave none.
    vendor_id: str | None
    sent_ms: int


@dataclass(frozen=True, slots=True)
class ReceiptRequest:
    """An HTTP request a vendor made to ``/v1/receipts/<provider>``, as received.

    ``url`` is the URL the vendor called, as it signed it: ``NOTI_PUBLIC_URL`` + the path and
    query string when that setting is given (behind a proxy the request's own URL differs).
    """

    method: str
    url: str
    headers: Mapping[str, str] = field(default_factory=dict)  #: names in lower case
    body: bytes = b""

    @property
    def query(self) -> dict[str, str]:
        """The query parameters (the last of a repeated name wins)."""
        return dict(parse_qsl(urlsplit(self.url).query, keep_blank_values=True))

    def form(self) -> list[tuple[str, str]]:
        """The body as ``application/x-www-form-urlencoded`` pairs, in order."""
        return parse_qsl(self.body.decode("utf-8", "replace"), keep_blank_values=True)

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())


@dataclass(frozen=True, slots=True)
class ReceiptReply:
    """What noti answers the vendor (each vendor wants its own body: WeChat ``success``,
    Aliyun ``{"code": 0, ...}``, Tencent ``{"result": 0, ...}``)."""

    status: int = 200
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"


@dataclass(frozen=True, slots=True)
class ReceiptBatch:
    """The reports one pushed request carries and the answer the vendor expects once they are
    stored (a vendor pushes again when noti does not answer this)."""

    reports: Sequence[DeliveryReport]
    reply: ReceiptReply = field(default_factory=ReceiptReply)
    #: Reports the reader refused itself: authentic, but naming an account of the vendor's
    #: other than the provider's (Twilio's ``AccountSid``). Counted (``foreign``), never
    #: applied; the vendor still gets its answer (it would only push them again).
    refused: Sequence[DeliveryReport] = ()
