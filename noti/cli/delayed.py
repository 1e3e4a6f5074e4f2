"""``noti delayed list | cancel``: records waiting for a time."""

from __future__ import annotations

import click

from noti.cli._options import CliContext, json_options, json_style, limit_option, pass_cli
from noti.cli._output import dumps, print_table, rm_line, when
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
        as_dicts = [{**to_json_dict(record), "due": due} for record, due in entries]
        click.echo(dumps(as_dicts, json_style(compact, unquoted, no_null)))
        return
    now = now_ms()
    rows = (
        (
            when(due),
            f"{max(0, due - now) / 1000:.1f}s",
            record.id,
            record.channel.value,
            str(record.level),
            record.creator,
            record.target,
            f"{record.retry}/{record.retry_max}",
            record.identifier or "",
        )
        for record, due in entries
    )
    columns = ("DUE (UTC)", "IN", "ID", "TYPE", "LV", "CREATOR", "TARGET", "RETRY", "IDENT")
    print_table(columns, rows, "delayed notification")


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
