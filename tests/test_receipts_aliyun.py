"""Aliyun SMS delivery receipts: SmsReport pushes the fake makes after real sends (JSON arrays,
several reports per request, authenticated by the URL's receipt key, pushed again after a bad
answer), refused when the key is wrong or the body hostile, and QuerySendDetails polling."""

from __future__ import annotations

import calendar
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from noti.channels.sms.aliyun import AliyunSmsProvider
from noti.core.keys import Keys
from noti.core.record import Channel, new_id, now_ms
from noti.delivery.state import Delivery, PendingDelivery, ReceiptReply, ReceiptRequest
from noti.errors import DeliveryError, ReceiptRejected
from noti.providers.base import Message
from tests.fakes._receipts import ReceiptSink, answer_with
from tests.fakes.aliyun import AliyunFake, AliyunTemplate

KEY = "ak-receipts-0123456789"
PHONE = "13912345678"
FAILING = "13912345600"


@pytest.fixture
def fake() -> Iterator[AliyunFake]:
    with AliyunFake(templates={"SMS_100001": AliyunTemplate(("code",), kind="notice")}) as server:
        assert isinstance(server, AliyunFake)
        yield server


@pytest.fixture
def sink(fake: AliyunFake) -> Iterator[ReceiptSink]:
    with ReceiptSink() as running:
        fake.receipt_url = f"{running.url}/v1/receipts/ali?key={KEY}"
        yield running


def make(fake: AliyunFake, redis_url: str, **changes: Any) -> AliyunSmsProvider:
    options: dict[str, Any] = {
        "access_key_id": "LTAItestkey",
        "access_key_secret": "testsecret",
        "sign_name": "noti测试",
        "template_code": "SMS_100001",
        "text_param": "code",
        "endpoint": fake.url,
        "timeout_s": 2,
        "receipt_key": KEY,
        **changes,
    }
    return AliyunSmsProvider("ali", options, redis=redis.Redis.from_url(redis_url), keys=Keys("noti:"))


def sms(target: str = PHONE) -> Message:
    return Message(id=new_id(), channel=Channel.SMS, target=target, fields={"text": "4321"})


def push(body: bytes, key: str | None = KEY) -> ReceiptRequest:
    query = f"?key={key}" if key is not None else ""
    return ReceiptRequest(
        "POST", f"https://noti.example.com/v1/receipts/ali{query}", {"content-type": "application/json"}, body
    )


REPORT = {
    "phone_number": "13900000000",
    "send_time": "2017-01-01 11:12:13",
    "report_time": "2017-01-01 11:12:14",
    "success": True,
    "err_code": "DELIVERED",
    "err_msg": "用户接收成功",
    "sms_size": "1",
    "biz_id": "932702304080415357^0",
    "out_id": "01JRECORD",
}


# --- pushed --------------------------------------------------------------------------------------


def test_reports_settled_together_come_in_one_push_naming_the_records(
    fake: AliyunFake, sink: ReceiptSink, redis_url: str
) -> None:
    # given two sends, one to a number whose delivery fails, not settled yet
    provider = make(fake, redis_url)
    sink.handler = answer_with(provider.read_receipt)
    fake.auto_receipts = False
    fake.fail_delivery_to(FAILING)
    ok, bad = sms(), sms(FAILING)
    ok_receipt, bad_receipt = provider.send(ok), provider.send(bad)
    # when Aliyun settles them
    fake.settle()
    # then one push carries both, answered as Aliyun expects (taken at the first attempt)
    [attempt] = fake.pusher.wait(1)
    assert attempt.accepted and json.loads(attempt.answer) == {"code": 0, "msg": "接收成功"}
    reports = provider.read_receipt(sink.requests[0]).reports
    assert [(r.record_id, r.vendor_id, r.state, r.code) for r in reports] == [
        (ok.id, ok_receipt.msgid, Delivery.DELIVERED, "DELIVERED"),
        (bad.id, bad_receipt.msgid, Delivery.UNDELIVERED, "MK:0005"),
    ]
    assert reports[1].text == "用户接收失败" and all(r.at_ms > 0 and r.provider == "ali" for r in reports)


