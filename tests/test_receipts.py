"""What every provider says about receipts: which are delivered on send, which take pushed
receipts, and the shared pieces (the URL key, the JSON array, Beijing time stamps, polling
one message at a time)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import SecretStr

from noti.core.keys import Keys
from noti.delivery.state import Delivery, DeliveryReport, PendingDelivery, ReceiptRequest
from noti.errors import ProviderOutage, ReceiptRejected
from noti.providers import BUILTIN, load_kind
from noti.providers._receipts import beijing_ms, check_key, json_array, poll_each
from noti.providers.sandbox import SandboxProvider
from tests.receipt_vendors import authenticated, receiving

#: The kinds whose vendor sends no delivery receipt: the send's success is the end (SMTP,
#: webhooks, push and chat vendors). SES and SendGrid report deliveries and bounces later.
ON_SEND = {
    "email",
    "webhook",
    "sandbox",
    "fcm",
    "apns",
    "dingtalk",
    "feishu",
    "wecom",
    "slack",
    "telegram",
    "apprise",
}


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


# --- every reader refuses what it cannot read, and raises nothing else --------------------------

#: The kinds whose readers are fuzzed (the sandbox's is a JSON array of its own).
READERS = ("aliyun", "tencent", "twilio", "weixin")

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=6),
    max_leaves=20,
)
report_like = st.lists(
    st.fixed_dictionaries(
        {},
        optional={
            name: json_values | st.sampled_from(["SUCCESS", "FAIL", "x", "", "2645:1"])
            for name in ("sid", "report_status", "errmsg", "biz_id", "out_id", "success", "report_time")
        },
    ),
    max_size=3,
)
bodies = st.one_of(
    st.binary(max_size=300),
    json_values.map(lambda v: json.dumps(v).encode()),
    report_like.map(lambda v: json.dumps(v).encode()),
    st.lists(
        st.sampled_from(
            [
                "<xml>",
                "</xml>",
                "<MsgID>",
                "</MsgID>",
                "1",
                "<Status>",
                "</Status>",
                "success",
                "<MsgType>event</MsgType>",
                "<Event>TEMPLATESENDJOBFINISH</Event>",
                "&amp;",
                "<![CDATA[",
                "]]>",
                "<!DOCTYPE x>",
                "&x;",
                "<a/>",
            ]
        ),
        max_size=12,
    ).map(lambda parts: "".join(parts).encode()),
    st.dictionaries(
        st.sampled_from(["MessageSid", "MessageStatus", "ErrorCode", "SmsSid", "To"]),
        st.text(max_size=40) | st.sampled_from(["delivered", "sent", "SM" + "ab" * 16]),
    ).map(lambda form: urlencode(form).encode()),
)


@pytest.mark.parametrize("kind", READERS)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(method=st.sampled_from(["POST", "GET", "PUT"]), body=bodies)
def test_a_reader_answers_or_refuses_and_raises_nothing_else(
    kind: str, redis_url: str, method: str, body: bytes
) -> None:
    provider = load_kind(kind)(
        "p", receiving(kind), redis=redis.Redis.from_url(redis_url), keys=Keys("noti:")
    )
    request = authenticated(kind, "https://n.example.com/v1/receipts/p", body, method=method, echostr="e")
    try:
        batch = provider.read_receipt(request)
    except ReceiptRejected as exc:
        assert exc.code in ("e.noti.receipt.malformed", "e.noti.receipt.signature") and exc.message
        return
    assert batch.reply.status == 200
    for report in batch.reports:
        assert report.provider == "p" and (report.record_id or report.vendor_id)
        assert report.state in Delivery
