"""Many notices at once: :func:`notify_many` reads what the notices need for a batch in one
round trip (what :mod:`noti.recipients.snapshot` keeps is not read again) and writes the
batch's ``notify.lua`` calls in another (split from :mod:`noti.recipients.notices`).
"""

from __future__ import annotations

import collections
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from noti.core.record import now_ms
from noti.errors import NotiError
from noti.inputs import shown
from noti.recipients.notices import STALE, STALE_TRIES
from noti.recipients.request import NoticeRequest, parse_request, refused
from noti.recipients.snapshot import Snapshot
from noti.redis.outage import translate_errors
from noti.redis.pipelines import ScriptPipeline

if TYPE_CHECKING:
    from noti.recipients.notices import Notices
    from noti.recipients.notify_call import _Prepared

__all__ = ["BULK_BATCH", "NoticeBatch", "notify_many"]

#: Notices prepared and written per round trip, and per ``notify.lua`` call (a call holds
#: Redis for its notices' time: ~2 ms for 100).
BULK_BATCH, PER_CALL = 500, 100
#: Batches written and not yet read back while the next is prepared.
AHEAD = 1
#: What the call sets for every item (the acting user, an API token's limits) and what noti
#: sets itself (the Celery task id): an item naming one is refused.
_CALL_ONLY = frozenset({"user", "level_cap", "providers_allowed", "task_id"})


@dataclass(slots=True)
class NoticeBatch:
    """What :meth:`Notices.notify_many` did: ``ids[i]`` is item i's notice id, or None if it
    was refused (``refused``: index, code, message; nothing of it is stored)."""

    ids: list[str | None] = field(default_factory=list)
    refused: list[tuple[int, str, str]] = field(default_factory=list)

    @property
    def stored(self) -> int:
        return sum(1 for i in self.ids if i is not None)


def notify_many(
    notices: Notices,
    items: Sequence[object],
    *,
    user: str | None = None,
    level_cap: int | None = None,
    providers_allowed: frozenset[str] | None = None,
) -> NoticeBatch:
    """Many notices (each item a mapping of :meth:`Notices.notify`'s arguments), :data:`BULK_BATCH`
    per round trip of reads (what is not kept) and one of writes, :data:`PER_CALL` notices per
    ``notify.lua`` call; a bad item is refused alone. A batch's calls are written without
    waiting and their replies read after the next batch is prepared, so the client and Redis
    work at the same time (as :func:`noti.sending.bulk.add_many` does).

    Raises:
        InvalidInput: ``e.cmd.noti.notify.baditem``: ``items`` is not a list (a number, None, a
            string, a mapping); nothing stored.
        StoreUnavailable: Redis cannot be reached (the batches read back before stay; the
            batch written after the failing one may be stored too: retry with idempotency
            keys, not from the failing index).
    """
    if isinstance(items, str | bytes | Mapping) or not isinstance(items, Sequence):
        raise refused("baditem", f"notify_many takes a list of items, got {shown(items)}")
    result = NoticeBatch()
    client = notices.runtime.redis
    in_flight: collections.deque[_Batch] = collections.deque()
    with ScriptPipeline(client, notices._script) as pipe:
        for start in range(0, len(items), BULK_BATCH):
            batch = _prepare(
                notices, items[start : start + BULK_BATCH], start, result, user, level_cap, providers_allowed
            )
            ready = [p for p in batch.prepared if p is not None and not isinstance(p, str)]
            with translate_errors(client):
                pipe.send(
                    [
                        notices.calls.call_of(ready[i : i + PER_CALL], now_ms())
                        for i in range(0, len(ready), PER_CALL)
                    ]
                )
            in_flight.append(batch)
            if len(in_flight) > AHEAD:
                _conclude(notices, in_flight.popleft(), pipe, result)
        while in_flight:
            _conclude(notices, in_flight.popleft(), pipe, result)
    result.refused.sort()
    return result


@dataclass(slots=True)
class _Batch:
    """A batch's requests and their prepared notices (None: refused), from item ``offset``."""

    offset: int
    requests: list[NoticeRequest | None]
    #: (a digest event's: its window's id, added already)
    prepared: list[_Prepared | str | None]


