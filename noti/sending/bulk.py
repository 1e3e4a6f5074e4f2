"""Bulk sends: validate every item first, then store the good ones in pipelined chunks.

``notify_many`` / ``schedule_many`` take mappings shaped like :func:`noti.notify`'s
arguments (``type``, ``target`` — or ``to`` —, ``lv``, channel fields, ``provider``,
``retry_max``, ``retry_policy``, ``delay``, ``eta``, ``identifier``, ``idempotency_key``,
``status_callback``, ``fallback``).
Refused items are reported by index with their error code and message, and none of them
is stored; the others are stored with their delivery messages by ``create.lua`` (a record
and its message together or not at all), 1,000 records per round trip. One thread does
it all: a chunk's calls are written without waiting, and their replies read after the
next chunk is validated, so the client and Redis work at the same time without a second
thread contending for the GIL.
"""

from __future__ import annotations

import collections
import contextlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from noti.core.delay import iso_time, validate_idempotency_key
from noti.core.record import Notification
from noti.errors import InvalidConfig, InvalidInput, NotiError, StoreUnavailable
from noti.tracing import span

if TYPE_CHECKING:
    from noti.core.creating import CreatePipeline
    from noti.sending.notifier import Notifier

__all__ = ["BulkResult", "Refused", "add_many"]

CHUNK = 1000
#: The index a chunk gives an item's fallback record (it has none in the result).
_FALLBACK = -1
#: Chunks written to Redis and not yet read back while the next is validated.
AHEAD = 1
_ITEM_KEYS = frozenset(
    {
        "type",
        "target",
        "to",
        "lv",
        "provider",
        "retry_max",
        "retry_policy",
        "delay",
        "eta",
        "identifier",
        "idempotency_key",
        "status_callback",
        "fallback",
        "text",
        "tmpl",
        "pnb",
        "url",
        "content",
        "subject",
        "html",
    }
)


@dataclass(frozen=True, slots=True)
class Refused:
    """An item that was not stored, and why."""

    index: int
    code: str
    message: str


@dataclass(slots=True)
class BulkResult:
    """What a bulk call stored: ``ids[i]`` is item i's record id, or None if it was refused."""

    ids: list[str | None] = field(default_factory=list)
    refused: list[Refused] = field(default_factory=list)

    @property
    def stored(self) -> int:
        return sum(1 for i in self.ids if i is not None)

    def extend(self, other: BulkResult, offset: int) -> None:
        self.ids.extend(other.ids)
        self.refused.extend(Refused(r.index + offset, r.code, r.message) for r in other.refused)


def _arguments(item: object, defaults: Mapping[str, Any]) -> tuple[str, str, dict[str, Any]]:
    if not isinstance(item, Mapping):
        raise InvalidInput(
            f"an item must be a mapping, got {type(item).__name__}", code="e.cmd.noti.add.baditem"
        )
    unknown = [] if item.keys() <= _ITEM_KEYS else sorted(set(item) - _ITEM_KEYS)
    if unknown:
        raise InvalidInput(
            f"unknown item keys: {', '.join(map(str, unknown))}", code="e.cmd.noti.add.badfield"
        )
    args = dict(item)
    if "delay" not in args and "eta" not in args:  # an item's own timing wins over the call's
        args.update(defaults)
    kind = args.pop("type", None)
    target = args.pop("target", None)
    alias = args.pop("to", None)
    if target is None:
        target = alias
    if not isinstance(kind, str):
        raise InvalidInput(
            "an item needs a 'type' (sms, weixin, email, webhook)", code="e.cmd.noti.add.badtype"
        )
    if isinstance(args.get("eta"), str):
        args["eta"] = iso_time(args["eta"])
    return kind, target if isinstance(target, str) else "", args


