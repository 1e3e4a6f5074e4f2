"""Listener tasks for the event tests, which worker subprocesses import.

Worker subprocesses import this module with ``-I tests.test_events_tasks``; it must not import
``tests.conftest`` (which clears ``NOTI_*`` from the environment). The tasks keep what they
saw in Redis under ``test:*`` keys, outside noti's prefix. They are registered inside
:func:`_register` so that no task proxy sits in the module namespace, where pytest's
collection would evaluate it and read the Celery configuration too early.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from celery import shared_task

from noti.sending.runtime import get_runtime

ORDER = "test:order"
BUSY = "test:busy"
OVERLAPS = "test:overlaps"
SEEN = "test:seen"
RELEASE = "test:release"
PID = "test:pid"
#: The lock value steal_lock puts in place of the processor's.
THIEF = '{"token":"thief","host":"elsewhere","pid":1,"since_ms":1}'
#: Set (to "1") in the environment of the worker subprocesses exit_process may end.
MAY_EXIT = "TEST_EVENTS_MAY_EXIT"


def attempts_key(event_id: str) -> str:
    return f"test:attempts:{event_id}"


def _register() -> None:
    @shared_task(name="tests.events.record_order")
    def record_order(event: dict[str, Any]) -> int:
        """The how-many-th call this is; counts calls that overlapped another."""
        client = get_runtime().redis
        if not client.set(BUSY, event["id"], nx=True, px=10_000):
            client.incr(OVERLAPS)
        number = int(client.incr(ORDER))
        client.rpush(SEEN, f"{event['id']}:{event['key']}")
        client.delete(BUSY)
        return number

    @shared_task(name="tests.events.block_first")
    def block_first(event: dict[str, Any]) -> int:
        """Blocks (up to 60 s, until RELEASE is set) the first time it is called for an event."""
        client = get_runtime().redis
        attempt = int(client.incr(attempts_key(event["id"])))
        if attempt == 1:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not client.exists(RELEASE):
                time.sleep(0.05)
        return attempt

    @shared_task(name="tests.events.exit_process")
    def exit_process(event: dict[str, Any]) -> None:
        """Ends its process at once, as an OOM kill would (only where MAY_EXIT allows it)."""
        get_runtime().redis.incr(attempts_key(event["id"]))
        if os.environ.get(MAY_EXIT) != "1":
            raise RuntimeError(f"exit_process ends only worker subprocesses started with {MAY_EXIT}=1")
        os._exit(1)

    @shared_task(name="tests.events.steal_lock")
    def steal_lock(event: dict[str, Any]) -> int:
        """The first time for an event, another processor takes the lock meanwhile (as after a
        stall past the lock's time-to-live)."""
        runtime = get_runtime()
        attempt = int(runtime.redis.incr(attempts_key(event["id"])))
        if attempt == 1:
            runtime.redis.set(runtime.keys.event_lock, THIEF, px=60_000)
        return attempt

    @shared_task(name="tests.events.signal_and_wait")
    def signal_and_wait(event: dict[str, Any]) -> int:
        """The first time for an event: says which process runs it (under ``test:pid``), then
        waits (up to 60 s) until RELEASE is set. Records each call's end in SEEN."""
        client = get_runtime().redis
        attempt = int(client.incr(attempts_key(event["id"])))
        if attempt == 1:
            client.set(PID, os.getpid())
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not client.exists(RELEASE):
                time.sleep(0.05)
        client.rpush(SEEN, f"{event['id']}:{event['key']}:wait:{os.getpid()}")
        return attempt

    @shared_task(name="tests.events.hold_gil")
    def hold_gil(event: dict[str, Any]) -> int:
        """Holds the GIL for ``payload.hold_s`` seconds (a long computation in C would), so no
        other thread of its process runs meanwhile."""
        client = get_runtime().redis
        client.set(PID, os.getpid())
        previous = sys.getswitchinterval()
        sys.setswitchinterval(1000)
        try:
            deadline = time.monotonic() + float(event["payload"]["hold_s"])
            while time.monotonic() < deadline:
                pass
        finally:
            sys.setswitchinterval(previous)
        return int(client.incr(attempts_key(event["id"])))

    @shared_task(name="tests.events.sleep")
    def sleep(event: dict[str, Any]) -> int:
        """Sleeps ``payload.sleep_s`` seconds (the GIL released), then counts its call."""
        time.sleep(float(event["payload"]["sleep_s"]))
        return int(get_runtime().redis.incr(attempts_key(event["id"])))

    @shared_task(name="tests.events.fail_first")
    def fail_first(event: dict[str, Any]) -> int:
        """Fails the first time it is called for an event (a bug since fixed), then succeeds."""
        attempt = int(get_runtime().redis.incr(attempts_key(event["id"])))
        if attempt == 1:
            raise RuntimeError("not fixed yet")
        return attempt

    @shared_task(name="tests.events.fail_times")
    def fail_times(event: dict[str, Any]) -> int:
        """Fails the first ``payload.fail`` times it is called for an event (0 when absent),
        then succeeds; each call is counted, and each success recorded in SEEN in order."""
        client = get_runtime().redis
        attempt = int(client.incr(attempts_key(event["id"])))
        if attempt <= int(event["payload"].get("fail", 0)):
            raise RuntimeError(f"failure {attempt}")
        client.rpush(SEEN, f"{event['id']}:{event['key']}")
        return attempt

    @shared_task(name="tests.events.explode")
    def explode(event: dict[str, Any]) -> None:
        """Always fails."""
        raise RuntimeError(f"boom on {event['name']}")

    @shared_task(name="tests.events.echo")
    def echo(event: dict[str, Any]) -> Any:
        """Returns what it was given, and something JSON cannot hold."""
        return {"payload": event["payload"], "user": event["user"], "key": event["key"], "odd": repr({1})}

    @shared_task(name="tests.events.whom")
    def whom(event: dict[str, Any]) -> Any:
        """Says for whom it was called: the event's sender, the listener's owner, the level cap."""
        return {"user": event["user"], "owner": event["owner"], "level_cap": event["level_cap"]}


_register()


def test_the_listener_tasks_are_registered_in_the_noti_app(rt: Any) -> None:
    from noti.events.actions import find_task

    names = (
        "record_order",
        "block_first",
        "exit_process",
        "explode",
        "echo",
        "steal_lock",
        "hold_gil",
        "fail_times",
    )
    assert all(find_task(f"tests.events.{name}") is not None for name in names)
