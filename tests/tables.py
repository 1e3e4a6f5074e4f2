"""Tables of cases: a test parametrised over rows that begin with their id."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest


def by_id(names: str, table: Sequence[Sequence[Any]]) -> pytest.MarkDecorator:
    """``pytest.mark.parametrize`` over ``table``, whose rows are ``(id, *values)``: one case a
    row, named by its id, its values given to ``names`` (comma-separated, as pytest takes them)."""
    one = len(names.split(",")) == 1  # pytest gives a single name the value, not a 1-tuple
    values = [row[1] if one else tuple(row[1:]) for row in table]
    return pytest.mark.parametrize(names, values, ids=[str(row[0]) for row in table])
