"""The hostile-input corpus: malformed inputs for every door into noti, each with the error
code it must be refused with.

The corpus is data. Each :class:`Case` names its surface (how the input reaches noti), the
input, and the stable code from :mod:`noti.errors` (None for a command-line usage error,
which exits 2 with click's ``Error:`` line). ``tests/test_hostile_input.py`` runs every case
and checks the refusal, that no traceback or ``e.noti.internal`` shows, and that the Redis
database is unchanged.

Surfaces:

========== ======================================================================================
``api``    a call of the Python API (``noti.notify`` …, ``noti.events``, ``noti.numpool``) raising
``bulk``   ``notify_many`` / ``schedule_many``: the call returns, every item refused with its code
``cli``    ``noti`` run in this process (arguments, standard input, ``-f`` files)
``proc``   ``python -m noti`` as a real process: raw bytes in ``argv``, standard input and files
``task``   ``noti.tasks.notify.delay`` / ``apply_async`` / ``app.send_task("noti.notify")`` and
           ``send_task("noti.events.dispatch")``: refused in the caller (``at_call``) or by a
           real worker (the task fails with the code)
``webman`` an entry written by hand into the stream of a ``NotificationConsumer``
``event``  an event whose payload makes a listener's notification template invalid
``config`` the TOML file (``NOTI_CONFIG``) and ``NOTI_*`` variables
========== ======================================================================================

Values that must be built when the case runs are markers: :class:`Ref` (an id of the seeded
data: another user's record, a webman dead letter …), :class:`Big` (a long string: ten
megabytes are not kept in memory for every case) and :class:`Deep` (nested JSON).
"""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

PHONE = "+8613912345678"
EMAIL = "ops@example.com"
URL = "https://hooks.example.com/in"
OPENID = "oOPENID"
UNKNOWN_ID = "01jzzzzzzzzzzzzzzzzzzzzzzz"  # the shape of an id, naming no record
MB10 = 10 * 1024 * 1024


@dataclass(frozen=True)
class Ref:
    """A value of the seeded data, filled in by the runner (see ``Seed`` in the test)."""

    name: str


@dataclass(frozen=True)
class Big:
    """``prefix`` followed by ``size`` copies of ``char``, made when the case runs."""

    size: int
    char: str = "x"
    prefix: str = ""


@dataclass(frozen=True)
class Deep:
    """JSON nested ``depth`` levels: a dict (``{"a": {"a": …}}``) or, with ``text``, its JSON."""

    depth: int
    text: bool = False
    array: bool = False


# --- the surfaces' inputs ------------------------------------------------------------------------


@dataclass(frozen=True)
class Api:
    """``fn(*args, **kwargs)``; ``fn`` names a callable of the runner's table (``API`` there)."""

    fn: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Bulk:
    """A bulk call that returns, having refused every item with ``codes`` (in order)."""

    fn: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    codes: tuple[str, ...]


@dataclass(frozen=True)
class Cli:
    """``noti ARGV`` in this process, acting as ``--as`` ``user`` unless ``argv`` starts with
    ``--as``. ``{name}`` in an argument is the path of ``files[name]``."""

    argv: tuple[Any, ...]
    stdin: bytes | None = None
    files: dict[str, bytes] = field(default_factory=dict)
    exit: int = 1
    user: str = "alice"


@dataclass(frozen=True)
class Proc:
    """``python -m noti ARGV`` as a process (bytes go to ``argv`` as they are)."""

    argv: tuple[bytes | str, ...]
    stdin: bytes | None = None
    files: dict[str, bytes] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    exit: int = 1


@dataclass(frozen=True)
class Task:
    """The intake task: ``how`` is ``delay``, ``apply_async`` or ``send_task``. With
    ``at_call`` the caller's call raises; else a worker fails the task with the code.
    ``event_task``: ``send_task("noti.events.dispatch")``, failed by the worker."""

    how: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    at_call: bool = False


@dataclass(frozen=True)
class Webman:
    """A stream entry: raw ``fields``, or a message PHP's producer would write with ``data``
    (``message`` overrides keys of that message)."""

    fields: dict[str, Any] | None = None
    data: Any = None
    message: dict[str, Any] = field(default_factory=dict)
    #: What the dead letter's ``errmsg`` names (a code, and a reason for malformed entries).
    expect: tuple[str, ...] = ()
    error_class: str = "poison"


@dataclass(frozen=True)
class Processed:
    """A listener with ``action``, then an event with ``payload``, run by a processor."""

    action: dict[str, Any]
    payload: dict[str, Any]


@dataclass(frozen=True)
class Config:
    """Settings read with ``toml`` as the ``NOTI_CONFIG`` file (when given) and ``env``."""

    toml: bytes | None = None
    env: dict[str, str] = field(default_factory=dict)
    #: A piece of the message (the key or variable it names).
    says: str = ""


@dataclass(frozen=True)
class Case:
    surface: str
    name: str
    code: str | None
    input: Any

    @property
    def id(self) -> str:
        return f"{self.surface}:{self.name}"


CASES: list[Case] = []


def case(surface: str, name: str, code: str | None, value: Any) -> None:
    CASES.append(Case(surface, name, code, value))


def add(code: str) -> str:
    return f"e.cmd.noti.add.{code}"


# --- hostile values ------------------------------------------------------------------------------

#: Text no text field may hold, whatever the field.
BAD_TEXT: dict[str, Any] = {
    "surrogate": "a\ud800b",
    "invalid-utf8": "caf\udce9",  # b"caf\xe9" as Python decodes argv and files (surrogateescape)
    "nul": "a\x00b",
    "bell": "ring\x07",
    "escape": "\x1b[31mred",
    "del": "a\x7fb",
    "c1": "a\x9bb",
    "10mb": Big(MB10),
    "empty": "",
    "blank": " \t ",
    "int": 5,
    "nan": math.nan,
    "list": ["a"],
    "dict": {"a": 1},
    "bytes": b"abc",
}
#: … and what a one-line field (an e-mail subject) may not hold besides.
LINE_BREAKS: dict[str, str] = {
    "lf": "a\nb",
    "cr": "a\rb",
    "crlf": "a\r\nb",
    "vt": "a\x0bb",
    "ff": "a\x0cb",
    "nel": "a\x85b",
    "u2028": "a\u2028b",
    "u2029": "a\u2029b",
    "trailing-lf": "subject\n",
}
BAD_TARGETS: dict[str, dict[str, Any]] = {
    "sms": {
        "letters": "phone",
        "short": "12",
        "spaces": "+86 139 1234 5678",
        "nul": "+86139\x0012345678",
        "surrogate": "+86139\udcff12345678",
        "lf-inside": "+86139\n12345678",
        "10mb": Big(MB10, "1", "+"),
        "int": 8613912345678,
        "empty": "",
        "fullwidth": "+８６１３９１２３４５６７８",
    },
    "email": {
        "no-domain": "ops@",
        "two": "a@example.com, b@example.com",
        "angle": "<ops@example.com>",
        "nul": "ops\x00@example.com",
        "surrogate": "op\udcff@example.com",
        "bell": "ops\x07@example.com",
        "long": Big(300, "a", ""),
        "list": [EMAIL],
    },
    "webhook": {
        "javascript": "javascript:alert(1)",
        "ftp": "ftp://example.com/x",
        "no-host": "https://",
        "nul": "https://example.com/\x00",
        "lf-inside": "https://example.com/a\nb",
        "surrogate": "https://example.com/\ud800",
        "2049": Big(2049, "a", "https://example.com/"),
    },
    "weixin": {
        "space": "o OPENID",
        "tab": "o\tOPENID",
        "nul": "o\x00OPENID",
        "surrogate": "o\udcffOPENID",
        "129": Big(129, "o"),
        "bell": "o\x07",
    },
}
#: JSON content (WeChat template data, webhook bodies) noti must not store.
BAD_JSON: dict[str, Any] = {
    "nan": {"a": math.nan},
    "inf": {"a": math.inf},
    "-inf": {"a": -math.inf},
    "nan-text": '{"a": NaN}',
    "infinity-text": '{"a": Infinity}',
    "-infinity-text": '{"a": -Infinity}',
    "1e400-text": '{"a": 1e400}',
    "deep-text-5000": Deep(5000, text=True),
    "deep-array-text-100000": Deep(100000, text=True, array=True),
    "deep-dict-5000": Deep(5000),
    "deep-dict-65": Deep(65),
    "surrogate-value": {"a": "\ud800"},
    "surrogate-key": {"\udcff": 1},
    "int-key": {"a": {1: 2}},
    "tuple-key": {("a",): 1},
    "set": {"a": {1, 2}},
    "bytes-value": {"a": b"x"},
    "datetime": {"at": dt.datetime(2026, 1, 1)},
    "huge-int": {"a": 10**5000},
    "huge-int-text": '{"a": 1' + "0" * 5000 + "}",
    "invalid-utf8-bytes": b'{"a": "\xff"}',
    "array": [1, 2],
    "string": '"text"',
    "number-text": "3",
    "null-text": "null",
    "not-json": "{oops",
    "empty-text": "",
    "int": 5,
    "too-big": {"a": Big(70 * 1024)},
}
BAD_LEVELS: dict[str, Any] = {
    "5000-digits": "9" * 5000,
    "int-5000-digits": 10**5000,
    "2**63": 2**63,
    "zero": 0,
    "negative": -1,
    "zero-text": "0",
    "nan": math.nan,
    "inf": math.inf,
    "float": 1.5,
    "bool": True,
    "word": "high",
    "empty": "",
    "fullwidth": "１",
    "exponent": "1e3",
    "hex": "0x10",
    "none": None,
    "list": [1],
}
BAD_USERS: dict[str, Any] = {
    "trailing-lf": "alice\n",
    "empty": "",
    "space": "a b",
    "colon": "a:b",
    "surrogate": "al\udcffice",
    "nul": "alice\x00",
    "tab": "alice\t",
    "65": "a" * 65,
    "fullwidth": "ａlice",
    "int": 5,
}

