"""Celery's own tools see each notification as one task whose id is its record id, in the
default (batch) worker mode: Flower's events and state machine, ``inspect``, ``revoke``,
``rate_limit`` and the task signals. Real Redis, a real in-process worker."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from celery import signals, states
from celery.events.state import State

import noti
from noti.celery.app import app
from noti.core.record import Status
from tests.conftest import sandbox_outbox, wait_until
from tests.event_capture import captured_events

pytestmark = [pytest.mark.integration, pytest.mark.slow]  # each waits seconds on a worker

PHONE = "+8613912345678"
FINAL = (Status.DONE, Status.FAILED, Status.INVALID)


def task_events() -> Any:
    """Every event the workers send while the block runs (as Flower receives them), with
    the worker's last buffered events (it publishes them every 0.1 s)."""
    return captured_events(app, settle_s=0.5)


def _tasks(seen: list[dict[str, Any]]) -> State:
    state = State()
    for event in seen:
        state.event(event)
    return state


def _received(seen: list[dict[str, Any]]) -> Counter[str]:
    return Counter(e["uuid"] for e in seen if e["type"] == "task-received")


def _final(rt: Any, ids: list[str]) -> bool:
    return all(rt.store.get(i).status in FINAL for i in ids)


def test_flower_sees_each_notification_with_its_true_outcome(configure: Any, start_worker_now: Any) -> None:
    # given providers that deliver, refuse for good, fail once, and always fail for a while
    rt = configure(
        providers={
            "reject": {"kind": "sandbox", "fail": "always", "error": "permanent"},
            "flaky": {"kind": "sandbox", "fail_first": 1},
            "down": {"kind": "sandbox", "fail": "always"},
        },
        retry_seconds=0.2,
        retry_max=2,
    )
    # when one notification goes to each through a running worker
    with task_events() as seen, start_worker_now():
        ok = noti.notify_sms(PHONE, "ok")
        bad = noti.notify_sms(PHONE, "bad", provider="reject")
        flaky = noti.notify_sms(PHONE, "flaky", provider="flaky")
        down = noti.notify_sms(PHONE, "down", provider="down")
        ids = [ok, bad, flaky, down]
        wait_until(lambda: _final(rt, ids), timeout=30)
        wait_until(
            lambda: {e["uuid"] for e in seen if e["type"] in ("task-succeeded", "task-failed")} >= set(ids)
        )
    # then Celery's event state machine (Flower's) shows each under its record id, truthfully
    tasks = _tasks(seen).tasks
    assert tasks[ok].state == states.SUCCESS and tasks[ok].name == "noti.deliver"
    assert json.loads(tasks[ok].result) == {
        "id": ok,
        "provider": "sandbox",
        "msgid": f"sandbox-{ok}",
        "delivery": "delivered",
    }
    assert tasks[bad].state == states.FAILURE
    assert "PermanentFailure" in tasks[bad].exception and "e.noti.delivery.permanent" in tasks[bad].exception
    assert tasks[flaky].state == states.SUCCESS and tasks[flaky].retried and tasks[flaky].retries == 1
    assert tasks[down].state == states.FAILURE and "e.cmd.noti.send.reachMaxRetry" in tasks[down].exception
    # and Processed (task-received) counts the attempts the record store counts
    received = _received(seen)
    assert received[ok] == 1 and received[bad] == 1 and received[flaky] == 2
    assert received[down] == rt.store.get(down).retry == 2
    types = Counter(e["type"] for e in seen if e.get("uuid") in ids)
    assert types["task-succeeded"] == 2 and types["task-failed"] == 2 and types["task-retried"] == 2
    assert types["task-started"] == types["task-received"] == 6


