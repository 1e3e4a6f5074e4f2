"""Reconciling a chaos run: every id a ``notify()`` call returned against what the providers
received, what Redis says at the end, and the faults the run made.

Each returned id is exactly one of:

- **delivered**: a provider accepted it (its first acceptance counts);
- **failed** / **invalid**: final in Redis with that status, never accepted, and the provider
  did refuse it (temporarily / for good) — a final status without such a refusal is an
  *outcome without evidence*;
- **lost**: never accepted and no record left in Redis. With a Redis restart whose AOF was cut
  back (``everysec``), an id whose ``notify()`` returned in the second that was cut is
  *explained*; any other is not;
- **stuck**: its record still waits at the drain deadline;
- **done, never received**: done in Redis although no provider accepted it (a bug).

**Duplicated**: a record accepted more than once. At an idempotent provider (webhooks: the
receiver drops a ``webhook-id`` it has) the repeat is *provider-deduped*, elsewhere it was
*sent twice*. Each repeat gets its cause from the worker incarnation that made the earlier
send (the providers know it) and the faults: that worker SIGKILLed after the provider
accepted and before it recorded the outcome; the recorded outcome lost with the second of
writes an AOF cut dropped; Redis gone before the outcome was recorded. A repeat with none of
these causes is unexplained. A notification delivered under two record ids (an application
retry after ``notify()`` raised once it had stored the record; an idempotency key the AOF
cut dropped) is reported the same way.

Also checked: no delayed notification was sent before its time, a debounced one was sent
with the content of the last call that returned its id, every failed or invalid record has
its dead letter, no process crashed.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from chaos.cluster import RedisKill
from chaos.plan import CALM, FLOOD
from chaos.producer import CallResult
from chaos.providers import ACCEPTED, DEDUPED, IDEMPOTENT_CHANNELS, PERMANENT, TEMPORARY, Attempt, parse_tag
from chaos.run import RunData

__all__ = ["Report", "reconcile"]

#: Clock slack when checking that a delayed notification was not sent early.
EARLY_SLACK_S = 0.05
#: A provider may take a request up to this long after its sender died (the request was
#: on the wire, or waiting for the fake's thread, when the SIGKILL came).
IN_FLIGHT_S = 1.0
#: How long before a Redis kill a send may have been answered whose outcome the outage kept
#: from being recorded (its finish call in flight when Redis went away).
OUTAGE_REACH_S = 2.0


@dataclass
class Report:
    """The reconciliation of one run (``as_json`` for the report file)."""

    fsync: str
    counts: dict[str, int] = field(default_factory=dict)
    lost: list[dict[str, Any]] = field(default_factory=list)
    stuck: list[dict[str, Any]] = field(default_factory=list)
    duplicates: list[dict[str, Any]] = field(default_factory=list)
    second_records: list[dict[str, Any]] = field(default_factory=list)
    anomalies: dict[str, list[Any]] = field(default_factory=lambda: defaultdict(list))
    timing: dict[str, Any] = field(default_factory=dict)
    flood: dict[str, Any] = field(default_factory=dict)
    faults: dict[str, Any] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures

    def as_json(self) -> dict[str, Any]:
        return {
            "fsync": self.fsync,
            "ok": self.ok,
            "failures": self.failures,
            "counts": self.counts,
            "lost": self.lost,
            "stuck": self.stuck,
            "duplicates": self.duplicates,
            "second_records": self.second_records,
            "anomalies": dict(self.anomalies),
            "timing": self.timing,
            "flood": self.flood,
            "faults": self.faults,
        }


def percentiles(values: list[float]) -> dict[str, float | int | None]:
    if not values:
        return {"n": 0, "p50": None, "p95": None, "p99": None, "max": None}
    ordered = sorted(values)

    def at(p: float) -> float:
        return round(ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))], 3)

    return {"n": len(ordered), "p50": at(50), "p95": at(95), "p99": at(99), "max": round(ordered[-1], 3)}


class _Run:
    """Indexes over one run's data."""

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


