"""Property-based tests (hypothesis) of the places hostile input meets noti's rules: the
record codec, the input checks in front of it, the level/priority mapping, and the command
line's option parser. (The webman codec's are in ``tests/test_webman_codec.py``.)
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from typing import Any

import click
import pytest
import redis
from click.testing import CliRunner
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import noti
import noti.sending.runtime
from noti.access.users import LEVEL_CAPS, Role, User
from noti.celery.queues import PRIORITY_STEPS, level_for_priority, priority_for_level
from noti.core.record import (
    LEVEL_MAX,
    Channel,
    Notification,
    Status,
    from_hash,
    new_id,
    parse_level,
    to_hash,
    validate_fields,
    validate_target,
)
from noti.errors import InvalidInput, NotiError
from noti.inputs import JSON_DEPTH_MAX, bad_character

# --- strategies ----------------------------------------------------------------------------------

#: Every code point, lone surrogates and control characters included.
ANY_CHAR = st.characters(exclude_categories=())
ANY_TEXT = st.text(ANY_CHAR, max_size=60)
#: Text a record may hold: no control character but tab and line breaks, no surrogate.
SAFE_TEXT = st.text(
    st.characters(exclude_categories=("Cs", "Cc")) | st.sampled_from("\t\n\r"), min_size=1, max_size=60
).filter(lambda t: t.strip() != "")
LINE = st.text(st.characters(exclude_categories=("Cs", "Cc", "Zl", "Zp")), min_size=1, max_size=60).filter(
    lambda t: t.strip() != ""
)
NAME = st.from_regex(r"[A-Za-z0-9_.@+-]{1,64}", fullmatch=True)
TOKEN = st.from_regex(r"[A-Za-z0-9_-]{1,40}", fullmatch=True)
JSON_SCALAR = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | SAFE_TEXT
)
JSON_VALUE = st.recursive(
    JSON_SCALAR,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(SAFE_TEXT, inner, max_size=4),
    max_leaves=12,
)
JSON_OBJECT = st.dictionaries(SAFE_TEXT, JSON_VALUE, max_size=5)
TARGETS = {
    Channel.SMS: st.from_regex(r"\+[1-9][0-9]{6,14}|1[3-9][0-9]{9}", fullmatch=True),
    Channel.WEIXIN: st.from_regex(r"o[A-Za-z0-9_-]{5,40}", fullmatch=True),
    Channel.EMAIL: st.from_regex(r"[a-z0-9._+-]{1,20}@[a-z0-9]{1,10}\.[a-z]{2,5}", fullmatch=True),
    Channel.WEBHOOK: st.from_regex(r"https?://[a-z0-9.-]{1,20}(/[A-Za-z0-9._~%/-]{0,30})?", fullmatch=True),
    Channel.PUSH: st.from_regex(r"[A-Za-z0-9_:.-]{1,200}", fullmatch=True),
    Channel.CHAT: st.from_regex(r"[A-Za-z0-9_@-]{1,60}", fullmatch=True),
}


@st.composite
def channel_fields(draw: st.DrawFn, channel: Channel) -> dict[str, Any]:
    if channel is Channel.SMS:
        return {"text": draw(SAFE_TEXT)}
    if channel is Channel.EMAIL:
        fields = {"subject": draw(LINE), "text": draw(SAFE_TEXT)}
        if draw(st.booleans()):
            fields["html"] = draw(SAFE_TEXT)
        return fields
    if channel is Channel.WEBHOOK:
        return {"content": draw(JSON_OBJECT)}
    if channel is Channel.PUSH:
        fields = {"body": draw(SAFE_TEXT)}
        if draw(st.booleans()):
            fields.update(title=draw(LINE), data=draw(JSON_OBJECT), collapse=draw(TOKEN))
        return fields
    if channel is Channel.CHAT:
        fields = {"text": draw(SAFE_TEXT)}
        if draw(st.booleans()):
            fields.update(title=draw(LINE), format=draw(st.sampled_from(["text", "markdown"])))
        return fields
    fields = {"tmpl": draw(TOKEN), "pnb": draw(TOKEN), "content": draw(JSON_OBJECT)}
    if draw(st.booleans()):
        fields["url"] = draw(TARGETS[Channel.WEBHOOK])
    return fields


OPTIONAL_TEXT = st.none() | TOKEN
MS = st.integers(min_value=0, max_value=2**53)


@st.composite
def records(draw: st.DrawFn) -> Notification:
    channel = draw(st.sampled_from(list(Channel)))
    return Notification(
        id=new_id(),
        channel=channel,
        target=draw(TARGETS[channel]),
        creator=draw(NAME),
        level=draw(st.integers(min_value=1, max_value=LEVEL_MAX)),
        status=draw(st.sampled_from(list(Status))),
        errmsg=draw(st.just("") | SAFE_TEXT),
        lease_until_ms=draw(MS),
        retry=draw(st.integers(min_value=0, max_value=100)),
        retry_max=draw(st.integers(min_value=1, max_value=100)),
        created_ms=draw(MS),
        modified_ms=draw(MS),
        expires_ms=draw(st.none() | MS),
        fields=draw(channel_fields(channel)),
        provider=draw(OPTIONAL_TEXT),
        sent_by=draw(OPTIONAL_TEXT),
        msgid=draw(OPTIONAL_TEXT),
        retry_policy=draw(st.none() | st.sampled_from(["linear:60", "exponential:5:600"])),
        identifier=draw(OPTIONAL_TEXT),
        revoked_ms=draw(st.none() | MS),
    )


# --- the record codec ------------------------------------------------------------------------------


@given(records())
@settings(max_examples=300, deadline=None)
def test_a_record_reads_back_from_its_hash_as_it_was(record: Notification) -> None:
    data = to_hash(record)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in data.items())
    assert all(v.encode() is not None for v in data.values())  # every value is valid UTF-8
    assert from_hash(data) == record


@pytest.fixture(scope="module")
def stored(redis_url: str) -> Iterator[Any]:
    raw = redis.Redis.from_url(redis_url)
    raw.flushdb()
    channels = {c.value: {"provider": "sandbox"} for c in Channel}
    yield noti.sending.runtime.configure(channels=channels)
    raw.flushdb()
    noti.sending.runtime.configure()


@given(records())
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_record_stored_in_redis_reads_back_as_it_was(stored: Any, record: Notification) -> None:
    stored.store.create(record)
    assert stored.store.get(record.id) == record


@given(st.sampled_from(list(Channel)), st.data())
@settings(max_examples=300, deadline=None)
def test_fields_are_refused_with_a_code_or_stored_as_given(channel: Channel, data: st.DataObject) -> None:
    # any value (lone surrogates, controls, NaN, nesting, wrong types) in any field of the channel
    names = sorted(channel.spec.fields)
    value = data.draw(
        ANY_TEXT
        | st.builds(json.dumps, JSON_OBJECT)
        | JSON_OBJECT
        | st.dictionaries(ANY_TEXT, st.floats() | ANY_TEXT, max_size=3)
        | st.integers()
        | st.floats()
        | st.lists(st.integers(), max_size=3)
        | st.just("{" * (JSON_DEPTH_MAX + 1) + "}" * (JSON_DEPTH_MAX + 1))
    )
    fields = {**data.draw(channel_fields(channel)), data.draw(st.sampled_from(names)): value}
    try:
        clean = validate_fields(channel, fields)
    except InvalidInput as exc:
        assert exc.code.startswith("e.cmd.noti.add.") and exc.message
        return
    # accepted: it goes through the codec unchanged, and every stored text is clean UTF-8
    record = Notification(new_id(), channel, data.draw(TARGETS[channel]), "alice", fields=clean)
    hashed = to_hash(record)
    assert from_hash(hashed) == record
    for key, text in hashed.items():
        text.encode()
        one_line = (
            "noti_email_subject",
            "noti_wx_pnb",
            "noti_wx_tmpl_id",
            "noti_push_title",
            "noti_chat_title",
        )
        json_fields = {channel.spec.fields[name] for name in channel.spec.json_fields}
        if key in one_line:
            assert bad_character(text, one_line=True) is None
        elif key not in json_fields:  # JSON keeps what a string holds, escaped or not
            assert bad_character(text) is None


@given(st.sampled_from(list(Channel)), ANY_TEXT | st.integers() | st.none())
@settings(max_examples=300, deadline=None)
def test_targets_are_refused_with_a_code_or_clean(channel: Channel, target: Any) -> None:
    try:
        clean = validate_target(channel, target)
    except InvalidInput as exc:
        assert exc.code == "e.cmd.noti.add.badtarget"
        return
    assert clean == clean.strip() and bad_character(clean, name=True) is None
    assert validate_target(channel, clean) == clean


# --- levels and priorities ---------------------------------------------------------------------------

LEVEL_INPUTS = (
    st.integers()
    | st.integers(min_value=-(10**30), max_value=10**30).map(str)
    | st.floats()
    | st.booleans()
    | ANY_TEXT
    | st.none()
)


@given(LEVEL_INPUTS, st.sampled_from(list(Role)))
@settings(max_examples=500, deadline=None)
def test_a_level_is_refused_with_its_code_or_capped_into_range(value: Any, role: Role) -> None:
    try:
        level = parse_level(value)
    except InvalidInput as exc:
        assert exc.code == "e.cmd.noti.add.badlv"
        return
    assert type(level) is int and level >= 1
    capped = User("someone", role).cap_level(level)
    assert 1 <= capped <= LEVEL_CAPS[role] <= LEVEL_MAX
    assert 0 <= priority_for_level(capped) <= PRIORITY_STEPS[-1]


@given(st.integers(), st.integers())
@settings(max_examples=500)
def test_priority_for_level_is_in_range_and_never_serves_a_lower_level_first(a: int, b: int) -> None:
    low, high = sorted((a, b))
    assert PRIORITY_STEPS[0] <= priority_for_level(low) <= PRIORITY_STEPS[-1]
    assert priority_for_level(high) <= priority_for_level(low)  # 0 is served first


@given(st.sampled_from(PRIORITY_STEPS))
def test_level_for_priority_is_the_lowest_level_of_its_step(priority: int) -> None:
    level = level_for_priority(priority)
    assert 1 <= level <= LEVEL_MAX
    assert priority_for_level(level) == priority
    assert level == 1 or priority_for_level(level - 1) > priority


@given(st.integers().filter(lambda p: p not in PRIORITY_STEPS))
def test_level_for_priority_refuses_a_step_that_does_not_exist(priority: int) -> None:
    with pytest.raises(ValueError):
        level_for_priority(priority)


# --- the command line ------------------------------------------------------------------------------

WORDS = [
    "add",
    "sms",
    "email",
    "webhook",
    "weixin",
    "fax",
    "get",
    "list",
    "send",
    "del",
    "revoke",
    "delayed",
    "cancel",
    "dead",
    "show",
    "retry",
    "unsuppress",
    "pool",
    "call",
    "hangup",
    "event",
    "dispatch",
    "listener",
    "providers",
    "-to",
    "-text",
    "-subject",
    "-content",
    "-tmpl",
    "-pnb",
    "-url",
    "-lv",
    "-delay",
    "-at",
    "-id",
    "-retry",
    "-retry-policy",
    "-provider",
    "-limit",
    "-st",
    "-u",
    "-timeout",
    "-all",
    "-below-lv",
    "-type",
    "-data",
    "-json",
    "-c",
    "-q",
    "-n",
    "-Q",
    "--as",
    "--",
    "-",
    "+8613912345678",
    "ops@example.com",
    "https://hooks.example.com/in",
    "oOPENID",
    '{"a": 1}',
    '{"a": NaN}',
    "[[[[",
    "5m",
    "nan",
    "inf",
    "-1",
    "0",
    "1",
    "1000",
    "9" * 30,
    "2026-12-01T09:00",
    "boss",
    "alice",
    "",
    " ",
]
TOKENS = st.sampled_from(WORDS) | ANY_TEXT
#: Commands, then options with values of every kind (surrogates, controls, numbers as text).
SKELETONS = [
    ["add", "sms"],
    ["add", "email"],
    ["add", "webhook"],
    ["add", "weixin"],
    ["add"],
    ["get"],
    ["list"],
    ["send"],
    ["del"],
    ["revoke"],
    ["delayed", "list"],
    ["delayed", "cancel"],
    ["dead", "show"],
    ["dead", "retry"],
    ["dead", "unsuppress"],
    ["pool", "sms-cn", "add"],
    ["pool", "sms-cn", "call"],
    ["event", "dispatch"],
    ["event", "list"],
    ["listener", "add"],
    ["listener", "del"],
    ["providers"],
]
OPTIONS = [w for w in WORDS if w.startswith("-") and len(w) > 1]
VALUES = (
    ANY_TEXT
    | st.sampled_from(WORDS)
    | st.integers().map(str)
    | st.floats().map(str)
    | st.sampled_from(["+8613912345678", "ops@example.com", "https://hooks.example.com/in", "{}"])
)
PAIRS = st.lists(st.tuples(st.sampled_from(OPTIONS), VALUES) | st.tuples(VALUES), max_size=5)
ARGV = st.lists(TOKENS, max_size=9) | st.builds(
    lambda head, pairs: head + [token for pair in pairs for token in pair], st.sampled_from(SKELETONS), PAIRS
)
CODE_LINE = re.compile(r"^(line \d+: )?e\.[A-Za-z0-9_.]+: ")


@click.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.pass_context
def _entry(ctx: click.Context) -> None:
    from noti.cli import main

    main(list(ctx.args))


@given(ARGV, st.sampled_from(["alice", "boss"]), st.binary(max_size=40))
@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_any_command_line_is_refused_with_a_code_or_usage_error_or_does_something_valid(
    stored: Any, argv: list[str], user: str, stdin: bytes
) -> None:
    assume(not (argv[:1] == ["dead"] and "purge" in argv))  # asks for confirmation
    result = CliRunner().invoke(_entry, ["--as", user, *argv], input=stdin)
    shown = result.stdout + result.stderr
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in shown and "e.noti.internal" not in shown, shown
    assert result.exit_code in (0, 1, 2), shown
    lines = result.stderr.splitlines()
    if result.exit_code == 2:  # click's "Error: …", or the help of a group given no command
        assert any(line.startswith(("Error: ", "Usage: ")) for line in lines), result.stderr
    elif result.exit_code == 1:
        assert any(CODE_LINE.match(line) for line in lines), result.stderr
    elif (
        argv[:1] == ["add"]
        and "-f" not in argv
        and "--file" not in argv
        and not {"-Q", "--quiet"} & set(argv)
    ):
        # accepted: the printed record reads back and passes validation again
        printed = result.stdout.strip()
        record = noti.get(json.loads(printed)["id"] if printed.startswith("{") else printed, user="boss")
        assert validate_target(record.channel, record.target) == record.target
        assert validate_fields(record.channel, dict(record.fields)) == dict(record.fields)


def test_the_numbers_of_the_parsers_are_finite() -> None:
    # the option parser's durations and the API's numbers never carry NaN or infinity on
    from noti.cli._options import parse_duration

    for text in ("nan", "inf", "1e400", "9" * 400, "-5", "5 weeks", ""):
        with pytest.raises(NotiError):
            parse_duration(text, code="e.x", what="-delay")
    assert math.isfinite(parse_duration("9" * 12 + "day", code="e.x", what="-delay"))
