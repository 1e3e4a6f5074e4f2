"""``noti category put | list | del``, ``noti template put | get | list | del``, ``noti notify``
and ``noti digest list``: message categories, templates, notifying a recipient from a template,
and the open digest windows (:mod:`noti.recipients`). ``noti get n…`` shows a notice
(:mod:`noti.cli.notify`)."""

from __future__ import annotations

from typing import Any

import click

from noti.cli._options import CliContext, Output, json_options, parse_duration, pass_cli
from noti.cli._output import print_table, when
from noti.cli.recipients import api_of, json_argument, owner_option, show_notice
from noti.core.delay import iso_time
from noti.errors import InvalidInput
from noti.inputs import shown

__all__ = ["category", "digest", "notify", "template"]

_ON_OFF = {"on": True, "true": True, "off": False, "false": False}


@click.group("category")
def category() -> None:
    """Message categories (orders, security, marketing …): the channels each goes to by
    default, whether recipients may opt out, whether it is critical. Root members write them."""


@category.command("put")
@click.argument("name")
@click.argument("document", metavar="[JSON|-]", required=False)
@click.option(
    "-channel", "--channel", "channels", multiple=True, metavar="CHANNEL=on|off", help="On or off by default."
)
@click.option(
    "-opt-out/-no-opt-out",
    "--opt-out/--no-opt-out",
    "opt_out",
    default=None,
    help="Whether recipients may opt out.",
)
@click.option("-critical", "--critical", is_flag=True, default=None, help="Never suppressed (no opt-out).")
@click.option("-description", "--description", help="What it is for.")
@json_options
@pass_cli
def put_category(
    ctx: CliContext,
    /,
    name: str,
    document: str | None,
    channels: tuple[str, ...],
    opt_out: bool | None,
    critical: bool | None,
    description: str | None,
    out: Output,
) -> None:
    """Declare (or redeclare) category NAME from JSON and/or options (root members only)."""
    doc: Any = {}
    if document is not None:
        doc = json_argument(document, what="the category", code="e.cmd.noti.cat.bad")
        if not isinstance(doc, dict):
            raise InvalidInput(f"a category is a JSON object, got {shown(doc)}", code="e.cmd.noti.cat.bad")
    for item in channels:
        channel, sep, value = item.partition("=")
        if not sep or value.lower() not in _ON_OFF:
            raise InvalidInput(f"-channel takes CHANNEL=on|off, not {shown(item)}", code="e.cmd.noti.cat.bad")
        given = doc.get("channels")
        doc["channels"] = {
            **(given if isinstance(given, dict) else {}),
            channel.strip(): _ON_OFF[value.lower()],
        }
    if critical:
        doc["critical"] = True
        doc.setdefault("opt_out", False)
    if opt_out is not None:
        doc["opt_out"] = opt_out
    if description is not None:
        doc["description"] = description
    made = api_of(ctx).put_category(name, doc, user=ctx.user)
    if out.quiet:
        return
    if out.wants_json:
        out.json(made.to_dict())
    else:
        click.echo(f"category {made.name} declared")


@category.command("list")
@json_options
@pass_cli
def list_categories(ctx: CliContext, /, out: Output) -> None:
    """List the categories (general, the default, always among them)."""
    found = api_of(ctx).categories()
    if out.quiet:
        return
    if out.wants_json:
        out.json([c.to_dict() for c in found])
        return
    rows = (
        (
            c.name,
            ",".join(ch for ch, on in c.channels.items() if not on) or "-",
            "yes" if c.opt_out else "no",
            "yes" if c.critical else "no",
            c.description or "-",
        )
        for c in found
    )
    print_table(("NAME", "OFF BY DEFAULT", "OPT-OUT", "CRITICAL", "DESCRIPTION"), rows, "category")


@category.command("del")
@click.argument("name")
@pass_cli
def delete_category(ctx: CliContext, /, name: str) -> None:
    """Remove category NAME (root members only); preferences for it stay, unused."""
    from noti.errors import NotFound

    if not api_of(ctx).delete_category(name, user=ctx.user):
        raise NotFound(f"no category {shown(name)}", code="e.cmd.noti.cat.not_found")
    click.echo(f"category {name} removed")


@click.group("template")
def template() -> None:
    """Named, versioned templates per channel and locale (yours; root members: -owner USER)."""


