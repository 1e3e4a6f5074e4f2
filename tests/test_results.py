"""Celery results read from noti's records (noti.celery.backend): `.delay(...).get()` returns the
record id or raises noti's error, and `AsyncResult(record_id)` follows the record through
PENDING, STARTED, RETRY, SUCCESS, FAILURE and REVOKED. Real Redis, a real worker."""

from __future__ import annotations

import json
from typing import Any

import pytest
from celery import states
from celery.app.task import Context
from celery.exceptions import TaskRevokedError

import noti
from noti.celery.app import app
from noti.celery.backend import RecordBackend
from noti.core.record import Status
from noti.errors import InvalidInput, PermanentFailure, RetriesExhausted, TemporaryFailure
from tests.conftest import ADMIN, wait_until

pytestmark = pytest.mark.integration

PHONE = "+8613912345678"


def intake() -> Any:
    """``noti.tasks.notify``, imported when a test runs (a task proxy at module level would
    configure the app during pytest's collection, before the test settings are in place)."""
    from noti.tasks import notify

    return notify


def state_of(record_id: str) -> str:
    return str(app.AsyncResult(record_id).state)


def test_the_app_reads_results_from_the_records(rt: Any) -> None:
    assert isinstance(app.backend, RecordBackend)
    assert intake().ignore_result is False
    assert app.tasks["noti.maintenance.clean"].ignore_result is True


def test_delay_get_returns_the_record_id_and_writes_nothing_extra(rt: Any, worker: Any) -> None:
    # when an application calls the task and waits for its result
    result = intake().delay(type="sms", target=PHONE, text="your code is 1234", user=ADMIN)
    record_id = result.get(timeout=10)
    # then it is the id of the stored record, and the state says so
    assert rt.store.get(record_id).fields == {"text": "your code is 1234"}
    assert result.state == states.SUCCESS and result.result == record_id
    # and the only key naming the task is the idempotency key the record was created with
    assert rt.redis.get(rt.keys.task(result.id)) == record_id
    assert sorted(rt.redis.scan_iter(f"*{result.id}*")) == [rt.keys.task(result.id)]
    assert not any(rt.redis.scan_iter("celery-task-meta-*"))


def test_a_redelivered_task_answers_with_the_one_record(rt: Any, worker: Any) -> None:
    for _ in range(2):
        app.send_task(
            "noti.notify",
            kwargs={"type": "sms", "target": PHONE, "text": "once"},
            queue="noti.intake",
            task_id="the-same-task",
        )
    record_id = app.AsyncResult("the-same-task").get(timeout=10)
    wait_until(lambda: rt.redis.hlen("unacked") == 0 and not rt.redis.llen("noti.intake"))
    assert rt.store.count() == 1 and rt.store.get(record_id).status in (Status.WAITING, Status.DONE)


def test_bad_input_raises_invalid_input_with_its_code(rt: Any, worker: Any) -> None:
    # when the task is called with a target that is not a phone number
    result = intake().delay(type="sms", target="not-a-phone", text="x")
    # then get() raises noti's own InvalidInput, its code in the message, and nothing is stored
    with pytest.raises(InvalidInput) as info:
        result.get(timeout=10)
    assert info.value.code == "e.cmd.noti.add.badtarget"
    assert str(info.value).startswith("e.cmd.noti.add.badtarget: ")
    assert result.state == states.FAILURE
    assert rt.store.count() == 0
    # the failure is kept once, with Celery's result time-to-live
    key = rt.keys.task_failure(result.id)
    assert 0 < rt.redis.ttl(key) <= app.conf.result_expires.total_seconds()
    assert json.loads(rt.redis.get(key))["result"]["exc_module"] == "noti.errors"


def test_an_intake_task_not_run_yet_is_pending(rt: Any) -> None:
    result = intake().delay(type="sms", target=PHONE, text="later")
    assert result.state == states.PENDING
    assert app.AsyncResult("no-such-task").state == states.PENDING


def test_a_delivered_record_is_success_with_provider_and_msgid(rt: Any, worker: Any) -> None:
    record_id = noti.notify_sms(PHONE, "delivered")
    wait_until(lambda: state_of(record_id) == states.SUCCESS)
    record = rt.store.get(record_id)
    expected = {
        "id": record_id,
        "provider": "sandbox",
        "msgid": f"sandbox-{record_id}",
        "delivery": "delivered",  # the sandbox's answer is the delivery (no receipt awaited)
        "delivery_at": record.delivery_ms,
    }
    result = app.AsyncResult(record_id)
    assert result.get(timeout=10) == expected
    assert abs(result.date_done.timestamp() * 1000 - rt.store.get(record_id).modified_ms) < 1


