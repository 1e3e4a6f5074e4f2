"""``noti webman …``: the webman-redis-queue bridge, with the plugin's console commands.

==========================  =====================================  ==============================
noti                        plugin                                 what
==========================  =====================================  ==============================
``make-consumer``           ``solar:make:consumer``                class file + registration
``remove-consumer NAME``    ``solar:remove:consumer``              unregister (+ ``--purge-data``)
``list``                    ``solar:consumer:list``                per-queue numbers
``clean QUEUE``             ``solar:clean:redis:data``             delete the queue's keys
``history QUEUE``           the README's history script            processed entries still kept
``run [NAME|CLASS…]``       ``php start.php`` (consumer processes)  consumers in this process
==========================  =====================================  ==============================

QUEUE is a registered consumer name, a ``module:Class`` path, or a PHP class name
(``app\\queue\\SendEmail``, on the ``default`` connection). ``history``, ``clean`` and
``remove-consumer --purge-data`` are for root members (see
:mod:`noti.bridge.webman.console`, which these commands call).
"""

from __future__ import annotations

import json
import re
import signal
import time
from pathlib import Path
from typing import Any

import click

from noti.bridge.webman.console import WebmanConsole
from noti.bridge.webman.registry import ConsumerScaffold, register, scaffold, unregister
from noti.bridge.webman.runner import BridgeRunner
from noti.cli._options import CliContext, pass_cli
from noti.config import Settings
from noti.errors import BridgeError, InvalidInput
from noti.sending.runtime import get_runtime

__all__ = ["webman"]

_DURATION = re.compile(r"^\s*([0-9]+)\s*(s|m|h|d|day|days)?\s*$", re.IGNORECASE)
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "day": 86400, "days": 86400}


def _duration_s(text: str) -> int:
    match = _DURATION.match(text)
    if match is None:
        raise InvalidInput(
            f"{text!r} is not a duration: use Ns, Nm, Nh or Nd (e.g. 1h)", code="e.noti.bridge.badtime"
        )
    return int(match.group(1)) * _UNIT_S[(match.group(2) or "s").lower()]


def _config_file(option: str | None, settings: Settings) -> Path:
    """``--config``, else the settings' ``NOTI_CONFIG`` file, else ./noti.toml."""
    if option:
        return Path(option)
    return Path(settings.config) if settings.config else Path("noti.toml")


