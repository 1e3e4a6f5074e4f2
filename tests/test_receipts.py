"""What every provider says about receipts: which are delivered on send, which take pushed
receipts, and the shared pieces (the URL key, the JSON array, Beijing time stamps, polling
one message at a time)."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from pydantic import SecretStr

from noti.delivery.state import Delivery, DeliveryReport, PendingDelivery, ReceiptRequest
from noti.errors import ProviderOutage, ReceiptRejected
from noti.keys import Keys
from noti.providers import BUILTIN, load_kind
from noti.providers._receipts import beijing_ms, check_key, json_array, poll_each
from noti.providers.sandbox import SandboxProvider

ON_SEND = {"email", "webhook", "sandbox"}


@pytest.mark.parametrize("kind", sorted(BUILTIN))
def test_only_the_providers_whose_send_is_the_end_are_delivered_on_send(kind: str) -> None:
    assert load_kind(kind).delivered_on_send is (kind in ON_SEND)


def test_a_provider_that_takes_no_receipts_refuses_them(redis_url: str) -> None:
    sandbox = SandboxProvider("sandbox", {}, redis=redis.Redis.from_url(redis_url), keys=Keys("noti:"))
    with pytest.raises(ReceiptRejected) as refused:
        sandbox.read_receipt(ReceiptRequest("POST", "https://noti.example.com/v1/receipts/sandbox"))
    assert refused.value.code == "e.noti.receipt.provider"
    assert not sandbox.polls_receipts and sandbox.poll_receipts([]) == []


@pytest.mark.parametrize(
    ("url", "code"),
    [
        ("https://n.example.com/v1/receipts/x?key=0123456789abcdef", None),
        ("https://n.example.com/v1/receipts/x?other=1&key=0123456789abcdef", None),
        ("https://n.example.com/v1/receipts/x", "e.noti.receipt.signature"),
        ("https://n.example.com/v1/receipts/x?key=", "e.noti.receipt.signature"),
        ("https://n.example.com/v1/receipts/x?key=0123456789abcdeF", "e.noti.receipt.signature"),
        ("https://n.example.com/v1/receipts/x?KEY=0123456789abcdef", "e.noti.receipt.signature"),
    ],
)
def test_the_url_key_must_be_the_receipt_key_exactly(url: str, code: str | None) -> None:
    request = ReceiptRequest("POST", url)
    if code is None:
        check_key(request, SecretStr("0123456789abcdef"), "x")
        return
    with pytest.raises(ReceiptRejected) as refused:
        check_key(request, SecretStr("0123456789abcdef"), "x")
    assert refused.value.code == code and "0123456789abcdef" not in str(refused.value)


def test_no_receipt_key_means_no_pushes() -> None:
    with pytest.raises(ReceiptRejected) as refused:
        check_key(ReceiptRequest("POST", "https://n.example.com/?key=anything"), None, "x")
    assert refused.value.code == "e.noti.receipt.provider"


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"{}", "JSON dict, not an array"),
        (b"[{}, 2]", "report 1 is a JSON int"),
        (b"\xff", "not JSON"),
        (b"[" * 20_000 + b"]" * 20_000, "not JSON"),
    ],
)
def test_a_json_array_of_objects_is_required(body: bytes, why: str) -> None:
    with pytest.raises(ReceiptRejected) as refused:
        json_array(ReceiptRequest("POST", "https://n.example.com/", body=body), "x")
    assert refused.value.code == "e.noti.receipt.malformed" and why in refused.value.message


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("2015-10-17 08:03:04", 1445040184000),  # 00:03:04 UTC
        ("2026-03-02 00:00:10", 1772380810000),
        ("2015-10-17T08:03:04", 0),
        ("", 0),
        (None, 0),
        (1445040184, 0),
    ],
)
def test_vendor_times_are_beijing_time(text: Any, ms: int) -> None:
    assert beijing_ms(text) == ms


def test_a_poll_stops_at_the_first_failure_and_keeps_what_it_learnt() -> None:
    asked: list[str] = []

    def ask(item: PendingDelivery) -> DeliveryReport | None:
        asked.append(item.record_id)
        if item.record_id == "b":
            raise ProviderOutage("vendor down", provider="x")
        return DeliveryReport("x", Delivery.DELIVERED, record_id=item.record_id)

    items = [PendingDelivery(name, "+8613912345678", None, 0) for name in "abc"]
    assert [r.record_id for r in poll_each("x", items, ask)] == ["a"]
    assert asked == ["a", "b"]
    with pytest.raises(ProviderOutage):
        poll_each("x", items[1:], ask)