# --- api: notify and its fields --------------------------------------------------------------------

GOOD = {
    "sms": (("sms", PHONE), {"text": "hello"}),
    "email": (("email", EMAIL), {"subject": "Report", "text": "All green."}),
    "webhook": (("webhook", URL), {"content": {"event": "paid"}}),
    "weixin": (("weixin", OPENID), {"tmpl": "T1", "pnb": "acct", "content": {"first": {"value": "x"}}}),
}


def notify(channel: str, **changes: Any) -> Api:
    args, kwargs = GOOD[channel]
    return Api("notify", args, {**kwargs, **changes})


for _name, _value in BAD_TEXT.items():
    case("api", f"sms-text-{_name}", add("badtext"), notify("sms", text=_value))
    case("api", f"email-subject-{_name}", add("badtext"), notify("email", subject=_value))
for _name, _value in LINE_BREAKS.items():
    case("api", f"email-subject-{_name}", add("badtext"), notify("email", subject=_value))
for _name in ("surrogate", "nul", "escape", "10mb", "int"):
    case("api", f"email-text-{_name}", add("badtext"), notify("email", text=BAD_TEXT[_name]))
    case("api", f"email-html-{_name}", add("badtext"), notify("email", html=BAD_TEXT[_name]))
for _name in ("surrogate", "nul", "empty", "int"):
    case("api", f"weixin-tmpl-{_name}", add("badtext"), notify("weixin", tmpl=BAD_TEXT[_name]))
case("api", "weixin-pnb-lf", add("badtext"), notify("weixin", pnb="acct\n"))
case("api", "weixin-pnb-space", add("badfield"), notify("weixin", pnb="my acct"))
for _name, _url in {
    "javascript": "javascript:alert(1)",
    "trailing-lf": "https://shop.example/o/1\n",
    "nul": "https://shop.example/\x00",
    "surrogate": "https://shop.example/\ud800",
}.items():
    case("api", f"weixin-url-{_name}", add("badfield"), notify("weixin", url=_url))
for _channel, _targets in BAD_TARGETS.items():
    for _name, _target in _targets.items():
        _args, _kwargs = GOOD[_channel]
        case(
            "api", f"{_channel}-target-{_name}", add("badtarget"), Api("notify", (_channel, _target), _kwargs)
        )
for _name, _content in BAD_JSON.items():
    case("api", f"webhook-content-{_name}", add("badcontent"), notify("webhook", content=_content))
for _name in ("nan", "nan-text", "deep-dict-5000", "surrogate-key", "int-key", "array"):
    case("api", f"weixin-content-{_name}", add("badcontent"), notify("weixin", content=BAD_JSON[_name]))
case("api", "weixin-content-17k", add("badcontent"), notify("weixin", content={"a": Big(17 * 1024)}))
for _name, _level in BAD_LEVELS.items():
    case("api", f"lv-{_name}", add("badlv"), notify("sms", lv=_level))
for _name, _user in BAD_USERS.items():
    case("api", f"user-{_name}", "e.cmd.noti.baduser", notify("sms", user=_user))
for _name, _kind in {
    "fax": "fax",
    "upper": "SMS",
    "empty": "",
    "none": None,
    "int": 5,
    "nul": "sms\x00",
}.items():
    case("api", f"type-{_name}", add("badtype"), Api("notify", (_kind, PHONE), {"text": "x"}))
for _name, _delay in {
    "nan": math.nan,
    "inf": math.inf,
    "negative": -1,
    "text": "10",
    "bool": True,
    "huge-int": 10**400,
    "over-a-year": 367 * 86400,
    "list": [1],
}.items():
    case("api", f"delay-{_name}", add("baddelay"), notify("sms", delay=_delay))
for _name, _eta in {
    "year-1": dt.datetime(1, 1, 1),
    "year-1-utc": dt.datetime(1, 1, 1, tzinfo=dt.UTC),
    "year-9999": dt.datetime(9999, 12, 31, 23, 59, 59),
    "max-utc": dt.datetime.max.replace(tzinfo=dt.UTC),
    "two-years-ago": dt.datetime.now(dt.UTC) - dt.timedelta(days=800),
    "text": "2026-12-01T09:00",
    "int": 1_800_000_000,
    "date": dt.date(2026, 12, 1),
}.items():
    case("api", f"eta-{_name}", add("baddelay"), notify("sms", eta=_eta))
case("api", "delay-and-eta", add("baddelay"), notify("sms", delay=5, eta=dt.datetime.now(dt.UTC)))
for _name, _retry in {
    "zero": 0,
    "101": 101,
    "text": "3",
    "float": 3.0,
    "bool": True,
    "nan": math.nan,
}.items():
    case("api", f"retry-max-{_name}", add("badretry"), notify("sms", retry_max=_retry))
for _name, _policy in {
    "nan": "linear:nan",
    "inf": "linear:inf",
    "1e400": "linear:1e400",
    "5000-digits": "linear:" + "9" * 5000,
    "negative": "linear:-1",
    "zero-cap": "exponential:5:0",
    "unknown": "fibonacci",
    "empty": "",
    "int": 5,
    "surrogate": "linear:\ud800",
}.items():
    case("api", f"retry-policy-{_name}", add("badretry"), notify("sms", retry_policy=_policy))
for _name, _provider in {
    "empty": "",
    "blank": "  ",
    "int": 5,
    "unknown": "nope",
    "surrogate": "\ud800",
    "nul": "sandbox\x00",
    "list": ["sandbox"],
}.items():
    # a well-formed name nobody configured answers as one the user may not name (issue 32)
    _code = "providerdenied" if _name == "unknown" else "noprovider"
    case("api", f"provider-{_name}", add(_code), notify("sms", provider=_provider))
for _name, _ident in {
    "space": "cart 1",
    "empty": "",
    "surrogate": "cart-\ud800",
    "nul": "cart\x00",
    "lf": "cart-1\n",
    "int": 5,
    "201": Big(201, "i"),
}.items():
    case("api", f"identifier-{_name}", add("badident"), notify("sms", delay=60, identifier=_ident))
for _name, _key in {
    "empty": "",
    "surrogate": "order-\ud800",
    "nul": "order\x00paid",
    "lf": "order:1\npaid",
    "int": 5,
    "201": Big(201, "k"),
}.items():
    case("api", f"idempotency-key-{_name}", add("badkey"), notify("sms", idempotency_key=_key))
case(
    "api",
    "idempotency-key-with-identifier",
    add("badkey"),
    notify("sms", idempotency_key="k", identifier="i"),
)
case("api", "unknown-field", add("badfield"), notify("sms", colour="red"))
case("api", "field-of-another-channel", add("badfield"), notify("sms", subject="s"))
case("api", "missing-text", add("missing"), Api("notify", ("sms", PHONE), {}))
case("api", "notify-sms-text-surrogate", add("badtext"), Api("notify_sms", (PHONE, "\udcff")))
case(
    "api",
    "notify-email-subject-u2028",
    add("badtext"),
    Api("notify_email", (EMAIL,), {"subject": "a\u2028", "text": "t"}),
)
case(
    "api",
    "notify-webhook-nan",
    add("badcontent"),
    Api("notify_webhook", (URL,), {"content": {"v": math.nan}}),
)

# --- api: reading, removing, sending: unknown ids, other users' ids, wrong types ------------------

_IDS: dict[str, Any] = {
    "unknown": UNKNOWN_ID,
    "surrogate": "\udcff",
    "nul": "a\x00b",
    "10mb": Big(MB10),
    "int": 5,
    "none": None,
    "list": [UNKNOWN_ID],
}
for _name, _id in _IDS.items():
    case("api", f"get-{_name}", "e.cmd.noti.not_found", Api("get", (_id,)))
    case("api", f"delete-{_name}", "e.cmd.noti.del.not_a_msg", Api("delete", (_id,)))
    case("api", f"cancel-{_name}", "e.cmd.noti.cancel.not_found", Api("cancel", (_id,)))
for _name in ("unknown", "surrogate", "nul", "int"):
    case("api", f"send-id-{_name}", "e.cmd.noti.not_found", Api("send", (_IDS[_name],)))
    case("api", f"revoke-id-{_name}", "e.cmd.noti.revoke.not_found", Api("revoke", ([_IDS[_name]],)))
