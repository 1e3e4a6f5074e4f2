"""The event processor in real Celery workers: fan-out, failures recorded, hand-over by time
and by memory, strict order across two worker processes, and resuming after SIGKILL."""

from __future__ import annotations

import json
import threading
import uuid
from collections import Counter
from typing import Any

import pytest
from celery.signals import task_postrun

import noti.celery.tasks.events as event_tasks
import tests.test_events_tasks as listener_tasks
from noti.celery.app import app
from noti.celery.queues import EVENTS_QUEUE
from noti.core.record import Status
from noti.events import Event, Events, EventStatus, add_listener, dispatch, events
from tests.conftest import ADMIN, ALICE, sandbox_outbox, wait_until

PHONE = "+8613912345678"
PAID = {"id": 42, "customer": {"phone": PHONE, "email": "li@example.com"}, "total": 99.5}
WORKER_CONFIG = "\n".join(f'[channels.{c}]\nprovider = "sandbox"' for c in ("sms", "email", "webhook")) + "\n"


def done(rt: Any, event_id: str, timeout: float = 30) -> Event:
    api = Events(rt)
    return wait_until(  # type: ignore[no-any-return]
        lambda: (e := api.get(event_id, user=ADMIN)).status is EventStatus.DONE and e, timeout=timeout
    )


def all_events(rt: Any) -> list[Event]:
    """Every event, in stored (arrival) order."""
    return sorted(Events(rt).select(user=ADMIN, limit=None), key=lambda e: e.seq)


def test_one_event_fans_out_to_every_matching_listener(rt: Any, worker: Any) -> None:
    # given listeners of two users, one by wildcard, and one for another event
    sms = {"type": "sms", "target": "{{ customer.phone }}", "text": "Order {{ id }} paid", "lv": 50}
    mail = {"type": "email", "target": "{{ customer.email }}", "subject": "Paid", "text": "{{ total }} in"}
    hook = {
        "type": "webhook",
        "target": "https://hooks.example.com/{{ _event.name }}",
        "content": {"order": "{{ id }}", "by": "{{ _event.user }}"},
    }
    add_listener("order.paid", sms, name="sms", user=ALICE)
    add_listener("order.paid", {**mail, "lv": 500}, name="mail", user=ADMIN, from_users=[ALICE])
    add_listener("order.*", hook, name="hook", user=ADMIN, from_users="*")
    add_listener("order.cancelled", "tests.events.explode", name="other", user=ADMIN, from_users="*")
    # when the event is dispatched once
    event_id = dispatch("order.paid", PAID, user=ALICE)
    event = done(rt, event_id)
    # then each matching listener made its notification, as its owner, within its owner's cap
    # and within the cap of the event's sender (alice: 1, although the administrator's is 1000)
    assert not event.failed and [o.listener for o in event.outcomes] == ["sms", "mail", "hook"]
    sms, mail, hook = (rt.store.get(o.notification) for o in event.outcomes)
    assert (sms.creator, sms.level, sms.target, sms.fields) == (ALICE, 1, PHONE, {"text": "Order 42 paid"})
    assert (mail.creator, mail.level, mail.fields["text"]) == (ADMIN, 1, "99.5 in")
    assert hook.target == "https://hooks.example.com/order.paid"
    assert hook.fields["content"] == {"order": "42", "by": ALICE}
    # and the notifications were delivered
    wait_until(lambda: rt.store.count(Status.DONE) == 3)
    assert sorted(e["type"] for e in sandbox_outbox(rt)) == ["email", "sms", "webhook"]
    wait_until(lambda: not Events(rt).status().alive)


