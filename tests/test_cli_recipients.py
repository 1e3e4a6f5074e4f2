"""``noti recipient``, ``noti category``, ``noti template``, ``noti notify`` and ``noti get
n…``: every command, its text and JSON output, its errors (``code: message`` on stderr, exit
1, nothing stored), and bulk imports of 1,000-row CSV and JSON-lines files with bad rows."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.conftest import ADMIN, ALICE, BOB, MEMBER
from tests.noti_cli import invoke
from tests.test_hostile_input import snapshot

pytestmark = pytest.mark.bounds

PHONE, EMAIL = "+8613912345678", "ada@example.com"
TEMPLATE = {
    "default_locale": "en",
    "channels": {
        "sms": {"en": {"text": "Order {{ order }} shipped"}, "zh": {"text": "订单 {{ order }} 已发货"}},
        "email": {"en": {"subject": "Order {{ order }}", "text": "Hello {{ recipient.attributes.name }}."}},
    },
}
TEMPLATE_TOML = """default_locale = "en"
description = "from TOML"
[channels.sms.en]
text = "Order {{ order }} shipped"
"""


def run(*args: str, user: str = ALICE, stdin: str | None = None) -> Any:
    """``noti --as USER ARGS`` in this process."""
    return invoke("--as", user, *args, stdin=stdin)


def ok(*args: str, user: str = ALICE, stdin: str | None = None) -> Any:
    result = run(*args, user=user, stdin=stdin)
    assert result.exit_code == 0, (args, result.output)
    return result


def refused(code: str, *args: str, user: str = ALICE, stdin: str | None = None) -> str:
    """The command fails with ``code`` (exit 1, one line on stderr, nothing on stdout)."""
    result = run(*args, user=user, stdin=stdin)
    assert result.exit_code == 1, (args, result.output)
    assert result.stderr.startswith(f"{code}: "), (args, result.stderr)
    assert result.stdout == "", (args, result.stdout)
    return str(result.stderr)


@pytest.fixture
def raw(rt: Any, redis_url: str) -> Any:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


def stored(raw: redis.Redis) -> dict[str, str]:
    return snapshot(raw)


@pytest.fixture
def orders(rt: Any, tmp_path: Path) -> Path:
    """The orders category, alice's recipient 42 and her template order_shipped (its file)."""
    ok("category", "put", "orders", "-channel", "sms=on", user=MEMBER)
    ok("recipient", "put", "42", "-sms", PHONE, "-email", EMAIL, "-locale", "zh-Hant-TW", "-attr", "name=Ada")
    path = tmp_path / "order_shipped.json"
    path.write_text(json.dumps(TEMPLATE))
    ok("template", "put", str(path))
    return path


# --- noti recipient -------------------------------------------------------------------------------


