"""A receipt speaks only for what its provider sent (issue 32, finding 2): a correctly
authenticated receipt of each vendor (Aliyun and Tencent with the receipt key, Twilio and
WeChat signed, the sandbox signed) naming a record its provider did not send, or sent under
another vendor id or account, moves neither the record nor its fallback, is counted, and
leaves nothing that a later real send would pick up. Also: reports per push capped, kept
receipts bounded, and no body of any reader is more than a malformed receipt.

Every receipt goes through :class:`noti.sending.intake.ReceiptIntake` (what the HTTP API
hands it) on a real Redis; sends go through the real sender."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

import pytest

import noti
from noti.channels.sms import twilio_receipts
from noti.core.record import Status, now_ms
from noti.delivery import Delivery, DeliveryReport, ReceiptRequest
from noti.errors import ReceiptRejected
from noti.sending.intake import ReceiptIntake
from noti.sending.sender import Sender
from tests.conftest import BOB
from tests.fakes.twilio import ACCOUNT_SID
from tests.receipt_vendors import SANDBOX_SECRET, authenticated, receiving
from tests.sms_vendors import CN_PHONE

PHONE = CN_PHONE
SECRETS = {"victim": "victim-secret", "sb": SANDBOX_SECRET}
EMAIL = {"type": "email", "to": "li@example.com", "subject": "Your code", "text": "It is 4321"}
#: The vendors by the name of their provider here.
KINDS = {"ali": "aliyun", "tc": "tencent", "tw": "twilio", "wx": "weixin", "sb": "sandbox"}
#: Each vendor's provider, configured to take pushed receipts (none of them sends here).
VENDORS: dict[str, dict[str, Any]] = {name: receiving(kind) for name, kind in KINDS.items()}
CALLBACK = VENDORS["tw"]["status_callback"]
#: The vendors whose receipts name noti's record id (Aliyun ``out_id``, Twilio ``noti_id``);
#: the others name only their own message id.
NAMING = {"ali", "tw"}


@pytest.fixture
def rt(configure: Any) -> Any:
    """SMS sent through "victim" (a sandbox whose delivery comes as a signed receipt);
    e-mail fallbacks through the plain sandbox."""
    return configure(
        providers={"victim": {"kind": "sandbox", "receipt_secret": SECRETS["victim"]}, **VENDORS},
        channels={"sms": {"provider": "victim"}, "email": {"provider": "sandbox"}},
        delivery_unknown_after_s=60,
    )


def forged(vendor: str, record_id: str, vendor_id: str, state: str, **extra: str) -> ReceiptRequest:
    """A receipt of ``vendor``'s that passes its authentication, naming ``record_id`` where
    the vendor's format can (Aliyun, Twilio) and the vendor message id ``vendor_id``."""
    delivered = state == "delivered"
    url = f"https://noti.example.com/v1/receipts/{vendor}"
    if vendor == "ali":
        row = {"biz_id": vendor_id, "out_id": record_id, "success": delivered, "err_code": "FORGED"}
        body = json.dumps([row]).encode()
    elif vendor == "tc":
        body = json.dumps([{"sid": vendor_id, "report_status": "SUCCESS" if delivered else "FAIL"}]).encode()
    elif vendor == "tw":
        url = twilio_receipts.callback_url(CALLBACK, record_id)
        form = {"MessageSid": vendor_id, "MessageStatus": state, "AccountSid": ACCOUNT_SID, **extra}
        body = urlencode(form).encode()
    elif vendor == "wx":
        status = "success" if delivered else "failed:user block"
        body = (
            "<xml><MsgType>event</MsgType><Event>TEMPLATESENDJOBFINISH</Event>"
            f"<MsgID>{vendor_id}</MsgID><Status>{status}</Status></xml>"
        ).encode()
    else:
        body = json.dumps([{"msgid": vendor_id, "state": state}]).encode()
    return authenticated(KINDS.get(vendor, "sandbox"), url, body, secret=SECRETS.get(vendor, ""))


def take(rt: Any, vendor: str, request: ReceiptRequest) -> None:
    reply = ReceiptIntake(rt).take(vendor, request)
    assert reply.status == 200  # answered as the vendor expects: it would only push again


def vendor_id_of(vendor: str, record_id: str) -> str:
    """The id the victim's send returns for ``record_id`` where the vendor's format can carry
    it (WeChat's are digits: one the victim never returns)."""
    return "1234567890" if vendor == "wx" else f"sandbox-{record_id}"


def counted(rt: Any, result: str, provider: str) -> int:
    return int(rt.redis.hget(rt.keys.metrics, f"receipts|{result}|{provider}") or 0)


