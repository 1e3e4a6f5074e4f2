"""Many notices at once: :func:`notify_many` reads what the notices need for a batch in one
round trip (what :mod:`noti.recipients.snapshot` keeps is not read again) and writes the
batch's ``notify.lua`` calls in another (split from :mod:`noti.recipients.notices`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from noti.errors import NotiError
from noti.inputs import shown
from noti.recipients.notices import STALE
from noti.recipients.request import NoticeRequest, parse_request, refused
from noti.recipients.snapshot import Snapshot
from noti.redis.outage import translate_errors

if TYPE_CHECKING:
    from noti.recipients.notices import Notices, _Prepared

__all__ = ["BULK_BATCH", "NoticeBatch", "notify_many"]

#: Notices written per round trip.
BULK_BATCH = 500
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
    per round trip of reads and one of writes; a bad item is refused alone.

    Raises:
        InvalidInput: ``e.cmd.noti.notify.baditem``: ``items`` is not a list (a number, None, a
        string, a mapping); nothing stored.
        StoreUnavailable: Redis cannot be reached (the batches written before stay).
    """
    if isinstance(items, str | bytes | Mapping) or not isinstance(items, Sequence):
        raise refused("baditem", f"notify_many takes a list of items, got {shown(items)}")
    result = NoticeBatch()
    for start in range(0, len(items), BULK_BATCH):
        _batch(notices, items[start : start + BULK_BATCH], start, result, user, level_cap, providers_allowed)
    return result


def _batch(
    notices: Notices,
    items: Sequence[object],
    offset: int,
    result: NoticeBatch,
    user: str | None,
    level_cap: int | None,
    providers_allowed: frozenset[str] | None,
) -> None:
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
    snapshots: list[Snapshot | None] = [
        notices.snapshots.kept(r) if r is not None else None for r in requests
    ]
    missing = [i for i, r in enumerate(requests) if r is not None and snapshots[i] is None]
    if missing:
        with translate_errors(redis_client):
            pipe = redis_client.pipeline(transaction=False)
            for i in missing:
                notices.snapshots.queue_reads(pipe, requests[i])  # type: ignore[arg-type]
            reads = iter(pipe.execute())
    prepared: list[_Prepared | None] = []
    for i, request in enumerate(requests):
        if request is None:
            prepared.append(None)
            continue
        try:
            snapshot = snapshots[i]
            if snapshot is None:
                profile, stamp, category = next(reads), next(reads), next(reads)
                snapshot = notices.snapshots.from_reads(request, profile, stamp, category)
            prepared.append(notices._prepare(request, snapshot))
        except NotiError as exc:
            prepared.append(None)
            result.refused.append((offset + i, exc.code, exc.message))
    with translate_errors(redis_client):
        pipe = redis_client.pipeline(transaction=False)
        for p in prepared:
            if p is not None:
                notices._script(keys=p.keys, args=p.args, client=pipe)
        answers = iter(pipe.execute())
    for i, p in enumerate(prepared):
        if p is None:
            result.ids.append(None)
            continue
        try:
            answer = next(answers)
            if answer[0] == STALE:  # changed since read: this one again, alone
                request = requests[i]
                assert request is not None
                result.ids.append(notices._make(request, notices._fresh(request, answer)).id)
                continue
            result.ids.append(notices._finish(p, answer).id)
        except NotiError as exc:
            result.ids.append(None)
            result.refused.append((offset + i, exc.code, exc.message))
    result.refused.sort()
