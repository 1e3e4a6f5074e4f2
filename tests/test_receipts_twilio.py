"""Twilio delivery receipts: status callbacks the fake posts after a real send (signed with
X-Twilio-Signature over the StatusCallback URL), refused when forged or unreadable, and the
poll of Messages/{sid}.json when no callback is configured. What Twilio's receipts do as
Aliyun's and Tencent's is in tests/test_receipts_vendors.py."""

# ruff: noqa: F811 - the SMS fixtures (tests/sms_vendors.py) are imported by name

from __future__ import annotations

import socket
from typing import Any
from urllib.parse import urlencode

import pytest

from noti.channels.sms.twilio import TwilioProvider
from noti.channels.sms.twilio_receipts import callback_url, signature
from noti.core.record import Channel, new_id
from noti.delivery.state import Delivery, DeliveryReport, ReceiptRequest
from noti.errors import DeliveryError, ProviderOutage, ReceiptRejected
from noti.providers.base import Message
from tests.fakes._receipts import ReceiptSink, answer_with
from tests.fakes._server import Reply
from tests.fakes.twilio import AUTH_TOKEN, TwilioFake, twilio_signature
from tests.sms_vendors import TWILIO, SmsVendor, fake, pending, sink, template_kind  # noqa: F401 - fixtures

PHONE, FAILING = TWILIO.phone, TWILIO.failing


@pytest.fixture
def vendor() -> SmsVendor:
    return TWILIO


def make(fake: TwilioFake, redis_url: str, **changes: Any) -> TwilioProvider:
    provider: TwilioProvider = TWILIO.provider(fake.url, redis_url=redis_url, **changes)
    return provider


def sms(target: str = PHONE) -> Message:
    return Message(id=new_id(), channel=Channel.SMS, target=target, fields={"text": "your code is 1234"})


def pushed(provider: TwilioProvider, sink: ReceiptSink, fake: TwilioFake, count: int) -> list[DeliveryReport]:
    """The reports of the first ``count`` callbacks the sink received, read by the provider."""
    fake.pusher.wait(count)
    return [r for request in sink.requests[:count] for r in provider.read_receipt(request).reports]


def signed(url: str, params: dict[str, str], token: str = AUTH_TOKEN) -> ReceiptRequest:
    return ReceiptRequest(
        "POST",
        url,
        {
            "x-twilio-signature": twilio_signature(token, url, params),
            "content-type": "application/x-www-form-urlencoded",
        },
        urlencode(params).encode(),
    )


CALLBACK = "https://noti.example.com/v1/receipts/tw?noti_id=01JRECORD"
DELIVERED = TWILIO.report


# --- the signature ---------------------------------------------------------------------------


def test_the_signature_reproduces_twilios_published_example() -> None:
    # twilio-python tests/unit/test_request_validator.py
    params = {
        "CallSid": "CA1234567890ABCDE",
        "Caller": "+14158675309",
        "Digits": "1234",
        "From": "+14158675309",
        "To": "+18005551212",
    }
    url = "https://mycompany.com/myapp.php?foo=1&bar=2"
    assert signature("12345", url, params.items()) == "RSOYDt4T1cUTdK1PDd93/VVr8B8="


def test_the_callback_url_carries_the_record_id_and_keeps_its_own_query() -> None:
    assert callback_url("https://n.example.com/v1/receipts/tw", "01J") == (
        "https://n.example.com/v1/receipts/tw?noti_id=01J"
    )
    assert (
        callback_url("https://n.example.com/r?a=1&noti_id=old", "01J")
        == "https://n.example.com/r?a=1&noti_id=01J"
    )


# --- pushed: a real send, the fake's callbacks ---------------------------------------------------


def test_a_send_gets_sent_then_delivered_callbacks_naming_the_record(
    fake: TwilioFake, sink: ReceiptSink, redis_url: str
) -> None:
    # given a provider whose StatusCallback is the sink, which answers as the provider says
    provider = make(fake, redis_url, status_callback=f"{sink.url}/v1/receipts/tw")
    sink.handler = answer_with(provider.read_receipt)
    message = sms()
    # when it sends
    receipt = provider.send(message)
    # then Twilio posts "sent" and "delivered", both naming the record and the message
    reports = pushed(provider, sink, fake, 2)
    assert [(r.state, r.record_id, r.vendor_id, r.text) for r in reports] == [
        (Delivery.ACCEPTED, message.id, receipt.msgid, "sent"),
        (Delivery.DELIVERED, message.id, receipt.msgid, "delivered"),
    ]
    assert all(r.provider == "tw" and r.code == "" for r in reports)
    assert [p.status for p in fake.pusher.pushes] == [200, 200]
    assert sink.replies[0].body == b""


def test_an_undelivered_message_reports_twilios_error_code(
    fake: TwilioFake, sink: ReceiptSink, redis_url: str
) -> None:
    provider = make(fake, redis_url, status_callback=f"{sink.url}/v1/receipts/tw")
    fake.fail_delivery_to(FAILING)
    message = sms(FAILING)
    provider.send(message)
    final = pushed(provider, sink, fake, 2)[-1]
    assert (final.state, final.code, final.text, final.record_id) == (
        Delivery.UNDELIVERED,
        "30003",
        "undelivered",
        message.id,
    )


