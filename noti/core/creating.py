"""Creating records: the ``create.lua`` calls that store records with their index entries
and delivery messages, and :class:`CreatePipeline`, which streams batches of them on one
connection (a bulk send prepares its next batch while Redis stores this one).

:class:`~noti.core.store.RecordStore` makes both (``create_one``, ``create_many``,
``create_pipeline``); nothing here knows the store, only the keys and the script.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import redis
from redis.commands.core import Script

from noti.core.keys import Keys
from noti.core.record import Channel, Notification, to_hash
from noti.core.search import AddressIndex
from noti.redis.conn import ReplicaWait
from noti.redis.counters import added_field
from noti.redis.outage import translate_errors
from noti.redis.pipelines import ScriptPipeline

__all__ = ["CreateCalls", "CreatePipeline"]


class CreateCalls:
    """Builds ``create.lua`` calls under ``keys``, remembering the ``added`` counter field of
    each (channel, provider named) it meets: a store keeps one between calls."""

    def __init__(self, keys: Keys, addresses: AddressIndex) -> None:
        self.keys = keys
        self.addresses = addresses
        self._added: dict[tuple[Channel, str | None], str] = {}

    def __call__(
        self,
        records: Sequence[Notification],
        messages: Mapping[str, tuple[str, str]],
        idempotency_keys: Mapping[str, str],
        *,
        ttl_ms: int,
    ) -> tuple[list[str], list[Any]]:
        """The keys and arguments of one ``create.lua`` call for records sharing their
        creator, status and queue (see the script); an idempotency key lives ``ttl_ms``."""
        k, first = self.keys, records[0]
        hashes = [to_hash(record) for record in records]
        alone = len(hashes) == 1  # notify(): all its fields are "shared", none its own
        shared = (
            hashes[0].items()
            if alone
            else set(hashes[0].items()).intersection(*(h.items() for h in hashes[1:]))
        )
        keys = [
            k.all_index,
            k.user_index(first.creator),
            k.status_index(int(first.status)),
            k.waiting_index,
            k.delayed,
            messages.get(first.id, (k.all_index, ""))[0],
            k.metrics,
        ]
        args: list[Any] = [int(first.status), len(shared), *itertools.chain.from_iterable(shared)]
        added, address = self._added, self.addresses.key
        for record, fields in zip(records, hashes, strict=True):
            record_key = k.record(record.id)
            idempotency_key = idempotency_keys.get(record.id)
            keys += [record_key, idempotency_key or record_key, address(record.channel, record.target)]
            own = () if alone else fields.items() - shared
            label = added.get((record.channel, record.provider))
            if label is None:
                label = added[(record.channel, record.provider)] = added_field(
                    record.channel.value, record.provider
                )
            args += [
                record.id,
                record.created_ms,
                record.level,
                record.lease_until_ms,
                messages.get(record.id, ("", ""))[1],
                ttl_ms if idempotency_key else 0,
                len(own),
                label,
                *itertools.chain.from_iterable(own),
            ]
        return keys, args


class CreatePipeline:
    """Batches of records written by ``create.lua`` on one held connection: :meth:`send`
    writes a batch and returns at once, :meth:`ids` reads what the oldest batch not read
    yet stored, so a bulk send prepares its next batch while Redis stores this one.

    Each ``create.lua`` call stores up to ``per_call`` records sharing creator, status and
    queue, atomically, each with its index entries and its delivery message.
    """

    #: Lua's ``unpack`` fails near 8,000 values: a call's index and queue writes stay far below.
    MAX_PER_CALL = 1000

    def __init__(
        self,
        client: redis.Redis,
        script: Script,
        calls: CreateCalls,
        *,
        replica_wait: ReplicaWait | None,
        idempotency_ttl_s: float,
        per_call: int,
    ) -> None:
        if not 1 <= per_call <= self.MAX_PER_CALL:
            raise ValueError(f"per_call must be 1 to {self.MAX_PER_CALL}, got {per_call}")
        self._client = client
        self._replica_wait = replica_wait
        self._pipeline = ScriptPipeline(client, script)
        self._calls = calls
        self._ttl_ms = int(idempotency_ttl_s * 1000)
        self._per_call = per_call

    def __enter__(self) -> CreatePipeline:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._pipeline.close()

    def send(
        self,
        records: Sequence[Notification],
        *,
        messages: Mapping[str, tuple[str, str]] | None = None,
        idempotency_keys: Mapping[str, str] | None = None,
    ) -> None:
        """Write ``records``, each with its delivery message ``(queue list, payload)`` when
        ``messages`` has one for its id. A record with an entry in ``idempotency_keys`` (a
        Redis key, see :meth:`~noti.core.store.RecordStore.create_many`) is stored only if
        that key was not used within the time-to-live.

        Raises:
            StoreUnavailable: Redis could not be reached.
        """
        messages = messages or {}
        idempotency_keys = idempotency_keys or {}
        calls = [
            self._calls(group, messages, idempotency_keys, ttl_ms=self._ttl_ms)
            for group in _create_groups(records, messages, self._per_call)
        ]
        with translate_errors(self._client):
            self._pipeline.send(calls)

    def ids(self) -> list[str]:
        """Per record of the oldest batch not read yet: its id, or the id of the record its
        idempotency key named (then it was not stored).

        Raises:
            StoreUnavailable: Redis could not be reached (the batches sent may be stored).
        """
        with translate_errors(self._client):
            return [record_id for stored in self._pipeline.results() for record_id in stored]

    def confirm_ahead(self) -> None:
        """After the last :meth:`send`, before its :meth:`ids`: write the wait for the
        replicas behind it when the store asks for one, so :meth:`confirm` costs no round
        trip of its own."""
        if self._replica_wait is not None:
            with translate_errors(self._client):
                self._replica_wait.ask(self._pipeline, self._client)

    def confirm(self) -> None:
        """Once every batch is read: wait until replicas have them, when the store asks for
        it (:class:`~noti.redis.conn.ReplicaWait`).

        Raises:
            StoreUnavailable: ``e.noti.store.unconfirmed``, or Redis could not be reached.
        """
        if self._replica_wait is not None:
            self._replica_wait.confirm(self._pipeline, self._client)


def _create_groups(
    records: Sequence[Notification], messages: Mapping[str, tuple[str, str]], size: int
) -> Iterator[Sequence[Notification]]:
    """``records`` cut into runs of at most ``size`` that share creator, status and the
    queue of their message (one ``create.lua`` call each)."""
    start = 0
    group_of = None
    for i, record in enumerate(records):
        message = messages.get(record.id)
        group = (record.creator, record.status, message[0] if message else None)
        if i - start == size or (i > start and group != group_of):
            yield records[start:i]
            start = i
        group_of = group
    if start < len(records):
        yield records[start:]