def reconcile(data: RunData) -> Report:
    run = _Run(data)
    report = Report(data.fsync)
    _outcomes(run, report)
    _duplicates(run, report)
    _second_records(run, report)
    _content_and_time(run, report)
    _flood(run, report)
    _faults(run, report)
    _verdict(run, report)
    return report


def _record_info(run: _Run, record_id: str) -> dict[str, Any]:
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


def _outcomes(run: _Run, report: Report) -> None:
    counts: Counter[str] = Counter()
    for record_id in run.by_id:
        fields = run.data.records.get(record_id)
        status = fields.get("noti_st") if fields else None
        accepted = run.accepts(record_id)
        attempts = run.attempts.get(record_id, [])
        if status == "1":
            counts["stuck"] += 1
            report.stuck.append({**_record_info(run, record_id), "accepted_by_provider": bool(accepted)})
        elif accepted:
            counts["delivered"] += 1
            if status != "10":
                why = "record lost" if status is None else f"status {status} after a later attempt"
                report.anomalies["delivered_but_not_done"].append({"id": record_id, "why": why})
        elif status is None:
            counts["lost"] += 1
            first = run.first_call(record_id)
            returned = first.returned if first is not None and first.returned is not None else 0.0
            cut = run.cut_for(first)
            report.lost.append(
                {
                    "id": record_id,
                    "returned_at": run.rel(returned),
                    "explained": cut is not None,
                    "cause": (
                        f"notify() returned {returned - cut.killed_at:+.3f} s from the Redis kill; "
                        f"the AOF kept writes up to {cut.killed_at - cut.kept_until:.3f} s before the kill"
                        if cut
                        else "no fault explains it"
                    ),
                }
            )
        elif status == "10":
            counts["done_never_received"] += 1
            report.anomalies["done_never_received"].append(_record_info(run, record_id))
        else:
            name = {"0": "failed", "-1": "invalid"}.get(str(status), f"status {status}")
            counts[name] += 1
            needed = TEMPORARY if status == "0" else PERMANENT
            errmsg = fields.get("noti_errmsg", "") if fields else ""
            if not any(a.outcome == needed for a in attempts) and "poison" not in errmsg:
                report.anomalies["outcome_without_evidence"].append(_record_info(run, record_id))
            if not run.data.dead_letters.get(record_id):
                report.anomalies["final_without_dead_letter"].append(record_id)
        if run.data.dead_letters.get(record_id):
            counts["dead_lettered"] += 1
    orphans = run.data.indexed - set(run.by_id)
    counts["records_no_call_returned"] = len(orphans)
    for record_id in sorted(orphans):
        fields = run.data.records.get(record_id) or {}
        if fields.get("noti_st") == "1":
            report.anomalies["stuck_records_no_call_returned"].append(_record_info(run, record_id))
    counts["ids_returned"] = len(run.by_id)
    counts["intents"] = run.data.plan.intents
    counts["calls"] = len(run.data.results)
    counts["calls_that_raised_store_unavailable"] = sum(1 for r in run.data.results if r.raised)
    counts["call_errors"] = sum(1 for r in run.data.results if r.error)
    counts["lost_explained"] = sum(1 for item in report.lost if item["explained"])
    counts["provider_attempts"] = len(run.data.attempts)
    counts["provider_refused_requests"] = sum(1 for a in run.data.attempts if a.refusal)
    for error in [r.error for r in run.data.results if r.error][:5]:
        report.anomalies["call_errors"].append(error)
    for attempt in [a for a in run.data.attempts if a.refusal][:5]:
        report.anomalies["provider_refused_requests"].append(
            f"{attempt.channel} {attempt.record_id}: {attempt.refusal}"
        )
    report.counts = dict(counts)


#: Causes of a repeated send, as the table groups them.
KILLED_WAITING, KILLED, CUT, OUTAGE, UNEXPLAINED = (
    "worker SIGKILLed before the provider's answer reached it",
    "worker SIGKILLed after the answer, before recording it",
    "claim or recorded outcome dropped by the AOF cut",
    "Redis killed before the outcome was recorded",
    "unexplained",
)
#: Time for a provider's answer to reach its sender (loopback, a loaded machine).
ANSWER_TRAVEL_S = 0.05
#: How soon after its answer a send's outcome is recorded, at most, on a loaded machine
#: (for telling whether an AOF cut dropped it).
RECORD_SLACK_S = 0.5


