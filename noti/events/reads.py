"""Reading events: one or many by id (with the processors that died and those that stalled
told apart), selections newest first, the counts of the queue and of each status, how the
last processor stopped. No script and no write: :class:`EventReader` needs only a client and
the keys, and :class:`~noti.events.store.EventStore` adds the processor's steps to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import cast

import redis

from noti.core.keys import Keys
from noti.events.event import Event, EventStatus, event_from_hash, matches
from noti.inputs import could_be_id
from noti.redis.outage import translate_errors

__all__ = ["EventCounts", "EventReader"]

_PAGE = 200


@dataclass(frozen=True, slots=True)
class EventCounts:
    """How many events are where."""

    queued: int  #: not done yet (new + activated): the backlog
    new: int
    activated: int
    done: int
    #: The event at the head of the queue (the next, or the one being processed).
    head: str | None
    #: Events waiting for a listener's retry back-off (counted in ``new``, not ``queued``).
    backoff: int = 0


class EventReader:
    """The events of one key prefix, read."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.redis = client
        self.keys = keys

    def get(self, event_id: str) -> Event | None:
        """The event, or None (also for a value that cannot be an id, without asking Redis)."""
        if not could_be_id(event_id):
            return None
        found = self.get_many([event_id])
        return found[0] if found else None

    def get_many(self, ids: Sequence[str]) -> list[Event]:
        """The events of ``ids`` that exist, in the order given."""
        if not ids:
            return []
        with translate_errors(self.redis):
            pipe = self.redis.pipeline(transaction=False)
            for event_id in ids:
                pipe.hgetall(self.keys.event(event_id))
            rows = pipe.execute()
        return self._with_deaths([event_from_hash(row) for row in rows if row])

    def _with_deaths(self, found: list[Event]) -> list[Event]:
        """``found`` with ``deaths`` and ``stalls`` told apart among the processors that did
        not finish each event (a stall marker says which stalled; the others died)."""
        asked = [(i, name) for i, event in enumerate(found) for name in event.replaced]
        if not asked:
            return found
        with translate_errors(self.redis):
            pipe = self.redis.pipeline(transaction=False)
            for _, name in asked:
                pipe.exists(self.keys.event_stalled(name))
            stalled = pipe.execute()
        out = list(found)
        for (i, _), marked in zip(asked, stalled, strict=True):
            event = out[i]
            out[i] = (
                replace(event, stalls=event.stalls + 1) if marked else replace(event, deaths=event.deaths + 1)
            )
        return out

    def select(
        self,
        *,
        status: EventStatus | None = None,
        user: str | None = None,
        name: str | None = None,
        failed: bool = False,
        limit: int = 100,
    ) -> list[Event]:
        """Events newest first (by arrival), filtered; at most ``limit``. With ``failed``,
        only done events with an error (a listener failed, or poison).

        ``name`` is a name or a pattern with ``*``. One index is read (the status's, else the
        user's, else all events), page by page, and the other filters are applied to it.
        """
        k = self.keys
        if failed:
            status = EventStatus.DONE
        if status is not None:
            index = k.event_status_index(status)
        elif user is not None:
            index = k.event_user_index(user)
        else:
            index = k.event_index
        found: list[Event] = []
        start = 0
        while len(found) < limit:
            with translate_errors(self.redis):
                ids = cast(list[str], self.redis.zrevrange(index, start, start + _PAGE - 1))
            if not ids:
                break
            start += len(ids)
            for event in self.get_many(ids):
                if user is not None and event.user != user:
                    continue
                if name is not None and not matches(name, event.name):
                    continue
                if status is not None and event.status is not status:
                    continue
                if failed and not event.failed:
                    continue
                found.append(event)
                if len(found) >= limit:
                    break
        return found

    def counts(self) -> EventCounts:
        k = self.keys
        with translate_errors(self.redis):
            pipe = self.redis.pipeline(transaction=False)
            pipe.llen(k.event_queue)
            for status in EventStatus:
                pipe.zcard(k.event_status_index(status))
            pipe.lindex(k.event_queue, 0)
            pipe.zcard(k.event_backoff)
            queued, new, activated, done, head, backoff = pipe.execute()
        return EventCounts(int(queued), int(new), int(activated), int(done), head, int(backoff))

    def last_stop(self) -> dict[str, str]:
        """How the last processor stopped (``reason``, ``ms``, ``processed``, …), or {}."""
        with translate_errors(self.redis):
            return cast(dict[str, str], self.redis.hgetall(self.keys.event_stop))
