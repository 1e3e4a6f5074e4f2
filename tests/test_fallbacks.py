"""Fallbacks and status callbacks through a real in-process worker: an SMS that asks for an
e-mail fallback gets it once and only when no delivery receipt came; each status change of a
notification that asked for callbacks is posted as a Standard Webhooks request."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

import noti
from noti.core.record import Status
from noti.delivery import Delivery, DeliveryReport, ReceiptRequest
from noti.errors import InvalidInput
from noti.providers.sandbox import read_outbox, sign_receipt
from noti.sending.intake import ReceiptIntake
from tests.conftest import wait_until
from tests.fakes.webhook import SECRET, WebhookReceiver
from tests.serving import serving

pytestmark = pytest.mark.integration

PHONE = "+8613912345678"
RECEIPT_SECRET = "r3ceipt"
EMAIL = {"type": "email", "to": "a@example.com", "subject": "Your code", "text": "It is 1234"}


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    yield from serving(WebhookReceiver())


@pytest.fixture
def rt(configure: Any, receiver: WebhookReceiver) -> Any:
    return configure(
        providers={
            "vendor": {"kind": "sandbox", "receipt_secret": RECEIPT_SECRET},
            "hook": {
                "kind": "webhook",
                "secret": SECRET,
                "allow_private": True,
                "destinations": [receiver.url + "/"],
            },
        },
        provider_grants={"*": ["hook"]},
        channels={
            "sms": {"provider": "vendor"},
            "email": {"provider": "sandbox"},
            "webhook": {"provider": "hook"},
        },
        pump_interval_s=0.1,
    )


def push(rt: Any, record_id: str, state: str) -> None:
    """The vendor's receipt for ``record_id``, pushed as the HTTP API hands it over."""
    body = json.dumps([{"msgid": f"sandbox-{record_id}", "state": state, "code": state.upper()}]).encode()
    headers = {"x-sandbox-signature": sign_receipt(RECEIPT_SECRET, body)}
    ReceiptIntake(rt).take(
        "vendor", ReceiptRequest("POST", "http://127.0.0.1/v1/receipts/vendor", headers, body)
    )


def emails(rt: Any) -> list[dict[str, Any]]:
    return read_outbox(rt.redis, rt.keys, "sandbox")


def sent_sms(rt: Any, **kwargs: Any) -> Any:
    record_id = noti.notify_sms(PHONE, "code 1234", **kwargs)
    return wait_until(lambda: (r := rt.store.get(record_id)).status is Status.DONE and r, timeout=20)


def test_without_a_receipt_the_fallback_is_sent_once_at_its_deadline(rt: Any, worker: Any) -> None:
    record = sent_sms(rt, fallback={**EMAIL, "after_s": 1.5})
    assert record.fallback and record.delivery == "accepted"
    standby = rt.store.get(record.fallback)
    assert standby.fallback_of == record.id and standby.status is Status.WAITING
    assert emails(rt) == []  # not before its deadline
    wait_until(lambda: rt.store.get(record.fallback).status is Status.DONE, timeout=20)
    [email] = emails(rt)
    assert email["id"] == record.fallback and email["target"] == "a@example.com"
    assert email["at"] >= record.created_ms + 1500
    time.sleep(1)
    assert len(emails(rt)) == 1


def test_a_delivered_receipt_before_the_deadline_cancels_the_fallback(rt: Any, worker: Any) -> None:
    record = sent_sms(rt, fallback={**EMAIL, "after_s": 2})
    push(rt, record.id, "delivered")
    standby = rt.store.get(record.fallback)
    assert standby.status is Status.INVALID and standby.errmsg.startswith("e.noti.fallback.unneeded")
    time.sleep(3)
    assert emails(rt) == [] and rt.store.get(record.id).delivery == "delivered"


def test_an_undelivered_receipt_sends_the_fallback_at_once(rt: Any, worker: Any) -> None:
    record = sent_sms(rt, fallback={**EMAIL, "after_s": 600})
    push(rt, record.id, "undelivered")
    wait_until(lambda: rt.store.get(record.fallback).status is Status.DONE, timeout=20)
    assert [e["id"] for e in emails(rt)] == [record.fallback]
    # a late "delivered" changes neither the first word nor the fallback
    push(rt, record.id, "delivered")
    assert rt.store.get(record.id).delivery == "undelivered" and len(emails(rt)) == 1


def test_the_same_idempotency_key_stores_neither_record_twice(rt: Any) -> None:
    first = noti.notify_sms(PHONE, "x", idempotency_key="k1", fallback=EMAIL)
    again = noti.notify_sms(PHONE, "x", idempotency_key="k1", fallback=EMAIL)
    assert first == again
    assert rt.store.count() == 2


