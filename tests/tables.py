"""Tables of test cases, and the parametrisations they drive."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest


def by_id(names: str, table: Sequence[Sequence[Any]]) -> pytest.MarkDecorator:
    """``pytest.mark.parametrize`` over ``table``, whose rows are ``(id, *values)``: one case a
    row, named by its id, its values given to ``names`` (comma-separated, as pytest takes them)."""
    one = len(names.split(",")) == 1  # pytest gives a single name the value, not a 1-tuple
    values = [row[1] if one else tuple(row[1:]) for row in table]
    return pytest.mark.parametrize(names, values, ids=[str(row[0]) for row in table])


def yes_no_rows(table: Mapping[str, tuple[Sequence[Any], Sequence[Any]]]) -> list[tuple[str, Any, bool]]:
    """``{key: (yes, no)}`` as rows ``(key, value, True)`` for each value in ``yes`` and
    ``(key, value, False)`` for each in ``no``: a pattern (a prefix, a rule) with what it takes
    and what it does not, side by side."""
    rows: list[tuple[str, Any, bool]] = []
    for key, (yes, no) in table.items():
        rows += [(key, value, True) for value in yes] + [(key, value, False) for value in no]
    return rows
