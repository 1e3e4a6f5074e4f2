"""What the ``noti webman`` commands read and delete in Redis (the plugin's console commands).

* :func:`queue_stats` is a row of ``solar:consumer:list``: Stream Length = ``XLEN`` (it counts
  pending entries, and acked ones kept by ``auto_delete = False``, as PHP's does), Delay Set
  Length = ``ZCARD``. Two cells are more precise than PHP's: the pending count is exact (the
  XPENDING summary; PHP prints ``>=`` and the size of a 500-entry page), and Last Active, which
  PHP's README shows but v1.0.1 does not print, is the time of the stream's last XADD (its
  ``last-generated-id``).
* :func:`clean` is ``solar:clean:redis:data``: one ``DEL`` of HASH, ZSET and stream.
* :func:`history` finds processed entries still in the stream (the README's "处理历史消息"
  script): only entries the group has delivered and that are no longer pending, so a message
  that still waits or is being worked on is never listed or deleted.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, cast

import redis

from noti.bridge.webman.codec import QueueMessage, parse_entry
from noti.bridge.webman.layout import QueueKeys
from noti.errors import MalformedMessage
from noti.redis.outage import translate_errors

__all__ = ["HistoryEntry", "QueueStats", "clean", "delete_entries", "history", "queue_stats"]

#: PHP's list command reads one XPENDING page of this size.
PHP_PENDING_PAGE = 500
_PAGE = 500


@dataclass(frozen=True, slots=True)
class QueueStats:
    """One queue's numbers for ``noti webman list``."""

    stream_length: int
    delay_set_length: int
    pending: int
    #: ms of the stream's last XADD; None when the stream has none.
    last_active_ms: int | None

    @property
    def php_pending_cell(self) -> str:
        """The Pending List Length cell exactly as PHP prints it."""
        return "0" if not self.pending else f">={min(self.pending, PHP_PENDING_PAGE)}"


def _id_ms(entry_id: str) -> int:
    return int(entry_id.partition("-")[0])


def queue_stats(client: redis.Redis, keys: QueueKeys) -> QueueStats:
    """XLEN, ZCARD, the exact pending count and the last XADD time of one queue.

    Raises:
        StoreUnavailable: Redis cannot be reached.
    """
    with translate_errors(client):
        pipe = client.pipeline(transaction=False)
        pipe.xlen(keys.stream)
        pipe.zcard(keys.delayed_set)
        length, delayed = pipe.execute()
        pending = 0
        last_ms: int | None = None
        if client.exists(keys.stream):
            info = client.xinfo_stream(keys.stream)
            last = str(info.get("last-generated-id") or "0-0")
            last_ms = _id_ms(last) if last != "0-0" else None
            try:
                summary = client.xpending(keys.stream, keys.names.group)
                pending = int(summary.get("pending") or 0)
            except redis.ResponseError:  # no such group yet
                pending = 0
    return QueueStats(int(length), int(delayed), pending, last_ms)


def clean(client: redis.Redis, keys: QueueKeys) -> int:
    """Delete the queue's HASH, ZSET and stream (its group goes with it); how many keys existed.

    Running consumers recreate the group and go on; PHP workers stop until restarted.
    """
    with translate_errors(client):
        return int(client.delete(*keys.data_keys))


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """A processed entry still in the stream."""

    id: str
    #: The message, or None when it does not parse (``error`` says why).
    message: QueueMessage | None
    raw: str | None
    error: str = ""

    @property
    def added_s(self) -> int:
        """When it was added to the stream (from its id)."""
        return _id_ms(self.id) // 1000

    @property
    def created_s(self) -> int:
        """The message's ``timestamp`` (kept through retries), else when it was added."""
        return self.message.timestamp if self.message else self.added_s


def _processed(client: redis.Redis, keys: QueueKeys) -> Iterator[tuple[str, dict[str, str]]]:
    try:
        groups = client.xinfo_groups(keys.stream)
    except redis.ResponseError:  # no stream
        return
    group = next((g for g in groups if g.get("name") == keys.names.group), None)
    if group is None:
        return
    last_delivered = str(group.get("last-delivered-id") or "0-0")
    if last_delivered == "0-0":
        return
    start = "-"
    while True:
        page = cast(list[Any], client.xrange(keys.stream, start, last_delivered, count=_PAGE))
        if not page:
            return
        first, last = page[0][0], page[-1][0]
        pending_rows = client.xpending_range(keys.stream, keys.names.group, first, last, 100_000)
        pending = {str(row["message_id"]) for row in pending_rows}
        for entry_id, fields in page:
            if entry_id not in pending:
                yield entry_id, fields or {}
        if len(page) < _PAGE:
            return
        start = f"({last}"


def history(
    client: redis.Redis,
    keys: QueueKeys,
    *,
    older_than_s: int,
    now_s: int,
    limit: int | None = None,
) -> list[HistoryEntry]:
    """Processed entries whose message is older than ``older_than_s`` (unparsable ones included).

    Raises:
        StoreUnavailable: Redis cannot be reached.
    """
    found: list[HistoryEntry] = []
    with translate_errors(client):
        for entry_id, fields in _processed(client, keys):
            try:
                message, raw = parse_entry(
                    fields, queue_name=keys.names.queue, php_class=keys.names.php_class, now_s=now_s
                )
                entry = HistoryEntry(entry_id, message, raw)
            except MalformedMessage as exc:
                entry = HistoryEntry(entry_id, None, fields.get("message"), exc.message)
            if now_s - entry.created_s >= older_than_s:
                found.append(entry)
                if limit is not None and len(found) >= limit:
                    break
    return found


def delete_entries(client: redis.Redis, keys: QueueKeys, entry_ids: list[str]) -> int:
    """XDEL entries (in batches); how many were deleted."""
    deleted = 0
    with translate_errors(client):
        for start in range(0, len(entry_ids), _PAGE):
            deleted += int(client.xdel(keys.stream, *entry_ids[start : start + _PAGE]))
    return deleted
