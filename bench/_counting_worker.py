"""``celery`` with every Redis round trip counted: ``python -m bench._counting_worker DIR -A app worker …``.

redis-py writes every command, and every pipeline or MULTI block, with one call to
``AbstractConnection.send_packed_command`` (sync, or its asyncio twin); kombu's Redis
transport (BRPOP, the unacked bookkeeping, acks) goes through redis-py too. So counting the
calls of that method counts round trips, in noti's code and in Celery's alike.

In the main process counting starts at ``worker_ready`` (start-up — connecting, declaring
bindings — is left out); forked pool children count from their start. Every process writes
its running total to ``DIR/<pid>`` every 50 ms and at exit; :func:`total` adds them up.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from pathlib import Path
from typing import Any

__all__ = ["total"]

INTERVAL_S = 0.05
_state = {"count": 0, "on": False}


def total(directory: str | Path) -> int:
    """Round trips counted so far by every process that reported into ``directory``."""
    count = 0
    for path in Path(directory).iterdir():
        try:
            count += int(path.read_text() or 0)
        except (OSError, ValueError):
            continue
    return count


def _patch() -> None:
    """Count the writes of redis-py's sync and asyncio connections."""
    from redis.asyncio.connection import AbstractConnection as AsyncConnection
    from redis.connection import AbstractConnection

    original = AbstractConnection.send_packed_command
    original_async = AsyncConnection.send_packed_command

    def counted(self: Any, command: Any, check_health: bool = True) -> Any:
        if _state["on"]:
            _state["count"] += 1
        return original(self, command, check_health)  # type: ignore[no-untyped-call]

    async def counted_async(self: Any, command: Any, check_health: bool = True) -> Any:
        if _state["on"]:
            _state["count"] += 1
        return await original_async(self, command, check_health)

    AbstractConnection.send_packed_command = counted  # type: ignore[method-assign]
    AsyncConnection.send_packed_command = counted_async  # type: ignore[method-assign]


def _report(directory: Path) -> None:
    tmp = directory / f".{os.getpid()}.tmp"
    tmp.write_text(str(_state["count"]))
    tmp.replace(directory / str(os.getpid()))


def _start_reporter(directory: Path) -> None:
    def loop() -> None:
        stop = threading.Event()
        while not stop.wait(INTERVAL_S):
            _report(directory)

    threading.Thread(target=loop, name="rt-counter", daemon=True).start()
    atexit.register(_report, directory)


def _in_child(directory: Path) -> None:
    _state["count"], _state["on"] = 0, True
    _start_reporter(directory)


def main() -> None:
    directory = Path(sys.argv[1])
    directory.mkdir(parents=True, exist_ok=True)
    _patch()
    from celery.signals import worker_ready

    @worker_ready.connect(weak=False)
    def _ready(**_: Any) -> None:
        _state["count"], _state["on"] = 0, True

    os.register_at_fork(after_in_child=lambda: _in_child(directory))
    _start_reporter(directory)
    from celery.__main__ import main as celery_main

    sys.argv = ["celery", *sys.argv[2:]]
    celery_main()


if __name__ == "__main__":
    main()
