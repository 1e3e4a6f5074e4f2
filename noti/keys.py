"""Every Redis key noti owns, built in one place.

With the default prefix ``noti:``:

==============================  =======  ==================================================
key                             type     holds
==============================  =======  ==================================================
``noti:rec:<id>``               HASH     one notification record (seed field names)
``noti:idx:all``                ZSET     every record id, score = created ms
``noti:idx:user:<user>``        ZSET     ids created by ``<user>``, score = created ms
``noti:idx:st:<st>``            ZSET     ids in status ``<st>``, score = ms it entered it
``noti:idx:waiting``            ZSET     waiting ids, score = -level; equal scores sort by id,
                                         and ids sort by age: "level desc, then age asc"
``noti:delayed``                ZSET     ids due later (retry back-off, lease re-checks),
                                         score = due ms
``noti:dead``                   STREAM   dead letters (capped; see :mod:`noti.deadletter`)
``noti:idem:<key>``             STRING   record id created for an idempotency key (TTL)
``noti:lock:<name>``            STRING   a lease lock (token, PX expiry)
``noti:sandbox:<provider>``     LIST     what the sandbox provider "sent", oldest first
==============================  =======  ==================================================

The Celery broker's keys are kombu's, not ours: one LIST per queue and priority step
(``noti.sms``, ``noti.sms:1`` … ``noti.sms:9``), ``unacked`` / ``unacked_index`` for
messages being worked on, and ``_kombu.binding.*``. RedBeat keeps its schedule and lock
under ``<prefix>beat:``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Keys"]

STATUSES = ("-1", "0", "1", "10")


@dataclass(frozen=True, slots=True)
class Keys:
    """Key builder for one key prefix."""

    prefix: str = "noti:"

    def record(self, record_id: str) -> str:
        return f"{self.prefix}rec:{record_id}"

    @property
    def record_pattern(self) -> str:
        return f"{self.prefix}rec:*"

    @property
    def all_index(self) -> str:
        return f"{self.prefix}idx:all"

    def user_index(self, user: str) -> str:
        return f"{self.prefix}idx:user:{user}"

    def status_index(self, status: int | str) -> str:
        return f"{self.prefix}idx:st:{status}"

    @property
    def status_indexes(self) -> list[str]:
        """The four status indexes, in the order the Lua scripts expect them."""
        return [self.status_index(st) for st in STATUSES]

    @property
    def waiting_index(self) -> str:
        return f"{self.prefix}idx:waiting"

    @property
    def delayed(self) -> str:
        return f"{self.prefix}delayed"

    @property
    def dead_letters(self) -> str:
        return f"{self.prefix}dead"

    def idempotency(self, key: str) -> str:
        return f"{self.prefix}idem:{key}"

    def lock(self, name: str) -> str:
        return f"{self.prefix}lock:{name}"

    def sandbox_outbox(self, provider: str) -> str:
        return f"{self.prefix}sandbox:{provider}"

    @property
    def beat_prefix(self) -> str:
        return f"{self.prefix}beat:"
