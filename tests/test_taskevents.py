"""The batch worker's task events (noti.celery.taskevents) are Celery's own, field for field:
what Celery's EventDispatcher.send would have built, received by Celery's EventReceiver (as
Flower receives them) from a real Redis. Switched off and on by remote control at once, kept
while the broker is away, and never lost at a consumer restart."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from typing import Any

import pytest
from celery import Celery

from noti.celery import taskevents
from noti.celery.taskevents import TaskEvents
from tests.conftest import wait_until
from tests.event_capture import captured_events

pytestmark = pytest.mark.integration


class _Task:
    send_events = True


@pytest.fixture
def celery_app(redis_url: str) -> Celery:
    return Celery("taskevents-test", broker=redis_url, set_as_current=False)


@pytest.fixture
def dispatcher(celery_app: Celery) -> Iterator[Any]:
    with celery_app.connection_for_write() as conn:
        d = celery_app.events.Dispatcher(
            conn, hostname="celery@test-host", buffer_group=["task"], enabled=True
        )
        yield d
        d.close()


def _received(celery_app: Celery, publish: Any, count: int) -> list[dict[str, Any]]:
    """The events a real EventReceiver gets while ``publish()`` runs."""
    with captured_events(celery_app) as seen:
        publish()
        wait_until(lambda: len(seen) >= count, timeout=10)
    return list(seen)


def _celery_built(dispatcher: Any, kind: str, **fields: Any) -> dict[str, Any]:
    """The event Celery's dispatcher builds for ``send(kind, **fields)``, from its buffer."""
    dispatcher.send(kind, **fields)
    event: dict[str, Any] = dispatcher._group_buffer["task"].pop()
    return event


def _comparable(event: dict[str, Any]) -> dict[str, Any]:
    """An event without what differs between any two sends (the clock, the time, and what
    the receiver adds)."""
    return {k: v for k, v in event.items() if k not in ("clock", "timestamp", "local_received")}


def test_the_events_are_celerys_field_for_field(celery_app: Celery, dispatcher: Any) -> None:
    # given the events of a notification's three outcomes, written by TaskEvents
    events = TaskEvents(dispatcher, _Task())
    now = time.time()
    task = "01m8frm1krdtjc6kkt7ye2r2t8"
    odd = 'ünïcode "quoted" \\ back\nline'  # what a foreign task id or repr may hold
    events.started(now, task, "noti.deliver", f"['{task}']", "{}", task, None, 0)
    events.started(now, odd, "noti.deliver", odd, "{'k': 1}", "root", "parent", 3)
    events.succeeded(now, task, json.dumps({"id": task, "msgid": "m"}), 0.0123)
    events.add("task-retried", now, (("uuid", task), ("exception", odd), ("traceback", "")))
    events.add("task-failed", now, (("uuid", task), ("exception", "PermanentFailure()"), ("traceback", "")))
    revoked = (("uuid", task), ("name", "noti.deliver"), ("args", "[]"), ("kwargs", "{}"))
    events.add("task-revoked", now, (*revoked, ("terminated", False), ("signum", None), ("expired", False)))
    # when they are published and received by Celery's own receiver, as Flower receives them
    got = _received(celery_app, events.publish, 8)

    # then each is what Celery's dispatcher would have sent, in order, with rising clocks
    def received(
        uuid: str, args: str, kwargs: str, root_id: str, parent_id: Any, retries: int
    ) -> dict[str, Any]:
        return {"uuid": uuid, "name": "noti.deliver", "args": args, "kwargs": kwargs, "root_id": root_id,
                "parent_id": parent_id, "retries": retries, "eta": None, "expires": None}  # fmt: skip

    revoked = {"uuid": task, "name": "noti.deliver", "args": "[]", "kwargs": "{}"}
    sends = [
        ("task-received", received(task, f"['{task}']", "{}", task, None, 0)),
        ("task-started", {"uuid": task}),
        ("task-received", received(odd, odd, "{'k': 1}", "root", "parent", 3)),
        ("task-started", {"uuid": odd}),
        (
            "task-succeeded",
            {"uuid": task, "result": json.dumps({"id": task, "msgid": "m"}), "runtime": 0.0123},
        ),
        ("task-retried", {"uuid": task, "exception": odd, "traceback": ""}),
        ("task-failed", {"uuid": task, "exception": "PermanentFailure()", "traceback": ""}),
        ("task-revoked", {**revoked, "terminated": False, "signum": None, "expired": False}),
    ]
    want = [_celery_built(dispatcher, kind, **fields) for kind, fields in sends]
    assert [_comparable(e) for e in got] == [_comparable(e) for e in want]
    assert all(e["timestamp"] == now for e in got)
    clocks = [e["clock"] for e in got]
    assert clocks == sorted(clocks) and len(set(clocks)) == len(clocks)
    assert list(got[0])[:4] == ["hostname", "utcoffset", "pid", "clock"]  # Celery's field order