@template.command("put")
@click.argument("args", metavar="[NAME] FILE", nargs=-1, required=True)
@owner_option
@json_options
@pass_cli
def put_template(ctx: CliContext, /, args: tuple[str, ...], owner: str | None, out: Output) -> None:
    """Store a new version of a template from FILE (NAME.json or NAME.toml; - for JSON on
    standard input, NAME then required) and make it current; prints NAME vVERSION."""
    from noti.recipients.templates import load_file

    if len(args) > 2:
        raise click.UsageError("give [NAME] FILE")
    path = args[-1]
    if path == "-":
        if len(args) != 2:
            raise click.UsageError("NAME is required with - (standard input)")
        name, doc = args[0], json_argument("-", what="the template", code="e.cmd.noti.tmpl.baddoc")
    else:
        file_name, doc = load_file(path)
        name = args[0] if len(args) == 2 else file_name
    version = api_of(ctx).put_template(name, doc, user=ctx.user, owner=owner)
    if out.quiet:
        return
    if out.wants_json:
        out.json({"name": name, "version": version})
    else:
        click.echo(f"{name} v{version}")


@template.command("get")
@click.argument("name")
@click.option(
    "-version", "--version", type=click.IntRange(1), help="This version (default: the current one)."
)
@owner_option
@json_options
@pass_cli
def get_template(ctx: CliContext, /, name: str, version: int | None, owner: str | None, out: Output) -> None:
    """Show a template (its current version, or -version N) and its document."""
    found = api_of(ctx).get_template(name, version=version, user=ctx.user, owner=owner)
    if out.quiet:
        return
    shown_doc = found.to_dict()
    if out.wants_json:
        out.json(shown_doc)
        return
    for key in ("name", "version", "default_locale", "description"):
        click.echo(f"{key:14} {shown_doc[key] or '-'}")
    click.echo(f"{'channels':14} {', '.join(found.channels)}")
    click.echo(f"{'created':14} {when(found.created_ms)} ({found.created_ms})")
    import json

    click.echo(json.dumps(shown_doc["document"], ensure_ascii=False, indent=2))


@template.command("list")
@owner_option
@json_options
@pass_cli
def list_templates(ctx: CliContext, /, owner: str | None, out: Output) -> None:
    """List templates: current version, channels, locales."""
    found = api_of(ctx).list_templates(user=ctx.user, owner=owner)
    if out.quiet:
        return
    if out.wants_json:
        out.json(
            [
                {
                    "name": t.name,
                    "version": t.version,
                    "channels": list(t.channels),
                    "locales": list(t.locales),
                    "default_locale": t.default_locale,
                    "description": t.description,
                    "created_ms": t.created_ms,
                    "modified_ms": t.modified_ms,
                }
                for t in found
            ]
        )
        return
    rows = (
        (
            t.name,
            str(t.version),
            ",".join(t.channels),
            ",".join(t.locales),
            t.default_locale,
            when(t.modified_ms),
        )
        for t in found
    )
    print_table(("NAME", "VERSION", "CHANNELS", "LOCALES", "DEFAULT", "MODIFIED (UTC)"), rows, "template")


@template.command("del")
@click.argument("name")
@owner_option
@pass_cli
def delete_template(ctx: CliContext, /, name: str, owner: str | None) -> None:
    """Remove template NAME and every version of it."""
    from noti.errors import NotFound

    if not api_of(ctx).delete_template(name, user=ctx.user, owner=owner):
        raise NotFound(f"no template {shown(name)}", code="e.cmd.noti.tmpl.not_found")
    click.echo(f"template {name} removed")


