"""Notifying people end to end through a real in-process worker (issue 34): a recipient with
push, SMS and e-mail; preferences that allow some channels; quiet hours that hold one notice
while a critical one goes now; a locale fallback; a chain that falls back from push to SMS on
no receipt; an opt-out racing sends (each send happens or is suppressed, never both, never
lost); erasure."""

from __future__ import annotations

import io
import json
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import noti
import noti.sending.runtime
import noti.tasks
from noti import recipients
from noti.core.record import Status
from noti.delivery import ReceiptRequest
from noti.errors import InvalidInput, NotFound
from noti.providers.sandbox import read_outbox, sign_receipt
from noti.redis.counters import parse
from noti.sending.intake import ReceiptIntake
from tests.conftest import ALICE, MEMBER, wait_until

pytestmark = pytest.mark.integration

SECRET = "r3ceipt"
PHONE, EMAIL, TOKEN = "+8613912345678", "ada@example.com", "fcm-token-42"
TEMPLATE = {
    "default_locale": "en",
    "channels": {
        "push": {"en": {"title": "Shipped", "body": "Order {{ order }} shipped"}},
        "sms": {
            "en": {"text": "Order {{ order }} shipped"},
            "zh": {"text": "订单 {{ order }} 已发货"},
        },
        "email": {
            "en": {
                "subject": "Order {{ order }}",
                "text": "Hello {{ recipient.attributes.name }}, it shipped.",
            },
        },
    },
}


@pytest.fixture
def rt(configure: Any) -> Any:
    runtime = configure(
        providers={"pushbox": {"kind": "sandbox", "receipt_secret": SECRET}},
        channels={
            "sms": {"provider": "sandbox"},
            "email": {"provider": "sandbox"},
            "push": {"provider": "pushbox"},
        },
        pump_interval_s=0.1,
    )
    recipients.put_category("orders", {"channels": {"push": True, "sms": True, "email": True}}, user=MEMBER)
    recipients.put_category("security", {"critical": True}, user=MEMBER)
    recipients.put_category("marketing", {"channels": {"sms": False}}, user=MEMBER)
    recipients.put_template("order_shipped", TEMPLATE)
    recipients.put(
        "42",
        {
            "addresses": {"push": TOKEN, "sms": PHONE, "email": EMAIL},
            "locale": "zh-Hant-TW",
            "timezone": "Asia/Taipei",
            "attributes": {"name": "Ada"},
        },
    )
    return runtime


def outbox(rt: Any, name: str = "sandbox") -> list[dict[str, Any]]:
    return read_outbox(rt.redis, rt.keys, name)


def receipt(rt: Any, record_id: str, state: str) -> None:
    body = json.dumps([{"msgid": f"sandbox-{record_id}", "state": state, "code": state.upper()}]).encode()
    headers = {"x-sandbox-signature": sign_receipt(SECRET, body)}
    ReceiptIntake(rt).take(
        "pushbox", ReceiptRequest("POST", "http://127.0.0.1/v1/receipts/pushbox", headers, body)
    )


def states(notice: Any) -> dict[str, str]:
    return {e.channel: e.state for e in notice.entries}


def counters(rt: Any) -> dict[tuple[str, tuple[str, ...]], int]:
    return {(f.code, labels): n for f, labels, n in parse(rt.redis.hgetall(rt.keys.metrics))}


def test_preferences_choose_the_channels_and_a_suppressed_one_is_a_record(rt: Any, worker: Any) -> None:
    # given: 42 opted out of order SMS
    recipients.set_preferences("42", {"orders": {"sms": False}})
    # when
    notice_id = noti.notify(recipient="42", template="order_shipped", data={"order": 7}, category="orders")
    # then: push and e-mail are sent, the SMS is an invalid record saying why
    notice = noti.get_notice(notice_id)
    assert states(notice) == {"push": "queued", "sms": "suppressed", "email": "queued"}
    by_channel = {e.channel: e for e in notice.entries}
    sms = rt.store.get(by_channel["sms"].record)
    assert sms.status is Status.INVALID and sms.errmsg.startswith("e.noti.pref.optout")
    assert sms.parent == notice_id and sms.recipient == "42" and sms.category == "orders"
    wait_until(lambda: len(outbox(rt)) == 1 and len(outbox(rt, "pushbox")) == 1)
    [email] = outbox(rt)
    assert email["target"] == EMAIL and email["fields"]["text"] == "Hello Ada, it shipped."
    [push] = outbox(rt, "pushbox")
    assert push["fields"]["body"] == "Order 7 shipped"
    for record_id in notice.records:
        assert rt.store.get(record_id).parent == notice_id
    assert counters(rt)[("suppressed", ("orders", "sms", "optout"))] == 1


