"""NOTI_HANDLERS: application hooks (retry decider, on_success / on_retry / on_failure /
on_dead_letter) run by a real worker around each delivery."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import noti
from noti.core.record import Status
from noti.errors import InvalidConfig
from tests import handlers_example
from tests.conftest import sandbox_outbox, wait_until

pytestmark = pytest.mark.integration

PHONE = "+8613912345678"
HANDLERS = "tests.handlers_example:"
DOWN = {"kind": "sandbox", "fail": "always"}  # fails temporarily, every time
#: Sandbox providers: ``flaky`` fails once and then delivers, ``down`` never does.
FLAKY_AND_DOWN = {"flaky": {"kind": "sandbox", "fail_first": 1}, "down": DOWN}


@pytest.fixture(autouse=True)
def calls() -> Iterator[list[tuple[Any, ...]]]:
    handlers_example.CALLS.clear()
    yield handlers_example.CALLS
    handlers_example.CALLS.clear()


def test_an_sms_that_dead_letters_is_sent_by_email(
    configure: Any, start_worker_now: Any, calls: list[Any]
) -> None:
    # given SMS that always fail temporarily (2 attempts), and a handler that falls back to e-mail
    rt = configure(
        handlers=HANDLERS + "EmailWhenSmsDeadLetters",
        providers={"down": DOWN},
        retry_seconds=0.05,
        retry_max=2,
    )
    with start_worker_now():
        # when one SMS is delivered and one dead-letters
        ok = noti.notify_sms(PHONE, "all good")
        lost = noti.notify_sms(PHONE, "Your code is 4321", provider="down")
        wait_until(lambda: [e["type"] for e in sandbox_outbox(rt)] == ["sms", "email"], timeout=20)
    # then the same text went out by e-mail, and each hook saw its outcome once
    email = sandbox_outbox(rt)[1]
    assert email["target"] == "li.lei@example.com" and email["fields"]["text"] == "Your code is 4321"
    assert rt.store.get(lost).status is Status.FAILED
    assert ("success", ok, "sandbox", f"sandbox-{ok}") in calls
    assert [c[:3] for c in calls if c[1] == lost] == [
        ("retry", lost, "TemporaryFailure"),
        ("failure", lost, "RetriesExhausted"),
        ("dead_letter", lost, "exhausted"),
    ]


def test_the_retry_decider_sets_the_wait_and_can_stop(
    configure: Any, start_worker_now: Any, calls: list[Any]
) -> None:
    # given a policy that would wait a minute between 5 attempts
    rt = configure(
        handlers=HANDLERS + "RetryQuicklyThenStop",
        providers=FLAKY_AND_DOWN,
        retry_seconds=60,
        retry_max=5,
    )
    with start_worker_now():
        flaky = noti.notify_sms(PHONE, "second time lucky", provider="flaky")
        down = noti.notify_sms(PHONE, "never", provider="down")
        # then the retry comes 0.05 s later, not 60 s, and the decider stops the other at its second failure
        wait_until(lambda: rt.store.get(flaky).status is Status.DONE, timeout=15)
        wait_until(lambda: rt.store.get(down).status is Status.FAILED, timeout=15)
    record = rt.store.get(down)
    assert record.retry == 2 and "stopped by the handler" in record.errmsg
    assert record.errmsg.startswith("e.cmd.noti.send.reachMaxRetry")
    assert ("decide", flaky, 1) in calls and ("decide", down, 2) in calls


def test_a_failing_handler_is_logged_and_loses_nothing(
    configure: Any, start_worker_now: Any, caplog: pytest.LogCaptureFixture
) -> None:
    rt = configure(handlers=HANDLERS + "Broken", providers=FLAKY_AND_DOWN, retry_seconds=0.05, retry_max=2)
    with start_worker_now():
        ids = [noti.notify_sms(PHONE, "ok"), noti.notify_sms(PHONE, "flaky", provider="flaky")]
        down = noti.notify_sms(PHONE, "down", provider="down")
        wait_until(lambda: all(rt.store.get(i).status is Status.DONE for i in ids), timeout=15)
        wait_until(lambda: rt.store.get(down).status is Status.FAILED, timeout=15)
    assert len(sandbox_outbox(rt)) + len(sandbox_outbox(rt, "flaky")) == 2
    assert len(rt.dead_letters.entries()) == 1
    assert "on_success failed" in caplog.text and "decide_retry failed" in caplog.text
    assert "on_dead_letter failed" in caplog.text


@pytest.mark.parametrize(
    ("path", "message"),
    [
        (HANDLERS + "NotAHandler", "is not a subclass of noti.NotificationHandler"),
        (HANDLERS + "Missing", "cannot be loaded"),
        ("no_such_module:Handlers", "cannot be loaded"),
        ("nocolon", "must look like"),
    ],
)
def test_a_bad_handlers_setting_is_refused_with_its_name(configure: Any, path: str, message: str) -> None:
    rt = configure(handlers=path)
    with pytest.raises(InvalidConfig, match=message) as raised:
        _ = rt.handler
    assert "NOTI_HANDLERS" in str(raised.value)


@pytest.mark.slow
def test_a_worker_with_a_bad_handlers_setting_does_not_start(rt: Any, tmp_path: Any) -> None:
    from tests.conftest import BASE_ENV, WorkerProcess

    env = {**__import__("os").environ, **BASE_ENV, "NOTI_HANDLERS": HANDLERS + "NotAHandler"}
    worker = WorkerProcess(env, name="badhandlers")
    try:
        wait_until(lambda: not worker.alive(), timeout=60)
    finally:
        worker.stop()
    assert "NOTI_HANDLERS" in worker.output() and "NotificationHandler" in worker.output()
