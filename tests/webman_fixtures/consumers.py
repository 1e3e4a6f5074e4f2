"""Consumers used by the round-trip tests (importable by class path)."""

from __future__ import annotations

import threading
from typing import Any, ClassVar

from noti.bridge.webman import Consumer, ConsumerMessage


class Collect(Consumer):
    """Records what it consumes; fails a message's first ``fail_first`` deliveries."""

    php_class = "app\\queue\\test\\Collect"
    block_time_ms = 200
    retry_seconds = 0
    fail_first: ClassVar[int] = 0
    seen: ClassVar[list[tuple[str, Any, int]]] = []
    lock: ClassVar[threading.Lock] = threading.Lock()

    @classmethod
    def reset(cls, *, fail_first: int = 0) -> None:
        with cls.lock:
            cls.seen.clear()
        cls.fail_first = fail_first

    @classmethod
    def data(cls) -> list[Any]:
        with cls.lock:
            return [d for _, d, _ in cls.seen]

    def consume(self, message: ConsumerMessage) -> None:
        with self.lock:
            self.seen.append((message.id, message.data, message.fail_count))
        if message.fail_count < self.fail_first:
            raise RuntimeError(f"failing delivery {message.fail_count + 1}")
