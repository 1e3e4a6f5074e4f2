"""Celery call options of noti.notify (countdown, eta, expires, priority) mapped onto noti's own
delays, expiry and levels, and what Celery shows of a call (argsrepr/kwargsrepr, events)
masked. Real Redis; a real worker where a test needs one; never task_always_eager."""

from __future__ import annotations

import base64
import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from celery.exceptions import TaskRevokedError

from noti.celery.app import app
from noti.celery.queues import level_for_priority
from noti.core.record import Status
from noti.errors import InvalidInput
from tests.conftest import ADMIN, ALICE, wait_until

pytestmark = pytest.mark.integration

PHONE = "+8613912345678"
TEXT = "Your login code is 4321"  # 23 characters
#: Not the example number noti's own error messages quote.
OTHER_PHONE = "+8613700001111"


def intake() -> Any:
    """``noti.tasks.notify``, imported when a test runs (a task proxy at module level would
    configure the app during pytest's collection)."""
    from noti.tasks import notify

    return notify


def queued(rt: Any, step: int) -> list[dict[str, Any]]:
    """The intake messages waiting at priority ``step``, oldest first (kombu LPUSHes)."""
    key = "noti.intake" if step == 0 else f"noti.intake:{step}"
    return [json.loads(raw) for raw in reversed(rt.redis.lrange(key, 0, -1))]


def body_kwargs(message: dict[str, Any]) -> dict[str, Any]:
    from kombu.utils.json import loads

    _, kwargs, _ = loads(base64.b64decode(message["body"]))
    return dict(kwargs)


# --- countdown / eta ---------------------------------------------------------------------------


def test_countdown_goes_out_at_once_as_the_notifications_own_eta(rt: Any) -> None:
    # when a caller asks for a countdown
    before = time.time()
    result = intake().apply_async(kwargs={"type": "sms", "target": PHONE, "text": "soon"}, countdown=20)
    # then the intake message carries no Celery ETA: it is due now, with the due time in its kwargs
    [message] = queued(rt, 9)
    assert message["headers"]["eta"] is None and message["headers"]["id"] == result.id
    eta = body_kwargs(message)["eta"]
    assert before + 19 <= eta.timestamp() <= time.time() + 21


def test_countdown_creates_a_delayed_record(rt: Any, worker: Any) -> None:
    result = intake().apply_async(kwargs={"type": "sms", "target": PHONE, "text": "soon"}, countdown=20)
    record_id = result.get(timeout=10)
    record = rt.store.get(record_id)
    due = rt.delayed.due_at(record_id)
    assert record.status is Status.WAITING and due is not None and record.lease_until_ms == due
    assert 15_000 <= due - record.created_ms <= 21_000


def test_delay_with_a_countdown_keyword_is_a_delay_too(rt: Any, worker: Any) -> None:
    # `.delay()` passes countdown as a keyword: it was refused ("unexpected: countdown")
    record_id = intake().delay(type="sms", target=PHONE, text="soon", countdown=20).get(timeout=10)
    due = rt.delayed.due_at(record_id)
    assert due is not None and 15_000 <= due - rt.store.get(record_id).created_ms <= 21_000


def test_a_countdown_keyword_from_a_name_only_producer_is_a_delay(rt: Any, worker: Any) -> None:
    result = app.send_task(
        "noti.notify",
        kwargs={"type": "sms", "target": PHONE, "text": "soon", "countdown": 30},
        queue="noti.intake",
    )
    record_id = result.get(timeout=10)
    assert rt.delayed.due_at(record_id) is not None


def test_eta_creates_a_record_due_then(rt: Any, worker: Any) -> None:
    at = datetime.now(UTC).replace(microsecond=0) + timedelta(minutes=10)
    record_id = (
        intake().apply_async(kwargs={"type": "sms", "target": PHONE, "text": "at ten"}, eta=at).get(10)
    )
    assert rt.delayed.due_at(record_id) == int(at.timestamp() * 1000)
    # a naive eta is in the app's timezone, UTC, as Celery reads it
    naive = at.replace(tzinfo=None)
    other = intake().apply_async(kwargs={"type": "sms", "target": PHONE, "text": "naive"}, eta=naive).get(10)
    assert rt.delayed.due_at(other) == int(at.timestamp() * 1000)


@pytest.mark.parametrize(
    ("kwargs", "options"),
    [
        ({}, {"countdown": 5, "eta": datetime.now(UTC) + timedelta(seconds=5)}),
        ({"delay": 5}, {"countdown": 5}),
        ({}, {"countdown": -1}),
        ({}, {"countdown": "soon"}),
        ({"countdown": 5}, {"countdown": 6}),
    ],
)
def test_conflicting_or_bad_countdowns_are_refused_at_once(
    rt: Any, kwargs: dict[str, Any], options: dict[str, Any]
) -> None:
    with pytest.raises(InvalidInput) as info:
        intake().apply_async(kwargs={"type": "sms", "target": PHONE, "text": "x", **kwargs}, **options)
    assert info.value.code == "e.cmd.noti.add.baddelay"
    assert not queued(rt, 9)


# --- priority and level ------------------------------------------------------------------------