def _prepare(
    notices: Notices,
    items: Sequence[object],
    offset: int,
    result: NoticeBatch,
    user: str | None,
    level_cap: int | None,
    providers_allowed: frozenset[str] | None,
) -> _Batch:
    requests: list[NoticeRequest | None] = []
    for i, item in enumerate(items):
        try:
            if not isinstance(item, Mapping):
                raise refused("baditem", f"an item is an object of notify's arguments, got {shown(item)}")
            given = sorted(str(k) for k in _CALL_ONLY.intersection(item))
            if given:  # the call's (an API token's) own: an item may not set them
                raise refused("badfield", f"an item cannot set {', '.join(given)}: the call does")
            requests.append(
                parse_request(
                    notices.notifier,
                    **{
                        **item,
                        "user": user,
                        "level_cap": level_cap,
                        "providers_allowed": providers_allowed,
                    },
                )
            )
        except NotiError as exc:
            requests.append(None)
            result.refused.append((offset + i, exc.code, exc.message))
        except TypeError as exc:
            requests.append(None)
            result.refused.append((offset + i, "e.cmd.noti.notify.baditem", str(exc)))
    redis_client = notices.runtime.redis
    snapshots: list[Snapshot | None] = []
    seen: dict[tuple[str, str, str, str, int | None], Snapshot | None] = {}  # per batch: no locks
    for r in requests:
        if r is None:
            snapshots.append(None)
            continue
        key = (r.owner, r.rid, r.category, r.template, r.version)
        if key not in seen:
            seen[key] = notices.snapshots.kept(r)
        snapshots.append(seen[key])
    missing = [i for i, r in enumerate(requests) if r is not None and snapshots[i] is None]
    if missing:
        with translate_errors(redis_client):
            pipe = redis_client.pipeline(transaction=False)
            for i in missing:
                notices.snapshots.queue_reads(pipe, requests[i])  # type: ignore[arg-type]
            reads = iter(pipe.execute())
    prepared: list[_Prepared | str | None] = []
    for i, request in enumerate(requests):
        if request is None:
            prepared.append(None)
            continue
        try:
            snapshot = snapshots[i]
            if snapshot is None:
                profile, stamp, category = next(reads), next(reads), next(reads)
                snapshot = notices.snapshots.from_reads(request, profile, stamp, category)
            if request.digest is not None:  # into its window now: its id is the window's
                prepared.append(notices.digest_sink().add(request, snapshot).id)
                continue
            prepared.append(notices._prepare(request, snapshot))
        except NotiError as exc:
            prepared.append(None)
            result.refused.append((offset + i, exc.code, exc.message))
    return _Batch(offset, requests, prepared)


def _conclude(notices: Notices, batch: _Batch, pipe: ScriptPipeline, result: NoticeBatch) -> None:
    """Read a batch's answers: its notices' ids in ``result``. The stale ones (what they were
    made from changed meanwhile: a template put again while a bulk call runs makes every
    notice of the batches in flight stale) are made again from the fresh values together, in
    one call, not one round trip each."""
    with translate_errors(notices.runtime.redis):
        answers = iter([answer for call in pipe.results() for answer in call])
    stale: list[tuple[int, NoticeRequest]] = []
    for i, p in enumerate(batch.prepared):
        if p is None or isinstance(p, str):
            result.ids.append(p)
            continue
        try:
            answer = next(answers)
            if answer[0] == STALE:  # changed since read: made again below, with the others
                request = batch.requests[i]
                assert request is not None
                notices._fresh(request, answer)
                stale.append((len(result.ids), request))
                result.ids.append(None)
                continue
            result.ids.append(notices._finish(p, answer, lean=True).id)
        except NotiError as exc:
            result.ids.append(None)
            result.refused.append((batch.offset + i, exc.code, exc.message))
    if stale:
        _again(notices, stale, result)


def _again(notices: Notices, stale: list[tuple[int, NoticeRequest]], result: NoticeBatch) -> None:
    """Make ``stale`` notices (each with its item's index: its place in ``result.ids``)
    again from the values kept now, together (:meth:`Notices.make_all`), made at most
    :data:`~noti.recipients.notices.STALE_TRIES` times in all, the batch's call included, then
    refused as ``notify`` refuses it (``e.noti.store.unavailable``)."""
    pending = [(request, None) for _, request in stale]
    made = notices.make_all(pending, tries=STALE_TRIES - 1, lean=True, per_call=PER_CALL)
    for (place, _), notice in zip(stale, made, strict=True):
        if isinstance(notice, NotiError):
            result.refused.append((place, notice.code, notice.message))
        else:
            result.ids[place] = notice.id
