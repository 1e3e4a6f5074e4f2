"""``noti recipient put | get | update | merge | del | list | import | prefs | history``:
recipients' profiles and preferences (:mod:`noti.recipients`). ``noti category``,
``noti template`` and ``noti notify`` are :mod:`noti.cli.templates`.

A profile is given as JSON (an argument, or ``-`` for standard input) and/or by options
(``-sms``, ``-email``, ``-push``, ``-weixin``, ``-address CHANNEL=ADDRESS``, ``-locale``,
``-timezone``, ``-quiet-hours``, ``-attr NAME=VALUE``), the options over the JSON. Recipients
are the acting user's own; root members name another user's with ``-owner``.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import click

from noti.cli._options import CliContext, Output, json_options, pass_cli
from noti.cli._output import print_table, when
from noti.errors import InvalidInput
from noti.inputs import load_json, shown

if TYPE_CHECKING:
    from noti.recipients.api import Recipients
    from noti.recipients.notice import Notice
    from noti.recipients.profile import Recipient

__all__ = ["api_of", "json_argument", "owner_option", "recipient", "show_notice"]

#: Channels with an option of their own (any channel: ``-address CHANNEL=ADDRESS``).
ADDRESS_OPTIONS = ("sms", "email", "push", "weixin")

owner_option = click.option(
    "-owner", "--owner", metavar="USER", help="Another user's (root members only; default: yours)."
)


def api_of(ctx: CliContext) -> Recipients:
    """The recipients API over the command's notifier."""
    from noti.recipients.api import Recipients

    return Recipients(ctx.api)


def json_argument(text: str, *, what: str, code: str) -> Any:
    """A JSON argument, or standard input for ``-``.

    Raises:
        InvalidInput: with ``code``: not JSON (or standard input not UTF-8).
    """
    if text == "-":
        try:
            text = sys.stdin.read()
        except UnicodeDecodeError as exc:
            raise InvalidInput(f"standard input is not UTF-8 text: {exc}", code=code) from None
    return load_json(text, what=what, code=code)


def _pairs(given: tuple[str, ...], option: str, code: str) -> list[tuple[str, str]]:
    out = []
    for item in given:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise InvalidInput(f"{option} takes NAME=VALUE, not {shown(item)}", code=code)
        out.append((name.strip(), value))
    return out


def _profile_options(command: Any) -> Any:
    options = [
        click.option(
            f"-{c}",
            f"--{c}",
            f"addr_{c}",
            multiple=True,
            metavar="ADDRESS",
            help=f"An address of the {c} channel (again for more; the first is the primary).",
        )
        for c in ADDRESS_OPTIONS
    ]
    decorators = [
        click.argument("document", metavar="[JSON|-]", required=False),
        *options,
        click.option(
            "-address",
            "--address",
            "addresses",
            multiple=True,
            metavar="CHANNEL=ADDRESS",
            help="An address of any channel (the first of a channel is its primary).",
        ),
        click.option("-locale", "--locale", help="A BCP 47 locale: en, zh-Hant-TW …"),
        click.option("-timezone", "--timezone", help="An IANA timezone: Asia/Shanghai …"),
        click.option("-quiet-hours", "--quiet-hours", "quiet_hours", help="HH:MM-HH:MM, off or default."),
        click.option("-attr", "--attr", "attrs", multiple=True, metavar="NAME=VALUE", help="An attribute."),
        owner_option,
    ]
    for decorator in reversed(decorators):
        command = decorator(command)
    return command


def _profile(document: str | None, options: dict[str, Any]) -> dict[str, Any]:
    """A profile (or a merge patch) from the JSON given and the options over it.

    Raises:
        InvalidInput: ``e.cmd.noti.rcpt.baddoc`` (JSON that is not an object),
        ``e.cmd.noti.rcpt.badattrs`` / ``.badaddr`` (an option without ``=``).
    """
    doc: dict[str, Any] = {}
    if document is not None:
        given = json_argument(document, what="the profile", code="e.cmd.noti.rcpt.baddoc")
        if not isinstance(given, dict):
            raise InvalidInput(
                f"a profile is a JSON object, got {shown(given)}", code="e.cmd.noti.rcpt.baddoc"
            )
        doc = given
    addresses: dict[str, list[str]] = {}
    for channel in ADDRESS_OPTIONS:
        if options[f"addr_{channel}"]:
            addresses[channel] = list(options[f"addr_{channel}"])
    for channel, address in _pairs(options["addresses"], "-address", "e.cmd.noti.rcpt.badaddr"):
        addresses.setdefault(channel, []).append(address)
    if addresses:
        had = doc.get("addresses")
        doc["addresses"] = {**(had if isinstance(had, dict) else {}), **addresses}
    for key in ("locale", "timezone", "quiet_hours"):
        if options[key] is not None:
            doc[key] = options[key]
    attrs = dict(_pairs(options["attrs"], "-attr", "e.cmd.noti.rcpt.badattrs"))
    if attrs:
        had = doc.get("attributes")
        doc["attributes"] = {**(had if isinstance(had, dict) else {}), **attrs}
    return doc


