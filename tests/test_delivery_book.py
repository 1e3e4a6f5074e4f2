"""The delivery book on a real Redis: receipts applied forward-only, matched by the vendor's id
or noti's, kept when they beat the send, silent records marked unknown, webhook and e-mail
delivered at send. Sends go through the real sender (the sandbox, in its receipts mode)."""

from __future__ import annotations

import json
from typing import Any

import pytest

import noti
from noti.core.record import Status, now_ms
from noti.delivery import Delivery, DeliveryReport, ReceiptRequest
from noti.errors import ReceiptRejected
from noti.providers.sandbox import sign_receipt
from noti.sending.intake import ReceiptIntake
from noti.sending.sender import Sender
from tests.conftest import ADMIN

PHONE = "+8613912345678"
SECRET = "s3cret"


@pytest.fixture
def rt(configure: Any) -> Any:
    return configure(
        providers={"vendor": {"kind": "sandbox", "receipt_secret": SECRET}},
        channels={"sms": {"provider": "vendor"}, "webhook": {"provider": "sandbox"}},
        delivery_unknown_after_s=60,
    )


def sent(rt: Any, text: str = "hi") -> Any:
    record_id = noti.notify_sms(PHONE, text)
    Sender(rt).deliver(record_id)
    record = rt.store.get(record_id)
    assert record.status is Status.DONE
    return record


def report(state: Delivery, vendor_id: str, **kwargs: Any) -> DeliveryReport:
    return DeliveryReport("vendor", state, vendor_id=vendor_id, **kwargs)


def members(rt: Any, state: str) -> set[str]:
    return set(rt.redis.zrange(rt.keys.delivery_index(state), 0, -1))


def test_a_sent_sms_is_accepted_and_awaits_its_receipt(rt: Any) -> None:
    record = sent(rt)
    assert record.delivery == "accepted" and record.delivery_times["accepted"] == record.delivery_ms
    assert members(rt, "accepted") == {record.id}
    watch = rt.redis.zscore(rt.keys.delivery_watch, record.id)
    assert watch == pytest.approx(record.delivery_ms + 60_000)
    assert rt.redis.hget(rt.keys.vendor_ids, f"vendor:sandbox-{record.id}") == record.id


def test_a_receipt_by_the_vendors_id_delivers_and_later_words_do_not_move_it_back(rt: Any) -> None:
    record = sent(rt)
    vid = f"sandbox-{record.id}"
    assert rt.delivery.apply([report(Delivery.DELIVERED, vid, code="DELIVRD", text="ok", at_ms=123)]) == [
        "applied"
    ]
    # a duplicate, a late intermediate status and a contradicting final one change nothing
    late = [
        report(Delivery.DELIVERED, vid),
        report(Delivery.ACCEPTED, vid),
        report(Delivery.UNDELIVERED, vid, code="X"),
    ]
    assert rt.delivery.apply(late) == ["stale", "stale", "stale"]
    got = rt.store.get(record.id)
    assert (got.delivery, got.delivery_ms, got.delivery_code, got.delivery_text) == (
        "delivered",
        123,
        "DELIVRD",
        "ok",
    )
    assert members(rt, "delivered") == {record.id} and members(rt, "accepted") == set()
    assert rt.redis.zscore(rt.keys.delivery_watch, record.id) is None
    assert got.status is Status.DONE  # the send status is untouched


def test_a_receipt_for_an_unknown_id_is_kept_and_applied_when_its_send_is_recorded(rt: Any) -> None:
    record_id = noti.notify_sms(PHONE, "race")
    # the vendor answered the send and pushed its receipt before the worker recorded the send
    assert rt.delivery.apply([report(Delivery.UNDELIVERED, f"sandbox-{record_id}", code="30003")]) == [
        "early"
    ]
    assert rt.store.get(record_id).delivery is None
    Sender(rt).deliver(record_id)
    got = rt.store.get(record_id)
    assert (got.delivery, got.delivery_code) == ("undelivered", "30003")
    assert rt.redis.hlen(rt.keys.early_receipts) == 0


def test_a_receipt_naming_the_record_before_its_send_is_recorded_waits_for_that_send(rt: Any) -> None:
    record_id = noti.notify_sms(PHONE, "echo")
    early = DeliveryReport(
        "vendor", Delivery.DELIVERED, record_id=record_id, vendor_id=f"sandbox-{record_id}"
    )
    assert rt.delivery.apply([early]) == ["unsent"]  # not applied to a record not sent yet
    assert rt.store.get(record_id).delivery is None
    Sender(rt).deliver(record_id)  # the send returns that very id: the kept receipt applies
    got = rt.store.get(record_id)
    assert got.status is Status.DONE and got.delivery == "delivered"
    assert members(rt, "accepted") == set() and rt.redis.zscore(rt.keys.delivery_watch, record_id) is None
    assert rt.redis.hlen(rt.keys.early_receipts) == 0


