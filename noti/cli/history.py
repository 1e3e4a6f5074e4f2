"""``noti search`` (records by address, recipient, status, provider, vendor id, time) and the
timeline ``noti get ID -timeline`` shows (:mod:`noti.core.timeline`)."""

from __future__ import annotations

import time
from collections.abc import Callable

import click

from noti.cli._options import CliContext, Output, json_options, parse_duration, pass_cli
from noti.cli._output import when
from noti.core.delay import iso_time
from noti.core.timeline import Timeline
from noti.errors import InvalidInput

__all__ = ["records_of", "search", "show_timelines"]


def _time_ms(text: str | None, what: str) -> int | None:
    """``-since``/``-until``: epoch ms, an ISO time, or a duration ago (``30m``, ``2day``)."""
    if text is None:
        return None
    text = text.strip()
    if text.isdigit() and len(text) >= 10:
        return int(text)
    if text[:1].isdigit() and text[-1:].isalpha() or text.isdigit():
        return int((time.time() - parse_duration(text, code="e.cmd.noti.search.bad", what=what)) * 1000)
    try:
        return int(iso_time(text, what=what).timestamp() * 1000)
    except InvalidInput:
        raise InvalidInput(
            f"{what} {text!r} is not a time: use epoch ms, an ISO time or a duration ago (30m, 2day)",
            code="e.cmd.noti.search.bad",
        ) from None


@click.command("search")
@click.option(
    "-to", "--to", "to", metavar="ADDRESS", help="Sent to this address (phone, e-mail, openid, URL)."
)
@click.option(
    "-recipient", "--recipient", metavar="ID", help="Made for this recipient (notify(recipient=…))."
)
@click.option("-u", "--user", "creator", help="Only records created by USER (others: root members).")
@click.option("-type", "--type", "type_", default=None, help="Only this channel (sms, email, …).")
@click.option(
    "-st", "--st", "--status", "status", type=int, default=None, help="Only this status: -1, 0, 1, 10."
)
@click.option("-provider", "--provider", help="Asked for, or sent by, this provider.")
@click.option("-msgid", "--msgid", help="The vendor's message id.")
@click.option(
    "-delivery", "--delivery", help="Only this delivery status: accepted, delivered, undelivered, unknown."
)
@click.option(
    "-since", "--since", metavar="WHEN", help="Created since: epoch ms, an ISO time, or 30m / 2day ago."
)
@click.option("-until", "--until", metavar="WHEN", help="Created until (same forms).")
@click.option(
    "-limit", "--limit", type=int, default=100, show_default=True, help="At most N records (1 to 1000)."
)
@json_options
@pass_cli
def search(
    ctx: CliContext,
    /,
    to: str | None,
    recipient: str | None,
    creator: str | None,
    type_: str | None,
    status: int | None,
    provider: str | None,
    msgid: str | None,
    delivery: str | None,
    since: str | None,
    until: str | None,
    limit: int,
    out: Output,
) -> None:
    """Find notifications: yours (root members: anyone's), newest first, matching every
    filter given. Then `noti get ID -timeline` tells what happened to one."""
    records = ctx.api.search(
        user=ctx.user,
        creator=creator,
        to=to,
        channel=type_,
        recipient=recipient,
        status=status,
        provider=provider,
        msgid=msgid,
        delivery=delivery,
        since_ms=_time_ms(since, "-since"),
        until_ms=_time_ms(until, "-until"),
        limit=limit,
    )
    out.records(records)


def records_of(ctx: CliContext, ids: tuple[str, ...], is_notice: Callable[[str], bool]) -> list[str]:
    """The ids, a notice's (``n…``, from ``noti notify``) replaced by the records it made, in
    its channels' order (a digested channel's "record" is its digest window: none yet)."""
    out: list[str] = []
    for ident in ids:
        if is_notice(ident):
            from noti.api import get_notice  # the recipients layer, only for a notice

            notice = get_notice(ident, user=ctx.user)
            out += [e.record for e in notice.entries if e.record and e.state != "digested"]
        else:
            out.append(ident)
    return out


def show_timelines(timelines: list[Timeline], out: Output) -> None:
    """Each record's steps, a line each: when, the event, its details."""
    if out.quiet:
        return
    if out.wants_json:
        shown = [t.to_dict() for t in timelines]
        out.json(shown if len(shown) > 1 else shown[0])
        return
    for n, timeline in enumerate(timelines):
        if n:
            click.echo()
        click.echo(f"{timeline.record_id}")
        if timeline.dropped:
            click.echo(f"  ({timeline.dropped} older steps no longer kept)")
        for step in timeline.steps:
            millis = f".{step.at_ms % 1000:03d}" if step.at_ms else ""
            click.echo(f"  {when(step.at_ms)}{millis}  {step.line()}")