case("api", "get-others", "e.cmd.noti.not_found", Api("get", (Ref("bob_record"),)))  # as a missing one
case("api", "delete-others", "e.cmd.noti.del.nopvg", Api("delete", (Ref("bob_record"),)))
case("api", "cancel-others", "e.cmd.noti.cancel.nopvg", Api("cancel", (Ref("bob_record"),)))
case("api", "cancel-others-identifier", "e.cmd.noti.cancel.not_found", Api("cancel", ("bob-cart",)))
case(
    "api",
    "cancel-identifier-of-creator",
    "e.cmd.noti.cancel.nopvg",
    Api("notifier.cancel", ("bob-cart",), {"creator": "bob"}),
)
case(
    "api",
    "cancel-creator-surrogate",
    "e.cmd.noti.baduser",
    Api("notifier.cancel", ("cart",), {"creator": "b\udcffob"}),
)
case("api", "send-others", "e.cmd.noti.send.nopvg", Api("send", (Ref("bob_record"),)))
case("api", "revoke-others", "e.cmd.noti.revoke.not_found", Api("revoke", ([Ref("bob_record")],)))
case("api", "revoke-string", "e.cmd.noti.revoke.what", Api("revoke", (UNKNOWN_ID,)))
case("api", "revoke-nothing", "e.cmd.noti.revoke.what", Api("revoke", ([],)))
case("api", "revoke-ids-and-every", "e.cmd.noti.revoke.what", Api("revoke", ([UNKNOWN_ID],), {"every": True}))
case(
    "api",
    "revoke-every-others",
    "e.cmd.noti.revoke.nopvg",
    Api("revoke", (), {"every": True, "creator": "bob"}),
)
case("api", "revoke-every-fax", add("badtype"), Api("revoke", (), {"every": True, "channel": "fax"}))
for _name, _below in {"nan": math.nan, "zero": 0, "text": "low", "5000-digits": "9" * 5000}.items():
    case(
        "api",
        f"revoke-below-{_name}",
        add("badlv"),
        Api("revoke", (), {"every": True, "below_level": _below}),
    )
for _name, _status in {
    "word": "x",
    "5": 5,
    "nan": math.nan,
    "float": 1.5,
    "bool": True,
    "digits": "9" * 30,
}.items():
    case(
        "api",
        f"list-status-{_name}",
        "e.cmd.noti.list.badst",
        Api("list_notifications", (), {"status": _status}),
    )
for _name, _limit in {"text": "5", "float": 1.5, "nan": math.nan, "bool": True, "list": [5]}.items():
    case(
        "api",
        f"list-limit-{_name}",
        "e.cmd.noti.list.badlimit",
        Api("list_notifications", (), {"limit": _limit}),
    )
    case("api", f"send-limit-{_name}", "e.cmd.noti.send.badlimit", Api("send", (), {"limit": _limit}))
case("api", "list-others", "e.cmd.noti.list.nopvg", Api("list_notifications", (), {"creator": "bob"}))
case(
    "api",
    "list-creator-space",
    "e.cmd.noti.baduser",
    Api("list_notifications", (), {"creator": "a b", "user": "boss"}),
)
case(
    "api",
    "list-creator-surrogate",
    "e.cmd.noti.baduser",
    Api("list_notifications", (), {"creator": "\udcff", "user": "boss"}),
)
case("api", "list-user-lf", "e.cmd.noti.baduser", Api("list_notifications", (), {"user": "boss\n"}))
for _name, _timeout in {
    "text": "5",
    "nan": math.nan,
    "inf": math.inf,
    "negative": -1,
    "zero": 0,
    "bool": True,
}.items():
    case(
        "api", f"send-timeout-{_name}", "e.cmd.noti.send.badtimeout", Api("send", (), {"timeout_s": _timeout})
    )
case("api", "send-others-creator", "e.cmd.noti.send.nopvg", Api("send", (), {"creator": "bob"}))
case("api", "clean-not-root", "e.cmd.noti.clean.nopvg", Api("clean", (), {"keep_s": 0}))
for _name, _keep in {
    "nan": math.nan,
    "inf": math.inf,
    "negative": -1,
    "text": "1",
    "huge-int": 10**400,
}.items():
    case(
        "api",
        f"clean-keep-{_name}",
        "e.cmd.noti.clean.badkeep",
        Api("clean", (), {"user": "boss", "keep_s": _keep}),
    )
case("api", "clean-limit-text", "e.cmd.noti.clean.badlimit", Api("clean", (), {"user": "boss", "limit": "1"}))
case("api", "delayed-limit-text", "e.cmd.noti.delayed.badlimit", Api("delayed", (), {"limit": "1"}))

# --- api: dead letters ------------------------------------------------------------------------------

case("api", "dead-entries-not-root", "e.cmd.noti.dead.nopvg", Api("dead.entries"))
case(
    "api",
    "dead-entries-limit-text",
    "e.cmd.noti.dead.badlimit",
    Api("dead.entries", (), {"user": "boss", "limit": "x"}),
)
case("api", "dead-purge-not-root", "e.cmd.noti.dead.nopvg", Api("dead.purge"))
for _name in ("unknown", "surrogate", "int", "none"):
    case(
        "api",
        f"dead-get-{_name}",
        "e.cmd.noti.dead.not_found",
        Api("dead.get", (_IDS[_name],), {"user": "boss"}),
    )
    case(
        "api",
        f"dead-retry-{_name}",
        "e.cmd.noti.dead.not_found",
        Api("dead.retry", (_IDS[_name],), {"user": "boss"}),
    )
case(
    "api",
    "dead-retry-webman-letter",
    "e.cmd.noti.dead.notretryable",
    Api("dead.retry", (Ref("webman_letter"),), {"user": "boss"}),
)
case("api", "dead-retry-not-root", "e.cmd.noti.dead.nopvg", Api("dead.retry", (Ref("webman_letter"),)))
for _name, _channel in {"fax": "fax", "empty": "", "int": 5, "surrogate": "sm\udcff"}.items():
    case(
        "api",
        f"unsuppress-channel-{_name}",
        "e.cmd.noti.dead.badtype",
        Api("dead.unsuppress", (_channel, PHONE), {"user": "boss"}),
    )
for _name, _target in {
    "surrogate": "\udcff",
    "letters": "phone",
    "nul": "+86139\x0012345678",
    "int": 5,
}.items():
    case(
        "api",
        f"unsuppress-target-{_name}",
        "e.cmd.noti.dead.badtarget",
        Api("dead.unsuppress", ("sms", _target), {"user": "boss"}),
    )
case("api", "unsuppress-not-root", "e.cmd.noti.dead.nopvg", Api("dead.unsuppress", ("sms", PHONE)))

# --- api: events and listeners ------------------------------------------------------------------------

for _name, _event in {
    "empty": "",
    "space": "order paid",
    "trailing-lf": "order.paid\n",
    "surrogate": "order.\udcff",
    "nul": "order\x00",
    "leading-dot": ".order",
    "201": Big(201, "e"),
    "int": 5,
}.items():
    case("api", f"dispatch-name-{_name}", "e.noti.event.badname", Api("dispatch", (_event,)))
for _name in (
    "nan",
    "inf",
    "surrogate-value",
    "surrogate-key",
    "int-key",
    "set",
    "deep-dict-5000",
    "deep-dict-65",
    "huge-int",
    "array",
    "datetime",
):
    case(
        "api",
        f"dispatch-payload-{_name}",
        "e.noti.event.badpayload",
        Api("dispatch", ("order.paid", BAD_JSON[_name])),
    )
case("api", "dispatch-payload-text", "e.noti.event.badpayload", Api("dispatch", ("order.paid", '{"a": 1}')))
case(
    "api", "dispatch-payload-10mb", "e.noti.event.toolarge", Api("dispatch", ("order.paid", {"a": Big(MB10)}))
)
for _name, _key in {
    "empty": "",
    "surrogate": "\udcff",
    "lf": "k\n",
    "nul": "k\x00",
    "int": 5,
    "201": Big(201),
}.items():
    case(
        "api",
        f"dispatch-key-{_name}",
        "e.noti.event.badkey",
        Api("dispatch", ("order.paid", {}), {"idempotency_key": _key}),
    )
case(
    "api", "dispatch-user-lf", "e.cmd.noti.baduser", Api("dispatch", ("order.paid", {}), {"user": "alice\n"})
)
for _name in ("unknown", "surrogate", "nul", "int"):
    case("api", f"event-get-{_name}", "e.noti.event.not_found", Api("get_event", (_IDS[_name],)))
case("api", "event-get-others", "e.noti.event.not_found", Api("get_event", (Ref("bob_event"),)))
case("api", "events-list-others", "e.noti.event.list.nopvg", Api("list_events", (), {"creator": "bob"}))
case("api", "events-list-status", "e.noti.event.badst", Api("list_events", (), {"status": "finished"}))
case("api", "events-list-limit", "e.noti.event.badlimit", Api("list_events", (), {"limit": "5"}))
case("api", "events-list-name", "e.noti.listener.badevent", Api("list_events", (), {"name": "a b"}))
SMS_TEMPLATE = {"type": "sms", "target": "{{ customer.phone }}", "text": "Order {{ id }} paid"}
for _name, _pattern in {
    "space": "order paid",
    "lf": "order.*\n",
    "empty": "",
    "surrogate": "\udcff",
    "int": 5,
}.items():
    case(
        "api",
        f"listener-event-{_name}",
        "e.noti.listener.badevent",
        Api("add_listener", (_pattern, SMS_TEMPLATE)),
    )
