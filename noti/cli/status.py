"""``noti status``: the whole deployment on one screen (or as JSON), once or ``-watch``.

It renders the same :class:`~noti.observe.snapshot.Snapshot` the Prometheus metrics come
from: workers alive, queue depth per channel and priority step, the delayed set and the
pump's lag, dead letters, the event processor, the number pools, and the counters.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

import click

from noti.cli._options import Output, json_options
from noti.errors import InvalidInput, NotiError

if TYPE_CHECKING:
    from rich.console import Console

    from noti.observe.snapshot import Snapshot

__all__ = ["status"]

#: ``-watch`` without a value: seconds between screens.
WATCH_DEFAULT_S = 2.0
WATCH_MAX_S = 3600.0
#: The ``noti_lv`` each priority step starts at (step 0 is served first).
_STEP_LEVELS = ("1000+", "500+", "200+", "100+", "50+", "20+", "10+", "5+", "2+", "1")


def parse_watch(value: str) -> float:
    """Seconds between screens for ``-watch VALUE``.

    Raises:
        InvalidInput: ``e.cmd.noti.status.badwatch``: not a number of seconds from 0.1 to 3600.
    """
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0.1 <= seconds <= WATCH_MAX_S:
        raise InvalidInput(
            f"watch interval {value!r} is not a number of seconds from 0.1 to {WATCH_MAX_S:g}",
            code="e.cmd.noti.status.badwatch",
        )
    return seconds


@click.command("status")
@click.option(
    "-watch",
    "--watch",
    "watch",
    is_flag=False,
    flag_value=str(WATCH_DEFAULT_S),
    default=None,
    metavar="[SECONDS]",
    help=f"Show it again every SECONDS (default {WATCH_DEFAULT_S:g}) until Ctrl-C.",
)
@json_options
def status(watch: str | None, out: Output) -> None:
    """Workers, queues, delayed set, dead letters, events, rate limits and number pools, on
    one screen."""
    from noti.observe.snapshot import Observer
    from noti.sending.runtime import get_runtime

    interval = parse_watch(watch) if watch is not None else None
    observer = Observer(get_runtime())
    try:
        if interval is None:
            _show(observer.snapshot(), out, clear=False)
            return
        while True:
            try:
                _show(observer.snapshot(), out, clear=sys.stdout.isatty())
            except NotiError as exc:  # Redis away: say so, and look again
                click.echo(f"{time.strftime('%H:%M:%S')} {exc.code}: {exc.message}", err=True)
            time.sleep(interval)
    except KeyboardInterrupt:
        pass
    finally:
        observer.close()


def _show(snap: Snapshot, out: Output, *, clear: bool) -> None:
    if out.quiet:
        return
    if out.wants_json:
        out.json(snap.as_json())
        return
    from rich.console import Console

    console = Console(file=sys.stdout, width=max(100, _terminal_width()), soft_wrap=True, highlight=False)
    if clear:
        console.clear()
    render(snap, console)
    sys.stdout.flush()  # each screen whole, also through a pipe


def _terminal_width() -> int:
    import shutil

    return shutil.get_terminal_size((120, 40)).columns


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    if seconds < 3600:
        return f"{seconds / 60:.1f}m"
    if seconds < 86400:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.1f}d"


def render(snap: Snapshot, console: Console) -> None:
    """Print the status screen of ``snap`` on ``console``."""
    from rich.table import Table

    from noti.cli._output import when

    alive = snap.workers_alive
    console.print(f"[bold]noti status[/bold]  {when(snap.at_ms)} UTC  (read in {snap.read_s * 1000:.0f} ms)")

    console.print(f"\n[bold]workers[/bold]  {len(alive)} alive")
    if snap.workers:
        table = Table(box=None, header_style="bold", pad_edge=False)
        for column in ("NODE", "STATE", "PID", "POOL", "MODE", "QUEUES", "HEARTBEAT", "PUMP"):
            table.add_column(column, overflow="fold")
        for w in snap.workers:
            table.add_row(
                w.name,
                "alive" if w.alive(snap.at_ms) else "gone",
                str(w.pid),
                f"{w.pool}×{w.concurrency}" if w.concurrency and w.pool != "solo" else w.pool,
                w.mode,
                ",".join(w.queues),
                f"{_age(max(0.0, (snap.at_ms - w.seen_ms) / 1000))} ago",
                "yes" if w.pump else "",
            )
        console.print(table)

    console.print("\n[bold]queues[/bold]  messages waiting per priority step (0 is served first)")
    if snap.queues:
        table = Table(box=None, header_style="bold", pad_edge=False)
        table.add_column("QUEUE")
        table.add_column("TOTAL", justify="right")
        for step, level in enumerate(_STEP_LEVELS):
            table.add_column(f"{step}\n{level}", justify="right")
        table.add_column("OLDEST", justify="right")
        for q in snap.queues:
            table.add_row(q.name, str(q.total), *(str(n) for n in q.steps), _age(q.oldest_age_s))
        console.print(table)
        console.print(f"fetched by workers, not acked yet: {snap.unacked}")
    else:
        console.print("the broker is not Redis: its queues are not read here")

    console.print(
        f"\n[bold]delayed[/bold]  {snap.delayed} waiting for their time, {snap.delayed_due} due now, "
        f"pump lag {_age(snap.pump_lag_s)}"
    )
    console.print(f"[bold]dead letters[/bold]  {snap.dead_letters}")
    records = ", ".join(f"{name} {n}" for name, n in snap.records.items())
    console.print(f"[bold]records[/bold]  {records}")
    totals = snap.counter_totals()
    shown = (
        ("added", "added"),
        ("sent", "sent"),
        ("retried", "retried"),
        ("failed", "failed"),
        ("invalid", "invalid"),
        ("dead_lettered", "dead-lettered"),
        ("revoked", "revoked"),
        ("cancelled", "cancelled"),
    )
    console.print(
        "[bold]counted[/bold]  " + ", ".join(f"{label} {totals.get(code, 0)}" for code, label in shown)
    )

    events = snap.events
    holder = events.processor
    processor = (
        f"processor {holder.host}/{holder.pid} since {when(holder.since_ms)} UTC"
        if holder is not None
        else "no processor"
    )
    console.print(
        f"\n[bold]events[/bold]  backlog {events.backlog}, oldest {_age(events.oldest_age_s)}; {processor}; "
        f"processed {totals.get('events_done', 0)} of {totals.get('events_dispatched', 0)} dispatched"
    )

    if snap.rate_lines:
        console.print("\n[bold]rate limits[/bold]")
    for line in snap.rate_lines:
        ahead = ", ".join(f"{user} +{_age(lead)}" for user, lead in line.leads) or "none"
        console.print(f"  {line.provider}: {line.waiting} in line; users ahead of their share: {ahead}")

    console.print("\n[bold]number pools[/bold]" + ("" if snap.pools else "  none"))
    for pool in snap.pools:
        counts = ", ".join(f"{state} {n}" for state, n in pool.counts.items())
        console.print(f"  {pool.name}: {sum(pool.counts.values())} numbers ({counts})")
