"""Reading profiles for a bulk import: JSON lines, or CSV with a header row.

CSV columns: ``id`` (required), ``locale``, ``timezone``, ``quiet_hours``, one column per
channel named by the channel (``sms``, ``email``, ``push``, …) holding its addresses separated
by ``;`` (the primary first), ``attributes`` (a JSON object) and ``attr.<name>`` (one text
attribute each). An unknown column refuses the whole file before anything is stored; an empty
cell is left out. A bad row (bad JSON, a bad address) is refused alone: the importer lists it
and stores the rest (:meth:`noti.recipients.store.RecipientStore.import_many`).
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator
from typing import Any

from noti.core.record import parse_channel
from noti.errors import InvalidInput, NotiError
from noti.inputs import load_json, shown

__all__ = ["rows_of_csv", "rows_of_jsonl", "rows_of_file"]

#: A CSV field may be as large as a whole profile.
csv.field_size_limit(64 * 1024)
_PLAIN = ("id", "locale", "timezone", "quiet_hours")


def rows_of_jsonl(lines: Iterable[str]) -> Iterator[object]:
    """Profiles from JSON lines (blank lines skipped); a bad line yields an
    :class:`~noti.errors.InvalidInput` in its place."""
    for line in lines:
        if not line.strip():
            continue
        row: object
        try:
            row = load_json(line, what="the line", code="e.cmd.noti.rcpt.baddoc")
        except InvalidInput as exc:  # not JSON, NaN, nested too deeply for the parser
            row = exc
        yield row


def _column(name: str) -> str:
    if name in _PLAIN or name == "attributes":
        return name
    if name.startswith("attr.") and 5 < len(name) <= 69:
        return name
    try:
        return "addr:" + parse_channel(name).value
    except NotiError:
        raise InvalidInput(
            f"unknown CSV column {shown(name)} (id, locale, timezone, quiet_hours, a channel, "
            "attributes, attr.<name>)",
            code="e.cmd.noti.rcpt.badcsv",
        ) from None


def rows_of_csv(lines: Iterable[str]) -> Iterator[object]:
    """Profiles from CSV with a header row (see the module).

    Raises:
        InvalidInput: ``e.cmd.noti.rcpt.badcsv``: no header, no ``id`` column, an unknown or
        repeated column (before any row is read).
    """
    reader = csv.reader(lines)
    try:
        header = next(reader)
    except StopIteration:
        raise InvalidInput("the CSV file is empty", code="e.cmd.noti.rcpt.badcsv") from None
    except csv.Error as exc:
        raise InvalidInput(f"the CSV header cannot be read: {exc}", code="e.cmd.noti.rcpt.badcsv") from None
    columns = [_column(h.strip()) for h in header]
    if "id" not in columns:
        raise InvalidInput("the CSV file has no id column", code="e.cmd.noti.rcpt.badcsv")
    if len(set(columns)) != len(columns):
        raise InvalidInput("a CSV column is named twice", code="e.cmd.noti.rcpt.badcsv")
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            yield InvalidInput(f"a CSV row cannot be read: {exc}", code="e.cmd.noti.rcpt.badcsv")
            continue
        if not any(c.strip() for c in cells):
            continue
        if len(cells) != len(columns):
            yield InvalidInput(
                f"a CSV row has {len(cells)} cells, the header {len(columns)}", code="e.cmd.noti.rcpt.badcsv"
            )
            continue
        yield _profile(columns, cells)


def _profile(columns: list[str], cells: list[str]) -> object:
    profile: dict[str, Any] = {}
    addresses: dict[str, list[str]] = {}
    attributes: dict[str, Any] = {}
    for column, cell in zip(columns, cells, strict=True):
        if cell == "":
            continue
        if column in _PLAIN:
            profile[column] = cell
        elif column == "attributes":
            try:
                given = load_json(cell, what="the attributes cell", code="e.cmd.noti.rcpt.badattrs")
            except InvalidInput as exc:  # not JSON, NaN, nested too deeply for the parser
                return exc
            if not isinstance(given, dict):
                return InvalidInput(
                    "the attributes cell is not a JSON object", code="e.cmd.noti.rcpt.badattrs"
                )
            attributes.update(given)
        elif column.startswith("attr."):
            attributes[column[5:]] = cell
        else:
            addresses[column[5:]] = [a.strip() for a in cell.split(";") if a.strip()]
    if addresses:
        profile["addresses"] = addresses
    if attributes:
        profile["attributes"] = attributes
    return profile


def rows_of_file(lines: Iterable[str], *, kind: str) -> Iterator[object]:
    """Profiles from ``lines`` of a ``csv`` or ``jsonl`` file.

    Raises:
        InvalidInput: ``e.cmd.noti.rcpt.badformat``: another kind.
    """
    if kind == "csv":
        return rows_of_csv(lines)
    if kind in ("jsonl", "ndjson", "json"):
        return rows_of_jsonl(lines)
    raise InvalidInput(f"an import file is csv or jsonl, not {shown(kind)}", code="e.cmd.noti.rcpt.badformat")