for _name, _action in {
    "int": 5,
    "list": ["noti.notify"],
    "no-type": {"target": "x", "text": "y"},
    "no-target": {"type": "sms", "text": "y"},
    "unknown-kind": {"kind": "shell", "type": "sms"},
    "task-extra": {"task": "x", "args": [1]},
}.items():
    case(
        "api",
        f"listener-action-{_name}",
        "e.noti.listener.badaction",
        Api("add_listener", ("order.paid", _action)),
    )
case(
    "api",
    "listener-action-fax",
    add("badtype"),
    Api("add_listener", ("order.paid", {**SMS_TEMPLATE, "type": "fax"})),
)
case(
    "api",
    "listener-action-lv",
    add("badlv"),
    Api("add_listener", ("order.paid", {**SMS_TEMPLATE, "lv": "9" * 5000})),
)
case(
    "api",
    "listener-action-field",
    add("badfield"),
    Api("add_listener", ("order.paid", {**SMS_TEMPLATE, "colour": "red"})),
)
case(
    "api",
    "listener-task-unknown",
    "e.noti.listener.notask",
    Api("add_listener", ("order.paid", "no.such.task")),
)
for _name, _text in {
    "dunder": "{{ id.__class__ }}",
    "mro": "{{ ''.__class__.__mro__ }}",
    "syntax": "{{ id ",
    "unclosed-block": "{% for x in id %}",
    "huge-range": "{% for i in range(10**9) %}x{% endfor %}",
    "power": "{{ 2**100000 }}",
    "repeat": "{{ 'x' * 100000000 }}",
}.items():
    _code = (
        "e.noti.listener.badtemplate" if _name in ("syntax", "unclosed-block") else "e.noti.listener.unsafe"
    )
    case(
        "api",
        f"listener-template-{_name}",
        _code,
        Api(
            "add_listener",
            ("order.paid", {**SMS_TEMPLATE, "text": _text}),
            {"example": {"id": 1, "customer": {"phone": PHONE}}},
        ),
    )
case(
    "api",
    "listener-filter-syntax",
    "e.noti.listener.badfilter",
    Api("add_listener", ("order.paid", SMS_TEMPLATE), {"filter": "total >"}),
)
case(
    "api",
    "listener-example-undefined",
    "e.noti.listener.undefined",
    Api("add_listener", ("order.paid", SMS_TEMPLATE), {"example": {"id": 1}}),
)
case(
    "api",
    "listener-example-nan",
    "e.noti.event.badpayload",
    Api(
        "add_listener",
        ("order.paid", SMS_TEMPLATE),
        {"example": {"id": math.nan, "customer": {"phone": PHONE}}},
    ),
)
case(
    "api",
    "listener-example-bad-target",
    add("badtarget"),
    Api(
        "add_listener", ("order.paid", SMS_TEMPLATE), {"example": {"id": 1, "customer": {"phone": "+86\x00"}}}
    ),
)
for _name, _lname in {"space": "my listener", "lf": "sms\n", "surrogate": "\udcff", "empty": ""}.items():
    case(
        "api",
        f"listener-name-{_name}",
        "e.noti.listener.badname",
        Api("add_listener", ("order.paid", SMS_TEMPLATE), {"name": _lname}),
    )
case(
    "api",
    "listener-replace-others",
    "e.noti.listener.replace.nopvg",
    Api("add_listener", ("order.paid", SMS_TEMPLATE), {"name": Ref("bob_listener"), "replace": True}),
)
case(
    "api",
    "listener-exists",
    "e.noti.listener.exists",
    Api("add_listener", ("order.paid", SMS_TEMPLATE), {"name": Ref("bob_listener"), "user": "boss"}),
)
for _name in ("unknown", "surrogate", "int"):
    case(
        "api", f"listener-remove-{_name}", "e.noti.listener.not_found", Api("remove_listener", (_IDS[_name],))
    )
case(
    "api",
    "listener-remove-others",
    "e.noti.listener.del.nopvg",
    Api("remove_listener", (Ref("bob_listener"),)),
)
for _name, _from in {
    "int": 5,
    "dict": {"bob": True},
    "int-item": ["bob", 7],
    "lf": ["bob\n"],
    "surrogate": ["b\udcff"],
    "colon": ["bob:x"],
    "empty-item": "bob,,alice",
    "star-and-name": ["*", "bob"],
    "65": ["u" * 65],
    "101-names": [f"u{_i}" for _i in range(101)],
    "huge-text": Big(MB10, ","),
}.items():
    case(
        "api",
        f"listener-from-{_name}",
        "e.noti.listener.badfrom",
        Api("add_listener", ("order.paid", SMS_TEMPLATE), {"from_users": _from, "user": "boss"}),
    )
for _name, _from in {"star": ["*"], "others": ["bob"], "star-text": "*"}.items():
    case(
        "api",
        f"listener-from-nopvg-{_name}",
        "e.noti.listener.from.nopvg",
        Api("add_listener", ("order.paid", SMS_TEMPLATE), {"from_users": _from}),
    )

# --- api: the number pool -------------------------------------------------------------------------------

for _name, _pool in {
    "space": "a b",
    "lf": "pool\n",
    "surrogate": "p\udcff",
    "brace": "p{x}",
    "65": "p" * 65,
    "int": 5,
    "empty": "",
}.items():
    case("api", f"pool-name-{_name}", "e.noti.pool.badname", Api("pool.add", (_pool, "+8610690000001")))
for _name, _number in {
    "space": "1 2",
    "lf": "1\n",
    "surrogate": "1\udcff",
    "nul": "1\x00",
    "65": "1" * 65,
    "int": 1,
    "empty": "",
}.items():
    case("api", f"pool-number-{_name}", "e.noti.pool.badnumber", Api("pool.add", ("sms-cn", _number)))
case(
    "api",
    "pool-event-unknown",
    "e.noti.pool.badevent",
    Api("pool.fire", ("sms-cn", "explode", "+8610690000001")),
)
case(
    "api", "pool-register-unknown", "e.noti.pool.refused", Api("pool.register", ("sms-cn", "+8610690000009"))
)
case("api", "pool-hangup-idle", "e.noti.pool.refused", Api("pool.hangup", ("sms-cn", Ref("pool_number"))))
case("api", "pool-call-empty", "e.noti.pool.empty", Api("pool.call", ("empty-pool",)))
case("api", "pool-call-down-number", "e.noti.pool.refused", Api("pool.call", ("sms-cn", Ref("pool_number"))))
for _name, _sticky in {"int": 5, "surrogate": "\udcff", "nul": "a\x00", "empty": ""}.items():
    case(
        "api",
        f"pool-sticky-{_name}",
        "e.noti.pool.badsticky",
        Api("pool.call", ("sms-cn",), {"sticky_to": _sticky}),
    )
for _name, _ttl in {"nan": math.nan, "inf": math.inf, "negative": -1, "text": "60", "huge": 1e308}.items():
    case(
        "api",
        f"pool-sticky-ttl-{_name}",
        "e.noti.pool.badsticky",
        Api("pool.call", ("sms-cn",), {"sticky_to": PHONE, "sticky_ttl_s": _ttl}),
    )
case(
    "api",
    "pool-sticky-and-number",
    "e.noti.pool.badsticky",
    Api("pool.call", ("sms-cn", "+8610690000001"), {"sticky_to": PHONE}),
)

# --- bulk ----------------------------------------------------------------------------------------------

for _name, _items in {
    "int": 5,
    "string": "abc",
    "mapping": {"type": "sms"},
    "none": None,
    "bytes": b"ab",
}.items():
    case("api", f"notify-many-{_name}", add("baditem"), Api("notify_many", (_items,)))
case(
    "api",
    "schedule-many-delay-nan",
    add("baddelay"),
    Api("schedule_many", ([{"type": "sms", "to": PHONE, "text": "x"}],), {"delay": math.nan}),
)
case(
    "api",
    "schedule-many-eta-text",
    add("baddelay"),
    Api("schedule_many", ([{"type": "sms", "to": PHONE, "text": "x"}],), {"eta": "tomorrow"}),
)
case(
    "bulk",
    "mixed-bad-items",
    None,
    Bulk(
        "notify_many",
        (
            [
                5,
                None,
                {"type": "sms", "to": PHONE, "text": "a\ud800"},
                {"type": "webhook", "to": URL, "content": {"a": math.nan}},
                {"type": "email", "to": EMAIL, "subject": "a\u2028b", "text": "t"},
                {"type": "sms", "to": PHONE, "text": "x", "lv": "9" * 5000},
                {"type": "sms", "to": PHONE, "text": "x", "eta": "0001-01-01T00:00"},
                {"type": "sms", "to": PHONE, "text": "x", "delay": math.inf},
                {"type": "sms", "to": PHONE, "text": "x", "colour": "red"},
                {1: "x"},
                {"type": "sms", "to": PHONE, "text": "x", "idempotency_key": "a\nb"},
                {"type": "webhook", "to": URL, "content": Deep(5000)},
            ],
        ),
        {},
        (
            add("baditem"),
            add("baditem"),
            add("badtext"),
            add("badcontent"),
            add("badtext"),
            add("badlv"),
            add("baddelay"),
            add("baddelay"),
            add("badfield"),
            add("badfield"),
            add("badkey"),
            add("badcontent"),
        ),
    ),
)
case(
    "bulk",
    "user-with-newline",
    None,
    Bulk(
        "notify_many",
        ([{"type": "sms", "to": PHONE, "text": "x"}] * 3,),
        {"user": "alice\n"},
        ("e.cmd.noti.baduser",) * 3,
    ),
)

