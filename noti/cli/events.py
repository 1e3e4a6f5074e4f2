"""``noti event dispatch | list | show | retry | status`` and ``noti listener add | list | del``."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from typing import Any

import click

from noti.cli._options import CliContext, Output, json_options, limit_option, pass_cli
from noti.cli._output import print_table
from noti.errors import InvalidInput
from noti.events import Event, EventStatus, Listener, events
from noti.inputs import load_json

__all__ = ["event", "listener"]


def _when(ms: int | None) -> str:
    if not ms:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _duration(ms: int | None) -> str:
    if ms is None:
        return "-"
    return f"{ms / 1000:.3f} s"


def _json_arg(text: str | None, option: str, code: str) -> Any:
    if text is None:
        return None
    if text == "-":
        try:
            text = sys.stdin.read()
        except UnicodeDecodeError as exc:
            raise InvalidInput(f"{option}: standard input is not UTF-8 text: {exc}", code=code) from None
    return load_json(text, what=option, code=code)


# --- noti event ----------------------------------------------------------------------------------


@click.group("event")
def event() -> None:
    """Events: dispatch them, and watch the processor work through them."""


@event.command("dispatch")
@click.argument("name")
@click.option("-data", "--data", help="The payload, a JSON object ('-': read standard input).")
@json_options
@pass_cli
def dispatch_cmd(
    ctx: CliContext,
    /,
    name: str,
    data: str | None,
    out: Output,
) -> None:
    """Dispatch the event NAME and print its id."""
    payload = _json_arg(data, "-data", "e.noti.event.badpayload")
    api = events()
    event_id = api.dispatch(name, payload if payload is not None else {}, user=ctx.user)
    if out.quiet:
        return
    if out.wants_json:
        out.json(api.get(event_id, user=ctx.user).to_json())
    else:
        click.echo(event_id)


@event.command("list")
@click.option(
    "-st",
    "--st",
    "--status",
    "status",
    type=click.Choice([s.value for s in EventStatus]),
    help="Only this status.",
)
@click.option("-name", "--name", help="Only events of this name (* matches any characters).")
@click.option("-u", "--user", "creator", help="Only events dispatched by USER (others: root members).")
@click.option("-errors", "--errors", is_flag=True, help="Only done events with an error (newest done first).")
@limit_option
@json_options
@pass_cli
def list_cmd(
    ctx: CliContext,
    /,
    status: str | None,
    name: str | None,
    creator: str | None,
    errors: bool,
    limit: int | None,
    out: Output,
) -> None:
    """List events, newest first (at most 100 unless -limit says otherwise)."""
    found = events().select(
        user=ctx.user,
        creator=creator,
        status=status,
        name=name,
        failed=errors,
        limit=100 if limit is None else limit,
    )
    if out.quiet:
        return
    if out.wants_json:
        out.json([e.to_json() for e in found])
        return
    print_table(
        ("ID", "NAME", "STATUS", "USER", "SEQ", "CREATED (UTC)", "TRIES", "ERROR"),
        (
            (
                e.id,
                e.name,
                e.status.value,
                e.user,
                str(e.seq),
                _when(e.created_ms),
                str(e.tries),
                e.error_code,
            )
            for e in found
        ),
        "event",
    )


def _tries(e: Event) -> str:
    """``tries`` and what it counts: every activation of the current step; of the
    processors that did not finish it, how many died (poison counts those) and stalled."""
    if not e.replaced:
        return f"{e.tries} (activations)"
    return (
        f"{e.tries} (activations: {len(e.replaced)} processor(s) did not finish it:"
        f" {e.deaths} died, {e.stalls} stalled)"
    )


def _show_lines(e: Event) -> list[str]:
    lines = [
        f"id         {e.id}",
        f"name       {e.name}",
        f"status     {e.status.value}",
        f"user       {e.user}",
        f"seq        {e.seq}",
        f"created    {_when(e.created_ms)}",
        f"activated  {_when(e.activated_ms)}  (waited {_duration(e.wait_ms)})",
        f"done       {_when(e.done_ms)}  (ran {_duration(e.run_ms)})",
        f"tries      {_tries(e)}",
        f"processor  {e.processor or '-'}",
        f"error      {e.error_code + ': ' + e.error_message if e.error_code else '-'}",
        f"payload    {json.dumps(dict(e.payload), ensure_ascii=False)}",
    ]
    if e.retry is not None:
        r = e.retry
        lines.append(
            f"retry      listener {r.get('listener')} failed {r.get('attempts')} of"
            f" {int(r.get('retries', 0)) + 1} attempts ({r.get('error_code')}: {r.get('error_message')});"
            f" again after {_when(int(r.get('due_ms', 0)))}"
        )
    if e.status is EventStatus.DONE:
        lines.append("result")
        for outcome in e.outcomes:
            lines.append(f"  {json.dumps(outcome.to_json(), ensure_ascii=False)}")
    return lines


@event.command("show")
@click.argument("event_id", metavar="ID")
@json_options
@pass_cli
def show_cmd(
    ctx: CliContext,
    /,
    event_id: str,
    out: Output,
) -> None:
    """Show one event: status, error code, return data and timings."""
    found = events().get(event_id, user=ctx.user)
    if out.quiet:
        return
    if out.wants_json:
        out.json(found.to_json())
    else:
        click.echo("\n".join(_show_lines(found)))


@event.command("retry")
@click.argument("event_id", metavar="ID")
@click.option("-listener", "--listener", help="Re-run only this failed listener (default: every failed one).")
@json_options
@pass_cli
def retry_cmd(
    ctx: CliContext,
    /,
    event_id: str,
    listener: str | None,
    out: Output,
) -> None:
    """Re-run the failed listeners of a done event (a poisoned one: all) in a new step."""
    queued = events().retry(event_id, listener=listener, user=ctx.user)
    if out.quiet:
        return
    if out.wants_json:
        out.json(queued.to_json())
    else:
        click.echo(queued.id)


@event.command("status")
@json_options
@pass_cli
def status_cmd(
    ctx: CliContext,
    /,
    out: Output,
) -> None:
    """Is a processor alive, where, since when; the backlog; how the last one stopped."""
    status = events().status()
    if out.quiet:
        return
    if out.wants_json:
        out.json(status.to_json())
        return
    h = status.holder
    if h is not None:
        click.echo(f"processor  alive: {h.host} pid {h.pid} since {_when(h.since_ms)} ({h.name})")
    else:
        click.echo("processor  none alive")
    c = status.counts
    click.echo(
        f"backlog    {c.queued} ({c.new} new, {c.activated} activated); {c.backoff} waiting for a"
        f" listener's retry; {c.done} done kept"
    )
    if c.head:
        click.echo(f"next       {c.head}")
    stop = status.last_stop
    if stop:
        click.echo(
            f"last stop  {stop.get('reason', '?')} at {_when(int(stop.get('ms', '0') or 0))} after"
            f" {stop.get('processed', '?')} events ({stop.get('processor', '?')})"
        )


# --- noti listener -------------------------------------------------------------------------------


@click.group("listener")
def listener() -> None:
    """Listeners: what happens when an event is dispatched."""


@listener.command("add")
@click.argument("event_name", metavar="EVENT")
@click.option("-name", "--name", help="Listener name (default: a new id).")
@click.option("-task", "--task", help="Call this Celery task with the event (instead of -type).")
@click.option(
    "-type", "--type", "type_", help="Create a notification of this type: sms, weixin, email, webhook."
)
@click.option("-to", "--to", "target", help="Target template, e.g. '{{ customer.phone }}'.")
@click.option("-text", "--text", help="Text template (sms, email).")
@click.option("-subject", "--subject", help="E-mail subject template.")
@click.option("-html", "--html", help="E-mail HTML template.")
@click.option("-tmpl", "--tmpl", help="WeChat template id (a template too).")
@click.option("-pnb", "--pnb", help="WeChat official account.")
@click.option("-url", "--url", help="WeChat link template.")
@click.option("-content", "--content", help="JSON object whose strings are templates (weixin, webhook).")
@click.option("-provider", "--provider", help="Provider name(s) of the notifications.")
@click.option("-lv", "--lv", "--level", "level", default="1", help="Priority level (capped by your role).")
@click.option("-filter", "--filter", "filter_", help="Run only when this Jinja expression is true.")
@click.option("-example", "--example", help="Example payload (JSON): templates are checked against it.")
@click.option("-replace", "--replace", is_flag=True, help="Replace a listener of the same name.")
@click.option("-retries", "--retries", default="0", help="Run it again up to N times after a failure (0-20).")
@click.option("-backoff", "--backoff", default="0", help="Seconds to wait before each retry (0-86400).")
@click.option(
    "-from-users",
    "--from-users",
    "from_users",
    help="Also run for these users' events: names, comma-separated, or '*' for everyone's"
    " (root members; default: only your own events).",
)
@json_options
@pass_cli
def add_cmd(
    ctx: CliContext,
    /,
    event_name: str,
    name: str | None,
    task: str | None,
    type_: str | None,
    target: str | None,
    level: str,
    content: str | None,
    filter_: str | None,
    example: str | None,
    replace: bool,
    retries: str,
    backoff: str,
    from_users: str | None,
    out: Output,
    **fields: str | None,
) -> None:
    """Add a listener for EVENT (* matches any characters) and print its name."""
    action: Any
    if task is not None:
        if type_ is not None:
            raise click.UsageError("give either -task or -type, not both")
        action = task
    elif type_ is not None:
        action = {"type": type_, "target": target, "lv": level, **{k: v for k, v in fields.items() if v}}
        if content is not None:
            action["content"] = _json_arg(content, "-content", "e.noti.listener.badaction")
    else:
        raise click.UsageError("give -task NAME, or -type TYPE with -to and the fields")
    example_payload = _json_arg(example, "-example", "e.noti.listener.badexample")
    added = events().add_listener(
        event_name,
        action,
        name=name,
        filter=filter_,
        user=ctx.user,
        example=example_payload,
        replace=replace,
        retries=retries,
        backoff=backoff,
        from_users=from_users,
    )
    if out.quiet:
        return
    if out.wants_json:
        out.json(added.to_json())
    else:
        click.echo(added.name)


def _listener_row(x: Listener) -> tuple[str, ...]:
    hears = ",".join(x.from_users) or "-"
    return (x.name, x.event, x.user, hears, x.action.describe(), x.filter or "", _when(x.created_ms))


@listener.command("list")
@click.option("-event", "--event", "event_name", help="Only the listeners this event name would run.")
@json_options
@pass_cli
def list_listeners_cmd(
    ctx: CliContext,
    /,
    event_name: str | None,
    out: Output,
) -> None:
    """List listeners in the order they run (yours; root members: everyone's)."""
    found = events().list_listeners(user=ctx.user, event=event_name)
    if out.quiet:
        return
    if out.wants_json:
        out.json([x.to_json() for x in found])
        return
    print_table(
        ("NAME", "EVENT", "USER", "FROM", "ACTION", "FILTER", "CREATED (UTC)"),
        map(_listener_row, found),
        "listener",
    )


@listener.command("del")
@click.argument("names", metavar="NAME...", nargs=-1, required=True)
@click.option("-Q", "--quiet", is_flag=True, help="Print nothing.")
@pass_cli
def del_cmd(ctx: CliContext, /, names: tuple[str, ...], quiet: bool) -> None:
    """Remove listeners (yours; root members: anyone's)."""
    for name in names:
        removed = events().remove_listener(name, user=ctx.user)
        if not quiet:
            click.echo(f"rm listener {removed.name} ({removed.event}) > {removed.action.describe()}")
