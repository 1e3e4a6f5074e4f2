"""Delivery through a real in-process Celery worker: done, retried, failed, invalid, once."""

from __future__ import annotations

from typing import Any

import pytest

import noti
from noti.celery.app import app
from noti.celery.publish import Publisher
from noti.core.record import Channel, Status
from tests.conftest import ADMIN, sandbox_outbox, wait_until

pytestmark = pytest.mark.integration

PHONE = "+8613912345678"


def final(rt: Any, record_id: str, timeout: float = 20) -> Any:
    return wait_until(lambda: (r := rt.store.get(record_id)).status != Status.WAITING and r, timeout=timeout)


def test_a_notification_is_delivered_and_the_record_says_so(rt: Any, worker: Any) -> None:
    record_id = noti.notify_sms(PHONE, "hello", lv=5, user=ADMIN)
    record = final(rt, record_id)
    assert record.status is Status.DONE and record.errmsg == "ok"
    assert record.sent_by == "sandbox" and record.msgid == f"sandbox-{record_id}"
    assert record.expires_ms is not None and record.lease_until_ms == 0
    [sent] = sandbox_outbox(rt)
    assert sent["id"] == record_id and sent["target"] == PHONE and sent["fields"] == {"text": "hello"}


def test_every_channel_is_delivered_through_the_sandbox(rt: Any, worker: Any) -> None:
    ids = [
        noti.notify_weixin("oOPENID", tmpl="T", pnb="acct", content={"k": {"value": 1}}),
        noti.notify_email("a@example.com", subject="s", text="t"),
        noti.notify_webhook("https://example.com/h", content={"a": 1}),
    ]
    for record_id in ids:
        assert final(rt, record_id).status is Status.DONE
    assert sorted(e["type"] for e in sandbox_outbox(rt)) == ["email", "webhook", "weixin"]
    assert rt.store.get(ids[0]).msgid == f"sandbox-{ids[0]}"


def test_temporary_failures_are_retried_then_delivered(configure: Any, worker: Any) -> None:
    rt = configure(providers={"flaky": {"kind": "sandbox", "fail_first": 2}}, retry_seconds=0.2)
    record_id = noti.notify_sms(PHONE, "again", provider="flaky")
    record = final(rt, record_id)
    assert record.status is Status.DONE and record.retry == 2
    [sent] = sandbox_outbox(rt, "flaky")
    assert sent["attempt"] == 3


def test_running_out_of_retries_fails_the_record(configure: Any, worker: Any) -> None:
    rt = configure(providers={"down": {"kind": "sandbox", "fail": "always"}}, retry_seconds=0.1, retry_max=3)
    record_id = noti.notify_sms(PHONE, "never", provider="down")
    record = final(rt, record_id)
    assert record.status is Status.FAILED and record.retry == 3
    assert record.errmsg.startswith("e.cmd.noti.send.reachMaxRetry: after 3 attempts")
    assert "sandbox down refused attempt 3" in record.errmsg
    assert sandbox_outbox(rt, "down") == []


def test_linear_back_off_spaces_the_attempts(configure: Any, worker: Any) -> None:
    rt = configure(providers={"flaky": {"kind": "sandbox", "fail_first": 2}}, retry_seconds=0.5)
    record_id = noti.notify_sms(PHONE, "timed", provider="flaky")
    record = final(rt, record_id)
    # attempt 1 at t0, attempt 2 >= t0 + 0.5 s, attempt 3 >= t1 + 1.0 s (attempt × 0.5 s)
    assert record.modified_ms - record.created_ms >= 1500


def test_a_permanent_failure_makes_the_record_invalid_at_once(configure: Any, worker: Any) -> None:
    rt = configure(providers={"reject": {"kind": "sandbox", "fail": "always", "error": "permanent"}})
    record_id = noti.notify_sms(PHONE, "bad", provider="reject")
    record = final(rt, record_id)
    assert record.status is Status.INVALID and record.retry == 0
    assert "sandbox reject refused" in record.errmsg


def test_an_unexpected_exception_makes_the_record_invalid(configure: Any, worker: Any) -> None:
    rt = configure(providers={"buggy": {"kind": "tests.broken_provider:BuggyProvider"}})
    record_id = noti.notify_sms(PHONE, "boom", provider="buggy")
    record = final(rt, record_id)
    assert record.status is Status.INVALID
    assert record.errmsg == "e.cmd.noti.send.unexpected: ZeroDivisionError: division by zero in a provider"


