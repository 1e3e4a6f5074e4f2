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
*sent twice*; each repeat, and each notification delivered under two record ids, gets its
cause from :mod:`chaos.causes`. One without a fault to explain it fails the run.

**Explained by its timeline**: every record's final status is its timeline's last decisive
step (sent, failed, invalid or revoked; a waiting one's last is a retry or a re-drive, or it has
none), and every acceptance a provider saw is either an attempt the timeline tells (outcome
ok) or the send of an attempt whose sender died before recording it (a claim no outcome
follows), unless a Redis restart's cut AOF dropped the steps written then.

Also checked: no delayed notification was sent before its time, a debounced one was sent
with the content of the last call that returned its id, every failed or invalid record has
its dead letter, no process crashed.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from chaos.causes import key_mismatches, repeats, second_records
from chaos.facts import Facts, percentiles, record_info
from chaos.plan import CALM, FLOOD, PLAIN
from chaos.providers import IDEMPOTENT_CHANNELS, PERMANENT, TEMPORARY
from chaos.run import RunData

__all__ = ["Report", "reconcile"]

#: Clock slack when checking that a delayed notification was not sent early.
EARLY_SLACK_S = 0.05


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


def reconcile(data: RunData) -> Report:
    """The reconciliation of one run (see the module)."""
    run = Facts(data)
    report = Report(data.fsync)
    _outcomes(run, report)
    report.duplicates = repeats(run)
    report.second_records = second_records(run)
    report.anomalies["idempotency_key_gave_two_ids"] = key_mismatches(run)
    _content_and_time(run, report)
    _flood(run, report)
    _faults(run, report)
    _timelines(run, report)
    _verdict(run, report)
    return report


def _outcomes(run: Facts, report: Report) -> None:
    counts: Counter[str] = Counter()
    for record_id in run.by_id:
        fields = run.data.records.get(record_id)
        status = fields.get("noti_st") if fields else None
        accepted = run.accepts(record_id)
        attempts = run.attempts.get(record_id, [])
        if status == "1":
            counts["stuck"] += 1
            report.stuck.append({**record_info(run, record_id), "accepted_by_provider": bool(accepted)})
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
            report.anomalies["done_never_received"].append(record_info(run, record_id))
        else:
            name = {"0": "failed", "-1": "invalid"}.get(str(status), f"status {status}")
            counts[name] += 1
            needed = TEMPORARY if status == "0" else PERMANENT
            errmsg = fields.get("noti_errmsg", "") if fields else ""
            if not any(a.outcome == needed for a in attempts) and "poison" not in errmsg:
                report.anomalies["outcome_without_evidence"].append(record_info(run, record_id))
            if not run.data.dead_letters.get(record_id):
                report.anomalies["final_without_dead_letter"].append(record_id)
        if run.data.dead_letters.get(record_id):
            counts["dead_lettered"] += 1
    orphans = run.data.indexed - set(run.by_id)
    counts["records_no_call_returned"] = len(orphans)
    for record_id in sorted(orphans):
        fields = run.data.records.get(record_id) or {}
        if fields.get("noti_st") == "1":
            report.anomalies["stuck_records_no_call_returned"].append(record_info(run, record_id))
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


def _content_and_time(run: Facts, report: Report) -> None:
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
                    **record_info(run, record_id),
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


#: The other plain users' immediate level-1 SMS: the flood's level, another user.
PLAIN_LEVEL_1 = "plain level 1"


def _flood(run: Facts, report: Report) -> None:
    window = run.data.plan.flood_window
    if window is None:
        return
    start, end = run.data.t0 + window[0], run.data.t0 + window[1]
    plan = run.data.plan
    latencies: dict[str, list[float]] = {CALM: [], FLOOD: [], PLAIN_LEVEL_1: []}
    for result in run.data.results:
        call = result.call
        # the plain users' own level-1 SMS: sent at once, to a target that takes them
        group = (
            PLAIN_LEVEL_1
            if call.user in PLAIN
            and call.channel == "sms"
            and call.level == 1
            and call.delay_s is None
            and call.kind != "key-repeat"
            and call.seq not in plan.bad | plan.flaky
            else call.user
        )
        if group not in latencies or result.returned is None or result.record_id is None:
            continue
        if not start <= result.returned <= end:
            continue
        accepts = run.accepts(result.record_id)
        if accepts:
            latencies[group].append(accepts[0].at - result.returned)
    backlog = [n for t, n in run.data.flood_backlog if start <= t <= end + 5]
    report.flood = {
        "window_s": [round(window[0], 1), round(window[1], 1)],
        "calm_level_100_sms_latency_s": percentiles(latencies[CALM]),
        "flood_level_1_sms_latency_s": percentiles(latencies[FLOOD]),
        "plain_level_1_sms_latency_s": percentiles(latencies[PLAIN_LEVEL_1]),
        "flood_backlog_peak": max(backlog) if backlog else 0,
    }


def _faults(run: Facts, report: Report) -> None:
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


#: The steps that decide a record's status, and what each status's last one may be.
DECISIVE = frozenset({"sent", "failed", "invalid", "revoked", "retry", "requeued"})
OUTCOME_STEPS = DECISIVE | {"dead_letter"}
LAST_FOR_STATUS = {
    "10": {"sent"},
    "0": {"failed"},
    "-1": {"invalid", "revoked"},
    "1": {None, "retry", "requeued"},
}


def _timelines(run: Facts, report: Report) -> None:
    """Each record's status and each acceptance, explained by the record's timeline."""
    explained = 0
    for record_id, fields in run.data.records.items():
        steps = run.data.timelines.get(record_id, [])
        if not fields or fields.get("noti_tl_drop"):
            continue
        events = [s.get("ev") for s in steps]
        last = next((e for e in reversed(events) if e in DECISIVE), None)
        allowed = LAST_FOR_STATUS.get(str(fields.get("noti_st")), set())
        if last not in allowed:
            report.anomalies["timeline_disagrees"].append(
                {"id": record_id, "status": fields.get("noti_st"), "last_step": last, "steps": events}
            )
            continue
        told = sum(1 for s in steps if s.get("ev") == "attempt" and s.get("outcome") == "ok")
        unfinished = sum(
            1
            for i, e in enumerate(events)
            if e == "claimed" and not any(x in OUTCOME_STEPS for x in events[i + 1 : _next_claim(events, i)])
        )
        accepted = run.accepts(record_id)
        if len(accepted) > told + unfinished and not any(run.cut_covering(a.at, a.at + 10) for a in accepted):
            report.anomalies["timeline_cannot_explain"].append(
                {
                    "id": record_id,
                    "accepted": len(accepted),
                    "ok": told,
                    "unfinished": unfinished,
                }
            )
            continue
        explained += 1
    report.counts["explained_by_timeline"] = explained


def _next_claim(events: list[str | None], i: int) -> int:
    return next((j for j in range(i + 1, len(events)) if events[j] == "claimed"), len(events))


def _verdict(run: Facts, report: Report) -> None:
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
        "timeline_disagrees",
        "timeline_cannot_explain",
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
