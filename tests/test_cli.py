"""The `noti` command line: seed syntax, output formats, errors and exit codes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from typing import Any

import pytest

import noti
from noti.cli import cli
from noti.cli.notify import parse_keep
from noti.core.record import Status
from noti.errors import InvalidInput
from tests.clirunner import cli_runner
from tests.conftest import ADMIN, ALICE, BOB, MEMBER, ROOT, sandbox_outbox
from tests.noti_cli import invoke

pytestmark = pytest.mark.bounds

PHONE = "+8613912345678"
ID = re.compile(r"^[0-9a-z]{26}$")


def run(*args: str, user: str = ALICE, stdin: str | None = None) -> Any:
    """Run the CLI in this process as ``user``; stdout, stderr and exit code on the result."""
    return invoke("--as", user, *args, stdin=stdin)


def test_add_sms_prints_the_new_id(rt: Any) -> None:
    result = run("add", "sms", "-text", "hello", "-to", PHONE, "-lv", "1")
    assert result.exit_code == 0, result.output
    record_id = result.stdout.strip()
    assert ID.match(record_id)
    assert rt.store.get(record_id).fields == {"text": "hello"}


def test_add_weixin_with_the_seed_options(rt: Any) -> None:
    result = run(
        "add",
        "weixin",
        "-tmpl",
        "ngqIpT",
        "-pnb",
        "acct",
        "-to",
        "oOPENID",
        "-url",
        "https://x.cn/o/1",
        "-content",
        '{"first": {"value": "paid"}}',
        "-lv",
        "1",
        "-json",
    )
    data = json.loads(result.stdout)
    assert data["noti_wx_tmpl_id"] == "ngqIpT" and data["noti_wx_pnb"] == "acct"
    assert data["noti_wx_tmpl_url"] == "https://x.cn/o/1"
    assert data["noti_weixin_tmpl_content"] == {"first": {"value": "paid"}}
    assert data["tp"] == "wn_noti" and data["noti_st"] == 1 and data["noti_c"] == ALICE


def test_long_option_forms_work_too(rt: Any) -> None:
    result = run(
        "add", "sms", "--text", "hi", "--to", PHONE, "--level", "3", "--provider", "sandbox", user=ADMIN
    )
    record = rt.store.get(result.stdout.strip())
    assert record.level == 3 and record.provider == "sandbox"


def test_text_and_content_are_read_from_stdin_when_omitted(rt: Any) -> None:
    sms = run("add", "sms", "-to", PHONE, stdin="from stdin\n")
    wx = run("add", "weixin", "-tmpl", "T", "-pnb", "p", "-to", "oX", stdin='{"k": {"value": 1}}')
    assert rt.store.get(sms.stdout.strip()).fields["text"] == "from stdin"
    assert rt.store.get(wx.stdout.strip()).fields["content"] == {"k": {"value": 1}}


def test_json_output_switches(rt: Any) -> None:
    compact = run("add", "sms", "-text", "a", "-to", PHONE, "-json", "-c").stdout
    assert compact.count("\n") == 1 and '"noti_errmsg":null' in compact
    unquoted = run("add", "sms", "-text", "a", "-to", PHONE, "-json", "-q").stdout
    assert '\n  noti_type: "sms"' in unquoted and '"noti_type"' not in unquoted
    no_null = run("add", "sms", "-text", "a", "-to", PHONE, "-json", "-n").stdout
    assert "null" not in no_null and json.loads(no_null)["noti_sms_text"] == "a"
    combined = run("add", "sms", "-text", "a", "-to", PHONE, "-cqn").stdout
    assert combined.startswith('{id:"') and "null" not in combined and "\n" not in combined.strip()
    quiet = run("add", "sms", "-text", "a", "-to", PHONE, "-Q")
    assert quiet.exit_code == 0 and quiet.stdout == ""
    assert rt.store.count() == 5


def test_send_prints_ok_and_ko_lines_in_the_seed_format(configure: Any) -> None:
    rt = configure(providers={"down": {"kind": "sandbox", "fail": "always", "error": "permanent"}})
    good = noti.notify_sms(PHONE, "good", lv=1, user=ADMIN)
    time.sleep(0.002)  # ids sort by age to the millisecond (in no set order within one)
    bad = noti.notify_sms(PHONE, "bad", lv=1, user=ADMIN, provider="down")
    result = run("send", user=ADMIN)
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0] == f"OK [sms]{good} >> {PHONE}:"
    assert lines[1].startswith(f"KO [sms]{bad} >> {PHONE}:e.noti.delivery.permanent: sandbox down refused")
    assert rt.store.get(good).status is Status.DONE and rt.store.get(bad).status is Status.INVALID


def test_send_one_id_with_limit_timeout_and_json(rt: Any) -> None:
    first = noti.notify_sms(PHONE, "1", user=ALICE)
    second = noti.notify_sms(PHONE, "2", user=ALICE)
    one = run("send", second, "-timeout", "5", "-json", "-c")
    [row] = json.loads(one.stdout)
    assert row["id"] == second and row["ok"] is True and row["noti_st"] == 10
    limited = run("send", "-limit", "1")
    assert limited.stdout.startswith(f"OK [sms]{first} >>")
    assert run("send").stdout == ""  # nothing left
    assert [e["id"] for e in sandbox_outbox(rt)] == [second, first]


def test_send_timeout_above_600_is_capped_and_non_positive_refused(rt: Any) -> None:
    record_id = noti.notify_sms(PHONE, "x")
    refused = run("send", "-timeout", "0")
    assert refused.exit_code == 1 and "e.cmd.noti.send.badtimeout" in refused.stderr
    long = run("send", record_id, "-timeout", "100000")
    assert long.exit_code == 0 and long.stdout.startswith("OK ")


def test_send_by_a_user_takes_only_their_own(rt: Any) -> None:
    noti.notify_sms(PHONE, "bob's", user=BOB)
    mine = noti.notify_sms(PHONE, "mine", user=ALICE)
    assert run("send").stdout.splitlines() == [f"OK [sms]{mine} >> {PHONE}:"]
    denied = run("send", "-u", BOB)
    assert denied.exit_code == 1 and denied.stderr.startswith("e.cmd.noti.send.nopvg: ")


def test_list_prints_a_table_and_json(rt: Any) -> None:
    record_id = noti.notify_sms(PHONE, "listed", user=ALICE, lv=1)
    noti.notify_sms(PHONE, "other", user=BOB)
    table = run("list").stdout
    assert "ID" in table and "TARGET" in table and record_id in table and "1 waiting" in table
    assert table.strip().endswith("1 notification")
    rows = json.loads(run("list", "-json").stdout)
    assert [r["id"] for r in rows] == [record_id]
    everyone = json.loads(run("list", "-json", user=MEMBER).stdout)
    assert len(everyone) == 2
    assert json.loads(run("list", "-u", BOB, "-json", "-c", user=ADMIN).stdout)[0]["noti_c"] == BOB
    assert json.loads(run("list", "-st", "10", "-json").stdout) == []
    assert len(json.loads(run("list", "-limit", "1", "-json", user=ADMIN).stdout)) == 1
    denied = run("list", "-u", BOB)
    assert denied.exit_code == 1 and denied.stderr.startswith("e.cmd.noti.list.nopvg: ")


def test_list_by_status(rt: Any) -> None:
    done = noti.notify_sms(PHONE, "d")
    noti.send(done)
    waiting = noti.notify_sms(PHONE, "w")
    assert [r["id"] for r in json.loads(run("list", "-st", "10", "-json").stdout)] == [done]
    assert [r["id"] for r in json.loads(run("list", "-st", "1", "-json").stdout)] == [waiting]
    bad = run("list", "-st", "7")
    assert bad.exit_code == 1 and "e.cmd.noti.list.badst" in bad.stderr


def test_del_prints_the_rm_line_and_enforces_ownership(rt: Any) -> None:
    mine = noti.notify_sms(PHONE, "mine", user=ALICE)
    theirs = noti.notify_sms(PHONE, "theirs", user=BOB)
    assert run("del", mine).stdout == f"rm sms({mine})[1] > {PHONE}\n"
    denied = run("del", theirs)
    assert denied.exit_code == 1 and denied.stderr.startswith("e.cmd.noti.del.nopvg: ")
    assert rt.store.find(theirs) is not None
    missing = run("del", mine)
    assert missing.exit_code == 1 and missing.stderr.startswith("e.cmd.noti.del.not_a_msg: ")
    assert run("del", theirs, user=MEMBER).exit_code == 0


def test_clean_removes_done_records_outside_the_keep_window(rt: Any) -> None:
    old = noti.notify_sms(PHONE, "old")
    new = noti.notify_sms(PHONE, "new")
    noti.send(user=ALICE)
    rt.redis.zadd(rt.keys.status_index(10), {old: 1_000})
    denied = run("clean")
    assert denied.exit_code == 1 and denied.stderr.startswith("e.cmd.noti.clean.nopvg: ")
    result = run("clean", "-keep", "24h", user=MEMBER)
    assert result.stdout == f"rm sms({old})[10] > {PHONE}\n"
    assert rt.store.find(new) is not None
    assert run("clean", "-keep", "0", "-limit", "5", user=ADMIN).stdout == f"rm sms({new})[10] > {PHONE}\n"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("2m", 120), ("2h", 7200), ("3day", 259200), ("1d", 86400), ("30s", 30), ("0", 0), ("1.5h", 5400)],
)
def test_keep_durations(text: str, seconds: float) -> None:
    assert parse_keep(text) == seconds


@pytest.mark.parametrize("text", ["3days!", "forever", "", "-1h", "h"])
def test_bad_keep_is_refused_rather_than_wiping_everything(text: str) -> None:
    with pytest.raises(InvalidInput) as info:
        parse_keep(text)
    assert info.value.code == "e.cmd.noti.clean.badkeep"


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["add", "fax", "-to", PHONE, "-text", "x"], "e.cmd.noti.add.badtype"),
        (["add", "sms", "-text", "x"], "e.cmd.noti.add.badtarget"),
        (["add", "sms", "-to", "12", "-text", "x"], "e.cmd.noti.add.badtarget"),
        (["add", "sms", "-to", PHONE, "-text", ""], "e.cmd.noti.add.badtext"),
        (["add", "sms", "-to", PHONE, "-text", "x" * 1001], "e.cmd.noti.add.badtext"),
        (["add", "sms", "-to", PHONE, "-text", "x", "-lv", "high"], "e.cmd.noti.add.badlv"),
        (["add", "sms", "-to", PHONE, "-text", "x", "-lv", "2.5"], "e.cmd.noti.add.badlv"),
        (
            ["add", "weixin", "-tmpl", "T", "-pnb", "p", "-to", "oX", "-content", "[1]"],
            "e.cmd.noti.add.badcontent",
        ),
        (
            ["add", "weixin", "-tmpl", "T", "-pnb", "p", "-to", "oX", "-content", "{x"],
            "e.cmd.noti.add.badcontent",
        ),
        (["add", "weixin", "-pnb", "p", "-to", "oX", "-content", "{}"], "e.cmd.noti.add.missing"),
        (["add", "email", "-to", "nobody", "-subject", "s", "-text", "t"], "e.cmd.noti.add.badtarget"),
        (["add", "sms", "-to", PHONE, "-text", "x", "-provider", "nope"], "e.cmd.noti.add.providerdenied"),
        (["send", "00000000000000000000000000"], "e.cmd.noti.not_found"),
    ],
)
def test_bad_input_prints_its_code_exits_1_and_stores_nothing(rt: Any, args: list[str], code: str) -> None:
    result = run(*args, stdin="")
    assert result.exit_code == 1
    assert result.stderr.startswith(f"{code}: ") and result.stderr.count("\n") == 1
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert rt.store.count() == 0


def test_usage_errors_exit_2(rt: Any) -> None:
    result = run("add", "sms", "-to", PHONE, "-text", "x", "-retry", "many")
    assert result.exit_code == 2
    assert run("frobnicate").exit_code == 2


def _noti_process(*args: str, **settings: str) -> subprocess.CompletedProcess[str]:
    """``python -m noti ARGS`` in a process of its own, with only ``settings`` (NOTI_…
    variables) of noti's and the sandbox as the SMS provider."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOTI_")}
    env = {**env, "NOTI_CHANNELS__SMS__PROVIDER": "sandbox", **settings}
    command = [sys.executable, "-m", "noti", *args]
    return subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)