def test_a_receipt_that_never_comes_makes_the_delivery_unknown_and_a_late_one_still_counts(rt: Any) -> None:
    record = sent(rt)
    assert rt.delivery.sweep(at_ms=record.delivery_ms + 59_000) == 0
    assert rt.delivery.sweep(at_ms=record.delivery_ms + 61_000) == 1
    got = rt.store.get(record.id)
    assert got.delivery == "unknown" and members(rt, "unknown") == {record.id}
    assert rt.redis.zcard(rt.keys.delivery_watch) == 0
    assert rt.delivery.apply([report(Delivery.DELIVERED, f"sandbox-{record.id}")]) == ["applied"]
    assert rt.store.get(record.id).delivery == "delivered" and members(rt, "unknown") == set()


def test_kept_receipts_and_vendor_ids_are_dropped_after_the_window(rt: Any) -> None:
    sent(rt)
    assert rt.delivery.apply([report(Delivery.DELIVERED, "never-sent")]) == ["early"]
    # a window after the receipt was kept (it is kept when it comes: on a slow machine, more
    # than a millisecond after the send)
    rt.delivery.sweep(at_ms=now_ms() + int(rt.settings.receipt_window_s * 1000) + 1)
    assert rt.redis.hlen(rt.keys.early_receipts) == 0 and rt.redis.hlen(rt.keys.vendor_ids) == 0


def test_a_webhook_is_delivered_when_its_provider_answers(rt: Any) -> None:
    record_id = noti.notify_webhook("https://example.com/h", content={"a": 1})
    Sender(rt).deliver(record_id)
    got = rt.store.get(record_id)
    assert got.delivery == "delivered" and members(rt, "delivered") == {record_id}
    assert rt.redis.zcard(rt.keys.delivery_watch) == 0


def test_the_intake_checks_the_signature_and_answers_as_the_vendor_expects(rt: Any) -> None:
    record = sent(rt)
    body = json.dumps([{"msgid": f"sandbox-{record.id}", "state": "delivered", "code": "OK"}]).encode()
    intake = ReceiptIntake(rt)
    url = "http://127.0.0.1/v1/receipts/vendor"
    with pytest.raises(ReceiptRejected) as refused:
        intake.take("vendor", ReceiptRequest("POST", url, {"x-sandbox-signature": "sha256=00"}, body))
    assert refused.value.code == "e.noti.receipt.signature"
    assert rt.store.get(record.id).delivery == "accepted"
    with pytest.raises(ReceiptRejected) as unknown:
        intake.take("nobody", ReceiptRequest("POST", url, {}, body))
    assert unknown.value.code == "e.noti.receipt.provider"
    reply = intake.take(
        "vendor", ReceiptRequest("POST", url, {"x-sandbox-signature": sign_receipt(SECRET, body)}, body)
    )
    assert reply.status == 200 and rt.store.get(record.id).delivery == "delivered"


@pytest.mark.parametrize(
    "body",
    [b"", b"not json", b"{}", b"[]", b'[{"msgid": "x"}]', b'[{"msgid": "", "state": "delivered"}]', b"[1]"],
)
def test_a_malformed_sandbox_receipt_is_refused_and_changes_nothing(rt: Any, body: bytes) -> None:
    record = sent(rt)
    request = ReceiptRequest("POST", "http://x/", {"x-sandbox-signature": sign_receipt(SECRET, body)}, body)
    with pytest.raises(ReceiptRejected) as refused:
        ReceiptIntake(rt).take("vendor", request)
    assert refused.value.code == "e.noti.receipt.malformed"
    assert rt.store.get(record.id).delivery == "accepted"


def test_the_cli_lists_and_shows_delivery_statuses(rt: Any) -> None:
    from tests.test_cli import run

    delivered, waiting = sent(rt), sent(rt, "second")
    rt.delivery.apply([report(Delivery.DELIVERED, f"sandbox-{delivered.id}", code="DELIVRD")])
    listed = run("list", "-delivery", "delivered", "-json", user=ADMIN)
    assert listed.exit_code == 0, listed.output
    assert [r["id"] for r in json.loads(listed.stdout)] == [delivered.id]
    assert [
        r["id"] for r in json.loads(run("list", "-delivery", "accepted", "-json", user=ADMIN).stdout)
    ] == [waiting.id]
    assert json.loads(run("list", "-type", "email", "-json", user=ADMIN).stdout) == []
    shown = run("get", delivered.id, user=ADMIN).stdout
    assert "noti_dlv                   delivered" in shown and "DELIVRD" in shown
    table = run("list", user=ADMIN).stdout
    assert "DELIVERY" in table and "delivered" in table
    bad = run("list", "-delivery", "arrived", user=ADMIN)
    assert bad.exit_code != 0 and "e.cmd.noti.list.baddelivery" in bad.output


def test_a_receipt_for_a_record_another_provider_sent_is_refused(rt: Any) -> None:
    record = sent(rt)  # through "vendor"
    forged = DeliveryReport("sandbox", Delivery.DELIVERED, record_id=record.id)
    assert rt.delivery.apply([forged]) == ["foreign"]
    assert rt.store.get(record.id).delivery == "accepted"