def _chunks(items: Iterable[object], size: int) -> Iterator[list[object]]:
    chunk: list[object] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def add_many(
    notifier: Notifier,
    items: Iterable[object],
    *,
    user: str | None = None,
    defaults: Mapping[str, Any] | None = None,
    chunk_size: int = CHUNK,
    level_cap: int | None = None,
    providers_allowed: frozenset[str] | None = None,
    whole: bool = False,
) -> BulkResult:
    """Validate and store many notifications; see the module docstring.

    ``defaults`` fill keys an item lacks (``schedule_many`` passes its ``delay``);
    ``level_cap`` lowers every item's level to it (an API token's cap), and
    ``providers_allowed`` limits the providers every item may use to these (an API token's:
    :mod:`noti.access.grants`). With ``whole``, every
    item is validated before any is stored, and if one is refused none is stored: the result
    then lists the refusals, and every id is None (the HTTP API's batches).

    Raises:
        InvalidInput: ``e.cmd.noti.add.baditem``: ``items`` is not an iterable of items (a
            string or a single mapping is refused whole, nothing stored).
        StoreUnavailable: Redis cannot be reached (chunks already stored stay stored; the
            result of the call is then unknown for the rest: with a chunk written before
            the one before it is read back, the chunk after the failing one may be stored
            too, so retry with idempotency keys, not from the failing index).
        InvalidConfig: a provider's settings are broken (the chunks before the one holding
            that item are stored whole, nothing from it on).
    """
    with span("noti.notify_many", kind="producer", attributes={"messaging.system": "celery"}) as current:
        result = _add_many(
            notifier,
            items,
            user=user,
            defaults=defaults,
            chunk_size=chunk_size,
            level_cap=level_cap,
            providers_allowed=providers_allowed,
            whole=whole,
        )
        if current is not None:
            current.set_attributes({"noti.count": result.stored, "noti.refused": len(result.refused)})
            if len(result.ids) == 1 and result.ids[0] is not None:
                current.set_attribute("noti.record_id", str(result.ids[0]))
        return result


def _add_many(
    notifier: Notifier,
    items: Iterable[object],
    *,
    user: str | None,
    defaults: Mapping[str, Any] | None,
    chunk_size: int,
    level_cap: int | None,
    providers_allowed: frozenset[str] | None,
    whole: bool,
) -> BulkResult:
    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
        raise InvalidInput(
            f"items must be a list (or another iterable) of mappings, got {type(items).__name__}",
            code="e.cmd.noti.add.baditem",
        )
    result = BulkResult()
    built_chunks: Iterable[_Built] = (
        _build_chunk(
            notifier,
            chunk,
            user=user,
            defaults=defaults or {},
            level_cap=level_cap,
            providers_allowed=providers_allowed,
        )
        for chunk in _chunks(items, chunk_size)
    )
    if whole:
        built_chunks = list(built_chunks)
        if any(built.result.refused for built in built_chunks):
            for built in built_chunks:
                result.extend(built.result, len(result.ids))
            return result
    offset = 0
    in_flight: collections.deque[tuple[_Built, int]] = collections.deque()
    with _Writer(notifier) as writer:
        try:
            for built in built_chunks:
                writer.send(built)
                in_flight.append((built, offset))
                offset += len(built.result.ids)
                if len(in_flight) > AHEAD:
                    done, at = in_flight.popleft()
                    result.extend(_conclude(notifier, done, writer.ids()), at)
        except StoreUnavailable:
            raise
        except BaseException:
            # Nothing past this chunk is stored, but the chunk written before it is finished
            # (its records with an identifier are stored too) before the error is raised.
            with contextlib.suppress(StoreUnavailable):
                while in_flight:
                    done, _ = in_flight.popleft()
                    _conclude(notifier, done, writer.ids())
            raise
        writer.confirm_ahead()  # the last chunk's round trip carries the replicas' wait
        while in_flight:
            done, at = in_flight.popleft()
            result.extend(_conclude(notifier, done, writer.ids()), at)
        writer.confirm()
    return result


@dataclass(slots=True)
class _Built:
    """A validated chunk: its records (plain and identified) and what was refused."""

    result: BulkResult
    plain: list[tuple[int, Notification]]
    identified: list[tuple[int, Notification]]
    #: By record id, the Redis key of its idempotency key (:meth:`Keys.idempotency`).
    keys: dict[str, str]
    #: The delivery messages of the plain records due now (:meth:`Notifier.delivery_messages`).
    messages: dict[str, tuple[str, str]] | None


