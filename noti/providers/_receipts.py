"""What the providers' receipt readers share: the receipt options, the refusals, the URL key
that authenticates the vendors that do not sign their pushes (Aliyun, Tencent), a JSON array
of reports, the vendors' Beijing-time stamps, and polling a vendor one message at a time.

A vendor that signs its pushes (Twilio, WeChat) is checked by its own module
(:mod:`noti.channels.sms.twilio_receipts`, :mod:`noti.channels.weixin.receipts`). Aliyun's
SmsReport and Tencent's status callback carry no signature, so the URL configured in their
console carries a secret instead: ``<public_url>/v1/receipts/<provider>/<receipt_key>`` (a path
segment the logs redact; the ``X-Noti-Receipt-Key`` header, or ``?key=<receipt_key>`` of URLs
configured before, are taken too), compared in constant time (:func:`check_key`). Without
``receipt_key`` a provider takes no pushed receipts (``e.noti.receipt.provider``): an
unauthenticated URL would let anyone mark records delivered.

Push or poll (``receipt_poll``): unset, a provider polls its vendor when no push is configured
(no ``receipt_key``; Twilio: no ``status_callback``); ``true`` polls as well as taking pushes,
``false`` never polls.
"""

from __future__ import annotations

import hmac
import json
import logging
import re
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

from pydantic import SecretStr, field_validator

from noti.delivery.state import DeliveryReport, PendingDelivery, ReceiptReply, ReceiptRequest
from noti.errors import DeliveryError, ReceiptRejected
from noti.providers.base import ProviderOptions

__all__ = [
    "BEIJING",
    "KeyedReceiptOptions",
    "ReceiptPollOption",
    "beijing_ms",
    "check_key",
    "forged",
    "json_array",
    "json_reply",
    "malformed",
    "not_configured",
    "poll_each",
    "string_field",
]

log = logging.getLogger(__name__)

#: China Standard Time (no daylight saving): the zone of Aliyun's and Tencent's time stamps.
BEIJING = timezone(timedelta(hours=8))
#: A receipt key: URL-safe characters only (it travels in a URL), too long to guess.
RECEIPT_KEY = r"^[A-Za-z0-9_~.-]{16,256}$"
#: The query parameter that carried the receipt key (still taken: URLs configured before the
#: key moved into the path; the logs redact it).
KEY_PARAM = "key"
#: The header that carries the receipt key: the route of ``/v1/receipts/<provider>/<key>`` sets
#: it from the path, and a proxy or a test may send it.
KEY_HEADER = "x-noti-receipt-key"


class ReceiptPollOption(ProviderOptions):
    """``receipt_poll``: whether beat asks the vendor for receipts (see the module docstring)."""

    #: None: poll when no push is configured; True: poll as well; False: never poll.
    receipt_poll: bool | None = None


class KeyedReceiptOptions(ReceiptPollOption):
    """Receipt options of a vendor whose pushes are unsigned: the URL's secret key."""

    #: The ``key=`` of the receipt URL given to the vendor; unset: pushes are refused.
    receipt_key: SecretStr | None = None

    @field_validator("receipt_key")
    @classmethod
    def _url_safe(cls, value: SecretStr | None) -> SecretStr | None:
        # the message never quotes the value: it is a secret
        if value is not None and not re.match(RECEIPT_KEY, value.get_secret_value()):
            raise ValueError("must be 16 to 256 of A-Z a-z 0-9 _ ~ . - (it travels in a URL's query)")
        return value

    def polls(self) -> bool:
        """True when beat polls this vendor (no push configured, or ``receipt_poll = true``)."""
        return self.receipt_key is None if self.receipt_poll is None else self.receipt_poll


def malformed(provider: str, why: str) -> ReceiptRejected:
    """A receipt that cannot be read (``e.noti.receipt.malformed``: HTTP 400)."""
    return ReceiptRejected(f"{provider}: {why}", code="e.noti.receipt.malformed")


def forged(provider: str, why: str) -> ReceiptRejected:
    """A receipt whose authentication fails (``e.noti.receipt.signature``: HTTP 403)."""
    return ReceiptRejected(f"{provider}: {why}", code="e.noti.receipt.signature")