@pytest.mark.parametrize(
    "value", [0.0123, 1e-7, 1764290000.123456, 2**63, -3, True, None, "\ud800 lone", "\U0001f600", "\x00\x1f"]
)
def test_values_are_written_as_json_writes_them(value: Any) -> None:
    assert taskevents._value(value) == json.dumps(value)


def test_non_finite_numbers_are_written_as_json_writes_them() -> None:
    for value in (math.inf, -math.inf):
        assert taskevents._value(value) == json.dumps(value)
    assert taskevents._value(math.nan) == "NaN"


def test_disabled_events_are_not_written_and_enabled_ones_are(dispatcher: Any) -> None:
    # given a dispatcher that remote control switched off
    events = TaskEvents(dispatcher, _Task())
    dispatcher.disable()
    assert not events.on
    # when it is switched on again, with groups that leave out tasks, then with tasks
    dispatcher.enable()
    dispatcher.groups = {"worker"}
    assert not events.on
    dispatcher.groups = {"worker", "task"}
    # then events are written again
    assert events.on


def test_a_task_that_sends_no_events_writes_none(dispatcher: Any) -> None:
    class Quiet:
        send_events = False

    assert not TaskEvents(dispatcher, Quiet()).on


def test_events_wait_while_the_dispatcher_is_closed_and_go_out_once_it_opens(
    celery_app: Celery, dispatcher: Any
) -> None:
    # given events written, and a dispatcher closed before they are published
    events = TaskEvents(dispatcher, _Task())
    events.started(time.time(), "a", "noti.deliver", "['a']", "{}", "a", None, 0)
    dispatcher.close()
    events.publish()
    # when a restarted consumer's batcher rebinds them to its open dispatcher
    with celery_app.connection_for_write() as conn:
        restarted = celery_app.events.Dispatcher(conn, hostname="celery@test-host", buffer_group=["task"])
        events.rebind(restarted)
        got = _received(celery_app, events.publish, 2)
        restarted.close()
    # then nothing was lost
    assert [e["type"] for e in got] == ["task-received", "task-started"]


def test_while_publishing_fails_only_the_timer_tries_and_then_in_bounded_messages(
    celery_app: Celery, dispatcher: Any, monkeypatch: Any
) -> None:
    # given a broker that refuses publishing, and more events than one message carries
    monkeypatch.setattr(taskevents, "PUBLISH_AT", 4)
    events = TaskEvents(dispatcher, _Task())
    real_publish = dispatcher.producer.publish
    tries: list[int] = []

    def refuse(body: str, **kwargs: Any) -> None:
        tries.append(len(json.loads(body)))
        raise ConnectionError("broker away")

    monkeypatch.setattr(dispatcher.producer, "publish", refuse)
    for task in "abcdef":  # 12 events: the 4th tried once, then no event tries again
        events.started(time.time(), task, "noti.deliver", "[]", "{}", task, None, 0)
    assert tries == [4] and len(events._waiting) == 12
    events.publish()  # the timer's try
    assert tries == [4, 4] and len(events._waiting) == 12
    # when the broker is back
    monkeypatch.setattr(dispatcher.producer, "publish", real_publish)
    got = _received(celery_app, events.publish, 12)
    # then every event went out, oldest first, in messages of at most 4
    assert [e["uuid"] for e in got] == [t for t in "abcdef" for _ in range(2)]
    assert not events._waiting and not events._failing