# --- cli: in-process --------------------------------------------------------------------------------------

SMS_ARGS = ("add", "sms", "-to", PHONE, "-text", "hello")


def cli(name: str, code: str | None, *argv: Any, exit: int = 1, **kwargs: Any) -> None:  # noqa: A002
    case("cli", name, code, Cli(tuple(argv), exit=exit if code is not None else 2, **kwargs))


for _name, _text in {
    **{k: v for k, v in BAD_TEXT.items() if isinstance(v, str | Big)},
    "blank": "   ",
}.items():
    cli(f"sms-text-{_name}", add("badtext"), "add", "sms", "-to", PHONE, "-text", _text)
for _name, _subject in LINE_BREAKS.items():
    cli(
        f"email-subject-{_name}",
        add("badtext"),
        "add",
        "email",
        "-to",
        EMAIL,
        "-subject",
        _subject,
        "-text",
        "t",
    )
for _name, _target in BAD_TARGETS["sms"].items():
    if isinstance(_target, str | Big):
        cli(f"sms-target-{_name}", add("badtarget"), "add", "sms", "-to", _target, "-text", "x")
cli("sms-target-missing", add("badtarget"), "add", "sms", "-text", "x")
for _name in (
    "nan-text",
    "infinity-text",
    "1e400-text",
    "deep-text-5000",
    "deep-array-text-100000",
    "huge-int-text",
    "not-json",
    "string",
    "number-text",
    "null-text",
    "empty-text",
):
    cli(
        f"webhook-content-{_name}",
        add("badcontent"),
        "add",
        "webhook",
        "-to",
        URL,
        "-content",
        BAD_JSON[_name],
    )
for _name, _level in {k: v for k, v in BAD_LEVELS.items() if isinstance(v, str)}.items():
    cli(f"lv-{_name}", add("badlv"), *SMS_ARGS, "-lv", _level)
for _name, _delay in {
    "empty": "",
    "blank": " ",
    "nan": "nan",
    "inf": "inf",
    "1e400": "1e400",
    "400-digits": "9" * 400,
    "negative": "-5",
    "weeks": "3weeks",
    "over-a-year": "400day",
    "trailing-lf": "30m\nx",
}.items():
    cli(f"delay-{_name}", add("baddelay"), *SMS_ARGS, "-delay", _delay)
for _name, _at in {
    "empty": "",
    "word": "tomorrow",
    "year-1": "0001-01-01",
    "year-1-utc": "0001-01-01T00:00+00:00",
    "year-9999": "9999-12-31T23:59",
    "10mb": Big(MB10, "9"),
    "surrogate": "2026-12-01\udcff",
}.items():
    cli(f"at-{_name}", add("baddelay"), *SMS_ARGS, "-at", _at)
cli("delay-and-at", add("baddelay"), *SMS_ARGS, "-delay", "5m", "-at", "2030-01-01T00:00")
cli("retry-zero", add("badretry"), *SMS_ARGS, "-retry", "0")
cli("retry-word", None, *SMS_ARGS, "-retry", "three")
cli("retry-5000-digits", None, *SMS_ARGS, "-retry", "9" * 5000)
cli("retry-policy-nan", add("badretry"), *SMS_ARGS, "-retry-policy", "linear:nan")
cli("identifier-space", add("badident"), *SMS_ARGS, "-delay", "1m", "-id", "cart 1")
cli("identifier-lf", add("badident"), *SMS_ARGS, "-delay", "1m", "-id", "cart\n")
cli("provider-unknown", add("providerdenied"), *SMS_ARGS, "-provider", "nope")
cli("type-fax", add("badtype"), "add", "fax", "-to", PHONE, "-text", "x")
cli("type-missing", None, "add", "-to", PHONE, "-text", "x")
cli("unknown-option", None, *SMS_ARGS, "--colour", "red")
cli("unknown-command", None, "frobnicate")
cli("option-without-value", None, "add", "sms", "-to")
for _name, _user in {k: v for k, v in BAD_USERS.items() if isinstance(v, str)}.items():
    cli(f"as-{_name}", "e.cmd.noti.baduser", "--as", _user, *SMS_ARGS)
cli("stdin-invalid-utf8-text", add("badtext"), "add", "sms", "-to", PHONE, stdin=b"caf\xe9 \xff\xfe")
cli("stdin-invalid-utf8-content", add("badcontent"), "add", "webhook", "-to", URL, stdin=b'{"a": "\xff"}')
cli("stdin-nul", add("badtext"), "add", "sms", "-to", PHONE, stdin=b"\x00\x00\x00")
cli("stdin-empty", add("badtext"), "add", "sms", "-to", PHONE, stdin=b"")
cli(
    "stdin-deep-content", add("badcontent"), "add", "webhook", "-to", URL, stdin=b"[" * 100000 + b"]" * 100000
)
cli("stdin-nan-content", add("badcontent"), "add", "webhook", "-to", URL, stdin=b'{"a": NaN}')
cli("stdin-10mb-text", add("badtext"), "add", "sms", "-to", PHONE, stdin=b"x" * MB10)
_SMS_LINE = b'{"type": "sms", "to": "' + PHONE.encode() + b'", "text": '
for _name, (_data, _codes) in {
    "invalid-utf8": (_SMS_LINE + b'"caf\xe9"}\n', "badjson"),
    "nan": (b'{"type": "webhook", "to": "' + URL.encode() + b'", "content": {"a": NaN}}\n', "badjson"),
    "content-deep": (
        b'{"type": "webhook", "to": "'
        + URL.encode()
        + b'", "content": '
        + b'{"a":' * 100
        + b"1"
        + b"}" * 100
        + b"}\n",
        "badcontent",
    ),
    "deep": (b"[" * 100000 + b"]" * 100000 + b"\n", "badjson"),
    "nul-bytes": (b"\x00\x00\x00\n", "badjson"),
    "not-an-object": (b"[1, 2]\n", "baditem"),
    "number": (b"5\n", "baditem"),
    "null": (b"null\n", "baditem"),
    "subject-u2028": (
        b'{"type": "email", "to": "ops@example.com", "subject": "a\\u2028b", "text": "t"}\n',
        "badtext",
    ),
    "level-5000-digits": (_SMS_LINE + b'"x", "lv": "' + b"9" * 5000 + b'"}\n', "badlv"),
    "eta-year-1": (_SMS_LINE + b'"x", "eta": "0001-01-01T00:00"}\n', "baddelay"),
    "delay-negative": (_SMS_LINE + b'"x", "delay": -1}\n', "baddelay"),
    "utf16": ('{"type": "sms"}\n'.encode("utf-16"), "badjson"),
    "crlf-surrogate": (_SMS_LINE + b'"\\ud800"}\r\n', "badtext"),
    "10mb-line": (_SMS_LINE + b'"' + b"x" * MB10 + b'"}\n', "badtext"),
}.items():
    cli(f"file-{_name}", add(_codes), "add", "-f", "{jsonl}", files={"jsonl": _data})
cli("file-stdin-invalid-utf8", add("badjson"), "add", "-f", "-", stdin=_SMS_LINE + b'"\xff"}\n')
cli("file-missing", None, "add", "-f", "/nonexistent/noti-hostile.jsonl")
cli("file-is-a-directory", None, "add", "-f", "/")
for _name in ("unknown", "surrogate", "nul"):
    _id = _IDS[_name]
    cli(f"get-{_name}", "e.cmd.noti.not_found", "get", _id)
    cli(f"del-{_name}", "e.cmd.noti.del.not_a_msg", "del", _id)
    cli(f"send-{_name}", "e.cmd.noti.not_found", "send", _id)
    cli(f"revoke-{_name}", "e.cmd.noti.revoke.not_found", "revoke", _id)
    cli(f"cancel-{_name}", "e.cmd.noti.cancel.not_found", "delayed", "cancel", _id)
cli("get-10mb", "e.cmd.noti.not_found", "get", Big(MB10))
cli("get-others", "e.cmd.noti.not_found", "get", Ref("bob_record"))  # as a missing one
cli("del-others", "e.cmd.noti.del.nopvg", "del", Ref("bob_record"))
cli("send-others", "e.cmd.noti.send.nopvg", "send", Ref("bob_record"))
cli("revoke-others", "e.cmd.noti.revoke.not_found", "revoke", Ref("bob_record"))
cli("cancel-others", "e.cmd.noti.cancel.nopvg", "delayed", "cancel", Ref("bob_record"))
cli("get-no-id", None, "get")
cli("list-limit-word", None, "list", "-limit", "abc")
cli("list-limit-5000-digits", None, "list", "-limit", "9" * 5000)
cli("list-status-5", "e.cmd.noti.list.badst", "list", "-st", "5")
cli("list-status-word", None, "list", "-st", "done")
cli("list-others", "e.cmd.noti.list.nopvg", "list", "-u", "bob")
cli("list-user-space", "e.cmd.noti.baduser", "list", "-u", "a b", user="boss")
cli("list-user-surrogate", "e.cmd.noti.baduser", "list", "-u", "b\udcffob", user="boss")
for _name, _timeout in {"nan": "nan", "inf": "inf", "negative": "-1", "zero": "0"}.items():
    cli(f"send-timeout-{_name}", "e.cmd.noti.send.badtimeout", "send", "-timeout", _timeout)