def fallback_state(rt: Any, record_id: str) -> tuple[Status, float | None]:
    """The fallback's status and its place in the delayed set (its deadline)."""
    fallback = rt.store.get(rt.store.get(record_id).fallback)
    return fallback.status, rt.redis.zscore(rt.keys.delayed, fallback.id)


def push_real(rt: Any, record_id: str, state: str) -> None:
    """The victim's own receipt for its send of ``record_id``."""
    take(rt, "victim", forged("victim", record_id, f"sandbox-{record_id}", state))


@pytest.mark.parametrize("state", ["delivered", "undelivered"])
@pytest.mark.parametrize("vendor", sorted(VENDORS))
def test_a_receipt_for_another_users_unsent_record_moves_nothing_and_the_real_send_wins(
    rt: Any, vendor: str, state: str
) -> None:
    # given bob's SMS bound for "victim", not sent yet, with a fallback
    record_id = noti.notify_sms(
        PHONE, "code 1234", provider="victim", user=BOB, fallback={**EMAIL, "after_s": 600}
    )
    fallback_before = fallback_state(rt, record_id)
    # when another vendor's correctly authenticated receipt names it
    take(rt, vendor, forged(vendor, record_id, vendor_id_of(vendor, record_id), state))
    # then neither the record nor its fallback moved, and the refusal is counted
    record = rt.store.get(record_id)
    assert (record.status, record.delivery) == (Status.WAITING, None)
    assert fallback_state(rt, record_id) == fallback_before
    assert counted(rt, "unsent" if vendor in NAMING else "early", vendor) == 1
    assert counted(rt, "applied", vendor) == 0
    # when the victim really sends it, then the record awaits the victim's receipt: the forged
    # word did not survive the send, and the fallback still waits
    Sender(rt).deliver(record_id)
    record = rt.store.get(record_id)
    assert (record.status, record.delivery, record.sent_by) == (Status.DONE, "accepted", "victim")
    assert fallback_state(rt, record_id) == fallback_before
    assert counted(rt, "applied", vendor) == 0
    # and the victim's own receipt still speaks for it, and moves the fallback
    push_real(rt, record_id, "delivered")
    assert rt.store.get(record_id).delivery == "delivered"
    assert rt.store.get(rt.store.get(record_id).fallback).errmsg.startswith("e.noti.fallback.unneeded")


@pytest.mark.parametrize("state", ["delivered", "undelivered"])
@pytest.mark.parametrize("vendor", sorted(VENDORS))
def test_a_receipt_for_a_record_another_provider_sent_moves_neither_it_nor_its_fallback(
    rt: Any, vendor: str, state: str
) -> None:
    # given an SMS the victim sent, awaiting its receipt, with a fallback
    record_id = noti.notify_sms(PHONE, "code 1234", fallback={**EMAIL, "after_s": 600})
    Sender(rt).deliver(record_id)
    fallback_before = fallback_state(rt, record_id)
    # when another vendor's receipt names it (by its record id where the vendor's format can,
    # and by the vendor id the victim's send returned)
    take(rt, vendor, forged(vendor, record_id, vendor_id_of(vendor, record_id), state))
    # then it is refused for the record, and counted
    assert rt.store.get(record_id).delivery == "accepted"
    assert fallback_state(rt, record_id) == fallback_before
    assert counted(rt, "foreign" if vendor in NAMING else "early", vendor) == 1
    assert counted(rt, "applied", vendor) == 0


def test_a_report_under_another_vendor_id_of_the_same_provider_is_foreign(rt: Any) -> None:
    # given an SMS the victim sent (its send returned sandbox-<id>)
    record_id = noti.notify_sms(PHONE, "code 1234", fallback={**EMAIL, "after_s": 600})
    Sender(rt).deliver(record_id)
    fallback_before = fallback_state(rt, record_id)
    # when a report of the victim names the record with another message id (another account
    # of the vendor, or a guess), or names another record with the record's message id
    other = noti.notify_sms(PHONE, "other")
    reports = [
        DeliveryReport("victim", Delivery.DELIVERED, record_id=record_id, vendor_id="sandbox-someone-else"),
        DeliveryReport("victim", Delivery.UNDELIVERED, record_id=record_id),
    ]
    assert rt.delivery.apply(reports) == ["foreign", "foreign"]
    Sender(rt).deliver(other)
    assert rt.delivery.apply(
        [DeliveryReport("victim", Delivery.DELIVERED, record_id=other, vendor_id=f"sandbox-{record_id}")]
    ) == ["foreign"]
    # then nothing moved, and each refusal is counted
    assert rt.store.get(record_id).delivery == "accepted" and rt.store.get(other).delivery == "accepted"
    assert fallback_state(rt, record_id) == fallback_before
    assert counted(rt, "foreign", "victim") == 3 and counted(rt, "applied", "victim") == 0
    # and the report naming both rightly applies
    assert rt.delivery.apply(
        [DeliveryReport("victim", Delivery.DELIVERED, record_id=record_id, vendor_id=f"sandbox-{record_id}")]
    ) == ["applied"]