def test_task_signals_fire_per_notification_with_its_request(configure: Any, start_worker_now: Any) -> None:
    rt = configure(
        providers={
            "reject": {"kind": "sandbox", "fail": "always", "error": "permanent"},
            "flaky": {"kind": "sandbox", "fail_first": 1},
        },
        retry_seconds=0.2,
    )
    fired: list[tuple[str, str | None, str | None]] = []

    def receiver(name: str) -> Callable[..., None]:
        def on_signal(sender: Any = None, **kwargs: Any) -> None:
            task_id = kwargs.get("task_id") or getattr(kwargs.get("request"), "id", None)
            fired.append((name, task_id, sender.request.id))

        return on_signal

    handlers = {
        signal: receiver(name)
        for name, signal in {
            "prerun": signals.task_prerun,
            "success": signals.task_success,
            "failure": signals.task_failure,
            "retry": signals.task_retry,
            "revoked": signals.task_revoked,
            "postrun": signals.task_postrun,
        }.items()
    }
    for signal, handler in handlers.items():
        signal.connect(handler, weak=False)
    try:
        with start_worker_now():
            ok = noti.notify_sms(PHONE, "ok")
            bad = noti.notify_sms(PHONE, "bad", provider="reject")
            flaky = noti.notify_sms(PHONE, "flaky", provider="flaky")
            later = noti.notify_sms(PHONE, "later", delay=30)
            wait_until(lambda: app.control.revoke(later, reply=True, timeout=1), timeout=10)
            wait_until(lambda: _final(rt, [ok, bad, flaky, later]) and len(fired) >= 13, timeout=20)
    finally:
        for signal, handler in handlers.items():
            signal.disconnect(handler)
    mine = [f for f in fired if f[2] in (ok, bad, flaky, later)]

    def run(record: str, outcome: str) -> list[tuple[str, str | None, str]]:
        """One run of the record's task: prerun, its outcome (task_success's has no task id),
        postrun."""
        task_id = None if outcome == "success" else record
        return [("prerun", record, record), (outcome, task_id, record), ("postrun", record, record)]

    expected = [*run(ok, "success"), *run(bad, "failure"), *run(flaky, "retry"), *run(flaky, "success")]
    assert sorted(mine) == sorted([*expected, ("revoked", later, later)])


def test_inspect_lists_notifications_in_flight_and_counts_them(configure: Any, start_worker_now: Any) -> None:
    # given sends that take 15 s each at the provider: longer than the tests' visibility timeout
    # (4 s), so their messages are also delivered again meanwhile (duplicates must not hide them)
    rt = configure(
        providers={"slow": {"kind": "sandbox", "delay_ms": 15000}}, channels={"sms": {"provider": "slow"}}
    )
    with start_worker_now() as worker:
        ids = [noti.notify_sms(PHONE, f"slow {i}") for i in range(3)]
        # this worker only: an answer comes back as soon as it replies
        inspect = app.control.inspect(destination=[worker.hostname], limit=1, timeout=5)

        def in_flight() -> bool:
            active = {t["id"] for ts in (inspect.active() or {}).values() for t in ts}
            found = {
                i: info[0]
                for answer in (inspect.query_task(*ids) or {}).values()
                for i, info in answer.items()
            }
            return active >= set(ids) and found == dict.fromkeys(ids, "active")

        # when the sends are in flight, then inspect active and query_task name them by record id
        assert wait_until(in_flight, timeout=9)
        time.sleep(6)  # past the visibility timeout: the duplicates have come and gone
        assert wait_until(in_flight, timeout=5)  # a reply can be slow on a busy machine
        wait_until(lambda: _final(rt, ids), timeout=40)
        stats = inspect.stats() or {}
        assert sum(s["total"].get("noti.deliver", 0) for s in stats.values()) >= 3
        assert not [t for ts in (inspect.active() or {}).values() for t in ts]


def test_a_revoked_notification_is_never_sent(configure: Any, start_worker_now: Any) -> None:
    rt = configure()
    with task_events() as seen, start_worker_now():
        # given a notification due in 1.5 s, and one sent now
        later = noti.notify_sms(PHONE, "revoke me", delay=1.5)
        # when Celery's revoke names its record id before it is due (a broadcast: repeated
        # until the worker, just started, answers)
        wait_until(lambda: app.control.revoke(later, reply=True, timeout=1), timeout=10)
        now = noti.notify_sms(PHONE, "keep me")
        # then it is revoked on its record, never sent, and Flower shows it revoked
        wait_until(lambda: rt.store.get(later).status is Status.INVALID, timeout=15)
        wait_until(lambda: rt.store.get(now).status is Status.DONE, timeout=15)
        time.sleep(2)  # past its time: the pump must not queue it again
    record = rt.store.get(later)
    assert record.revoked_ms and record.errmsg.startswith("e.cmd.noti.revoked")
    assert [e["fields"]["text"] for e in sandbox_outbox(rt)] == ["keep me"]
    tasks = _tasks(seen).tasks
    assert tasks[later].state == states.REVOKED and tasks[now].state == states.SUCCESS
    assert rt.redis.zscore(rt.keys.delayed, later) is None


