"""``noti delayed list | cancel``: records waiting for a time."""

from __future__ import annotations

import click

from noti.cli._options import CliContext, Output, json_options, limit_option, pass_cli
from noti.cli._output import print_table, rm_line, when
from noti.core.record import now_ms
from noti.core.record_json import to_json_dict

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
    out: Output,
) -> None:
    """List delayed notifications, soonest first (yours; root members: everyone's)."""
    entries = ctx.api.delayed(user=ctx.user, limit=limit)
    if out.quiet:
        return
    why = ctx.api.why_waiting([record for record, _ in entries])
    if out.wants_json:
        as_dicts = [
            {**to_json_dict(record), "due": due, "why": w}
            for (record, due), w in zip(entries, why, strict=True)
        ]
        out.json(as_dicts)
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
            w,
            record.identifier or "",
        )
        for (record, due), w in zip(entries, why, strict=True)
    )
    columns = ("DUE (UTC)", "IN", "ID", "TYPE", "LV", "CREATOR", "TARGET", "RETRY", "WHY", "IDENT")
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