cli("send-timeout-word", None, "send", "-timeout", "soon")
cli("send-others-user", "e.cmd.noti.send.nopvg", "send", "-u", "bob")
cli("clean-not-root", "e.cmd.noti.clean.nopvg", "clean", "-keep", "0")
for _name, _keep in {
    "nan": "nan",
    "400-digits": "9" * 400,
    "negative": "-1",
    "weeks": "3weeks",
    "empty": "",
}.items():
    cli(f"clean-keep-{_name}", "e.cmd.noti.clean.badkeep", "clean", "-keep", _keep, user="boss")
cli("revoke-below-nan", None, "revoke", "-all", "-below-lv", "nan")
cli("revoke-below-zero", add("badlv"), "revoke", "-all", "-below-lv", "0")
cli("revoke-type-fax", add("badtype"), "revoke", "-all", "-type", "fax")
cli("revoke-filter-without-all", None, "revoke", "-u", "bob")
cli("revoke-nothing", "e.cmd.noti.revoke.what", "revoke")
cli("revoke-all-others", "e.cmd.noti.revoke.nopvg", "revoke", "-all", "-u", "bob")
cli("delayed-list-limit", None, "delayed", "list", "-limit", "x")
cli("dead-list-not-root", "e.cmd.noti.dead.nopvg", "dead", "list")
cli("dead-show-unknown", "e.cmd.noti.dead.not_found", "dead", "show", UNKNOWN_ID, user="boss")
cli("dead-show-surrogate", "e.cmd.noti.dead.not_found", "dead", "show", "\udcff", user="boss")
cli(
    "dead-retry-webman-letter",
    "e.cmd.noti.dead.notretryable",
    "dead",
    "retry",
    Ref("webman_letter"),
    user="boss",
)
cli("dead-retry-nothing", None, "dead", "retry", user="boss")
cli("dead-purge-not-root", "e.cmd.noti.dead.nopvg", "dead", "purge", "--yes")
cli(
    "dead-unsuppress-fax", "e.cmd.noti.dead.badtype", "dead", "unsuppress", "fax", "+15550001111", user="boss"
)
cli(
    "dead-unsuppress-surrogate",
    "e.cmd.noti.dead.badtarget",
    "dead",
    "unsuppress",
    "sms",
    "\udcff",
    user="boss",
)
cli(
    "dead-unsuppress-bad-email",
    "e.cmd.noti.dead.badtarget",
    "dead",
    "unsuppress",
    "email",
    "not-an-address",
    user="boss",
)
cli("dead-unsuppress-not-root", "e.cmd.noti.dead.nopvg", "dead", "unsuppress", "sms", PHONE)
cli("pool-name-space", "e.noti.pool.badname", "pool", "a b", "show")
cli("pool-name-surrogate", "e.noti.pool.badname", "pool", "p\udcff", "add", "1")
cli("pool-number-surrogate", "e.noti.pool.badnumber", "pool", "sms-cn", "add", "\udcff")
cli("pool-number-lf", "e.noti.pool.badnumber", "pool", "sms-cn", "add", "1\n")
cli("pool-numbers-mixed", "e.noti.pool.badnumber", "pool", "sms-cn", "add", "a b", "c d")
cli("pool-call-empty", "e.noti.pool.empty", "pool", "empty-pool", "call")
cli("pool-hangup-idle", "e.noti.pool.refused", "pool", "sms-cn", "hangup", Ref("pool_number"))
cli("pool-no-number", None, "pool", "sms-cn", "add")
cli("pool-unknown-event", None, "pool", "sms-cn", "explode", "1")
cli("event-name-space", "e.noti.event.badname", "event", "dispatch", "order paid")
cli("event-data-nan", "e.noti.event.badpayload", "event", "dispatch", "order.paid", "-data", '{"a": NaN}')
cli(
    "event-data-deep",
    "e.noti.event.badpayload",
    "event",
    "dispatch",
    "order.paid",
    "-data",
    BAD_JSON["deep-text-5000"],
)
cli("event-data-array", "e.noti.event.badpayload", "event", "dispatch", "order.paid", "-data", "[1]")
cli(
    "event-data-stdin-invalid-utf8",
    "e.noti.event.badpayload",
    "event",
    "dispatch",
    "order.paid",
    "-data",
    "-",
    stdin=b'{"a": "\xff"}',
)
cli("event-show-unknown", "e.noti.event.not_found", "event", "show", UNKNOWN_ID)
cli("event-show-others", "e.noti.event.not_found", "event", "show", Ref("bob_event"))
cli("event-list-status", None, "event", "list", "-st", "finished")
cli("event-list-limit", None, "event", "list", "-limit", "many")
cli(
    "listener-template-dunder",
    "e.noti.listener.unsafe",
    "listener",
    "add",
    "order.paid",
    "-type",
    "sms",
    "-to",
    "{{ customer.phone }}",
    "-text",
    "{{ id.__class__ }}",
    "-example",
    '{"id": 1, "customer": {"phone": "' + PHONE + '"}}',
)
cli(
    "listener-content-nan",
    "e.noti.listener.badaction",
    "listener",
    "add",
    "order.paid",
    "-type",
    "webhook",
    "-to",
    URL,
    "-content",
    '{"a": NaN}',
)
cli(
    "listener-example-deep",
    "e.noti.listener.badexample",
    "listener",
    "add",
    "order.paid",
    "-type",
    "sms",
    "-to",
    PHONE,
    "-text",
    "x",
    "-example",
    BAD_JSON["deep-text-5000"],
)
cli("listener-del-unknown", "e.noti.listener.not_found", "listener", "del", "nobody")
cli("listener-del-others", "e.noti.listener.del.nopvg", "listener", "del", Ref("bob_listener"))
_LISTENER_SMS = ("listener", "add", "order.paid", "-type", "sms", "-to", PHONE, "-text", "x")
cli("listener-from-star", "e.noti.listener.from.nopvg", *_LISTENER_SMS, "-from-users", "*")
cli("listener-from-bob", "e.noti.listener.from.nopvg", *_LISTENER_SMS, "-from-users", "alice,bob")
for _name, _from in {
    "lf": "bob\n",
    "star-and-name": "*,bob",
    "empty-item": "bob,",
    "surrogate": "b\udcff",
}.items():
    cli(
        f"listener-from-{_name}", "e.noti.listener.badfrom", *_LISTENER_SMS, "-from-users", _from, user="boss"
    )

# the webman commands (none that would write files or block)
_WM = ("--as", "boss", "webman")
cli("webman-clean-surrogate", "e.noti.bridge.badname", *_WM, "clean", "app\\queue\\\udcff", "--yes")
cli("webman-clean-empty", "e.noti.bridge.badname", *_WM, "clean", "", "--yes")
cli("webman-clean-nul", "e.noti.bridge.badname", *_WM, "clean", "app\\queue\\A\x00", "--yes")
cli("webman-history-surrogate", "e.noti.bridge.badname", *_WM, "history", "\udcff")
cli(
    "webman-history-older-nan",
    "e.noti.bridge.badtime",
    *_WM,
    "history",
    "app\\queue\\A",
    "--older-than",
    "nan",
)
cli("webman-history-older-negative", "e.noti.bridge.badtime", *_WM, "history", "Q", "--older-than", "-1h")
cli("webman-history-limit-zero", None, *_WM, "history", "Q", "--limit", "0")
cli(
    "webman-remove-unknown",
    "e.noti.bridge.unknown",
    *_WM,
    "remove-consumer",
    "nobody",
    "--config",
    "{toml}",
    files={"toml": b""},
)
cli("webman-run-unknown", "e.noti.config", *_WM, "run", "nobody")
cli("webman-run-unimportable", "e.noti.config", *_WM, "run", "no.such.module:Consumer")
cli(
    "webman-make-consumer-surrogate",
    "e.noti.bridge.badname",
    *_WM,
    "make-consumer",
    "--queue",
    "\udcff",
    "--processes",
    "1",
    "--path",
    "app/queue",
    "--config",
    "{toml}",
    files={"toml": b""},
)
cli("webman-make-consumer-processes", None, *_WM, "make-consumer", "--queue", "q", "--processes", "nan")

# --- proc: the real command, raw bytes ---------------------------------------------------------------

case(
    "proc", "argv-invalid-utf8-text", add("badtext"), Proc(("add", "sms", "-to", PHONE, "-text", b"caf\xe9"))
)
case(
    "proc",
    "argv-invalid-utf8-target",
    add("badtarget"),
    Proc(("add", "sms", "-to", b"+86139\xff12345678", "-text", "x")),
)
case("proc", "argv-invalid-utf8-user", "e.cmd.noti.baduser", Proc(("--as", b"al\xffice", "list")))
case(
    "proc", "stdin-invalid-utf8", add("badtext"), Proc(("add", "sms", "-to", PHONE), stdin=b"\xff\xfe hello")
)
case(
    "proc",
    "file-invalid-utf8",
    add("badjson"),
    Proc(("add", "-f", "{jsonl}"), files={"jsonl": _SMS_LINE + b'"\xe9"}\n'}),
)
case(
    "proc",
    "config-unknown-key",
    "e.noti.config",
    Proc(("list",), files={"toml": b"retry_maxx = 3\n"}, env={"NOTI_CONFIG": "{toml}"}),
)
case("proc", "config-nan", "e.noti.config", Proc(("list",), env={"NOTI_LEASE_TIMEOUT_S": "nan"}))
case(
    "proc",
    "config-root-admin-with-space",
    "e.noti.config",
    Proc(("list",), env={"NOTI_ROOT_ADMINS": "boss,ev il"}),
)