def test_celery_rate_limit_is_honoured_by_the_batch_worker(configure: Any, start_worker_now: Any) -> None:
    rt = configure()
    with start_worker_now():
        # given a rate limit of 5 sends a second set with Celery's own control command
        replies = wait_until(lambda: app.control.rate_limit("noti.deliver", "5/s", reply=True, timeout=1))
        assert all("ok" in next(iter(r.values())) for r in replies)
        try:
            # when 10 notifications are queued at once
            ids = [noti.notify_sms(PHONE, f"limited {i}") for i in range(10)]
            wait_until(lambda: _final(rt, ids), timeout=30)
        finally:
            app.control.rate_limit("noti.deliver", None, reply=True, timeout=2)
    # then they went out at that pace: 10 sends at 5/s span at least ~1.8 s
    sent_at = sorted(e["t"] for e in sandbox_outbox(rt))
    assert len(sent_at) == 10 and sent_at[-1] - sent_at[0] >= 1.5


@pytest.mark.parametrize("mode", ["task"])
def test_task_mode_reports_the_same_truth(configure: Any, start_worker_now: Any, mode: str) -> None:
    rt = configure(
        delivery_mode=mode,
        providers={"reject": {"kind": "sandbox", "fail": "always", "error": "permanent"}},
    )
    with task_events() as seen, start_worker_now():
        ok = noti.notify_sms(PHONE, "ok")
        bad = noti.notify_sms(PHONE, "bad", provider="reject")
        wait_until(lambda: _final(rt, [ok, bad]), timeout=20)
        wait_until(
            lambda: {e["uuid"] for e in seen if e["type"] in ("task-succeeded", "task-failed")} >= {ok, bad}
        )
    tasks = _tasks(seen).tasks
    assert tasks[ok].state == states.SUCCESS and "sandbox" in tasks[ok].result
    assert tasks[bad].state == states.FAILURE and "PermanentFailure" in tasks[bad].exception


def test_publish_signals_fire_for_what_notify_and_notify_many_queue(rt: Any) -> None:
    before: list[dict[str, Any]] = []
    after: list[dict[str, Any]] = []

    def on_before(sender: Any = None, headers: Any = None, **kwargs: Any) -> None:
        headers["traceparent"] = f"00-{headers['id']}-01"  # what a tracing integration does
        before.append({"sender": sender, "id": headers["id"], "routing_key": kwargs["routing_key"]})

    def on_after(sender: Any = None, headers: Any = None, **kwargs: Any) -> None:
        after.append({"sender": sender, "id": headers["id"], "body": kwargs["body"]})

    signals.before_task_publish.connect(on_before, weak=False)
    signals.after_task_publish.connect(on_after, weak=False)
    try:
        one = noti.notify_sms(PHONE, "one")
        many = noti.notify_many([{"type": "sms", "to": PHONE, "text": f"m{i}"} for i in range(3)]).ids
        noti.notify_sms(PHONE, "again", idempotency_key="k1")
        noti.notify_sms(PHONE, "again", idempotency_key="k1")  # stores and publishes nothing
        later = noti.notify_sms(PHONE, "later", delay=60)  # published by the pump when due, not now
    finally:
        signals.before_task_publish.disconnect(on_before)
        signals.after_task_publish.disconnect(on_after)
    ids = [one, *many]
    assert [b["id"] for b in before[:4]] == ids and all(b["sender"] == "noti.deliver" for b in before)
    assert {b["routing_key"] for b in before} == {"noti.sms"}
    assert [a["id"] for a in after[:4]] == ids and after[0]["body"][0] == [one]
    assert len(after) == 5 and later not in {a["id"] for a in after}
    # the receiver's header went out with the message
    [payload] = [p for p in rt.redis.lrange("noti.sms:9", 0, -1) if one in p]
    assert json.loads(payload)["headers"]["traceparent"] == f"00-{one}-01"


def test_inspect_scheduled_lists_delayed_notifications_once(rt: Any, spawn_worker: Any) -> None:
    # given two workers (one holds the pump lock) and notifications due later
    spawn_worker("", name="a")
    spawn_worker("", name="b")
    later = [noti.notify_sms(PHONE, f"later {i}", delay=60 + i) for i in range(3)]
    inspect = app.control.inspect(timeout=2)

    def listed() -> list[dict[str, Any]]:
        return [entry for entries in (inspect.scheduled() or {}).values() for entry in entries]

    # then inspect scheduled lists each once, soonest first, under its record id
    entries = wait_until(lambda: len(listed()) == 3 and listed(), timeout=20)
    assert [e["request"]["id"] for e in entries] == later
    assert all(e["request"]["name"] == "noti.deliver" and e["eta"] for e in entries)
    # and stats count them on the pump's worker
    stats = inspect.stats() or {}
    assert sorted(s["noti"].get("delayed", -1) for s in stats.values()) == [-1, 3]