def _repeat_cause(run: _Run, prev: Attempt, cur: Attempt) -> tuple[str, str]:
    """Why ``cur`` was sent although the provider had accepted ``prev``: its class (one of
    the constants above) and the detail. The cut of an AOF comes first: a worker killed
    after it plays no part (the record had gone back to waiting)."""
    # the outcome can only have been recorded once the answer was written; a send in the
    # cut second had its claim (lease) there too: the record went back to waiting
    answered = prev.answered_at if prev.answered_at is not None else prev.at + prev.late_s
    for what, when, slack in (("answered", answered, RECORD_SLACK_S), ("sent", prev.at, 0.0)):
        cut = run.cut_covering(when, when + slack)
        if cut is not None and cur.at > cut.killed_at:
            return (
                CUT,
                f"{what} {cut.killed_at - when:.3f} s before the Redis kill; "
                f"the AOF kept {cut.killed_at - cut.kept_until:.3f} s less",
            )
    killed = run.killed.get(prev.sender)
    if killed is not None and prev.at - IN_FLIGHT_S <= killed <= cur.at:
        if killed < prev.at:
            return KILLED_WAITING, (
                f"worker {prev.sender} SIGKILLed with the request on the wire; "
                f"the provider took it {1000 * (prev.at - killed):.0f} ms later"
            )
        if prev.answered_at is None or killed <= answered + ANSWER_TRAVEL_S:
            held = f", the provider holding its answer {prev.late_s:.1f} s" if prev.late_s else ""
            return KILLED_WAITING, (
                f"worker {prev.sender} SIGKILLed {1000 * (killed - prev.at):.0f} ms after the provider "
                f"accepted{held}"
            )
        return KILLED, (
            f"worker {prev.sender} SIGKILLed {1000 * (killed - answered):.0f} ms after the provider's answer"
        )
    for kill in run.data.redis_kills:
        if kill.killed_at - OUTAGE_REACH_S <= answered <= kill.up_at and cur.at >= kill.killed_at:
            return OUTAGE, f"answered {answered - kill.killed_at:+.2f} s from the Redis kill"
    if prev.sender == cur.sender:
        return UNEXPLAINED, f"worker {prev.sender} sent it twice, no fault in between"
    slow = f" (the provider answered it {prev.late_s:.1f} s late)" if prev.late_s else ""
    return UNEXPLAINED, f"{cur.sender} sent it again while {prev.sender}, not killed, had sent it{slow}"


def _duplicates(run: _Run, report: Report) -> None:
    for record_id in run.attempts:
        accepts = run.accepts(record_id)
        for prev, cur in zip(accepts, accepts[1:], strict=False):
            cause, detail = _repeat_cause(run, prev, cur)
            report.duplicates.append(
                {
                    "id": record_id,
                    "channel": cur.channel,
                    "kind": "provider-deduped" if cur.outcome == DEDUPED else "sent twice",
                    "first": run.rel(prev.at),
                    "again": run.rel(cur.at),
                    "by": [prev.sender, cur.sender],
                    "answer_held_s": round(prev.late_s, 2),
                    "cause": cause,
                    "detail": detail,
                    "explained": cause != UNEXPLAINED,
                }
            )


