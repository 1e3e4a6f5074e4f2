"""``noti dead list | show | retry | purge``: dead letters (a user's own records', a root member's all)."""

from __future__ import annotations

from dataclasses import asdict

import click

from noti.cli._options import CliContext, Output, json_options, limit_option, pass_cli
from noti.cli._output import JsonStyle, dumps, print_table, when
from noti.core.deadletter import DeadLetter

__all__ = ["dead"]


@click.group("dead")
def dead() -> None:
    """Dead letters: notifications that failed for good, and poison messages."""


@dead.command("list")
@limit_option
@json_options
@pass_cli
def list_dead(
    ctx: CliContext,
    /,
    limit: int | None,
    out: Output,
) -> None:
    """List dead letters, newest first."""
    letters = ctx.redrive.entries(user=ctx.user, limit=limit)
    if out.quiet:
        return
    if out.wants_json:
        out.json([asdict(letter) for letter in letters])
        return
    rows = (
        (
            letter.entry_id,
            when(letter.at_ms),
            letter.record_id,
            letter.type,
            letter.target,
            str(letter.attempts),
            letter.error_class,
            letter.errmsg,
            letter.source,
        )
        for letter in letters
    )
    columns = ("ENTRY", "AT (UTC)", "RECORD", "TYPE", "TARGET", "ATTEMPTS", "CLASS", "ERROR", "SOURCE")
    print_table(columns, rows, "dead letter")


def _show(letter: DeadLetter, as_json: bool) -> None:
    if as_json:
        click.echo(dumps(asdict(letter), JsonStyle()))
        return
    for name, value in asdict(letter).items():
        click.echo(f"{name:12} {when(value) if name == 'at_ms' else value}")


@dead.command("show")
@click.argument("ident", metavar="ID")
@click.option("-json", "--json", "as_json", is_flag=True, help="Print JSON.")
@pass_cli
def show(ctx: CliContext, /, ident: str, as_json: bool) -> None:
    """Show one dead letter (by entry id or record id)."""
    _show(ctx.redrive.get(ident, user=ctx.user), as_json)


@dead.command("retry")
@click.argument("idents", metavar="[ID]...", nargs=-1)
@click.option("-all", "--all", "retry_all", is_flag=True, help="Retry every dead letter of a noti record.")
@pass_cli
def retry(ctx: CliContext, /, idents: tuple[str, ...], retry_all: bool) -> None:
    """Put records back to waiting with their attempts reset, and queue them."""
    if bool(idents) == retry_all:
        raise click.UsageError("give dead-letter or record ids, or --all")
    records = (
        ctx.redrive.retry_all(user=ctx.user)
        if retry_all
        else [ctx.redrive.retry(ident, user=ctx.user) for ident in idents]
    )
    for record in records:
        click.echo(f"retry {record.channel.value}({record.id}) > {record.target}")
    click.echo(f"{len(records)} queued again", err=True)


@dead.command("purge")
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@pass_cli
def purge(ctx: CliContext, /, yes: bool) -> None:
    """Remove every dead letter you see (yours; root members: every one)."""
    count = len(ctx.redrive.entries(user=ctx.user))
    if not yes:
        click.confirm(f"remove all {count} dead letters?", abort=True)
    click.echo(f"{ctx.redrive.purge(user=ctx.user)} dead letters removed")


@dead.command("unsuppress")
@click.argument("channel")
@click.argument("target")
@pass_cli
def unsuppress(ctx: CliContext, /, channel: str, target: str) -> None:
    """Let TARGET receive CHANNEL notifications again after it opted out (root members)."""
    lifted = ctx.redrive.unsuppress(channel, target, user=ctx.user)
    click.echo(f"{channel} {target}: {'opt-out lifted' if lifted else 'was not suppressed'}")
