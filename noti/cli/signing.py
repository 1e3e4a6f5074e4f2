"""``noti signing-key add | list | del``: the secrets that sign a user's webhooks and status
callbacks to URLs the operator did not configure (:mod:`noti.access.signing`)."""

from __future__ import annotations

import click

from noti.cli._options import CliContext, Output, json_options, pass_cli
from noti.cli._output import print_table, when
from noti.sending.runtime import get_runtime

__all__ = ["signing_key"]

_USER = click.option(
    "-user",
    "--user",
    "owner",
    default=None,
    help="Whose keys (default: the acting user's; another user's: root administrators only).",
)


@click.group("signing-key")
def signing_key() -> None:
    """Webhook signing secrets: each user's webhooks to URLs of their choice are signed with theirs."""


@signing_key.command("add")
@_USER
@json_options
@pass_cli
def add(ctx: CliContext, /, owner: str | None, out: Output) -> None:
    """Make a signing secret and print it: it is shown this once. Every webhook is signed with
    each of the user's secrets (at most 3), newest first: add a new one, give it to the
    receivers, then delete the old one."""
    secret, key = get_runtime().signing_keys.add(owner, acting=ctx.user)
    if out.quiet:
        return
    if out.wants_json:
        out.json({"secret": secret, **key.to_json()})
        return
    click.echo(secret)
    click.echo(f"id {key.id}, signs for {key.user}: keep it now, it is not shown again", err=True)


@signing_key.command("list")
@_USER
@json_options
@pass_cli
def list_(ctx: CliContext, /, owner: str | None, out: Output) -> None:
    """List a user's signing secrets (their ids, never the secrets), newest first."""
    found = get_runtime().signing_keys.entries(owner, acting=ctx.user)
    if out.quiet:
        return
    if out.wants_json:
        out.json([key.to_json() for key in found])
        return
    print_table(("ID", "USER", "CREATED (UTC)"), ((k.id, k.user, when(k.created_ms)) for k in found), "key")


@signing_key.command("del")
@click.argument("key_id", metavar="ID")
@_USER
@json_options
@pass_cli
def delete(ctx: CliContext, /, key_id: str, owner: str | None, out: Output) -> None:
    """Delete the signing secret ID: it signs nothing from now on (workers: within 2 s)."""
    key = get_runtime().signing_keys.delete(key_id, owner, acting=ctx.user)
    if out.quiet:
        return
    if out.wants_json:
        out.json(key.to_json())
        return
    click.echo(f"deleted {key.id} ({key.user})")
