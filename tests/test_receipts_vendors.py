"""SMS delivery receipts that the vendors give alike, each test run once per vendor
(:mod:`tests.sms_vendors`): Aliyun's SmsReport and Tencent's status callback are JSON arrays
pushed to a URL carrying noti's receipt key (several reports per request, refused when the key
is wrong or the body hostile); Aliyun, Tencent and Twilio are polled when nothing is pushed.
What only one vendor does is in tests/test_receipts_aliyun.py, …_tencent.py, …_twilio.py."""

# ruff: noqa: F811 - the SMS fixtures (tests/sms_vendors.py) are imported by name

from __future__ import annotations

import json
from typing import Any

import pytest

from noti.delivery.state import Delivery
from noti.errors import InvalidConfig, ReceiptRejected, TemporaryFailure
from tests.fakes._receipts import ReceiptSink, answer_with
from tests.sms_vendors import (  # noqa: F401 - fixtures
    ALIYUN,
    RECEIPT_KEY,
    TENCENT,
    TWILIO,
    VENDORS,
    SmsVendor,
    by_vendor,
    fake,
    pending,
    sink,
    sms,
    vendor,
)

#: Keys in a push's URL that are not the receipt key.
WRONG_KEYS = {
    "none": None,
    "empty": "",
    "upper-case": RECEIPT_KEY.upper(),
    "one-more": RECEIPT_KEY + "x",
    "last-changed": RECEIPT_KEY[:-1] + "X",
    "one-fewer": RECEIPT_KEY[:-1],
}

#: Per vendor: pushed bodies noti cannot read (with a valid key).
_ALI, _TC = ALIYUN.report, TENCENT.report
HOSTILE: dict[SmsVendor, dict[str, tuple[bytes]]] = {
    ALIYUN: {
        name: (body,)
        for name, body in {
            "not-json": b"<xml/>",
            "empty": b"",
            "an-object": json.dumps(_ALI).encode(),
            "array-of-arrays": b"[[1]]",
            "no-biz-id": json.dumps([{k: v for k, v in _ALI.items() if k != "biz_id"}]).encode(),
            "biz-id-a-number": ALIYUN.reports({"biz_id": 932702304080415357}),
            "success-a-string": ALIYUN.reports({"success": "true"}),
            "success-missing": json.dumps([{k: v for k, v in _ALI.items() if k != "success"}]).encode(),
            "out-id-a-list": ALIYUN.reports({"out_id": ["01J"]}),
            "huge-integer": b'[{"biz_id": "1", "success": true, "sms_size": ' + b"1" * 5000 + b"}]",
            "deep-nesting": b"[" * 50_000 + b"]" * 50_000,
            "out-id-too-long": ALIYUN.reports({"out_id": "x" * 300}),
            "second-report-bad": ALIYUN.reports({}, {"success": None}),
        }.items()
    },
    TENCENT: {
        name: (body,)
        for name, body in {
            "not-json": b"report_status=SUCCESS",
            "empty": b"",
            "not-utf8": b'[{"sid": "\xff"}]',
            "an-object": json.dumps(_TC).encode(),
            "a-string": b'"SUCCESS"',
            "array-of-numbers": b"[1, 2]",
            "no-sid": TENCENT.reports({"sid": None}),
            "empty-sid": TENCENT.reports({"sid": ""}),
            "sid-a-number": TENCENT.reports({"sid": 12345}),
            "sid-huge-float": b'[{"sid": 1e999999, "report_status": "SUCCESS"}]',
            "huge-integer": b'[{"sid": "1", "report_status": "SUCCESS", "mobile": ' + b"9" * 5000 + b"}]",
            "deep-nesting": b"[" * 100_000 + b"]" * 100_000,
            "unknown-status": TENCENT.reports({"report_status": "DELIVERED"}),
            "no-status": json.dumps([{"sid": "1"}]).encode(),
            "errmsg-an-object": TENCENT.reports({"errmsg": {"x": 1}}),
            "sid-too-long": TENCENT.reports({"sid": "9" * 300}),
        }.items()
    },
}

