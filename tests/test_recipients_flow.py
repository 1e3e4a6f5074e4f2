"""Notifying people end to end through a real in-process worker (issue 34): a recipient with
push, SMS and e-mail; preferences that allow some channels; quiet hours that hold one notice
while a critical one goes now; a locale fallback; a chain that falls back from push to SMS on
no receipt; an opt-out racing sends (each send happens or is suppressed, never both, never
lost); erasure."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

import noti
import noti.sending.runtime
import noti.tasks
from noti import recipients
from noti.core.record import Status
from noti.errors import InvalidInput, NotFound
from tests.conftest import ALICE, MEMBER, wait_until
from tests.recipients_given import (
    EMAIL,
    PHONE,
    TEMPLATE,
    _quiet_now,
    by,
    counters,
    given_runtime,
    outbox,
    receipt,
    states,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def rt(configure: Any) -> Any:
    return given_runtime(configure)


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


@pytest.mark.parametrize(
    ("preferences", "suppressed"),
    [
        ({"*": {"*": False}}, {"push", "sms", "email"}),
        ({"*": {"*": False}, "orders": {"sms": True}}, {"push", "email"}),  # the category's channel first
        ({"*": {"push": False}, "orders": {"*": True}}, set()),  # then the category's every channel
        ({"orders": {"*": False, "email": True}}, {"push", "sms"}),
        ({"*": {"email": False}}, {"email"}),  # then the channel's every category
        ({"marketing": {"*": False}}, set()),  # another category's say is not this one's
    ],
)
def test_the_most_specific_preference_set_decides_each_channel(
    rt: Any, preferences: dict[str, Any], suppressed: set[str]
) -> None:
    recipients.set_preferences("42", preferences)
    notice = noti.get_notice(
        noti.notify(recipient="42", template="order_shipped", data={"order": 1}, category="orders")
    )
    assert {c for c, state in states(notice).items() if state == "suppressed"} == suppressed
    assert {c for c, state in states(notice).items() if state == "queued"} == {
        "push",
        "sms",
        "email",
    } - suppressed


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