def test_a_bad_answer_makes_aliyun_push_again(fake: AliyunFake, sink: ReceiptSink, redis_url: str) -> None:
    # given noti cannot store the first push (503), then can
    provider = make(fake, redis_url)
    answers = [ReceiptReply(503, b"store unavailable")]
    taken = answer_with(provider.read_receipt)
    sink.handler = lambda request: answers.pop() if answers else taken(request)
    # when a message settles
    message = sms()
    provider.send(message)
    # then Aliyun pushes again and the second push is taken
    assert [(p.attempt, p.accepted) for p in fake.pusher.wait(2)] == [(1, False), (2, True)]
    assert [r.record_id for r in provider.read_receipt(sink.requests[1]).reports] == [message.id]


def test_duplicate_pushes_are_each_reported(fake: AliyunFake, sink: ReceiptSink, redis_url: str) -> None:
    provider = make(fake, redis_url)
    fake.duplicate_receipts = True
    message = sms()
    provider.send(message)
    fake.pusher.wait(2)
    assert [provider.read_receipt(r).reports[0].record_id for r in sink.requests] == [message.id] * 2


def test_a_push_with_a_wrong_key_is_refused_every_time(
    fake: AliyunFake, sink: ReceiptSink, redis_url: str
) -> None:
    provider = make(fake, redis_url)
    sink.handler = answer_with(provider.read_receipt)
    fake.bad_signature = True
    fake.pusher.retry_after_s = (0.0,)
    provider.send(sms())
    assert [(p.status, p.accepted) for p in fake.pusher.wait(2)] == [(403, False), (403, False)]
    with pytest.raises(ReceiptRejected) as refused:
        provider.read_receipt(sink.requests[0])
    assert refused.value.code == "e.noti.receipt.signature"


@pytest.mark.parametrize("key", [None, "", KEY.upper(), KEY + "x"])
def test_a_missing_or_wrong_key_is_a_bad_signature(fake: AliyunFake, redis_url: str, key: str | None) -> None:
    with pytest.raises(ReceiptRejected) as refused:
        make(fake, redis_url).read_receipt(push(json.dumps([REPORT]).encode(), key))
    assert refused.value.code == "e.noti.receipt.signature"


def test_without_a_receipt_key_no_push_is_taken(fake: AliyunFake, redis_url: str) -> None:
    with pytest.raises(ReceiptRejected) as refused:
        make(fake, redis_url, receipt_key=None).read_receipt(push(json.dumps([REPORT]).encode()))
    assert refused.value.code == "e.noti.receipt.provider"


def test_a_report_without_out_id_names_the_message_only(fake: AliyunFake, redis_url: str) -> None:
    provider = make(fake, redis_url)
    [report] = provider.read_receipt(push(json.dumps([{**REPORT, "out_id": ""}]).encode())).reports
    assert (report.record_id, report.vendor_id) == (None, REPORT["biz_id"])
    [unknown] = provider.read_receipt(push(json.dumps([REPORT]).encode())).reports
    assert unknown.record_id == "01JRECORD"  # no such record: the delivery book decides


HOSTILE = {
    "not-json": b"<xml/>",
    "empty": b"",
    "an-object": json.dumps(REPORT).encode(),
    "array-of-arrays": b"[[1]]",
    "no-biz-id": json.dumps([{k: v for k, v in REPORT.items() if k != "biz_id"}]).encode(),
    "biz-id-a-number": json.dumps([{**REPORT, "biz_id": 932702304080415357}]).encode(),
    "success-a-string": json.dumps([{**REPORT, "success": "true"}]).encode(),
    "success-missing": json.dumps([{k: v for k, v in REPORT.items() if k != "success"}]).encode(),
    "out-id-a-list": json.dumps([{**REPORT, "out_id": ["01J"]}]).encode(),
    "huge-integer": b'[{"biz_id": "1", "success": true, "sms_size": ' + b"1" * 5000 + b"}]",
    "deep-nesting": b"[" * 50_000 + b"]" * 50_000,
    "out-id-too-long": json.dumps([{**REPORT, "out_id": "x" * 300}]).encode(),
    "second-report-bad": json.dumps([REPORT, {**REPORT, "success": None}]).encode(),
}


@pytest.mark.parametrize("body", list(HOSTILE.values()), ids=list(HOSTILE))
def test_a_body_that_cannot_be_read_is_malformed(fake: AliyunFake, redis_url: str, body: bytes) -> None:
    with pytest.raises(ReceiptRejected) as refused:
        make(fake, redis_url).read_receipt(push(body))
    assert refused.value.code == "e.noti.receipt.malformed"


