"""``noti add | send | list | del | clean``: the seed's notification commands."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from contextlib import nullcontext
from datetime import datetime
from typing import Any, BinaryIO

import click

from noti.cli._options import CliContext, Output, json_options, limit_option, parse_duration, pass_cli
from noti.cli._output import records_json, rm_line, when
from noti.core.channel import BUILTIN, Channel, fields_by_name
from noti.core.delay import iso_time
from noti.core.record import parse_channel
from noti.core.record_json import to_json_dict
from noti.errors import InvalidInput
from noti.inputs import load_json, shown

__all__ = ["add", "clean", "delete", "get", "list_", "send"]

_BARE_NUMBER = re.compile(r"^\s*[0-9.]+\s*\Z")


def _field_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """One ``-NAME`` option per field of the built-in channels (``-text``, ``-tmpl``, ``-title``
    …); an installed channel's fields go in ``-F NAME=VALUE`` (the entry points are not
    scanned to start the CLI)."""
    uses = fields_by_name(Channel(name) for name in BUILTIN)
    for name in reversed(list(uses)):
        helps = dict.fromkeys(
            u.help + (" (read from stdin when omitted)" if u.stdin else "") for u in uses[name]
        )
        command = click.option(f"-{name}", f"--{name}", name, help="; ".join(helps) + ".")(command)
    return command


def _extra_fields(given: tuple[str, ...]) -> dict[str, str]:
    """``-F NAME=VALUE`` options as fields.

    Raises:
        InvalidInput: ``e.cmd.noti.add.badfield`` for one without ``=``.
    """
    out: dict[str, str] = {}
    for item in given:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise InvalidInput(f"-F takes NAME=VALUE, not {shown(item)}", code="e.cmd.noti.add.badfield")
        out[name.strip()] = value
    return out


def _read_stdin(code: str) -> str:
    """Standard input as text (one trailing newline dropped).

    Raises:
        InvalidInput: with ``code`` when it is not UTF-8 (nothing is stored).
    """
    if sys.stdin.isatty():  # a person at a terminal, not a pipe: say why nothing happens
        click.echo(
            "reading the message from standard input (end with Ctrl-D; or pass it as an option)", err=True
        )
    try:
        text = sys.stdin.read()
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"standard input is not UTF-8 text: {exc}", code=code) from None
    return text[:-1] if text.endswith("\n") else text


@click.command("add")
@click.argument("type_", metavar="[TYPE]", required=False)
@click.option(
    "-to", "--to", "target", help="The target: phone number, openid, e-mail address, URL, device token …"
)
@_field_options
@click.option(
    "-F", "--field", "extra", multiple=True, help="A channel's field as NAME=VALUE (any installed channel's)."
)
@click.option("-provider", "--provider", help="Provider name(s), comma-separated in failover order.")
@click.option("-lv", "--lv", "--level", "level", default="1", help="Priority level 1-1000 (capped by role).")
@click.option("-retry", "--retry-max", "retry_max", type=int, default=None, help="Attempt limit.")
@click.option("-retry-policy", "--retry-policy", help="linear[:S[:CAP]] or exponential[:S[:CAP]].")
@click.option("-delay", "--delay", help="Send after this long: seconds, or 30s, 5m, 2h, 1day.")
@click.option("-at", "--at", "at", help="Send at this time (ISO 8601; without a zone: local time).")
@click.option(
    "-id", "--identifier", "identifier", help="Debounce key: a new add with it replaces a delayed one."
)
@click.option(
    "-f", "--file", "file", type=click.File("rb"), help="Add every JSON line of FILE (- for stdin) in bulk."
)
@json_options
@pass_cli
def add(
    ctx: CliContext,
    /,
    type_: str | None,
    target: str | None,
    level: str,
    retry_max: int | None,
    retry_policy: str | None,
    delay: str | None,
    at: str | None,
    identifier: str | None,
    file: BinaryIO | None,
    extra: tuple[str, ...],
    out: Output,
    **fields: Any,
) -> None:
    """Add a notification of TYPE (sms, weixin, email, webhook, push, chat or an installed
    channel: noti channels lists them) and print its id.

    With -f FILE, add one notification per JSON line of FILE (keys as in the Python API:
    type, to, text, lv, delay, …; TYPE and -lv are defaults for lines without them).
    """
    if file is not None:
        _add_file(ctx, file, default_type=type_, level=level, quiet=out.quiet)
        return
    if type_ is None:
        raise click.UsageError(
            "TYPE is required (" + ", ".join(BUILTIN) + " or an installed channel), or -f FILE"
        )
    fields = {k: v for k, v in fields.items() if v is not None}
    for name, value in _extra_fields(extra).items():
        if name in fields:
            raise InvalidInput(f"-{name} is given twice (as -{name} and -F)", code="e.cmd.noti.add.badfield")
        fields[name] = value
    spec = parse_channel(type_).spec
    stdin_field = spec.stdin_field
    if stdin_field and fields.get(stdin_field) is None:
        fields[stdin_field] = _read_stdin(
            "e.cmd.noti.add.badcontent" if stdin_field in spec.json_fields else "e.cmd.noti.add.badtext"
        )
    record = ctx.api.add(
        type_,
        target or "",
        lv=level,
        user=ctx.user,
        retry_max=retry_max,
        retry_policy=retry_policy,
        delay=parse_duration(delay, code="e.cmd.noti.add.baddelay", what="-delay")
        if delay is not None
        else None,
        eta=parse_time(at) if at is not None else None,
        identifier=identifier,
        **fields,
    )
    if out.quiet:
        return
    if out.wants_json:
        out.json(to_json_dict(record))
    else:
        click.echo(record.id)


def parse_time(text: str) -> datetime:
    """An ISO 8601 time (``2026-11-22T10:00``, ``2026-11-22 10:00:00+08:00``).

    Raises:
        InvalidInput: ``e.cmd.noti.add.baddelay``.
    """
    return iso_time(text, what="-at")


def _add_file(ctx: CliContext, file: BinaryIO, *, default_type: str | None, level: str, quiet: bool) -> None:
    """``noti add -f FILE``: bulk-add JSON lines, with a progress bar on a terminal.

    Lines are split on ``\n`` (and ``\r\n``) only: U+2028 is a character JSON strings may
    hold. A line that is not UTF-8 or not JSON is refused with ``e.cmd.noti.add.badjson``.
    """
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    lines = file.read().splitlines()
    items: list[object] = []
    bad_lines: list[tuple[int, str]] = []
    line_of: list[int] = []
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            item = load_json(raw.decode(), what="the line", code="e.cmd.noti.add.badjson")
        except UnicodeDecodeError as exc:
            bad_lines.append((number, f"e.cmd.noti.add.badjson: not UTF-8: {exc}"))
            continue
        except InvalidInput as exc:
            bad_lines.append((number, f"{exc.code}: {exc.message}"))
            continue
        if isinstance(item, dict):
            if default_type and "type" not in item:
                item["type"] = default_type
            item.setdefault("lv", level)
        items.append(item)
        line_of.append(number)
    stored = 0
    refused = list(bad_lines)
    chunk = 2000
    # no Progress at all unless shown: rich < 14.3 writes a blank line even when disabled
    shown = not quiet and sys.stderr.isatty()
    columns = (TextColumn("adding"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with (
        Progress(*columns, console=Console(stderr=True), transient=True) if shown else nullcontext()
    ) as progress:
        task = progress.add_task("add", total=len(items)) if progress is not None else None
        for start in range(0, len(items), chunk):
            result = ctx.api_bulk(items[start : start + chunk])
            stored += result.stored
            refused += [(line_of[start + r.index], f"{r.code}: {r.message}") for r in result.refused]
            if progress is not None and task is not None:
                progress.advance(task, min(chunk, len(items) - start))
    for number, reason in sorted(refused):
        click.echo(f"line {number}: {reason}", err=True)
    if not quiet:
        click.echo(f"{stored} added, {len(refused)} refused")
    if refused:
        raise SystemExit(1)


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
    out: Output,
) -> None:
    """Send waiting notifications now, in this process, highest level first; then a summary
    line, ``N sent, M not sent``, on standard error."""
    results = ctx.api.send(record_id, user=ctx.user, creator=creator, limit=limit, timeout_s=timeout)
    collected = []
    sent = not_sent = 0
    for result in results:
        if result.mark == "OK":
            sent += 1
        else:
            not_sent += 1
        if out.wants_json:
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
        elif not out.quiet:
            click.echo(result.line())
    if collected and not out.quiet:
        out.json(collected)
    elif out.wants_json and not out.quiet:
        click.echo("[]")
    elif not out.quiet:  # on stderr: standard output stays the OK/KO lines scripts read
        click.echo(f"{sent} sent, {not_sent} not sent", err=True)


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
@click.option(
    "-delivery",
    "--delivery",
    "delivery",
    default=None,
    help="Only records in this delivery status: accepted, delivered, undelivered, unknown.",
)
@click.option(
    "-type", "--type", "type_", default=None, help="Only records of this type (sms, weixin, email, webhook)."
)
@limit_option
@json_options
@pass_cli
def list_(
    ctx: CliContext,
    /,
    creator: str | None,
    status: int | None,
    delivery: str | None,
    type_: str | None,
    limit: int | None,
    out: Output,
) -> None:
    """List notifications, newest first (a table, or JSON with -json)."""
    records = ctx.api.select(
        user=ctx.user, creator=creator, status=status, limit=limit, delivery=delivery, type=type_
    )
    out.records(records)


@click.command("get")
@click.argument("record_ids", metavar="ID...", nargs=-1, required=True)
@click.option(
    "-timeline", "--timeline", is_flag=True, help="Every step of its life instead: attempts, receipts…"
)
@json_options
@pass_cli
def get(ctx: CliContext, /, record_ids: tuple[str, ...], timeline: bool, out: Output) -> None:
    """Show notifications by id (yours; root members: anyone's): every field, or -json; with
    -timeline, what happened to each, step by step. A notice id (n…, from noti notify)
    shows the notice: each channel's state and record (with -timeline: each record's steps)."""
    if timeline:
        from noti.cli.history import records_of, show_timelines

        ids = records_of(ctx, record_ids, _notice_shaped)
        show_timelines([ctx.api.timeline(i, user=ctx.user) for i in ids], out)
        return
    if any(_notice_shaped(record_id) for record_id in record_ids):
        _get_with_notices(ctx, record_ids, out)
        return
    records = [ctx.api.get(record_id, user=ctx.user) for record_id in record_ids]
    if out.quiet:
        return
    if out.wants_json:
        out.json(records_json(records) if len(records) > 1 else to_json_dict(records[0]))
        return
    _show_records(records)


def _show_records(records: list[Any]) -> None:
    for n, record in enumerate(records):
        if n:
            click.echo()
        for name, value in to_json_dict(record).items():
            if value is not None:
                shown = when(value) + f" ({value})" if name in ("ct", "lm", "expi", "noti_dlv_at") else value
                click.echo(f"{name:26} {shown}")


def _notice_shaped(value: str) -> bool:
    """A notice id is ``n`` and a record id (26 letters and digits, the first a digit); only
    those load the recipients layer (reading records stays light: tests/test_fast_cli.py)."""
    return len(value) == 27 and value[0] == "n" and value[1].isdigit() and value[1:].isalnum()


def _get_with_notices(ctx: CliContext, ids: tuple[str, ...], out: Output) -> None:
    """``noti get`` of ids some of which are notices (``n…``): each shown in its kind."""
    from noti.api import get_notice
    from noti.cli.recipients import show_notice
    from noti.recipients.notice import Notice

    found = [
        get_notice(i, user=ctx.user) if _notice_shaped(i) else ctx.api.get(i, user=ctx.user) for i in ids
    ]
    if out.quiet:
        return
    if out.wants_json:
        shown = [f.to_dict() if isinstance(f, Notice) else to_json_dict(f) for f in found]
        out.json(shown if len(shown) > 1 else shown[0])
        return
    for n, item in enumerate(found):
        if n:
            click.echo()
        if isinstance(item, Notice):
            show_notice(item, out)
        else:
            _show_records([item])


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


def parse_keep(text: str) -> float:
    """Seconds from ``Nm`` / ``Nh`` / ``Nday`` (also ``Ns``, ``Nd``; ``0`` = keep none).

    Raises:
        InvalidInput: ``e.cmd.noti.clean.badkeep`` for anything else, a number without a unit
        included (the original command removed every record for unknown values; noti
        refuses, so a typo cannot wipe the store).
    """
    if text.strip() == "now":
        return 0.0
    if text.strip() != "0" and _BARE_NUMBER.match(text):
        # a number without a unit is most likely a typo for days or hours, and too small a
        # window removes everything done: refused, as any other value is
        raise InvalidInput(
            f"-keep {text!r} has no unit: use Ns, Nm, Nh or Nday (e.g. 30m, 24h, 3day; 0: keep nothing)",
            code="e.cmd.noti.clean.badkeep",
        )
    return parse_duration(text, code="e.cmd.noti.clean.badkeep", what="-keep")


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


@click.command("revoke")
@click.argument("record_ids", metavar="[ID...]", nargs=-1)
@click.option(
    "-all", "--all", "every", is_flag=True, help="Every waiting notification (with the filters below)."
)
@click.option("-u", "--user", "creator", help="With -all: only those USER created (others: root members).")
@click.option(
    "-type", "--type", "channel", metavar="TYPE", help="With -all: only this channel (sms, email, …)."
)
@click.option("-below-lv", "--below-lv", "below_level", type=int, help="With -all: only levels below N.")
@click.option("-Q", "--quiet", is_flag=True, help="Print nothing.")
@pass_cli
def revoke(
    ctx: CliContext,
    /,
    record_ids: tuple[str, ...],
    every: bool,
    creator: str | None,
    channel: str | None,
    below_level: int | None,
    quiet: bool,
) -> None:
    """Revoke waiting notifications, queued or delayed, so they are never sent: by id (as
    `celery control revoke ID` does), or a backlog with -all. Each becomes invalid (-1),
    marked revoked; the messages already queued for them are dropped by the workers."""
    if not every and (creator or channel or below_level is not None):
        raise click.UsageError("-u, -type and -below-lv go with -all")
    done = ctx.api.revoke(
        list(record_ids),
        user=ctx.user,
        creator=creator,
        channel=channel,
        below_level=below_level,
        every=every,
    )
    if not quiet:
        for record_id in done.revoked:
            click.echo(f"revoked {record_id}")
        for record_id in done.held:
            click.echo(f"held {record_id}")
        held = f", {len(done.held)} held by a sender now (revoked at its next claim)" if done.held else ""
        click.echo(f"{len(done.revoked)} revoked{held}", err=True)
