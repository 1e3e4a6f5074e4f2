"""How the CLI prints: the seed's JSON variants (-json -c -q -n), tables and report lines."""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from noti.core.record import Notification, Status
from noti.core.record_json import to_json_dict

__all__ = ["JsonStyle", "dumps", "print_records_table", "print_table", "rm_line", "when"]

_BARE_KEY = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*$")


@dataclass(frozen=True, slots=True)
class JsonStyle:
    """The seed's output switches: ``-c`` compact, ``-q`` keys unquoted, ``-n`` no nulls."""

    compact: bool = False
    unquoted_keys: bool = False
    drop_nulls: bool = False


def _strip_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_strip_nulls(v) for v in value]
    return value


def dumps(value: Any, style: JsonStyle) -> str:
    """``value`` as JSON text in the given style."""
    if style.drop_nulls:
        value = _strip_nulls(value)
    if not style.unquoted_keys:
        if style.compact:
            return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        return json.dumps(value, ensure_ascii=False, indent=2)
    return _dump_unquoted(value, style.compact, 0)


def _dump_unquoted(value: Any, compact: bool, depth: int) -> str:
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = []
        for key, item in value.items():
            name = key if _BARE_KEY.match(str(key)) else json.dumps(str(key), ensure_ascii=False)
            sep = ":" if compact else ": "
            items.append(f"{name}{sep}{_dump_unquoted(item, compact, depth + 1)}")
        return _wrap("{", "}", items, compact, depth)
    if isinstance(value, list):
        if not value:
            return "[]"
        return _wrap("[", "]", [_dump_unquoted(v, compact, depth + 1) for v in value], compact, depth)
    return json.dumps(value, ensure_ascii=False)


def _wrap(open_: str, close: str, items: list[str], compact: bool, depth: int) -> str:
    if compact:
        return open_ + ",".join(items) + close
    pad = "  " * (depth + 1)
    return open_ + "\n" + ",\n".join(pad + i for i in items) + "\n" + "  " * depth + close


def records_json(records: Sequence[Notification]) -> list[dict[str, Any]]:
    return [to_json_dict(r) for r in records]


def when(ms: int) -> str:
    """Epoch ms as ``YYYY-MM-DD HH:MM:SS`` (UTC), or ``-`` for 0 (the number itself when it
    is past what a date can show: a record written into Redis by hand)."""
    if not ms:
        return "-"
    try:
        return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")
    except (ValueError, OverflowError, OSError):
        return str(ms)


#: The width tables are laid out for (wider tables fold their cells, as rich does).
TABLE_WIDTH = 220
#: Text that :func:`plain_table` lays out exactly as rich does: printable ASCII without
#: rich's markup (``[``) or anything of the form ``:name:`` other than digits (``20:21:51``
#: gives ``:21:``; rich's emoji names include ``:100:`` and ``:1234:``).
_PLAIN = re.compile(r"[ -Z\\\]-~]*")
_EMOJI_LIKE = re.compile(r"(?=:([^\s:]*):)")


def _plain_cell(text: str) -> bool:
    if not _PLAIN.fullmatch(text):
        return False
    return all(name.isdigit() and name not in ("100", "1234") for name in _EMOJI_LIKE.findall(text))


def plain_table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str] | None:
    """The lines of a borderless table exactly as :func:`print_table`'s rich layout prints
    them when nothing in it needs rich (see :data:`_PLAIN`) and it fits :data:`TABLE_WIDTH`:
    columns as wide as their widest cell, two spaces apart, every cell padded to its column.
    None when rich must lay it out. (rich costs a ``noti list`` ~45 ms of a ~250 ms start:
    its import and its layout; ``tests/test_fast_cli.py`` compares the two.)"""
    if not all(_plain_cell(cell) for cell in (*columns, *(c for row in rows for c in row))):
        return None
    widths = [max([len(column), *(len(row[i]) for row in rows)]) for i, column in enumerate(columns)]
    if sum(widths) + 2 * (len(widths) - 1) > TABLE_WIDTH:
        return None
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)) for line in (columns, *rows)
    ]


def _terminal_styles() -> tuple[str, str] | None:
    """What rich shows on a terminal (or with ``FORCE_COLOR``): the header row bold and the
    count bold cyan (bold only with ``NO_COLOR``). None: not a terminal, plain text."""
    if not (sys.stdout.isatty() or os.environ.get("FORCE_COLOR")):
        return None
    return "\x1b[1m", "\x1b[1m" if os.environ.get("NO_COLOR") else "\x1b[1;36m"


def _dumb_terminal() -> bool:
    """A terminal with ``TERM=dumb`` (or ``unknown``): rich lays tables out 80 columns wide there."""
    return os.environ.get("TERM", "").lower() in ("dumb", "unknown")


def print_table(columns: Iterable[str], rows: Iterable[Iterable[str]], noun: str) -> None:
    """A borderless table on stdout, then ``N noun(s)``."""
    header = list(columns)
    body = [list(row) for row in rows]
    count, nouns = len(body), f"{noun}{'s' if len(body) != 1 else ''}"
    styles = _terminal_styles()
    lines = None if styles is not None and _dumb_terminal() else plain_table(header, body)
    if lines is None:
        print_rich_table(header, body, f"{count} {nouns}")
        return
    if styles is None:
        lines.append(f"{count} {nouns}")
    else:
        lines[0] = f"{styles[0]}{lines[0]}\x1b[0m"
        lines.append(f"{styles[1]}{count}\x1b[0m {nouns}")
    sys.stdout.write("\n".join(lines) + "\n")
    sys.stdout.flush()


def print_rich_table(columns: Sequence[str], rows: Sequence[Sequence[str]], footer: str) -> None:
    """:func:`print_table` laid out by rich: cells folded to fit, wide characters."""
    from rich.console import Console  # only tables that need it pay for rich
    from rich.table import Table

    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*row)
    console = Console(file=sys.stdout, width=TABLE_WIDTH, soft_wrap=True)
    console.print(table)
    console.print(footer)


def print_records_table(records: Iterable[Notification]) -> None:
    """A readable table of records (the default ``noti list`` output)."""
    rows = (
        (
            r.id,
            r.channel.value,
            str(r.level),
            f"{int(r.status)} {r.status.name.lower()}",
            r.delivery or "",
            r.creator,
            r.target,
            f"{r.retry}/{r.retry_max}",
            when(r.created_ms),
            r.errmsg or "",
        )
        for r in records
    )
    columns = ("ID", "TYPE", "LV", "ST", "DELIVERY", "CREATOR", "TARGET", "RETRY", "CREATED (UTC)", "MESSAGE")
    print_table(columns, rows, "notification")


def rm_line(record: Notification) -> str:
    """The seed's report of a removed record: ``rm TYPE(ID)[ST] > TARGET``."""
    return f"rm {record.channel.value}({record.id})[{int(record.status)}] > {record.target}"


def status_names() -> str:
    return ", ".join(f"{int(s)} {s.name.lower()}" for s in Status)
