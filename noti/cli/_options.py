"""Options shared by several commands, declared once (seed spellings and --long forms)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any, TypeVar

import click

from noti.api import Notifier, notifier
from noti.cli._output import JsonStyle

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class CliContext:
    """What every command needs: the acting user and the API."""

    user: str | None

    @cached_property
    def api(self) -> Notifier:
        return notifier()


pass_cli = click.make_pass_decorator(CliContext)


def json_options(func: F) -> F:
    """``-json``, ``-c``, ``-q``, ``-n`` and ``-Q``, as the seed spells them."""
    decorators = [
        click.option("-json", "--json", "as_json", is_flag=True, help="Print JSON."),
        click.option("-c", "--compact", is_flag=True, help="Compact JSON."),
        click.option("-q", "--unquoted", is_flag=True, help="JSON keys without quotes."),
        click.option("-n", "--no-null", "no_null", is_flag=True, help="Leave out null values."),
        click.option("-Q", "--quiet", is_flag=True, help="Print nothing."),
    ]
    for decorator in reversed(decorators):
        func = decorator(func)
    return func


def json_style(compact: bool, unquoted: bool, no_null: bool) -> JsonStyle:
    return JsonStyle(compact=compact, unquoted_keys=unquoted, drop_nulls=no_null)


limit_option = click.option(
    "-limit", "--limit", type=int, default=None, help="At most N records (0 or less: no limit)."
)
