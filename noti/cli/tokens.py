"""``noti token add | list | revoke``: the HTTP API's tokens (root administrators only)."""

from __future__ import annotations

import click

from noti.access.tokens import TokenInfo
from noti.cli._options import CliContext, Output, json_options, pass_cli
from noti.cli._output import print_table, when
from noti.core.record import now_ms
from noti.sending.runtime import get_runtime

__all__ = ["token"]


@click.group("token")
def token() -> None:
    """API tokens of the HTTP API (noti serve): each acts as one user."""


@token.command("add")
@click.option("-user", "--user", "user", required=True, help="The user the token acts as.")
@click.option(
    "-cap", "--cap", "level_cap", type=int, default=None, help="Highest level its notifications get (1-1000)."
)
@click.option(
    "-rate", "--rate", "rate_per_s", type=float, default=None, help="Requests a second it may make."
)
@click.option("-note", "--note", default="", help="What it is for (shown by noti token list).")
@click.option(
    "-expires",
    "--expires",
    default=None,
    metavar="WHEN",
    help="When it stops working: a lifetime (30d, 12h, 90m, 3600s) or an ISO 8601 date or time "
    "(2027-01-31, 2027-01-31T12:00:00Z; UTC when no zone is given). Default: never.",
)
@click.option(
    "-providers",
    "--providers",
    default=None,
    metavar="NAMES",
    help="The only providers its notifications may name, comma-separated (hook,aliyun).",
)
@json_options
@pass_cli
def add(
    ctx: CliContext,
    /,
    user: str,
    level_cap: int | None,
    rate_per_s: float | None,
    note: str,
    expires: str | None,
    providers: str | None,
    out: Output,
) -> None:
    """Make a token for USER and print it: it is shown this once (only its hash is kept)."""
    plain, info = get_runtime().tokens.add(
        user,
        acting=ctx.user,
        level_cap=level_cap,
        rate_per_s=rate_per_s,
        note=note,
        expires=expires,
        providers=providers,
    )
    if out.quiet:
        return
    if out.wants_json:
        out.json({"token": plain, **info.to_json()})
        return
    click.echo(plain)
    click.echo(
        f"id {info.id}, acts as {info.user}{_limits(info)}: keep it now, it is not shown again", err=True
    )


@token.command("list")
@json_options
@pass_cli
def list_(ctx: CliContext, /, out: Output) -> None:
    """List every token (its id, never the token), revoked and expired ones too."""
    found = get_runtime().tokens.entries(acting=ctx.user)
    now = now_ms()
    if out.quiet:
        return
    if out.wants_json:
        out.json([info.to_json() for info in found])
        return
    rows = (
        (
            info.id,
            info.user,
            "-" if info.level_cap is None else str(info.level_cap),
            "-" if info.rate_per_s is None else f"{info.rate_per_s:g}/s",
            "-" if info.providers is None else ",".join(sorted(info.providers)),
            when(info.created_ms),
            _expires(info, now),
            when(info.used_ms) if info.used_ms else "-",
            when(info.revoked_ms) if info.revoked_ms else "-",
            info.note,
        )
        for info in found
    )
    columns = (
        "ID",
        "USER",
        "CAP",
        "RATE",
        "PROVIDERS",
        "CREATED (UTC)",
        "EXPIRES (UTC)",
        "USED (UTC)",
        "REVOKED (UTC)",
        "NOTE",
    )
    print_table(columns, rows, "token")


@token.command("revoke")
@click.argument("ident", metavar="ID")
@json_options
@pass_cli
def revoke(ctx: CliContext, /, ident: str, out: Output) -> None:
    """Revoke the token ID (at least 6 digits of its id, or the token): it authenticates nothing from now."""
    info = get_runtime().tokens.revoke(ident, acting=ctx.user)
    if out.quiet:
        return
    if out.wants_json:
        out.json(info.to_json())
        return
    click.echo(f"revoked {info.id} ({info.user}) at {when(info.revoked_ms or 0)}")


def _limits(info: TokenInfo) -> str:
    parts = []
    if info.level_cap is not None:
        parts.append(f"levels up to {info.level_cap}")
    if info.rate_per_s is not None:
        parts.append(f"{info.rate_per_s:g} requests/s")
    if info.providers is not None:
        parts.append(f"providers {','.join(sorted(info.providers))} only")
    if info.expires_ms is not None:
        parts.append(f"expires {when(info.expires_ms)} UTC")
    return f" ({', '.join(parts)})" if parts else ""


def _expires(info: TokenInfo, now: int) -> str:
    """Its expiry, marked once it passed (by this machine's clock; Redis's decides)."""
    if info.expires_ms is None:
        return "-"
    return f"{when(info.expires_ms)} (expired)" if info.expired(now) else when(info.expires_ms)
