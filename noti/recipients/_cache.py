"""A bounded, thread-safe, least-recently-used map for what a process compiles once and keeps
(:mod:`noti.recipients.templates`' templates): bounded by its number of entries and by the
sum of their sizes, the least recently used dropped first."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

__all__ = ["LruCache"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LruCache(Generic[K, V]):
    """At most ``entries`` values, of sizes (as :meth:`put` gives them) adding up to at most
    ``size_max`` (one value larger than that is still kept, alone)."""

    def __init__(self, entries: int, size_max: int) -> None:
        self.entries, self.size_max = entries, size_max
        self._held: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            found = self._held.get(key)
            if found is None:
                return None
            self._held.move_to_end(key)
            return found[0]

    def put(self, key: K, value: V, size: int) -> None:
        with self._lock:
            old = self._held.pop(key, None)
            if old is not None:
                self._size -= old[1]
            self._held[key] = (value, size)
            self._size += size
            while len(self._held) > self.entries or (self._size > self.size_max and len(self._held) > 1):
                _, (_, dropped) = self._held.popitem(last=False)
                self._size -= dropped

    def drop_where(self, prefix: tuple[object, ...]) -> None:
        """Drop every entry whose key (a tuple) starts with ``prefix``."""
        with self._lock:
            for key in [k for k in self._held if isinstance(k, tuple) and k[: len(prefix)] == prefix]:
                self._size -= self._held.pop(key)[1]

    def __len__(self) -> int:
        return len(self._held)