def test_a_category_off_by_default_sends_nothing_there_unless_the_recipient_opted_in(rt: Any) -> None:
    first = noti.get_notice(
        noti.notify(recipient="42", template="order_shipped", data={"order": 1}, category="marketing")
    )
    assert states(first)["sms"] == "off" and by(first, "sms").record is None
    recipients.set_preferences("42", {"marketing": {"sms": True}})
    second = noti.get_notice(
        noti.notify(recipient="42", template="order_shipped", data={"order": 2}, category="marketing")
    )
    assert states(second)["sms"] == "queued"


def by(notice: Any, channel: str) -> Any:
    return next(e for e in notice.entries if e.channel == channel)


def test_the_recipients_locale_falls_back_to_its_language_then_the_default(rt: Any, worker: Any) -> None:
    notice = noti.get_notice(
        noti.notify(recipient="42", template="order_shipped", data={"order": 9}, channels=["sms"])
    )
    assert by(notice, "sms").locale == "zh"  # zh-Hant-TW -> zh-Hant -> zh
    wait_until(lambda: len(outbox(rt)) == 1)
    assert outbox(rt)[0]["fields"]["text"] == "订单 9 已发货"
    recipients.update("42", {"locale": "fr-CA"})
    notice = noti.get_notice(
        noti.notify(recipient="42", template="order_shipped", data={"order": 9}, channels=["sms"])
    )
    assert by(notice, "sms").locale == "en"
    wait_until(lambda: len(outbox(rt)) == 2)
    assert outbox(rt)[1]["fields"]["text"] == "Order 9 shipped"


def _quiet_now(seconds_left: float) -> str:
    """A quiet window in UTC that started a minute ago and ends ``seconds_left`` from now."""
    now = datetime.now(UTC)
    start, end = now - timedelta(minutes=1), now + timedelta(seconds=seconds_left)
    return f"{start:%H:%M:%S}-{end:%H:%M:%S}"


def test_quiet_hours_hold_a_notice_until_they_end_while_a_critical_one_goes_now(rt: Any, worker: Any) -> None:
    # given: 42 is inside their quiet hours for 3 more seconds
    recipients.update("42", {"timezone": "UTC", "quiet_hours": _quiet_now(3)})
    # when
    held = noti.get_notice(
        noti.notify(
            recipient="42", template="order_shipped", data={"order": 1}, category="orders", channels=["sms"]
        )
    )
    urgent = noti.get_notice(
        noti.notify(
            recipient="42", template="order_shipped", data={"order": 2}, category="security", channels=["sms"]
        )
    )
    # then: the critical one is sent now, the other when the window ends
    assert states(held) == {"sms": "held"} and held.held_until_ms > time.time() * 1000
    assert states(urgent) == {"sms": "queued"}
    wait_until(lambda: len(outbox(rt)) == 1)
    assert outbox(rt)[0]["id"] == by(urgent, "sms").record
    wait_until(lambda: len(outbox(rt)) == 2, timeout=20)
    late = outbox(rt)[1]
    assert late["id"] == by(held, "sms").record and late["at"] >= held.held_until_ms
    assert counters(rt)[("held", ("orders", "sms"))] == 1


def test_a_level_at_the_bypass_level_is_not_held(rt: Any) -> None:
    recipients.update("42", {"timezone": "UTC", "quiet_hours": _quiet_now(600)})
    # a root member (level cap 100) notifying alice's recipient at level 100: not held
    notice = noti.get_notice(
        noti.notify(
            recipient="42",
            template="order_shipped",
            data={"order": 1},
            channels=["sms"],
            lv=100,
            user=MEMBER,
            owner=ALICE,
        ),
        user=MEMBER,
    )
    assert notice.held_until_ms == 0 and states(notice) == {"sms": "queued"}
    assert rt.store.get(by(notice, "sms").record).level == 100
    # the same from alice, whose level is capped to 1: held
    held = noti.get_notice(
        noti.notify(recipient="42", template="order_shipped", data={"order": 1}, channels=["sms"], lv=100)
    )
    assert states(held) == {"sms": "held"}


