"""A fast CLI (issue 18, point 6): the commands that only talk to Redis (``noti list``,
``noti get``, ``noti add``) run in a fresh process without importing Celery, kombu, Jinja or
providers they do not use, and print what they printed with everything loaded; ``import noti``
imports none of noti's parts until a name is used.

Each command runs in a fresh subprocess through ``tests/cli_modules.py``, which writes the
process's ``sys.modules`` after the command. Speed itself is measured by ``make bench``
(bench/cli_bench.py), never asserted here.
"""

from __future__ import annotations

import base64
import contextlib
import gc
import io
import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

import noti
from noti.celery.app import app
from noti.celery.process import noti_app
from noti.celery.publish import Publisher
from noti.celery.queues import priority_for_level
from noti.cli import COMMANDS, cli
from noti.cli._output import plain_table, print_rich_table, print_table
from noti.core.record import Channel, Status
from tests.conftest import ADMIN, ALICE, BASE_ENV, BOB, ROOT, sandbox_outbox, wait_until
from tests.test_cli import run

PHONE = "+8613912345678"
#: Packages a command reading or adding records must not import.
HEAVY = ("celery", "kombu", "jinja2", "redbeat", "flower", "rich.progress")
#: What ``noti list`` and ``noti get`` must not import either: bulk adds, dead-letter
#: redrive, the delivery side (providers, sending, leases, rate limits, handlers, number
#: pools), rich for a table the plain layout prints, difflib (for settings errors only),
#: and ``email.parser``, which ``importlib.metadata`` loads to read an installed
#: distribution's metadata: reading records reads none (redis-py is given its version).
NOT_FOR_READING = (
    "noti.sending.bulk",
    "noti.sending.redrive",
    "noti.providers",
    "noti.sending.sender",
    "noti.sending.loop",
    "noti.core.lease",
    "noti.providers.ratelimit",
    "noti.sending.handlers",
    "noti.numpool",
    "noti.events",
    "noti.observe",
    "rich",
    "difflib",
    "email.parser",
)
#: What ``noti add`` must not import: it validates, stores and queues one record (with the
#: checks of its own providers, see below), so no bulk adds, redrive or sending.
NOT_FOR_ADDING = (
    "noti.sending.bulk",
    "noti.sending.redrive",
    "noti.sending.sender",
    "noti.sending.loop",
    "noti.core.lease",
    "noti.providers.ratelimit",
    "noti.sending.handlers",
    "noti.events",
    "noti.observe",
    "rich",
    "difflib",
)


def _loaded(modules: list[str], names: tuple[str, ...]) -> list[str]:
    """The modules of ``modules`` that are one of ``names`` or inside one of them."""
    return [m for m in modules if any(m == n or m.startswith(n + ".") for n in names)]


def _heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if m in HEAVY or m.split(".")[0] in HEAVY]


def _providers(modules: list[str]) -> list[str]:
    return [m for m in modules if m == "noti.providers" or m.startswith("noti.providers.")]


