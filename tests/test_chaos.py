"""The chaos run (issue 19): its short form end to end, and its reconciliation's verdicts.

The short form (``python -m chaos --short --fsync always``: 1,000 notifications through four
real workers and beat, two worker SIGKILLs, one Redis restart) must lose nothing, leave
nothing stuck, and explain every duplicate send by a fault it made. The reconciliation
tests feed it made-up runs, so each verdict is shown to fail when it should.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from chaos.cluster import RedisKill
from chaos.plan import SHORT, Call, build_plan
from chaos.producer import CallResult
from chaos.providers import ACCEPTED, DEDUPED, PERMANENT, TEMPORARY, Attempt
from chaos.reconcile import reconcile
from chaos.run import RunData, WorkerKill
from tests.conftest import ROOT

T0 = 1_000_000.0


def _data(fsync: str = "always") -> RunData:
    data = RunData(build_plan(1, SHORT, notifications=10), fsync, "os", Path("/nonexistent"), t0=T0)
    data.faults_end = data.drained_at = data.finished_s = T0 + 30
    data.started_s = T0
    return data


def _returned(data: RunData, record_id: str, seq: int, at: float, **call: object) -> None:
    fields = {"user": "u1", "channel": "sms", "level": 1, "kind": "plain", **call}
    made = Call(at_s=at, seq=seq, version=0, **fields)  # type: ignore[arg-type]
    data.results.append(CallResult(made, started=T0 + at, returned=T0 + at + 0.001, record_id=record_id))


def _accept(
    data: RunData, record_id: str, seq: int, at: float, sender: str = "w1.1", outcome: str = ACCEPTED
) -> None:
    data.attempts.append(Attempt(T0 + at, "sms", record_id, f"c{seq}v0", sender, outcome))


#: The steps a record's timeline ends with, by its status (noti/core/timeline.py).
_ENDINGS = {
    "10": [{"ev": "attempt", "outcome": "ok"}, {"ev": "sent"}],
    "0": [{"ev": "attempt", "outcome": "failed"}, {"ev": "failed"}, {"ev": "dead_letter"}],
    "-1": [{"ev": "attempt", "outcome": "failed"}, {"ev": "invalid"}, {"ev": "dead_letter"}],
    "1": [],
}


def _done(data: RunData, record_id: str, status: str = "10") -> None:
    """The record at the end, with the timeline its sends so far would have left: a claim whose
    sender died per acceptance but the last, then the claim and the steps of its status."""
    data.records[record_id] = {"noti_st": status}
    data.indexed.add(record_id)
    accepted = sum(1 for a in data.attempts if a.record_id == record_id and a.outcome in (ACCEPTED, DEDUPED))
    died = [{"ev": "claimed"}] * max(0, accepted - 1)
    data.timelines[record_id] = [*died, {"ev": "claimed"}, *_ENDINGS[status]] if status != "1" else died


def test_a_delivered_run_passes() -> None:
    data = _data()
    _returned(data, "r1", 1, 1.0)
    _accept(data, "r1", 1, 1.5)
    _done(data, "r1")
    report = reconcile(data)
    assert report.ok, report.failures
    assert report.counts["delivered"] == 1


def test_an_id_never_received_and_gone_from_redis_is_lost_and_fails_the_run() -> None:
    data = _data()
    _returned(data, "r1", 1, 1.0)
    report = reconcile(data)
    assert report.counts["lost"] == 1
    assert not report.ok and any("lost" in f for f in report.failures)


def test_a_loss_in_the_second_an_everysec_aof_cut_dropped_is_explained() -> None:
    data = _data("everysec")
    _returned(data, "r1", 1, 9.5)
    data.redis_kills.append(RedisKill(killed_at=T0 + 10, kept_until=T0 + 9.0, cut_bytes=100, up_at=T0 + 12))
    report = reconcile(data)
    assert report.counts["lost"] == 1 and report.lost[0]["explained"]
    assert report.ok, report.failures


def test_a_call_whose_return_was_noted_just_after_the_kill_is_in_the_cut() -> None:
    # given a call made before the kill, whose thread noted its return 10 ms after it
    data = _data("everysec")
    made = Call(9.99, 1, 0, "u1", "sms", 1, "plain")
    data.results.append(CallResult(made, started=T0 + 9.99, returned=T0 + 10.01, record_id="r1"))
    data.redis_kills.append(RedisKill(killed_at=T0 + 10, kept_until=T0 + 9.0, cut_bytes=100, up_at=T0 + 12))
    # then its loss is the cut's
    report = reconcile(data)
    assert report.lost[0]["explained"] and report.ok, report.failures


def test_a_loss_before_the_cut_is_not_explained() -> None:
    data = _data("everysec")
    _returned(data, "r1", 1, 5.0)
    data.redis_kills.append(RedisKill(killed_at=T0 + 10, kept_until=T0 + 9.0, cut_bytes=100, up_at=T0 + 12))
    assert not reconcile(data).ok


def test_a_waiting_record_after_the_deadline_is_stuck() -> None:
    data = _data()
    _returned(data, "r1", 1, 1.0)
    _done(data, "r1", "1")
    report = reconcile(data)
    assert report.counts["stuck"] == 1 and not report.ok


def test_done_without_the_provider_receiving_it_fails() -> None:
    data = _data()
    _returned(data, "r1", 1, 1.0)
    _done(data, "r1")
    assert not reconcile(data).ok


def test_failed_and_invalid_need_the_providers_refusals_and_a_dead_letter() -> None:
    data = _data()
    _returned(data, "r1", 1, 1.0)
    _returned(data, "r2", 2, 1.0)
    _done(data, "r1", "0")
    _done(data, "r2", "-1")
    data.attempts.append(Attempt(T0 + 2, "sms", "r1", "c1v0", "w1.1", TEMPORARY))
    data.attempts.append(Attempt(T0 + 2, "sms", "r2", "c2v0", "w1.1", PERMANENT))
    data.dead_letters.update({"r1": 1, "r2": 1})
    report = reconcile(data)
    assert report.ok, report.failures
    assert (report.counts["failed"], report.counts["invalid"], report.counts["dead_lettered"]) == (1, 1, 2)
    del data.dead_letters["r2"]
    data.attempts = [a for a in data.attempts if a.record_id != "r1"]
    failures = reconcile(data).failures
    assert any("outcome without evidence" in f for f in failures)
    assert any("final without dead letter" in f for f in failures)


def test_a_repeat_after_its_sender_was_killed_is_explained_and_one_without_a_fault_is_not() -> None:
    data = _data()
    _returned(data, "r1", 1, 1.0)
    _accept(data, "r1", 1, 2.0, sender="w1.1")
    _accept(data, "r1", 1, 14.0, sender="w2.1")
    _done(data, "r1")
    data.worker_kills.append(WorkerKill(T0 + 2.02, 1, "w1.1"))
    report = reconcile(data)
    assert report.ok, report.failures
    assert report.duplicates[0]["kind"] == "sent twice" and report.duplicates[0]["explained"]
    data.worker_kills.clear()
    report = reconcile(data)
    assert not report.ok and not report.duplicates[0]["explained"]


def test_a_repeat_is_put_down_to_the_aof_cut_by_when_the_answer_was_written() -> None:
    # given a send answered 6.5 s late, in the second before Redis was killed, and sent again
    data = _data("everysec")
    _returned(data, "r1", 1, 1.0)
    first = Attempt(T0 + 3.0, "sms", "r1", "c1v0", "w1.1", ACCEPTED, late_s=6.5, answered_at=T0 + 9.5)
    data.attempts.append(first)
    _accept(data, "r1", 1, 14.0, sender="w2.1")
    _done(data, "r1")
    data.redis_kills.append(RedisKill(killed_at=T0 + 10, kept_until=T0 + 9.0, cut_bytes=1, up_at=T0 + 12))
    # then the cut dropped its recorded outcome
    report = reconcile(data)
    assert report.ok, report.failures
    assert report.duplicates[0]["cause"] == "claim or recorded outcome dropped by the AOF cut"
    # and had it been answered at once, seven seconds before the kill, nothing would explain it
    first.late_s, first.answered_at = 0.0, T0 + 3.0
    assert not reconcile(data).ok


def test_a_repeat_an_idempotent_provider_dropped_is_counted_as_deduped() -> None:
    data = _data()
    _returned(data, "r1", 1, 1.0, channel="webhook")
    data.attempts.append(Attempt(T0 + 2, "webhook", "r1", "c1v0", "w1.1", ACCEPTED))
    data.attempts.append(Attempt(T0 + 14, "webhook", "r1", "c1v0", "w2.1", DEDUPED))
    data.worker_kills.append(WorkerKill(T0 + 3, 1, "w1.1"))
    _done(data, "r1")
    report = reconcile(data)
    assert report.ok, report.failures
    assert [d["kind"] for d in report.duplicates] == ["provider-deduped"]


def test_a_delayed_notification_sent_before_its_time_fails() -> None:
    data = _data()
    _returned(data, "r1", 1, 1.0, delay_s=10.0, kind="delayed")
    _accept(data, "r1", 1, 5.0)
    _done(data, "r1")
    report = reconcile(data)
    assert report.anomalies["sent_early"] and not report.ok


def test_a_delayed_call_retried_after_raising_counts_its_delay_from_its_first_try() -> None:
    # given a call that raised as Redis went away, having stored its record, and was retried
    data = _data()
    call = Call(1.0, 1, 0, "u1", "sms", 1, "keyed", 10.0, None, "k1")
    result = CallResult(call, started=T0 + 3.0, returned=T0 + 3.001, record_id="r1")
    result.raised.append((T0 + 1.0, T0 + 1.01))
    data.results.append(result)
    # when it is sent 10.5 s after the first try (8.5 s after the retry that returned its id)
    _accept(data, "r1", 1, 11.5)
    _done(data, "r1")
    # then it was not early: the record may have been made by the first try
    report = reconcile(data)
    assert report.ok, report.failures


def test_a_debounced_record_sent_with_replaced_content_fails() -> None:
    data = _data()
    _returned(data, "r1", 1, 1.0, delay_s=5.0, identifier="d1", kind="debounce")
    data.results.append(
        CallResult(
            Call(2.0, 1, 1, "u1", "sms", 1, "debounce", 5.0, "d1"),
            started=T0 + 2.0,
            returned=T0 + 2.001,
            record_id="r1",
        )
    )
    _accept(data, "r1", 1, 7.5)  # the tag of version 0, after version 1 replaced it
    _done(data, "r1")
    report = reconcile(data)
    assert report.anomalies["stale_content"] and not report.ok


@pytest.mark.slow
def test_a_status_its_timeline_does_not_end_with_fails_the_run() -> None:
    data = _data()
    _returned(data, "r1", 1, 1.0)
    _accept(data, "r1", 1, 1.5)
    _done(data, "r1")
    assert reconcile(data).ok
    data.timelines["r1"] = [{"ev": "claimed"}, {"ev": "attempt", "outcome": "ok"}, {"ev": "retry"}]
    report = reconcile(data)
    assert report.anomalies["timeline_disagrees"][0]["last_step"] == "retry"
    assert any("timeline disagrees" in f for f in report.failures)


def test_an_acceptance_the_timeline_does_not_tell_fails_unless_a_claim_died_or_the_aof_was_cut() -> None:
    data = _data()
    _returned(data, "r1", 1, 1.0)
    _accept(data, "r1", 1, 2.0)
    _accept(data, "r1", 1, 14.0)
    _done(data, "r1")
    data.worker_kills.append(WorkerKill(T0 + 2.02, 1, "w1.1"))
    assert reconcile(data).ok  # the first claim's sender died: its send is told by the claim
    data.timelines["r1"] = [{"ev": "claimed"}, {"ev": "attempt", "outcome": "ok"}, {"ev": "sent"}]
    report = reconcile(data)
    assert report.anomalies["timeline_cannot_explain"] == [
        {"id": "r1", "accepted": 2, "ok": 1, "unfinished": 0}
    ]
    data.redis_kills.append(RedisKill(killed_at=T0 + 3.0, kept_until=T0 + 1.9, cut_bytes=10, up_at=T0 + 4.0))
    assert not reconcile(data).anomalies.get("timeline_cannot_explain")


def test_the_short_chaos_run_loses_nothing_and_explains_every_duplicate(tmp_path: Path) -> None:
    run = _chaos(tmp_path, "--fsync", "always", "--digests", "off")["runs"][0]
    counts = run["counts"]
    assert counts["ids_returned"] >= 1000, counts
    assert counts.get("lost", 0) == 0 and counts.get("stuck", 0) == 0, counts
    assert all(d["explained"] for d in run["duplicates"]), run["duplicates"]
    assert counts["delivered"] + counts.get("failed", 0) + counts.get("invalid", 0) == counts["ids_returned"]
    assert run["faults"]["worker_sigkills"] == 2 and len(run["faults"]["redis_restarts"]) == 1
    assert not run["faults"]["crashes"]
    # every record's end and every send is told by its timeline
    assert counts["explained_by_timeline"] >= counts["ids_returned"], counts
    assert not run["anomalies"].get("timeline_disagrees") and not run["anomalies"].get(
        "timeline_cannot_explain"
    )


@pytest.mark.slow
def test_the_short_digest_chaos_run_loses_and_doubles_nothing(tmp_path: Path) -> None:
    digests = _chaos(tmp_path, "--digests", "only")["digests"]
    assert digests["ok"] and digests["events_acknowledged"] >= 200, digests
    assert digests["events_lost"] == digests["events_doubled"] == digests["digests_doubled"] == []
    # every recipient's events made a digest (how many windows each closed depends on the load)
    assert digests["windows"] == digests["digest_records"] >= 20, digests
    assert digests["worker_kills"] >= 2 and digests["redis_kills"] == 2, digests


def _digest_verdict(
    records: list[tuple[str, str, str, tuple[int, ...]]], acked: list[int], accepted: dict[str, int]
) -> Any:
    from chaos.digests import DigestRecord, DigestReport, judge

    report = DigestReport("always")
    judge(report, [DigestRecord(*r) for r in records], {n: "w" for n in acked}, [], accepted, 0)
    return report


def test_the_digest_verdicts_pass_a_clean_run_and_fail_each_fault() -> None:
    clean = [("r1", "w1", "done", (1, 2)), ("r2", "w2", "dead", (3,))]
    assert _digest_verdict(clean, [1, 2, 3], {"r1": 1}).ok
    lost = _digest_verdict(clean, [1, 2, 3, 4], {})
    assert not lost.ok and lost.events_lost == [4]
    doubled = _digest_verdict([*clean, ("r3", "w3", "done", (2,))], [1, 2, 3], {})
    assert not doubled.ok and doubled.events_doubled == [2]
    two_notices = _digest_verdict([*clean, ("r3", "w1", "done", ())], [1, 2, 3], {})
    assert not two_notices.ok and two_notices.digests_doubled == ["w1"]
    sent_twice = _digest_verdict(clean, [1, 2, 3], {"r1": 2})
    assert not sent_twice.ok and sent_twice.digests_doubled == ["r1"]
    stuck = _digest_verdict([("r1", "w1", "waiting", (1,))], [1], {})
    assert not stuck.ok and stuck.not_final == ["r1"]


def _chaos(tmp_path: Path, *args: str) -> Any:
    """The report of ``python -m chaos --short ARGS`` (it must pass)."""
    if shutil.which("redis-server") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("redis-server is needed")
        pytest.skip("redis-server is not installed")
    path = tmp_path / "chaos.json"
    done = subprocess.run(
        [sys.executable, "-m", "chaos", "--short", *args, "--json", str(path)],
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if not k.startswith("NOTI_")},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout[-8000:] + done.stderr[-4000:]
    return json.loads(path.read_text())
