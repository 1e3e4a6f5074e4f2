"""The substitution fast path of noti's templates (``noti.events.templates``): a template that
is only text and printed variables renders without Jinja when every value is plain, and says
exactly what Jinja's sandboxed rendering says, for every value, error included."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from noti.errors import InvalidInput
from noti.events.templates import compile_template

TEMPLATES = [
    "Order {{ order }} shipped",
    "{{ recipient.attributes.name }}, hi",
    "{{ a['b'] }}-{{ a.b }}",
    "plain text, no variable\n",
    "{{ x }}{{ x }}",
    "  {{- x -}}  ",
    "{% raw %}{{ x }}{% endraw %} {{ x }}",
]
VALUES: list[dict[str, Any]] = [
    {"order": 7, "recipient": {"attributes": {"name": "Ada"}}, "a": {"b": "B"}, "x": "é"},
    {"order": "７", "recipient": {"attributes": {"name": None}}, "a": {"b": True}, "x": 1.5},
    {"order": 10**20, "recipient": {"attributes": {"name": ["l", "i"]}}, "a": {"b": {"c": 1}}, "x": False},
    {"order": -3, "recipient": {"attributes": {"name": "<b>&"}}, "a": {"b": 2**70}, "x": "x" * 10},
    # a key that is a dict attribute: Jinja looks the attribute up first
    {"order": {"items": 1}, "recipient": {"attributes": {"items": 1, "name": "n"}}, "a": {"b": ""}, "x": 0},
    # missing variables: Jinja's error
    {"order": 1},
    {},
]


def _jinja_only(source: str) -> Any:
    return dataclasses.replace(compile_template(source, "field 'text'"), pieces=None)


def _outcome(template: Any, values: dict[str, Any]) -> tuple[str, str]:
    try:
        return ("ok", template.render(values))
    except InvalidInput as exc:
        return (exc.code, exc.message)


@pytest.mark.parametrize("source", TEMPLATES)
@pytest.mark.parametrize("values", VALUES, ids=range(len(VALUES)))
def test_the_fast_path_says_what_jinja_says(source: str, values: dict[str, Any]) -> None:
    fast = compile_template(source, "field 'text'")
    assert fast.pieces is not None  # these are substitution-only templates
    assert _outcome(fast, values) == _outcome(_jinja_only(source), values)


@pytest.mark.parametrize(
    "source",
    [
        "{{ x | upper }}",
        "{{ x ~ 'y' }}",
        "{% if x %}y{% endif %}",
        "{{ x() }}",
        "{{ a[b] }}",
        "{{ 'x' * 3 }}",
    ],
)
def test_anything_more_than_substitution_is_left_to_jinja(source: str) -> None:
    assert compile_template(source, "field 'text'").pieces is None


def test_a_value_over_the_output_limit_is_refused_as_jinja_refuses_it() -> None:
    template = compile_template("{{ x }}", "field 'text'")
    values = {"x": "y" * (64 * 1024 + 1)}
    assert _outcome(template, values) == _outcome(_jinja_only("{{ x }}"), values)
    assert _outcome(template, values)[0] != "ok"