# --- task: noti.notify through Celery -------------------------------------------------------------------

SMS_KW = {"type": "sms", "target": PHONE, "text": "hello"}


def task(name: str, code: str, how: str, **kwargs: Any) -> None:
    case("task", name, code, Task(how, **kwargs))


def refused_option(name: str, code: str, kwargs: dict[str, Any] = SMS_KW, **options: Any) -> None:
    """``apply_async`` with a hostile option: the caller's call raises ``e.cmd.noti.add.<code>``."""
    task(name, add(code), "apply_async", kwargs=kwargs, options=options, at_call=True)


for _name, _priority in {"10": 10, "negative": -1, "word": "x", "bool": True, "float": 1.5}.items():
    refused_option(f"priority-{_name}", "badpriority", priority=_priority)
for _name, _countdown in {
    "nan": math.nan,
    "inf": math.inf,
    "negative": -1,
    "text": "5",
    "huge": 10**400,
}.items():
    refused_option(f"countdown-{_name}", "baddelay", countdown=_countdown)
refused_option("countdown-and-eta", "baddelay", countdown=5, eta=dt.datetime(2030, 1, 1))
refused_option("countdown-and-delay", "baddelay", kwargs={**SMS_KW, "delay": 5}, countdown=5)
refused_option("eta-word", "baddelay", eta="tomorrow")
refused_option("eta-year-1", "baddelay", eta=dt.datetime(1, 1, 1))
task(
    "delay-keyword-countdown-nan",
    add("baddelay"),
    "delay",
    kwargs={**SMS_KW, "countdown": math.nan},
    at_call=True,
)
for _name, _expires in {"nan": math.nan, "inf": math.inf, "word": "later", "past": -5}.items():
    refused_option(f"expires-{_name}", "badexpires", expires=_expires)

task("no-type", add("badtype"), "send_task", kwargs={"target": PHONE, "text": "x"})
task("no-target", add("badtarget"), "send_task", kwargs={"type": "sms", "text": "x"})
task("type-fax", add("badtype"), "send_task", kwargs={**SMS_KW, "type": "fax"})
task("type-twice", add("baditem"), "send_task", args=("sms",), kwargs=SMS_KW)
task(
    "extra-positional",
    add("baditem"),
    "send_task",
    args=("sms", PHONE, 1, "alice", "extra"),
    kwargs={"text": "x"},
)
task("self-keyword", add("badfield"), "send_task", kwargs={**SMS_KW, "self": 1})
task("lv-5000-digits", add("badlv"), "send_task", kwargs={**SMS_KW, "lv": "9" * 5000})
task("lv-nan", add("badlv"), "send_task", kwargs={**SMS_KW, "lv": math.nan})
task("lv-float", add("badlv"), "send_task", kwargs={**SMS_KW, "lv": 2.5})
task("text-surrogate", add("badtext"), "send_task", kwargs={**SMS_KW, "text": "a\ud800"})
task("text-nul", add("badtext"), "send_task", kwargs={**SMS_KW, "text": "a\x00"})
task("text-10mb", add("badtext"), "send_task", kwargs={**SMS_KW, "text": Big(MB10)})
task("text-list", add("badtext"), "send_task", kwargs={**SMS_KW, "text": ["a"]})
task(
    "subject-u2028",
    add("badtext"),
    "send_task",
    kwargs={"type": "email", "target": EMAIL, "subject": "a\u2028b", "text": "t"},
)
task(
    "subject-nel",
    add("badtext"),
    "delay",
    kwargs={"type": "email", "target": EMAIL, "subject": "a\x85b", "text": "t"},
)
task(
    "content-nan",
    add("badcontent"),
    "send_task",
    kwargs={"type": "webhook", "target": URL, "content": {"a": math.nan}},
)
task(
    "content-deep-100",
    add("badcontent"),
    "send_task",
    kwargs={"type": "webhook", "target": URL, "content": Deep(100)},
)
task(
    "content-deep-text",
    add("badcontent"),
    "delay",
    kwargs={"type": "webhook", "target": URL, "content": Deep(5000, text=True)},
)
task("user-lf", "e.cmd.noti.baduser", "send_task", kwargs={**SMS_KW, "user": "alice\n"})
task("user-empty", "e.cmd.noti.baduser", "delay", kwargs={**SMS_KW, "user": ""})
task("user-int", "e.cmd.noti.baduser", "send_task", kwargs={**SMS_KW, "user": 5})
task("identifier-space", add("badident"), "send_task", kwargs={**SMS_KW, "delay": 60, "identifier": "cart 1"})
task("idempotency-key-nul", add("badkey"), "send_task", kwargs={**SMS_KW, "idempotency_key": "k\x00"})
task("retry-max-text", add("badretry"), "send_task", kwargs={**SMS_KW, "retry_max": "3"})
task("delay-negative", add("baddelay"), "send_task", kwargs={**SMS_KW, "delay": -1})
task("countdown-field-nan", add("baddelay"), "send_task", kwargs={**SMS_KW, "countdown": math.nan})
task("eta-field-text", add("baddelay"), "send_task", kwargs={**SMS_KW, "eta": "tomorrow"})
task("provider-unknown", add("providerdenied"), "send_task", kwargs={**SMS_KW, "provider": "nope"})
task("unknown-field", add("badfield"), "delay", kwargs={**SMS_KW, "colour": "red"})
task("target-invalid-utf8", add("badtarget"), "delay", kwargs={**SMS_KW, "target": "+86139\udcff12345678"})
WEBHOOK_KW = {"type": "webhook", "target": URL}
# what a Celery message (kombu's JSON) cannot carry is refused in the caller
for _name in ("set", "datetime-key", "deep-dict-5000", "huge-int"):
    _content = {"datetime-key": {dt.date(2026, 1, 1): 1}}.get(_name, BAD_JSON.get(_name))
    task(
        f"delay-content-{_name}",
        add("baditem"),
        "delay",
        kwargs={**WEBHOOK_KW, "content": _content},
        at_call=True,
    )
task(
    "delay-content-object",
    add("baditem"),
    "delay",
    kwargs={**WEBHOOK_KW, "content": {"a": object()}},
    at_call=True,
)
# what it carries reaches the worker, which refuses it
for _name in ("surrogate-value", "inf", "bytes-value", "datetime"):
    task(
        f"worker-content-{_name}",
        add("badcontent"),
        "delay",
        kwargs={**WEBHOOK_KW, "content": BAD_JSON[_name]},
    )

# noti.events.dispatch, the events' task for producers that only know task names
for _name, (_args, _kwargs, _code) in {
    "no-name": ((), {"payload": {}}, "e.noti.event.badname"),
    "name-lf": ((), {"name": "order.paid\n"}, "e.noti.event.badname"),
    "payload-list": ((), {"name": "order.paid", "payload": [1]}, "e.noti.event.badpayload"),
    "payload-nan": ((), {"name": "order.paid", "payload": {"a": math.nan}}, "e.noti.event.badpayload"),
    "payload-deep": ((), {"name": "order.paid", "payload": Deep(100)}, "e.noti.event.badpayload"),
    "payload-surrogate": ((), {"name": "order.paid", "payload": {"a": "\ud800"}}, "e.noti.event.badpayload"),
    "payload-10mb": ((), {"name": "order.paid", "payload": {"a": Big(MB10)}}, "e.noti.event.toolarge"),
    "user-lf": ((), {"name": "order.paid", "user": "alice\n"}, "e.cmd.noti.baduser"),
    "unknown-keyword": ((), {"name": "order.paid", "colour": "red"}, "e.noti.event.badcall"),
    "extra-positional": (("order.paid", {}, "alice", "extra"), {}, "e.noti.event.badcall"),
}.items():
    task(f"event-dispatch-{_name}", _code, "event_task", args=_args, kwargs=_kwargs)

# --- webman: entries written into the NotificationConsumer's stream ----------------------------------

SMS_DATA = {"type": "sms", "to": PHONE, "text": "hello"}


def webman(name: str, expect: tuple[str, ...], *, error_class: str = "poison", **kwargs: Any) -> None:
    case("webman", name, expect[0], Webman(expect=expect, error_class=error_class, **kwargs))


_MALFORMED = "e.noti.bridge.malformed"
for _name, (_fields, _reason) in {
    "no-message-field": ({"payload": "{}"}, "no_message_field"),
    "empty": ({"message": ""}, "empty"),
    "not-json": ({"message": "not json"}, "bad_json"),
    "invalid-utf8": ({"message": b'{"type":"\xff\xfe"}'}, "invalid_utf8"),
    "nan": ({"message": '{"type": NaN}'}, "bad_json"),
    "deep": ({"message": "[" * 600 + "]" * 600}, "bad_json"),
    "string": ({"message": '"a string"'}, "bad_field_type"),
    "nul-bytes": ({"message": b"\x00" * 16}, "bad_json"),
    "10mb": ({"message": Big(MB10, "x", '{"x": "')}, "bad_json"),
}.items():
    webman(f"entry-{_name}", (_MALFORMED, _reason), fields=_fields)