#: Per vendor: option changes and whether beat polls the provider then.
_KEYED_POLLING = {
    "receipt-key": ({}, False),
    "no-receipt-key": ({"receipt_key": None}, True),
    "receipt-key-and-poll": ({"receipt_poll": True}, True),
    "no-receipt-key-no-poll": ({"receipt_key": None, "receipt_poll": False}, False),
}
_CALLBACK = {"status_callback": "https://noti.example.com/v1/receipts/tw"}
POLLING = {
    ALIYUN: _KEYED_POLLING,
    TENCENT: _KEYED_POLLING,
    TWILIO: {
        "no-status-callback": ({}, True),
        "status-callback": (_CALLBACK, False),
        "status-callback-and-poll": ({**_CALLBACK, "receipt_poll": True}, True),
        "no-status-callback-no-poll": ({"receipt_poll": False}, False),
    },
}

#: Per vendor: push attempts a push with the wrong key (Twilio: signed with another token)
#: makes (Aliyun pushes again once here; Twilio posts "sent", then the final status).
WRONG_KEY_ATTEMPTS = {
    ALIYUN: {"pushes-again": (2,)},
    TENCENT: {"once": (1,)},
    TWILIO: {"sent-and-final": (2,)},
}


@pytest.fixture
def template_kind() -> str:
    return "notice"  # Aliyun: no one-a-minute rule per number


# --- pushed --------------------------------------------------------------------------------------


def test_reports_settled_together_come_in_one_push_and_are_all_read(
    vendor: SmsVendor, fake: Any, sink: ReceiptSink, redis_url: str
) -> None:
    # given two sends, one to a number whose delivery fails, not settled yet
    provider = vendor.receiver(fake, redis_url)
    sink.handler = answer_with(provider.read_receipt)
    fake.auto_receipts = False
    fake.fail_delivery_to(vendor.failing)
    ok, bad = sms("4321"), sms("4321", vendor.failing)
    ok_receipt, bad_receipt = provider.send(ok), provider.send(bad)
    # when the vendor settles them
    fake.settle()
    # then one push carries both, answered as the vendor expects (taken at the first attempt)
    [push] = fake.pusher.wait(1)
    assert push.status == 200 and push.accepted and json.loads(push.answer) == vendor.push_answer
    reports = provider.read_receipt(sink.requests[0]).reports
    named = (ok.id, bad.id) if vendor.names_record else (None, None)
    assert [(r.record_id, r.vendor_id, r.state, r.code, r.text) for r in reports] == [
        (named[0], ok_receipt.msgid, Delivery.DELIVERED, *vendor.delivered),
        (named[1], bad_receipt.msgid, Delivery.UNDELIVERED, *vendor.undelivered),
    ]
    assert all(r.at_ms > 0 and r.provider == vendor.name for r in reports)


def test_duplicate_and_reordered_pushes_are_each_reported(
    vendor: SmsVendor, fake: Any, sink: ReceiptSink, redis_url: str
) -> None:
    provider = vendor.receiver(fake, redis_url)
    fake.auto_receipts = False
    fake.duplicate_receipts = fake.out_of_order = True
    first, second = sms("4321"), sms("4321", "+8613912345601")
    first_id, second_id = provider.send(first).msgid, provider.send(second).msgid
    fake.settle()
    fake.pusher.wait(2)
    batches = [provider.read_receipt(request).reports for request in sink.requests]
    assert [[r.vendor_id for r in reports] for reports in batches] == [[second_id, first_id]] * 2
    if vendor.names_record:
        assert [[r.record_id for r in reports] for reports in batches] == [[second.id, first.id]] * 2


@pytest.mark.parametrize(("vendor", "attempts"), by_vendor(WRONG_KEY_ATTEMPTS))
def test_a_push_with_a_wrong_key_is_refused_each_time(
    vendor: SmsVendor, fake: Any, sink: ReceiptSink, redis_url: str, attempts: int
) -> None:
    provider = vendor.receiver(fake, redis_url, sink)
    sink.handler = answer_with(provider.read_receipt)
    fake.bad_signature = True
    if fake.pusher.retry_after_s:
        fake.pusher.retry_after_s = (0.0,)  # pushed again once, at once
    provider.send(sms(vendor.text, vendor.phone))
    assert [(p.status, p.accepted) for p in fake.pusher.wait(attempts)] == [(403, False)] * attempts
    with pytest.raises(ReceiptRejected) as refused:
        provider.read_receipt(sink.requests[0])
    assert refused.value.code == "e.noti.receipt.signature"


