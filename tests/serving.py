"""A fake server running for as long as a fixture lasts."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TypeVar

from tests.fakes._server import FakeServer

Server = TypeVar("Server", bound=FakeServer)


def serving(server: Server) -> Iterator[Server]:
    """``server`` started, and stopped when the fixture ends: ``yield from serving(Fake())``.
    Yields ``server`` itself, typed as given (``with`` would give a plain FakeServer)."""
    with server as running:
        assert running is server
        yield server