def test_an_opt_out_while_quiet_hours_hold_a_notice_stops_it_at_the_claim(rt: Any, worker: Any) -> None:
    recipients.update("42", {"timezone": "UTC", "quiet_hours": _quiet_now(2)})
    held = noti.get_notice(
        noti.notify(
            recipient="42", template="order_shipped", data={"order": 1}, category="orders", channels=["sms"]
        )
    )
    recipients.set_preferences("42", {"orders": {"*": False}})
    record_id = by(held, "sms").record
    record = wait_until(lambda: (r := rt.store.get(record_id)).status is not Status.WAITING and r, timeout=20)
    assert record.status is Status.INVALID and record.errmsg.startswith("e.noti.delivery.unsubscribed")
    assert outbox(rt) == []
    assert not rt.store.is_suppressed("sms", PHONE)  # a preference is no suppression of the number


def test_a_chain_falls_back_from_push_to_sms_when_no_receipt_comes(rt: Any, worker: Any) -> None:
    notice = noti.get_notice(
        noti.notify(
            recipient="42", template="order_shipped", data={"order": 3}, chain=["push", "sms"], after_s=1.5
        )
    )
    assert states(notice) == {"push": "queued", "sms": "fallback"}
    push_id, sms_id = by(notice, "push").record, by(notice, "sms").record
    assert rt.store.get(push_id).fallback == sms_id and rt.store.get(sms_id).fallback_of == push_id
    wait_until(lambda: len(outbox(rt, "pushbox")) == 1)
    wait_until(lambda: rt.store.get(sms_id).status is Status.DONE, timeout=20)
    [sms] = outbox(rt)
    assert sms["id"] == sms_id and sms["at"] >= notice.created_ms + 1500


def test_a_delivered_push_cancels_the_sms_of_the_chain(rt: Any, worker: Any) -> None:
    notice = noti.get_notice(
        noti.notify(
            recipient="42", template="order_shipped", data={"order": 4}, chain=["push", "sms"], after_s=3
        )
    )
    push_id, sms_id = by(notice, "push").record, by(notice, "sms").record
    wait_until(lambda: rt.store.get(push_id).delivery == "accepted")
    receipt(rt, push_id, "delivered")
    assert rt.store.get(sms_id).status is Status.INVALID
    time.sleep(4)
    assert outbox(rt) == []


def test_a_chain_skips_a_channel_the_recipient_opted_out_of(rt: Any) -> None:
    recipients.set_preferences("42", {"*": {"push": False}})
    notice = noti.get_notice(
        noti.notify(
            recipient="42", template="order_shipped", data={"order": 5}, chain=["push", "sms", "email"]
        )
    )
    assert states(notice) == {"push": "suppressed", "sms": "queued", "email": "fallback"}


def test_an_opt_out_racing_sends_never_both_never_neither(rt: Any, worker: Any) -> None:
    # given: notices and opt-out / opt-in flips at the same time
    made: list[str] = []
    stop = threading.Event()

    def flip() -> None:
        value = False
        while not stop.is_set():
            recipients.set_preferences("42", {"orders": {"sms": value}})
            value = not value

    flipper = threading.Thread(target=flip)
    flipper.start()
    try:
        for n in range(60):
            made.append(
                noti.notify(
                    recipient="42",
                    template="order_shipped",
                    data={"order": n},
                    category="orders",
                    channels=["sms"],
                )
            )
    finally:
        stop.set()
        flipper.join()
    # then: every notice has exactly one SMS record, delivered or refused with a reason
    record_ids = [by(noti.get_notice(n), "sms").record for n in made]
    assert all(record_ids) and len(set(record_ids)) == len(made)

    def settled() -> list[Any]:
        records = [rt.store.get(r) for r in record_ids]
        return records if all(r.status is not Status.WAITING for r in records) else []

    records = wait_until(settled, timeout=30)
    sent = {e["id"] for e in outbox(rt)}
    for record in records:
        if record.status is Status.DONE:
            assert record.id in sent
        else:
            assert record.status is Status.INVALID and record.id not in sent
            assert record.errmsg.startswith(("e.noti.pref.optout", "e.noti.delivery.unsubscribed"))
    assert len(sent) == sum(r.status is Status.DONE for r in records)


def test_the_same_idempotency_key_makes_one_notice(rt: Any) -> None:
    first = noti.notify(recipient="42", template="order_shipped", data={"order": 1}, idempotency_key="ship-1")
    again = noti.notify(recipient="42", template="order_shipped", data={"order": 1}, idempotency_key="ship-1")
    assert first == again
    assert rt.store.count() == 3