def test_recipient_put_get_update_merge_list_and_del(rt: Any) -> None:
    made = ok("recipient", "put", "42", json.dumps({"addresses": {"email": EMAIL}}), "-sms", PHONE,
              "--sms", "+8613900000000", "-locale", "en-GB", "--timezone", "Europe/London",
              "-quiet-hours", "22:00-07:00", "-attr", "name=Ada", "--attr", "plan=pro")  # fmt: skip
    assert made.stdout == "42 created\n"
    assert ok("recipient", "put", "42", "-sms", PHONE, "-attr", "name=Ada").stdout == "42 replaced\n"
    shown = ok("recipient", "get", "42").stdout
    assert f"sms            {PHONE}\n" in shown and "attr.name      Ada\n" in shown
    assert "locale         -\n" in shown and "email" not in shown  # replaced: only what was given
    # JSON and stdin; the options over the JSON
    profile = {"addresses": {"email": [EMAIL]}, "locale": "zh-Hant-TW", "attributes": {"n": 1}}
    got = json.loads(ok("recipient", "put", "43", "-", "-json", "-timezone", "Asia/Taipei",
                        stdin=json.dumps(profile)).stdout)  # fmt: skip
    assert got["addresses"] == {"email": [EMAIL]} and got["timezone"] == "Asia/Taipei"
    assert got["attributes"] == {"n": 1} and got["locale"] == "zh-Hant-TW"
    assert json.loads(ok("recipient", "get", "43", "-json").stdout) == got
    # update: a merge patch, and options
    patched = json.loads(ok("recipient", "update", "43", '{"locale": null, "attributes": {"plan": "pro"}}',
                            "-email", "b@example.com", "-json").stdout)  # fmt: skip
    assert patched["locale"] is None and patched["attributes"] == {"n": 1, "plan": "pro"}
    assert patched["addresses"] == {"email": ["b@example.com"]}
    assert "quiet_hours    off\n" in ok("recipient", "update", "43", "-quiet-hours", "off").stdout
    # merge 43 into 42: 43 goes
    merged = json.loads(ok("recipient", "merge", "42", "43", "-json").stdout)
    assert merged["addresses"] == {"sms": [PHONE], "email": ["b@example.com"]}
    refused("e.cmd.noti.rcpt.not_found", "recipient", "get", "43")
    # list: a table, JSON, pages
    for n in range(3):
        ok("recipient", "put", f"u{n}", "-address", f"webhook=https://example.com/{n}")
    table = ok("recipient", "list").stdout.splitlines()
    assert table[0].split() == ["ID", "CHANNELS", "LOCALE", "TIMEZONE", "QUIET", "HOURS", "UPDATED", "(UTC)"]
    assert [line.split()[0] for line in table[1:-1]] == ["42", "u0", "u1", "u2"] and table[
        -1
    ] == "4 recipients"
    page = json.loads(ok("recipient", "list", "-limit", "2", "-after", "u0", "-json").stdout)
    assert [r["id"] for r in page] == ["u1", "u2"] and page[0]["addresses"] == {
        "webhook": ["https://example.com/1"]
    }
    assert ok("recipient", "list", "-Q").stdout == ""
    # del: erased, with its counts
    assert (
        ok("recipient", "del", "42").stdout
        == "erased 42: 0 waiting records revoked, 0 records masked, 0 notices, 0 dead letters masked\n"
    )
    assert json.loads(ok("recipient", "del", "u0", "-json").stdout) == {
        "recipient": "u0", "revoked": 0, "masked": 0, "notices": 0, "dead_letters": 0}  # fmt: skip
    refused("e.cmd.noti.rcpt.not_found", "recipient", "del", "42")
    assert [r["id"] for r in json.loads(ok("recipient", "list", "-json").stdout)] == ["u1", "u2"]


@pytest.mark.parametrize(
    ("code", "args", "stdin"),
    [
        ("e.cmd.noti.rcpt.baddoc", ["put", "42", "{not json"], None),
        ("e.cmd.noti.rcpt.baddoc", ["put", "42", "[1, 2]"], None),
        ("e.cmd.noti.rcpt.baddoc", ["put", "42", "-"], "\"text\""),
        ("e.cmd.noti.rcpt.baddoc", ["put", "42", '{"nick": "x"}'], None),
        ("e.cmd.noti.rcpt.baddoc", ["put", "42", '{"a": ' * 600 + "1" + "}" * 600], None),
        ("e.cmd.noti.rcpt.badid", ["put", "a b"], None),
        ("e.cmd.noti.rcpt.badid", ["put", "../42"], None),
        ("e.cmd.noti.rcpt.badid", ["put", "4\u202e2"], None),
        ("e.cmd.noti.rcpt.badid", ["put", "42", '{"id": "43"}'], None),
        ("e.cmd.noti.rcpt.badaddr", ["put", "42", "-sms", "not a phone"], None),
        ("e.cmd.noti.rcpt.badaddr", ["put", "42", "-email", "a@b.c\nBcc: x@y.z"], None),
        ("e.cmd.noti.rcpt.badaddr", ["put", "42", "-address", "fax=1"], None),
        ("e.cmd.noti.rcpt.badaddr", ["put", "42", "-address", "sms"], None),
        ("e.cmd.noti.rcpt.badlocale", ["put", "42", "-locale", "english please"], None),
        ("e.cmd.noti.rcpt.badtz", ["put", "42", "-timezone", "Mars/Olympus"], None),
        ("e.cmd.noti.rcpt.badquiet", ["put", "42", "-quiet-hours", "22-7"], None),
        ("e.cmd.noti.rcpt.badattrs", ["put", "42", "-attr", "name"], None),
        ("e.cmd.noti.rcpt.baddoc", ["update", "7"], None),
        ("e.cmd.noti.rcpt.not_found", ["update", "nobody", "-locale", "fr"], None),
        ("e.cmd.noti.rcpt.badmerge", ["merge", "7", "7"], None),
        ("e.cmd.noti.rcpt.not_found", ["merge", "7", "nobody"], None),
        ("e.cmd.noti.rcpt.badlimit", ["list", "-limit", "0"], None),
        ("e.cmd.noti.rcpt.badlimit", ["list", "-limit", "1001"], None),
        ("e.cmd.noti.rcpt.not_found", ["history", "nobody"], None),
        ("e.cmd.noti.rcpt.not_found", ["prefs", "nobody"], None),
        ("e.cmd.noti.pref.bad", ["prefs", "7", "orders=off"], None),
        ("e.cmd.noti.pref.bad", ["prefs", "7", "orders.sms=maybe"], None),
        ("e.cmd.noti.pref.bad", ["prefs", "7", "general.fax=off"], None),
        ("e.cmd.noti.pref.bad", ["prefs", "7", "[1]"], None),
        ("e.cmd.noti.pref.bad", ["prefs", "7", "-"], "{bad"),
        ("e.cmd.noti.cat.not_found", ["prefs", "7", "nothing.sms=off"], None),
        ("e.cmd.noti.rcpt.nopvg", ["get", "7", "-owner", BOB], None),
        ("e.cmd.noti.baduser", ["list", "-owner", "no body"], None),
    ],
)  # fmt: skip
def test_a_bad_recipient_command_fails_with_its_code_and_stores_nothing(
    rt: Any, raw: redis.Redis, code: str, args: list[str], stdin: str | None
) -> None:
    ok("recipient", "put", "7", "-sms", PHONE)
    before = stored(raw)
    refused(code, "recipient", *args, stdin=stdin)
    assert stored(raw) == before


