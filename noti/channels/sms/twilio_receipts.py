"""Twilio delivery receipts: status callbacks (pushed) and the Message resource (polled)
(shared/providers.md §4.2).

**Push.** Each send names ``StatusCallback`` = the provider's ``status_callback`` URL with
``noti_id=<record id>`` added to its query (:func:`callback_url`), so a callback names its
record and Twilio signs that very URL. A callback is a form POST: ``MessageSid``,
``MessageStatus``, ``ErrorCode`` (on ``failed`` / ``undelivered``), ``AccountSid``, … with
``X-Twilio-Signature`` = Base64(HMAC-SHA1(auth token, URL + each parameter's name and value,
sorted by name)) over the URL as Twilio called it (:attr:`ReceiptRequest.url`; as Twilio's
own validators do, the URL is also tried with its default port added or removed). It is
compared in constant time. A signed callback whose ``AccountSid`` is not the provider's
``account_sid`` speaks of another account's message: its report is refused (counted
``foreign``), never applied. Twilio expects any 2xx: noti answers 200 with an empty body.

**Poll** (no ``status_callback``, or ``receipt_poll = true``): ``GET
…/Messages/{sid}.json`` for each pending record with a message sid; a message still on its
way (``queued``, ``sent``, …) gives no report yet, and a sid Twilio does not know (404) none.

=====================================================  ===========================
``MessageStatus`` / ``status``                          report
=====================================================  ===========================
``delivered``, ``read``                                 delivered
``undelivered``, ``failed``, ``canceled``               undelivered (``ErrorCode``)
``queued``, ``sending``, ``sent``, ``accepted``,        accepted (pushed only; a
``scheduled``, ``partially_delivered``                  poll reports nothing yet)
anything else                                           refused (malformed)
=====================================================  ===========================

Callbacks come out of order (``sent`` after ``delivered``) and twice: each is reported as it
comes, and the delivery book keeps the record's state moving forward only.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from collections.abc import Iterable
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from noti.delivery.state import Delivery, DeliveryReport, ReceiptBatch, ReceiptReply, ReceiptRequest
from noti.providers._receipts import forged, malformed

__all__ = ["STATES", "callback_url", "read_callback", "report_of_message", "signature"]

#: Twilio's message statuses and what they say about delivery.
STATES: dict[str, Delivery] = {
    "delivered": Delivery.DELIVERED,
    "read": Delivery.DELIVERED,
    "undelivered": Delivery.UNDELIVERED,
    "failed": Delivery.UNDELIVERED,
    "canceled": Delivery.UNDELIVERED,
    "queued": Delivery.ACCEPTED,
    "sending": Delivery.ACCEPTED,
    "sent": Delivery.ACCEPTED,
    "accepted": Delivery.ACCEPTED,
    "scheduled": Delivery.ACCEPTED,
    # some segments of a long message were delivered, not all: no final word (the record
    # becomes unknown if nothing follows)
    "partially_delivered": Delivery.ACCEPTED,
}
#: The query parameter of ``StatusCallback`` that names the record.
RECORD_PARAM = "noti_id"
#: A message sid (``SM…`` SMS, ``MM…`` MMS): also what a poll puts in a URL path.
SID = re.compile(r"^[A-Z]{2}[0-9a-fA-F]{32}$")
_DEFAULT_PORTS = {"http": 80, "https": 443}
_MAX_ID = 128


def callback_url(status_callback: str, record_id: str) -> str:
    """``status_callback`` with ``noti_id=<record_id>`` added to its query."""
    parts = urlsplit(status_callback)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != RECORD_PARAM]
    query.append((RECORD_PARAM, record_id))
    return urlunsplit(parts._replace(query=urlencode(query)))


def signature(auth_token: str, url: str, params: Iterable[tuple[str, str]]) -> str:
    """Twilio's ``X-Twilio-Signature`` of a form POST to ``url`` (a repeated name's values
    sorted too, as Twilio's validators sort them)."""
    values: dict[str, set[str]] = {}
    for name, value in params:
        values.setdefault(name, set()).add(value)
    data = url + "".join(name + value for name in sorted(values) for value in sorted(values[name]))
    digest = hmac.new(auth_token.encode(), data.encode(), hashlib.sha1).digest()
    return base64.b64encode(digest).decode()