def test_a_missing_variable_is_refused_at_notify_time_and_nothing_is_stored(rt: Any) -> None:
    with pytest.raises(InvalidInput) as caught:
        noti.notify(recipient="42", template="order_shipped", data={})
    assert caught.value.code == "e.cmd.noti.tmpl.missingvar" and "order" in caught.value.message
    assert rt.store.count() == 0 and not rt.redis.keys(rt.keys.notice("*"))


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        ({"recipient": "nobody", "template": "order_shipped"}, "e.cmd.noti.rcpt.not_found"),
        ({"recipient": "42", "template": "nothing"}, "e.cmd.noti.tmpl.not_found"),
        ({"recipient": "42", "template": "order_shipped", "category": "nosuch"}, "e.cmd.noti.cat.not_found"),
        ({"recipient": "../42", "template": "order_shipped"}, "e.cmd.noti.rcpt.badid"),
        ({"recipient": "42", "template": "order_shipped", "data": [1]}, "e.cmd.noti.notify.baddata"),
        (
            {"recipient": "42", "template": "order_shipped", "chain": ["push", "push"]},
            "e.cmd.noti.notify.badchannels",
        ),
        (
            {"recipient": "42", "template": "order_shipped", "channels": ["pager"]},
            "e.cmd.noti.notify.badchannels",
        ),
        ({"recipient": "42", "template": "order_shipped", "locale": "zz_!!"}, "e.cmd.noti.rcpt.badlocale"),
        ({"recipient": "42", "template": "order_shipped@0"}, "e.cmd.noti.notify.badtemplate"),
        (
            {"recipient": "42", "template": "order_shipped", "channels": ["weixin"], "data": {"order": 1}},
            "e.cmd.noti.notify.nochannel",
        ),
    ],
)
def test_bad_notices_are_refused_with_nothing_stored(rt: Any, kwargs: dict[str, Any], code: str) -> None:
    with pytest.raises((InvalidInput, NotFound)) as caught:
        noti.notify(**kwargs)
    assert caught.value.code == code
    assert rt.store.count() == 0


def test_erasure_forgets_the_profile_masks_kept_records_and_revokes_waiting_ones(rt: Any) -> None:
    # given: one notice sent now (no worker: its records wait) and one record kept
    notice = noti.get_notice(noti.notify(recipient="42", template="order_shipped", data={"order": 1}))
    # when
    erased = recipients.delete("42")
    # then
    assert erased.revoked == 3 and erased.masked == 3 and erased.notices == 1
    for record_id in notice.records:
        record = rt.store.get(record_id)
        assert record.status is Status.INVALID
        assert PHONE not in record.target and EMAIL not in record.target and TOKEN not in record.target
        assert record.fields == {}
    assert not rt.redis.exists(rt.keys.recipient(noti.api.notifier().user(None).name, "42"))
    with pytest.raises(NotFound):
        recipients.get("42")
    with pytest.raises(NotFound):
        noti.notify(recipient="42", template="order_shipped", data={"order": 2})


def test_erasure_reaches_records_older_than_the_log_and_their_dead_letters(
    rt: Any, configure: Any, start_worker_now: Any
) -> None:
    # given: SMS fails for good (each record a dead letter); 42 and 43 each have a notice
    configure(
        providers={"failbox": {"kind": "sandbox", "fail": "always", "error": "permanent"}},
        channels={"sms": {"provider": "failbox"}},
    )
    other = "+8613800000043"
    recipients.put("43", {"addresses": {"sms": other}})
    made = {
        rid: by(noti.get_notice(noti.notify(recipient=rid, template="order_shipped", data={"order": 1},
                                            channels=["sms"])), "sms").record
        for rid in ("42", "43")
    }  # fmt: skip
    runtime = noti.sending.runtime.get_runtime()
    with start_worker_now():
        wait_until(lambda: all(runtime.dead_letters.find(r) for r in made.values()), timeout=20)
    before_43 = runtime.dead_letters.find(made["43"])
    # ... long ago: 42's record has left 42's log (the log keeps NOTI_NOTICE_KEEP_S), and its
    # vendor echoed the number in its error text
    owner = noti.api.notifier().user(None).name
    old = int(time.time() * 1000) - 31 * 86400 * 1000
    for rid, record_id in made.items():
        rt.redis.zrem(rt.keys.recipient_log(owner, rid), record_id)
        rt.redis.zadd(rt.keys.user_index(owner), {record_id: old})
    rt.redis.hset(rt.keys.record(made["42"]), "noti_errmsg", f"e.noti.send.invalid: {PHONE} is not a number")
    # when
    erased = recipients.delete("42")
    # then: 42's record and dead letter are masked; 43's are as they were
    assert (erased.masked, erased.dead_letters) == (1, 1)
    record = rt.store.get(made["42"])
    assert PHONE not in record.target and PHONE not in record.errmsg and record.fields == {}
    letter = runtime.dead_letters.find(made["42"])
    assert letter is not None and letter.target == record.target
    assert PHONE not in json.dumps(rt.redis.xrange(rt.keys.dead_letters))
    assert runtime.dead_letters.find(made["43"]) == before_43
    assert rt.store.get(made["43"]).target == other