def test_prefs_and_history(rt: Any, orders: Path) -> None:
    ok("category", "put", "marketing", user=MEMBER)
    assert ok("recipient", "prefs", "42").stdout == "CATEGORY  CHANNEL  PREFERENCE\n0 preferences\n"
    table = ok("recipient", "prefs", "42", "marketing.*=off", "orders.sms=on", "orders.email=off").stdout
    assert table.splitlines()[1:-1] == [
        "marketing  *        out       ",
        "orders     email    out       ",
        "orders     sms      in        ",
    ]
    now = json.loads(ok("recipient", "prefs", "42", "orders.email=default", "-json").stdout)
    assert now == {"marketing": {"*": False}, "orders": {"sms": True}}
    now = json.loads(ok("recipient", "prefs", "42", '{"orders": {"sms": null}}', "-json").stdout)
    assert now == {"marketing": {"*": False}} == json.loads(ok("recipient", "prefs", "42", "-json").stdout)
    assert ok("recipient", "history", "42").stdout == ""
    notice_id = ok("notify", "-recipient", "42", "-template", "order_shipped", "-data", '{"order": 7}',
                   "-category", "orders").stdout.strip()  # fmt: skip
    history = json.loads(ok("recipient", "history", "42", "-json").stdout)
    notice = json.loads(ok("get", notice_id, "-json").stdout)
    assert set(history) == {notice_id, *(c["record"] for c in notice["channels"] if c["record"])}
    assert ok("recipient", "history", "42", "-limit", "1").stdout.splitlines() == history[:1]


# --- import ------------------------------------------------------------------------------------------

#: The rows of the 1,000-row files that are bad, and why (rows count from 1, the header aside).
BAD_ROWS = {17: "e.cmd.noti.rcpt.badaddr", 250: "e.cmd.noti.rcpt.badid", 999: "e.cmd.noti.rcpt.badlocale"}


def _csv_rows() -> str:
    lines = ["id,sms,email,locale,timezone,attr.plan"]
    for n in range(1, 1001):
        sms, rid, locale = f"+86139{n:08d}", f"user{n}", "zh-CN"
        if n == 17:
            sms = "not-a-phone"
        elif n == 250:
            rid = "bad id"
        elif n == 999:
            locale = "not a locale"
        lines.append(f"{rid},{sms},u{n}@example.com,{locale},Asia/Shanghai,{'pro' if n % 2 else 'free'}")
    return "\n".join(lines) + "\n"