def test_a_waiting_record_is_pending_until_it_is_attempted(rt: Any) -> None:
    # a record waiting for its time (its lease field holds the due time, but no sender holds it)
    record_id = noti.notify_sms(PHONE, "in a minute", delay=60)
    assert state_of(record_id) == states.PENDING
    # a record just queued
    assert state_of(noti.notify_sms(PHONE, "now")) == states.PENDING


def test_a_leased_record_is_started(rt: Any) -> None:
    record = noti.api.notifier().build("sms", PHONE, text="being sent")
    rt.store.create(record)
    rt.store.claim(record.id, owner="a-sender", lease_ms=60_000)
    assert state_of(record.id) == states.STARTED


def test_a_record_backing_off_after_a_failed_attempt_is_retry(configure: Any, worker: Any) -> None:
    rt = configure(providers={"flaky": {"kind": "sandbox", "fail_first": 1}}, retry_seconds=3600)
    record_id = noti.notify_sms(PHONE, "again later", provider="flaky")
    wait_until(lambda: rt.store.get(record_id).retry == 1)
    result = app.AsyncResult(record_id)
    assert result.state == states.RETRY
    assert isinstance(result.info, TemporaryFailure) and "sandbox flaky refused" in str(result.info)


def test_a_record_out_of_retries_is_failure_with_retries_exhausted(configure: Any, worker: Any) -> None:
    rt = configure(providers={"down": {"kind": "sandbox", "fail": "always"}}, retry_seconds=0.1, retry_max=2)
    record_id = noti.notify_sms(PHONE, "never", provider="down")
    wait_until(lambda: rt.store.get(record_id).status is Status.FAILED)
    result = app.AsyncResult(record_id)
    assert result.state == states.FAILURE
    with pytest.raises(RetriesExhausted) as info:
        result.get(timeout=10)
    assert str(info.value).startswith("e.cmd.noti.send.reachMaxRetry: after 2 attempts")


def test_an_invalid_record_is_failure_then_revoked_once_marked(configure: Any, worker: Any) -> None:
    rt = configure(providers={"reject": {"kind": "sandbox", "fail": "always", "error": "permanent"}})
    record_id = noti.notify_sms(PHONE, "bad", provider="reject")
    wait_until(lambda: rt.store.get(record_id).status is Status.INVALID)
    with pytest.raises(PermanentFailure) as info:
        app.AsyncResult(record_id).get(timeout=10)
    assert info.value.code == "e.noti.delivery.permanent" and "sandbox reject refused" in str(info.value)
    # when the record is marked revoked (as the revocation change will mark it)
    rt.redis.hset(rt.keys.record(record_id), "noti_revoked_at", "1700000000000")
    # then its task is REVOKED
    result = app.AsyncResult(record_id)
    assert result.state == states.REVOKED
    with pytest.raises(TaskRevokedError):
        result.get(timeout=10)


def test_results_of_records_are_never_written(rt: Any) -> None:
    # the worker's own bookkeeping (mark_as_done / mark_as_failure) for a record id writes nothing
    record_id = noti.notify_sms(PHONE, "x")
    before = sorted(rt.redis.scan_iter("*"))
    request = Context(task="noti.deliver", id=record_id, ignore_result=False)
    app.backend.mark_as_done(record_id, "OK", request=request)
    app.backend.mark_as_failure(record_id, RuntimeError("x"), request=request)
    assert sorted(rt.redis.scan_iter("*")) == before
    assert state_of(record_id) == states.PENDING
    # a revoke (the worker's revoke command calls it for a waiting task) revokes the record
    app.backend.mark_as_revoked(record_id, "revoked")
    assert state_of(record_id) == states.REVOKED and rt.store.get(record_id).revoked_ms


def test_a_celery_worker_process_answers_get_and_failures(rt: Any, spawn_worker: Any) -> None:
    # given a real `celery -A noti worker` subprocess
    spawn_worker("", "-P", "solo")
    # then a good call returns its record id and a bad one raises InvalidInput with its code
    record_id = intake().delay(type="sms", target=PHONE, text="from a process").get(timeout=20)
    assert rt.store.get(record_id).fields == {"text": "from a process"}
    with pytest.raises(InvalidInput) as info:
        intake().delay(type="sms", target=PHONE, text="x", lv="high").get(timeout=20)
    assert info.value.code == "e.cmd.noti.add.badlv"
