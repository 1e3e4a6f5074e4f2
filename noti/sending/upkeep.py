"""Maintenance beat runs: clean done records, sweep records whose message was lost, trim
dead letters. Each job is idempotent, so a duplicate run is harmless."""

from __future__ import annotations

import logging
from typing import Protocol, cast

from noti.core.record import Channel, now_ms
from noti.redis.outage import translate_errors
from noti.sending.notifier import Publishing
from noti.sending.runtime import Runtime
from noti.sending.traces import record_traces

__all__ = ["Requeuing", "sweep_lost", "trim_dead_letters"]

log = logging.getLogger(__name__)
_PAGE = 1000


class Requeuing(Publishing, Protocol):
    """What the lost-message sweep needs of the Celery layer's publisher: a publisher that
    also knows which queues are empty (:class:`noti.celery.publish.Publisher` fills it, so
    nothing here imports it)."""

    def empty_channels(self) -> set[Channel]:
        """The channels whose queue holds no delivery message (none when not known)."""
        ...


def sweep_lost(
    runtime: Runtime, publisher: Requeuing, *, older_than_s: float, at_ms: int | None = None
) -> int:
    """Queue again the waiting records whose delivery message was lost; how many.

    A record counts as lost when it waits (not delayed, lease expired), no sender has
    touched it for ``older_than_s`` (``lm``), and its channel's queue is empty — so a
    backlog that is merely slow is never duplicated. A duplicate message would be harmless
    anyway: the claim lets one delivery through.
    """
    now = now_ms() if at_ms is None else at_ms
    cutoff = now - int(older_than_s * 1000)
    empty = publisher.empty_channels()
    if not empty:
        return 0
    store, keys = runtime.store, runtime.keys
    lost: list[tuple[str, Channel, int]] = []
    start = 0
    while True:
        with translate_errors(store.redis):
            ids = cast(list[str], store.redis.zrange(keys.waiting_index, start, start + _PAGE - 1))
            pipe = store.redis.pipeline(transaction=False)
            for record_id in ids:
                pipe.hmget(keys.record(record_id), "noti_type", "noti_lv", "noti_timeout_at", "lm", "noti_st")
                pipe.zscore(keys.delayed, record_id)
            rows = pipe.execute()
        for n, record_id in enumerate(ids):
            (kind, level, lease, modified, status), delayed = rows[2 * n], rows[2 * n + 1]
            if status != "1" or delayed is not None or not Channel.known(kind):
                continue
            if int(lease or 0) > now or int(modified or 0) > cutoff or Channel(kind) not in empty:
                continue
            lost.append((record_id, Channel(kind), int(level or 1)))
        if len(ids) < _PAGE:
            break
        start += _PAGE
    if lost:
        # each message carries the trace its record was made in (none: no root span of its own)
        publisher.publish(lost, traces=record_traces(runtime, [item[0] for item in lost]) or None)
        log.warning("sweep: queued %d waiting records again whose messages were lost", len(lost))
    return len(lost)


def trim_dead_letters(runtime: Runtime) -> int:
    """Drop dead letters past the age and size caps; how many went."""
    return runtime.dead_letters.trim()