def _jsonl_rows() -> str:
    lines = []
    for n in range(1, 1001):
        if n == 18:
            lines.append('{"id": "user18", "addresses": {"sms": ["not-a-phone"]}}')
        elif n == 250:
            lines.append("{not json")
        elif n == 998:
            lines.append(json.dumps({"id": "user998", "locale": "not a locale"}))
        else:
            lines.append(
                json.dumps({"id": f"user{n}", "addresses": {"sms": [f"+86139{n:08d}"]}, "locale": "en"})
            )
    return "\n".join(lines) + "\n"


def test_import_of_1000_rows_of_csv_then_json_lines_with_bad_rows(rt: Any, tmp_path: Path) -> None:
    csv_file = tmp_path / "people.csv"
    csv_file.write_text(_csv_rows(), encoding="utf-8-sig")  # a BOM, as spreadsheets write
    result = run("recipient", "import", str(csv_file))
    assert result.exit_code == 1, result.output  # rows were refused
    assert result.stdout == "997 created, 0 updated, 3 refused\n"
    refusals = result.stderr.splitlines()
    assert [(int(line.split(":")[0][4:]), line.split(": ")[1]) for line in refusals] == sorted(
        BAD_ROWS.items()
    )
    assert rt.redis.zcard(rt.keys.recipients(ALICE)) == 997
    one = json.loads(ok("recipient", "get", "user2", "-json").stdout)
    assert one["addresses"] == {"sms": ["+8613900000002"], "email": ["u2@example.com"]}
    assert one["attributes"] == {"plan": "free"} and one["timezone"] == "Asia/Shanghai"
    # the same people as JSON lines: updated, and the new rows created
    jsonl_file = tmp_path / "people.jsonl"
    jsonl_file.write_text(_jsonl_rows())
    result = run("recipient", "import", str(jsonl_file), "-json")
    assert result.exit_code == 1
    done = json.loads(result.stdout)
    # user17 and user999, refused from the CSV, are created now; user18 and user998 are refused
    assert (done["created"], done["updated"]) == (2, 995)
    refusals = {r["row"]: r["code"] for r in done["refused"]}
    assert refusals == {
        18: "e.cmd.noti.rcpt.badaddr",
        250: "e.cmd.noti.rcpt.baddoc",
        998: "e.cmd.noti.rcpt.badlocale",
    }
    assert json.loads(ok("recipient", "get", "user2", "-json").stdout)["locale"] == "en"
    assert rt.redis.zcard(rt.keys.recipients(ALICE)) == 999
    # a clean file: exit 0; standard input with -format
    good = "\n".join(json.dumps({"id": f"s{n}"}) for n in range(3))
    assert (
        ok("recipient", "import", "-", "-format", "jsonl", stdin=good).stdout
        == "3 created, 0 updated, 0 refused\n"
    )


def test_a_bad_import_file_stores_nothing(rt: Any, raw: redis.Redis, tmp_path: Path) -> None:
    files = {
        "people.txt": (b"id\n1\n", "e.cmd.noti.rcpt.badformat"),
        "latin1.csv": ("id,attr.name\n1,Jos\u00e9\n".encode("latin-1"), "e.cmd.noti.rcpt.badformat"),
        "header.csv": (b"id,fax\n1,2\n", "e.cmd.noti.rcpt.badcsv"),
        "noid.csv": (b"name\nada\n", "e.cmd.noti.rcpt.badcsv"),
        "twice.csv": (b"id,sms,sms\n1,2,3\n", "e.cmd.noti.rcpt.badcsv"),
        "empty.csv": (b"", "e.cmd.noti.rcpt.badcsv"),
    }
    before = stored(raw)
    for name, (content, code) in files.items():
        path = tmp_path / name
        path.write_bytes(content)
        refused(code, "recipient", "import", str(path))
    refused("e.cmd.noti.rcpt.badformat", "recipient", "import", str(tmp_path / "missing.csv"))
    refused("e.cmd.noti.rcpt.badformat", "recipient", "import", "-")
    assert stored(raw) == before
    # a file all of whose rows are refused stores nothing either (each row listed)
    path = tmp_path / "bad.jsonl"
    path.write_text("{bad\n[1]\n")
    result = run("recipient", "import", str(path))
    assert result.exit_code == 1 and result.stdout == "0 created, 0 updated, 2 refused\n"
    assert result.stderr.splitlines()[0].startswith("row 1: e.cmd.noti.rcpt.baddoc: ")
    assert stored(raw) == before