def test_out_of_order_and_duplicate_callbacks_are_each_reported_as_they_come(
    fake: TwilioFake, sink: ReceiptSink, redis_url: str
) -> None:
    provider = make(fake, redis_url, status_callback=f"{sink.url}/v1/receipts/tw")
    fake.out_of_order = fake.duplicate_receipts = True
    message = sms()
    provider.send(message)
    # the delivery book keeps the record moving forward; the provider reports what came
    states = [r.state for r in pushed(provider, sink, fake, 4)]
    assert states == [Delivery.DELIVERED, Delivery.DELIVERED, Delivery.ACCEPTED, Delivery.ACCEPTED]


@pytest.mark.parametrize(
    "tamper",
    [
        pytest.param(lambda r: ReceiptRequest(r.method, r.url, {}, r.body), id="no-header"),
        pytest.param(
            lambda r: ReceiptRequest(r.method, r.url, r.headers, r.body.replace(b"delivered", b"failed")),
            id="body-changed",
        ),
        pytest.param(
            lambda r: ReceiptRequest(r.method, r.url.replace("01JRECORD", "01JOTHER"), r.headers, r.body),
            id="record-id-changed",
        ),
        pytest.param(
            lambda r: ReceiptRequest(r.method, r.url.replace("https:", "http:"), r.headers, r.body),
            id="other-url",
        ),
        pytest.param(
            lambda r: ReceiptRequest(r.method, r.url, r.headers, r.body + b"&Extra=1"), id="param-added"
        ),
    ],
)
def test_a_forged_callback_is_refused(fake: TwilioFake, redis_url: str, tamper: Any) -> None:
    provider = make(fake, redis_url)
    assert provider.read_receipt(signed(CALLBACK, DELIVERED)).reports  # the untouched one passes
    with pytest.raises(ReceiptRejected) as refused:
        provider.read_receipt(tamper(signed(CALLBACK, DELIVERED)))
    assert refused.value.code == "e.noti.receipt.signature"


def test_the_default_port_may_be_written_or_not(fake: TwilioFake, redis_url: str) -> None:
    provider = make(fake, redis_url)
    with_port = "https://noti.example.com:443/v1/receipts/tw?noti_id=01JRECORD"
    request = signed(with_port, DELIVERED)
    as_called = ReceiptRequest("POST", CALLBACK, request.headers, request.body)
    [report] = provider.read_receipt(as_called).reports
    assert report.record_id == "01JRECORD"


def test_a_callback_for_a_message_noti_does_not_know_is_still_reported(
    fake: TwilioFake, redis_url: str
) -> None:
    # the delivery book decides what an unknown id means (it may be a receipt that came early)
    provider = make(fake, redis_url)
    url = "https://noti.example.com/v1/receipts/tw"
    [report] = provider.read_receipt(signed(url, DELIVERED)).reports
    assert (report.record_id, report.vendor_id, report.state) == (
        None,
        DELIVERED["MessageSid"],
        Delivery.DELIVERED,
    )


@pytest.mark.parametrize(
    ("params", "why"),
    [
        ({"MessageStatus": "delivered"}, "no MessageSid"),
        ({"MessageSid": "SM" + "ab" * 16}, "not a Twilio message status"),
        ({"MessageSid": "SM" + "ab" * 16, "MessageStatus": "teleported"}, "not a Twilio message status"),
        ({"MessageSid": "SM" + "a" * 500, "MessageStatus": "sent"}, "no MessageSid"),
    ],
)
def test_a_signed_callback_that_cannot_be_read_is_malformed(
    fake: TwilioFake, redis_url: str, params: dict[str, str], why: str
) -> None:
    provider = make(fake, redis_url)
    with pytest.raises(ReceiptRejected) as refused:
        provider.read_receipt(signed(CALLBACK, params))
    assert refused.value.code == "e.noti.receipt.malformed" and why in refused.value.message


def test_a_get_is_not_a_callback(fake: TwilioFake, redis_url: str) -> None:
    with pytest.raises(ReceiptRejected) as refused:
        make(fake, redis_url).read_receipt(ReceiptRequest("GET", CALLBACK))
    assert refused.value.code == "e.noti.receipt.malformed"


# --- polled ------------------------------------------------------------------------------------


def test_a_poll_skips_messages_it_cannot_ask_about(fake: TwilioFake, redis_url: str) -> None:
    provider = make(fake, redis_url)
    message = sms()
    unknown_sid = "SM" + "0" * 32
    asked = [pending(message, None), pending(message, "../../Calls"), pending(message, unknown_sid)]
    assert provider.poll_receipts(asked) == []
    assert [r.path.rsplit("/", 1)[-1] for r in fake.requests] == [f"{unknown_sid}.json"]


def test_a_failed_poll_keeps_what_it_learnt_or_raises(fake: TwilioFake, redis_url: str) -> None:
    provider = make(fake, redis_url)
    first, second = sms(), sms()
    asked = [pending(first, provider.send(first).msgid), pending(second, provider.send(second).msgid)]
    fake.script(
        Reply(200, fake.messages[asked[0].vendor_id or ""]), Reply(503, {"code": 20500, "status": 503})
    )
    [report] = provider.poll_receipts(asked)  # the second fetch failed: asked again next round
    assert report.record_id == first.id
    fake.script(Reply(503, {"code": 20500, "status": 503}))
    with pytest.raises(DeliveryError):
        provider.poll_receipts(asked)


def test_a_poll_of_a_vendor_that_cannot_be_reached_raises_an_outage(fake: TwilioFake, redis_url: str) -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        closed_port = unused.getsockname()[1]
    provider = make(fake, redis_url, base_url=f"http://127.0.0.1:{closed_port}")
    with pytest.raises(ProviderOutage):
        provider.poll_receipts([pending(sms(), "SM" + "ab" * 16)])
