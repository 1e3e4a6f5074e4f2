"""noti.fastjson reads and writes the same values with orjson and with the standard library.

The module is loaded twice: as the process has it (msgspec where the ``fast`` extra is
installed: the newest-versions venv) and with ``NOTI_PURE_JSON=1`` (the standard library
only, as where orjson is not installed: the lowest-versions venv runs the whole delivery
path that way). Each case is checked against ``json`` itself.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import importlib.util
import json
import math
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

import noti.fastjson

ENVELOPE = (
    '{"body": "W1siMDFKIl0sIHt9LCB7fV0=", "content-encoding": "utf-8", "content-type": '
    '"application/json", "headers": {"task": "noti.deliver", "id": "01J", "eta": null, '
    '"retries": 0, "timelimit": [null, null], "ignore_result": false}, "properties": '
    '{"delivery_info": {"exchange": "", "routing_key": "noti.sms"}, "priority": 3, '
    '"delivery_tag": "9a8b7c6d"}}'
)

#: Texts both must read to the same value as json.loads.
TEXTS = [
    ENVELOPE,
    '{"text": "订单 7 已发货 🚚", "n": 1, "x": 1.5, "e": 1e-05, "big": 1e300}',
    '"a\\u00e9\\ud83d\\ude9a"',
    "[]",
    "{}",
    "null",
    " \n[1, 2.0, -3, true, false, null] ",
    '{"k": 1, "k": 2}',  # the last wins
    # orjson refuses these; json takes them (the standard library decides)
    '{"n": 123456789012345678901234567890}',
    '{"n": -123456789012345678901234567890}',
    "[NaN, Infinity, -Infinity]",
    '"\\ud800"',  # a lone surrogate
    "[" * 300 + "]" * 300,
]

#: Texts both must refuse, as json.loads does (json.JSONDecodeError).
BAD_TEXTS = ["", "{", '{"a": }', "[1,]", "nul", '{"a" 1}', "1 2", "\x00"]


@dataclasses.dataclass
class _Point:
    x: int


class _Color(enum.Enum):
    RED = "red"


class _Level(enum.IntEnum):
    HIGH = 3


class _Kind(enum.StrEnum):
    SMS = "sms"


#: Values both must write as text json reads back to the same value.
VALUES: list[Any] = [
    {"at": 1764450000123, "ev": "attempt", "provider": "sandbox", "ms": 3, "outcome": "ok"},
    {"text": "订单 7 已发货 🚚", "line\nbreak": 'tab\t"quote" \\ back'},
    [1, 2.5, -0.0, 1e-05, 1e300, 12345678901234567, True, False, None],
    {"n": 123456789012345678901234567890},
    ("a", "tuple"),
    {"nested": {"deep": [{"a": [1, {"b": None}]}]}},
    {"level": _Level.HIGH, "kind": _Kind.SMS},
    {1: "int key", 1.5: "float key", None: "null key", False: "bool key"},
    "\ud800",  # a lone surrogate
    "",
    0,
]

#: Values both must refuse, as json.dumps does: (value, exception type).
REFUSED: list[tuple[Any, type[Exception]]] = [
    ({"a": 1}.keys(), TypeError),
    ({"object": object()}, TypeError),
    ({(1, 2): "tuple key"}, TypeError),
]

#: Values json refuses that msgspec writes (the module's documented difference: noti passes none).
WRITTEN_BY_MSGSPEC: list[tuple[Any, str]] = [
    ({"color": _Color.RED}, '{"color":"red"}'),
    ({"set": {1}}, '{"set":[1]}'),
    ({"bytes": b"x"}, '{"bytes":"eA=="}'),
    ({"point": _Point(1)}, '{"point":{"x":1}}'),
    ({"when": datetime.datetime(2026, 11, 29)}, '{"when":"2026-11-29T00:00:00"}'),
    ([math.inf, math.nan], "[null,null]"),
]


def _load(pure: bool) -> ModuleType:
    """noti.fastjson loaded afresh (``pure``: with NOTI_PURE_JSON=1)."""
    spec = importlib.util.find_spec("noti.fastjson")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    with pytest.MonkeyPatch.context() as patch:
        if pure:
            patch.setenv("NOTI_PURE_JSON", "1")
        else:
            patch.delenv("NOTI_PURE_JSON", raising=False)
        spec.loader.exec_module(module)
    return module


@pytest.fixture(params=["as-installed", "pure"], scope="module")
def codec(request: pytest.FixtureRequest) -> Iterator[ModuleType]:
    yield _load(request.param == "pure")


def _same(a: Any, b: Any) -> bool:
    """Equal, NaN equal to NaN."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def test_the_pure_module_uses_the_standard_library_and_the_installed_one_orjson_where_present() -> None:
    assert _load(pure=True).FAST is False
    assert _load(pure=False).FAST is (importlib.util.find_spec("msgspec") is not None)
    assert noti.fastjson.FAST is (importlib.util.find_spec("msgspec") is not None)


