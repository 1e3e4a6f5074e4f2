"""Through which door a record comes in (its ``noti_door``, the first step of its timeline:
:mod:`noti.core.timeline`): the Python API unless the door a call came through says otherwise.

Kept apart and light (nothing but :mod:`contextvars`): the CLI and the HTTP app set it before
anything else is imported, and a CLI call that reads no record must stay quick to start
(tests/test_fast_cli.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["DOORS", "current_door", "through"]

#: Through which door a record came in (the record's ``noti_door``).
DOORS = ("api", "task", "cli", "http", "webman", "events")

_DOOR: ContextVar[str] = ContextVar("noti_door", default="api")


def current_door() -> str:
    """The door the records made now come in through (``api`` unless a door said otherwise)."""
    return _DOOR.get()


@contextmanager
def through(door: str) -> Iterator[None]:
    """Records made inside come in through ``door`` (one of :data:`DOORS`)."""
    if door not in DOORS:
        raise ValueError(f"not a door: {door!r}")
    token = _DOOR.set(door)
    try:
        yield
    finally:
        _DOOR.reset(token)