# --- noti category, noti template ---------------------------------------------------------------


def test_category_put_list_and_del(rt: Any, raw: redis.Redis) -> None:
    before = stored(raw)
    refused("e.cmd.noti.cat.nopvg", "category", "put", "orders")
    refused("e.cmd.noti.cat.nopvg", "category", "del", "general")
    for args in (
        ["Orders"],
        ["orders", "-channel", "sms"],
        ["orders", "-channel", "fax=on"],
        ["orders", "[1]"],
        ["orders", '{"colour": 1}'],
        ["orders", "-critical", "--opt-out"],
    ):
        result = run("category", "put", *args, user=MEMBER)
        assert result.exit_code == 1 and result.stderr.startswith("e.cmd.noti.cat."), (args, result.stderr)
    assert stored(raw) == before
    declared_text = ok(
        "category", "put", "orders", "-channel", "sms=off", "-description", "Orders", user=MEMBER
    )
    assert declared_text.stdout == "category orders declared\n"
    made = json.loads(ok("category", "put", "security", "-critical", "-json", user=MEMBER).stdout)
    assert made == {"name": "security", "channels": {}, "opt_out": False, "critical": True, "description": "",
                    "throttle": None}  # fmt: skip
    throttle = '{"throttle": {"limit": 5, "period": "1h"}}'
    throttled = json.loads(ok("category", "put", "social", throttle, "-json", user=MEMBER).stdout)
    assert throttled["throttle"] == {"limit": 5, "period": 3600.0, "over": "drop"}
    ok("category", "del", "social", user=MEMBER)
    declared = json.loads(ok("category", "put", "marketing", '{"channels": {"email": true}}', "--no-opt-out",
                             "-json", user=ADMIN).stdout)  # fmt: skip
    assert declared["opt_out"] is False and declared["channels"] == {"email": True}
    table = ok("category", "list").stdout.splitlines()
    assert table[0].split() == ["NAME", "OFF", "BY", "DEFAULT", "OPT-OUT", "CRITICAL", "DESCRIPTION"]
    assert [line.split()[:4] for line in table[1:-1]] == [
        ["general", "-", "yes", "no"], ["marketing", "-", "no", "no"], ["orders", "sms", "yes", "no"],
        ["security", "-", "no", "yes"]]  # fmt: skip
    assert [c["name"] for c in json.loads(ok("category", "list", "-json").stdout)] == [
        "general", "marketing", "orders", "security"]  # fmt: skip
    assert ok("category", "del", "orders", user=MEMBER).stdout == "category orders removed\n"
    refused("e.cmd.noti.cat.not_found", "category", "del", "orders", user=MEMBER)


def test_template_put_get_list_and_del(rt: Any, raw: redis.Redis, tmp_path: Path) -> None:
    json_file = tmp_path / "order_shipped.json"
    json_file.write_text(json.dumps(TEMPLATE))
    toml_file = tmp_path / "welcome.toml"
    toml_file.write_text(TEMPLATE_TOML)
    assert ok("template", "put", str(json_file)).stdout == "order_shipped v1\n"
    assert ok("template", "put", "order_shipped", str(toml_file)).stdout == "order_shipped v2\n"
    assert ok("template", "put", str(toml_file)).stdout == "welcome v1\n"
    assert json.loads(ok("template", "put", "piped", "-", "-json", stdin=json.dumps(TEMPLATE)).stdout) == {
        "name": "piped", "version": 1}  # fmt: skip
    shown = ok("template", "get", "order_shipped").stdout
    assert "version        2\n" in shown and "description    from TOML\n" in shown
    assert '"text": "Order {{ order }} shipped"' in shown
    first = json.loads(ok("template", "get", "order_shipped", "-version", "1", "-json").stdout)
    assert first["version"] == 1 and first["document"]["channels"] == TEMPLATE["channels"]
    assert first["channels"] == ["sms", "email"]
    table = ok("template", "list").stdout.splitlines()
    assert [line.split()[:5] for line in table[1:-1]] == [
        ["order_shipped", "2", "sms", "en", "en"], ["welcome", "1", "sms", "en", "en"],
        ["piped", "1", "sms,email", "en,zh", "en"]]  # fmt: skip
    listed = json.loads(ok("template", "list", "-json").stdout)
    assert [(t["name"], t["version"]) for t in listed] == [("order_shipped", 2), ("welcome", 1), ("piped", 1)]
    assert ok("template", "del", "piped").stdout == "template piped removed\n"
    refused("e.cmd.noti.tmpl.not_found", "template", "get", "piped")
    refused("e.cmd.noti.tmpl.not_found", "template", "del", "piped")
    refused("e.cmd.noti.tmpl.not_found", "template", "get", "order_shipped", "-version", "3")
    # another user's templates are not theirs
    refused("e.cmd.noti.tmpl.not_found", "template", "get", "order_shipped", user=BOB)
    assert (
        json.loads(ok("template", "get", "welcome", "-owner", ALICE, "-json", user=MEMBER).stdout)["version"]
        == 1
    )


