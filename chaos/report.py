"""The chaos table (one column per run) and the details under it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from chaos.causes import CUT, KILLED, KILLED_WAITING, OUTAGE, UNEXPLAINED
from chaos.plan import Plan
from chaos.providers import IDEMPOTENT_CHANNELS
from chaos.reconcile import Report

__all__ = ["details", "table"]


def _n(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _pcts(p: dict[str, Any], keys: Sequence[str] = ("p50", "p95", "p99", "max")) -> str:
    if not p.get("n"):
        return "-"
    return " / ".join(f"{p[k]:.2f}" for k in keys) + f" s (n={p['n']})"


def _dups(report: Report, kind: str, cause: str | None = None) -> int:
    return sum(1 for d in report.duplicates if d["kind"] == kind and (cause is None or d["cause"] == cause))


Row = tuple[str, Callable[[Report], Any]]


def _rows(reports: Sequence[Report]) -> list[Row]:
    c: Callable[[str], Callable[[Report], Any]] = lambda key: lambda r: r.counts.get(key, 0)  # noqa: E731
    rows: list[Row] = [
        ("notifications (intents)", c("intents")),
        ("ids returned by notify()", c("ids_returned")),
        (
            "calls / raised StoreUnavailable (retried)",
            lambda r: (
                f"{_n(r.counts.get('calls'))} / {_n(r.counts.get('calls_that_raised_store_unavailable', 0))}"
            ),
        ),
        ("provider attempts", c("provider_attempts")),
        ("delivered", c("delivered")),
        ("failed (retries exhausted)", c("failed")),
        ("invalid (refused for good)", c("invalid")),
        ("dead-lettered", c("dead_lettered")),
        ("LOST (returned an id, never final)", c("lost")),
        ("  of which explained by the AOF cut", c("lost_explained")),
        ("STUCK (waiting after the drain deadline)", c("stuck")),
        ("done, never received", c("done_never_received")),
        ("DUPLICATED at idempotent providers (webhook)", _idempotent_twice),
        ("  repeats the provider dropped (same webhook-id)", lambda r: _dups(r, "provider-deduped")),
        ("DUPLICATED without idempotency (SMS, e-mail)", lambda r: _dups(r, "sent twice")),
    ]
    for cause in (KILLED_WAITING, KILLED, CUT, OUTAGE, UNEXPLAINED):
        if any(d["cause"] == cause for r in reports for d in r.duplicates):
            rows.append((f"  repeats: {cause}", _cause_count(cause)))
    rows += [
        ("delivered under two record ids", lambda r: len(r.second_records)),
        ("  of which explained by a fault", lambda r: sum(1 for d in r.second_records if d["explained"])),
        (
            "sent early / stale content",
            lambda r: (
                f"{len(r.anomalies.get('sent_early', []))} / {len(r.anomalies.get('stale_content', []))}"
            ),
        ),
        ("delayed: lateness p50 / p95 / p99 / max", lambda r: _pcts(r.timing.get("delayed_lateness_s", {}))),
        (
            "  e-mail and webhooks only",
            lambda r: _pcts(r.timing.get("delayed_email_webhook_lateness_s", {})),
        ),
        (
            "worker SIGKILLs / Redis restarts",
            lambda r: f"{r.faults.get('worker_sigkills', 0)} / {len(r.faults.get('redis_restarts', []))}",
        ),
        (
            "AOF bytes cut at the Redis kills",
            lambda r: ", ".join(str(k["aof_bytes_cut"]) for k in r.faults.get("redis_restarts", [])) or "-",
        ),
        ("processes that crashed", lambda r: len(r.faults.get("crashes", []))),
        ("backlog drained after the faults stopped", lambda r: _drain(r)),
    ]
    if any(r.flood for r in reports):
        rows += [
            (
                "flood: calm's lv-100 SMS p50/p95/p99/max",
                lambda r: _pcts(r.flood.get("calm_level_100_sms_latency_s", {})),
            ),
            (
                "flood: u1-u3's lv-1 SMS p50/p95/p99/max",
                lambda r: _pcts(r.flood.get("plain_level_1_sms_latency_s", {})),
            ),
            (
                "flood: flood's lv-1 SMS p50/p95/p99/max",
                lambda r: _pcts(r.flood.get("flood_level_1_sms_latency_s", {})),
            ),
            ("flood: peak level-1 SMS backlog", lambda r: r.flood.get("flood_backlog_peak")),
        ]
    rows.append(("verdict", lambda r: "PASS" if r.ok else "FAIL"))
    return rows


def _cause_count(cause: str) -> Callable[[Report], int]:
    return lambda report: sum(1 for d in report.duplicates if d["cause"] == cause)


def _idempotent_twice(report: Report) -> int:
    """Notifications an idempotent provider's recipient got twice: a repeat the provider
    could not drop (none can be: it dedupes on the record id), or a second record."""
    repeats = sum(
        1 for d in report.duplicates if d["channel"] in IDEMPOTENT_CHANNELS and d["kind"] == "sent twice"
    )
    return repeats + sum(1 for d in report.second_records if d["channel"] in IDEMPOTENT_CHANNELS)


def _drain(report: Report) -> str:
    drain = report.timing.get("drain_after_faults_s")
    if drain is None:
        return "not by the deadline"
    return f"{drain:.1f} s (last due {report.timing.get('last_due_after_faults_s', 0):.1f} s)"


def table(plan: Plan, reports: Sequence[Report]) -> str:
    """The table: one row per measure, one column per run."""
    rows = [(label, [_n(get(r)) for r in reports]) for label, get in _rows(reports)]
    header = ["", *(f"appendfsync {r.fsync}" for r in reports)]
    width0 = max(len(header[0]), *(len(label) for label, _ in rows))
    widths = [max(len(header[i + 1]), *(len(v[i]) for _, v in rows)) for i in range(len(reports))]
    lines = [
        f"chaos run, seed {plan.seed}, {plan.size.name}: {plan.intents:,} notifications over "
        f"{plan.size.produce_s:.0f} s (SMS, e-mail, webhook), 4 workers + beat",
        "  ".join([header[0].ljust(width0), *(h.rjust(w) for h, w in zip(header[1:], widths, strict=True))]),
        "  ".join(["-" * width0, *("-" * w for w in widths)]),
    ]
    for label, values in rows:
        lines.append(
            "  ".join([label.ljust(width0), *(v.rjust(w) for v, w in zip(values, widths, strict=True))])
        )
    return "\n".join(lines)


def details(report: Report, limit: int = 15) -> str:
    """What needs explaining: failures, each duplicate, lost and stuck ids."""
    out = [f"\n[{report.fsync}] {'PASS' if report.ok else 'FAIL: ' + '; '.join(report.failures)}"]
    for dup in report.duplicates[:limit]:
        out.append(
            f"  duplicate {dup['kind']}: {dup['channel']} {dup['id']} "
            f"at +{dup['first']} s and +{dup['again']} s "
            f"by {' then '.join(dup['by'])}: {dup['cause']} ({dup['detail']})"
        )
    if len(report.duplicates) > limit:
        causes = Counter(d["cause"] for d in report.duplicates)
        out.append(f"  … {len(report.duplicates)} duplicates in all: {dict(causes)}")
    for item in report.second_records[:limit]:
        out.append(f"  second record: {item['tag']} as {', '.join(item['ids'])}: {item['cause']}")
    for item in report.lost[:limit]:
        out.append(f"  lost: {item['id']} returned at +{item['returned_at']} s: {item['cause']}")
    for item in report.stuck[:limit]:
        out.append(f"  stuck: {item}")
    for name, items in report.anomalies.items():
        if name in ("delivered_but_not_done",) or not items:
            continue
        for item in items[:limit]:
            out.append(f"  {name.replace('_', ' ')}: {item}")
    for crash in report.faults.get("crashes", []):
        out.append(f"  crash: {crash['process']} exited {crash['exit_status']}:\n{crash['log_tail']}")
    return "\n".join(out)
