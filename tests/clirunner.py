"""Click's test runner with click 8.2's results on every supported click."""

from __future__ import annotations

import inspect
from typing import Any

from click.testing import CliRunner, Result

__all__ = ["cli_runner"]

#: click < 8.2 mixes stderr into stdout unless told not to; 8.2 keeps them apart always.
_CLICK_81 = "mix_stderr" in inspect.signature(CliRunner.__init__).parameters


class _Result81(Result):
    """A click 8.1 result read as click 8.2 reads one: ``output`` is what the terminal shows
    (stdout, then stderr)."""

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


class _Runner81(CliRunner):
    def __init__(self) -> None:
        super().__init__(mix_stderr=False)  # type: ignore[call-arg]

    def invoke(self, *args: Any, **kwargs: Any) -> Result:
        result = super().invoke(*args, **kwargs)
        result.__class__ = _Result81
        return result


def cli_runner() -> CliRunner:
    """A :class:`CliRunner` whose results have ``stdout`` and ``stderr`` apart and ``output``
    with both, as click >= 8.2 gives them."""
    return _Runner81() if _CLICK_81 else CliRunner()