def test_a_bad_template_fails_with_its_code_and_stores_nothing(
    rt: Any, raw: redis.Redis, tmp_path: Path
) -> None:
    cases = {
        "notes.txt": ("{}", "e.cmd.noti.tmpl.baddoc"),
        "broken.json": ("{bad", "e.cmd.noti.tmpl.baddoc"),
        "array.json": ("[1]", "e.cmd.noti.tmpl.baddoc"),
        "broken.toml": ("x = = 1", "e.cmd.noti.tmpl.baddoc"),
        "bad name!.json": (json.dumps(TEMPLATE), "e.cmd.noti.tmpl.badname"),
        "syntax.json": (json.dumps({"default_locale": "en", "channels": {"sms": {"en": {"text": "{{ x"}}}}),
                        "e.cmd.noti.tmpl.badsyntax"),
        "unsafe.json": (json.dumps({"default_locale": "en", "channels": {"sms": {"en": {
            "text": "{{ ''.__class__.__mro__[1].__subclasses__() }}"}}}}), "e.cmd.noti.tmpl.unsafe"),
    }  # fmt: skip
    before = stored(raw)
    for name, (content, code) in cases.items():
        path = tmp_path / name
        path.write_text(content)
        refused(code, "template", "put", str(path))
    refused("e.cmd.noti.tmpl.baddoc", "template", "put", str(tmp_path / "missing.json"))
    refused("e.cmd.noti.tmpl.baddoc", "template", "put", "piped", "-", stdin="{bad")
    assert run("template", "put", "-").exit_code == 2  # NAME is needed with standard input
    assert stored(raw) == before


# --- noti notify, noti get n… ------------------------------------------------------------------


