"""What only Tencent Cloud's SMS delivery receipts do: a send's status callback comes on its
own, names only Tencent's ``sid`` and reads Beijing time; ``PullSmsSendStatus`` hands every
report out once, of any record, pulled until a pull is not full. What Tencent's receipts do
as Aliyun's or Twilio's is in tests/test_receipts_vendors.py."""

# ruff: noqa: F811 - the SMS fixtures (tests/sms_vendors.py) are imported by name

from __future__ import annotations

import pytest

from noti.channels.sms.tencent_receipts import PULL_LIMIT
from noti.delivery.state import Delivery
from noti.errors import ProviderMisconfigured
from tests.fakes._receipts import ReceiptSink
from tests.fakes.tencent import TencentFake
from tests.sms_vendors import (  # noqa: F401 - fixtures
    TENCENT,
    SmsVendor,
    fake,
    pending,
    sink,
    sms,
    template_kind,
)


@pytest.fixture
def vendor() -> SmsVendor:
    return TENCENT


# --- pushed --------------------------------------------------------------------------------------


def test_a_send_is_pushed_on_its_own_by_default(fake: TencentFake, sink: ReceiptSink, redis_url: str) -> None:
    provider = TENCENT.receiver(fake, redis_url)
    receipt = provider.send(sms("4321"))
    fake.pusher.wait(1)
    [report] = provider.read_receipt(sink.requests[0]).reports
    assert (report.vendor_id, report.state) == (receipt.msgid, Delivery.DELIVERED)


def test_an_unknown_sid_and_an_empty_array_are_read_as_they_are(fake: TencentFake, redis_url: str) -> None:
    # the delivery book decides about ids it does not know (the receipt may have come early)
    provider = TENCENT.receiver(fake, redis_url)
    [report] = provider.read_receipt(TENCENT.pushed(TENCENT.reports())).reports
    assert (report.vendor_id, report.at_ms) == (TENCENT.report["sid"], 1445040184000)
    assert provider.read_receipt(TENCENT.pushed(b"[]")).reports == []


def test_a_bad_receipt_time_is_not_a_reason_to_refuse(fake: TencentFake, redis_url: str) -> None:
    body = TENCENT.reports({"user_receive_time": "yesterday"})
    [report] = TENCENT.receiver(fake, redis_url).read_receipt(TENCENT.pushed(body)).reports
    assert report.at_ms == 0


# --- polled: PullSmsSendStatus ------------------------------------------------------------------


def test_a_pull_reports_every_message_not_only_the_pending_ones(fake: TencentFake, redis_url: str) -> None:
    provider = TENCENT.poller(fake, redis_url)
    one, other = sms("4321"), sms("4321", "+8613912345602")
    provider.send(one)
    provider.send(other)
    # a pulled report is gone from Tencent: the delivery book gets it, pending or not
    reports = provider.poll_receipts([pending(one, None)])
    assert {r.record_id for r in reports} == {one.id, other.id}


def test_nothing_pending_pulls_nothing(fake: TencentFake, redis_url: str) -> None:
    assert TENCENT.poller(fake, redis_url).poll_receipts([]) == []
    assert fake.pulls == 0


@pytest.mark.slow
def test_full_pulls_are_repeated_until_one_is_not_full(fake: TencentFake, redis_url: str) -> None:
    provider = TENCENT.poller(fake, redis_url)
    messages = [sms("4321", f"+86139{n:08d}") for n in range(PULL_LIMIT + 20)]
    for message in messages:
        provider.send(message)
    reports = provider.poll_receipts([pending(messages[0], None)])
    assert len(reports) == PULL_LIMIT + 20 and fake.pulls == 2


def test_a_pull_signed_with_the_wrong_key_is_a_configuration_error(fake: TencentFake, redis_url: str) -> None:
    provider = TENCENT.poller(fake, redis_url, secret_key="not-the-key")
    with pytest.raises(ProviderMisconfigured):
        provider.poll_receipts([pending(sms("4321"), None)])
    assert fake.pulls == 0  # refused at the signature
