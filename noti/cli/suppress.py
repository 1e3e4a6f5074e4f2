"""``noti suppress list [CHANNEL] | del CHANNEL TARGET``: the suppression list (who may see
and lift what: :mod:`noti.sending.suppressions`). ``noti dead unsuppress`` still lifts one too."""

from __future__ import annotations

from dataclasses import asdict

import click

from noti.cli._options import CliContext, Output, json_options, pass_cli
from noti.cli._output import print_table, when

__all__ = ["suppress"]


@click.group("suppress")
def suppress() -> None:
    """Targets no notification goes to any more (opt-outs, bounces, complaints), and why."""


@suppress.command("list")
@click.argument("channel", required=False)
@click.option("-limit", "--limit", type=int, default=None, help="At most N entries (newest first).")
@json_options
@pass_cli
def list_suppressed(ctx: CliContext, /, channel: str | None, limit: int | None, out: Output) -> None:
    """List suppressed targets (of CHANNEL, or of every channel), newest first."""
    from noti.sending.suppressions import Suppressions

    entries = Suppressions(ctx.api.runtime).entries(user=ctx.user, channel=channel, limit=limit)
    if out.quiet:
        return
    if out.wants_json:
        out.json([asdict(entry) for entry in entries])
        return
    rows = (
        (
            e.channel,
            e.target,
            e.reason or "-",
            when(e.at_ms),
            e.code or "-",
            e.record or "-",
            e.provider or "-",
        )
        for e in entries
    )
    print_table(
        ("CHANNEL", "TARGET", "REASON", "AT (UTC)", "CODE", "RECORD", "PROVIDER"), rows, "suppressed target"
    )


@suppress.command("del")
@click.argument("channel")
@click.argument("target")
@pass_cli
def delete(ctx: CliContext, /, channel: str, target: str) -> None:
    """Let TARGET receive CHANNEL notifications again (root members only)."""
    from noti.sending.suppressions import Suppressions

    entry = Suppressions(ctx.api.runtime).lift(channel, target, user=ctx.user)
    click.echo(f"{entry.channel} {entry.target}: suppression lifted ({entry.reason or 'no reason kept'})")
