"""What one chaos run observed, indexed for the reconciliation (:mod:`chaos.reconcile`,
:mod:`chaos.causes`): calls by record id and by notification, provider attempts by record
id, worker kills by incarnation, and the AOF cuts of the Redis restarts."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from chaos.cluster import RedisKill
from chaos.producer import CallResult
from chaos.providers import ACCEPTED, DEDUPED, Attempt
from chaos.run import RunData

__all__ = ["Facts", "percentiles", "record_info"]


def percentiles(values: list[float]) -> dict[str, float | int | None]:
    """n, p50, p95, p99 and max of ``values`` (seconds, 3 decimals)."""
    if not values:
        return {"n": 0, "p50": None, "p95": None, "p99": None, "max": None}
    ordered = sorted(values)

    def at(p: float) -> float:
        return round(ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))], 3)

    return {"n": len(ordered), "p50": at(50), "p95": at(95), "p99": at(99), "max": round(ordered[-1], 3)}


class Facts:
    """Indexes over one run's data (``data``)."""

    def __init__(self, data: RunData) -> None:
        self.data = data
        self.by_id: dict[str, list[CallResult]] = defaultdict(list)
        self.by_seq: dict[int, list[CallResult]] = defaultdict(list)
        for result in data.results:
            self.by_seq[result.call.seq].append(result)
            if result.record_id:
                self.by_id[result.record_id].append(result)
        self.attempts: dict[str, list[Attempt]] = defaultdict(list)
        for attempt in sorted(data.attempts, key=lambda a: a.at):
            self.attempts[attempt.record_id].append(attempt)
        self.killed = {kill.incarnation: kill.at for kill in data.worker_kills}
        self.cuts = [k for k in data.redis_kills if k.kept_until < k.killed_at]

    def accepts(self, record_id: str) -> list[Attempt]:
        return [a for a in self.attempts.get(record_id, []) if a.outcome in (ACCEPTED, DEDUPED)]

    def rel(self, when: float) -> float:
        return round(when - self.data.t0, 3)

    def cut_covering(self, when: float, until: float | None = None) -> RedisKill | None:
        """The Redis restart whose AOF cut dropped what was written at ``when`` (or at some
        time from ``when`` to ``until``)."""
        last = when if until is None else until
        return next((k for k in self.cuts if k.kept_until < last and when <= k.killed_at), None)

    def cut_for(self, result: CallResult | None) -> RedisKill | None:
        """The Redis restart whose AOF cut may have dropped what the call wrote: Redis wrote
        it between the call's first try and its return (a thread may note the return a
        little late), and before the kill."""
        if result is None or result.returned is None:
            return None
        first_try, returned = result.raised[0][0] if result.raised else result.started, result.returned
        return next((k for k in self.cuts if first_try <= k.killed_at and returned > k.kept_until), None)

    def first_call(self, record_id: str) -> CallResult | None:
        """The call that returned ``record_id`` first (the one that made it)."""
        returned = [r for r in self.by_id.get(record_id, []) if r.returned is not None]
        return min(returned, key=lambda r: r.returned or 0.0) if returned else None

    def due(self, record_id: str, before: float) -> tuple[float | None, CallResult | None]:
        """When the record was due, as the calls that returned it (before ``before``) set it,
        and the call that set it."""
        dues = [  # from the call's first try: one that raised may have stored the record
            ((r.raised[0][0] if r.raised else r.started) + (r.call.delay_s or 0.0), r)
            for r in self.by_id.get(record_id, [])
            if r.call.replaces and r.returned is not None and r.returned < before
        ]
        if not dues:
            return None, None
        return max(dues, key=lambda pair: pair[0])


def record_info(run: Facts, record_id: str) -> dict[str, Any]:
    """What the report shows of a record that needs explaining: its fields, calls, attempts."""
    fields = run.data.records.get(record_id) or {}
    keep = (
        "noti_st",
        "noti_errmsg",
        "noti_retry",
        "noti_timeout_at",
        "_owner",
        "_claims",
        "_inflight",
        "noti_c",
    )
    info: dict[str, Any] = {k: fields[k] for k in keep if k in fields}
    info["id"] = record_id
    info["in_delayed_set"] = record_id in run.data.delayed
    info["attempts"] = [(run.rel(a.at), a.sender, a.outcome) for a in run.attempts.get(record_id, [])]
    info["calls"] = [
        {
            "kind": r.call.kind,
            "tag": r.call.tag,
            "returned": run.rel(r.returned or 0),
            "raised": len(r.raised),
        }
        for r in run.by_id.get(record_id, [])
    ]
    return info