def test_a_signed_twilio_callback_of_another_account_is_refused_and_counted(configure: Any) -> None:
    from tests.fakes.twilio import TwilioFake

    with TwilioFake() as twilio:
        # given an SMS sent through Twilio (whose callbacks go nowhere: not a loopback URL)
        rt = configure(
            providers={"tw": {**VENDORS["tw"], "base_url": twilio.url, "timeout_s": 2}},
            channels={"sms": {"provider": "tw"}},
        )
        record_id = noti.notify_sms("+14155550123", "code 1234")
        Sender(rt).deliver(record_id)
        sid = rt.store.get(record_id).msgid
        assert sid and rt.store.get(record_id).delivery == "accepted"
        # when a callback signed with the auth token names another account
        take(rt, "tw", forged("tw", record_id, sid, "delivered", AccountSid="AC" + "fe" * 16))
        # then it is refused for the record and counted
        assert rt.store.get(record_id).delivery == "accepted"
        assert counted(rt, "foreign", "tw") == 1 and counted(rt, "applied", "tw") == 0
        # and the account's own callback applies
        take(rt, "tw", forged("tw", record_id, sid, "delivered"))
        assert rt.store.get(record_id).delivery == "delivered" and counted(rt, "applied", "tw") == 1


# --- kept receipts: the race with the send, and the bounds ---------------------------------------


def test_a_receipt_naming_the_record_before_its_send_applies_only_to_that_send(rt: Any) -> None:
    # given three SMS not sent yet, and receipts of the victim naming them (the vendor
    # answered the send and pushed its receipt before the worker recorded the send)
    right, wrong_id, no_id = (noti.notify_sms(PHONE, f"race {n}") for n in range(3))
    reports = [
        DeliveryReport(
            "victim", Delivery.UNDELIVERED, record_id=right, vendor_id=f"sandbox-{right}", code="30003"
        ),
        DeliveryReport("victim", Delivery.DELIVERED, record_id=wrong_id, vendor_id="sandbox-not-its-send"),
        DeliveryReport("victim", Delivery.DELIVERED, record_id=no_id),
    ]
    assert rt.delivery.apply(reports) == ["unsent", "unsent", "unsent"]
    assert {rt.store.get(i).delivery for i in (right, wrong_id, no_id)} == {None}
    # when the sends are recorded, then the receipt applies to the send that returned its id only
    Sender(rt).deliver_many([right, wrong_id, no_id])
    got = rt.store.get(right)
    assert (got.delivery, got.delivery_code) == ("undelivered", "30003")
    assert rt.store.get(wrong_id).delivery == "accepted" and rt.store.get(no_id).delivery == "accepted"


def test_kept_receipts_are_bounded_in_number_and_lifetime(configure: Any) -> None:
    rt = configure(
        providers={"victim": {"kind": "sandbox", "receipt_secret": SECRETS["victim"]}},
        channels={"sms": {"provider": "victim"}},
        receipt_early_max=3,
        receipt_early_ttl_s=60,
    )

    def report(n: int) -> DeliveryReport:
        return DeliveryReport("victim", Delivery.DELIVERED, vendor_id=f"never-sent-{n}")

    # given a push of 5 receipts for ids never sent: 3 are kept, 2 dropped and counted
    assert rt.delivery.apply([report(n) for n in range(5)]) == ["early"] * 3 + ["dropped"] * 2
    assert rt.redis.hlen(rt.keys.early_receipts) == 3
    assert counted(rt, "early", "victim") == 3 and counted(rt, "dropped", "victim") == 2
    # when their lifetime is over, then the next receipt kept forgets them (no beat needed)
    later = now_ms() + 61_000
    assert rt.delivery.apply([report(9)], at_ms=later) == ["early"]
    assert rt.redis.hkeys(rt.keys.early_receipts) == ["victim:never-sent-9"]
    assert rt.redis.zcard(rt.keys.early_receipt_age) == 1
    # and the sweep forgets them too, a lifetime after they were kept
    rt.delivery.sweep(at_ms=later + 61_000)
    assert rt.redis.hlen(rt.keys.early_receipts) == 0 and rt.redis.zcard(rt.keys.early_receipt_age) == 0


