"""``noti.inputs.plain_object`` (the fast check of a notice's ``data``) answers as
``plain_json`` does for every value: the same object accepted, the same code refused."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from noti.errors import InvalidInput
from noti.inputs import plain_json, plain_object

CODE = "e.cmd.test.bad"
LIMIT = 256


def _outcome(check: Any, value: object) -> tuple[str, Any]:
    try:
        out = check(value)
    except InvalidInput as exc:
        return "refused", exc.code
    return "accepted", out


def _both(value: object, limit: int = LIMIT) -> tuple[tuple[str, Any], tuple[str, Any]]:
    fast = _outcome(lambda v: plain_object(v, what="data", code=CODE, max_bytes=limit), value)
    slow = _outcome(lambda v: plain_json(v, what="data", code=CODE, max_bytes=limit)[0], value)
    return fast, slow


SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=80)
    | st.binary(max_size=8)
)
KEYS = st.text(max_size=20) | st.integers(min_value=-5, max_value=5)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(KEYS, SCALARS | st.lists(SCALARS, max_size=3), max_size=12))
def test_the_fast_check_answers_as_the_full_one(value: dict[Any, Any]) -> None:
    fast, slow = _both(value)
    assert fast == slow


@pytest.mark.parametrize(
    "value",
    [
        {"order": 7, "name": "Ann"},
        {"x": "a" * (LIMIT - 8)},  # at the limit: the bound is too coarse, the full check decides
        {"x": "a" * LIMIT},  # over
        {"x": math.nan},
        {"x": math.inf},
        {"x": 2**53},  # outside the fast range: the full check
        {"x": 10**300},
        {"x": "\ud800"},  # a lone surrogate: not UTF-8
        {"名": "值"},  # not ASCII: the full check
        {1: "one"},  # a key JSON would turn into text
        {"x": "\x00\x1f"},  # control characters: escaped, six bytes each at most
        {},
    ],
    ids=lambda v: repr(v)[:40],
)
def test_edges_answer_as_the_full_check(value: dict[Any, Any]) -> None:
    fast, slow = _both(value)
    assert fast == slow


def test_the_object_is_the_callers_own_not_a_copy() -> None:
    data = {"order": 7}
    assert plain_object(data, what="data", code=CODE, max_bytes=LIMIT) is data
