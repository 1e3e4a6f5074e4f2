"""``noti delayed list | cancel``: records waiting for a time."""

from __future__ import annotations

from datetime import UTC, datetime

import click
from rich.console import Console
from rich.table import Table

from noti.cli._options import CliContext, json_options, json_style, limit_option, pass_cli
from noti.cli._output import dumps, rm_line
from noti.record import now_ms, to_json_dict

__all__ = ["delayed"]


@click.group("delayed")
def delayed() -> None:
    """Notifications waiting for a time: scheduled ones and retries backing off."""


@delayed.command("list")
@limit_option
@json_options
@pass_cli
def list_delayed(
    ctx: CliContext,
    /,
    limit: int | None,
    as_json: bool,
    compact: bool,
    unquoted: bool,
    no_null: bool,
    quiet: bool,
) -> None:
    """List delayed notifications, soonest first (yours; root members: everyone's)."""
    entries = ctx.api.delayed(user=ctx.user, limit=limit)
    if quiet:
        return
    if as_json or compact or unquoted or no_null:
        rows = [{**to_json_dict(record), "due": due} for record, due in entries]
        click.echo(dumps(rows, json_style(compact, unquoted, no_null)))
        return
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("DUE (UTC)", "IN", "ID", "TYPE", "LV", "CREATOR", "TARGET", "RETRY", "IDENT"):
        table.add_column(column, overflow="fold")
    now = now_ms()
    for record, due in entries:
        table.add_row(
            datetime.fromtimestamp(due / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S"),
            f"{max(0, due - now) / 1000:.1f}s",
            record.id,
            record.channel.value,
            str(record.level),
            record.creator,
            record.target,
            f"{record.retry}/{record.retry_max}",
            record.identifier or "",
        )
    console = Console(width=200, soft_wrap=True)
    console.print(table)
    console.print(f"{len(entries)} delayed")


@delayed.command("cancel")
@click.argument("idents", metavar="ID_OR_IDENT...", nargs=-1, required=True)
@click.option("-Q", "--quiet", is_flag=True, help="Print nothing.")
@pass_cli
def cancel(ctx: CliContext, /, idents: tuple[str, ...], quiet: bool) -> None:
    """Cancel scheduled notifications by id or by identifier, before they are queued."""
    for ident in idents:
        record = ctx.api.cancel(ident, user=ctx.user)
        if not quiet:
            click.echo(rm_line(record))
