"""What only Aliyun's SMS delivery receipts do: an SmsReport push answered badly is pushed
again; reports name the record by ``out_id``; ``QuerySendDetails`` polls ask by ``BizId``
and by the Beijing day of the send. What Aliyun's receipts do as Tencent's or Twilio's is in
tests/test_receipts_vendors.py."""

# ruff: noqa: F811 - the SMS fixtures (tests/sms_vendors.py) are imported by name

from __future__ import annotations

import calendar
import time

import pytest

from noti.core.record import Channel, new_id
from noti.delivery.state import Delivery, ReceiptReply
from noti.providers.base import Message
from tests.fakes._receipts import ReceiptSink, answer_with
from tests.fakes.aliyun import AliyunFake
from tests.sms_vendors import ALIYUN, CN_FAILING, Clock, SmsVendor, fake, pending, sink, sms  # noqa: F401 - fixtures


@pytest.fixture
def vendor() -> SmsVendor:
    return ALIYUN


@pytest.fixture
def template_kind() -> str:
    return "notice"  # no one-a-minute rule per number


# --- pushed --------------------------------------------------------------------------------------


def test_a_bad_answer_makes_aliyun_push_again(fake: AliyunFake, sink: ReceiptSink, redis_url: str) -> None:
    # given noti cannot store the first push (503), then can
    provider = ALIYUN.receiver(fake, redis_url)
    answers = [ReceiptReply(503, b"store unavailable")]
    taken = answer_with(provider.read_receipt)
    sink.handler = lambda request: answers.pop() if answers else taken(request)
    # when a message settles
    message = sms("4321")
    provider.send(message)
    # then Aliyun pushes again and the second push is taken
    assert [(p.attempt, p.accepted) for p in fake.pusher.wait(2)] == [(1, False), (2, True)]
    assert [r.record_id for r in provider.read_receipt(sink.requests[1]).reports] == [message.id]


def test_a_report_without_out_id_names_the_message_only(fake: AliyunFake, redis_url: str) -> None:
    provider = ALIYUN.receiver(fake, redis_url)
    [report] = provider.read_receipt(ALIYUN.pushed(ALIYUN.reports({"out_id": ""}))).reports
    assert (report.record_id, report.vendor_id) == (None, ALIYUN.report["biz_id"])
    [unknown] = provider.read_receipt(ALIYUN.pushed(ALIYUN.reports())).reports
    assert unknown.record_id == "01JRECORD"  # no such record: the delivery book decides


# --- polled: QuerySendDetails --------------------------------------------------------------------


def test_each_pending_send_is_queried_by_its_biz_id(fake: AliyunFake, redis_url: str) -> None:
    provider = ALIYUN.poller(fake, redis_url)
    ok, bad = sms("4321"), sms("4321", CN_FAILING)
    asked = [pending(ok, provider.send(ok).msgid), pending(bad, provider.send(bad).msgid)]
    provider.poll_receipts(asked)
    queries = [r for r in fake.requests if AliyunFake.params(r).get("Action") == "QuerySendDetails"]
    assert {AliyunFake.params(q)["BizId"] for q in queries} == {asked[0].vendor_id, asked[1].vendor_id}


def test_a_record_without_biz_id_is_found_by_its_out_id(fake: AliyunFake, redis_url: str) -> None:
    provider = ALIYUN.poller(fake, redis_url)
    other, message = sms("4321"), sms("4321")
    provider.send(other)
    provider.send(message)
    [report] = provider.poll_receipts([pending(message, None)])
    assert (report.record_id, report.vendor_id, report.state) == (message.id, None, Delivery.DELIVERED)


def test_a_send_just_before_beijing_midnight_is_found_by_a_clock_just_after(
    fake: AliyunFake, redis_url: str
) -> None:
    # 23:59:50 Beijing time; noti's clock says the record was sent 20 s later (the next day)
    at = calendar.timegm(time.strptime("2026-03-01 15:59:50", "%Y-%m-%d %H:%M:%S"))
    provider = ALIYUN.poller(fake, redis_url)
    fake.clock = provider.clock = clock = Clock(at)
    message = sms("4321")
    biz_id = provider.send(message).msgid
    clock.at += 120
    [report] = provider.poll_receipts([pending(message, biz_id, sent_ms=(at + 20) * 1000)])
    assert report.record_id == message.id
    days = [AliyunFake.params(r)["SendDate"] for r in fake.requests if "SendDate" in AliyunFake.params(r)]
    assert days == ["20260302", "20260301"]


def test_a_target_the_settings_no_longer_take_is_skipped(fake: AliyunFake, redis_url: str) -> None:
    provider = ALIYUN.poller(fake, redis_url)
    message = Message(id=new_id(), channel=Channel.SMS, target="+85291234567", fields={"text": "1"})
    assert provider.poll_receipts([pending(message, "1^0")]) == []
    assert fake.lookups == 0
