"""What the recipients' end-to-end tests are given (issue 34): a runtime with push, SMS and
e-mail through sandboxes (push with delivery receipts), the categories ``orders``,
``security`` (critical) and ``marketing`` (SMS off by default), the template
``order_shipped`` (English, Chinese SMS), and recipient 42 with an address on each channel
(``zh-Hant-TW``, ``Asia/Taipei``); and the helpers that read what became of a notice."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from noti import recipients
from noti.delivery import ReceiptRequest
from noti.providers.sandbox import read_outbox, sign_receipt
from noti.redis.counters import parse
from noti.sending.intake import ReceiptIntake
from tests.conftest import MEMBER

SECRET = "r3ceipt"


PHONE, EMAIL, TOKEN = "+8613912345678", "ada@example.com", "fcm-token-42"


TEMPLATE = {
    "default_locale": "en",
    "channels": {
        "push": {"en": {"title": "Shipped", "body": "Order {{ order }} shipped"}},
        "sms": {
            "en": {"text": "Order {{ order }} shipped"},
            "zh": {"text": "订单 {{ order }} 已发货"},
        },
        "email": {
            "en": {
                "subject": "Order {{ order }}",
                "text": "Hello {{ recipient.attributes.name }}, it shipped.",
            },
        },
    },
}


def given_runtime(configure: Any) -> Any:
    """The runtime and what it is given (the test modules' ``rt`` fixture, from ``configure``)."""
    runtime = configure(
        providers={"pushbox": {"kind": "sandbox", "receipt_secret": SECRET}},
        channels={
            "sms": {"provider": "sandbox"},
            "email": {"provider": "sandbox"},
            "push": {"provider": "pushbox"},
        },
        pump_interval_s=0.1,
    )
    recipients.put_category("orders", {"channels": {"push": True, "sms": True, "email": True}}, user=MEMBER)
    recipients.put_category("security", {"critical": True}, user=MEMBER)
    recipients.put_category("marketing", {"channels": {"sms": False}}, user=MEMBER)
    recipients.put_template("order_shipped", TEMPLATE)
    recipients.put(
        "42",
        {
            "addresses": {"push": TOKEN, "sms": PHONE, "email": EMAIL},
            "locale": "zh-Hant-TW",
            "timezone": "Asia/Taipei",
            "attributes": {"name": "Ada"},
        },
    )
    return runtime


def outbox(rt: Any, name: str = "sandbox") -> list[dict[str, Any]]:
    return read_outbox(rt.redis, rt.keys, name)


def receipt(rt: Any, record_id: str, state: str) -> None:
    body = json.dumps([{"msgid": f"sandbox-{record_id}", "state": state, "code": state.upper()}]).encode()
    headers = {"x-sandbox-signature": sign_receipt(SECRET, body)}
    ReceiptIntake(rt).take(
        "pushbox", ReceiptRequest("POST", "http://127.0.0.1/v1/receipts/pushbox", headers, body)
    )


def states(notice: Any) -> dict[str, str]:
    return {e.channel: e.state for e in notice.entries}


def counters(rt: Any) -> dict[tuple[str, tuple[str, ...]], int]:
    return {(f.code, labels): n for f, labels, n in parse(rt.redis.hgetall(rt.keys.metrics))}


def by(notice: Any, channel: str) -> Any:
    return next(e for e in notice.entries if e.channel == channel)


def _quiet_now(seconds_left: float) -> str:
    """A quiet window in UTC that started a minute ago and ends ``seconds_left`` from now."""
    now = datetime.now(UTC)
    start, end = now - timedelta(minutes=1), now + timedelta(seconds=seconds_left)
    return f"{start:%H:%M:%S}-{end:%H:%M:%S}"
