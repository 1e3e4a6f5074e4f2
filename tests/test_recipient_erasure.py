"""Erasing a recipient (issue 34, "the right to be forgotten", :mod:`noti.recipients.erasure`):
the profile forgotten, waiting records revoked, kept records and their dead letters masked,
however old; what comes for a masked record afterwards (a send in flight, a late receipt)
keeps no address and no vendor words; a profile made again under the id is never sent to
the erased addresses by a process that kept the old one."""

from __future__ import annotations

import io
import json
import time
from typing import Any

import pytest

import noti
import noti.sending.runtime
import noti.tasks
from noti import recipients
from noti.core.record import Status
from noti.delivery import ReceiptRequest
from noti.errors import NotFound
from noti.providers.sandbox import sign_receipt
from noti.sending.intake import ReceiptIntake
from tests.conftest import wait_until
from tests.recipients_given import (
    EMAIL,
    PHONE,
    SECRET,
    TOKEN,
    by,
    given_runtime,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def rt(configure: Any) -> Any:
    return given_runtime(configure)


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
                "text": f"{TOKEN}: unregistered",  # (a vendor's "<token>: …" is no noti code)
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
    assert record.delivery_text == "not kept: the recipient was erased"
    steps = rt.redis.lrange(rt.keys.timeline(record_id), 0, -1)
    assert any('"receipt"' in s for s in steps) and not any(TOKEN in s for s in steps)


def _held_by_a_worker(rt: Any, channel: str) -> str:
    """The record of a notice to 42 on ``channel``, claimed by a worker ("w") that sends it."""
    notice = noti.get_notice(
        noti.notify(recipient="42", template="order_shipped", data={"order": 1}, channels=[channel])
    )
    record_id: str = by(notice, channel).record
    assert rt.store.claim(record_id, owner="w", lease_ms=60_000).record is not None
    return record_id


def test_a_send_finished_after_its_recipients_erasure_keeps_no_address_or_words(rt: Any) -> None:
    from noti.core.attempt import CallNote, Finish, Finished, Outcome
    from noti.core.deadletter import DeadLetter

    # given: 42's SMS is being sent (a worker holds it) when 42 is erased
    record_id = _held_by_a_worker(rt, "sms")
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
    applied = rt.store.finish_many([Finish(record_id, "w", outcome, letter, (note,))])
    assert applied == [Finished.ERASED_MEANWHILE]  # applied, and its hooks are to see it masked
    # then: applied, without the number or the vendor's words anywhere it is kept
    record = rt.store.get(record_id)
    assert record.status is Status.INVALID and record.errmsg.startswith("e.noti.send.invalid: ")
    assert PHONE not in record.errmsg and PHONE not in record.target
    steps = rt.redis.lrange(rt.keys.timeline(record_id), 0, -1)
    assert any('"attempt"' in s for s in steps) and not any(PHONE in s or "21211" in s for s in steps)
    entries = json.dumps(rt.redis.xrange(rt.keys.dead_letters))
    assert record_id in entries and PHONE not in entries


def test_an_early_receipt_of_an_erased_record_is_answered_to_apply_and_marked_for_its_hooks(rt: Any) -> None:
    from noti.core.attempt import ErasedReceipt, Finish, Outcome
    from noti.core.record import Channel, msgid_field

    # given: 42's push is being sent when 42 is erased, and its vendor's receipt came first
    record_id = _held_by_a_worker(rt, "push")
    recipients.delete("42")
    early = json.dumps({"state": "delivered", "code": "OK", "text": "delivered"})
    rt.redis.hset(rt.keys.early_receipts, "pushbox:vid-1", early)
    # when: the send is recorded
    fields = (("noti_sent_by", "pushbox"), (msgid_field(Channel.PUSH), "vid-1"), ("noti_dlv", "accepted"))
    [answer] = rt.store.finish_many([Finish(record_id, "w", Outcome(Status.DONE, "", 0, fields=fields))])
    # then: the receipt is answered, to be applied, marked as the erased record's
    assert isinstance(answer, ErasedReceipt) and json.loads(answer) == json.loads(early)


def test_a_receipt_naming_an_erased_record_never_sent_is_not_kept(rt: Any) -> None:
    from noti.delivery import Delivery, DeliveryReport

    # given: 42's push waited (no worker) when 42 was erased: revoked, never sent
    notice = noti.get_notice(
        noti.notify(recipient="42", template="order_shipped", data={"order": 1}, channels=["push"])
    )
    record_id = by(notice, "push").record
    recipients.delete("42")
    # when: a receipt naming it (as vendors that echo noti's id do) comes anyway, quoting the token
    words = f"{TOKEN} gone"
    report = DeliveryReport("pushbox", Delivery.UNDELIVERED, record_id=record_id, vendor_id="v-1", text=words)
    assert rt.delivery.apply([report]) == ["unsent"]
    # then: it is not kept for a send that will never come (its words with it)
    assert rt.redis.hlen(rt.keys.early_receipts) == 0
    assert rt.store.get(record_id).delivery is None


def test_a_send_finishing_while_the_erasure_masks_its_record_leaves_no_number(
    rt: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from noti.core.attempt import Finish, Outcome
    from noti.recipients import erasure

    # given: 42's SMS is being sent; its send finishes, quoting the number, just as the
    # erasure has read the record and not yet written it (the first target it masks)
    record_id = _held_by_a_worker(rt, "sms")
    words = f"e.noti.send.invalid: {PHONE} is not a reachable number"
    finished: list[Any] = []
    mask = erasure.mask_target

    def finish_meanwhile(target: str) -> str:
        if not finished:
            outcome = Outcome(Status.INVALID, words, 1, error_class="invalid")
            finished.append(rt.store.finish_many([Finish(record_id, "w", outcome)]))
        return mask(target)

    monkeypatch.setattr(erasure, "mask_target", finish_meanwhile)
    # when
    recipients.delete("42")
    # then: the send was recorded, and its words never stayed
    assert finished and finished[0][0]
    record = rt.store.get(record_id)
    assert record.status is Status.INVALID and PHONE not in record.errmsg and PHONE not in record.target


def test_a_dead_letter_hook_told_of_a_send_failed_after_the_erasure_gets_it_masked(
    rt: Any, configure: Any, start_worker_now: Any
) -> None:
    from tests import hooks

    # given: SMS goes through a vendor that takes 2 s to refuse for good; a dead-letter hook
    hooks.CALLS.clear()
    configure(
        providers={"slowfail": {"kind": "sandbox", "fail": "always", "error": "permanent", "delay_ms": 2000}},
        channels={"sms": {"provider": "slowfail"}},
        dead_letter_hook="tests.hooks:collect",
    )
    notice = noti.get_notice(
        noti.notify(recipient="42", template="order_shipped", data={"order": 1}, channels=["sms"])
    )
    record_id = by(notice, "sms").record
    with start_worker_now():
        # when: 42 is erased while a worker sends the SMS
        wait_until(lambda: rt.redis.hget(rt.keys.record(record_id), "_owner"), timeout=20)
        recipients.delete("42")
        wait_until(lambda: hooks.CALLS, timeout=20)
    # then: the hook got the dead letter as erasure left the record: no number
    [letter] = hooks.CALLS
    assert letter.record_id == record_id and PHONE not in letter.target
    assert letter.target == rt.store.get(record_id).target
    assert PHONE not in json.dumps(rt.redis.xrange(rt.keys.dead_letters))


def test_a_send_now_of_a_record_erased_while_sent_answers_it_masked(rt: Any, configure: Any) -> None:
    import threading

    from noti.sending.sender import Sender

    # given: SMS goes through a vendor that takes 1.5 s to refuse for good
    runtime = configure(
        providers={"slowfail": {"kind": "sandbox", "fail": "always", "error": "permanent", "delay_ms": 1500}},
        channels={"sms": {"provider": "slowfail"}},
    )
    notice = noti.get_notice(
        noti.notify(recipient="42", template="order_shipped", data={"order": 1}, channels=["sms"])
    )
    record_id = by(notice, "sms").record
    answers: list[Any] = []
    sending = threading.Thread(target=lambda: answers.append(Sender(runtime).deliver(record_id)))
    sending.start()
    # when: 42 is erased while the send (`noti send`'s way) is at the vendor
    wait_until(lambda: rt.redis.hget(rt.keys.record(record_id), "_owner"), timeout=20)
    recipients.delete("42")
    sending.join(30)
    # then: its answer (what `noti send` prints) has no number
    [result] = answers
    assert result.mark == "KO" and PHONE not in result.target and PHONE not in result.line()
    assert result.target == rt.store.get(record_id).target


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
