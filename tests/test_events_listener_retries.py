"""A listener's retry policy (``-retries N -backoff S``), with the processor run in the test
thread: bad policies refused, a failing listener run again in a re-queued step of its event
(the events behind it keep their order), giving up with a dead letter, the waiting state."""

from __future__ import annotations

import json
from typing import Any

import pytest

from noti.events import Events, EventStatus, add_listener
from tests.conftest import ADMIN
from tests.test_events import PAID, SMS, code_of, make, run
from tests.test_events_tasks import SEEN, attempts_key

pytestmark = pytest.mark.bounds


def test_bad_retry_policies_are_refused_with_codes_and_nothing_stored(rt: Any) -> None:
    api, _ = make(rt)
    bad = {
        "e.noti.listener.badretries": [
            {"retries": -1},
            {"retries": 21},
            {"retries": 10**30},
            {"retries": 1.5},
            {"retries": True},
            {"retries": "3x"},
            {"retries": None},
        ],
        "e.noti.listener.badbackoff": [
            {"retries": 1, "backoff": -0.5},
            {"retries": 1, "backoff": 86_401},
            {"retries": 1, "backoff": float("nan")},
            {"retries": 1, "backoff": float("inf")},
            {"retries": 1, "backoff": "soon"},
            {"retries": 1, "backoff": "1e400"},
            {"retries": 1, "backoff": True},
            {"backoff": 2},  # a back-off without retries
        ],
    }
    for code, policies in bad.items():
        for policy in policies:
            assert code_of(lambda p=policy: api.add_listener("order.*", "tests.events.echo", **p)) == code, (
                policy
            )
    assert rt.redis.hlen(rt.keys.listeners) == 0 and not rt.redis.exists(rt.keys.listeners_version)
    # and from the CLI, with the code first on standard error
    for args, code in (
        (("-retries", "-1"), "e.noti.listener.badretries"),
        (("-retries", "many"), "e.noti.listener.badretries"),
        (("-retries", "3", "-backoff", "-2"), "e.noti.listener.badbackoff"),
        (("-retries", "3", "-backoff", "nan"), "e.noti.listener.badbackoff"),
        (("-retries", "3", "-backoff", "99999999"), "e.noti.listener.badbackoff"),
    ):
        out = run("listener", "add", "order.*", "-task", "tests.events.echo", *args)
        assert out.exit_code == 1 and out.stderr.startswith(f"{code}: "), (args, out.output)
    assert rt.redis.hlen(rt.keys.listeners) == 0


