"""Tencent Cloud SMS delivery receipts: status callbacks the fake pushes after real sends
(JSON arrays, several reports per request, authenticated by the URL's receipt key), refused
when the key is wrong or the body hostile, and PullSmsSendStatus when no push is configured."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from noti.channels.sms.tencent import TencentSmsProvider
from noti.channels.sms.tencent_receipts import PULL_LIMIT
from noti.core.keys import Keys
from noti.core.record import Channel, new_id, now_ms
from noti.delivery.state import Delivery, PendingDelivery, ReceiptRequest
from noti.errors import InvalidConfig, ProviderMisconfigured, ReceiptRejected, TemporaryFailure
from noti.providers.base import Message
from tests.fakes._receipts import ReceiptSink, answer_with
from tests.fakes.tencent import TencentFake, TencentTemplate

KEY = "rk-0123456789abcdef"
PHONE = "+8613912345678"
FAILING = "+8613912345600"


@pytest.fixture
def fake() -> Iterator[TencentFake]:
    with TencentFake(templates={"1001": TencentTemplate(1, "verification")}) as server:
        assert isinstance(server, TencentFake)
        yield server


@pytest.fixture
def sink(fake: TencentFake) -> Iterator[ReceiptSink]:
    with ReceiptSink() as running:
        fake.receipt_url = f"{running.url}/v1/receipts/tc?key={KEY}"
        yield running


def make(fake: TencentFake, redis_url: str, **changes: Any) -> TencentSmsProvider:
    options: dict[str, Any] = {
        "secret_id": "AKIDtestsecretid",
        "secret_key": "testsecretkey",
        "sdk_app_id": "1400006666",
        "sign_name": "noti测试",
        "template_id": "1001",
        "text_param": "code",
        "endpoint": fake.url,
        "timeout_s": 2,
        "receipt_key": KEY,
        **changes,
    }
    return TencentSmsProvider("tc", options, redis=redis.Redis.from_url(redis_url), keys=Keys("noti:"))


def sms(target: str = PHONE) -> Message:
    return Message(id=new_id(), channel=Channel.SMS, target=target, fields={"text": "4321"})


def callback(body: bytes, key: str | None = KEY) -> ReceiptRequest:
    query = f"?key={key}" if key is not None else ""
    return ReceiptRequest(
        "POST", f"https://noti.example.com/v1/receipts/tc{query}", {"content-type": "application/json"}, body
    )


REPORT = {
    "user_receive_time": "2015-10-17 08:03:04",
    "nationcode": "86",
    "mobile": "13900000000",
    "report_status": "SUCCESS",
    "errmsg": "DELIVRD",
    "description": "用户短信送达成功",
    "sid": "2645:1045710669157053657849499620",
}


# --- pushed --------------------------------------------------------------------------------------


def test_reports_settled_together_come_in_one_callback_and_are_all_read(
    fake: TencentFake, sink: ReceiptSink, redis_url: str
) -> None:
    # given two sends, one to a number whose delivery fails, not settled yet
    provider = make(fake, redis_url)
    sink.handler = answer_with(provider.read_receipt)
    fake.auto_receipts = False
    fake.fail_delivery_to(FAILING)
    ok, bad = provider.send(sms()), provider.send(sms(FAILING))
    # when Tencent settles them
    fake.settle()
    # then one callback carries both reports, answered as Tencent expects
    [push] = fake.pusher.wait(1)
    assert push.status == 200 and json.loads(push.answer) == {"result": 0, "errmsg": "OK"}
    reports = provider.read_receipt(sink.requests[0]).reports
    assert [(r.vendor_id, r.state, r.code, r.record_id) for r in reports] == [
        (ok.msgid, Delivery.DELIVERED, "DELIVRD", None),
        (bad.msgid, Delivery.UNDELIVERED, "MK:0001", None),
    ]
    assert reports[0].text == "用户短信送达成功" and all(r.at_ms > 0 and r.provider == "tc" for r in reports)


def test_a_send_is_pushed_on_its_own_by_default(fake: TencentFake, sink: ReceiptSink, redis_url: str) -> None:
    provider = make(fake, redis_url)
    receipt = provider.send(sms())
    fake.pusher.wait(1)
    [report] = provider.read_receipt(sink.requests[0]).reports
    assert (report.vendor_id, report.state) == (receipt.msgid, Delivery.DELIVERED)


def test_duplicate_and_reordered_callbacks_are_each_reported(
    fake: TencentFake, sink: ReceiptSink, redis_url: str
) -> None:
    provider = make(fake, redis_url)
    fake.auto_receipts = False
    fake.duplicate_receipts = fake.out_of_order = True
    first, second = provider.send(sms()), provider.send(sms("+8613912345601"))
    fake.settle()
    fake.pusher.wait(2)
    ids = [[r.vendor_id for r in provider.read_receipt(request).reports] for request in sink.requests]
    assert ids == [[second.msgid, first.msgid]] * 2


def test_a_callback_with_a_wrong_key_is_refused(fake: TencentFake, sink: ReceiptSink, redis_url: str) -> None:
    provider = make(fake, redis_url)
    sink.handler = answer_with(provider.read_receipt)
    fake.bad_signature = True
    provider.send(sms())
    [push] = fake.pusher.wait(1)
    assert push.status == 403


@pytest.mark.parametrize("key", [None, "", "rk-0123456789abcdeX", KEY + "0", KEY[:-1]])
def test_a_missing_or_wrong_key_is_a_bad_signature(
    fake: TencentFake, redis_url: str, key: str | None
) -> None:
    with pytest.raises(ReceiptRejected) as refused:
        make(fake, redis_url).read_receipt(callback(json.dumps([REPORT]).encode(), key))
    assert refused.value.code == "e.noti.receipt.signature"
    assert KEY not in refused.value.message


def test_without_a_receipt_key_no_push_is_taken(fake: TencentFake, redis_url: str) -> None:
    with pytest.raises(ReceiptRejected) as refused:
        make(fake, redis_url, receipt_key=None).read_receipt(callback(json.dumps([REPORT]).encode()))
    assert refused.value.code == "e.noti.receipt.provider" and "receipt_key" in refused.value.message


@pytest.mark.parametrize(
    "key", ["short", "has space in it ok", "a&b=c0123456789abcdef", "钥匙0123456789abcdef"]
)
def test_a_receipt_key_that_cannot_travel_in_a_url_is_refused_at_start(
    fake: TencentFake, redis_url: str, key: str
) -> None:
    with pytest.raises(InvalidConfig) as refused:
        make(fake, redis_url, receipt_key=key)
    assert "[providers.tc] receipt_key" in refused.value.message and key not in refused.value.message


def test_an_unknown_sid_and_an_empty_array_are_read_as_they_are(fake: TencentFake, redis_url: str) -> None:
    # the delivery book decides about ids it does not know (the receipt may have come early)
    provider = make(fake, redis_url)
    [report] = provider.read_receipt(callback(json.dumps([REPORT]).encode())).reports
    assert (report.vendor_id, report.at_ms) == (REPORT["sid"], 1445040184000)
    assert provider.read_receipt(callback(b"[]")).reports == []


HOSTILE = {
    "not-json": b"report_status=SUCCESS",
    "empty": b"",
    "not-utf8": b'[{"sid": "\xff"}]',
    "an-object": json.dumps(REPORT).encode(),
    "a-string": b'"SUCCESS"',
    "array-of-numbers": b"[1, 2]",
    "no-sid": json.dumps([{**REPORT, "sid": None}]).encode(),
    "empty-sid": json.dumps([{**REPORT, "sid": ""}]).encode(),
    "sid-a-number": json.dumps([{**REPORT, "sid": 12345}]).encode(),
    "sid-huge-float": b'[{"sid": 1e999999, "report_status": "SUCCESS"}]',
    "huge-integer": b'[{"sid": "1", "report_status": "SUCCESS", "mobile": ' + b"9" * 5000 + b"}]",
    "deep-nesting": b"[" * 100_000 + b"]" * 100_000,
    "unknown-status": json.dumps([{**REPORT, "report_status": "DELIVERED"}]).encode(),
    "no-status": json.dumps([{"sid": "1"}]).encode(),
    "errmsg-an-object": json.dumps([{**REPORT, "errmsg": {"x": 1}}]).encode(),
    "sid-too-long": json.dumps([{**REPORT, "sid": "9" * 300}]).encode(),
}


@pytest.mark.parametrize("body", list(HOSTILE.values()), ids=list(HOSTILE))
def test_a_body_that_cannot_be_read_is_malformed(fake: TencentFake, redis_url: str, body: bytes) -> None:
    with pytest.raises(ReceiptRejected) as refused:
        make(fake, redis_url).read_receipt(callback(body))
    assert refused.value.code == "e.noti.receipt.malformed"


def test_a_bad_receipt_time_is_not_a_reason_to_refuse(fake: TencentFake, redis_url: str) -> None:
    body = json.dumps([{**REPORT, "user_receive_time": "yesterday"}]).encode()
    [report] = make(fake, redis_url).read_receipt(callback(body)).reports
    assert report.at_ms == 0


# --- polled: PullSmsSendStatus ------------------------------------------------------------------


def pending(message: Message, serial: str | None) -> PendingDelivery:
    return PendingDelivery(record_id=message.id, target=message.target, vendor_id=serial, sent_ms=now_ms())


def test_without_a_receipt_key_reports_are_pulled_once(fake: TencentFake, redis_url: str) -> None:
    # given two sends, one failing, not settled yet
    provider = make(fake, redis_url, receipt_key=None)
    assert provider.polls_receipts
    fake.auto_receipts = False
    fake.fail_delivery_to(FAILING)
    ok, bad = sms(), sms(FAILING)
    asked = [pending(ok, provider.send(ok).msgid), pending(bad, provider.send(bad).msgid)]
    assert provider.poll_receipts(asked) == []
    # when they are settled
    fake.settle()
    # then a pull names each by record (SessionContext) and SerialNo
    reports = provider.poll_receipts(asked)
    assert [(r.record_id, r.vendor_id, r.state, r.code) for r in reports] == [
        (ok.id, asked[0].vendor_id, Delivery.DELIVERED, "DELIVRD"),
        (bad.id, asked[1].vendor_id, Delivery.UNDELIVERED, "MK:0001"),
    ]
    assert all(r.at_ms > 0 for r in reports)
    # and Tencent hands each report out once
    assert provider.poll_receipts(asked) == []


def test_a_pull_reports_every_message_not_only_the_pending_ones(fake: TencentFake, redis_url: str) -> None:
    provider = make(fake, redis_url, receipt_key=None)
    one, other = sms(), sms("+8613912345602")
    provider.send(one)
    provider.send(other)
    # a pulled report is gone from Tencent: the delivery book gets it, pending or not
    reports = provider.poll_receipts([pending(one, None)])
    assert {r.record_id for r in reports} == {one.id, other.id}


def test_nothing_pending_pulls_nothing(fake: TencentFake, redis_url: str) -> None:
    assert make(fake, redis_url, receipt_key=None).poll_receipts([]) == []
    assert fake.pulls == 0


@pytest.mark.slow
def test_full_pulls_are_repeated_until_one_is_not_full(fake: TencentFake, redis_url: str) -> None:
    provider = make(fake, redis_url, receipt_key=None)
    messages = [sms(f"+86139{n:08d}") for n in range(PULL_LIMIT + 20)]
    for message in messages:
        provider.send(message)
    reports = provider.poll_receipts([pending(messages[0], None)])
    assert len(reports) == PULL_LIMIT + 20 and fake.pulls == 2


def test_a_failed_pull_raises(fake: TencentFake, redis_url: str) -> None:
    provider = make(fake, redis_url, receipt_key=None)
    message = sms()
    provider.send(message)
    fake.pull_down = True
    with pytest.raises(TemporaryFailure):  # InternalError.Timeout: asked again next round
        provider.poll_receipts([pending(message, None)])
    fake.pull_down = False
    assert [r.record_id for r in provider.poll_receipts([pending(message, None)])] == [message.id]


def test_a_pull_signed_with_the_wrong_key_is_a_configuration_error(fake: TencentFake, redis_url: str) -> None:
    provider = make(fake, redis_url, receipt_key=None, secret_key="not-the-key")
    with pytest.raises(ProviderMisconfigured):
        provider.poll_receipts([pending(sms(), None)])
    assert fake.pulls == 0  # refused at the signature


@pytest.mark.parametrize(
    ("changes", "polls"),
    [
        ({}, False),
        ({"receipt_key": None}, True),
        ({"receipt_poll": True}, True),
        ({"receipt_key": None, "receipt_poll": False}, False),
    ],
)
def test_polling_follows_the_receipt_key_unless_told(
    fake: TencentFake, redis_url: str, changes: dict[str, Any], polls: bool
) -> None:
    assert make(fake, redis_url, **changes).polls_receipts is polls