@pytest.mark.parametrize(
    ("fallback", "says"),
    [
        ("email", "a fallback is an object"),
        ({"to": "a@example.com"}, "needs a type and a to"),
        ({**EMAIL, "after_s": 0}, "fallback after_s"),
        ({**EMAIL, "after_s": float("nan")}, "fallback after_s"),
        ({**EMAIL, "fallback": EMAIL}, "cannot have a fallback"),
        ({**EMAIL, "to": "not-an-address"}, "is not an e-mail address"),
        ({**EMAIL, "subject": None}, "needs subject"),
        ({"type": "fax", "to": "1"}, "unknown notification type"),
    ],
)
def test_a_bad_fallback_is_refused_and_nothing_is_stored(rt: Any, fallback: object, says: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        noti.notify_sms(PHONE, "x", fallback=fallback)
    assert says in refused.value.message
    assert rt.store.count() == 0


def test_each_status_change_is_posted_as_a_webhook_signed_with_the_creators_key(rt: Any, worker: Any) -> None:
    from noti.access.signing import SigningKeys
    from noti.celery.tasks.maintenance import delivery_tick  # the app reads its settings on import

    # given alice's own signing key, and her receiver holding it (not the provider's secret)
    secret, _ = SigningKeys(rt.redis, rt.keys, rt.settings).add()
    with WebhookReceiver(secret) as receiver:
        callback = receiver.url + "/noti/status"
        record = sent_sms(rt, status_callback=callback)
        push(rt, record.id, "delivered")
        delivery_tick()  # beat's job, run here
        wait_until(lambda: len(receiver.ids) == 2, timeout=20)
    # two webhooks, sent by a worker's threads: they may arrive in either order
    order = {"notification.accepted": 0, "notification.delivered": 1}
    bodies = sorted((r.json() for r in receiver.requests), key=lambda b: order.get(b["type"], 2))
    assert [b["type"] for b in bodies] == ["notification.accepted", "notification.delivered"]
    assert all(b["data"]["id"] == record.id and b["data"]["channel"] == "sms" for b in bodies)
    assert bodies[1]["data"]["code"] == "DELIVERED" and receiver.refusals == []
    # each is marked a status callback in what is signed: its webhook-id is cb_<its record id>
    for request in receiver.requests:
        callback_id = request.headers["webhook-id"]
        assert callback_id.startswith("cb_")
        assert rt.store.get(callback_id.removeprefix("cb_")).status_of == record.id
    # the stream is emptied, and a second run posts nothing again
    assert rt.redis.xlen(rt.keys.status_changes) == 0
    assert delivery_tick()["callbacks"] == 0


def test_a_status_callback_needs_a_signing_key_of_the_creator(rt: Any, receiver: WebhookReceiver) -> None:
    # even to the operator's own receiver: a status callback is never signed with its secret
    with pytest.raises(InvalidInput) as refused:
        noti.notify_sms(PHONE, "x", status_callback=receiver.url + "/noti/status")
    assert refused.value.code == "e.cmd.noti.add.nosigningkey"
    assert rt.store.count() == 0


def test_a_status_callback_that_is_not_a_url_is_refused(rt: Any) -> None:
    with pytest.raises(InvalidInput):
        noti.notify_sms(PHONE, "x", status_callback="ftp://example.com/x")
    assert rt.store.count() == 0


def test_a_status_callback_the_webhook_provider_would_refuse_is_refused_now(configure: Any) -> None:
    rt = configure(
        providers={"hook": {"kind": "webhook", "secret": SECRET}},
        channels={"webhook": {"provider": "hook"}, "sms": {"provider": "sandbox"}},
    )
    with pytest.raises(InvalidInput) as refused:
        noti.notify_sms(PHONE, "x", status_callback="http://127.0.0.1:9/x")
    assert "non-public address" in refused.value.message
    assert rt.store.count() == 0


def test_a_report_for_a_deleted_record_is_gone_not_an_error(rt: Any) -> None:
    assert rt.delivery.apply([DeliveryReport("vendor", Delivery.DELIVERED, record_id="0" * 26)]) == ["gone"]


def test_a_notification_that_fails_sends_its_fallback_at_once(configure: Any, worker: Any) -> None:
    rt = configure(
        providers={"reject": {"kind": "sandbox", "fail": "always", "error": "permanent"}},
        channels={"sms": {"provider": "reject"}, "email": {"provider": "sandbox"}},
        pump_interval_s=0.1,
    )
    record_id = noti.notify_sms(PHONE, "never", fallback={**EMAIL, "after_s": 600})
    record = wait_until(lambda: (r := rt.store.get(record_id)).status is Status.INVALID and r, timeout=20)
    wait_until(lambda: rt.store.get(record.fallback).status is Status.DONE, timeout=20)
    assert [e["id"] for e in emails(rt)] == [record.fallback]


def test_revoking_a_notification_revokes_its_fallback(rt: Any) -> None:
    record_id = noti.notify_sms(PHONE, "later", fallback=EMAIL, delay=600)
    record = rt.store.get(record_id)
    revoked = noti.revoke([record_id])
    assert sorted(revoked.revoked) == sorted([record_id, record.fallback])
    assert rt.store.get(record.fallback).status is Status.INVALID


def test_deleting_a_notification_revokes_its_waiting_fallback(rt: Any) -> None:
    record = rt.store.get(noti.notify_sms(PHONE, "later", fallback=EMAIL, delay=600))
    noti.delete(record.id)
    standby = rt.store.get(record.fallback)
    assert standby.status is Status.INVALID and standby.revoked_ms is not None