@click.command("notify")
@click.option("-recipient", "--recipient", required=True, metavar="ID", help="The recipient's id.")
@click.option("-template", "--template", required=True, metavar="NAME[@VERSION]", help="The template.")
@click.option("-data", "--data", metavar="JSON|-", help="The template's variables (a JSON object).")
@click.option("-category", "--category", help="The message category (default: general).")
@click.option(
    "-channels", "--channels", metavar="CH,CH", help="Only these channels (default: the template's)."
)
@click.option(
    "-chain", "--chain", metavar="CH,CH", help="A fallback chain: the first allowed, then the next."
)
@click.option("-after", "--after", metavar="DURATION", help="A chain's fallback after this long: 300, 5m …")
@click.option("-locale", "--locale", help="This locale instead of the recipient's.")
@click.option("-lv", "--lv", "--level", "level", default="1", help="Priority level 1-1000 (capped by role).")
@click.option("-delay", "--delay", metavar="DURATION", help="Send after this long: 30s, 5m, 2h, 1day.")
@click.option("-at", "--at", "at", help="Send at this time (ISO 8601; without a zone: local time).")
@click.option("-idempotency-key", "--idempotency-key", "key", help="The same key again makes nothing new.")
@click.option("-digest", "--digest", metavar="KEY", help="Put the event into the recipient's digest KEY.")
@click.option(
    "-window", "--window", metavar="WINDOW", help="The digest's window: 90s, 10m, 2h, 1d or 'daily 09:00'."
)
@click.option(
    "-digest-max", "--digest-max", "digest_max", metavar="N", help="Events a window keeps (1-1000)."
)
@click.option(
    "-backoff", "--backoff", is_flag=True, default=None, help="The window's first event goes at once."
)
@click.option(
    "-dedupe", "--dedupe", metavar="KEY", help="One notice per KEY for this recipient (- : the content)."
)
@click.option("-dedupe-window", "--dedupe-window", "dedupe_window", metavar="DURATION", help="How long (1h).")
@owner_option
@json_options
@pass_cli
def notify(
    ctx: CliContext,
    /,
    recipient: str,
    template: str,
    data: str | None,
    category: str | None,
    channels: str | None,
    chain: str | None,
    after: str | None,
    locale: str | None,
    level: str,
    delay: str | None,
    at: str | None,
    key: str | None,
    owner: str | None,
    out: Output,
    **digest_options: Any,
) -> None:
    """Notify a recipient from a template: their profile, preferences, quiet hours and locale
    decide the channels; prints the notice's id (noti get shows it; -json: the notice), and
    what became of each channel on standard error."""
    notice = api_of(ctx).notify(
        recipient=recipient,
        template=template,
        data=json_argument(data, what="-data", code="e.cmd.noti.notify.baddata")
        if data is not None
        else None,
        category=category,
        channels=channels,
        chain=chain,
        after_s=parse_duration(after, code="e.cmd.noti.notify.badafter", what="-after") if after else None,
        locale=locale,
        lv=level,
        delay=parse_duration(delay, code="e.cmd.noti.notify.baddelay", what="-delay") if delay else None,
        eta=iso_time(at, what="-at") if at is not None else None,
        idempotency_key=key,
        user=ctx.user,
        owner=owner,
        **_digest_args(digest_options),
    )
    if out.wants_json or out.quiet:
        show_notice(notice, out)
        return
    click.echo(notice.id)
    if notice.mode == "digest":
        click.echo("(into the digest window: this notice is made when it closes)", err=True)
    for entry in notice.entries:
        why = f" ({entry.reason})" if entry.reason else ""
        click.echo(f"{entry.channel}: {entry.state}{why} {entry.record or ''}".rstrip(), err=True)
    if notice.repeated:
        click.echo("(the idempotency key named this notice already: nothing new was made)", err=True)


def _digest_args(options: dict[str, Any]) -> dict[str, object]:
    """``notify``'s digest and deduplication arguments from the options given (``-digest``,
    ``-window``, ``-digest-max``, ``-backoff``, ``-dedupe``, ``-dedupe-window``): a window as
    seconds when it is a number, ``-dedupe -`` the content's own key."""
    given: dict[str, object] = {k: v for k, v in options.items() if v is not None}
    for name in ("window", "dedupe_window"):
        value = given.get(name)
        if isinstance(value, str) and value.replace(".", "", 1).isdigit():
            given[name] = float(value)
    if given.get("dedupe") == "-":
        given["dedupe"] = True
    return given


@click.group("digest")
def digest() -> None:
    """Recipients' digest windows (notify -digest KEY -window …)."""


@digest.command("list")
@click.option("-recipient", "--recipient", metavar="ID", help="Only this recipient's.")
@click.option(
    "-limit", "--limit", type=click.IntRange(1, 1000), default=100, show_default=True, help="At most N."
)
@owner_option
@json_options
@pass_cli
def list_digests(
    ctx: CliContext, /, recipient: str | None, limit: int, owner: str | None, out: Output
) -> None:
    """The open digest windows, the soonest due first: recipient, key, events so far, when
    due, and the notice each will make."""
    found = api_of(ctx).open_digests(user=ctx.user, owner=owner, recipient=recipient, limit=limit)
    if out.quiet:
        return
    if out.wants_json:
        out.json([w.to_dict() for w in found])
        return
    rows = (
        (w.recipient, w.digest, str(w.events), when(w.opened_ms), when(w.due_ms), w.window) for w in found
    )
    print_table(("RECIPIENT", "DIGEST", "EVENTS", "OPENED (UTC)", "DUE (UTC)", "NOTICE"), rows, "open window")