def test_notify_prints_the_notice_and_get_shows_it(rt: Any, orders: Path) -> None:
    result = ok("notify", "-recipient", "42", "-template", "order_shipped", "-data", '{"order": 7}',
                "-category", "orders", "-idempotency-key", "order-7")  # fmt: skip
    notice_id = result.stdout.strip()
    assert notice_id.startswith("n") and result.stdout == notice_id + "\n"
    states = dict(line.split(": ", 1) for line in result.stderr.splitlines())
    assert states["sms"].startswith("queued ") and states["email"].startswith("queued ")
    sms_record = states["sms"].split()[1]
    assert rt.store.get(sms_record).fields["text"] == "订单 7 已发货"
    # the same key again: the same notice, nothing new
    again = ok("notify", "-recipient", "42", "-template", "order_shipped", "-data", '{"order": 7}',
               "-category", "orders", "-idempotency-key", "order-7", "-json")  # fmt: skip
    assert json.loads(again.stdout)["id"] == notice_id and json.loads(again.stdout)["repeated"] is True
    # noti get: the notice, as text and as JSON; alongside a record
    shown = ok("get", notice_id).stdout
    assert f"id             {notice_id}\n" in shown and "template       order_shipped v1\n" in shown
    assert f"channel        sms      queued {sms_record} zh\n" in shown
    data = json.loads(ok("get", notice_id, "-json").stdout)
    assert data["recipient"] == "42" and [c["channel"] for c in data["channels"]] == ["sms", "email"]
    both = json.loads(ok("get", notice_id, sms_record, "-json").stdout)
    assert both[0]["id"] == notice_id and both[1]["id"] == sms_record and both[1]["noti_sms_text"]
    assert "noti_sms_text" in ok("get", notice_id, sms_record).stdout
    # a chain, a delay, a locale
    chained = json.loads(ok("notify", "--recipient", "42", "--template", "order_shipped@1", "--data", "-",
                            "--chain", "sms,email", "--after", "5m", "--delay", "1h", "--locale", "en",
                            "-json", stdin='{"order": 8}').stdout)  # fmt: skip
    assert [(c["channel"], c["state"], c["locale"]) for c in chained["channels"]] == [
        ("sms", "scheduled", "en"), ("email", "fallback", "en")]  # fmt: skip
    record = rt.store.get(chained["channels"][0]["record"])
    assert (
        record.fields["text"] == "Order 8 shipped" and record.lease_until_ms > record.created_ms + 3_000_000
    )
    # -at: a time (as noti add -at takes it); a bad one refused, nothing stored
    when = (datetime.now(UTC) + timedelta(days=30)).replace(microsecond=0)
    at = json.loads(
        ok(
            "notify", *TO_42, "-data", '{"order": 9}', "-channels", "sms", "-at", when.isoformat(), "-json"
        ).stdout
    )
    assert [c["state"] for c in at["channels"]] == ["scheduled"]
    assert rt.store.get(at["channels"][0]["record"]).lease_until_ms == int(when.timestamp() * 1000)
    refused("e.cmd.noti.add.baddelay", "notify", *TO_42, "-data", '{"order": 9}', "-at", "tomorrow")
    # another user's notice is not found, as a missing one
    refused("e.cmd.noti.notice.not_found", "get", notice_id, user=BOB)
    refused("e.cmd.noti.notice.not_found", "get", "n" + "0" * 26)
    assert json.loads(ok("get", notice_id, "-json", user=MEMBER).stdout)["owner"] == ALICE


#: The arguments every bad notify case starts with.
TO_42 = ["-recipient", "42", "-template", "order_shipped"]


@pytest.mark.parametrize(
    ("code", "args"),
    [
        ("e.cmd.noti.rcpt.not_found", ["-recipient", "nobody", "-template", "order_shipped"]),
        ("e.cmd.noti.tmpl.not_found", ["-recipient", "42", "-template", "nothing"]),
        ("e.cmd.noti.notify.badtemplate", ["-recipient", "42", "-template", "order_shipped@x"]),
        ("e.cmd.noti.cat.not_found", ["-recipient", "42", "-template", "order_shipped", "-category", "x"]),
        ("e.cmd.noti.notify.baddata", ["-recipient", "42", "-template", "order_shipped", "-data", "{bad"]),
        ("e.cmd.noti.notify.baddata", ["-recipient", "42", "-template", "order_shipped", "-data", "[7]"]),
        ("e.cmd.noti.tmpl.missingvar", ["-recipient", "42", "-template", "order_shipped", "-data", "{}"]),
        ("e.cmd.noti.notify.badchannels", [*TO_42, "-chain", "fax"]),
        ("e.cmd.noti.notify.badchannels", [*TO_42, "-chain", "sms", "-channels", "sms"]),
        ("e.cmd.noti.notify.badafter", [*TO_42, "-chain", "sms,email", "-after", "soon"]),
        ("e.cmd.noti.notify.baddelay", ["-recipient", "42", "-template", "order_shipped", "-delay", "later"]),
        ("e.cmd.noti.rcpt.badlocale", ["-recipient", "42", "-template", "order_shipped", "-locale", "!!"]),
        ("e.cmd.noti.add.badlv", ["-recipient", "42", "-template", "order_shipped", "-data", '{"order": 1}',
                                  "-lv", "high"]),
        ("e.cmd.noti.rcpt.nopvg", ["-recipient", "42", "-template", "order_shipped", "-owner", BOB]),
        ("e.cmd.noti.notify.baddigest", [*TO_42, "-digest", "Orders", "-window", "10m"]),
        ("e.cmd.noti.notify.baddigest", [*TO_42, "-digest", "orders"]),
        ("e.cmd.noti.notify.baddigest", [*TO_42, "-digest", "orders", "-window", "daily 25:00"]),
        ("e.cmd.noti.notify.baddigest", [*TO_42, "-digest", "orders", "-window", "10m", "-digest-max", "x"]),
        ("e.cmd.noti.notify.baddedupe", [*TO_42, "-dedupe", "k", "-dedupe-window", "8d"]),
        ("e.cmd.noti.notify.baddedupe", [*TO_42, "-dedupe", "k", "-idempotency-key", "k"]),
    ],
)  # fmt: skip
def test_a_bad_notify_fails_with_its_code_and_stores_nothing(
    rt: Any, orders: Path, raw: redis.Redis, code: str, args: list[str]
) -> None:
    before = stored(raw)
    refused(code, "notify", *args)
    assert stored(raw) == before


