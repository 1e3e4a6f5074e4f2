"""How the CLI prints: the seed's JSON variants (-json -c -q -n), tables and report lines."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from rich.console import Console
from rich.table import Table

from noti.record import Notification, Status, to_json_dict

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


def print_table(columns: Iterable[str], rows: Iterable[Iterable[str]], noun: str) -> None:
    """A borderless table on stdout, then ``N noun(s)``."""
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in columns:
        table.add_column(column, overflow="fold")
    count = 0
    for row in rows:
        table.add_row(*row)
        count += 1
    console = Console(file=sys.stdout, width=220, soft_wrap=True)
    console.print(table)
    console.print(f"{count} {noun}{'s' if count != 1 else ''}")


def print_records_table(records: Iterable[Notification]) -> None:
    """A readable table of records (the default ``noti list`` output)."""
    rows = (
        (
            r.id,
            r.channel.value,
            str(r.level),
            f"{int(r.status)} {r.status.name.lower()}",
            r.creator,
            r.target,
            f"{r.retry}/{r.retry_max}",
            when(r.created_ms),
            r.errmsg or "",
        )
        for r in records
    )
    columns = ("ID", "TYPE", "LV", "ST", "CREATOR", "TARGET", "RETRY", "CREATED (UTC)", "MESSAGE")
    print_table(columns, rows, "notification")


def rm_line(record: Notification) -> str:
    """The seed's report of a removed record: ``rm TYPE(ID)[ST] > TARGET``."""
    return f"rm {record.channel.value}({record.id})[{int(record.status)}] > {record.target}"


def status_names() -> str:
    return ", ".join(f"{int(s)} {s.name.lower()}" for s in Status)
