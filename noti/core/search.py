"""Finding records: by address, recipient, status, provider, vendor message id, time.

"What happened to the message for +8613800138000?" is answered by the address index:
``noti:idx:to:<digest>``, a ZSET of the ids of every record sent to one address on one
channel (score = created ms), written by the scripts that make records (``create.lua``,
``notify.lua``, ``schedule.lua``) and cleaned by those that delete them. The key names no
address: ``<digest>`` is the keyed BLAKE2b MAC (128 bits) of the channel and the address under a
secret kept in Redis (``noti:search:secret``, random, made on first use), so neither the key space nor a
copy of it tells who was notified, and a guessed number cannot be checked without the secret.

:class:`Search` reads the one index that narrows a question most (the address's, the vendor
id's match, the recipient's log, the creator's, a status', or all records), newest first
within the time range, and filters the rest record by record, looking at no more than
:data:`SCAN_MAX` ids per question.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import cast

import redis

from noti.core.keys import Keys
from noti.core.reads import RecordReader
from noti.core.record import Channel, Notification, Status
from noti.redis.kept_secret import new_secret, read_secret
from noti.redis.outage import translate_errors

__all__ = ["SCAN_MAX", "SECRET_RECHECK_S", "AddressIndex", "Query", "Search"]

#: The most index entries one search looks at (a question no index narrows stops there).
SCAN_MAX = 20_000
_PAGE = 500
#: How long a process uses the secret it read before reading it again (s).
SECRET_RECHECK_S = 30.0


class AddressIndex:
    """The address index's key names (its secret read, or made, once per process)."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.redis = client
        self.keys = keys
        self._secret: bytes | None = None
        self._read_at = 0.0

    def secret(self) -> bytes:
        """The secret, read again every :data:`SECRET_RECHECK_S` (a database restored or
        flushed has another one: every process follows within that time)."""
        if self._secret is None or time.monotonic() - self._read_at > SECRET_RECHECK_S:
            self.refresh()
        assert self._secret is not None
        return self._secret

    def refresh(self) -> bool:
        """Read the secret now; True when it changed. When there is none (a new database, or
        one flushed), the one this process used is put back (a new one if it used none), so
        processes that used one keep using it."""
        make = self._secret.hex() if self._secret is not None else new_secret()
        secret = read_secret(self.redis, self.keys.search_secret, make=make)
        assert secret is not None  # made above when missing
        changed = self._secret is not None and secret != self._secret
        self._secret, self._read_at = secret, time.monotonic()
        return changed

    def key(self, channel: Channel | str, address: str) -> str:
        """The index key of ``address`` on ``channel``."""
        name = channel.value if isinstance(channel, Channel) else channel
        # BLAKE2b's keyed mode (a MAC: RFC 7693) costs 1.3 µs where HMAC-SHA256 cost 5 on
        # notify()'s path (bench scenario 21's notify row)
        digest = hashlib.blake2b(f"{name}\0{address}".encode(), key=self.secret(), digest_size=16)
        return self.keys.address_index(digest.hexdigest())


@dataclass(frozen=True, slots=True)
class Query:
    """A search, its fields already checked (:meth:`noti.sending.history.History.search`)."""

    #: Index keys of the address (one per channel it may be an address of).
    addresses: tuple[str, ...] = ()
    creator: str | None = None
    #: The recipient's log key (``noti:rcpt-log:<owner>:<id>``) and the id.
    recipient: tuple[str, str] | None = None
    channel: Channel | None = None
    status: Status | None = None
    provider: str | None = None
    msgid: str | None = None
    #: The delivery status (``accepted``, ``delivered``, ``undelivered``, ``unknown``).
    delivery: str | None = None
    since_ms: int | None = None
    until_ms: int | None = None
    limit: int = 100


class Search:
    """Searches over one store's records."""

    def __init__(self, reader: RecordReader) -> None:
        self.reader = reader
        self.redis = reader.redis
        self.keys = reader.keys

    def __call__(self, query: Query) -> list[Notification]:
        found: list[Notification] = []
        for page in self._pages(query):
            for record in self.reader.find_many(page):
                if record is not None and self._matches(record, query):
                    found.append(record)
                    if len(found) >= query.limit:
                        return found
        return found

    def _matches(self, record: Notification, q: Query) -> bool:
        if q.creator is not None and record.creator != q.creator:
            return False
        if q.channel is not None and record.channel is not q.channel:
            return False
        if q.status is not None and record.status != q.status:
            return False
        if q.recipient is not None and record.recipient != q.recipient[1]:
            return False
        if q.msgid is not None and record.msgid != q.msgid:
            return False
        if q.delivery is not None and record.delivery != q.delivery:
            return False
        if q.provider is not None:
            named = (record.provider or "").split(",")
            if q.provider != record.sent_by and q.provider not in named:
                return False
        created_in = (q.since_ms is None or record.created_ms >= q.since_ms) and (
            q.until_ms is None or record.created_ms <= q.until_ms
        )
        return created_in

    def _pages(self, q: Query) -> Iterator[list[str]]:
        """Candidate ids, newest first, a page at a time, at most :data:`SCAN_MAX`."""
        if q.msgid is not None:
            ids = self._by_msgid(q.msgid, q.provider)
            if ids is not None:
                yield ids
                return
        k = self.keys
        by_time = True  # the index's scores are creation times (else: when it entered it)
        indexes: Sequence[str]
        if q.addresses:
            indexes = q.addresses
        elif q.recipient is not None:
            indexes = [q.recipient[0]]
        elif q.creator is not None:
            indexes = [k.user_index(q.creator)]
        elif q.status is not None:
            indexes, by_time = [k.status_index(int(q.status))], False
        else:
            indexes = [k.all_index]
        high = "+inf" if q.until_ms is None or not by_time else q.until_ms
        low = "-inf" if q.since_ms is None or not by_time else q.since_ms
        seen = 0
        for index in indexes:
            start = 0
            while seen < SCAN_MAX:
                with translate_errors(self.redis):
                    page = cast(
                        list[str],
                        self.redis.zrevrangebyscore(index, high, low, start=start, num=_PAGE),
                    )
                if not page:
                    break
                seen += len(page)
                yield page
                if len(page) < _PAGE:
                    break
                start += _PAGE

    def _by_msgid(self, msgid: str, provider: str | None) -> list[str] | None:
        """The record a vendor id names in the receipt window's map (``noti:dlv:vid``), or None
        when the map does not know it (the records are then read as for any search)."""
        with translate_errors(self.redis):
            if provider is not None:
                found = self.redis.hget(self.keys.vendor_ids, f"{provider}:{msgid}")
                return [cast(str, found)] if found else None
            ids: list[str] = []
            pattern = "*:" + "".join("\\" + c if c in "*?[]\\" else c for c in msgid)
            for _, record_id in self.redis.hscan_iter(self.keys.vendor_ids, match=pattern, count=1000):
                ids.append(cast(str, record_id))
                if len(ids) >= 100:
                    break
        return ids or None
