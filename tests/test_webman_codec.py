"""Names, keys and the ``message`` JSON of the webman bridge, against the captured vectors."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from noti.bridge.webman import QueueKeys, QueueMessage, QueueNames, Reason, encode_message, parse_entry
from noti.bridge.webman.codec import check_data, decode_message
from noti.bridge.webman.layout import (
    class_name_for_queue,
    namespace_for_path,
    noti_consumer_name,
    php_strtolower,
)
from noti.bridge.webman.phpjson import (
    PhpJsonError,
    _encode_into,
    decode,
    encode,
    float_repr,
    loose_equals,
    to_int,
    to_str,
)
from noti.errors import MalformedMessage
from tests.webman_fixtures.vectors import load, scenarios

SEND_EMAIL = "app\\queue\\test\\SendEmail"
QUEUE = "app-queue-test-sendemail"
PROPERTY_NAMES = {
    "queueName": "queue_name_",
    "groupName": "group_name_",
    "streamKey": "stream_key",
    "delayedTaskSetKey": "delayed_task_set_key",
    "delayedDataHashKey": "delayed_data_hash_key",
}


def _consumers() -> list[dict[str, Any]]:
    seen: dict[str, dict[str, Any]] = {}
    for s in scenarios():
        for consumer in s["consumers"]:
            seen.setdefault(consumer["class"], consumer)
    return list(seen.values())


def _writes() -> list[dict[str, Any]]:
    return [w for w in load()["plugin_writes"] if "value" in w]


def _entry(message: dict[str, Any] | str) -> dict[str, str]:
    return {"message": message if isinstance(message, str) else json.dumps(message)}


def _valid(**changes: Any) -> dict[str, Any]:
    message = {
        "type": QUEUE,
        "data": "x",
        "timestamp": 1700000000,
        "source": SEND_EMAIL,
        "failCount": 0,
        "nextRetry": 0,
        "delayUntil": 0,
    }
    message.update(changes)
    return message


def _parse(fields: dict[str, str]) -> QueueMessage:
    return parse_entry(fields, queue_name=QUEUE, php_class=SEND_EMAIL, now_s=1795301774)[0]


# --- names and keys ----------------------------------------------------------------------------


@pytest.mark.parametrize("consumer", _consumers(), ids=lambda c: c["class"])
def test_names_and_keys_follow_the_php_formulas_and_overrides(consumer: dict[str, Any]) -> None:
    names = consumer["names"]
    overrides = {
        PROPERTY_NAMES[k]: v
        for k, v in (consumer["settings_overridden"] or {}).items()
        if k in PROPERTY_NAMES
    }
    derived = QueueNames.from_class(consumer["class"], **overrides)
    effective = names["effective"]
    assert (derived.queue, derived.group, derived.stream, derived.delayed_set, derived.delayed_hash) == (
        effective["queueName"],
        effective["groupName"],
        effective["streamKey"],
        effective["delayedTaskSetKey"],
        effective["delayedDataHashKey"],
    )
    keys = QueueKeys(derived, names["prefix"])
    assert (keys.stream, keys.delayed_set, keys.delayed_hash, keys.pending_lock) == (
        names["redis_keys"]["stream"],
        names["redis_keys"]["delayed_zset"],
        names["redis_keys"]["delayed_hash"],
        names["redis_keys"]["pending_lock"],
    )


def test_strtolower_is_ascii_only_and_trim_eats_the_class_own_underscores() -> None:
    assert php_strtolower("ÄPP\\Queue") == "Äpp\\queue"
    names = QueueNames.from_class("app\\Foo_")
    assert (names.queue, names.group) == ("app-foo_", "app_foo")


def test_noti_consumer_names_never_look_like_a_php_worker() -> None:
    name = noti_consumer_name("app_queue_x", "web-1.example", 4242, "0")
    assert name == "app_queue_x-noti-web_1.example-4242-0"
    suffix = name.removeprefix("app_queue_x-")
    assert not suffix.isdigit()


def test_make_consumer_naming_matches_the_plugin_command() -> None:
    assert class_name_for_queue("send-code") == "SendCode"
    assert class_name_for_queue("sendCode") == "SendCode"
    assert namespace_for_path("app/queue/test") == "app\\queue\\test"
    with pytest.raises(ValueError):
        class_name_for_queue("send_code")


# --- encoding ----------------------------------------------------------------------------------


@pytest.mark.parametrize("write", _writes(), ids=lambda w: f"{w['scenario']}-{w['step']}-{w['command']}")
def test_every_captured_message_decodes_and_encodes_to_the_same_bytes(write: dict[str, Any]) -> None:
    if write["value"] == "":  # PHP's json_encode failure (invalid UTF-8): PHP consumers drop it
        with pytest.raises(MalformedMessage) as caught:
            decode_message("")
        assert caught.value.reason == Reason.EMPTY
        return
    decoded = decode_message(write["value"])
    message = QueueMessage(
        type=decoded["type"],
        data=decoded["data"],
        timestamp=decoded["timestamp"],
        source=decoded["source"],
        fail_count=decoded["failCount"],
        next_retry=decoded["nextRetry"],
        delay_until=decoded["delayUntil"],
    )
    assert encode_message(message) == write["value"]
    assert decoded == write["decoded"]


@pytest.mark.parametrize(
    ("value", "php"),
    [
        (1e17, "1.0e+17"),
        (1e16, "10000000000000000"),
        (0.0001, "0.0001"),
        (1e-5, "1.0e-5"),
        (1.5e-5, "1.5e-5"),
        (-0.0, "-0"),
        (2.0, "2"),
        (0.30000000000000004, "0.30000000000000004"),
        (1.5e300, "1.5e+300"),
        ("a/b", '"a\\/b"'),
        ("é😀\u0001\x7f<&'>", '"\\u00e9\\ud83d\\ude00\\u0001\x7f<&\'>"'),
        ({}, "[]"),
        ({"0": "a", "1": "b"}, '["a","b"]'),
        ({"1": "a"}, '{"1":"a"}'),
        ([[], {}], "[[],[]]"),
        (9007199254740993, "9007199254740993"),
    ],
)
def test_encoding_follows_php_json_encode(value: Any, php: str) -> None:
    assert encode(value) == php


_KEYS = st.one_of(st.sampled_from(["0", "1", "a", "/", "é"]), st.text(max_size=4), st.integers(0, 3))
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.floats(),
    st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from(["\x7f", "/", "\\", "\ud800"])),
    st.sampled_from(["\\u007f", "a\\ud800", "😀"]),  # text that looks like the escapes it must not be
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEYS, inner, max_size=4),
    max_leaves=12,
)


def _encode_slowly(value: Any) -> str:
    parts: list[str] = []
    _encode_into(value, parts, 0)
    return "".join(parts)


@settings(max_examples=400, deadline=None)
@given(_VALUES)
def test_the_fast_encoder_writes_or_refuses_exactly_what_the_php_rules_do(value: Any) -> None:
    try:
        expected = _encode_slowly(value)
    except PhpJsonError:
        with pytest.raises(PhpJsonError):
            encode(value)
    else:
        assert encode(value) == expected


@pytest.mark.parametrize("value", [float("inf"), float("nan"), "\ud800", 10**400, b"bytes", {1.5: "x"}])
def test_encoding_refuses_what_php_cannot_encode(value: Any) -> None:
    with pytest.raises(PhpJsonError):
        encode(value)


@pytest.mark.parametrize("data", [None, True, 1.5, 2.0, b"\xff", {"a"}])
def test_data_php_would_change_or_drop_is_a_clear_error(data: Any) -> None:
    with pytest.raises(MalformedMessage):
        check_data(data)


def test_integers_beyond_64_bits_are_written_as_php_writes_them_and_read_back_as_php_reads_them() -> None:
    # PHP holds no such integer: json_decode makes it a float and json_encode writes that float
    # (issue 18 point 7). Inside data it stays a float; at the top, PHP's `string|array|int`
    # parameter turns the float into a string.
    assert encode({"n": 2**64, "m": -(2**63) - 1, "k": 2**63 - 1}) == (
        '{"n":1.8446744073709552e+19,"m":-9.223372036854776e+18,"k":9223372036854775807}'
    )
    assert encode([2**63]) == "[9.223372036854776e+18]"
    assert check_data(2**64) == "1.844674407371E+19"
    assert check_data({"n": 2**64}) == {"n": 2**64}
    with pytest.raises(MalformedMessage, match="beyond a float"):
        check_data(10**400)
    for data in ({"n": 2**64}, [2**70, 1], 2**64):
        message = QueueMessage(
            type=QUEUE,
            data=check_data(data),
            timestamp=1,
            source=SEND_EMAIL,
            fail_count=0,
            next_retry=0,
            delay_until=0,
        )
        ours = _parse(_entry(encode_message(message)))  # the bytes noti writes, read back
        literal = _parse(_entry(_valid(data=data)))  # the same number written as a JSON integer
        assert ours.data == literal.data
        assert encode_message(ours) == encode_message(message)
    assert _parse(_entry(_valid(data={"n": 2**64}))).data == {"n": 1.8446744073709552e19}
    assert _parse(_entry(_valid(data=2**64))).data == "1.844674407371E+19"


def test_php_string_conversion_of_floats() -> None:
    assert float_repr(1e20, precision=14) == "1.0E+20"
    assert float_repr(0.1 + 0.2, precision=14) == "0.3"
    assert to_str(1.5) == "1.5" and to_str(True) == "1" and to_str(False) == ""


# --- decoding ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"payload": "{}"}, Reason.NO_MESSAGE_FIELD),
        (_entry(""), Reason.EMPTY),
        ({"message": '{"type":"\udcff"}'}, Reason.INVALID_UTF8),
        (_entry("hello"), Reason.BAD_JSON),
        (_entry('{"type": NaN}'), Reason.BAD_JSON),
        (_entry('{"a": "\\ud800"}'), Reason.BAD_JSON),
        (_entry("[" * 513 + "]" * 513), Reason.BAD_JSON),
        (_entry("{}"), Reason.NOT_AN_OBJECT),
        (_entry("0"), Reason.NOT_AN_OBJECT),
        (_entry("[1,2]"), Reason.NOT_AN_OBJECT),
        (_entry('"text"'), Reason.BAD_FIELD_TYPE),
        (_entry(_valid(data=None)), Reason.MISSING_KEY),
        (_entry({k: v for k, v in _valid().items() if k != "delayUntil"}), Reason.MISSING_KEY),
        (_entry(_valid(type="other-queue")), Reason.FOREIGN_TYPE),
        (_entry(_valid(type=1)), Reason.FOREIGN_TYPE),
        (_entry(_valid(source="\\" + SEND_EMAIL)), Reason.FOREIGN_SOURCE),
        (_entry(_valid(source=["x"])), Reason.FOREIGN_SOURCE),
        (_entry(_valid(failCount="abc")), Reason.BAD_FIELD_TYPE),
        (_entry(_valid(failCount=[1])), Reason.BAD_FIELD_TYPE),
        (_entry(_valid(timestamp=1e30)), Reason.BAD_FIELD_TYPE),
    ],
)
def test_entries_php_drops_or_chokes_on_are_clear_errors(fields: dict[str, str], reason: Reason) -> None:
    with pytest.raises(MalformedMessage) as caught:
        _parse(fields)
    assert caught.value.reason == reason
    assert caught.value.code == "e.noti.bridge.malformed"


def test_php_outcomes_of_bad_entries() -> None:
    assert Reason.BAD_FIELD_TYPE.php_outcome == "stuck"
    assert Reason.BAD_JSON.php_outcome == "dropped"


def test_decoding_accepts_what_php_accepts_and_coerces_like_its_typed_constructor() -> None:
    relaxed = (
        '{"delayUntil":0, "source":"app\\\\queue\\\\test\\\\SendEmail", "type":"app-queue-test-sendemail",'
    )
    relaxed += ' "data":{"path":"/a","s":"Ü","f":1.0,"e":{}}, "timestamp":1700000000.75, "failCount":"2 ",'
    relaxed += ' "nextRetry":true, "identifier":"extra"}'
    message = _parse({"celery_id": "x", "message": relaxed})
    assert message == QueueMessage(
        type=QUEUE,
        data={"path": "/a", "s": "Ü", "f": 1.0, "e": []},
        timestamp=1700000000,
        source=SEND_EMAIL,
        fail_count=2,
        next_retry=1,
        delay_until=0,
    )
    assert _parse(_entry(_valid(data=1.5))).data == 1
    assert _parse(_entry(_valid(data=False))).data == 0
    assert _parse(_entry(_valid(data={"0": "a", "1": "b"}))).data == ["a", "b"]
    assert _parse(_entry(_valid(data=1e20))).data == "1.0E+20"
    assert _parse(_entry(_valid(timestamp=0))).timestamp == 1795301774
    assert _parse(_entry(_valid(source=True))).source == "1"  # PHP's loose `!=` lets it through


def test_php_scalar_rules() -> None:
    assert decode("12345678901234567890") == 1.2345678901234567e19
    assert decode("[" * 512 + "]" * 512) is not None
    assert to_int("1e3") == 1000 and to_int(" 12abc") == 12 and to_int(-2.9) == -2
    assert loose_equals("10", "1e1") and not loose_equals("abc", "ABC") and loose_equals(5, "5")


def test_deep_values_are_encoded_or_refused_as_php_does() -> None:
    deep: Any = "x"
    for _ in range(400):
        deep = {"k": [deep]}  # 800 levels: more than the fast check looks at, PHP's limit is 512
    with pytest.raises(PhpJsonError, match="nesting deeper"):
        encode(deep)
    fine: Any = "x"
    for _ in range(255):
        fine = {"k": [fine]}  # 510 levels
    assert encode(fine) == _encode_slowly(fine)
    assert encode(fine).count("[") == 255