def test_a_receipt_after_the_erasure_keeps_its_state_and_never_the_vendors_words(
    rt: Any, worker: Any
) -> None:
    # given: 42's push was sent (accepted: its receipt comes later), then 42 was erased
    notice = noti.get_notice(
        noti.notify(recipient="42", template="order_shipped", data={"order": 1}, channels=["push"])
    )
    record_id = by(notice, "push").record
    wait_until(lambda: rt.store.get(record_id).delivery == "accepted")
    recipients.delete("42")
    # when: the vendor's receipt quotes the device token in its words
    body = json.dumps(
        [
            {
                "msgid": f"sandbox-{record_id}",
                "state": "undelivered",
                "code": "GONE",
                "text": f"{TOKEN} unregistered",
            }
        ]
    ).encode()
    ReceiptIntake(rt).take(
        "pushbox",
        ReceiptRequest(
            "POST",
            "http://127.0.0.1/v1/receipts/pushbox",
            {"x-sandbox-signature": sign_receipt(SECRET, body)},
            body,
        ),
    )
    # then: the delivery state is kept, the words are not (record, timeline)
    record = rt.store.get(record_id)
    assert record.delivery == "undelivered" and record.delivery_code == "GONE"
    assert TOKEN not in (record.delivery_text or "") and "erased" in (record.delivery_text or "")
    steps = rt.redis.lrange(rt.keys.timeline(record_id), 0, -1)
    assert any('"receipt"' in s for s in steps) and not any(TOKEN in s for s in steps)


def test_a_send_finished_after_its_recipients_erasure_keeps_no_address_or_words(rt: Any) -> None:
    from noti.core.attempt import CallNote, Finish, Outcome
    from noti.core.deadletter import DeadLetter

    # given: 42's SMS is being sent (a worker holds it) when 42 is erased
    notice = noti.get_notice(
        noti.notify(recipient="42", template="order_shipped", data={"order": 1}, channels=["sms"])
    )
    record_id = by(notice, "sms").record
    assert rt.store.claim(record_id, owner="w", lease_ms=60_000).record is not None
    recipients.delete("42")
    # when: the send's outcome comes back quoting the number (a vendor's words), a dead letter
    words = f"e.noti.send.invalid: {PHONE} is not a reachable number"
    letter = DeadLetter(
        record_id=record_id,
        type="sms",
        target=PHONE,
        attempts=1,
        error_class="invalid",
        errmsg=words,
        at_ms=1,
    )
    note = CallNote("sandbox", 1, 0.01, "failed", code="e.noti.send.invalid", vendor_code="21211", text=words)
    outcome = Outcome(Status.INVALID, words, 1, error_class="invalid")
    assert rt.store.finish_many([Finish(record_id, "w", outcome, letter, (note,))]) == [True]
    # then: applied, without the number or the vendor's words anywhere it is kept
    record = rt.store.get(record_id)
    assert record.status is Status.INVALID and record.errmsg.startswith("e.noti.send.invalid: ")
    assert PHONE not in record.errmsg and PHONE not in record.target
    steps = rt.redis.lrange(rt.keys.timeline(record_id), 0, -1)
    assert any('"attempt"' in s for s in steps) and not any(PHONE in s or "21211" in s for s in steps)
    entries = json.dumps(rt.redis.xrange(rt.keys.dead_letters))
    assert record_id in entries and PHONE not in entries


def test_notify_delay_through_celery_answers_the_notice_id(rt: Any, worker: Any) -> None:
    result = noti.tasks.notify.delay(
        recipient="42", template="order_shipped", data={"order": 8}, channels=["sms"]
    )
    notice_id = result.get(timeout=20)
    assert notice_id.startswith("n")
    notice = noti.get_notice(notice_id)
    assert states(notice) == {"sms": "queued"}
    wait_until(lambda: len(outbox(rt)) == 1)


