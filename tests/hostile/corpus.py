"""The hostile-input corpus: malformed inputs for every door into noti, each with the error
code it must be refused with.

The corpus is data. Each :class:`Case` names its surface (how the input reaches noti), the
input, and the stable code from :mod:`noti.errors` (None for a command-line usage error,
which exits 2 with click's ``Error:`` line). ``tests/test_hostile_input.py`` runs every case
and checks the refusal, that no traceback or ``e.noti.internal`` shows, and that the Redis
database is unchanged.

Surfaces:

========== ======================================================================================
``api``    a call of the Python API (``noti.notify`` …, ``noti.events``, ``noti.numpool``,
           ``noti.recipients``) raising
``bulk``   ``notify_many`` / ``schedule_many``, the recipients' ``notify_many`` and imports: the
           call returns, every item (row) refused with its code
``cli``    ``noti`` run in this process (arguments, standard input, ``-f`` files)
``proc``   ``python -m noti`` as a real process: raw bytes in ``argv``, standard input and files
``task``   ``noti.tasks.notify.delay`` / ``apply_async`` / ``app.send_task("noti.notify")`` and
           ``send_task("noti.events.dispatch")``: refused in the caller (``at_call``) or by a
           real worker (the task fails with the code)
``webman`` an entry written by hand into the stream of a ``NotificationConsumer``
``event``  an event whose payload makes a listener's notification template invalid
``config`` the TOML file (``NOTI_CONFIG``) and ``NOTI_*`` variables
========== ======================================================================================

The recipients cases (issue 34) stand on data the test seeds from :data:`RCPT_SEED` (alice's
recipients and templates, the categories, bob's recipient, template and notice).

Values that must be built when the case runs are markers: :class:`Ref` (an id of the seeded
data: another user's record, a webman dead letter …), :class:`Big` (a long string: ten
megabytes are not kept in memory for every case) and :class:`Deep` (nested JSON).
"""

from __future__ import annotations

import datetime as dt
import json
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
    """``prefix``, ``size`` copies of ``char``, then ``suffix``, made when the case runs."""

    size: int
    char: str = "x"
    prefix: str = ""
    suffix: str = ""


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