def test_a_failing_listener_is_recorded_while_the_others_run(rt: Any, worker: Any) -> None:
    add_listener(
        "order.paid", {"type": "sms", "target": "{{ buyer.phone }}", "text": "hi"}, name="a-undefined"
    )
    add_listener("order.paid", "tests.events.explode", name="b-explodes")
    add_listener("order.paid", {"type": "sms", "target": "{{ customer.phone }}", "text": "ok"}, name="c-sms")
    add_listener(
        "order.paid", {"type": "sms", "target": "{{ id }}", "text": "bad target"}, name="d-badtarget"
    )
    add_listener("order.paid", "tests.events.echo", name="e-echo")
    event = done(rt, dispatch("order.paid", PAID))
    a, b, c, d, e = event.outcomes
    assert (a.error_code, b.error_code, d.error_code) == (
        "e.noti.event.template.undefined",
        "e.noti.event.task.failed",
        "e.cmd.noti.add.badtarget",
    )
    assert "'buyer' is undefined" in (a.error_message or "")
    assert b.error_message == "RuntimeError: boom on order.paid" and b.task == "tests.events.explode"
    assert c.notification is not None and rt.store.get(c.notification).target == PHONE
    assert e.result["payload"] == PAID and not e.failed
    # the event carries the first failure's code, and says how many failed
    assert event.error_code == "e.noti.event.template.undefined"
    assert event.error_message == (
        "listener 'a-undefined': target: 'buyer' is undefined (and 2 more of 5 listeners failed)"
    )
    assert rt.store.count() == 1


@pytest.mark.parametrize(
    ("limit", "reason"),
    [({"event_processor_max_runtime_s": 1e-6}, "time"), ({"event_processor_max_memory_mb": 1}, "memory")],
)
def test_a_processor_past_its_limit_hands_over_cleanly(
    configure: Any, worker: Any, limit: dict[str, Any], reason: str
) -> None:
    # given limits so low that every processor stops after one event
    rt = configure(**limit)
    add_listener("job.*", "tests.events.record_order", name="order")
    # when ten events are dispatched
    ids = [dispatch("job.run", {"n": i}) for i in range(10)]
    wait_until(lambda: Events(rt).status().counts.done == 10, timeout=60)
    # then ten processors took them one each, in order, one at a time, and the last let go
    stored = all_events(rt)
    assert [e.id for e in stored] == ids
    assert [e.outcomes[0].result for e in stored] == list(range(1, 11))
    assert len({e.processor for e in stored}) == 10
    assert all(e.tries == 1 for e in stored)
    assert not rt.redis.get(listener_tasks.OVERLAPS)
    status = Events(rt).status()
    assert status.last_stop["reason"] == reason and status.last_stop["processed"] == "1"
    assert status.last_stop["waiting"] == "0"
    wait_until(lambda: not Events(rt).status().alive)