def test_priority_is_the_message_step_and_the_level_when_none_is_given(rt: Any, worker: Any) -> None:
    # an administrator's urgent call: step 0 and level 1000
    urgent = intake().apply_async(
        kwargs={"type": "sms", "target": PHONE, "text": "x", "user": ADMIN}, priority=0
    )
    assert rt.store.get(urgent.get(timeout=10)).level == 1000
    # step 3 for a root administrator: level 100
    mid = intake().apply_async(
        kwargs={"type": "sms", "target": PHONE, "text": "x", "user": ADMIN}, priority=3
    )
    assert rt.store.get(mid.get(timeout=10)).level == level_for_priority(3) == 100
    # a plain user's priority 0 is still capped to level 1
    capped = intake().apply_async(
        kwargs={"type": "sms", "target": PHONE, "text": "x", "user": ALICE}, priority=0
    )
    assert rt.store.get(capped.get(timeout=10)).level == 1
    # an explicit level wins over the priority
    given = intake().apply_async(
        kwargs={"type": "sms", "target": PHONE, "text": "x", "user": ADMIN, "lv": 7}, priority=0
    )
    assert rt.store.get(given.get(timeout=10)).level == 7


def test_the_intake_message_waits_at_its_priority_or_its_levels_step(rt: Any) -> None:
    intake().apply_async(kwargs={"type": "sms", "target": PHONE, "text": "x"}, priority=2)
    intake().delay(type="sms", target=PHONE, text="x", lv=100, user=ADMIN)
    intake().delay(type="sms", target=PHONE, text="x", priority=0)  # as a .delay() keyword
    assert [body_kwargs(m)["lv"] for m in queued(rt, 2)] == [200]
    assert [body_kwargs(m)["lv"] for m in queued(rt, 3)] == [100]
    assert [body_kwargs(m)["lv"] for m in queued(rt, 0)] == [1000]


@pytest.mark.parametrize("priority", [10, -1, "high", True])
def test_a_bad_priority_is_refused_at_once(rt: Any, priority: object) -> None:
    with pytest.raises(InvalidInput) as info:
        intake().apply_async(kwargs={"type": "sms", "target": PHONE, "text": "x"}, priority=priority)
    assert info.value.code == "e.cmd.noti.add.badpriority"


# --- expires -----------------------------------------------------------------------------------


def test_an_intake_message_no_worker_started_in_time_is_revoked(rt: Any, start_worker_now: Any) -> None:
    # given a call that expires in one second, and no worker running
    result = intake().apply_async(kwargs={"type": "sms", "target": PHONE, "text": "now or never"}, expires=1)
    time.sleep(1.5)
    # when a worker comes later
    with start_worker_now():
        # then the message is discarded: REVOKED, nothing stored
        with pytest.raises(TaskRevokedError):
            result.get(timeout=10)
    assert rt.store.count() == 0


def test_expires_before_the_due_time_is_refused(rt: Any) -> None:
    with pytest.raises(InvalidInput) as info:
        intake().apply_async(kwargs={"type": "sms", "target": PHONE, "text": "x"}, countdown=60, expires=30)
    assert info.value.code == "e.cmd.noti.add.badexpires"
    at = datetime.now(UTC) + timedelta(minutes=5)
    result = intake().apply_async(kwargs={"type": "sms", "target": PHONE, "text": "x"}, eta=at, expires=600)
    assert result.id


# --- masking -----------------------------------------------------------------------------------


def test_argsrepr_and_kwargsrepr_mask_the_target_and_the_body(rt: Any) -> None:
    intake().delay(type="sms", target=PHONE, text=TEXT)
    intake().delay("sms", PHONE, text=TEXT)
    first, second = queued(rt, 9)
    assert first["headers"]["kwargsrepr"] == "{'type': 'sms', 'target': '+86139****5678', 'text': <23 chars>}"
    assert second["headers"]["argsrepr"] == "('sms', '+86139****5678')"
    for message in (first, second):
        shown = json.dumps([message["headers"], message["properties"]])
        assert PHONE not in shown and "4321" not in shown


def test_masking_is_off_with_the_setting(configure: Any) -> None:
    rt = configure(mask_in_celery=False)
    assert rt.settings.mask_in_celery is False  # NOTI_MASK_IN_CELERY=false
    intake().delay(type="sms", target=PHONE, text=TEXT)
    [message] = queued(rt, 9)
    assert PHONE in message["headers"]["kwargsrepr"] and TEXT in message["headers"]["kwargsrepr"]


def test_task_events_and_failure_messages_show_the_target_masked(rt: Any, worker: Any) -> None:
    from tests.test_celery_native import task_events

    with task_events() as events:  # subscribed before anything is sent
        good = intake().delay(type="sms", target=OTHER_PHONE, text=TEXT)
        good.get(timeout=10)
        bad = intake().delay(type="sms", target="999-not-a-phone", text=TEXT)
        with pytest.raises(InvalidInput) as info:
            bad.get(timeout=10)
        wait_until(lambda: {e.get("type") for e in events if e.get("uuid") == bad.id} >= {"task-failed"})
    received = [e for e in events if e["type"] == "task-received" and e["uuid"] == good.id]
    assert received and "'+86137****1111'" in received[0]["kwargs"] and "<23 chars>" in received[0]["kwargs"]
    for event in events:
        assert OTHER_PHONE not in json.dumps(event) and TEXT not in json.dumps(event), json.dumps(event)
        assert "999-not-a-phone" not in json.dumps(event)
    assert "999-not-a-phone" not in str(info.value) and info.value.code == "e.cmd.noti.add.badtarget"