# a user lists and purges the dead letters of their own records (none of the ones here): no refusal
case(
    "api",
    "dead-entries-limit-text",
    "e.cmd.noti.dead.badlimit",
    Api("dead.entries", (), {"user": "boss", "limit": "x"}),
)
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
# another user's letter (a webman bridge's is the root members') is answered as a missing one
case("api", "dead-retry-not-theirs", "e.cmd.noti.dead.not_found", Api("dead.retry", (Ref("webman_letter"),)))
case("api", "dead-get-not-theirs", "e.cmd.noti.dead.not_found", Api("dead.get", (Ref("webman_letter"),)))
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
    "nested-ifs": "{% if id %}" * 120 + "{% endif %}" * 120,  # Python's 100 indentation levels
    "nested-parens": "{{ " + "(" * 400 + "id" + ")" * 400 + " }}",  # Python's recursion limit
}.items():
    _code = (
        "e.noti.listener.badtemplate"
        if _name in ("syntax", "unclosed-block", "nested-ifs", "nested-parens")
        else "e.noti.listener.unsafe"
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
    "listener-filter-nested-parens",
    "e.noti.listener.badfilter",
    Api("add_listener", ("order.paid", SMS_TEMPLATE), {"filter": "(" * 400 + "total" + ")" * 400}),
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
cli("dead-show-not-theirs", "e.cmd.noti.dead.not_found", "dead", "show", Ref("webman_letter"))
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

# --- recipients (issue 34): profiles, preferences, categories, templates, notices ---------------------

RCPT = "42"  # alice's recipient (RCPT_SEED)


def rcpt(code: str) -> str:
    return f"e.cmd.noti.rcpt.{code}"


def tmpl(code: str) -> str:
    return f"e.cmd.noti.tmpl.{code}"


def notice(code: str) -> str:
    return f"e.cmd.noti.notify.{code}"


ORDER_TEMPLATE = {
    "default_locale": "en",
    "channels": {
        "sms": {"en": {"text": "Order {{ order }} shipped"}, "zh": {"text": "订单 {{ order }} 已发货"}},
        "email": {"en": {"subject": "Order {{ order }}", "text": "Hello {{ recipient.attributes.name }}"}},
    },
}


def _sms_template(text: str) -> dict[str, Any]:
    return {"default_locale": "en", "channels": {"sms": {"en": {"text": text}}}}


#: Templates whose source passes when put (nothing in it is refused by itself) and whose
#: rendering is refused at notify time: name -> (template, data, code).
RENDER_TRAPS: dict[str, tuple[dict[str, Any], dict[str, Any], str]] = {
    "trap-format": (_sms_template("{{ '{0.__class__}'.format(order) }}"), {"order": "7"}, tmpl("unsafe")),
    "trap-repeat": (_sms_template("{{ order * 100000000 }}"), {"order": "7"}, tmpl("unsafe")),
    "trap-range": (_sms_template("{% for i in range(n) %}x{% endfor %}"), {"n": 10**9}, tmpl("unsafe")),
    "trap-power": (_sms_template("{{ n ** n }}"), {"n": 10**6}, tmpl("unsafe")),
    "trap-center": (_sms_template("{{ order|center(n) }}"), {"order": "7", "n": 10**8}, tmpl("unsafe")),
    "trap-join": (
        _sms_template("{{ items|join(sep) }}"),
        {"items": list(range(1000)), "sep": "x" * 60000},
        tmpl("unsafe"),
    ),
    "trap-loops": (
        _sms_template(
            "{% for a in i %}{% for b in i %}{% for c in i %}x{% endfor %}{% endfor %}{% endfor %}"
        ),
        {"i": list(range(1000))},
        tmpl("toobig"),
    ),
    "trap-output": (
        {"default_locale": "en", "channels": {"webhook": {"en": {"content": {"a": "{{ d }}" * 2000}}}}},
        {"d": "x" * 60000},
        tmpl("toobig"),
    ),
    "trap-config": (_sms_template("{{ config }}"), {"order": 7}, tmpl("missingvar")),
    "trap-request": (_sms_template("{{ request.environ }}"), {"order": 7}, tmpl("missingvar")),
    "trap-addresses": (_sms_template("{{ recipient.addresses }}"), {}, tmpl("missingvar")),  # never shown
    "trap-divide": (_sms_template("{{ 1 / n }}"), {"n": 0}, tmpl("error")),
}
#: What the recipients cases stand on (the test's seed puts it): categories (by a root member),
#: alice's recipients and templates, bob's recipient and template (and a notice to it, waiting
#: an hour: ``Ref("bob_notice")``).
RCPT_SEED: dict[str, Any] = {
    "categories": {
        "orders": {"channels": {"sms": True, "email": True}},
        "security": {"critical": True},
        "billing": {"opt_out": False},
    },
    "recipients": {
        RCPT: {
            "addresses": {"sms": PHONE, "email": EMAIL, "webhook": URL},
            "locale": "zh-Hant-TW",
            "timezone": "Asia/Taipei",
            "attributes": {"name": "Ada"},
        },
        "43": {"addresses": {"sms": "+8613912345679"}},
    },
    "templates": {"order_shipped": ORDER_TEMPLATE, **{n: t for n, (t, _, _) in RENDER_TRAPS.items()}},
    "bob": {"recipient": ("7", {"addresses": {"sms": PHONE}}), "template": ("bob_tmpl", ORDER_TEMPLATE)},
}
NOTICE = {"recipient": RCPT, "template": "order_shipped", "data": {"order": 7}}


def put(profile: Any, rid: Any = "50", **kwargs: Any) -> Api:
    return Api("rcpt.put", (rid, profile), kwargs)


def tell(**changes: Any) -> Api:
    """``noti.notify(recipient=…)`` with ``changes`` over a good call."""
    return Api("notify", (), {**NOTICE, **changes})


_ADDR = {"sms": PHONE}
# api: a profile's locale, timezone and quiet hours
for _name, _locale in {
    "control": "en\x07",
    "nul": "en\x00",
    "lf": "en\n",
    "36-chars": "en-" + "a" * 33,
    "dotdot": "../en",
    "cyrillic-e": "\u0435n",  # Cyrillic е, a Latin e's look-alike
    "fullwidth": "ｅｎ",
    "surrogate": "e\udcffn",
    "empty": "",
    "space": "en US",
    "trailing-dash": "zh-Hant-TW-",
    "private-use": "x-klingon",
    "extension": "en-u-ca-gregory",
    "variant-twice": "de-1996-1996",
    "10mb": Big(MB10, "e"),
    "int": 5,
    "bool": True,
    "list": ["en"],
    "dict": {"tag": "en"},
}.items():
    case("api", f"rcpt-locale-{_name}", rcpt("badlocale"), put({"addresses": _ADDR, "locale": _locale}))
for _name, _zone in {
    "absolute-path": "/etc/passwd",
    "dotdot": "../../etc/passwd",
    "nul": "Asia/Shang\x00hai",
    "lf": "UTC\n",
    "10mb": Big(MB10, "A"),
    "65-chars": "A" * 65,
    "empty": "",
    "localtime": "localtime",
    "posixrules": "posixrules",
    "right-utc": "right/UTC",
    "backslash": "Asia\\Shanghai",
    "double-slash": "Asia//Shanghai",
    "offset": "+08:00",
    "unknown": "Mars/Olympus",
    "surrogate": "Asia/\udcff",
    "int": 8,
    "dict": {"zone": "UTC"},
}.items():
    case("api", f"rcpt-timezone-{_name}", rcpt("badtz"), put({"addresses": _ADDR, "timezone": _zone}))
for _name, _quiet in {
    "25h": "25:00-07:00",
    "24h": "24:00-01:00",
    "60s": "22:00:60-07:00",
    "same": "22:00-22:00",
    "word": "night",
    "nul": "22:00\x00-07:00",
    "leading-space": " 22:00-07:00",
    "fullwidth": "２２:00-07:00",
    "10mb": Big(MB10, "2"),
    "int": 5,
    "float": 1.5,
    "bool": True,
    "list": ["22:00", "07:00"],
    "object-extra-key": {"start": "22:00", "end": "07:00", "x": 1},
    "object-numbers": {"start": 22, "end": 7},
}.items():
    case("api", f"rcpt-quiet-{_name}", rcpt("badquiet"), put({"addresses": _ADDR, "quiet_hours": _quiet}))
# api: huge profiles
for _name, (_attrs, _code) in {
    "10mb-string": ({"bio": Big(MB10)}, "badattrs"),
    "17k": ({"bio": Big(17 * 1024)}, "badattrs"),
    "100000-keys": ({f"k{_i}": _i for _i in range(100_000)}, "badattrs"),
    "deep-5000": (Deep(5000), "badattrs"),
    "deep-65": (Deep(65), "badattrs"),
    "nan": ({"a": math.nan}, "badattrs"),
    "inf": ({"a": math.inf}, "badattrs"),
    "surrogate-key": ({"\udcff": 1}, "badattrs"),
    "int-key": ({1: 2}, "badattrs"),
    "set": ({"a": {1, 2}}, "badattrs"),
    "bytes": ({"a": b"x"}, "badattrs"),
    "huge-int": ({"a": 10**5000}, "badattrs"),
    "list": ([1, 2], "badattrs"),
    "text": ("not json", "badattrs"),
}.items():
    case("api", f"rcpt-attributes-{_name}", rcpt(_code), put({"addresses": _ADDR, "attributes": _attrs}))
for _name, (_profile, _code) in {
    "10mb-json-text": (Big(MB10, "x", '{"attributes": {"bio": "', '"}}'), "toobig"),
    "deep-json-text": (Deep(5000, text=True), "baddoc"),  # ~30 KB, under the size limit
    "deep-array-text": ("[" * 20000 + "]" * 20000, "baddoc"),
    "nan-text": ('{"attributes": {"a": NaN}}', "baddoc"),
    "invalid-utf8-bytes": (b'{"attributes": {"a": "\xff"}}', "baddoc"),
    "not-json": ("{oops", "baddoc"),
    "array": ([1, 2], "baddoc"),
    "int": (5, "baddoc"),
    "none": (None, "baddoc"),
    "unknown-key": ({"addresses": _ADDR, "colour": "red"}, "baddoc"),
    "1000-addresses": ({"addresses": {"sms": [f"+86139{_i:08d}" for _i in range(1000)]}}, "badaddr"),
    "9-addresses": ({"addresses": {"email": [f"a{_i}@example.com" for _i in range(9)]}}, "badaddr"),
    "1000-channels": ({"addresses": {f"c{_i}": "x" for _i in range(1000)}}, "badaddr"),
    "addresses-text": ({"addresses": "+8613912345678"}, "badaddr"),
    "addresses-list": ({"addresses": [PHONE]}, "badaddr"),
    "channel-fax": ({"addresses": {"fax": "+8613912345678"}}, "badaddr"),
    "channel-upper": ({"addresses": {"SMS": PHONE}}, "badaddr"),
    "channel-int": ({"addresses": {5: PHONE}}, "badaddr"),
    "address-dict": ({"addresses": {"sms": {"primary": PHONE}}}, "badaddr"),
    "address-nested-list": ({"addresses": {"sms": [[PHONE]]}}, "badaddr"),
    "address-int": ({"addresses": {"sms": [8613912345678]}}, "badaddr"),
    "id-disagrees": ({"id": "51", "addresses": _ADDR}, "badid"),
}.items():
    case("api", f"rcpt-profile-{_name}", rcpt(_code), put(_profile))
case(
    "api",
    "rcpt-profile-70k-json-bytes",
    rcpt("toobig"),
    put(b'{"attributes": {"a": "' + b"x" * 70000 + b'"}}'),
)
for _channel, _targets in BAD_TARGETS.items():
    for _name, _target in _targets.items():
        case(
            "api",
            f"rcpt-address-{_channel}-{_name}",
            rcpt("badaddr"),
            put({"addresses": {_channel: [_target]}}),
        )
# api: recipient ids
BAD_RIDS: dict[str, Any] = {
    "dotdot": "../42",
    "slash": "a/b",
    "colon": "alice:42",
    "star": "*",
    "brace": "a{b}c",
    "nul": "4\x002",
    "space": "4 2",
    "lf": "42\n",
    "leading-dot": ".42",
    "129": Big(129, "a"),
    "10mb": Big(MB10, "a"),
    "fullwidth": "４２",
    "surrogate": "4\udcff",
    "empty": "",
    "negative": -1,
    "float": 4.2,
    "bool": True,
    "none": None,
    "bytes": b"42",
    "list": ["42"],
    "dict": {"id": "42"},
}
for _name, _rid in BAD_RIDS.items():
    case("api", f"rcpt-id-{_name}", rcpt("badid"), put({"addresses": _ADDR}, rid=_rid))
for _name in ("dotdot", "nul", "surrogate", "10mb", "dict"):
    _rid = BAD_RIDS[_name]
    case("api", f"rcpt-get-id-{_name}", rcpt("badid"), Api("rcpt.get", (_rid,)))
    case("api", f"rcpt-update-id-{_name}", rcpt("badid"), Api("rcpt.update", (_rid, {"locale": "en"})))
    case("api", f"rcpt-delete-id-{_name}", rcpt("badid"), Api("rcpt.delete", (_rid,)))
    case("api", f"notify-recipient-{_name}", rcpt("badid"), tell(recipient=_rid))
case("api", "rcpt-profile-id-none-anywhere", rcpt("badid"), put({"addresses": _ADDR}, rid=None))
case("api", "rcpt-profile-id-in-body-bool", rcpt("badid"), put({"id": True, "addresses": _ADDR}, rid=None))
# api: reading, changing, merging and erasing: unknown, other users', not yours to name
for _fn, _args in {
    "get": ("nobody",),
    "update": ("nobody", {"locale": "en"}),
    "delete": ("nobody",),
    "history": ("nobody",),
    "preferences": ("nobody",),
    "set_preferences": ("nobody", {"orders": {"sms": False}}),
}.items():
    case("api", f"rcpt-{_fn}-unknown", rcpt("not_found"), Api(f"rcpt.{_fn}", _args))
    case("api", f"rcpt-{_fn}-others", rcpt("not_found"), Api(f"rcpt.{_fn}", ("7", *_args[1:])))
    case(
        "api", f"rcpt-{_fn}-owner-bob", rcpt("nopvg"), Api(f"rcpt.{_fn}", ("7", *_args[1:]), {"owner": "bob"})
    )
for _name, _owner in {"nobody-such": "no-such-user", "space": "a b", "surrogate": "\udcff"}.items():
    _code = rcpt("nopvg") if _name == "nobody-such" else "e.cmd.noti.baduser"
    case("api", f"rcpt-put-owner-{_name}", _code, put({"addresses": _ADDR}, owner=_owner))
case("api", "rcpt-put-user-lf", "e.cmd.noti.baduser", put({"addresses": _ADDR}, user="alice\n"))
case(
    "api",
    "rcpt-put-owner-space-root",
    "e.cmd.noti.baduser",
    put({"addresses": _ADDR}, owner="a b", user="ops"),
)
case("api", "rcpt-merge-self", rcpt("badmerge"), Api("rcpt.merge", (RCPT, RCPT)))
case("api", "rcpt-merge-unknown", rcpt("not_found"), Api("rcpt.merge", (RCPT, "nobody")))
case("api", "rcpt-merge-into-unknown", rcpt("not_found"), Api("rcpt.merge", ("nobody", RCPT)))
case("api", "rcpt-merge-others", rcpt("not_found"), Api("rcpt.merge", (RCPT, "7")))
case("api", "rcpt-merge-bad-id", rcpt("badid"), Api("rcpt.merge", (RCPT, "../43")))
case("api", "rcpt-merge-owner-bob", rcpt("nopvg"), Api("rcpt.merge", ("7", "8"), {"owner": "bob"}))
for _name, (_limit, _after) in {
    "limit-zero": (0, None),
    "limit-1001": (1001, None),
    "limit-text": ("5", None),
    "limit-bool": (True, None),
    "limit-nan": (math.nan, None),
}.items():
    case(
        "api",
        f"rcpt-list-{_name}",
        rcpt("badlimit"),
        Api("rcpt.list", (), {"limit": _limit, "after": _after}),
    )
case("api", "rcpt-list-after-surrogate", rcpt("badid"), Api("rcpt.list", (), {"after": "\udcff"}))
case("api", "rcpt-list-owner-bob", rcpt("nopvg"), Api("rcpt.list", (), {"owner": "bob"}))
# api: merge patches
for _name, (_patch, _code) in {
    "deep-json-text": (Deep(5000, text=True), "baddoc"),
    "10mb-json-text": (Big(MB10, "x", '{"attributes": {"bio": "', '"}}'), "toobig"),
    "nan-text": ('{"attributes": {"a": NaN}}', "baddoc"),
    "empty-text": ("", "baddoc"),
    "array": ([1], "baddoc"),
    "none": (None, "baddoc"),
    "changes-id": ({"id": "99"}, "badid"),
    "locale": ({"locale": "zh-Hant-TW-"}, "badlocale"),
    "timezone": ({"timezone": "../etc/localtime"}, "badtz"),
    "quiet": ({"quiet_hours": "07:00-07:00"}, "badquiet"),
    "address": ({"addresses": {"sms": "call me"}}, "badaddr"),
    "1000-addresses": ({"addresses": {"email": [f"a{_i}@example.com" for _i in range(1000)]}}, "badaddr"),
    "attributes-10mb": ({"attributes": {"bio": Big(MB10)}}, "badattrs"),
    "attributes-deep": ({"attributes": {"a": Deep(100)}}, "badattrs"),
    "unknown-key": ({"colour": "red"}, "baddoc"),
}.items():
    case("api", f"rcpt-update-{_name}", rcpt(_code), Api("rcpt.update", (RCPT, _patch)))
# api: preferences (locked categories among them)
for _name, (_prefs, _code) in {
    "critical": ({"security": {"sms": False}}, "e.cmd.noti.pref.locked"),
    "critical-every-channel": ({"security": {"*": False}}, "e.cmd.noti.pref.locked"),
    "no-opt-out": ({"billing": {"email": False}}, "e.cmd.noti.pref.locked"),
    "locked-after-a-good-one": (
        {"orders": {"sms": False}, "security": {"email": False}},
        "e.cmd.noti.pref.locked",
    ),
    "unknown-category": ({"nope": {"sms": False}}, "e.cmd.noti.cat.not_found"),
    "category-upper": ({"Orders": {"sms": False}}, "e.cmd.noti.cat.badname"),
    "category-colon": ({"a:b": {"sms": False}}, "e.cmd.noti.cat.badname"),
    "category-surrogate": ({"\udcff": {"sms": False}}, "e.cmd.noti.cat.badname"),
    "category-65": ({"a" * 65: {"sms": True}}, "e.cmd.noti.cat.badname"),
    "category-int": ({5: {"sms": True}}, "e.cmd.noti.cat.badname"),
    "257-categories": ({f"c{_i}": {"sms": True} for _i in range(257)}, "e.cmd.noti.pref.bad"),
    "channel-fax": ({"orders": {"fax": False}}, "e.cmd.noti.pref.bad"),
    "channel-int": ({"orders": {5: False}}, "e.cmd.noti.pref.bad"),
    "channel-surrogate": ({"orders": {"\udcff": False}}, "e.cmd.noti.pref.bad"),
    "value-text": ({"orders": {"sms": "no"}}, "e.cmd.noti.pref.bad"),
    "value-int": ({"orders": {"sms": 0}}, "e.cmd.noti.pref.bad"),
    "value-nan": ({"orders": {"sms": math.nan}}, "e.cmd.noti.pref.bad"),
    "channels-list": ({"orders": ["sms"]}, "e.cmd.noti.pref.bad"),
    "channels-empty": ({"orders": {}}, "e.cmd.noti.pref.bad"),
    "empty": ({}, "e.cmd.noti.pref.bad"),
    "text": ('{"orders": {"sms": false}}', "e.cmd.noti.pref.bad"),
    "list": ([["orders", "sms", False]], "e.cmd.noti.pref.bad"),
    "none": (None, "e.cmd.noti.pref.bad"),
}.items():
    case("api", f"rcpt-prefs-{_name}", _code, Api("rcpt.set_preferences", (RCPT, _prefs)))
case(
    "api",
    "rcpt-prefs-bad-id",
    rcpt("badid"),
    Api("rcpt.set_preferences", ("a b", {"orders": {"sms": False}})),
)
# api: categories
for _name, _cat in {
    "upper": "Orders",
    "space": "my cat",
    "colon": "a:b",
    "star": "*",
    "dotdot": "../x",
    "leading-dash": "-x",
    "65": "a" * 65,
    "nul": "a\x00",
    "lf": "a\n",
    "surrogate": "\udcff",
    "fullwidth": "ｏrders",
    "empty": "",
    "int": 5,
    "none": None,
}.items():
    case(
        "api",
        f"category-name-{_name}",
        "e.cmd.noti.cat.badname",
        Api("category.put", (_cat, {}), {"user": "ops"}),
    )
for _name, _decl in {
    "array": [1],
    "int": 5,
    "not-json": "{oops",
    "nan-text": '{"channels": {"sms": NaN}}',
    "deep-text": "[" * 8000 + "]" * 8000,  # under the 16 KiB limit
    "17k-text": Big(17 * 1024, "x", '{"description": "', '"}'),
    "10mb-text": Big(MB10, "x", '{"description": "', '"}'),
    "invalid-utf8-bytes": b'{"description": "\xff"}',
    "unknown-key": {"colour": "red"},
    "channels-list": {"channels": ["sms"]},
    "channel-fax": {"channels": {"fax": True}},
    "channel-int-key": {"channels": {5: True}},
    "channel-value-text": {"channels": {"sms": "yes"}},
    "critical-text": {"critical": "yes"},
    "critical-with-opt-out": {"critical": True, "opt_out": True},
    "opt-out-int": {"opt_out": 1},
    "description-nul": {"description": "a\x00b"},
    "description-escape": {"description": "\x1b[31mred"},
    "description-501": {"description": "x" * 501},
    "description-10mb": {"description": Big(MB10)},
    "description-int": {"description": 5},
}.items():
    case(
        "api",
        f"category-declaration-{_name}",
        "e.cmd.noti.cat.bad",
        Api("category.put", ("newcat", _decl), {"user": "ops"}),
    )
case("api", "category-put-not-root", "e.cmd.noti.cat.nopvg", Api("category.put", ("newcat", {})))
case(
    "api",
    "category-redeclare-not-root",
    "e.cmd.noti.cat.nopvg",
    Api("category.put", ("security", {"critical": False})),
)
case("api", "category-delete-not-root", "e.cmd.noti.cat.nopvg", Api("category.delete", ("orders",)))
case(
    "api",
    "category-delete-bad-name",
    "e.cmd.noti.cat.badname",
    Api("category.delete", ("a b",), {"user": "ops"}),
)
case(
    "api",
    "category-put-user-lf",
    "e.cmd.noti.baduser",
    Api("category.put", ("newcat", {}), {"user": "ops\n"}),
)
# api: templates: injection and sandbox escapes refused when put
for _name, (_text, _code) in {
    "mro": ("{{ ''.__class__.__mro__ }}", "unsafe"),
    "subclasses": ("{{ ''.__class__.__base__.__subclasses__() }}", "unsafe"),
    "globals": ("{{ lipsum.__globals__ }}", "unsafe"),
    "cycler": ("{{ cycler.__init__.__globals__.os }}", "unsafe"),
    "attr-filter": ("{{ ''|attr('__class__') }}", "unsafe"),
    "format-filter": ("{{ '%s'|format(''.__class__) }}", "unsafe"),
    "set-block": ("{% set x = ''.__class__ %}{{ x }}", "unsafe"),
    "item-dunder": ("{{ recipient['__class__'] }}", "unsafe"),
    "self-private": ("{{ self._TemplateReference__context }}", "unsafe"),
    "namespace": ("{% set ns = namespace(a=1) %}{{ ns.__class__ }}", "unsafe"),
    "include": ("{% include '/etc/passwd' %}", "unsafe"),
    "import": ("{% import 'os' as os %}", "unsafe"),
    "from-import": ("{% from 'x' import y %}", "unsafe"),
    "extends": ("{% extends 'base.html' %}", "unsafe"),
    "macro": ("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}", "unsafe"),
    "lipsum": ("{{ lipsum(10**6) }}", "unsafe"),
    "repeat": ("{{ 'x' * 10**9 }}", "unsafe"),
    "range": ("{% for i in range(10**9) %}x{% endfor %}", "unsafe"),
    "nested-range": (
        "{% for a in range(100000) %}{% for b in range(100000) %}x{% endfor %}{% endfor %}",
        "unsafe",
    ),
    "join-range": ("{{ range(10**7)|join(',') }}", "unsafe"),
    "power": ("{{ 2**100000 }}", "unsafe"),
    "unclosed": ("{{ order ", "badsyntax"),
    "unknown-filter": ("{{ order|shell }}", "badsyntax"),
    "nested-if-150": ("{% if a %}" * 150 + "x" + "{% endif %}" * 150, "badsyntax"),
    "nested-for-25": ("{% for a in b %}" * 25 + "x" + "{% endfor %}" * 25, "badsyntax"),
    "nested-parens-1000": ("{{ " + "(" * 1000 + "1" + ")" * 1000 + " }}", "badsyntax"),
    "nested-lists-500": ("{{ " + "[" * 500 + "]" * 500 + " }}", "badsyntax"),
    "source-16k": (Big(16 * 1024 + 1), "toobig"),
    "nul": ("a\x00b", "baddoc"),
    "escape-constant": ("\x1b[2J", "baddoc"),
    "surrogate": ("a\udcffb", "baddoc"),
    "raw-unclosed": ("{% raw %}", "baddoc"),  # renders to nothing: an empty SMS text
    "int": (5, "baddoc"),
    "list": (["a"], "baddoc"),
    "none": (None, "baddoc"),
}.items():
    case("api", f"template-{_name}", tmpl(_code), Api("rcpt.put_template", ("inj", _sms_template(_text))))
_G = _sms_template("hi")
for _name, (_doc, _code) in {
    "channel-unknown": ({"default_locale": "en", "channels": {"fax": {"en": {"text": "x"}}}}, "baddoc"),
    "channel-upper": ({"default_locale": "en", "channels": {"SMS ": {"en": {"text": "x"}}}}, "baddoc"),
    "field-unknown": (
        {"default_locale": "en", "channels": {"sms": {"en": {"text": "x", "colour": "r"}}}},
        "baddoc",
    ),
    "field-of-another-channel": (
        {"default_locale": "en", "channels": {"sms": {"en": {"subject": "x"}}}},
        "baddoc",
    ),
    "field-missing": ({"default_locale": "en", "channels": {"email": {"en": {"text": "x"}}}}, "baddoc"),
    "top-key-unknown": ({**_G, "colour": 1}, "baddoc"),
    "no-default-locale": ({"channels": _G["channels"]}, "baddoc"),
    "default-locale-bad": ({**_G, "default_locale": "../en"}, "baddoc"),
    "default-locale-int": ({**_G, "default_locale": 5}, "baddoc"),
    "variant-locale-trailing-dash": (
        {"default_locale": "en", "channels": {"sms": {"zh-Hant-TW-": {"text": "x"}}}},
        "baddoc",
    ),
    "variant-locale-twice": (
        {"default_locale": "en", "channels": {"sms": {"en": {"text": "x"}, "EN": {"text": "y"}}}},
        "baddoc",
    ),
    "channels-list": ({"default_locale": "en", "channels": ["sms"]}, "baddoc"),
    "channels-empty": ({"default_locale": "en", "channels": {}}, "baddoc"),
    "variant-empty": ({"default_locale": "en", "channels": {"sms": {"en": {}}}}, "baddoc"),
    "variant-list": ({"default_locale": "en", "channels": {"sms": {"en": ["x"]}}}, "baddoc"),
    "params-and-text": (
        {"default_locale": "en", "channels": {"sms": {"en": {"text": "x", "params": {"a": "b"}}}}},
        "baddoc",
    ),
    "params-bad-name": (
        {"default_locale": "en", "channels": {"sms": {"en": {"params": {"a b": "x"}}}}},
        "baddoc",
    ),
    "params-33": (
        {
            "default_locale": "en",
            "channels": {"sms": {"en": {"params": {f"p{_i}": "x" for _i in range(33)}}}},
        },
        "baddoc",
    ),
    "vendor-code-with-space": (
        {"default_locale": "en", "channels": {"sms": {"en": {"text": "x", "template": {"aliyun": "SMS 1"}}}}},
        "baddoc",
    ),
    "vendor-name-with-comma": (
        {
            "default_locale": "en",
            "channels": {"sms": {"en": {"text": "x", "template": {"ali,yun": "SMS_1"}}}},
        },
        "baddoc",
    ),
    "weixin-tmpl-space": (
        {
            "default_locale": "en",
            "channels": {
                "weixin": {"en": {"tmpl": "T 1", "pnb": "acct", "content": {"first": {"value": "x"}}}}
            },
        },
        "baddoc",
    ),
    "weixin-url-javascript": (
        {
            "default_locale": "en",
            "channels": {
                "weixin": {
                    "en": {
                        "tmpl": "T1",
                        "pnb": "acct",
                        "content": {"first": {"value": "x"}},
                        "url": "javascript:alert(1)",
                    }
                }
            },
        },
        "baddoc",
    ),
    "email-subject-header-injection": (
        {
            "default_locale": "en",
            "channels": {"email": {"en": {"subject": "a\nBcc: x@evil.example", "text": "t"}}},
        },
        "baddoc",
    ),
    "webhook-content-list": (
        {"default_locale": "en", "channels": {"webhook": {"en": {"content": [1]}}}},
        "baddoc",
    ),
    "webhook-content-nan": (
        {"default_locale": "en", "channels": {"webhook": {"en": {"content": {"a": math.nan}}}}},
        "baddoc",
    ),
    "webhook-content-deep": (
        {"default_locale": "en", "channels": {"webhook": {"en": {"content": Deep(100)}}}},
        "baddoc",
    ),
    "webhook-content-deep-5000": (
        {"default_locale": "en", "channels": {"webhook": {"en": {"content": Deep(5000)}}}},
        "baddoc",
    ),
    "webhook-content-int-key": (
        {"default_locale": "en", "channels": {"webhook": {"en": {"content": {1: "x"}}}}},
        "baddoc",
    ),
    "webhook-content-set": (
        {"default_locale": "en", "channels": {"webhook": {"en": {"content": {"a": {1, 2}}}}}},
        "baddoc",
    ),
    "description-datetime": ({**_G, "description": dt.datetime(2026, 1, 1)}, "baddoc"),
    "description-nul": ({**_G, "description": "a\x00"}, "baddoc"),
    "description-1001": ({**_G, "description": "x" * 1001}, "baddoc"),
    "deep-json-text": (
        '{"default_locale": "en", "channels": {"webhook": {"en": {"content": '
        + '{"a":' * 5000
        + "1"
        + "}" * 5000
        + "}}}}",
        "baddoc",
    ),
    "nan-text": ('{"default_locale": "en", "channels": {"sms": {"en": {"text": NaN}}}}', "baddoc"),
    "invalid-utf8-bytes": (b'{"default_locale": "\xff"}', "baddoc"),
    "not-json": ("{oops", "baddoc"),
    "array-text": ("[1]", "baddoc"),
    "array": ([1], "baddoc"),
    "int": (5, "baddoc"),
    "none": (None, "baddoc"),
    "300kb": (
        {
            "default_locale": "en",
            "channels": {
                "email": {
                    f"en-{chr(65 + _i // 26)}{chr(65 + _i % 26)}": {"subject": "s", "text": "x" * 16000}
                    for _i in range(20)
                }
            },
        },
        "toobig",
    ),
    "100-locales": (
        {
            "default_locale": "en",
            "channels": {
                "sms": {f"en-{chr(65 + _i // 26)}{chr(65 + _i % 26)}": {"text": "x"} for _i in range(100)}
            },
        },
        "toobig",
    ),
    "65-locales": (
        {
            "default_locale": "en",
            "channels": {
                "sms": {f"en-{chr(65 + _i // 26)}{chr(65 + _i % 26)}": {"text": "x"} for _i in range(65)}
            },
        },
        "toobig",
    ),
    "2049-strings": (
        {
            "default_locale": "en",
            "channels": {"webhook": {"en": {"content": {"a": [f"s{_i}" for _i in range(2049)]}}}},
        },
        "toobig",
    ),
    "10mb": (_sms_template(Big(MB10)), "toobig"),
    "10mb-text": (Big(MB10, "x", '{"description": "', '"}'), "toobig"),
}.items():
    case("api", f"template-document-{_name}", tmpl(_code), Api("rcpt.put_template", ("shape", _doc)))
for _name, _tname in {
    "space": "a b",
    "dotdot": "../x",
    "slash": "a/b",
    "colon": "a:b",
    "at": "x@1",
    "star": "*",
    "brace": "a{b}",
    "leading-dot": ".x",
    "129": Big(129, "t"),
    "nul": "a\x00",
    "lf": "a\n",
    "surrogate": "\udcff",
    "fullwidth": "ｘ",
    "empty": "",
    "int": 5,
    "none": None,
}.items():
    case("api", f"template-name-{_name}", tmpl("badname"), Api("rcpt.put_template", (_tname, _G)))
case("api", "template-put-owner-bob", rcpt("nopvg"), Api("rcpt.put_template", ("x", _G), {"owner": "bob"}))
case(
    "api",
    "template-put-owner-space",
    "e.cmd.noti.baduser",
    Api("rcpt.put_template", ("x", _G), {"owner": "a b", "user": "ops"}),
)
for _name, (_tname, _version) in {
    "unknown": ("nope", None),
    "others": ("bob_tmpl", None),
    "bad-name": ("../x", None),
    "surrogate": ("\udcff", None),
    "version-0": ("order_shipped", 0),
    "version-99": ("order_shipped", 99),
    "version-text": ("order_shipped", "x"),
    "version-nan": ("order_shipped", math.nan),
    "version-huge": ("order_shipped", 10**30),
}.items():
    case(
        "api",
        f"template-get-{_name}",
        tmpl("not_found"),
        Api("rcpt.get_template", (_tname,), {"version": _version}),
    )
case(
    "api", "template-get-owner-bob", rcpt("nopvg"), Api("rcpt.get_template", ("bob_tmpl",), {"owner": "bob"})
)
case(
    "api",
    "template-delete-owner-bob",
    rcpt("nopvg"),
    Api("rcpt.delete_template", ("bob_tmpl",), {"owner": "bob"}),
)
# api: notify(recipient=…, template=…)
for _name, _template in {
    "version-0": "order_shipped@0",
    "version-empty": "order_shipped@",
    "version-negative": "order_shipped@-1",
    "version-exponent": "order_shipped@1e3",
    "version-10-digits": "order_shipped@9999999999",
    "version-5000-digits": "order_shipped@" + "9" * 5000,
    "version-fullwidth": "order_shipped@１",
    "version-twice": "order_shipped@1@2",
    "no-name": "@1",
    "dotdot": "../x",
    "space": "a b",
    "nul": "a\x00",
    "surrogate": "\udcff",
    "10mb": Big(MB10, "t"),
    "empty": "",
    "none": None,
    "int": 5,
    "dict": {"name": "order_shipped"},
}.items():
    case("api", f"notify-template-{_name}", notice("badtemplate"), tell(template=_template))
# api: a digest event's key, window and size (noti.recipients.digests)
for _name, _digest in {
    "upper": "Comments",
    "65": "c" * 65,
    "space": "new comments",
    "colon": "a:b",
    "nul": "a\x00",
    "surrogate": "\udcff",
    "10mb": Big(MB10, "c"),
    "empty": "",
    "int": 5,
    "list": ["comments"],
}.items():
    case("api", f"notify-digest-key-{_name}", notice("baddigest"), tell(digest=_digest, window=60))
for _name, _window in {
    "missing": None,
    "zero": 0,
    "negative": -60,
    "half-second": 0.5,
    "eight-days": 8 * 86400,
    "nan": math.nan,
    "inf": math.inf,
    "bool": True,
    "words": "ten minutes",
    "unit-only": "m",
    "weeks": "2w",
    "digits-10": "9999999999s",
    "10mb": Big(MB10, "1"),
    "dict": {"m": 10},
    "daily-25": "daily 25:00",
    "daily-minute-60": "daily 09:60",
    "daily-no-time": "daily",
    "daily-seconds": "daily 09:00:00",
}.items():
    case("api", f"notify-digest-window-{_name}", notice("baddigest"), tell(digest="comments", window=_window))
_MAXES = {"zero": 0, "1001": 1001, "negative": -1, "float": 2.5, "text": "many", "bool": True}
for _name, _max in _MAXES.items():
    case(
        "api",
        f"notify-digest-max-{_name}",
        notice("baddigest"),
        tell(digest="comments", window=60, digest_max=_max),
    )
case("api", "notify-digest-with-delay", notice("baddigest"), tell(digest="comments", window=60, delay=5))
case("api", "notify-digest-backoff-text", notice("baddigest"), tell(digest="c", window=60, backoff="yes"))
# api: a deduplication key and its window
for _name, _dedupe in {
    "int": 5,
    "false": False,
    "empty": "",
    "nul": "a\x00",
    "surrogate": "\udcff",
    "10mb": Big(MB10, "k"),
    "list": ["k"],
}.items():
    case("api", f"notify-dedupe-{_name}", notice("baddedupe"), tell(dedupe=_dedupe))
_DEDUPE_WINDOWS = {"zero": 0, "eight-days": "8d", "nan": math.nan, "words": "an hour", "bool": True}
for _name, _window in _DEDUPE_WINDOWS.items():
    case("api", f"notify-dedupe-window-{_name}", notice("baddedupe"), tell(dedupe="k", dedupe_window=_window))
case("api", "notify-dedupe-and-idempotency", notice("baddedupe"), tell(dedupe="k", idempotency_key="k"))
case("api", "notify-digest-window-alone", notice("baddigest"), tell(window=60))
case("api", "notify-template-unknown", tmpl("not_found"), tell(template="nope"))
case("api", "notify-template-others", tmpl("not_found"), tell(template="bob_tmpl"))
case("api", "notify-template-version-99", tmpl("not_found"), tell(template="order_shipped@99"))
case("api", "notify-recipient-unknown", rcpt("not_found"), tell(recipient="nobody"))
case("api", "notify-recipient-others", rcpt("not_found"), tell(recipient="7"))
for _name, (_data, _code) in {
    "array": ([1], "baddata"),
    "int": (5, "baddata"),
    "nan": ({"order": math.nan}, "baddata"),
    "inf": ({"order": math.inf}, "baddata"),
    "nan-text": ('{"order": NaN}', "baddata"),
    "deep-5000": (Deep(5000), "baddata"),
    "deep-65": (Deep(65), "baddata"),
    "deep-text": (Deep(5000, text=True), "baddata"),
    "deep-array-text": (Deep(100000, text=True, array=True), "baddata"),
    "10mb": ({"order": Big(MB10)}, "baddata"),
    "65k": ({"order": Big(65 * 1024)}, "baddata"),
    "surrogate": ({"order": "\udcff"}, "baddata"),
    "int-key": ({1: 2}, "baddata"),
    "set": ({"order": {1}}, "baddata"),
    "bytes": ({"order": b"7"}, "baddata"),
    "huge-int": ({"order": 10**5000}, "baddata"),
}.items():
    case("api", f"notify-data-{_name}", notice(_code), tell(data=_data))
case("api", "notify-data-missing-variable", tmpl("missingvar"), tell(data={}))
case("api", "notify-data-none", tmpl("missingvar"), tell(data=None))
case("api", "notify-data-renders-escape", add("badtext"), tell(data={"order": "\x1b[2J"}, channels=["sms"]))
case("api", "notify-data-renders-nul", add("badtext"), tell(data={"order": "a\x00b"}, channels=["sms"]))
case(
    "api", "notify-data-renders-too-long", add("badtext"), tell(data={"order": "x" * 2000}, channels=["sms"])
)
case(
    "api",
    "notify-data-renders-subject-header",
    add("badtext"),
    tell(data={"order": "1\nBcc: x@evil.example"}, channels=["email"]),
)
for _name, (_template, _data, _code) in RENDER_TRAPS.items():
    case("api", f"notify-render-{_name}", _code, tell(template=_name, data=_data))
for _name, _changes in {
    "channels-fax": {"channels": ["fax"]},
    "channels-text-with-fax": {"channels": "sms,fax"},
    "channels-empty": {"channels": []},
    "channels-9": {"channels": ["sms"] * 9},
    "channels-twice": {"channels": ["sms", "sms"]},
    "channels-int": {"channels": 5},
    "channels-dict": {"channels": {"sms": True}},
    "channels-set": {"channels": {"sms"}},
    "channels-bytes": {"channels": b"sms"},
    "channels-int-item": {"channels": [5]},
    "channels-and-chain": {"channels": ["sms"], "chain": ["sms"]},
    "chain-fax": {"chain": ["sms", "fax"]},
    "chain-empty": {"chain": []},
    "chain-blank-text": {"chain": " , "},
    "chain-nested": {"chain": [["sms"]]},
    "chain-none-item": {"chain": [None]},
    "chain-10mb": {"chain": Big(MB10, "s")},
}.items():
    case("api", f"notify-{_name}", notice("badchannels"), tell(**_changes))
case("api", "notify-channels-unreachable", notice("nochannel"), tell(channels=["weixin"]))
case("api", "notify-channels-no-variant", notice("nochannel"), tell(channels=["webhook"]))
for _name, _after in {
    "nan": math.nan,
    "inf": math.inf,
    "negative": -1,
    "zero": 0,
    "text": "5",
    "bool": True,
    "huge": 10**9,
}.items():
    case("api", f"notify-after-{_name}", notice("badafter"), tell(chain=["sms", "email"], after_s=_after))
for _name, _locale in {
    "trailing-dash": "zh-Hant-TW-",
    "dotdot": "../en",
    "empty": "",
    "int": 5,
    "nul": "en\x00",
}.items():
    case("api", f"notify-locale-{_name}", rcpt("badlocale"), tell(locale=_locale))
for _name, _category in {"upper": "Orders", "star": "*", "nul": "a\x00", "int": 5, "65": "c" * 65}.items():
    case("api", f"notify-category-{_name}", "e.cmd.noti.cat.badname", tell(category=_category))
case("api", "notify-category-unknown", "e.cmd.noti.cat.not_found", tell(category="nope"))
for _name, _key in {
    "empty": "",
    "nul": "k\x00",
    "lf": "a\nb",
    "surrogate": "\udcff",
    "201": Big(201, "k"),
    "int": 5,
    "list": ["k"],
}.items():
    case("api", f"notify-idempotency-key-{_name}", add("badkey"), tell(idempotency_key=_key))
for _name, (_changes, _code) in {
    "lv-nan": ({"lv": math.nan}, "badlv"),
    "lv-5000-digits": ({"lv": "9" * 5000}, "badlv"),
    "lv-zero": ({"lv": 0}, "badlv"),
    "delay-nan": ({"delay": math.nan}, "baddelay"),
    "delay-negative": ({"delay": -1}, "baddelay"),
    "eta-text": ({"eta": "tomorrow"}, "baddelay"),
    "eta-year-1": ({"eta": dt.datetime(1, 1, 1)}, "baddelay"),
    "delay-and-eta": ({"delay": 5, "eta": dt.datetime.now(dt.UTC)}, "baddelay"),
}.items():
    case("api", f"notify-{_name}", add(_code), tell(**_changes))
for _name, _field in {
    "text": "text",
    "provider": "provider",
    "retry-max": "retry_max",
    "identifier": "identifier",
    "colour": "colour",
}.items():
    case("api", f"notify-field-{_name}", notice("badfield"), tell(**{_field: "x"}))
case("api", "notify-recipient-and-type", notice("both"), Api("notify", ("sms", PHONE), NOTICE))
case("api", "notify-recipient-and-target-keyword", notice("both"), tell(target=PHONE))
case("api", "notify-owner-bob", rcpt("nopvg"), tell(recipient="7", template="bob_tmpl", owner="bob"))
case("api", "notify-owner-nobody-such", rcpt("nopvg"), tell(owner="no-such-user"))
case("api", "notify-owner-space", "e.cmd.noti.baduser", tell(owner="a b"))
case("api", "notify-user-lf", "e.cmd.noti.baduser", tell(user="alice\n"))
# api: notices
for _name, _id in {
    "unknown": "n" + UNKNOWN_ID,
    "a-record-id": UNKNOWN_ID,
    "others": Ref("bob_notice"),
    "surrogate": "n\udcff",
    "nul": "n0\x00",
    "glob": "n*",
    "10mb": Big(MB10, "0", "n"),
    "empty": "",
    "int": 5,
    "none": None,
    "list": [Ref("bob_notice")],
}.items():
    case("api", f"get-notice-{_name}", "e.cmd.noti.notice.not_found", Api("get_notice", (_id,)))
case(
    "api",
    "get-notice-user-space",
    "e.cmd.noti.baduser",
    Api("get_notice", (Ref("bob_notice"),), {"user": "a b"}),
)
# api: imports: a CSV header the importer cannot read refuses the whole file
for _name, _csv in {
    "unknown-column": "id,sms,colour\n1,+8613912345678,red\n",
    "no-id": "sms\n+8613912345678\n",
    "column-twice": "id,sms,sms\n1,+8613912345678,+8613912345679\n",
    "attributes-twice": "id,attributes,attributes\n1,{},{}\n",
    "empty-file": "",
    "blank-line": "\n",
    "channel-fax": "id,fax\n1,x\n",
    "upper-case": "ID,SMS\n1,+8613912345678\n",
    "attr-no-name": "id,attr.\n1,x\n",
    "attr-65-name": "id,attr." + "a" * 65 + "\n1,x\n",
    "nul": "id,s\x00ms\n1,x\n",
    "surrogate": "id,\udcff\n1,x\n",
    "bom-not-stripped": "\ufeffid,sms\n1,+8613912345678\n",
    "formula": "id,=cmd|' /C calc'!A0\n1,x\n",
    "dotdot": "id,../sms\n1,x\n",
    "internal-prefix": "id,addr:sms\n1,+8613912345678\n",
    "quote-unclosed": 'id,"sms\n1,x\n',
    "lf-inside-quotes": 'id,"s\nms"\n1,x\n',
    "70k-column": "id," + "a" * 70000 + "\n1,x\n",
}.items():
    case("api", f"import-csv-header-{_name}", rcpt("badcsv"), Api("rcpt.import_csv", (_csv,)))
case("api", "import-owner-bob", rcpt("nopvg"), Api("rcpt.import_rows", ([{"id": "1"}],), {"owner": "bob"}))
for _name, _rows in {"int": 5, "none": None, "text": "abc", "mapping": {"id": "1"}, "bytes": b"id"}.items():
    case("api", f"import-rows-{_name}", rcpt("baddoc"), Api("rcpt.import_rows", (_rows,)))
for _name, _items in {"int": 5, "none": None, "text": "abc", "mapping": NOTICE}.items():
    case("api", f"notice-many-{_name}", notice("baditem"), Api("rcpt.notify_many", (_items,)))

# bulk: the recipients' notify_many and the imports refuse each bad item (row) alone
case(
    "bulk",
    "notices-mixed-bad-items",
    None,
    Bulk(
        "rcpt.notify_many",
        (
            [
                5,
                None,
                "text",
                {1: 2},
                {**NOTICE, "recipient": "../42"},
                {**NOTICE, "recipient": "nobody"},
                {**NOTICE, "template": "order_shipped@0"},
                {**NOTICE, "template": "order_shipped@" + "9" * 5000},
                {**NOTICE, "template": "\udcff"},
                {**NOTICE, "template": "nope"},
                {**NOTICE, "data": {"a": math.nan}},
                {**NOTICE, "data": Deep(5000)},
                {**NOTICE, "data": {}},
                {**NOTICE, "locale": "zh-Hant-TW-"},
                {**NOTICE, "category": "nope"},
                {**NOTICE, "category": "Orders"},
                {**NOTICE, "channels": ["fax"]},
                {**NOTICE, "chain": ["sms"], "after_s": math.nan},
                {**NOTICE, "idempotency_key": "a\nb"},
                {**NOTICE, "owner": "bob"},
                {**NOTICE, "lv": "9" * 5000},
                {**NOTICE, "delay": math.inf},
                {**NOTICE, "colour": "red"},
                {**NOTICE, "text": "hi"},
                {"template": "order_shipped"},
                {**NOTICE, "template": "trap-format", "data": {"order": "7"}},
                {**NOTICE, "template": "trap-output", "data": {"d": "x" * 60000}},
                {**NOTICE, "data": {"order": "\x1b[2J"}, "channels": ["sms"]},
            ],
        ),
        {},
        (
            notice("baditem"),
            notice("baditem"),
            notice("baditem"),
            notice("baditem"),
            rcpt("badid"),
            rcpt("not_found"),
            notice("badtemplate"),
            notice("badtemplate"),
            notice("badtemplate"),
            tmpl("not_found"),
            notice("baddata"),
            notice("baddata"),
            tmpl("missingvar"),
            rcpt("badlocale"),
            "e.cmd.noti.cat.not_found",
            "e.cmd.noti.cat.badname",
            notice("badchannels"),
            notice("badafter"),
            add("badkey"),
            rcpt("nopvg"),
            add("badlv"),
            add("baddelay"),
            notice("badfield"),
            notice("badfield"),
            rcpt("badid"),
            tmpl("unsafe"),
            tmpl("toobig"),
            add("badtext"),
        ),
    ),
)
case(
    "bulk",
    "notices-user-with-newline",
    None,
    Bulk("rcpt.notify_many", ([NOTICE] * 3,), {"user": "alice\n"}, ("e.cmd.noti.baduser",) * 3),
)
case(
    "bulk",
    "import-rows-mixed",
    None,
    Bulk(
        "rcpt.import_rows",
        (
            [
                5,
                None,
                "text",
                [1, 2],
                {"id": "../1"},
                {"addresses": _ADDR},
                {"id": "1", "colour": "red"},
                {"id": "1", "locale": "zh-Hant-TW-"},
                {"id": "1", "timezone": "/etc/passwd"},
                {"id": "1", "quiet_hours": "25:00-07:00"},
                {"id": "1", "addresses": {"sms": "call me"}},
                {"id": "1", "addresses": {"sms": [f"+86139{_i:08d}" for _i in range(1000)]}},
                {"id": "1", "attributes": {"bio": Big(MB10)}},
                {"id": "1", "attributes": Deep(5000)},
                Deep(5000, text=True),
                Big(MB10, "x", '{"id": "1", "attributes": {"bio": "', '"}}'),
            ],
        ),
        {},
        (
            rcpt("baddoc"),
            rcpt("baddoc"),
            rcpt("baddoc"),
            rcpt("baddoc"),
            rcpt("badid"),
            rcpt("badid"),
            rcpt("baddoc"),
            rcpt("badlocale"),
            rcpt("badtz"),
            rcpt("badquiet"),
            rcpt("badaddr"),
            rcpt("badaddr"),
            rcpt("badattrs"),
            rcpt("badattrs"),
            rcpt("baddoc"),
            rcpt("toobig"),
        ),
    ),
)
case(
    "bulk",
    "import-csv-bad-rows",
    None,
    Bulk(
        "rcpt.import_csv",
        (
            "id,sms,locale,timezone,quiet_hours,attributes,attr.bio\n"
            "../1,+8613912345678,,,,,\n"
            "2,call me,,,,,\n"
            "3,,zh-Hant-TW-,,,,\n"
            "4,,,/etc/passwd,,,\n"
            "5,,,,25:00-07:00,,\n"
            '6,,,,,"{""a"": NaN}",\n'
            '7,,,,,"' + '{""a"":' * 3000 + "1" + "}" * 3000 + '",\n'
            "8,,,,,[1],\n"
            "9,,,,,," + "x" * 17000 + "\n"
            "10," + ";".join(f"+86139{_i:08d}" for _i in range(9)) + ",,,,,\n"
            "11,+8613912345678\n"
            "12,,,,,," + "x" * 70000 + "\n",
        ),
        {},
        (
            rcpt("badid"),
            rcpt("badaddr"),
            rcpt("badlocale"),
            rcpt("badtz"),
            rcpt("badquiet"),
            rcpt("badattrs"),
            rcpt("badattrs"),
            rcpt("badattrs"),
            rcpt("badattrs"),
            rcpt("badaddr"),
            rcpt("badcsv"),
            rcpt("badcsv"),
        ),
    ),
)
case(
    "bulk",
    "import-jsonl-bad-lines",
    None,
    Bulk(
        "rcpt.import_jsonl",
        (
            [
                "{oops",
                '{"id": "1", "attributes": {"a": NaN}}',
                Deep(100000, text=True, array=True),
                Big(5000, '{"a":', '{"id": "1", "attributes": ', "1" + "}" * 5001),
                "[1]",
                "5",
                "null",
                '"text"',
                '{"id": "../1"}',
                '{"id": "1", "addresses": {"sms": "call me"}}',
                Big(MB10, "x", '{"id": "1", "attributes": {"bio": "', '"}}'),
            ],
        ),
        {},
        (
            rcpt("baddoc"),
            rcpt("baddoc"),
            rcpt("baddoc"),
            rcpt("baddoc"),
            rcpt("baddoc"),
            rcpt("baddoc"),
            rcpt("baddoc"),
            rcpt("baddoc"),
            rcpt("badid"),
            rcpt("badaddr"),
            rcpt("badattrs"),
        ),
    ),
)

# cli: noti recipient / category / template / notify
_NOTIFY = ("notify", "-recipient", RCPT, "-template", "order_shipped")
_DATA = ("-data", '{"order": 7}')
for _name, (_argv, _code) in {
    "put-locale": (("put", "50", "-sms", PHONE, "-locale", "zh-Hant-TW-"), "badlocale"),
    "put-locale-nul": (("put", "50", "-sms", PHONE, "-locale", "en\x00"), "badlocale"),
    "put-timezone-path": (("put", "50", "-timezone", "../../etc/passwd"), "badtz"),
    "put-quiet-hours": (("put", "50", "-quiet-hours", "25:00-07:00"), "badquiet"),
    "put-id-dotdot": (("put", "../42", "-sms", PHONE), "badid"),
    "put-id-surrogate": (("put", "4\udcff", "-sms", PHONE), "badid"),
    "put-sms": (("put", "50", "-sms", "call me"), "badaddr"),
    "put-address-without-channel": (("put", "50", "-address", "sms"), "badaddr"),
    "put-address-fax": (("put", "50", "-address", "fax=1"), "badaddr"),
    "put-attr-without-value": (("put", "50", "-attr", "x"), "badattrs"),
    "put-json-deep": (("put", "50", BAD_JSON["deep-text-5000"]), "baddoc"),
    "put-json-nan": (("put", "50", '{"attributes": {"a": NaN}}'), "baddoc"),
    "put-json-array": (("put", "50", "[1]"), "baddoc"),
    "put-attr-10mb": (("put", "50", "-attr", Big(MB10, "x", "bio=")), "badattrs"),
    "put-owner-bob": (("put", "50", "-sms", PHONE, "-owner", "bob"), "nopvg"),
    "update-nothing": (("update", RCPT), "baddoc"),
    "get-others": (("get", "7"), "not_found"),
    "del-unknown": (("del", "nobody"), "not_found"),
    "merge-self": (("merge", RCPT, RCPT), "badmerge"),
    "list-limit-zero": (("list", "-limit", "0"), "badlimit"),
    "history-unknown": (("history", "nobody"), "not_found"),
    "import-unknown-column": (("import", "{columns.csv}"), "badcsv"),
    "import-not-utf8": (("import", "{latin1.csv}"), "badformat"),
    "import-suffix": (("import", "/nonexistent/people.txt"), "badformat"),
}.items():
    _files = {}
    if _name == "import-unknown-column":
        _files = {"columns.csv": b"id,sms,colour\n1,+8613912345678,red\n"}
    if _name == "import-not-utf8":
        _files = {"latin1.csv": b"id,sms\n1,\xff\n"}
    cli(f"recipient-{_name}", rcpt(_code), "recipient", *_argv, files=_files)
cli(
    "recipient-import-bad-rows",
    rcpt("badid"),
    "recipient",
    "import",
    "{rows}",
    "-format",
    "jsonl",
    files={
        "rows": b'{"id": "../1"}\n'
        + b'{"id": "1", "attributes": '
        + b'{"a":' * 5000
        + b"1"
        + b"}" * 5001
        + b"\n"
    },
)
cli("recipient-prefs-locked", "e.cmd.noti.pref.locked", "recipient", "prefs", RCPT, "security.sms=off")
cli("recipient-prefs-value", "e.cmd.noti.pref.bad", "recipient", "prefs", RCPT, "orders.sms=maybe")
cli("recipient-prefs-channel", "e.cmd.noti.pref.bad", "recipient", "prefs", RCPT, "orders.fax=off")
cli(
    "recipient-prefs-json-deep", "e.cmd.noti.pref.bad", "recipient", "prefs", RCPT, BAD_JSON["deep-text-5000"]
)
cli("recipient-list-limit-word", None, "recipient", "list", "-limit", "many")
cli("category-put-not-root", "e.cmd.noti.cat.nopvg", "category", "put", "newcat")
cli("category-put-name", "e.cmd.noti.cat.badname", "category", "put", "New Cat", user="ops")
cli(
    "category-put-channel",
    "e.cmd.noti.cat.bad",
    "category",
    "put",
    "newcat",
    "-channel",
    "fax=on",
    user="ops",
)
cli(
    "category-put-json-nan", "e.cmd.noti.cat.bad", "category", "put", "newcat", '{"opt_out": NaN}', user="ops"
)
cli(
    "category-put-critical-opt-out",
    "e.cmd.noti.cat.bad",
    "category",
    "put",
    "newcat",
    "-critical",
    "--opt-out",
    user="ops",
)
cli("category-del-unknown", "e.cmd.noti.cat.not_found", "category", "del", "nope", user="ops")
_TMPL_FILES: dict[str, tuple[bytes, str]] = {
    "mro.json": (
        b'{"default_locale": "en", "channels": {"sms": {"en": {"text": "{{ \'\'.__class__.__mro__ }}"}}}}',
        "unsafe",
    ),
    "include.json": (
        b'{"default_locale": "en", "channels": {"sms": {"en": {"text": "{% include \'/etc/passwd\' %}"}}}}',
        "unsafe",
    ),
    "nested.json": (
        b'{"default_locale": "en", "channels": {"sms": {"en": {"text": "'
        + b"{% if a %}" * 150
        + b"x"
        + b"{% endif %}" * 150
        + b'"}}}}',
        "badsyntax",
    ),
    "fax.json": (b'{"default_locale": "en", "channels": {"fax": {"en": {"text": "x"}}}}', "baddoc"),
    "nan.json": (b'{"default_locale": "en", "channels": {"sms": {"en": {"text": NaN}}}}', "baddoc"),
    "bad.toml": (b"default_locale = \n", "baddoc"),
    "a b.json": (b"{}", "badname"),
    "big.json": (b'{"description": "' + b"x" * (1024 * 1024) + b'"}', "toobig"),
}
for _file, (_data, _code) in _TMPL_FILES.items():
    cli(f"template-put-{_file}", tmpl(_code), "template", "put", f"{{{_file}}}", files={_file: _data})
cli(
    "template-put-name-dotdot", tmpl("badname"), "template", "put", "../x", "-", stdin=json.dumps(_G).encode()
)
cli(
    "template-put-stdin-deep",
    tmpl("baddoc"),
    "template",
    "put",
    "x",
    "-",
    stdin=b'{"a":' * 5000 + b"1" + b"}" * 5000,
)
cli("template-put-stdin-without-name", None, "template", "put", "-", stdin=b"{}")
cli("template-get-unknown", tmpl("not_found"), "template", "get", "nope")
cli("template-del-others", tmpl("not_found"), "template", "del", "bob_tmpl")
cli("template-list-owner-bob", rcpt("nopvg"), "template", "list", "-owner", "bob")
for _name, (_argv, _code) in {
    "recipient-dotdot": (
        ("notify", "-recipient", "../42", "-template", "order_shipped", *_DATA),
        rcpt("badid"),
    ),
    "template-version-0": (
        ("notify", "-recipient", RCPT, "-template", "order_shipped@0", *_DATA),
        notice("badtemplate"),
    ),
    "template-surrogate": (
        ("notify", "-recipient", RCPT, "-template", "\udcff", *_DATA),
        notice("badtemplate"),
    ),
    "template-5000-digits": (
        ("notify", "-recipient", RCPT, "-template", "order_shipped@" + "9" * 5000, *_DATA),
        notice("badtemplate"),
    ),
    "data-nan": ((*_NOTIFY, "-data", '{"order": NaN}'), notice("baddata")),
    "data-deep": ((*_NOTIFY, "-data", BAD_JSON["deep-text-5000"]), notice("baddata")),
    "data-array": ((*_NOTIFY, "-data", "[1]"), notice("baddata")),
    "missing-variable": (_NOTIFY, tmpl("missingvar")),
    "render-injection": (
        ("notify", "-recipient", RCPT, "-template", "trap-format", "-data", '{"order": "7"}'),
        tmpl("unsafe"),
    ),
    "channels-fax": ((*_NOTIFY, *_DATA, "-channels", "sms,fax"), notice("badchannels")),
    "after-nan": ((*_NOTIFY, *_DATA, "-chain", "sms,email", "-after", "nan"), notice("badafter")),
    "delay-weeks": ((*_NOTIFY, *_DATA, "-delay", "3weeks"), notice("baddelay")),
    "locale": ((*_NOTIFY, *_DATA, "-locale", "zh-Hant-TW-"), rcpt("badlocale")),
    "key-lf": ((*_NOTIFY, *_DATA, "-idempotency-key", "a\nb"), add("badkey")),
    "category-unknown": ((*_NOTIFY, *_DATA, "-category", "nope"), "e.cmd.noti.cat.not_found"),
    "owner-bob": (
        ("notify", "-recipient", "7", "-template", "bob_tmpl", *_DATA, "-owner", "bob"),
        rcpt("nopvg"),
    ),
}.items():
    cli(f"notify-{_name}", _code, *_argv)
cli("notify-no-recipient", None, "notify", "-template", "order_shipped")
cli("get-notice-others", "e.cmd.noti.notice.not_found", "get", Ref("bob_notice"))
cli("get-notice-unknown", "e.cmd.noti.notice.not_found", "get", "n" + UNKNOWN_ID)

# task: noti.tasks.notify.delay(recipient=…, template=…), refused by a real worker (a few: slow)
_RCPT_KW = {"recipient": RCPT, "template": "order_shipped", "data": {"order": 7}}
task("recipient-dotdot", rcpt("badid"), "delay", kwargs={**_RCPT_KW, "recipient": "../42"})
task("recipient-unknown", rcpt("not_found"), "delay", kwargs={**_RCPT_KW, "recipient": "nobody"})
task(
    "recipient-template-version-0",
    notice("badtemplate"),
    "delay",
    kwargs={**_RCPT_KW, "template": "order_shipped@0"},
)
task("recipient-missing-variable", tmpl("missingvar"), "delay", kwargs={**_RCPT_KW, "data": {}})
task("recipient-data-nan", notice("baddata"), "delay", kwargs={**_RCPT_KW, "data": {"order": math.nan}})
task("recipient-render-injection", tmpl("unsafe"), "delay", kwargs={**_RCPT_KW, "template": "trap-format"})
task("recipient-channel-field", notice("badfield"), "delay", kwargs={**_RCPT_KW, "text": "hi"})
task("recipient-and-type", notice("both"), "send_task", kwargs={**_RCPT_KW, "type": "sms"})
task("recipient-owner-bob", rcpt("nopvg"), "delay", kwargs={**_RCPT_KW, "recipient": "7", "owner": "bob"})
task(
    "recipient-data-set",
    add("baditem"),
    "delay",
    kwargs={**_RCPT_KW, "data": {"order": {1, 2}}},
    at_call=True,
)

_counts = Counter(c.id for c in CASES)
assert not [i for i, n in _counts.items() if n > 1], [i for i, n in _counts.items() if n > 1]


def by_surface() -> dict[str, int]:
    """How many cases each surface has."""
    return dict(Counter(c.surface for c in CASES))