def _build_chunk(
    notifier: Notifier,
    chunk: list[object],
    *,
    user: str | None,
    defaults: Mapping[str, Any],
    level_cap: int | None = None,
    providers_allowed: frozenset[str] | None = None,
) -> _Built:
    result = BulkResult(ids=[None] * len(chunk))
    plain: list[tuple[int, Notification]] = []
    identified: list[tuple[int, Notification]] = []
    keys: dict[str, str] = {}
    for index, item in enumerate(chunk):
        try:
            kind, target, args = _arguments(item, defaults)
            key = args.pop("idempotency_key", None)
            fallback = args.pop("fallback", None)
            record = notifier.build(
                kind, target, user=user, level_cap=level_cap, providers_allowed=providers_allowed, **args
            )
            standby = None
            if fallback is not None:
                record, standby = notifier.with_fallback(
                    record, fallback, user=user, level_cap=level_cap, providers_allowed=providers_allowed
                )
            if key is not None:
                key = validate_idempotency_key(key, identifier=record.identifier)
                keys[record.id] = notifier.runtime.keys.idempotency(record.creator, key)
                if standby is not None:
                    keys[standby.id] = keys[record.id] + ":fallback"
            (identified if record.identifier is not None else plain).append((index, record))
            if standby is not None:  # stored in the same call as its notification; no index of its own
                plain.append((_FALLBACK, standby))
        except InvalidConfig:
            raise
        except NotiError as exc:
            result.refused.append(Refused(index, exc.code, exc.message))
        except TypeError as exc:  # e.g. a non-string field name
            result.refused.append(Refused(index, "e.cmd.noti.add.baditem", str(exc)))
    messages = None
    if notifier.publisher.shares_store:
        messages = notifier.delivery_messages(record for _, record in plain)
    return _Built(result, plain, identified, keys, messages)


class _Writer:
    """Stores validated chunks. When delivery messages go to the store's Redis, a chunk's
    ``create.lua`` calls are written at once and their replies read one chunk later
    (:class:`CreatePipeline`), so Redis stores a chunk while the next is validated; else
    each chunk is stored and published before the next (:meth:`Notifier.store_and_queue`).
    """

    def __init__(self, notifier: Notifier) -> None:
        self._notifier = notifier
        self._stored: collections.deque[list[str]] = collections.deque()
        self._pipeline: CreatePipeline | None = None
        if notifier.publisher.shares_store:
            self._pipeline = notifier.runtime.store.create_pipeline(
                idempotency_ttl_s=notifier.runtime.settings.idempotency_ttl_s
            )

    def __enter__(self) -> _Writer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._pipeline is not None:
            self._pipeline.__exit__(*exc_info)

    def send(self, built: _Built) -> None:
        """Store the plain records of ``built`` (see :meth:`ids`)."""
        records = [record for _, record in built.plain]
        if self._pipeline is not None:
            self._pipeline.send(records, messages=built.messages, idempotency_keys=built.keys)
        elif records:
            self._stored.append(self._notifier.store_and_queue(records, idempotency_keys=built.keys))
        else:
            self._stored.append([])

    def ids(self) -> list[str]:
        """For the oldest chunk sent and not read yet, per plain record: its id, or the id
        its idempotency key named."""
        return self._pipeline.ids() if self._pipeline is not None else self._stored.popleft()

    def confirm_ahead(self) -> None:
        """After the last chunk is sent: write the wait for the replicas behind it (see
        :meth:`CreatePipeline.confirm_ahead`)."""
        if self._pipeline is not None:
            self._pipeline.confirm_ahead()

    def confirm(self) -> None:
        """Once every chunk is read: wait for the replicas the store asks for (the chunks
        stored through :meth:`Notifier.store_and_queue` were confirmed there)."""
        if self._pipeline is not None:
            self._pipeline.confirm()


def _conclude(notifier: Notifier, built: _Built, ids: list[str]) -> BulkResult:
    """The result of a stored chunk; its records with an identifier are stored here (each
    needs its own script)."""
    result, plain, identified = built.result, built.plain, built.identified
    if plain and built.messages is not None:
        notifier.published([record for _, record in plain], ids, built.messages)
    if plain:
        repeats = [i for (_, record), i in zip(plain, ids, strict=True) if i != record.id]
        found = notifier.runtime.store.find_many(repeats)
        gone = {i for i, existing in zip(repeats, found, strict=True) if existing is None}
        for (index, _), record_id in zip(plain, ids, strict=True):
            if index == _FALLBACK:
                continue
            if record_id in gone:  # the key names a record deleted since
                result.refused.append(
                    Refused(index, "e.cmd.noti.add.keyused", f"the idempotency key names deleted {record_id}")
                )
            else:
                result.ids[index] = record_id
    for index, record in identified:  # replacing by identifier needs its own script
        result.ids[index] = notifier.store_one(record).id
    result.refused.sort(key=lambda r: r.index)
    return result