def _second_records(run: _Run, report: Report) -> None:
    """One notification (tag) accepted under more than one record id, and keyed calls that
    got different ids back."""
    ids_by_tag: dict[str, list[str]] = defaultdict(list)
    for record_id, attempts in run.attempts.items():
        for tag in {a.tag for a in attempts if a.outcome in (ACCEPTED, DEDUPED)}:
            ids_by_tag[tag].append(record_id)
    for tag, ids in ids_by_tag.items():
        if len(ids) < 2:
            continue
        parsed = parse_tag(tag)
        results = run.by_seq.get(parsed[0], []) if parsed else []
        returned = {r.record_id for r in results if r.record_id}
        for extra in sorted(set(ids) - returned) or sorted(ids)[1:]:
            cause, explained = _second_record_cause(run, results, extra in returned)
            channel = results[0].call.channel if results else "?"
            report.second_records.append(
                {
                    "tag": tag,
                    "channel": channel,
                    "ids": sorted(ids),
                    "extra": extra,
                    "cause": cause,
                    "explained": explained,
                }
            )
    for seq, results in run.by_seq.items():
        keyed = [r for r in results if r.call.idempotency_key and r.record_id]
        key_ids = {r.record_id or "" for r in keyed}
        if len(key_ids) > 1:
            first = min(keyed, key=lambda r: r.returned or 0)
            cut = run.cut_for(first)
            report.anomalies["idempotency_key_gave_two_ids"].append(
                {
                    "seq": seq,
                    "ids": sorted(key_ids),
                    "explained": cut is not None,
                    "cause": "the first call's record was in the second the AOF cut dropped"
                    if cut
                    else "no fault explains it",
                }
            )


def _second_record_cause(run: _Run, results: list[CallResult], returned: bool) -> tuple[str, bool]:
    if not returned:
        for result in results:
            for start, end in result.raised:
                for kill in run.data.redis_kills:
                    if kill.killed_at - 1.0 <= end and start <= kill.up_at + 1.0:
                        return (
                            "notify() raised as Redis was killed, after the record was stored; "
                            "the application's retry stored a second one",
                            True,
                        )
        return "a record no call returned, and no call raised while Redis was down", False
    keyed = [r for r in results if r.returned is not None]
    first = min(keyed, key=lambda r: r.returned or 0) if keyed else None
    if run.cut_for(first):
        return "the first record (and its idempotency key) was in the second the AOF cut dropped", True
    return "two calls returned two ids for one notification, no fault explains it", False


def _content_and_time(run: _Run, report: Report) -> None:
    lateness: list[float] = []
    unlimited: list[float] = []
    for record_id, results in run.by_id.items():
        accepts = run.accepts(record_id)
        if not accepts:
            continue
        first = accepts[0]
        due, setter = run.due(record_id, first.at)
        if due is not None and first.at < due - EARLY_SLACK_S:
            cut = run.cut_for(setter)
            report.anomalies["sent_early"].append(
                {
                    **_record_info(run, record_id),
                    "early_s": round(due - first.at, 3),
                    "explained": cut is not None,
                    "cause": "the call that set the due time was in the second the AOF cut dropped"
                    if cut
                    else "no fault explains it",
                }
            )
        if due is not None and any(r.call.delay_s for r in results):
            tried = run.attempts[record_id][0]  # lateness of the first attempt, not of a retry
            lateness.append(tried.at - due)
            if tried.channel != "sms":  # the SMS account's rate limit (the flood) plays no part
                unlimited.append(tried.at - due)
        for accept in accepts:
            before = [
                r for r in results if r.call.replaces and r.returned is not None and r.returned < accept.at
            ]
            if not before:
                continue
            latest = max(before, key=lambda r: r.returned or 0)
            if accept.tag != latest.call.tag:
                cut = run.cut_for(latest)
                report.anomalies["stale_content"].append(
                    {
                        "id": record_id,
                        "sent": accept.tag,
                        "expected": latest.call.tag,
                        "explained": cut is not None,
                    }
                )
    report.timing["delayed_lateness_s"] = percentiles(lateness)
    report.timing["delayed_email_webhook_lateness_s"] = percentiles(unlimited)