def show_recipient(found: Recipient, out: Output) -> None:
    """A profile, one field a line (or JSON)."""
    if out.quiet:
        return
    if out.wants_json:
        out.json(found.to_dict())
        return
    lines = [("id", found.id)]
    for channel, addresses in found.addresses.items():
        lines.append((channel, ", ".join(addresses)))
    lines += [
        ("locale", found.locale or "-"),
        ("timezone", found.timezone or "-"),
        ("quiet_hours", found.quiet_hours),
        *((f"attr.{k}", v if isinstance(v, str) else _compact(v)) for k, v in found.attributes.items()),
        ("created", f"{when(found.created_ms)} ({found.created_ms})"),
        ("updated", f"{when(found.updated_ms)} ({found.updated_ms})"),
    ]
    for name, value in lines:
        click.echo(f"{name:14} {value}")


def _compact(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def show_notice(notice: Notice, out: Output) -> None:
    """A notice and what became of it per channel (``noti get n…``, ``noti notify -json``)."""
    if out.quiet:
        return
    if out.wants_json:
        out.json(notice.to_dict())
        return
    held = f"{when(notice.held_until_ms)} ({notice.held_until_ms})" if notice.held_until_ms else "-"
    for name, value in (
        ("id", notice.id),
        ("owner", notice.owner),
        ("recipient", notice.recipient),
        ("template", f"{notice.template} v{notice.version}"),
        ("category", notice.category),
        ("mode", notice.mode),
        ("created", f"{when(notice.created_ms)} ({notice.created_ms})"),
        ("held_until", held),
    ):
        click.echo(f"{name:14} {value}")
    for entry in notice.entries:
        why = f" ({entry.reason})" if entry.reason else ""
        click.echo(
            f"{'channel':14} {entry.channel:8} {entry.state}{why} {entry.record or '-'} {entry.locale or '-'}"
        )


@click.group("recipient")
def recipient() -> None:
    """Recipients: a person's addresses per channel, locale, timezone, quiet hours, attributes
    and preferences (yours; root members: -owner USER)."""


@recipient.command("put")
@click.argument("rid", metavar="ID")
@_profile_options
@json_options
@pass_cli
def put(
    ctx: CliContext, /, rid: str, document: str | None, owner: str | None, out: Output, **options: Any
) -> None:
    """Create or replace recipient ID (its preferences stay) from JSON and/or options."""
    made, created = api_of(ctx).put(rid, _profile(document, options), user=ctx.user, owner=owner)
    if out.wants_json or out.quiet:
        show_recipient(made, out)
    else:
        click.echo(f"{made.id} {'created' if created else 'replaced'}")


@recipient.command("update")
@click.argument("rid", metavar="ID")
@_profile_options
@json_options
@pass_cli
def update(
    ctx: CliContext, /, rid: str, document: str | None, owner: str | None, out: Output, **options: Any
) -> None:
    """Change recipient ID: JSON is a merge patch (RFC 7396: null removes a key); the options
    set what they name (-sms replaces the SMS addresses)."""
    patch = _profile(document, options)
    if not patch:
        raise InvalidInput("nothing to change: give a JSON patch or options", code="e.cmd.noti.rcpt.baddoc")
    show_recipient(api_of(ctx).update(rid, patch, user=ctx.user, owner=owner), out)


@recipient.command("get")
@click.argument("rid", metavar="ID")
@owner_option
@json_options
@pass_cli
def get(ctx: CliContext, /, rid: str, owner: str | None, out: Output) -> None:
    """Show recipient ID's profile."""
    show_recipient(api_of(ctx).get(rid, user=ctx.user, owner=owner), out)


@recipient.command("merge")
@click.argument("into", metavar="ID")
@click.argument("source", metavar="FROM")
@owner_option
@json_options
@pass_cli
def merge(ctx: CliContext, /, into: str, source: str, owner: str | None, out: Output) -> None:
    """Merge recipient FROM into ID (one person under two ids): addresses joined, ID's settings
    win, FROM's history and preferences move over; FROM is removed."""
    show_recipient(api_of(ctx).merge(into, source, user=ctx.user, owner=owner), out)


@recipient.command("del")
@click.argument("rid", metavar="ID")
@owner_option
@json_options
@pass_cli
def delete(ctx: CliContext, /, rid: str, owner: str | None, out: Output) -> None:
    """Erase recipient ID (the right to be forgotten): the profile and preferences go, waiting
    records are revoked, kept records and their dead letters have their address masked."""
    done = api_of(ctx).delete(rid, user=ctx.user, owner=owner)
    if out.quiet:
        return
    if out.wants_json:
        out.json(
            {
                "recipient": done.recipient,
                "revoked": done.revoked,
                "masked": done.masked,
                "notices": done.notices,
                "dead_letters": done.dead_letters,
            }
        )
        return
    click.echo(
        f"erased {done.recipient}: {done.revoked} waiting records revoked, {done.masked} records masked, "
        f"{done.notices} notices, {done.dead_letters} dead letters masked"
    )


@recipient.command("list")
@click.option(
    "-limit", "--limit", type=int, default=100, show_default=True, help="At most N recipients (1-1000)."
)
@click.option("-after", "--after", metavar="ID", help="The page after this id.")
@owner_option
@json_options
@pass_cli
def list_(ctx: CliContext, /, limit: int, after: str | None, owner: str | None, out: Output) -> None:
    """List recipients, oldest first (a page: -limit, then -after the last id)."""
    found = api_of(ctx).list_recipients(user=ctx.user, owner=owner, limit=limit, after=after)
    if out.quiet:
        return
    if out.wants_json:
        out.json([r.to_dict() for r in found])
        return
    rows = (
        (
            r.id,
            ",".join(r.addresses) or "-",
            r.locale or "-",
            r.timezone or "-",
            r.quiet_hours,
            when(r.updated_ms),
        )
        for r in found
    )
    print_table(("ID", "CHANNELS", "LOCALE", "TIMEZONE", "QUIET HOURS", "UPDATED (UTC)"), rows, "recipient")


#: File suffixes an import reads, and as what.
IMPORT_SUFFIXES = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl"}


@recipient.command("import")
@click.argument("path", metavar="FILE")
@click.option(
    "-format",
    "--format",
    "kind",
    type=click.Choice(["csv", "jsonl"]),
    help="The file's format (default: its suffix).",
)
@owner_option
@json_options
@pass_cli
def import_(ctx: CliContext, /, path: str, kind: str | None, owner: str | None, out: Output) -> None:
    """Create or replace many recipients from a CSV file (a header row: id, locale, timezone,
    quiet_hours, a column per channel with addresses separated by ;, attributes, attr.NAME) or
    JSON lines (- for standard input, with -format). Bad rows are refused one by one (listed on
    standard error, exit 1); the others are stored."""
    from noti.recipients.importing import rows_of_file

    kind = kind or IMPORT_SUFFIXES.get(Path(path).suffix.lower())
    if kind is None:
        raise InvalidInput(
            f"{path}: an import file is .csv or .jsonl (or give -format)", code="e.cmd.noti.rcpt.badformat"
        )
    try:
        data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
        text = data.decode("utf-8-sig")
    except OSError as exc:
        raise InvalidInput(
            f"{path}: cannot be read: {exc.strerror or exc}", code="e.cmd.noti.rcpt.badformat"
        ) from None
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{path} is not UTF-8 text: {exc}", code="e.cmd.noti.rcpt.badformat") from None
    rows = rows_of_file(io.StringIO(text, newline=""), kind=kind)
    result = api_of(ctx).import_rows(rows, user=ctx.user, owner=owner)
    if out.wants_json and not out.quiet:
        out.json(result.to_dict())
    for number, code, message in result.refused:
        click.echo(f"row {number}: {code}: {message}", err=True)
    if not out.quiet and not out.wants_json:
        click.echo(f"{result.created} created, {result.updated} updated, {len(result.refused)} refused")
    if result.refused:
        raise SystemExit(1)


_PREF_VALUES = {
    "on": True,
    "true": True,
    "in": True,
    "off": False,
    "false": False,
    "out": False,
    "default": None,
}


def _preferences(settings: tuple[str, ...]) -> dict[str, dict[str, bool | None]]:
    """``CATEGORY.CHANNEL=on|off|default`` settings (``*`` for every one), or one JSON object.

    Raises:
        InvalidInput: ``e.cmd.noti.pref.bad``.
    """
    if len(settings) == 1 and (settings[0] == "-" or settings[0].lstrip().startswith("{")):
        given = json_argument(settings[0].strip(), what="the preferences", code="e.cmd.noti.pref.bad")
        if not isinstance(given, dict):
            raise InvalidInput(
                f"preferences are a JSON object, got {shown(given)}", code="e.cmd.noti.pref.bad"
            )
        return cast(dict[str, dict[str, bool | None]], given)
    out: dict[str, dict[str, bool | None]] = {}
    for name, value in _pairs(settings, "a preference", "e.cmd.noti.pref.bad"):
        category, dot, channel = name.rpartition(".")
        if not dot or not category or not channel or value.lower() not in _PREF_VALUES:
            raise InvalidInput(
                "a preference is CATEGORY.CHANNEL=on|off|default (* for every one), "
                f"not {shown(name + '=' + value)}",
                code="e.cmd.noti.pref.bad",
            )
        out.setdefault(category, {})[channel] = _PREF_VALUES[value.lower()]
    return out


@recipient.command("prefs")
@click.argument("rid", metavar="ID")
@click.argument("settings", metavar="[CATEGORY.CHANNEL=on|off|default ...|JSON]", nargs=-1)
@owner_option
@json_options
@pass_cli
def prefs(ctx: CliContext, /, rid: str, settings: tuple[str, ...], owner: str | None, out: Output) -> None:
    """Show recipient ID's preferences, or set some: marketing.email=off, marketing.*=off,
    *.sms=off, orders.push=default (the category's default again), or a JSON object
    {"marketing": {"*": false}}."""
    api = api_of(ctx)
    if settings:
        found = api.set_preferences(rid, _preferences(settings), user=ctx.user, owner=owner)
    else:
        found = api.preferences(rid, user=ctx.user, owner=owner)
    if out.quiet:
        return
    if out.wants_json:
        out.json(found)
        return
    rows = [
        (c, ch, "in" if v else "out") for c, chans in sorted(found.items()) for ch, v in sorted(chans.items())
    ]
    print_table(("CATEGORY", "CHANNEL", "PREFERENCE"), rows, "preference")


@recipient.command("history")
@click.argument("rid", metavar="ID")
@click.option(
    "-limit", "--limit", type=click.IntRange(1, 10_000), default=100, show_default=True, help="At most N."
)
@owner_option
@json_options
@pass_cli
def history(ctx: CliContext, /, rid: str, limit: int, owner: str | None, out: Output) -> None:
    """Notices (n…) and records made for recipient ID, newest first (noti get shows each)."""
    found = api_of(ctx).history(rid, user=ctx.user, owner=owner, limit=limit)
    if out.quiet:
        return
    if out.wants_json:
        out.json(found)
        return
    for item in found:
        click.echo(item)


@recipient.command("throttles")
@click.argument("rid", metavar="ID")
@owner_option
@json_options
@pass_cli
def throttles(ctx: CliContext, /, rid: str, owner: str | None, out: Output) -> None:
    """Recipient ID's throttles as they stand: per throttled category and channel they have an
    address on, the sends the period holds, the limit, and when the next send fits."""
    found = api_of(ctx).throttles(rid, user=ctx.user, owner=owner)
    if out.quiet:
        return
    if out.wants_json:
        out.json([t.to_dict() for t in found])
        return
    rows = (
        (t.category, t.channel, f"{t.sent}/{t.limit}", f"{t.period_ms / 1000:g}s", t.over, when(t.free_at_ms))
        for t in found
    )
    print_table(("CATEGORY", "CHANNEL", "SENT", "PER", "OVER", "NEXT FITS (UTC)"), rows, "throttle")
