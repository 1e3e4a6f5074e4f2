"""Lease heartbeats: a send that takes longer than expected keeps its record's lease.

A sender claims a record for ``lease_ms``. If the provider call outlasts that, another
sender could take the record and send it again; so while a send is in progress, one
daemon thread per process renews the leases it holds (every third of the lease, all of
them in one ``renew.lua`` call). A dead process renews nothing, so its leases still expire.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from noti.core.store import RecordStore
from noti.errors import NotiError

__all__ = ["LeaseKeeper"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Held:
    record_id: str
    owner: str
    lease_ms: int
    renewed_at: float


def _release_nothing(positions: Iterable[int]) -> None:
    """``release`` of an empty :meth:`LeaseKeeper.hold_many`."""


class LeaseKeeper:
    """Renews the leases of the sends in progress in this process."""

    def __init__(self, store: RecordStore) -> None:
        self._store = store
        self._held: dict[int, _Held] = {}
        self._next = 0
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        #: When the keeper thread will next look (monotonic), or inf while it waits for work.
        self._wake_at = math.inf

    @contextlib.contextmanager
    def hold_many(self, leases: Sequence[tuple[str, str, int]]) -> Iterator[Callable[[Iterable[int]], None]]:
        """Keep the ``(record id, owner, lease ms)`` leases alive for the ``with`` block (one
        lock round for the lot: a batch of sends in flight). Yields ``release(positions)``,
        which stops renewing the leases at those positions of ``leases`` before the block
        ends (their sends are over)."""
        if not leases:
            yield _release_nothing
            return
        with self._cond:
            now = time.monotonic()
            tokens = range(self._next + 1, self._next + 1 + len(leases))
            self._next += len(leases)
            for token, (record_id, owner, lease_ms) in zip(tokens, leases, strict=True):
                self._held[token] = _Held(record_id, owner, lease_ms, now)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="noti-lease-keeper", daemon=True)
                self._thread.start()
            soonest = min((lease_ms for _, _, lease_ms in leases), default=None)
            if soonest is not None and now + soonest / 3000 < self._wake_at:  # else it looks in time
                self._cond.notify()

        def release(positions: Iterable[int]) -> None:
            with self._cond:
                for position in positions:
                    self._held.pop(tokens[position], None)

        try:
            yield release
        finally:
            with self._cond:
                for token in tokens:
                    self._held.pop(token, None)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._held:
                    self._wake_at = math.inf
                    self._cond.wait()
                now = time.monotonic()
                due = [h for h in self._held.values() if now - h.renewed_at >= h.lease_ms / 3000]
                wait_s = min(h.renewed_at + h.lease_ms / 3000 - now for h in self._held.values())
                if not due:
                    self._wake_at = now + max(0.01, wait_s)
                    self._cond.wait(max(0.01, wait_s))
            if due:
                self._renew(due)

    def _renew(self, due: list[_Held]) -> None:
        by_lease: dict[int, list[_Held]] = {}
        for held in due:
            by_lease.setdefault(held.lease_ms, []).append(held)
        for lease_ms, group in by_lease.items():
            try:
                kept = self._store.renew([(h.record_id, h.owner) for h in group], lease_ms=lease_ms)
            except NotiError as exc:
                log.warning("lease keeper: cannot renew %d leases: %s", len(group), exc)
                time.sleep(0.2)
                continue
            now = time.monotonic()
            for held, ok in zip(group, kept, strict=True):
                held.renewed_at = now
                if not ok:
                    log.warning("deliver %s: lease lost during a send", held.record_id)