@pytest.mark.slow
def test_redis_unreachable_is_one_clear_line(rt: Any) -> None:
    result = _noti_process(
        "add", "sms", "-to", PHONE, "-text", "x", NOTI_REDIS_URL="redis://:secret@127.0.0.1:1/0"
    )
    assert result.returncode == 1
    assert result.stderr.startswith(
        "e.noti.store.unavailable: cannot reach Redis at redis://:***@127.0.0.1:1/0"
    )
    assert result.stderr.count("\n") == 1 and "secret" not in result.stderr


@pytest.mark.slow
def test_a_bad_setting_is_one_clear_line(rt: Any) -> None:
    result = _noti_process("list", NOTI_RETRY_MAX="lots")
    assert result.returncode == 1
    assert result.stderr.startswith("e.noti.config: NOTI_RETRY_MAX: ")


@pytest.mark.slow
def test_console_script_runs_as_the_settings_user(rt: Any, redis_url: str) -> None:
    result = _noti_process(
        "add", "sms", "-to", PHONE, "-text", "x", "-json", "-c", NOTI_REDIS_URL=redis_url, NOTI_USER=BOB
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["noti_c"] == BOB


def test_group_help_lists_the_commands() -> None:
    result = cli_runner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    for command in ("add", "send", "list", "del", "clean"):
        assert command in result.output


def test_get_shows_one_record_and_enforces_ownership(rt: Any) -> None:
    mine = noti.notify_sms(PHONE, "mine", user=ALICE)
    theirs = noti.notify_sms(PHONE, "theirs", user=BOB)
    shown = run("get", mine).stdout
    assert f"id                         {mine}" in shown and "noti_sms_text              mine" in shown
    assert "noti_st                    1" in shown and " UTC" not in shown and "(" in shown
    assert json.loads(run("get", mine, "-json", "-c").stdout)["id"] == mine
    assert [r["id"] for r in json.loads(run("get", mine, theirs, "-json", user=ADMIN).stdout)] == [
        mine,
        theirs,
    ]
    # another user's record is answered as a missing one: the same code and message
    hidden = run("get", theirs)
    missing = run("get", "00000000000000000000000000")
    assert missing.exit_code == 1 and missing.stderr.startswith("e.cmd.noti.not_found: ")
    assert (hidden.exit_code, hidden.stderr) == (
        1,
        missing.stderr.replace("00000000000000000000000000", theirs),
    )