def test_a_notice_is_never_made_from_a_stale_profile_template_or_category(rt: Any) -> None:
    # given: everything a notice needs has been read (and is kept by this process)
    def sms_text(**kwargs: Any) -> str:
        notice = noti.get_notice(
            noti.notify(
                recipient="42", template="order_shipped", data={"order": 1}, channels=["sms"], **kwargs
            )
        )
        return str(rt.store.get(by(notice, "sms").record).fields["text"])

    assert sms_text() == "订单 1 已发货"
    # when each changes behind the kept values, the next notice uses the new one
    recipients.update("42", {"locale": "en"})
    assert sms_text() == "Order 1 shipped"
    recipients.put_template(
        "order_shipped", {**TEMPLATE, "channels": {"sms": {"en": {"text": "v2 {{ order }}"}}}}
    )
    assert sms_text() == "v2 1"
    recipients.delete_template("order_shipped")
    recipients.put_template(
        "order_shipped", {"default_locale": "en", "channels": {"sms": {"en": {"text": "again {{ order }}"}}}}
    )
    assert sms_text() == "again 1"  # version 1 again, but another template
    recipients.set_preferences("42", {"orders": {"sms": False}})
    notice = noti.get_notice(
        noti.notify(
            recipient="42", template="order_shipped", data={"order": 1}, category="orders", channels=["sms"]
        )
    )
    assert states(notice) == {"sms": "suppressed"}
    recipients.put_category("orders", {"critical": True}, user=MEMBER)
    notice = noti.get_notice(
        noti.notify(
            recipient="42", template="order_shipped", data={"order": 1}, category="orders", channels=["sms"]
        )
    )
    assert states(notice) == {"sms": "queued"}  # critical now: preferences no longer apply


@pytest.mark.parametrize("bulk", [False, True], ids=["notify", "notify_many"])
@pytest.mark.parametrize("again", ["put", "import"])
def test_a_profile_erased_and_made_again_under_its_id_is_never_sent_to_the_erased_address(
    rt: Any, bulk: bool, again: str
) -> None:
    from noti.recipients.api import recipients as api
    from noti.recipients.importing import rows_of_csv

    def sms_target() -> str:
        item = {"recipient": "42", "template": "order_shipped", "data": {"order": 1}, "channels": ["sms"]}
        notice_id = api().notify_many([item]).ids[0] if bulk else noti.notify(**item)  # type: ignore[arg-type]
        assert notice_id is not None
        return str(rt.store.get(by(noti.get_notice(notice_id), "sms").record).target)

    # given: this process keeps 42's profile (read by a first notice)
    assert sms_target() == PHONE
    # when: 42 is erased, and someone signs up (or is imported) under the same id, another phone
    recipients.delete("42")
    if again == "put":
        recipients.put("42", {"addresses": {"sms": "+8613800000099"}, "locale": "en"})
    else:
        result = recipients.import_rows(rows_of_csv(io.StringIO("id,sms,locale\n42,+8613800000099,en\n")))
        assert result.created == 1
    # then: the kept profile is stale (its version was never reused): the new phone, never the erased one
    assert sms_target() == "+8613800000099"


def test_notify_many_makes_each_good_notice_and_refuses_each_bad_one_alone(rt: Any, worker: Any) -> None:
    from noti.recipients.api import recipients as api

    recipients.put("43", {"addresses": {"sms": "+8613800000043"}, "locale": "en"})
    items: list[Any] = [
        {"recipient": "42", "template": "order_shipped", "data": {"order": 1}, "channels": ["sms"]},
        {"recipient": "nobody", "template": "order_shipped", "data": {"order": 2}},
        "not an object",
        {"recipient": "43", "template": "order_shipped", "data": {"order": 3}},
        {"recipient": "43", "template": "order_shipped", "data": [3]},
        {"recipient": "43", "template": "order_shipped", "data": {}},
        {"recipient": "43", "template": "order_shipped", "data": {"order": 4}, "user": "ops"},
    ]
    batch = api().notify_many(items)
    assert [i is not None for i in batch.ids] == [True, False, False, True, False, False, False]
    assert [(i, code) for i, code, _ in batch.refused] == [
        (1, "e.cmd.noti.rcpt.not_found"),
        (2, "e.cmd.noti.notify.baditem"),
        (4, "e.cmd.noti.notify.baddata"),
        (5, "e.cmd.noti.tmpl.missingvar"),
        (6, "e.cmd.noti.notify.badfield"),
    ]
    made = [noti.get_notice(i) for i in batch.ids if i]
    assert [states(n)["sms"] for n in made] == ["queued", "queued"]
    wait_until(lambda: len(outbox(rt)) == 2)
    assert sorted(e["fields"]["text"] for e in outbox(rt)) == ["Order 3 shipped", "订单 1 已发货"]


