"""``noti add | send | list | del | clean``: the seed's notification commands."""

from __future__ import annotations

import re
import sys
from typing import Any

import click

from noti.cli._options import CliContext, json_options, json_style, limit_option, pass_cli
from noti.cli._output import dumps, print_records_table, records_json, rm_line
from noti.errors import InvalidInput
from noti.record import to_json_dict

__all__ = ["add", "clean", "delete", "list_", "send"]

#: The field that ``noti add TYPE`` reads from standard input when its option is omitted.
STDIN_FIELD = {"sms": "text", "weixin": "content", "email": "text", "webhook": "content"}


def _read_stdin() -> str:
    text = sys.stdin.read()
    return text[:-1] if text.endswith("\n") else text


@click.command("add")
@click.argument("type_", metavar="TYPE")
@click.option("-to", "--to", "target", help="Phone number, openid, e-mail address or URL.")
@click.option("-text", "--text", help="SMS or e-mail text (read from stdin when omitted).")
@click.option("-tmpl", "--tmpl", help="WeChat template id.")
@click.option("-pnb", "--pnb", help="WeChat official account.")
@click.option("-url", "--url", help="WeChat template link.")
@click.option(
    "-content",
    "--content",
    help="JSON object: WeChat template data or webhook body (read from stdin when omitted).",
)
@click.option("-subject", "--subject", help="E-mail subject.")
@click.option("-html", "--html", help="E-mail HTML body.")
@click.option("-provider", "--provider", help="Provider name(s), comma-separated in failover order.")
@click.option("-lv", "--lv", "--level", "level", default="1", help="Priority level 1-1000 (capped by role).")
@click.option("-retry", "--retry-max", "retry_max", type=int, default=None, help="Attempt limit.")
@json_options
@pass_cli
def add(
    ctx: CliContext,
    /,
    type_: str,
    target: str | None,
    level: str,
    retry_max: int | None,
    as_json: bool,
    compact: bool,
    unquoted: bool,
    no_null: bool,
    quiet: bool,
    **fields: Any,
) -> None:
    """Add a notification of TYPE (sms, weixin, email, webhook) and print its id."""
    stdin_field = STDIN_FIELD.get(type_)
    if stdin_field and fields.get(stdin_field) is None:
        fields[stdin_field] = _read_stdin()
    provider = fields.pop("provider")
    record = ctx.api.add(
        type_,
        target or "",
        lv=level,
        user=ctx.user,
        provider=provider,
        retry_max=retry_max,
        **{k: v for k, v in fields.items() if v is not None},
    )
    if quiet:
        return
    if as_json or compact or unquoted or no_null:
        click.echo(dumps(to_json_dict(record), json_style(compact, unquoted, no_null)))
    else:
        click.echo(record.id)


@click.command("send")
@click.argument("record_id", metavar="[ID]", required=False)
@click.option("-u", "--user", "creator", help="Only records created by USER (root members).")
@limit_option
@click.option(
    "-timeout",
    "--timeout",
    type=float,
    default=10.0,
    show_default=True,
    help="Seconds each record is leased to this process (at most 600).",
)
@json_options
@pass_cli
def send(
    ctx: CliContext,
    /,
    record_id: str | None,
    creator: str | None,
    limit: int | None,
    timeout: float,
    as_json: bool,
    compact: bool,
    unquoted: bool,
    no_null: bool,
    quiet: bool,
) -> None:
    """Send waiting notifications now, in this process, highest level first."""
    results = ctx.api.send(record_id, user=ctx.user, creator=creator, limit=limit, timeout_s=timeout)
    collected = []
    for result in results:
        if as_json or compact or unquoted or no_null:
            collected.append(
                {
                    "id": result.record_id,
                    "ok": result.mark == "OK",
                    "mark": result.mark,
                    "noti_type": result.channel.value if result.channel else None,
                    "noti_target": result.target or None,
                    "noti_st": int(result.status) if result.status is not None else None,
                    "noti_errmsg": result.errmsg or None,
                }
            )
        elif not quiet:
            click.echo(result.line())
    if collected and not quiet:
        click.echo(dumps(collected, json_style(compact, unquoted, no_null)))
    elif (as_json or compact or unquoted or no_null) and not quiet:
        click.echo("[]")


@click.command("list")
@click.option("-u", "--user", "creator", help="Only records created by USER (others: root members).")
@click.option(
    "-st",
    "--st",
    "--status",
    "status",
    type=int,
    default=None,
    help="Only records in this status: -1 invalid, 0 failed, 1 waiting, 10 done.",
)
@limit_option
@json_options
@pass_cli
def list_(
    ctx: CliContext,
    /,
    creator: str | None,
    status: int | None,
    limit: int | None,
    as_json: bool,
    compact: bool,
    unquoted: bool,
    no_null: bool,
    quiet: bool,
) -> None:
    """List notifications, newest first (a table, or JSON with -json)."""
    records = ctx.api.select(user=ctx.user, creator=creator, status=status, limit=limit)
    if quiet:
        return
    if as_json or compact or unquoted or no_null:
        click.echo(dumps(records_json(records), json_style(compact, unquoted, no_null)))
    else:
        print_records_table(records)


@click.command("del")
@click.argument("record_ids", metavar="ID...", nargs=-1, required=True)
@click.option("-Q", "--quiet", is_flag=True, help="Print nothing.")
@pass_cli
def delete(ctx: CliContext, /, record_ids: tuple[str, ...], quiet: bool) -> None:
    """Delete notifications (your own; root members: anyone's)."""
    for record_id in record_ids:
        removed = ctx.api.delete(record_id, user=ctx.user)
        if not quiet:
            click.echo(rm_line(removed))


_KEEP = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(s|m|h|d|day|days)\s*$", re.IGNORECASE)
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "day": 86400, "days": 86400}


def parse_keep(text: str) -> float:
    """Seconds from the seed's ``Nm`` / ``Nh`` / ``Nday`` (also ``Ns``, ``Nd``; ``0`` = keep none).

    Raises:
        InvalidInput: ``e.cmd.noti.clean.badkeep`` for anything else (the seed removed every
        record for unknown values; noti refuses, so a typo cannot wipe the store).
    """
    if text.strip() in ("0", "now"):
        return 0.0
    match = _KEEP.match(text)
    if not match:
        raise InvalidInput(
            f"-keep {text!r} is not a duration: use Nm, Nh or Nday (e.g. 30m, 24h, 3day), or 0",
            code="e.cmd.noti.clean.badkeep",
        )
    return float(match.group(1)) * _UNIT_S[match.group(2).lower()]


@click.command("clean")
@limit_option
@click.option(
    "-keep", "--keep", default="3day", show_default=True, help="Keep records done within this window."
)
@click.option("-Q", "--quiet", is_flag=True, help="Print nothing.")
@pass_cli
def clean(ctx: CliContext, /, limit: int | None, keep: str, quiet: bool) -> None:
    """Remove done notifications older than the keep window (root members only)."""
    removed = ctx.api.clean(user=ctx.user, keep_s=parse_keep(keep), limit=limit)
    if not quiet:
        for record in removed:
            click.echo(rm_line(record))
        click.echo(f"{len(removed)} removed", err=True)