def _flood(run: _Run, report: Report) -> None:
    window = run.data.plan.flood_window
    if window is None:
        return
    start, end = run.data.t0 + window[0], run.data.t0 + window[1]
    latencies: dict[str, list[float]] = {CALM: [], FLOOD: []}
    for result in run.data.results:
        if result.call.user not in latencies or result.returned is None or result.record_id is None:
            continue
        if not start <= result.returned <= end:
            continue
        accepts = run.accepts(result.record_id)
        if accepts:
            latencies[result.call.user].append(accepts[0].at - result.returned)
    backlog = [n for t, n in run.data.flood_backlog if start <= t <= end + 5]
    report.flood = {
        "window_s": [round(window[0], 1), round(window[1], 1)],
        "calm_level_100_sms_latency_s": percentiles(latencies[CALM]),
        "flood_level_1_sms_latency_s": percentiles(latencies[FLOOD]),
        "flood_backlog_peak": max(backlog) if backlog else 0,
    }


def _faults(run: _Run, report: Report) -> None:
    data = run.data
    report.faults = {
        "worker_sigkills": len(data.worker_kills),
        "worker_kills": [(run.rel(k.at), k.incarnation) for k in data.worker_kills],
        "redis_restarts": [
            {
                "killed_at": run.rel(k.killed_at),
                "aof_kept_until_s_before_kill": round(k.killed_at - k.kept_until, 3),
                "aof_bytes_cut": k.cut_bytes,
                "down_s": round(k.up_at - k.killed_at, 2),
            }
            for k in data.redis_kills
        ],
        "crashes": data.crashes,
    }
    drain = data.drained_at - data.faults_end if data.drained_at is not None else None
    last_due = max(
        (r.started + (r.call.delay_s or 0) for r in data.results if r.returned is not None),
        default=data.faults_end,
    )
    report.timing.update(
        {
            "drain_after_faults_s": round(drain, 2) if drain is not None else None,
            "last_due_after_faults_s": round(last_due - data.faults_end, 2),
            "producer_lag_s": {user: round(lag, 2) for user, lag in data.producer_lag_s.items()},
            "run_s": round(data.finished_s - data.started_s, 1),
        }
    )


def _verdict(run: _Run, report: Report) -> None:
    counts, fail = report.counts, report.failures
    unexplained_lost = [x for x in report.lost if not x["explained"]]
    if unexplained_lost:
        fail.append(f"{len(unexplained_lost)} lost without a fault that explains it")
    if counts.get("stuck"):
        fail.append(f"{counts['stuck']} stuck (still waiting at the drain deadline)")
    for name in (
        "done_never_received",
        "outcome_without_evidence",
        "final_without_dead_letter",
        "stuck_records_no_call_returned",
    ):
        if report.anomalies.get(name):
            fail.append(f"{len(report.anomalies[name])} {name.replace('_', ' ')}")
    for name in ("stale_content", "idempotency_key_gave_two_ids", "sent_early"):
        bad = [x for x in report.anomalies.get(name, []) if not x["explained"]]
        if bad:
            fail.append(f"{len(bad)} {name.replace('_', ' ')} without a fault that explains it")
    dups = [d for d in report.duplicates if not d["explained"]]
    if dups:
        fail.append(f"{len(dups)} duplicate sends without a fault that explains them")
    seconds = [d for d in report.second_records if not d["explained"]]
    if seconds:
        fail.append(
            f"{len(seconds)} notifications delivered under a second record id "
            "without a fault that explains it"
        )
    idempotent_twice = [
        d for d in report.duplicates if d["channel"] in IDEMPOTENT_CHANNELS and d["kind"] == "sent twice"
    ]
    if idempotent_twice:
        fail.append(f"{len(idempotent_twice)} sent twice to an idempotent provider")
    if run.data.crashes:
        fail.append(f"{len(run.data.crashes)} processes exited without being killed")
    if counts.get("call_errors"):
        fail.append(f"{counts['call_errors']} notify() calls raised something else than StoreUnavailable")
    if counts.get("provider_refused_requests"):
        fail.append(f"{counts['provider_refused_requests']} requests the providers refused as malformed")
    if run.data.fsync == "always" and report.lost:
        fail.append("lost notifications with appendfsync always")
    if not run.data.results or statistics.fmean(1 if r.record_id else 0 for r in run.data.results) < 0.99:
        fail.append("fewer than 99 % of the calls returned an id")