def test_a_header_no_json_holds_is_written_as_its_text(celery_app: Celery, dispatcher: Any) -> None:
    # given a foreign producer's message whose headers are not text
    events = TaskEvents(dispatcher, _Task())

    class Odd:
        def __repr__(self) -> str:
            return "<odd>"

    events.started(time.time(), "a", "noti.deliver", ["a"], {"k": 1}, Odd(), 7, 0)  # type: ignore[arg-type]
    got = _received(celery_app, events.publish, 2)
    # then its events are written all the same
    assert got[0]["args"] == ["a"] and got[0]["kwargs"] == {"k": 1}
    assert got[0]["root_id"] == "<odd>" and got[0]["parent_id"] == 7


def test_events_that_cannot_be_published_are_kept_for_the_next_try(dispatcher: Any, monkeypatch: Any) -> None:
    # given a broker that refuses the publish
    events = TaskEvents(dispatcher, _Task())
    events.started(time.time(), "a", "noti.deliver", "['a']", "{}", "a", None, 0)

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise ConnectionError("broker away")

    monkeypatch.setattr(dispatcher.producer, "publish", refuse)
    events.publish()
    # then both events wait for the next try, and beyond the bound only the newest stay
    assert len(events._waiting) == 2
    monkeypatch.setattr(taskevents, "KEEP_AT_MOST", 3)
    events.started(time.time(), "b", "noti.deliver", "['b']", "{}", "b", None, 0)
    events.publish()
    assert len(events._waiting) == 3 and '"uuid":"b"' in events._waiting[-1]


def test_many_waiting_events_are_published_before_the_interval(
    celery_app: Celery, dispatcher: Any, monkeypatch: Any
) -> None:
    monkeypatch.setattr(taskevents, "PUBLISH_AT", 4)
    events = TaskEvents(dispatcher, _Task())

    def write() -> None:
        for task in ("a", "b"):
            events.started(time.time(), task, "noti.deliver", "[]", "{}", task, None, 0)

    got = _received(celery_app, write, 4)
    assert [e["uuid"] for e in got] == ["a", "a", "b", "b"] and not events._waiting


def test_a_restarted_consumers_batcher_rebinds_the_processs_events(
    celery_app: Celery, dispatcher: Any, monkeypatch: Any
) -> None:
    # given this process's events, with events of the batcher before the restart waiting
    from noti.celery.tasks import batching

    monkeypatch.setattr(batching, "_task_events", None)
    before = batching._process_task_events(dispatcher, _Task())
    before.started(time.time(), "a", "noti.deliver", "['a']", "{}", "a", None, 0)
    dispatcher.close()  # the old consumer's dispatcher goes with its connection
    with celery_app.connection_for_write() as conn:
        # when the restarted consumer's batcher takes them, on its new dispatcher
        new = celery_app.events.Dispatcher(conn, hostname="celery@test-host", buffer_group=["task"])
        after = batching._process_task_events(new, _Task())
        # then they are the same events (the old batcher's sends in flight still write to
        # them), bound to the new dispatcher, and what waited goes out through it
        assert after is before and after.dispatcher is new
        before.succeeded(time.time(), "a", "{}", 0.1)
        got = _received(celery_app, after.publish, 3)
        new.close()
    assert [e["type"] for e in got] == ["task-received", "task-started", "task-succeeded"]
