"""Reading records and their indexes: look-ups by id, pages of an index, selections, the
waiting and delayed records. No script and no write: :class:`RecordReader` needs only a
client and the keys, and :class:`~noti.core.store.RecordStore` adds the writes to it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import cast

import redis

from noti.core.keys import Keys
from noti.core.record import Channel, Notification, Status, from_hash
from noti.errors import NotFound
from noti.inputs import could_be_id, shown
from noti.redis.outage import translate_errors

__all__ = ["DELAYED_PAGE", "RecordReader"]

_PAGE = 500
#: Entries of the delayed set read per round trip by a listing with a limit.
DELAYED_PAGE = 500


class RecordReader:
    """Notification records and their indexes in one Redis database, read."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.redis = client
        self.keys = keys

    def find(self, record_id: str) -> Notification | None:
        """The record, or None."""
        return self.find_many([record_id])[0]

    def get(self, record_id: str) -> Notification:
        """The record.

        Raises:
            NotFound: no record has this id.
        """
        record = self.find(record_id)
        if record is None:
            raise NotFound(f"no notification has the id {shown(record_id)}")
        return record

    def find_many(self, ids: Sequence[str]) -> list[Notification | None]:
        """The records with these ids, None where there is none, in one round trip (a value
        that cannot be an id — not a string, a control character, a lone surrogate — names
        none, without asking Redis)."""
        if not ids:
            return []
        asked = [record_id for record_id in ids if could_be_id(record_id)]
        if not asked:
            return [None] * len(ids)
        with translate_errors(self.redis):
            pipe = self.redis.pipeline(transaction=False)
            for record_id in asked:
                pipe.hgetall(self.keys.record(record_id))
            rows = iter(pipe.execute())
        found = [next(rows) if could_be_id(record_id) else None for record_id in ids]
        return [from_hash(row) if row and "noti_type" in row else None for row in found]

    def iter_index(self, index: str, *, newest_first: bool = True) -> Iterator[str]:
        """Ids of an index, page by page."""
        start = 0
        while True:
            with translate_errors(self.redis):
                if newest_first:
                    page = cast(list[str], self.redis.zrevrange(index, start, start + _PAGE - 1))
                else:
                    page = cast(list[str], self.redis.zrange(index, start, start + _PAGE - 1))
            yield from page
            if len(page) < _PAGE:
                return
            start += _PAGE

    def select(
        self,
        *,
        creator: str | None = None,
        status: Status | None = None,
        limit: int | None = None,
        delivery: str | None = None,
        channel: Channel | None = None,
    ) -> list[Notification]:
        """Records, newest first, optionally of one creator, one status, one delivery status
        and/or one channel (with ``delivery``: latest to enter it first).

        Reads the smallest index that answers the question and stops at ``limit``.
        """
        k = self.keys
        if creator is not None:
            index = k.user_index(creator)
        elif delivery is not None:
            index = k.delivery_index(delivery)
        elif status is not None:
            index = k.status_index(int(status))
        else:
            index = k.all_index
        found: list[Notification] = []
        for page in _pages(self.iter_index(index), _PAGE):
            for record in self.find_many(page):
                if record is None:
                    continue
                if status is not None and record.status != status:
                    continue
                if delivery is not None and record.delivery != delivery:
                    continue
                if channel is not None and record.channel is not channel:
                    continue
                found.append(record)
                if limit is not None and len(found) >= limit:
                    return found
        return found

    def waiting_head(self, count: int) -> list[str]:
        """The first ``count`` waiting ids in send order: highest level, then oldest, first."""
        with translate_errors(self.redis):
            return cast(list[str], self.redis.zrange(self.keys.waiting_index, 0, count - 1))

    def waiting_ids(
        self, *, creator: str | None = None, channel: str | None = None, below_level: int | None = None
    ) -> list[str]:
        """Ids of the waiting records (queued or delayed) of ``creator`` and ``channel`` (None:
        any) with a level below ``below_level`` (None: any), in no particular order. The
        waiting index is scanned (``ZSCAN``), so a record that waits through the whole scan is
        found even while workers finish others.

        Raises:
            StoreUnavailable: Redis cannot be reached.
        """
        found: list[str] = []
        cursor = 0
        while True:
            with translate_errors(self.redis):
                cursor, page = self.redis.zscan(self.keys.waiting_index, cursor, count=_PAGE)
                ids = [str(member) for member, _ in page]
                pipe = self.redis.pipeline(transaction=False)
                for record_id in ids:
                    pipe.hmget(self.keys.record(record_id), "noti_c", "noti_type", "noti_lv", "noti_st")
                rows = cast(list[list[str | None]], pipe.execute())
            for record_id, (made_by, kind, level, status) in zip(ids, rows, strict=True):
                if status != "1" or (creator is not None and made_by != creator):
                    continue
                if channel is not None and kind != channel:
                    continue
                if below_level is not None and int(level or 1) >= below_level:
                    continue
                found.append(record_id)
            if cursor == 0:
                return list(dict.fromkeys(found))  # ZSCAN may return a member twice

    def delayed_where(
        self, keep: Callable[[Notification], bool], limit: int | None
    ) -> list[tuple[Notification, int]]:
        """The delayed records ``keep`` takes, with their due ms, soonest first: ``limit`` of them
        (every one without), read :data:`DELAYED_PAGE` entries at a time until there are enough
        (the set may hold millions); one rescheduled between two pages is listed once."""
        found: list[tuple[Notification, int]] = []
        seen: set[str] = set()
        start = 0
        while True:
            rows, entries = self.delayed_page(start, DELAYED_PAGE if limit else None)
            for record, due in entries:
                if record.id not in seen and keep(record):
                    seen.add(record.id)
                    found.append((record, due))
            start += rows
            if not limit or len(found) >= limit or rows < DELAYED_PAGE:
                return found[:limit] if limit else found

    def delayed_page(self, start: int, size: int | None) -> tuple[int, list[tuple[Notification, int]]]:
        """``size`` entries of the delayed set from its ``start``-th (every one from there when
        None): how many entries there were, and their records with their due ms, soonest first
        (an entry whose record is gone is left out)."""
        stop = start + size - 1 if size else -1
        with translate_errors(self.redis):
            rows = cast(
                list[tuple[str, float]], self.redis.zrange(self.keys.delayed, start, stop, withscores=True)
            )
        records = self.find_many([record_id for record_id, _ in rows])
        found = [(r, int(score)) for r, (_, score) in zip(records, rows, strict=True) if r is not None]
        return len(rows), found

    def done_before(self, cutoff_ms: int, limit: int | None = None) -> list[str]:
        """Ids of records done at or before ``cutoff_ms``, oldest first."""
        with translate_errors(self.redis):
            return cast(
                list[str],
                self.redis.zrangebyscore(
                    self.keys.status_index(int(Status.DONE)),
                    "-inf",
                    cutoff_ms,
                    start=0 if limit else None,
                    num=limit or None,
                ),
            )

    def count(self, status: Status | None = None) -> int:
        k = self.keys
        with translate_errors(self.redis):
            return int(self.redis.zcard(k.all_index if status is None else k.status_index(int(status))))


def _pages(ids: Iterable[str], size: int) -> Iterator[list[str]]:
    page: list[str] = []
    for record_id in ids:
        page.append(record_id)
        if len(page) == size:
            yield page
            page = []
    if page:
        yield page