# --- reports per push, and bodies no reader can read ---------------------------------------------


def test_a_push_over_the_cap_is_refused_whole_and_stores_nothing(configure: Any) -> None:
    rt = configure(
        providers={"victim": {"kind": "sandbox", "receipt_secret": SECRETS["victim"]}},
        channels={"sms": {"provider": "victim"}},
        receipt_push_max=3,
    )
    record_id = noti.notify_sms(PHONE, "code")
    Sender(rt).deliver(record_id)
    rows = [{"msgid": f"sandbox-{record_id}", "state": "delivered"}] + [
        {"msgid": f"never-sent-{n}", "state": "delivered"} for n in range(3)
    ]
    before = _digest(rt)

    def push(rows: list[dict[str, str]]) -> ReceiptRequest:
        return authenticated("sandbox", "http://x/", json.dumps(rows).encode(), secret=SECRETS["victim"])

    with pytest.raises(ReceiptRejected) as refused:
        ReceiptIntake(rt).take("victim", push(rows))
    assert (
        refused.value.code == "e.noti.receipt.toomany"
        and "NOTI_RECEIPT_PUSH_MAX (3)" in refused.value.message
    )
    assert _digest(rt) == before
    # at the cap, it is taken
    ReceiptIntake(rt).take("victim", push(rows[:3]))
    assert rt.store.get(record_id).delivery == "delivered"


def _digest(rt: Any) -> str:
    return str(rt.redis.execute_command("DEBUG", "DIGEST"))


def _nested_json(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


#: Per vendor: bodies no reader can read, each with a valid authentication (deeply nested
#: arrays and objects, a number of 5,000 digits, nested XML, bytes that are not UTF-8).
PATHOLOGICAL: dict[str, list[bytes]] = {
    "sb": [
        _nested_json(100_000),
        b'[{"msgid": "x", "state": "delivered", "code": ' + _nested_json(900) + b"}]",
        b'[{"msgid": "x", "state": "delivered", "code": ' + b"9" * 5000 + b"}]",
        b'[{"a":' * 50_000 + b"1" + b"}" * 50_000 + b"]",
    ],
    "ali": [_nested_json(100_000), b"[" + b"9" * 5000 + b"]", b'[{"biz_id": ' + _nested_json(50_000) + b"}]"],
    "tc": [_nested_json(100_000), b'[{"sid": ' + b"9" * 5000 + b"}]"],
    "wx": [b"<xml>" + b"<a>" * 100_000 + b"</a>" * 100_000 + b"</xml>", b"<xml>\xff\xfe</xml>"],
    "tw": [b"MessageSid=" + b"%5B" * 100_000 + b"&MessageStatus=delivered", b"\xff\xfe=\x00" * 1000],
}


@pytest.mark.parametrize(
    ("vendor", "body"),
    [(v, b) for v, bodies in PATHOLOGICAL.items() for b in bodies],
    ids=[f"{v}-{i}" for v, bodies in PATHOLOGICAL.items() for i in range(len(bodies))],
)
def test_a_pathological_body_is_a_malformed_receipt_and_nothing_else(
    rt: Any, vendor: str, body: bytes
) -> None:
    request = _authenticated(vendor, body)
    before = _digest(rt)
    with pytest.raises(ReceiptRejected) as refused:
        ReceiptIntake(rt).take(vendor, request)
    assert refused.value.code == "e.noti.receipt.malformed", refused.value.message
    assert _digest(rt) == before


def _authenticated(vendor: str, body: bytes) -> ReceiptRequest:
    """``body`` as ``vendor`` would push it, its authentication valid."""
    url = f"https://noti.example.com/v1/receipts/{vendor}"
    if vendor == "tw":
        url = twilio_receipts.callback_url(CALLBACK, "01J0000000000000000000000")
    return authenticated(KINDS[vendor], url, body)


def test_the_intake_makes_any_unreadable_body_malformed(rt: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever a reader raises on a body (here a reader that recurses without end): 400."""
    from noti.providers.sandbox import SandboxProvider

    def recurse(self: Any, request: ReceiptRequest) -> Any:
        return recurse(self, request)

    monkeypatch.setattr(SandboxProvider, "read_receipt", recurse)
    with pytest.raises(ReceiptRejected) as refused:
        ReceiptIntake(rt).take("sb", ReceiptRequest("POST", "http://x/", {}, b"[]"))
    assert refused.value.code == "e.noti.receipt.malformed" and "RecursionError" in refused.value.message