def test_duplicate_and_late_messages_send_nothing(rt: Any, worker: Any) -> None:
    record_id = noti.notify_sms(PHONE, "once")
    Publisher(app).publish([(record_id, Channel.SMS, 1)] * 5)
    final(rt, record_id)
    wait_until(lambda: rt.redis.llen("noti.sms:9") == 0)
    Publisher(app).publish([(record_id, Channel.SMS, 1)])  # redelivered after it was done
    wait_until(lambda: rt.redis.llen("noti.sms:9") == 0)
    assert [e["id"] for e in sandbox_outbox(rt)] == [record_id]


def test_a_message_for_a_leased_record_is_looked_at_again_when_the_lease_ends(rt: Any, worker: Any) -> None:
    # given a record leased by a sender that died (it never finishes)
    record = noti.api.notifier().build("sms", PHONE, text="orphan")
    rt.store.create(record)
    rt.store.claim(record.id, owner="dead-worker", lease_ms=1500)
    # when its message arrives while the lease still runs
    Publisher(app).publish([(record.id, Channel.SMS, 1)])
    # then nothing is sent now, and it is delivered once the lease has expired
    wait_until(lambda: rt.delayed.due_at(record.id) is not None)
    assert sandbox_outbox(rt) == []
    assert final(rt, record.id).status is Status.DONE
    assert [e["id"] for e in sandbox_outbox(rt)] == [record.id]


def test_the_notify_task_creates_and_delivers(rt: Any, worker: Any) -> None:
    from noti.celery.tasks import notify as notify_task

    notify_task.delay(type="sms", target=PHONE, text="from a task", lv=3, user=ADMIN)
    sent = wait_until(lambda: sandbox_outbox(rt))
    record = final(rt, sent[0]["id"])
    assert record.creator == ADMIN and record.level == 3 and record.fields == {"text": "from a task"}


def test_the_notify_task_refuses_bad_input_and_stores_nothing(rt: Any, worker: Any) -> None:
    from celery.signals import task_failure

    from noti.celery.tasks import notify as notify_task
    from noti.errors import InvalidInput

    failures: dict[str, BaseException] = {}

    def remember(task_id: str, exception: BaseException, **_: Any) -> None:
        failures[task_id] = exception

    task_failure.connect(remember, weak=False)
    try:
        result = notify_task.apply_async(kwargs={"type": "sms", "target": "nope", "text": "x"})
        wait_until(lambda: result.id in failures)
    finally:
        task_failure.disconnect(remember)
    assert isinstance(failures[result.id], InvalidInput)
    assert failures[result.id].code == "e.cmd.noti.add.badtarget"
    assert rt.store.count() == 0
    # the same task by name, from a process that only knows the name, is stored and sent
    app.send_task("noti.notify", kwargs={"type": "sms", "target": PHONE, "text": "ok"}, queue="noti.intake")
    wait_until(lambda: sandbox_outbox(rt))
    assert rt.store.count() == 1


def test_a_redelivered_notify_task_creates_one_record(rt: Any, worker: Any) -> None:
    for _ in range(3):  # the same message three times, as a redelivery after a crash would
        app.send_task(
            "noti.notify",
            kwargs={"type": "sms", "target": PHONE, "text": "once"},
            queue="noti.intake",
            task_id="the-same-task",
        )
    wait_until(lambda: len(sandbox_outbox(rt)) == 1)
    wait_until(lambda: rt.redis.hlen("unacked") == 0 and not rt.redis.llen("noti.intake"))
    assert rt.store.count() == 1


def test_a_notification_that_keeps_killing_its_sender_is_made_invalid_as_poison(configure: Any) -> None:
    from noti.core.record import now_ms
    from noti.sending.sender import POISON_MARGIN

    rt = configure(retry_max=1)
    record_id = noti.notify_sms(PHONE, "kills its sender")
    # given a record claimed retry_max + 3 times, each sender dying before it finished
    start = now_ms() - 1_000_000
    for n in range(1 + POISON_MARGIN):
        claim = rt.store.claim(record_id, owner=f"dead{n}", lease_ms=1_000, at_ms=start + n * 2_000)
        assert claim.claims == n + 1
    # when it is claimed once more, then it is not sent but made invalid and dead-lettered
    [result] = noti.send(record_id, user=ADMIN)
    assert result.status is Status.INVALID and "e.cmd.noti.send.poison" in result.errmsg
    assert sandbox_outbox(rt) == []
    [letter] = rt.dead_letters.entries()
    assert (letter.record_id, letter.error_class) == (record_id, "poison")