class Fresh:
    """Runs ``noti`` commands in fresh processes on the test database."""

    def __init__(self, redis_url: str, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.runs = 0
        env = {k: v for k, v in os.environ.items() if not k.startswith("NOTI_")}
        self.env = {
            **env,
            **BASE_ENV,
            "NOTI_REDIS_URL": redis_url,
            **{f"NOTI_CHANNELS__{c.name}__PROVIDER": "sandbox" for c in Channel},
        }

    def __call__(
        self, *args: str, user: str = ALICE
    ) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
        self.runs += 1
        out = self.tmp_path / f"run-{self.runs}.json"
        result = subprocess.run(
            [sys.executable, "-m", "tests.cli_modules", str(out), "--as", user, *args],
            env=self.env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        report = json.loads(out.read_text())
        assert report["exit"] == result.returncode
        return result, report


@pytest.fixture
def fresh(redis_url: str, tmp_path: Path) -> Fresh:
    return Fresh(redis_url, tmp_path)


@pytest.mark.slow
def test_list_and_get_print_what_they_print_with_everything_loaded(rt: Any, fresh: Fresh) -> None:
    mine = noti.notify_sms(PHONE, "mine [bold]not markup[/bold]", user=ALICE)
    noti.notify_email("a@example.com", subject="Subject", text="body", html="<p>x</p>", lv=5, user=ALICE)
    theirs = noti.notify_sms(PHONE, "theirs", user=BOB)
    done = noti.notify_sms(PHONE, "done", user=BOB)
    [sent] = noti.send(done, user=ADMIN)  # sent in this process: done (10)
    assert sent.status is Status.DONE
    commands: list[tuple[tuple[str, ...], str]] = [
        (("list",), ALICE),
        (("list",), ADMIN),
        (("list", "-json"), ALICE),
        (("list", "-json", "-c", "-n", "-q"), ADMIN),
        (("list", "-st", "10", "-json"), ADMIN),
        (("list", "-limit", "2", "-u", BOB), ADMIN),
        (("get", mine), ALICE),
        (("get", mine, theirs, "-json"), ADMIN),
        (("get", theirs), ALICE),  # not hers: answered as a missing one
        (("get", "nosuchid"), ALICE),
    ]
    for args, user in commands:
        result, report = fresh(*args, user=user)
        before = run(*args, user=user)  # in this process: Celery, kombu, Jinja all imported
        assert (result.returncode, result.stdout, result.stderr) == (
            before.exit_code,
            before.stdout,
            before.stderr,
        ), args
        assert _heavy(report["modules"]) == [], (args, _heavy(report["modules"]))
        assert _providers(report["modules"]) == [], (args, _providers(report["modules"]))
    assert fresh("get", theirs, user=ALICE)[0].stderr.startswith("e.cmd.noti.not_found")


@pytest.mark.slow
def test_list_get_and_add_import_only_what_they_use(rt: Any, fresh: Fresh) -> None:
    record_id = noti.notify_sms(PHONE, "a plain text", user=ALICE)
    for args in (("list",), ("list", "-json"), ("get", record_id), ("get", record_id, "-json")):
        result, report = fresh(*args)
        assert result.returncode == 0 and record_id in result.stdout, (args, result.stderr)
        assert _loaded(report["modules"], NOT_FOR_READING) == [], args
    result, report = fresh("add", "sms", "-to", PHONE, "-text", "hello")
    assert result.returncode == 0 and rt.store.get(result.stdout.strip()).fields == {"text": "hello"}
    assert _loaded(report["modules"], NOT_FOR_ADDING) == []


def test_a_built_in_provider_kind_loads_without_reading_entry_points(monkeypatch: pytest.MonkeyPatch) -> None:
    import noti.providers
    from noti.providers.sandbox import SandboxProvider

    def no_scan(**_: Any) -> Any:
        raise AssertionError("the installed distributions' entry points were read")

    noti.providers.available_kinds.cache_clear()
    monkeypatch.setattr(noti.providers, "entry_points", no_scan)
    try:
        assert noti.providers.load_kind("sandbox") is SandboxProvider
        with pytest.raises(AssertionError):  # a kind noti does not ship is looked for there
            noti.providers.load_kind("no-such-kind")
    finally:
        noti.providers.available_kinds.cache_clear()


@pytest.mark.slow
def test_the_noti_script_pauses_and_freezes_the_collector_in_its_own_process_only(
    rt: Any, fresh: Fresh
) -> None:
    record_id = noti.notify_sms(PHONE, "x", user=ALICE)
    result, report = fresh("get", record_id)  # as the noti script: console_main
    assert result.returncode == 0
    assert report["gc"]["enabled"] and report["gc"]["frozen"] > 0
    # a command whose API cannot be built (bad settings) resumes the collector all the same
    fresh.env["NOTI_RETRY_MAX"] = "0"
    result, report = fresh("get", record_id)
    assert result.returncode == 1 and result.stderr.startswith("e.noti.config")
    assert report["gc"]["enabled"]
    # main() in a longer-lived process (this one) leaves the collector as it was
    frozen = gc.get_freeze_count()
    assert run("get", record_id).exit_code == 0
    assert gc.isenabled() and gc.get_freeze_count() == frozen


def _strip_tag(envelope: dict[str, Any]) -> dict[str, Any]:
    properties = {k: v for k, v in envelope["properties"].items() if k != "delivery_tag"}
    headers = {k: v for k, v in envelope["headers"].items() if k != "origin"}
    return {**envelope, "properties": properties, "headers": headers}


@pytest.mark.slow
def test_add_runs_without_celery_and_queues_celerys_own_message(rt: Any, fresh: Fresh) -> None:
    result, report = fresh("add", "sms", "-to", PHONE, "-text", "hello", "-lv", "5", "-json", user=ADMIN)
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)
    record = rt.store.get(shown["id"])
    assert record.fields == {"text": "hello"} and record.level == 5 and record.creator == ADMIN
    assert shown == json.loads(run("get", record.id, "-json", user=ADMIN).stdout)  # as `noti get` shows it
    # the message is the one Celery's own publisher (with Celery imported) makes for it
    key = f"noti.sms:{priority_for_level(5)}"
    [written] = [json.loads(m) for m in rt.redis.lrange(key, 0, -1)]
    _, expected = Publisher(app, store_url=rt.settings.redis_url, store_redis=rt.redis).message(
        record.id, Channel.SMS, 5
    )
    assert _strip_tag(written) == _strip_tag(json.loads(expected))
    assert written["headers"]["origin"] == f"gen{report['pid']}@{socket.gethostname()}"
    assert json.loads(base64.b64decode(written["body"]))[0] == [record.id]
    # no Celery, kombu or Jinja; of the providers, only the code of the record's own chain
    # (the sandbox here, with its options' sender-pool part), which checks the message
    # before it is stored; the pool itself is loaded by a send, not by a check
    assert _heavy(report["modules"]) == []
    assert set(_providers(report["modules"])) <= {
        "noti.providers",
        "noti.providers.base",
        "noti.providers.sandbox",
        "noti.providers._sender",
    }
    assert not [m for m in report["modules"] if m.startswith("noti.numpool")]
    # a refused add still refuses, with its code, and stores nothing
    refused, report = fresh("add", "sms", "-to", "not a phone", "-text", "x")
    assert refused.returncode == 1 and refused.stderr.startswith("e.cmd.noti.add.badtarget")
    assert rt.store.count() == 1 and _heavy(report["modules"]) == []


@pytest.mark.slow
def test_a_notification_added_without_celery_is_delivered_by_a_worker(
    start_worker_now: Any, rt: Any, fresh: Fresh
) -> None:
    with start_worker_now():
        result, report = fresh("add", "sms", "-to", PHONE, "-text", "from a fresh CLI", "-lv", "1000")
        assert result.returncode == 0 and _heavy(report["modules"]) == []
        record_id = result.stdout.strip()
        wait_until(lambda: rt.store.get(record_id).status is Status.DONE)
    assert [e["id"] for e in sandbox_outbox(rt)] == [record_id]


def test_origin_is_celerys_anon_nodename(rt: Any) -> None:
    from celery.utils.nodenames import anon_nodename

    publisher = Publisher.for_settings(rt.settings, noti_app, store_redis=rt.redis)
    _, message = publisher.message("01rec", Channel.SMS, 1)
    assert json.loads(message)["headers"]["origin"] == anon_nodename()


def test_the_settings_publisher_writes_what_the_apps_publisher_writes(rt: Any) -> None:
    ours = Publisher.for_settings(rt.settings, noti_app, store_redis=rt.redis)
    apps = Publisher(app, store_url=rt.settings.redis_url, store_redis=rt.redis)
    assert (ours.broker_url, ours.writes_wire_format, ours.shares_store) == (
        apps.broker_url,
        apps.writes_wire_format,
        apps.shares_store,
    )
    assert ours.shares_store
    for level in (1, 7, 100, 1000):
        for channel in Channel:
            key, message = ours.message("01m80bq4ap644zt7ycn1fg7557", channel, level)
            app_key, app_message = apps.message("01m80bq4ap644zt7ycn1fg7557", channel, level)
            assert key == app_key
            assert _strip_tag(json.loads(message)) == _strip_tag(json.loads(app_message))


def test_the_settings_publisher_sends_through_celery_on_another_broker(rt: Any) -> None:
    # a broker noti does not write itself: messages go through noti's app's send_task (in
    # this session that app's broker is the test Redis, so the message can be looked at)
    settings = rt.settings.model_copy(update={"broker_url": "amqp://guest@127.0.0.1:1//"})
    publisher = Publisher.for_settings(settings, noti_app, store_redis=rt.redis)
    assert not publisher.writes_wire_format and not publisher.shares_store
    assert publisher.publish([("01rec", Channel.SMS, 1)]) == 1
    [message] = [json.loads(m) for m in rt.redis.lrange("noti.sms:9", 0, -1)]
    assert message["headers"]["id"] == "01rec" and message["headers"]["task"] == "noti.deliver"


def _fresh_python(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.slow
def test_import_noti_imports_nothing_until_a_name_is_used() -> None:
    out = _fresh_python(
        "import sys, json\n"
        "import noti\n"
        "before = sorted(sys.modules)\n"
        "from noti import notify_sms, Status, configure, NotiError\n"
        "import noti.errors, noti.api, noti.core.record, noti.sending.runtime\n"
        "same = [notify_sms is noti.api.notify_sms, Status is noti.core.record.Status,\n"
        "        configure is noti.sending.runtime.configure, NotiError is noti.errors.NotiError,\n"
        "        noti.notify is noti.api.notify]\n"
        "try:\n"
        "    noti.no_such_name\n"
        "    missing = False\n"
        "except AttributeError:\n"
        "    missing = True\n"
        "from noti import sending\n"  # a subpackage still imports as one
        "from noti.sending import upkeep\n"
        # the sending path's package is not named `send`: it would shadow the API's noti.send()
        "print(json.dumps({'before': before, 'same': same, 'missing': missing,\n"
        "                  'dir': sorted(set(noti.__all__) - set(dir(noti))),\n"
        "                  'send': noti.send is noti.api.send, 'sending': sending.__name__,\n"
        "                  'upkeep': upkeep.__name__, 'celery': 'celery' in sys.modules}))\n"
    )
    data = json.loads(out)
    loaded = [m for m in data["before"] if m.startswith("noti")]
    assert loaded == ["noti"]
    assert not [m for m in data["before"] if m.split(".")[0] in ("celery", "kombu", "pydantic", "redis")]
    assert data["same"] == [True] * 5 and data["missing"] and data["dir"] == []
    assert data["send"] and data["sending"] == "noti.sending"
    assert data["upkeep"] == "noti.sending.upkeep" and not data["celery"]  # noti's core needs no Celery


def test_every_command_of_the_table_loads_under_its_name() -> None:
    ctx = click.Context(cli)
    for name in COMMANDS:
        command = cli.get_command(ctx, name)
        assert command is not None and command.name == name
    shown = CliRunner().invoke(cli, ["--help"]).output
    listed = shown.split("Commands:", 1)[1].split()
    assert set(COMMANDS) <= set(listed)
    assert cli.get_command(ctx, "no-such-command") is None


@pytest.mark.slow
def test_help_and_usage_errors_need_no_command_module(fresh: Fresh) -> None:
    result, report = fresh("no-such-command")
    assert result.returncode == 2 and "No such command" in result.stderr
    assert not [
        m
        for m in report["modules"]
        if m.startswith("noti.cli.") and m != "noti.cli._options" and m != "noti.cli._output"
    ]
    assert "noti.api" not in report["modules"]


def _printed(printer: Any, *args: Any) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        printer(*args)
    return out.getvalue()


RECORD_COLUMNS = ("ID", "TYPE", "LV", "ST", "CREATOR", "TARGET", "RETRY", "CREATED (UTC)", "MESSAGE")
RECORD_ROW = (
    "01m8a5yb4j2sr7626qfjdcbbk9",
    "sms",
    "1",
    "1 waiting",
    "alice",
    "+8613912345678",
    "0/3",
    "2026-11-25 20:21:51",
    "",
)


@pytest.mark.parametrize(
    ("columns", "rows"),
    [
        (RECORD_COLUMNS, [RECORD_ROW] * 3),
        (RECORD_COLUMNS, []),
        (("ONE",), [("",), ("a much longer cell",)]),
        (("A", "B"), [(" leading", "trailing  "), ("two  spaces", "x")]),
        (
            RECORD_COLUMNS,
            [
                (
                    *RECORD_ROW[:-1],
                    "e.provider.rejected: HTTP 400 (code: 12) at 20:21:51, see https://x.cn/?a=b&c=d",
                ),
                (
                    *RECORD_ROW[:5],
                    "https://hooks.example.com/path/with/a/long/name?q=1",
                    "3/3",
                    "-",
                    "\\ back",
                ),
            ],
        ),
        # exactly the width rich lays out without folding, then one more character
        (("A", "B"), [("a" * 100, "b" * 118)]),
        (("A", "B"), [("a" * 100, "b" * 119)]),
        # what only rich lays out: markup, emoji codes, wide characters, newlines
        (("A",), [("[bold]x[/bold]",)]),
        (("A",), [("ok :smile: :100:",)]),
        (("A", "B"), [("短信", "x")]),
        (("A",), [("two\nlines",)]),
    ],
)
def test_tables_print_as_rich_lays_them_out(columns: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    footer = f"{len(rows)} thing{'s' if len(rows) != 1 else ''}"
    assert _printed(print_table, columns, rows, "thing") == _printed(print_rich_table, columns, rows, footer)


def test_the_plain_layout_is_used_when_it_is_exact() -> None:
    assert plain_table(RECORD_COLUMNS, [RECORD_ROW]) is not None
    assert plain_table(("A", "B"), [("a" * 100, "b" * 118)]) is not None
    assert plain_table(("A", "B"), [("a" * 100, "b" * 119)]) is None
    for refused in ("[b]x", ":smile:", "x :100: y", "短信", "tab\there", "line\n"):
        assert plain_table(("A",), [(refused,)]) is None, refused


def test_on_a_terminal_the_header_is_bold_and_the_count_highlighted_as_rich_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")  # a terminal, for rich and for us
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.delenv("NO_COLOR", raising=False)
    rows = [RECORD_ROW] * 2
    ours = _printed(print_table, RECORD_COLUMNS, rows, "notification")
    theirs = _printed(print_rich_table, RECORD_COLUMNS, rows, "2 notifications")
    plain = re.compile(r"\x1b\[[0-9;]*m")
    assert plain.sub("", ours) == plain.sub("", theirs)
    assert ours.startswith("\x1b[1mID ") and ours.endswith("\x1b[1;36m2\x1b[0m notifications\n")
    assert theirs.endswith("\x1b[1;36m2\x1b[0m notifications\n")
    monkeypatch.setenv("NO_COLOR", "1")
    assert _printed(print_table, RECORD_COLUMNS, rows, "notification").endswith(
        "\x1b[1m2\x1b[0m notifications\n"
    )
    monkeypatch.setenv("TERM", "dumb")  # rich: no styles, and 80 columns (the table folds)
    dumb = _printed(print_table, RECORD_COLUMNS, rows, "notification")
    assert dumb == _printed(print_rich_table, RECORD_COLUMNS, rows, "2 notifications")
    assert "\x1b" not in dumb and max(len(line) for line in dumb.splitlines()) <= 80
