"""A processor that stalls (its process stopped past the lock's time-to-live, a listener
holding the GIL, a listener sleeping past the time-to-live), in real worker processes: the
order of listener calls and once-per-listener hold, a stalled processor writes nothing once
it is back, and no processor that stalled is counted as dead."""

from __future__ import annotations

import os
import signal
from typing import Any

import pytest

import tests.test_events_tasks as listener_tasks
from noti.events import Event, Events, EventStatus, add_listener, dispatch
from tests.conftest import ADMIN, wait_until
from tests.test_events_processing import WORKER_CONFIG

pytestmark = pytest.mark.slow

TTL = {"NOTI_EVENT_LOCK_TTL_S": "1"}
ARGS = ("-P", "threads", "-c", "2", "-I", "tests.test_events_tasks")


def finished(api: Events, *ids: str) -> list[Event] | None:
    found = [api.get(i, user=ADMIN) for i in ids]
    return found if all(e.status is EventStatus.DONE for e in found) else None


def order_calls(rt: Any) -> list[str]:
    """The event ids of record_order's calls, in the order they were made."""
    return [
        entry.split(":")[0] for entry in rt.redis.lrange(listener_tasks.SEEN, 0, -1) if ":wait:" not in entry
    ]


def test_a_processor_stopped_past_its_lock_is_taken_over_and_writes_nothing_once_continued(
    configure: Any, spawn_worker: Any
) -> None:
    # given two workers, and an event whose second listener is running when its worker
    # process is stopped (SIGSTOP) for longer than the lock's time-to-live
    rt = configure(event_lock_ttl_s=1)
    api = Events(rt)
    workers = [spawn_worker(WORKER_CONFIG, *ARGS, env=TTL, name=n) for n in ("one", "two")]
    add_listener("order.*", "tests.events.record_order", name="a-first")
    add_listener("order.*", "tests.events.signal_and_wait", name="b-waits")
    add_listener("order.*", "tests.events.record_order", name="c-last")
    first = dispatch("order.paid", {"n": 1})
    second = dispatch("order.paid", {"n": 2})
    pid = int(wait_until(lambda: rt.redis.get(listener_tasks.PID), timeout=30))
    [stopped] = [w for w in workers if w.proc.pid == pid]
    os.kill(pid, signal.SIGSTOP)
    try:
        rt.redis.set(listener_tasks.RELEASE, 1)  # a second call of b-waits does not wait
        # when its lock expires, the other worker's processor takes the event over
        done = wait_until(lambda: finished(api, first, second) or (api.sweep() and None), timeout=60)
        before = rt.redis.hgetall(rt.keys.event(first))
    finally:
        os.kill(pid, signal.SIGCONT)
    # then, once continued, the stopped processor finds its lock lost, says it stalled, and
    # stops: it wrote nothing more on the event and ran no further listener
    wait_until(lambda: rt.redis.keys(rt.keys.event_stalled(f"*/{pid}/*")), timeout=30)
    wait_until(lambda: "lost its lock while alive" in stopped.output(), timeout=30)
    assert rt.redis.hgetall(rt.keys.event(first)) == before
    one, two = done
    # the event was taken over without counting a death: done, not poison, by the other worker
    assert (one.status, one.tries, one.error_code, two.tries) == (EventStatus.DONE, 2, "", 1)
    assert f"/{pid}/" not in one.processor
    # and once it said so, the event reads: 2 activations, its first processor stalled
    again = api.get(first)
    assert (again.tries, again.deaths, again.stalls) == (2, 0, 1)
    assert [o.listener for o in one.outcomes] == ["a-first", "b-waits", "c-last"]
    # each listener ran once per event, in event order (the stopped one's call of b-waits,
    # in flight when it was stopped, is the only repeat: at least once, with the same key)
    assert order_calls(rt) == [first, first, second, second]
    assert [o.result for o in one.outcomes] == [1, 2, 2] and two.outcomes[0].result == 3
    assert not rt.redis.get(listener_tasks.OVERLAPS)
    assert rt.dead_letters.entries() == []
    wait_until(lambda: not api.status().alive)


@pytest.mark.parametrize(
    ("task", "payload"),
    [("tests.events.hold_gil", {"hold_s": 4}), ("tests.events.sleep", {"sleep_s": 4})],
    ids=["gil-holding", "sleeping"],
)
def test_a_listener_running_past_the_lock_ttl_keeps_its_processor(
    configure: Any, spawn_worker: Any, task: str, payload: dict[str, Any]
) -> None:
    # given two workers, and a listener that runs four lock time-to-lives (holding the GIL,
    # so that no thread of its process runs meanwhile; or sleeping)
    rt = configure(event_lock_ttl_s=1)
    api = Events(rt)
    for name in ("one", "two"):
        started = spawn_worker(WORKER_CONFIG, *ARGS, env=TTL, name=name)
        wait_until(lambda: "event lock keeper" in started.output(), timeout=30)  # noqa: B023
    add_listener("order.*", "tests.events.record_order", name="a-first")
    add_listener("order.slow", task, name="b-slow")
    add_listener("order.*", "tests.events.record_order", name="c-last")
    slow = dispatch("order.slow", payload)
    after = dispatch("order.fast", {})
    # when it runs, while the sweep keeps looking for a processor to replace
    done = wait_until(lambda: finished(api, slow, after) or (api.sweep() and None), timeout=60)
    # then nobody replaced its processor: one try each, each listener once, in order
    one, two = done
    assert (one.tries, two.tries, one.failed, two.failed) == (1, 1, False, False)
    assert [o.listener for o in one.outcomes] == ["a-first", "b-slow", "c-last"]
    assert one.outcomes[1].result == 1 and rt.redis.get(listener_tasks.attempts_key(slow)) == "1"
    assert order_calls(rt) == [slow, slow, after, after]
    assert not rt.redis.get(listener_tasks.OVERLAPS)
    assert not rt.redis.keys(rt.keys.event_stalled("*"))
    wait_until(lambda: not api.status().alive)
