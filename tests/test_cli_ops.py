"""CLI for delays, bulk files and dead letters."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import noti
from noti.core.attempt import Outcome
from noti.core.deadletter import DeadLetter
from noti.core.record import Status, now_ms
from tests.conftest import ADMIN, ALICE, BOB
from tests.test_cli import run

pytestmark = pytest.mark.bounds

PHONE = "+8613912345678"


def test_add_with_delay_at_and_identifier(rt: Any) -> None:
    delayed = run("add", "sms", "-to", PHONE, "-text", "x", "-delay", "5m").stdout.strip()
    assert rt.store.get(delayed).lease_until_ms >= now_ms() + 290_000
    at = run("add", "sms", "-to", PHONE, "-text", "x", "-at", "2099-01-01T00:00:00+00:00")
    assert at.exit_code == 1 and "more than a year away" in at.stderr
    first = run("add", "sms", "-to", PHONE, "-text", "a", "-delay", "60", "-id", "k1").stdout.strip()
    second = run("add", "sms", "-to", PHONE, "-text", "b", "-delay", "60", "-id", "k1").stdout.strip()
    assert first == second and rt.store.get(first).fields == {"text": "b"}
    bad = run("add", "sms", "-to", PHONE, "-text", "x", "-delay", "soon")
    assert bad.exit_code == 1 and bad.stderr.startswith("e.cmd.noti.add.baddelay: ")
    bad_at = run("add", "sms", "-to", PHONE, "-text", "x", "-at", "noon-ish")
    assert bad_at.exit_code == 1 and bad_at.stderr.startswith("e.cmd.noti.add.baddelay: ")


def test_delayed_list_and_cancel(rt: Any) -> None:
    record_id = run("add", "sms", "-to", PHONE, "-text", "x", "-delay", "60", "-id", "remind").stdout.strip()
    table = run("delayed", "list").stdout
    assert record_id in table and "remind" in table and "1 delayed notification" in table
    assert "WHY" in table and "scheduled" in table
    rows = json.loads(run("delayed", "list", "-json").stdout)
    assert rows[0]["id"] == record_id and rows[0]["due"] >= now_ms() and rows[0]["why"] == "scheduled"
    assert run("delayed", "cancel", "remind").stdout == f"rm sms({record_id})[1] > {PHONE}\n"
    again = run("delayed", "cancel", "remind")
    assert again.exit_code == 1 and again.stderr.startswith("e.cmd.noti.cancel.not_found: ")


def test_add_from_a_jsonl_file_reports_bad_lines_and_stores_the_rest(rt: Any, tmp_path: Path) -> None:
    lines = [json.dumps({"to": PHONE, "text": f"line {i}"}) for i in range(5)]
    lines.insert(2, "{not json")
    lines.insert(4, json.dumps({"to": "12", "text": "bad"}))
    lines.append("")
    lines.append(json.dumps({"type": "email", "to": "a@example.com", "subject": "s", "text": "t"}))
    path = tmp_path / "batch.jsonl"
    path.write_text("\n".join(lines) + "\n")
    result = run("add", "sms", "-f", str(path))
    assert result.exit_code == 1
    assert result.stdout.strip() == "6 added, 2 refused"
    assert result.stderr.splitlines() == [
        "line 3: e.cmd.noti.add.badjson: the line is not valid JSON: "
        "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
        "line 5: e.cmd.noti.add.badtarget: '12' is not a phone number: use E.164 (+8613912345678) "
        "or an 11-digit mainland mobile number",
    ]
    assert rt.store.count() == 6
    clean = tmp_path / "clean.jsonl"
    clean.write_text(json.dumps({"type": "sms", "to": PHONE, "text": "ok"}) + "\n")
    ok = run("add", "-f", str(clean))
    assert ok.exit_code == 0 and ok.stdout.strip() == "1 added, 0 refused"
    assert run("add").exit_code == 2  # neither TYPE nor -f


def _failed_record(rt: Any) -> str:
    record = noti.api.notifier().build("sms", PHONE, text="x", user=ALICE)
    rt.store.create(record)
    rt.store.claim(record.id, owner="w", lease_ms=1000)
    letter = DeadLetter(record.id, "sms", PHONE, 3, "exhausted", "boom", now_ms())
    rt.store.finish(record.id, owner="w", outcome=Outcome(Status.FAILED, "boom", 3), letter=letter)
    return record.id


def test_dead_letter_commands(rt: Any) -> None:
    record_id = _failed_record(rt)
    assert record_id not in run("dead", "list", user=BOB).stdout  # not bob's record
    assert record_id in run("dead", "list", user=ALICE).stdout  # alice's own
    table = run("dead", "list", user=ADMIN).stdout
    assert record_id in table and "exhausted" in table and "1 dead letter" in table
    [entry] = json.loads(run("dead", "list", "-json", user=ADMIN).stdout)
    assert entry["record_id"] == record_id and entry["attempts"] == 3
    shown = run("dead", "show", entry["entry_id"], user=ADMIN).stdout
    assert f"record_id    {record_id}" in shown and "errmsg       boom" in shown
    assert json.loads(run("dead", "show", record_id, "-json", user=ADMIN).stdout)["errmsg"] == "boom"
    retried = run("dead", "retry", record_id, user=ADMIN)
    assert retried.stdout == f"retry sms({record_id}) > {PHONE}\n"
    assert rt.store.get(record_id).status is Status.WAITING
    assert run("dead", "retry", user=ADMIN).exit_code == 2
    _failed_record(rt)
    assert run("dead", "retry", "--all", user=ADMIN).stdout.count("retry sms(") == 1
    _failed_record(rt)
    assert run("dead", "purge", user=ADMIN, stdin="n\n").exit_code == 1  # not confirmed
    assert run("dead", "purge", "--yes", user=ADMIN).stdout == "1 dead letters removed\n"
    missing = run("dead", "show", "nope", user=ADMIN)
    assert missing.exit_code == 1 and missing.stderr.startswith("e.cmd.noti.dead.not_found: ")