def test_a_bulk_notice_made_from_a_stale_profile_is_made_again_and_its_batch_goes_on(
    rt: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from noti.recipients.api import recipients as api
    from noti.recipients.notices import Notices

    remade: list[str] = []
    fresh = Notices._fresh

    def counted(self: Notices, request: Any, answer: Any) -> Any:
        remade.append(request.rid)
        return fresh(self, request, answer)

    monkeypatch.setattr(Notices, "_fresh", counted)

    # given: 42's profile is kept by this process (zh), then changed behind it (en)
    recipients.put("43", {"addresses": {"sms": "+8613800000043"}, "locale": "zh"})
    item = {"template": "order_shipped", "data": {"order": 1}, "channels": ["sms"]}
    api().notify_many([{**item, "recipient": "42"}, {**item, "recipient": "43"}])
    recipients.update("42", {"locale": "en"})
    # when: a batch holds 42 between two notices to 43
    batch = api().notify_many([{**item, "recipient": r} for r in ("43", "42", "43")])
    # then: 42's notice was refused by the script as stale and made again from the new profile
    texts = [
        rt.store.get(by(noti.get_notice(i), "sms").record).fields["text"] for i in batch.ids if i is not None
    ]
    assert texts == ["订单 1 已发货", "Order 1 shipped", "订单 1 已发货"]
    assert remade == ["42"]


def test_notify_many_over_several_batches_makes_one_notice_per_item_and_writes_each_once(rt: Any) -> None:
    from noti.recipients import bulk
    from noti.recipients.api import recipients as api

    # given: five recipients, one of them out of order SMS; more items than two batches hold
    for i in range(5):
        recipients.put(f"b{i}", {"addresses": {"sms": f"+86138000010{i:02d}"}, "locale": "en"})
    recipients.set_preferences("b4", {"orders": {"sms": False}})
    n = 2 * bulk.BULK_BATCH + 7
    items: list[dict[str, Any]] = [
        {"recipient": f"b{i % 5}", "template": "order_shipped", "data": {"order": i}, "category": "orders",
         "channels": ["sms"]}
        for i in range(n)
    ]  # fmt: skip
    items[10]["idempotency_key"] = items[bulk.BULK_BATCH + 10]["idempotency_key"] = "across-batches"
    items[11]["idempotency_key"] = items[12]["idempotency_key"] = "within-one-call"
    # when
    batch = api().notify_many(items)
    # then: every item has its notice, a repeated key names the first one's
    assert batch.refused == [] and None not in batch.ids and len(batch.ids) == n
    assert batch.ids[bulk.BULK_BATCH + 10] == batch.ids[10] and batch.ids[12] == batch.ids[11]
    distinct = list(dict.fromkeys(batch.ids))
    assert len(distinct) == n - 2
    notices = [noti.get_notice(i) for i in distinct if i]
    suppressed = [x for x in notices if x.recipient == "b4"]
    assert {states(x)["sms"] for x in suppressed} == {"suppressed"}
    assert {states(x)["sms"] for x in notices if x.recipient != "b4"} == {"queued"}
    # each record once in the indexes, each queued one's message once in the queue, counted once
    records = [e.record for x in notices for e in x.entries]
    assert len(set(records)) == len(notices)
    assert rt.redis.zcard(rt.keys.all_index) == len(records)
    assert rt.redis.zcard(rt.keys.waiting_index) == len(notices) - len(suppressed)
    assert rt.redis.zcard(rt.keys.status_index(-1)) == len(suppressed)
    lists = [
        k
        for k in rt.redis.scan_iter(count=1000)
        if rt.redis.type(k) == "list" and not k.startswith(rt.keys.timeline(""))  # not a timeline
    ]
    queue = [m for k in lists for m in rt.redis.lrange(k, 0, -1) if m.startswith("{")]
    queued_ids = sorted(json.loads(m)["headers"]["id"] for m in queue)
    assert queued_ids == sorted(r for x in notices if x.recipient != "b4" for r in x.records)
    assert counters(rt)[("suppressed", ("orders", "sms", "optout"))] == len(suppressed)
    for x in notices[:: bulk.PER_CALL // 2]:  # the recipients' logs name their notices
        assert x.id in recipients.history(x.recipient, limit=1000)


def test_a_template_put_again_during_a_bulk_call_remakes_the_stale_notices_together(rt: Any) -> None:
    from noti.recipients import bulk
    from noti.recipients.api import recipients as api

    # given: this process keeps the template (read by a first call), then it is put again;
    # five recipients in turn, more items than two batches hold
    for i in range(5):
        recipients.put(f"t{i}", {"addresses": {"sms": f"+86138000020{i:02d}"}, "locale": "en"})
    item = {"template": "order_shipped", "data": {"order": 0}, "channels": ["sms"]}
    api().notify_many([{**item, "recipient": f"t{i}"} for i in range(5)])
    recipients.put_template(
        "order_shipped", {"default_locale": "en", "channels": {"sms": {"en": {"text": "v2 {{ order }}"}}}}
    )
    n = 2 * bulk.BULK_BATCH + 7
    rt.redis.config_resetstat()
    # when: every notice of the batches in flight was made from the kept (stale) template
    batch = api().notify_many([{**item, "recipient": f"t{i % 5}", "data": {"order": i}} for i in range(n)])
    # then: each made again from the new one, in a few calls (a round trip each was 1,000)
    assert batch.refused == [] and None not in batch.ids and len(set(batch.ids)) == n
    texts = {rt.store.get(by(noti.get_notice(i), "sms").record).fields["text"] for i in batch.ids[:: n // 7]}  # type: ignore[arg-type]
    assert texts == {f"v2 {i}" for i in range(0, n, n // 7)}
    calls = int(rt.redis.info("commandstats")["cmdstat_evalsha"]["calls"])
    assert calls <= 3 * n // bulk.PER_CALL, calls


def test_a_bulk_notice_whose_inputs_keep_changing_is_refused_alone_after_five_tries(
    rt: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from noti.recipients.api import recipients as api
    from noti.recipients.request import parse_request
    from noti.recipients.snapshot import Snapshots

    # given: 42's profile kept, then changed behind it; this process keeps finding the old one
    item = {"template": "order_shipped", "data": {"order": 1}, "channels": ["sms"]}
    recipients.put("43", {"addresses": {"sms": "+8613800000043"}, "locale": "en"})
    api().notify_many([{**item, "recipient": "42"}, {**item, "recipient": "43"}])
    notices = api().notices
    old = notices.snapshots.kept(parse_request(notices.notifier, **item, recipient="42"))
    assert old is not None
    recipients.update("42", {"locale": "en"})
    kept = Snapshots.kept
    monkeypatch.setattr(Snapshots, "kept", lambda self, r: old if r.rid == "42" else kept(self, r))
    # when
    batch = api().notify_many([{**item, "recipient": r} for r in ("43", "42", "43")])
    # then: 42's is refused as a plain notify is, the others are made
    assert [i is not None for i in batch.ids] == [True, False, True]
    assert [(i, code) for i, code, _ in batch.refused] == [(1, "e.noti.store.unavailable")]
    assert "changed 5 times" in batch.refused[0][2]


def test_a_merged_away_recipients_held_notice_is_sent_to_the_one_it_joined(rt: Any, worker: Any) -> None:
    # given: anon-7 has a notice held by quiet hours for 2 more seconds
    recipients.put(
        "anon-7", {"addresses": {"sms": "+8613800000007"}, "timezone": "UTC", "quiet_hours": _quiet_now(2)}
    )
    held = noti.get_notice(
        noti.notify(
            recipient="anon-7",
            template="order_shipped",
            data={"order": 1},
            category="orders",
            channels=["sms"],
        )
    )
    assert states(held) == {"sms": "held"}
    # when: anon-7 turns out to be 42
    recipients.merge("42", "anon-7")
    # then: the held record is 42's now, checked against 42's preferences, and sent
    record_id = by(held, "sms").record
    record = wait_until(lambda: (r := rt.store.get(record_id)).status is not Status.WAITING and r, timeout=20)
    assert record.status is Status.DONE, record.errmsg
    assert record_id in recipients.history("42")


def test_a_held_records_message_names_its_notice_when_the_pump_publishes_it(rt: Any) -> None:
    recipients.update("42", {"timezone": "UTC", "quiet_hours": _quiet_now(1)})
    held = noti.get_notice(
        noti.notify(recipient="42", template="order_shipped", data={"order": 1}, channels=["sms"])
    )
    published: list[Any] = []

    def publish(items: Any) -> int:
        published.extend(items)
        return len(published)

    wait_until(lambda: rt.delayed.pump_once(publish) or published, timeout=10)
    assert [(i[0], i[3]) for i in published] == [(by(held, "sms").record, held.id)]