for _name, (_message, _reason) in {
    "fail-count-word": ({"failCount": "abc"}, "bad_field_type"),
    "timestamp-list": ({"timestamp": [1]}, "bad_field_type"),
    "data-null": ({"data": None}, "missing_key"),
    "foreign-type": ({"type": "another-queue"}, "foreign_type"),
    "foreign-source": ({"source": "app\\queue\\Other"}, "foreign_source"),
}.items():
    webman(
        f"message-{_name}",
        (_MALFORMED, _reason),
        data=SMS_DATA,
        message=_message,
        error_class="foreign" if _name.startswith("foreign") else "poison",
    )
for _name, _data in {
    "data-string": "not an object",
    "data-list": [1, 2],
    "data-number": 5,
    "no-to": {"type": "sms", "text": "x"},
    "no-type": {"to": PHONE, "text": "x"},
    "to-number": {"type": "sms", "to": 8613912345678, "text": "x"},
    "user-key": {**SMS_DATA, "user": "boss"},
}.items():
    webman(f"data-{_name}", (_MALFORMED,), data=_data)
for _name, (_data, _code) in {
    "type-fax": ({**SMS_DATA, "type": "fax"}, "badtype"),
    "bad-target": ({**SMS_DATA, "to": "12"}, "badtarget"),
    "target-nul": ({**SMS_DATA, "to": "+86139\x0012345678"}, "badtarget"),
    "text-nul": ({**SMS_DATA, "text": "a\x00b"}, "badtext"),
    "text-escape": ({**SMS_DATA, "text": "\x1b[2J"}, "badtext"),
    "text-10mb": ({**SMS_DATA, "text": Big(MB10)}, "badtext"),
    "subject-u2028": ({"type": "email", "to": EMAIL, "subject": "a\u2028b", "text": "t"}, "badtext"),
    "subject-lf": (
        {"type": "email", "to": EMAIL, "subject": "a\nBcc: x@evil.example", "text": "t"},
        "badtext",
    ),
    "lv-5000-digits": ({**SMS_DATA, "lv": "9" * 5000}, "badlv"),
    "lv-float": ({**SMS_DATA, "lv": 1.5}, "badlv"),
    "lv-bool": ({**SMS_DATA, "lv": True}, "badlv"),
    "content-deep": ({"type": "webhook", "to": URL, "content": Deep(100)}, "badcontent"),
    "content-list": ({"type": "webhook", "to": URL, "content": [1]}, "badcontent"),
    "identifier-lf": ({**SMS_DATA, "delay": 60, "identifier": "a\n"}, "badident"),
    "idempotency-key-nul": ({**SMS_DATA, "idempotency_key": "k\x00"}, "badkey"),
    "retry-max-text": ({**SMS_DATA, "retry_max": "3"}, "badretry"),
    "delay-negative": ({**SMS_DATA, "delay": -1}, "baddelay"),
    "unknown-field": ({**SMS_DATA, "colour": "red"}, "badfield"),
    "provider-unknown": ({**SMS_DATA, "provider": "nope"}, "providerdenied"),
}.items():
    webman(f"notify-{_name}", (add(_code),), data=_data, error_class="rejected")

# --- event: listener templates rendered against hostile payloads --------------------------------------

for _name, (_action, _payload, _code) in {
    "target-nul": (SMS_TEMPLATE, {"id": 1, "customer": {"phone": "+86139\x0012345678"}}, "badtarget"),
    "target-letters": (SMS_TEMPLATE, {"id": 1, "customer": {"phone": "call me"}}, "badtarget"),
    "text-nul": (
        {**SMS_TEMPLATE, "text": "{{ note }}"},
        {"customer": {"phone": PHONE}, "note": "a\x00b"},
        "badtext",
    ),
    "text-escape": (
        {**SMS_TEMPLATE, "text": "{{ note }}"},
        {"customer": {"phone": PHONE}, "note": "\x1b[2J"},
        "badtext",
    ),
    "text-too-long": (
        {**SMS_TEMPLATE, "text": "{{ note }}"},
        {"customer": {"phone": PHONE}, "note": "x" * 2000},
        "badtext",
    ),
    "subject-u2028": (
        {"type": "email", "target": "{{ to }}", "subject": "{{ subject }}", "text": "t"},
        {"to": EMAIL, "subject": "a\u2028b"},
        "badtext",
    ),
    "subject-lf": (
        {"type": "email", "target": "{{ to }}", "subject": "{{ subject }}", "text": "t"},
        {"to": EMAIL, "subject": "Hi\nBcc: x@evil.example"},
        "badtext",
    ),
    "email-target": (
        {"type": "email", "target": "{{ to }}", "subject": "s", "text": "t"},
        {"to": "a@example.com, b@example.com"},
        "badtarget",
    ),
    "webhook-target": (
        {"type": "webhook", "target": "{{ url }}", "content": {"a": "b"}},
        {"url": "javascript:alert(1)"},
        "badtarget",
    ),
}.items():
    case("event", _name, add(_code), Processed(_action, _payload))

# --- config: the TOML file and NOTI_* variables ----------------------------------------------------------


def config(name: str, says: str, toml: bytes | None = None, **env: str) -> None:
    case("config", name, "e.noti.config", Config(toml, env, says))


config("unknown-key", "did you mean 'retry_max'", b"retry_maxx = 3\n")
config("unknown-channel-key", "did you mean 'provider'", b'[channels.sms]\nprovidr = "sandbox"\n')
config("unknown-webman-key", "did you mean 'enabled'", b"[webman]\nenabeld = true\n")
config("unknown-consumer-key", "clas", b'[webman.consumers.N]\nclas = "a.b:C"\n')
config("unknown-table", "unknown setting 'chanels'", b'[chanels.sms]\nprovider = "sandbox"\n')
config("retry-max-word", "retry_max", b'retry_max = "three"\n')
config("retry-max-float", "retry_max", b"retry_max = 3.5\n")
config("retry-max-zero", "retry_max", b"retry_max = 0\n")
config("retry-max-huge", "retry_max", b"retry_max = 9223372036854775807\n")
config("lease-nan", "lease_timeout_s", b"lease_timeout_s = nan\n")
config("lease-inf", "lease_timeout_s", b"lease_timeout_s = inf\n")
config("keep-inf", "keep_done_s", b"keep_done_s = inf\n")
config("retry-seconds-nan", "retry_seconds", b"retry_seconds = nan\n")
config("worker-pool", "worker_pool", b'worker_pool = "fork"\n')
config("root-admin-space", "root_admins", b'root_admins = ["bo ss"]\n')
config("root-member-lf", "root_members", b'root_members = ["ops\\n"]\n')
config("user-lf", "user", b'user = "alice\\n"\n')
config("user-empty", "user", b'user = ""\n')
config("key-prefix-space", "key_prefix", b'key_prefix = "no ti:"\n')
config("channels-not-a-table", "channels", b"channels = 5\n")
config("channel-retry-max", "retry_max", b"[channels.sms]\nretry_max = 1000\n")
config("provider-not-a-table", "providers", b"[providers]\nx = 5\n")
config("webman-notify-user", "notify_user", b'[webman]\nnotify_user = "a b"\n')
config("webman-processes", "processes", b'[webman.consumers.N]\nclass = "a.b:C"\nprocesses = 0\n')
config("webman-class-lf", "class", b'[webman.consumers.N]\nclass = "a.b:C\\n"\n')
config("syntax-error", "cannot read the settings", b"retry_max = \n")
config("invalid-utf8", "cannot read the settings", b'user = "caf\xe9"\n')
config("nul-byte", "cannot read the settings", b'user = "a\x00"\n')
config("payload-max-huge", "event_payload_max_bytes", b"event_payload_max_bytes = 99999999999\n")
config("env-retry-max-word", "NOTI_RETRY_MAX", NOTI_RETRY_MAX="abc")
config("env-lease-nan", "NOTI_LEASE_TIMEOUT_S", NOTI_LEASE_TIMEOUT_S="nan")
config("env-lease-inf", "NOTI_LEASE_TIMEOUT_S", NOTI_LEASE_TIMEOUT_S="inf")
config("env-keep-1e400", "NOTI_KEEP_DONE_S", NOTI_KEEP_DONE_S="1e400")
config("env-concurrency-5000-digits", "NOTI_WORKER_CONCURRENCY", NOTI_WORKER_CONCURRENCY="9" * 5000)
config("env-root-admins-space", "NOTI_ROOT_ADMINS", NOTI_ROOT_ADMINS="boss,ev il")
config("env-user-lf", "NOTI_USER", NOTI_USER="alice\n")
config("env-user-colon", "NOTI_USER", NOTI_USER="a:b")
config("env-mask-maybe", "NOTI_MASK_IN_CELERY", NOTI_MASK_IN_CELERY="maybe")
config("env-nested-typo", "did you mean 'provider'", NOTI_CHANNELS__SMS__PROVIDR="sandbox")
config("env-config-directory", "not a file", NOTI_CONFIG="/")

_counts = Counter(c.id for c in CASES)
assert not [i for i, n in _counts.items() if n > 1], [i for i, n in _counts.items() if n > 1]


def by_surface() -> dict[str, int]:
    """How many cases each surface has."""
    return dict(Counter(c.surface for c in CASES))