def test_one_thousand_events_from_threads_are_processed_in_stored_order_by_one_processor_at_a_time(
    rt: Any, spawn_worker: Any
) -> None:
    # given two worker processes whose processors hand over every half second
    env = {"NOTI_EVENT_PROCESSOR_MAX_RUNTIME_S": "0.5"}
    for name in ("one", "two"):
        spawn_worker(
            WORKER_CONFIG, "-P", "threads", "-c", "4", "-I", "tests.test_events_tasks", env=env, name=name
        )
    add_listener("tick.*", "tests.events.record_order", name="order")
    # when four threads dispatch 250 events each
    sent: dict[int, list[str]] = {}

    def produce(thread: int) -> None:
        sent[thread] = [dispatch(f"tick.{thread}", {"thread": thread, "i": i}) for i in range(250)]

    threads = [threading.Thread(target=produce, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wait_until(lambda: Events(rt).status().counts.done == 1000, timeout=120)
    # then every event ran once, in stored order, and no two listener calls overlapped
    stored = all_events(rt)
    assert [e.seq for e in stored] == list(range(1, 1001))
    assert [e.outcomes[0].result for e in stored] == list(range(1, 1001))
    assert not rt.redis.get(listener_tasks.OVERLAPS)
    assert all(e.tries == 1 and not e.failed for e in stored)
    # each thread's events kept the order it dispatched them in
    for thread, ids in sent.items():
        assert [e.id for e in stored if e.payload["thread"] == thread] == ids
    # several processors took turns (hand-over by time)
    runs = Counter(e.processor for e in stored)
    assert len(runs) >= 2, runs
    wait_until(lambda: not Events(rt).status().alive)


def test_a_processor_killed_mid_event_is_resumed_without_duplicate_notifications(
    configure: Any, spawn_worker: Any
) -> None:
    # given a processor stuck in the second listener of an event, after the first made its SMS
    rt = configure(event_lock_ttl_s=2)
    env = {"NOTI_EVENT_LOCK_TTL_S": "2"}
    args = ("-P", "threads", "-c", "2", "-I", "tests.test_events_tasks")
    doomed = spawn_worker(WORKER_CONFIG, *args, env=env, name="doomed")
    add_listener(
        "order.paid", {"type": "sms", "target": "{{ customer.phone }}", "text": "paid"}, name="a-sms"
    )
    add_listener("order.paid", "tests.events.block_first", name="b-block")
    first = dispatch("order.paid", PAID)
    wait_until(lambda: rt.redis.get(listener_tasks.attempts_key(first)) == "1", timeout=30)
    [created] = [r.id for r in rt.store.select()]
    # when its worker is killed with SIGKILL
    doomed.kill()
    assert Events(rt).get(first).status is EventStatus.ACTIVATED
    # then its lock expires, and the next dispatch starts a new processor that resumes
    wait_until(lambda: not Events(rt).status().alive, timeout=10)
    rt.redis.set(listener_tasks.RELEASE, 1)  # block_first blocks no more
    spawn_worker(WORKER_CONFIG, *args, env=env, name="heir")
    second = dispatch("order.paid", {**PAID, "id": 43})
    resumed, after = done(rt, first, timeout=60), done(rt, second, timeout=60)
    assert resumed.tries == 2 and after.tries == 1 and after.seq == resumed.seq + 1
    assert resumed.outcomes[0].notification == created
    assert resumed.outcomes[1].result == 2  # the task ran again, with the same key
    assert not resumed.failed and not after.failed
    # and no notification was created twice: one per event, each delivered once
    assert rt.store.count() == 2
    # (the first SMS's message may have been fetched by the killed worker: it comes back after
    # the visibility timeout, which beside both CI suites took longer than 60 s once)
    wait_until(lambda: len(sandbox_outbox(rt)) == 2, timeout=120)
    assert sorted(Counter(e["id"] for e in sandbox_outbox(rt)).values()) == [1, 1]


def test_the_beat_sweep_task_restarts_a_processor_for_stranded_events(rt: Any, worker: Any) -> None:
    # given an event stored while no processor could be queued
    api = Events(rt, start_processor=lambda: None)
    event_id = api.dispatch("order.paid", PAID)
    rt.redis.delete(rt.keys.event_starting)
    # when beat's sweep runs
    event_tasks.sweep.delay()
    # then a processor is queued and does the event
    assert done(rt, event_id).status is EventStatus.DONE
    assert events().status().counts.queued == 0


def test_a_redelivered_dispatch_message_stores_its_event_once(rt: Any, worker: Any) -> None:
    # given a noti.events.dispatch message delivered twice, as when the worker that ran it
    # died after storing the event and before acking the message (same message, same id)
    runs: list[tuple[str, Any]] = []

    def finished(sender: Any = None, task_id: str = "", retval: Any = None, **_: Any) -> None:
        if sender is not None and sender.name == "noti.events.dispatch":
            runs.append((task_id, retval))

    task_postrun.connect(finished, weak=False)
    message_id = str(uuid.uuid4())
    try:
        for _ in range(2):
            app.send_task(
                "noti.events.dispatch",
                kwargs={"name": "order.paid", "payload": PAID, "user": ALICE},
                task_id=message_id,
                queue=EVENTS_QUEUE,
            )
        # when the worker has run both deliveries
        wait_until(lambda: len(runs) == 2)
    finally:
        task_postrun.disconnect(finished)
    # then both returned the same event, stored once
    [(_, first), (_, second)] = runs
    assert first == second
    [event] = Events(rt).select(user=ADMIN, limit=None)
    assert event.id == first and event.user == ALICE and event.payload == PAID
    assert done(rt, first).status is EventStatus.DONE
    wait_until(lambda: not Events(rt).status().alive)


def test_an_event_that_kills_its_processor_is_set_aside_as_poison(configure: Any, spawn_worker: Any) -> None:
    # given two tries per event, and an event whose listener ends its worker's process
    rt = configure(event_lock_ttl_s=1, event_max_tries=2)
    env = {"NOTI_EVENT_LOCK_TTL_S": "1", "NOTI_EVENT_MAX_TRIES": "2", listener_tasks.MAY_EXIT: "1"}
    args = ("-P", "threads", "-c", "2", "-I", "tests.test_events_tasks")
    add_listener("poison.pill", "tests.events.exit_process", name="a-exit")
    add_listener("order.*", "tests.events.record_order", name="b-order")
    tries = listener_tasks.attempts_key
    first = spawn_worker(WORKER_CONFIG, *args, env=env, name="first")
    pill = dispatch("poison.pill", {"dose": 1})
    # when it kills the processor that takes it (try 1) ...
    wait_until(lambda: first.proc.poll() is not None, timeout=30)
    assert rt.redis.get(tries(pill)) == "1"
    wait_until(lambda: not Events(rt).status().alive, timeout=10)  # its lock expired
    # ... and the next one, started by the next event's dispatch (try 2)
    second = spawn_worker(WORKER_CONFIG, *args, env=env, name="second")
    after = dispatch("order.paid", PAID)
    wait_until(lambda: second.proc.poll() is not None, timeout=30)
    assert rt.redis.get(tries(pill)) == "2"
    assert Events(rt).get(pill, user=ADMIN).status is EventStatus.ACTIVATED
    wait_until(lambda: not Events(rt).status().alive, timeout=10)
    # then the third processor (queued by beat's sweep, or by the sweep of the worker that
    # took over the dead one's delay pump) does not run it again: it marks it done as poison,
    # dead-letters it, and goes on with the queue
    spawn_worker(WORKER_CONFIG, *args, env=env, name="third")
    pill_done = lambda: Events(rt).get(pill, user=ADMIN).status is EventStatus.DONE  # noqa: E731
    wait_until(lambda: Events(rt).sweep() or pill_done(), timeout=10)
    poisoned, behind = done(rt, pill, timeout=30), done(rt, after, timeout=30)
    assert rt.redis.get(tries(pill)) == "2"
    assert (poisoned.error_code, poisoned.tries, poisoned.outcomes) == ("e.noti.event.poison", 2, ())
    assert poisoned.error_message.startswith("activated 2 times without finishing")
    assert not behind.failed and behind.tries == 1 and behind.outcomes[0].result == 1
    [letter] = rt.dead_letters.entries()
    assert (letter.record_id, letter.type, letter.target, letter.attempts) == (
        pill,
        "event:poison.pill",
        "",
        2,
    )
    assert (letter.error_class, letter.source, json.loads(letter.payload)) == (
        "poison",
        "events",
        {"dose": 1},
    )
    assert letter.errmsg == f"e.noti.event.poison: {poisoned.error_message}"
    wait_until(lambda: not Events(rt).status().alive)


def test_events_left_behind_by_a_dead_processor_are_picked_up_without_beat(rt: Any, worker: Any) -> None:
    # given a processor that died holding the lock (it expires in 1.5 s) and no beat running
    rt.redis.set(rt.keys.event_lock, json.dumps({"token": "dead", "host": "gone", "pid": 1}), px=1500)
    add_listener(
        "late.*", {"type": "sms", "target": "+8613912345678", "text": "late"}, name="late-sms", user=ADMIN
    )
    # when events are dispatched meanwhile (dispatch sees the lock and queues no processor)
    event_id = dispatch("late.one", {"n": 1}, user=ADMIN)
    # then once the lock has expired the worker notices and a processor handles them
    assert done(rt, event_id, timeout=30).status is EventStatus.DONE


def test_under_sparse_traffic_each_dispatch_after_an_idle_processor_queues_one_itself(
    rt: Any, worker: Any
) -> None:
    # given events dispatched one at a time, each after the processor before it went idle
    from noti.events.api import queue_processor

    kicked: list[str] = []

    def start() -> None:
        kicked.append("queued")
        queue_processor()

    api = Events(rt, start_processor=start)
    add_listener("order.*", "tests.events.record_order", name="order")
    for n in range(3):
        event_id = api.dispatch("order.paid", {"n": n})
        # then each dispatch queued its processor at once (the sweep had nothing to do) ...
        assert kicked == ["queued"] * (n + 1)
        assert done(rt, event_id).outcomes[0].result == n + 1
        wait_until(lambda: not api.status().alive)
        # ... and the processor left no "starting" marker behind to hold back the next one
        assert not rt.redis.exists(rt.keys.event_starting)


@pytest.mark.slow
def test_a_listener_retry_policy_in_a_worker_runs_it_again_after_the_events_behind_it(
    rt: Any, start_worker_now: Any
) -> None:
    # given a flaky task (fails twice, then succeeds) with 3 retries 0.2 s apart, a recorder
    # after it, and three events already dispatched when the worker starts
    add_listener("order.*", "tests.events.fail_times", name="a-flaky", retries=3, backoff=0.2)
    add_listener("order.*", "tests.events.record_order", name="b-order")
    first = dispatch("order.paid", {"fail": 2})
    second, third = dispatch("order.paid", {}), dispatch("order.paid", {})
    with start_worker_now():
        event = done(rt, first)
        wait_until(lambda: not Events(rt).status().alive)
    # then it succeeded on its third attempt, its recorder ran once, after it
    assert not event.failed and event.waits == 2
    flaky, order = event.outcomes
    assert (flaky.result, flaky.attempts, order.attempts) == (3, 3, None)
    assert rt.redis.get(listener_tasks.attempts_key(first)) == "3"
    # and the events behind it kept their order: each retry step was queued after them
    seen = [x.split(":")[0] for x in rt.redis.lrange(listener_tasks.SEEN, 0, -1)]
    assert seen == [second, second, third, third, first, first]
    assert [Events(rt).get(i).outcomes[1].result for i in (second, third, first)] == [1, 2, 3]


@pytest.mark.slow
def test_a_listener_that_exhausts_its_retries_in_a_worker_ends_with_its_error_and_a_dead_letter(
    rt: Any, worker: Any
) -> None:
    add_listener("order.*", "tests.events.explode", name="boom", retries=2, backoff=0.1)
    add_listener("order.*", "tests.events.record_order", name="after")
    event = done(rt, dispatch("order.paid", {"id": 7}))
    boom, after = event.outcomes
    assert event.error_code == "e.noti.event.task.failed" and event.waits == 2
    assert boom.attempts == 3 and "gave up after 3 attempts" in (boom.error_message or "")
    assert after.result == 1  # the listener after it ran once, after it gave up
    [letter] = rt.dead_letters.entries()
    assert (letter.record_id, letter.target, letter.error_class, letter.attempts) == (
        event.id,
        "boom",
        "exhausted",
        3,
    )
    assert [e.id for e in Events(rt).select(user=ADMIN, failed=True)] == [event.id]
    wait_until(lambda: not Events(rt).status().alive)