@pytest.mark.parametrize("text", TEXTS, ids=range(len(TEXTS)))
def test_a_text_reads_as_json_reads_it(codec: ModuleType, text: str) -> None:
    expected = json.loads(text)
    assert _same(codec.loads(text), expected)
    assert _same(
        codec.loads(text.encode("utf-8", "surrogatepass")), json.loads(text.encode("utf-8", "surrogatepass"))
    )


@pytest.mark.parametrize("text", BAD_TEXTS, ids=range(len(BAD_TEXTS)))
def test_a_text_json_refuses_is_refused_with_its_error(codec: ModuleType, text: str) -> None:
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)
    with pytest.raises(json.JSONDecodeError):
        codec.loads(text)


@pytest.mark.parametrize("value", VALUES, ids=range(len(VALUES)))
def test_a_value_is_written_compact_and_reads_back_the_same(codec: ModuleType, value: Any) -> None:
    text = codec.dumps(value)
    assert isinstance(text, str)
    standard = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    assert _same(json.loads(text), json.loads(standard))
    if not isinstance(value, list):  # the very same text (floats may be spelled differently)
        assert text == standard


def test_non_ascii_is_written_as_it_is_and_control_characters_escaped(codec: ModuleType) -> None:
    assert codec.dumps({"t": "é🚚\n\x01"}) == '{"t":"é🚚\\n\\u0001"}'


@pytest.mark.parametrize(
    "value,error", REFUSED, ids=[type(v).__name__ + str(i) for i, (v, _) in enumerate(REFUSED)]
)
def test_a_value_json_refuses_is_refused_alike(codec: ModuleType, value: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        json.dumps(value)
    with pytest.raises(error):
        codec.dumps(value)


def test_a_value_that_contains_itself_is_refused_alike(codec: ModuleType) -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(ValueError):
        codec.dumps(loop)


@pytest.mark.parametrize("value,text", WRITTEN_BY_MSGSPEC, ids=range(len(WRITTEN_BY_MSGSPEC)))
def test_the_documented_differences(value: Any, text: str) -> None:
    # the standard library's way where msgspec is not in use: its refusal or its non-JSON
    pure = _load(pure=True)
    try:
        expected: str | None = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    except TypeError:
        expected = None
    if expected is None:
        with pytest.raises(TypeError):
            pure.dumps(value)
    else:
        assert pure.dumps(value) == expected
    fast = _load(pure=False)
    if fast.FAST:
        assert fast.dumps(value) == text


def test_the_kombu_envelope_decoder_reads_bytes_and_text_alike() -> None:
    from noti.celery.transport import kombu_json

    expected = json.loads(ENVELOPE)
    assert kombu_json(ENVELOPE) == expected
    assert kombu_json(ENVELOPE.encode()) == expected
    # kombu's own object hook still decides where a value is typed
    typed = '{"when": {"__type__": "datetime", "__value__": "2026-11-29T00:00:00"}}'
    assert kombu_json(typed) == {"when": datetime.datetime(2026, 11, 29)}
    # an envelope that is not UTF-8 reads as kombu reads it (replacement characters)
    assert kombu_json(b'{"t": "\xff"}') == {"t": "\ufffd"}


def test_the_module_is_the_one_the_delivery_path_imports() -> None:
    assert sys.modules["noti.fastjson"] is noti.fastjson