def not_configured(provider: str, option: str) -> ReceiptRejected:
    """A provider that takes no pushed receipts until ``option`` is set (``e.noti.receipt.provider``)."""
    return ReceiptRejected(
        f"{provider}: pushed receipts are not configured (set {option} in [providers.{provider}])",
        code="e.noti.receipt.provider",
    )


def check_key(request: ReceiptRequest, key: SecretStr | None, provider: str) -> None:
    """Check the receipt's key (the ``X-Noti-Receipt-Key`` header, which the route sets from the
    URL's path, else the URL's ``key=``) against ``receipt_key``, in constant time.

    Raises:
        ReceiptRejected: ``e.noti.receipt.provider`` when no key is configured,
            ``e.noti.receipt.signature`` when the URL has none or another.
    """
    if key is None:
        raise not_configured(provider, "receipt_key")
    given = request.header(KEY_HEADER) or request.query.get(KEY_PARAM)
    if not given:
        raise forged(provider, "the receipt URL carries no key (/v1/receipts/<provider>/<receipt_key>)")
    if not hmac.compare_digest(given.encode(), key.get_secret_value().encode()):
        raise forged(provider, "the receipt URL's key is not this provider's receipt_key")


def json_array(request: ReceiptRequest, provider: str) -> list[dict[str, Any]]:
    """The body as a JSON array of objects (Aliyun's SmsReport, Tencent's callback).

    Raises:
        ReceiptRejected: ``e.noti.receipt.malformed``: not JSON, not an array, or an entry
            that is not an object.
    """
    try:
        data = json.loads(request.body)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise malformed(provider, f"the body is not JSON ({type(exc).__name__})") from None
    if not isinstance(data, list):
        raise malformed(provider, f"the body is a JSON {type(data).__name__}, not an array of reports")
    for index, entry in enumerate(data):
        if not isinstance(entry, dict):
            raise malformed(provider, f"report {index} is a JSON {type(entry).__name__}, not an object")
    return data


def string_field(
    entry: dict[str, Any], name: str, index: int, provider: str, *, required: bool = True
) -> str:
    """``entry[name]`` as a string: ``""`` when it is absent and not ``required``.

    Raises:
        ReceiptRejected: ``e.noti.receipt.malformed``: required and absent or empty, or not
            a string.
    """
    value = entry.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        what = "missing" if value is None else f"a JSON {type(value).__name__}, not a string"
        raise malformed(provider, f"report {index}: {name!r} is {what}")
    if required and not value:
        raise malformed(provider, f"report {index}: {name!r} is empty")
    return value


def beijing_ms(value: object) -> int:
    """Epoch ms of a ``YYYY-MM-DD HH:MM:SS`` Beijing time; 0 when it is not one (the vendor's
    time is information, not a reason to refuse a receipt the vendor would push again)."""
    if not isinstance(value, str):
        return 0
    try:
        at = datetime.strptime(value.strip(), "%Y-%m-%d %H:%M:%S").replace(tzinfo=BEIJING)
    except ValueError:
        return 0
    return int(at.timestamp() * 1000)


def json_reply(body: dict[str, Any]) -> ReceiptReply:
    """HTTP 200 with ``body`` as JSON (the answer Aliyun and Tencent check)."""
    return ReceiptReply(
        200,
        json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode(),
        "application/json; charset=utf-8",
    )


def poll_each(
    provider: str,
    pending: Sequence[PendingDelivery],
    ask: Callable[[PendingDelivery], DeliveryReport | None],
) -> list[DeliveryReport]:
    """``ask`` the vendor about each pending message in turn: the reports it gave.

    The first failure ends the round (the vendor is likely down: asking the rest would wait
    out each timeout); what was learnt before it is returned, and the rest are asked next round.

    Raises:
        DeliveryError: the first question failed (nothing was learnt).
    """
    reports: list[DeliveryReport] = []
    for item in pending:
        try:
            report = ask(item)
        except DeliveryError as exc:
            if not reports:
                raise
            log.warning(
                "%s: receipt poll stopped at record %s (%s); %d report(s) kept, the rest next round",
                provider,
                item.record_id,
                exc,
                len(reports),
            )
            break
        if report is not None:
            reports.append(report)
    return reports