def test_notify_takes_digest_events_and_deduplication_keys(rt: Any, orders: Path) -> None:
    count = {"default_locale": "en", "channels": {"sms": {"en": {"text": "{{ count }} orders"}}}}
    ok("template", "put", "orders_today", "-", stdin=json.dumps(count))
    event = ["-recipient", "42", "-template", "orders_today", "-data", '{"order": 7}', "-category", "orders",
             "-digest", "orders", "-window", "600"]  # fmt: skip
    first = ok("notify", *event)
    window = first.stdout.strip()
    assert window.startswith("n") and "made when it closes" in first.stderr
    assert ok("notify", *event, "-backoff").stdout.strip() == window  # the open window takes it
    listed = json.loads(ok("digest", "list", "-json").stdout)
    assert [(w["window"], w["recipient"], w["digest"], w["events"]) for w in listed] == [
        (window, "42", "orders", 2)]  # fmt: skip
    table = ok("digest", "list", "-recipient", "42").stdout.splitlines()
    assert table[0].split()[:3] == ["RECIPIENT", "DIGEST", "EVENTS"] and table[1].split()[:3] == [
        "42",
        "orders",
        "2",
    ]
    assert json.loads(ok("digest", "list", "-json", user=BOB).stdout) == []
    refused("e.cmd.noti.rcpt.nopvg", "digest", "list", "-owner", ALICE, user=BOB)
    ok("category", "put", "orders", '{"throttle": {"limit": 3, "period": "1h"}}', user=MEMBER)
    ok("notify", *TO_42, "-data", '{"order": 6}', "-channels", "sms", "-category", "orders")
    [sms] = [
        t for t in json.loads(ok("recipient", "throttles", "42", "-json").stdout) if t["channel"] == "sms"
    ]
    assert (sms["sent"], sms["limit"]) == (1, 3)
    assert "orders    sms" in ok("recipient", "throttles", "42").stdout
    refused("e.cmd.noti.rcpt.not_found", "recipient", "throttles", "42", user=BOB)
    made = ok("notify", *TO_42, "-data", '{"order": 7}', "-dedupe", "-").stdout.strip()
    again = json.loads(ok("notify", *TO_42, "-data", '{"order": 7}', "-dedupe", "-", "-json").stdout)
    assert again["id"] == made and again["repeated"] is True


def test_recipients_are_their_owners(rt: Any, orders: Path, raw: redis.Redis) -> None:
    before = stored(raw)
    refused("e.cmd.noti.rcpt.not_found", "recipient", "get", "42", user=BOB)
    refused("e.cmd.noti.rcpt.not_found", "recipient", "del", "42", user=BOB)
    refused("e.cmd.noti.rcpt.not_found", "notify", "-recipient", "42", "-template", "order_shipped", user=BOB)
    refused("e.cmd.noti.rcpt.nopvg", "recipient", "update", "42", "-locale", "fr", "-owner", ALICE, user=BOB)
    assert stored(raw) == before
    assert (
        json.loads(ok("recipient", "get", "42", "-owner", ALICE, "-json", user=MEMBER).stdout)["id"] == "42"
    )
    notice = json.loads(ok("notify", "-recipient", "42", "-template", "order_shipped", "-owner", ALICE,
                           "-data", '{"order": 1}', "-json", user=MEMBER).stdout)  # fmt: skip
    assert notice["owner"] == ALICE