def test_the_cli_and_the_api_store_the_policy(rt: Any) -> None:
    out = run(
        "listener", "add", "order.*", "-name", "flaky", "-task", "tests.events.echo", "-retries", "3",
        "-backoff", "2.5", "-json",
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    assert (json.loads(out.stdout)["retries"], json.loads(out.stdout)["backoff_s"]) == (3, 2.5)
    added = add_listener("order.*", "tests.events.echo", name="api", retries=2, backoff=0.25)
    plain = add_listener("order.*", "tests.events.echo", name="plain")
    listed = {x.name: (x.retries, x.backoff_s) for x in Events(rt).list_listeners(user=ADMIN)}
    assert listed == {"flaky": (3, 2.5), "api": (2, 0.25), "plain": (0, 0.0)}
    assert (added.retries, plain.retries) == (2, 0)


def test_a_listener_that_fails_twice_then_succeeds_runs_again_after_the_events_behind_it(rt: Any) -> None:
    # given, in order, a notification listener, a flaky task with 3 retries, and a recorder
    api, _ = make(rt)
    add_listener("order.*", SMS, name="a-sms")
    add_listener("order.*", "tests.events.fail_times", name="b-flaky", retries=3)
    add_listener("order.*", "tests.events.record_order", name="c-order")
    first = api.dispatch("order.paid", {**PAID, "fail": 2})
    second = api.dispatch("order.paid", PAID)
    third = api.dispatch("order.paid", PAID)
    # when one processor runs (a back-off of 0: each retry step is queued at once, at the end)
    report = api.processor().run()
    # then the flaky listener ran three times, the others once, and the event is done, ok
    event = api.get(first)
    assert event.status is EventStatus.DONE and not event.failed and event.waits == 2
    a, b, c = event.outcomes
    assert (b.result, b.attempts, a.attempts, c.attempts) == (3, 3, None, None)
    assert rt.redis.get(attempts_key(first)) == "3"
    assert rt.store.count() == 3  # one SMS per event: a-sms was not run again
    # and the events behind it kept their order; its later listener ran after its retries
    seen = [x.split(":")[0] for x in rt.redis.lrange(SEEN, 0, -1)]
    assert seen == [second, second, third, third, first, first]  # b-flaky's, then c-order's
    assert [int(api.get(i).outcomes[2].result) for i in (second, third, first)] == [1, 2, 3]
    assert report.processed == 3 and api.store.counts().backoff == 0
    # nothing of the retry steps is left on the event
    fields = rt.redis.hkeys(rt.keys.event(first))
    assert not [f for f in fields if f[:2] in ("o:", "a:")] and "retry" not in fields


def test_a_listener_that_exhausts_its_retries_gives_up_with_its_error_and_a_dead_letter(rt: Any) -> None:
    api, _ = make(rt)
    add_listener("order.*", "tests.events.explode", name="a-boom", retries=2)
    add_listener("order.*", "tests.events.echo", name="b-echo")
    event_id = api.dispatch("order.paid", PAID)
    api.processor().run()
    event = api.get(event_id)
    boom, echo = event.outcomes
    assert event.status is EventStatus.DONE and event.error_code == "e.noti.event.task.failed"
    assert boom.attempts == 3 and boom.error_message.endswith("(gave up after 3 attempts)")
    assert not echo.failed and event.waits == 2
    [letter] = rt.dead_letters.entries()
    assert (letter.record_id, letter.target, letter.attempts, letter.error_class, letter.source) == (
        event_id, "a-boom", 3, "exhausted", "events",
    )  # fmt: skip
    assert letter.errmsg.startswith("e.noti.event.task.failed: listener 'a-boom'")
    assert json.loads(letter.payload) == PAID
    # a retry of the event runs it again (with its full policy) and takes its dead letter away
    api.retry(event_id)
    assert rt.dead_letters.entries() == []
    api.processor().run()
    assert api.get(event_id).outcomes[0].attempts == 3 and len(rt.dead_letters.entries()) == 1


def test_a_retry_waiting_for_its_back_off_holds_no_queue_and_is_queued_once_due(rt: Any) -> None:
    # given a listener with a long back-off that fails once, and an event behind it
    api, _ = make(rt)
    add_listener("order.*", "tests.events.fail_times", name="flaky", retries=1, backoff=3600)
    waiting = api.dispatch("order.paid", {**PAID, "fail": 1})
    behind = api.dispatch("order.paid", PAID)
    report = api.processor().run()
    # then the event behind it is done, and the first one waits, out of the arrival queue
    assert report.reason.value == "idle" and report.processed == 1
    assert api.get(behind).status is EventStatus.DONE
    event = api.get(waiting)
    assert event.status is EventStatus.NEW and event.retry is not None
    assert (event.retry["listener"], event.retry["attempts"], event.retry["retries"]) == ("flaky", 1, 1)
    assert event.retry["error_code"] == "e.noti.event.task.failed" and event.tries == 0
    assert rt.redis.llen(rt.keys.event_queue) == 0 and api.store.counts().backoff == 1
    assert not api.sweep()  # not due: no processor is queued for it
    shown = run("event", "show", waiting, user=ADMIN)
    assert "retry      listener flaky failed 1 of 2 attempts (e.noti.event.task.failed" in shown.stdout
    assert code_of(lambda: api.retry(waiting)) == "e.noti.event.retry.notdone"
    # when its back-off has passed (as if an hour went by), the sweep queues a processor
    rt.redis.zadd(rt.keys.event_backoff, {waiting: 1})
    api2, starts = make(rt)
    assert api2.sweep() and starts == [1]
    api.processor().run()
    event = api.get(waiting)
    assert event.status is EventStatus.DONE and not event.failed and event.outcomes[0].attempts == 2
    assert event.retry is None and api.store.counts().backoff == 0