# --- polled: QuerySendDetails --------------------------------------------------------------------


def pending(message: Message, biz_id: str | None, sent_ms: int | None = None) -> PendingDelivery:
    return PendingDelivery(
        record_id=message.id, target=message.target, vendor_id=biz_id, sent_ms=sent_ms or now_ms()
    )


def test_without_a_receipt_key_each_pending_record_is_queried(fake: AliyunFake, redis_url: str) -> None:
    # given two sends, one failing, still waiting for the carrier (SendStatus 1)
    provider = make(fake, redis_url, receipt_key=None)
    assert provider.polls_receipts
    fake.auto_receipts = False
    fake.fail_delivery_to(FAILING)
    ok, bad = sms(), sms(FAILING)
    asked = [pending(ok, provider.send(ok).msgid), pending(bad, provider.send(bad).msgid)]
    assert provider.poll_receipts(asked) == []
    # when they are settled
    fake.settle()
    # then SendStatus 3 is delivered and 2 undelivered with its ErrCode
    reports = provider.poll_receipts(asked)
    assert [(r.record_id, r.vendor_id, r.state, r.code) for r in reports] == [
        (ok.id, asked[0].vendor_id, Delivery.DELIVERED, "DELIVERED"),
        (bad.id, asked[1].vendor_id, Delivery.UNDELIVERED, "MK:0005"),
    ]
    assert all(r.at_ms > 0 for r in reports)
    queries = [r for r in fake.requests if AliyunFake.params(r).get("Action") == "QuerySendDetails"]
    assert {AliyunFake.params(q)["BizId"] for q in queries} == {asked[0].vendor_id, asked[1].vendor_id}


def test_a_record_without_biz_id_is_found_by_its_out_id(fake: AliyunFake, redis_url: str) -> None:
    provider = make(fake, redis_url, receipt_key=None)
    other, message = sms(), sms()
    provider.send(other)
    provider.send(message)
    [report] = provider.poll_receipts([pending(message, None)])
    assert (report.record_id, report.vendor_id, report.state) == (message.id, None, Delivery.DELIVERED)


def test_a_send_just_before_beijing_midnight_is_found_by_a_clock_just_after(
    fake: AliyunFake, redis_url: str
) -> None:
    # 23:59:50 Beijing time; noti's clock says the record was sent 20 s later (the next day)
    at = calendar.timegm(time.strptime("2026-03-01 15:59:50", "%Y-%m-%d %H:%M:%S"))
    fake.clock = lambda: at
    provider = make(fake, redis_url, receipt_key=None)
    provider.clock = lambda: at  # type: ignore[method-assign]
    message = sms()
    biz_id = provider.send(message).msgid
    provider.clock = lambda: at + 120  # type: ignore[method-assign]
    fake.clock = lambda: at + 120
    [report] = provider.poll_receipts([pending(message, biz_id, sent_ms=(at + 20) * 1000)])
    assert report.record_id == message.id
    days = [AliyunFake.params(r)["SendDate"] for r in fake.requests if "SendDate" in AliyunFake.params(r)]
    assert days == ["20260302", "20260301"]


def test_a_failed_query_keeps_what_was_learnt_or_raises(fake: AliyunFake, redis_url: str) -> None:
    provider = make(fake, redis_url, receipt_key=None)
    message = sms()
    asked = [pending(message, provider.send(message).msgid)]
    fake.lookup_down = True
    with pytest.raises(DeliveryError):
        provider.poll_receipts(asked)
    fake.lookup_down = False
    assert [r.state for r in provider.poll_receipts(asked)] == [Delivery.DELIVERED]


def test_a_target_the_settings_no_longer_take_is_skipped(fake: AliyunFake, redis_url: str) -> None:
    provider = make(fake, redis_url, receipt_key=None)
    message = Message(id=new_id(), channel=Channel.SMS, target="+85291234567", fields={"text": "1"})
    assert provider.poll_receipts([pending(message, "1^0")]) == []
    assert fake.lookups == 0


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
    fake: AliyunFake, redis_url: str, changes: dict[str, Any], polls: bool
) -> None:
    assert make(fake, redis_url, **changes).polls_receipts is polls
