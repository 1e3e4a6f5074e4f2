"""Capture the Celery events a broker carries, as Flower receives them (a real
``EventReceiver`` on its own thread), for the tests that check what workers tell Celery's
tools."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

#: The event type sent to learn that the receiver is subscribed (never captured).
PROBE = "noti-test-probe"


@contextmanager
def captured_events(app: Any, settle_s: float = 0.0) -> Iterator[list[dict[str, Any]]]:
    """Every event published on ``app``'s broker while the block runs, oldest first; the
    block starts once the receiver is subscribed (events are a Redis pub/sub fan-out: one
    published while nobody listens is gone, and a fixed pause was not enough on a loaded
    machine). ``settle_s``: how long to keep listening after the block (a worker publishes
    its buffered events every 0.1 s)."""
    seen: list[dict[str, Any]] = []
    probed = threading.Event()
    ready = threading.Event()
    receivers: list[Any] = []

    def on_event(event: dict[str, Any]) -> None:
        if event.get("type") == PROBE:
            probed.set()
        else:
            seen.append(event)

    def capture() -> None:
        with app.connection_for_read() as conn:
            receiver = app.events.Receiver(conn, handlers={"*": on_event})
            receivers.append(receiver)
            ready.set()
            receiver.capture(limit=None, timeout=None, wakeup=False)

    thread = threading.Thread(target=capture, daemon=True)
    thread.start()
    assert ready.wait(5)
    deadline = time.monotonic() + 30
    with app.events.default_dispatcher() as dispatcher:
        while not probed.is_set():
            assert time.monotonic() < deadline, "the event receiver never subscribed"
            dispatcher.send(PROBE)
            probed.wait(0.1)
    seen.clear()
    try:
        yield seen
    finally:
        time.sleep(settle_s)
        receivers[0].should_stop = True
        thread.join(5)