@pytest.mark.parametrize("key", list(WRONG_KEYS.values()), ids=list(WRONG_KEYS))
def test_a_missing_or_wrong_key_is_a_bad_signature(
    vendor: SmsVendor, fake: Any, redis_url: str, key: str | None
) -> None:
    with pytest.raises(ReceiptRejected) as refused:
        vendor.receiver(fake, redis_url).read_receipt(vendor.pushed(vendor.reports(), key))
    assert refused.value.code == "e.noti.receipt.signature"
    assert RECEIPT_KEY not in refused.value.message


def test_without_a_receipt_key_no_push_is_taken(vendor: SmsVendor, fake: Any, redis_url: str) -> None:
    with pytest.raises(ReceiptRejected) as refused:
        vendor.receiver(fake, redis_url, receipt_key=None).read_receipt(vendor.pushed(vendor.reports()))
    assert refused.value.code == "e.noti.receipt.provider" and "receipt_key" in refused.value.message


@pytest.mark.parametrize(
    "key", ["short", "has space in it ok", "a&b=c0123456789abcdef", "钥匙0123456789abcdef"]
)
def test_a_receipt_key_that_cannot_travel_in_a_url_is_refused_at_start(
    vendor: SmsVendor, fake: Any, redis_url: str, key: str
) -> None:
    with pytest.raises(InvalidConfig) as refused:
        vendor.receiver(fake, redis_url, receipt_key=key)
    message = refused.value.message
    assert f"[providers.{vendor.name}] receipt_key" in message and key not in message


@pytest.mark.parametrize(("vendor", "body"), by_vendor(HOSTILE))
def test_a_body_that_cannot_be_read_is_malformed(
    vendor: SmsVendor, fake: Any, redis_url: str, body: bytes
) -> None:
    with pytest.raises(ReceiptRejected) as refused:
        vendor.receiver(fake, redis_url).read_receipt(vendor.pushed(body))
    assert refused.value.code == "e.noti.receipt.malformed"


# --- polled --------------------------------------------------------------------------------------


@pytest.mark.parametrize("vendor", VENDORS, ids=str)
def test_without_a_push_configured_the_pending_messages_are_polled(
    vendor: SmsVendor, fake: Any, redis_url: str
) -> None:
    # given two sends, one to a number whose delivery fails, not settled yet
    provider = vendor.poller(fake, redis_url)
    assert provider.polls_receipts
    fake.auto_receipts = False
    fake.fail_delivery_to(vendor.failing)
    ok, bad = sms(vendor.text, vendor.phone), sms(vendor.text, vendor.failing)
    asked = [pending(ok, provider.send(ok).msgid), pending(bad, provider.send(bad).msgid)]
    # then a poll while they wait for the carrier reports nothing yet
    assert provider.poll_receipts(asked) == []
    # when the vendor settles them
    fake.settle()
    # then a poll names each by record and by the vendor's id, with the vendor's code
    reports = provider.poll_receipts(asked)
    assert [(r.record_id, r.vendor_id, r.state, r.code) for r in reports] == [
        (ok.id, asked[0].vendor_id, Delivery.DELIVERED, vendor.delivered[0]),
        (bad.id, asked[1].vendor_id, Delivery.UNDELIVERED, vendor.undelivered[0]),
    ]
    assert all(r.at_ms > 0 and r.provider == vendor.name for r in reports)
    # and asked again, Aliyun and Twilio answer the same; Tencent hands each report out once
    assert provider.poll_receipts(asked) == ([] if vendor is TENCENT else reports)


def test_a_failed_poll_raises_and_the_next_one_reports(vendor: SmsVendor, fake: Any, redis_url: str) -> None:
    provider = vendor.poller(fake, redis_url)
    message = sms("4321")
    asked = [pending(message, provider.send(message).msgid)]
    vendor.poll_down(fake)
    with pytest.raises(TemporaryFailure):  # asked again next round
        provider.poll_receipts(asked)
    vendor.poll_down(fake, False)
    reports = provider.poll_receipts(asked)
    assert [(r.record_id, r.state) for r in reports] == [(message.id, Delivery.DELIVERED)]


@pytest.mark.parametrize(("vendor", "changes", "polls"), by_vendor(POLLING))
def test_polling_follows_the_push_settings_unless_told(
    vendor: SmsVendor, fake: Any, redis_url: str, changes: dict[str, Any], polls: bool
) -> None:
    assert vendor.receiver(fake, redis_url, **changes).polls_receipts is polls