def _url_variants(url: str) -> list[str]:
    """``url`` as given, and with its scheme's default port removed, or added."""
    parts = urlsplit(url)
    default = _DEFAULT_PORTS.get(parts.scheme)
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    userinfo = parts.netloc.rpartition("@")[0]
    prefix = f"{userinfo}@" if userinfo else ""
    try:
        port = parts.port
    except ValueError:
        return [url]
    variants = [url]
    if default is not None and port == default:
        variants.append(urlunsplit(parts._replace(netloc=f"{prefix}{host}")))
    elif default is not None and port is None:
        variants.append(urlunsplit(parts._replace(netloc=f"{prefix}{host}:{default}")))
    return variants


def read_callback(
    provider: str, request: ReceiptRequest, auth_token: str, *, account_sid: str | None = None
) -> ReceiptBatch:
    """The report of one status callback, its signature checked. A callback whose
    ``AccountSid`` is not ``account_sid`` (the provider's account) speaks of another account's
    message: its report is refused (:attr:`ReceiptBatch.refused`), and answered all the same.

    Raises:
        ReceiptRejected: ``e.noti.receipt.signature`` (no or a wrong ``X-Twilio-Signature``),
            ``e.noti.receipt.malformed`` (not a POST, no ``MessageSid`` / ``MessageStatus``,
            a status Twilio does not document).
    """
    if request.method.upper() != "POST":
        raise malformed(provider, f"a Twilio status callback is a POST, not a {request.method}")
    given = request.header("x-twilio-signature")
    if not given:
        raise forged(provider, "no X-Twilio-Signature header")
    params = request.form()
    if not any(
        hmac.compare_digest(signature(auth_token, url, params).encode(), given.encode())
        for url in _url_variants(request.url)
    ):
        raise forged(
            provider,
            "X-Twilio-Signature does not match this URL and body (is status_callback the URL "
            "noti is reached at, NOTI_PUBLIC_URL + /v1/receipts/<provider>?)",
        )
    form = dict(params)
    sid = form.get("MessageSid") or form.get("SmsSid") or ""
    status = form.get("MessageStatus") or form.get("SmsStatus") or ""
    if not sid or len(sid) > _MAX_ID:
        raise malformed(provider, "the callback has no MessageSid")
    state = STATES.get(status)
    if state is None:
        raise malformed(provider, f"MessageStatus {status[:40]!r} is not a Twilio message status")
    record_id = request.query.get(RECORD_PARAM) or None
    if record_id is not None and len(record_id) > _MAX_ID:
        raise malformed(provider, f"{RECORD_PARAM} is longer than {_MAX_ID} characters")
    report = DeliveryReport(
        provider=provider,
        state=state,
        record_id=record_id,
        vendor_id=sid,
        code=form.get("ErrorCode", "") if state is Delivery.UNDELIVERED else "",
        text=status,
    )
    account = form.get("AccountSid")
    if account_sid is not None and account is not None and account != account_sid:
        return ReceiptBatch([], ReceiptReply(200, b""), refused=[report])
    return ReceiptBatch([report], ReceiptReply(200, b""))


def report_of_message(provider: str, record_id: str, message: dict[str, Any]) -> DeliveryReport | None:
    """The report of a fetched Message resource: None while it is on its way (or unreadable)."""
    status = message.get("status")
    state = STATES.get(status) if isinstance(status, str) else None
    sid = message.get("sid")
    if state is None or not state.final or not isinstance(sid, str) or not sid:
        return None
    error = message.get("error_code")
    return DeliveryReport(
        provider=provider,
        state=state,
        record_id=record_id,
        vendor_id=sid,
        code=str(error) if error is not None and state is Delivery.UNDELIVERED else "",
        text=str(message.get("error_message") or status),
        at_ms=_rfc2822_ms(message.get("date_updated")),
    )


def _rfc2822_ms(value: object) -> int:
    if not isinstance(value, str):
        return 0
    try:
        return int(parsedate_to_datetime(value).timestamp() * 1000)
    except (TypeError, ValueError):
        return 0
