"""Options shared by several commands, declared once (seed spellings and --long forms)."""

from __future__ import annotations

import functools
import gc
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar, cast

import click

from noti.cli._output import JsonStyle, dumps, print_records_table, records_json
from noti.errors import InvalidInput

if TYPE_CHECKING:
    from noti.core.record import Notification
    from noti.sending.bulk import BulkResult
    from noti.sending.notifier import Notifier
    from noti.sending.redrive import Redrive

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class CliContext:
    """What every command needs: the acting user and the API."""

    user: str | None
    #: The process ends when the command does (the ``noti`` script:
    #: :func:`noti.cli.console_main`), so what its start-up builds lives until then.
    one_shot: bool = False

    # noti.api is imported when a command first uses it, not when the CLI starts (``--help``
    # and usage errors need none of it)
    @cached_property
    def api(self) -> Notifier:
        with self._starting():
            from noti.api import notifier

            return notifier()

    @cached_property
    def redrive(self) -> Redrive:
        with self._starting():
            from noti.api import redrive

            return redrive()

    @contextmanager
    def _starting(self) -> Iterator[None]:
        """Around the import of noti's API and the building of its runtime, where pydantic,
        redis-py and noti make some 40,000 objects that live as long as the process.

        In a one-shot process the cycle collector is paused meanwhile and those objects are
        frozen after (:func:`gc.freeze`): the ~100 collections run while they were being
        made freed some 600 objects of 46,000 and took ~10 ms of each ``noti list`` and
        ``noti get`` (20 interleaved runs each on the 2-core bench machine: 251 ms, 239 ms
        paused); the 600 are now left to the end of the process. The collector runs as
        before once the API is built, for what the command allocates. Elsewhere (tests, an
        application calling :func:`noti.cli.main`) it is left alone.
        """
        if not self.one_shot or not gc.isenabled():
            yield
            return
        gc.disable()
        try:
            yield
        finally:
            gc.freeze()
            gc.enable()

    def api_bulk(self, items: list[object]) -> BulkResult:
        from noti.sending.bulk import add_many

        return add_many(self.api, items, user=self.user)


pass_cli = click.make_pass_decorator(CliContext)


@dataclass(frozen=True, slots=True)
class Output:
    """The seed's output switches of one command: ``-json -c -q -n`` and ``-Q``."""

    wants_json: bool
    style: JsonStyle
    quiet: bool

    def json(self, value: Any) -> None:
        """Print ``value`` as JSON in the chosen style."""
        click.echo(dumps(value, self.style))

    def records(self, records: list[Notification]) -> None:
        """Records as ``noti list`` shows them: a table, JSON, or nothing with ``-Q``."""
        if self.quiet:
            return
        if self.wants_json:
            self.json(records_json(records))
        else:
            print_records_table(records)


def json_options(func: F) -> F:
    """Add ``-json``, ``-c``, ``-q``, ``-n`` and ``-Q`` (as the seed spells them) and hand the
    command one ``out: Output`` instead of five flags. ``-c``, ``-q`` or ``-n`` imply JSON."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        compact, unquoted, no_null = kwargs.pop("compact"), kwargs.pop("unquoted"), kwargs.pop("no_null")
        out = Output(
            wants_json=kwargs.pop("as_json") or compact or unquoted or no_null,
            style=JsonStyle(compact=compact, unquoted_keys=unquoted, drop_nulls=no_null),
            quiet=kwargs.pop("quiet"),
        )
        return func(*args, out=out, **kwargs)

    decorators = [
        click.option("-json", "--json", "as_json", is_flag=True, help="Print JSON."),
        click.option("-c", "--compact", is_flag=True, help="Compact JSON."),
        click.option("-q", "--unquoted", is_flag=True, help="JSON keys without quotes."),
        click.option("-n", "--no-null", "no_null", is_flag=True, help="Leave out null values."),
        click.option("-Q", "--quiet", is_flag=True, help="Print nothing."),
    ]
    decorated: Any = wrapper
    for decorator in reversed(decorators):
        decorated = decorator(decorated)
    return cast(F, decorated)


_DURATION = re.compile(r"^\s*([0-9]{1,12}(?:\.[0-9]{1,9})?)\s*(s|m|h|d|day|days)?\s*\Z", re.IGNORECASE)
_UNIT_S = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "day": 86400, "days": 86400}


def parse_duration(text: str, *, code: str, what: str) -> float:
    """Seconds from ``90``, ``1.5``, ``30s``, ``5m``, ``2h``, ``3day`` (or ``3d``).

    Raises:
        InvalidInput: with ``code``, naming the option ``what``.
    """
    match = _DURATION.match(text)
    if not match:
        raise InvalidInput(
            f"{what} {text!r} is not a duration: use seconds or Ns, Nm, Nh, Nday (e.g. 30m, 24h, 3day)",
            code=code,
        )
    return float(match.group(1)) * _UNIT_S[(match.group(2) or "").lower()]


limit_option = click.option(
    "-limit", "--limit", type=int, default=None, help="At most N records (0 or less: no limit)."
)