def _ago(ms: int | None, now_ms: int) -> str:
    if ms is None:
        return "unknown"
    seconds = max(0, (now_ms - ms) // 1000)
    for unit, size in (("days", 86400), ("hours", 3600), ("minutes", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit} ago"
    return f"{seconds} seconds ago"


def _box(headers: list[str], rows: list[list[str]]) -> str:
    """A table drawn like the plugin's (Symfony console) tables."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=True)]
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    return "\n".join([rule, line(headers), rule, *(line(r) for r in rows), rule])


@click.group("webman")
def webman() -> None:
    """The webman-redis-queue bridge (PHP solarseahorse/webman-redis-queue)."""


@webman.command("make-consumer")
@click.option(
    "-queue", "--queue", prompt="Please enter the name of the queue", help="Queue name (letters and '-')."
)
@click.option(
    "-processes", "--processes", type=click.IntRange(1, 64), default=1,
    prompt="Please enter the number of processes", help="Consumer threads.",
)  # fmt: skip
@click.option(
    "-path", "--path", "directory", default="app/queue",
    prompt="Please enter the path to create the class in",
    help="Package directory of the class (also gives the PHP namespace).",
)  # fmt: skip
@click.option(
    "-root", "--root", type=click.Path(file_okay=False), default=".", help="Where the package directory is."
)
@click.option(
    "-config",
    "--config",
    "config",
    help="TOML file to register it in (default: NOTI_CONFIG, else ./noti.toml).",
)
def make_consumer(queue: str, processes: int, directory: str, root: str, config: str | None) -> None:
    """Create a consumer class and register it (asks like solar:make:consumer)."""
    made = ConsumerScaffold(queue, directory)
    path = _config_file(config, get_runtime().settings)
    if (Path(root) / made.module_file).exists():
        raise BridgeError(f"{Path(root) / made.module_file} exists already", code="e.noti.bridge.exists")
    register(path, made.class_name, {"class": made.class_path, "processes": processes})
    written = scaffold(Path(root), made)
    click.echo(f"created {written} ({made.class_path}, PHP class {made.php_class})")
    click.echo(f"registered [webman.consumers.{made.class_name}] in {path}")


@webman.command("remove-consumer")
@click.argument("name")
@click.option(
    "-purge-data", "--purge-data", is_flag=True, help="Also delete its stream and delayed keys (asks first)."
)
@click.option("-yes", "--yes", "-y", is_flag=True, help="Do not ask.")
@click.option(
    "-config",
    "--config",
    "config",
    help="TOML file it is registered in (default: NOTI_CONFIG, else ./noti.toml).",
)
@pass_cli
def remove_consumer(ctx: CliContext, /, name: str, purge_data: bool, yes: bool, config: str | None) -> None:
    """Unregister consumer NAME (its class file is kept); --purge-data is for root members."""
    console = WebmanConsole.from_runtime()
    path = _config_file(config, console.settings)
    queue = None
    if purge_data:
        console.require("clean", user=ctx.user)
        queue = console.registered_queue(name, path)
        if not yes:
            click.confirm(f"Delete {', '.join(queue.keys.data_keys)}?", abort=True)
    entry = unregister(path, name)
    click.echo(f"unregistered {name} ({entry.get('class')}) from {path}")
    if queue is not None:
        click.echo(f"deleted {console.clean(queue, user=ctx.user)} key(s)")


@webman.command("list")
@click.option("-json", "--json", "as_json", is_flag=True, help="Print JSON.")
def list_consumers(as_json: bool) -> None:
    """Registered consumers and their queues' numbers (like solar:consumer:list)."""
    headers = [
        "Key",
        "Consumer",
        "Count",
        "Stream Length",
        "Delay Set Length",
        "Pending List Length",
        "Last Active",
    ]
    rows: list[list[str]] = []
    records: list[dict[str, Any]] = []
    now_ms = int(time.time() * 1000)
    for row in WebmanConsole.from_runtime().consumers():
        name, entry, keys, stats = row.name, row.entry, row.keys, row.stats
        rows.append(
            [
                name,
                keys.names.php_class,
                str(entry.processes),
                str(stats.stream_length),
                str(stats.delay_set_length),
                str(stats.pending),
                _ago(stats.last_active_ms, now_ms),
            ]
        )
        records.append(
            {
                "key": name,
                "class": entry.class_path,
                "php_class": keys.names.php_class,
                "count": entry.processes,
                "stream": keys.stream,
                "stream_length": stats.stream_length,
                "delay_set_length": stats.delay_set_length,
                "pending": stats.pending,
                "last_active_ms": stats.last_active_ms,
            }
        )
    if as_json:
        click.echo(json.dumps(records, ensure_ascii=False, indent=2))
    elif rows:
        click.echo(_box(headers, rows))
    else:
        click.echo("no webman consumers registered ([webman.consumers.<name>])")


@webman.command("clean")
@click.argument("queue")
@click.option("-yes", "--yes", "-y", is_flag=True, help="Do not ask.")
@pass_cli
def clean_queue(ctx: CliContext, /, queue: str, yes: bool) -> None:
    """Delete QUEUE's stream, delayed set and delayed data (like solar:clean:redis:data; root)."""
    console = WebmanConsole.from_runtime()
    console.require("clean", user=ctx.user)
    found = console.queue(queue)
    if not yes:
        click.confirm(f"Delete {', '.join(found.keys.data_keys)}?", abort=True)
    click.echo(f"deleted {console.clean(found, user=ctx.user)} key(s)")


@webman.command("history")
@click.argument("queue")
@click.option(
    "-older-than",
    "--older-than",
    default="1h",
    show_default=True,
    help="Age of the message (Ns, Nm, Nh, Nd).",
)
@click.option("-delete", "--delete", "delete", is_flag=True, help="Delete the entries listed.")
@click.option("-limit", "--limit", type=click.IntRange(min=1), default=None, help="At most N entries.")
@click.option("-json", "--json", "as_json", is_flag=True, help="Print JSON.")
@pass_cli
def history_(
    ctx: CliContext, /, queue: str, older_than: str, delete: bool, limit: int | None, as_json: bool
) -> None:
    """Processed entries still in QUEUE's stream (acked, not deleted), older than --older-than (root)."""
    console = WebmanConsole.from_runtime()
    console.require("history", user=ctx.user)
    older_than_s = _duration_s(older_than)
    found = console.queue(queue)
    now_s = int(time.time())
    entries = console.history(found, older_than_s=older_than_s, now_s=now_s, limit=limit, user=ctx.user)
    if as_json:
        click.echo(
            json.dumps(
                [
                    {
                        "id": e.id,
                        "timestamp": e.created_s,
                        "message": e.message.to_array() if e.message else None,
                        "error": e.error or None,
                    }
                    for e in entries
                ],
                ensure_ascii=False,
                indent=2,
            )
        )
    else:
        for e in entries:
            what = (
                json.dumps(e.message.data, ensure_ascii=False)[:60] if e.message else f"unreadable: {e.error}"
            )
            click.echo(f"{e.id}  {_ago(e.created_s * 1000, now_s * 1000)}  {what}")
    if delete:
        click.echo(f"deleted {console.delete_history(found, [e.id for e in entries], user=ctx.user)} entries")
    elif not as_json:
        click.echo(f"{len(entries)} entries")


@webman.command("run")
@click.argument("consumers", nargs=-1, metavar="[NAME|module:Class]...")
def run(consumers: tuple[str, ...]) -> None:
    """Run consumers in this process until interrupted (default: every registered one)."""
    runner = BridgeRunner.from_runtime(get_runtime(), consumers or None)
    if not runner.workers:
        raise click.UsageError("no consumer to run: name one or register some ([webman.consumers.<name>])")
    previous = signal.signal(signal.SIGTERM, lambda *_: runner.request_stop())
    runner.start()
    click.echo(f"running {len(runner.workers)} consumer thread(s); Ctrl-C stops")
    try:
        runner.wait()
    except KeyboardInterrupt:
        pass
    finally:
        runner.stop()
        signal.signal(signal.SIGTERM, previous)
