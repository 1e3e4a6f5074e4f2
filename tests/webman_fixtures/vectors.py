"""The golden vectors of the PHP plugin webman-redis-queue: loading, PHP values, and
normalising what is volatile.

``vectors.json`` beside this module is a copy of the project's ``shared/compat/webman/vectors.json``
(captured from the real PHP plugin; copied unchanged on 2026-11-25, sha256 prefix in
``VECTORS_SHA256``), so a clone with nothing beside it runs the golden tests.

Volatile values (layout.md, vectors ``meta.volatile``): stream ids, automatic identifiers, lock
tokens and consumer names. They are replaced by placeholders numbered in order of first
appearance, so two runs that do the same thing compare equal.
"""

from __future__ import annotations

import base64
import json
import os
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest

VECTORS = Path(__file__).resolve().parent / "vectors.json"
#: The first 16 hex digits of the copied file's sha256.
VECTORS_SHA256 = "096dd41b15cdccef"

_STREAM_ID = re.compile(r"^[1-9][0-9]{9,}-[0-9]+$")
_AUTO_ID = re.compile(r"^[0-9a-f]{32}-[0-9]+$")
_NOTI_CONSUMER = re.compile(r"^(.+)-noti-[A-Za-z0-9._]+-[0-9]+-(\w+)$")


@cache
def load() -> dict[str, Any]:
    if not VECTORS.is_file():
        message = f"golden vectors not found at {VECTORS}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    data: dict[str, Any] = json.loads(VECTORS.read_text())
    return data


def scenarios() -> list[dict[str, Any]]:
    return list(load()["scenarios"])


def scenario(name: str) -> dict[str, Any]:
    return next(s for s in scenarios() if s["name"] == name)


def php_value(value: Any) -> Any:
    """A PHP argument of the vectors as a Python value (``$float``, ``$base64``)."""
    if isinstance(value, dict):
        if set(value) == {"$float"}:
            return float(value["$float"])
        if set(value) == {"$base64"}:
            return base64.b64decode(value["$base64"])
        return {k: php_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [php_value(v) for v in value]
    return value


class Normaliser:
    """Replaces volatile values by ``<id1>``, ``<auto1>``, ``<token>``, ``<group>-<tag>``."""

    def __init__(self) -> None:
        self.ids: dict[str, str] = {}
        self.autos: dict[str, str] = {}

    def value(self, text: str) -> str:
        if _STREAM_ID.match(text):
            return self.ids.setdefault(text, f"<id{len(self.ids) + 1}>")
        if _AUTO_ID.match(text):
            return self.autos.setdefault(text, f"<auto{len(self.autos) + 1}>")
        noti = _NOTI_CONSUMER.match(text)
        if noti:
            return f"{noti.group(1)}-{noti.group(2)}"
        return text

    def command(self, args: list[str]) -> list[str]:
        out = [self.value(a) for a in args]
        name = out[0].upper()
        out[0] = name
        if name == "SET" and len(out) > 2:  # the token is random; option order is not meaningful
            out[2] = "<token>"
            options = " ".join(out[3:]).replace("EX ", "EX=").split()
            out[3:] = [part for option in sorted(options) for part in option.split("=")]
        if name in ("EVAL", "EVALSHA"):
            out[:2] = ["EVAL", "<mover>"]
        return out

    def commands(self, commands: list[list[str]]) -> list[list[str]]:
        """Normalised, with each delayed write as PHP orders it (ZADD, then HSET of the same
        id), and the bridge's settling of a consume tick (one XACK of its entries, then one
        XDEL of the same) as PHP's per-entry XACK, XDEL pairs."""
        out = [self.command(c) for c in commands]
        for i in range(len(out) - 1):
            first, second = out[i], out[i + 1]
            if first[0] == "HSET" and second[0] == "ZADD" and first[2] == second[3]:
                out[i], out[i + 1] = second, first
        expanded: list[list[str]] = []
        i = 0
        while i < len(out):
            command = out[i]
            if command[0] == "XACK" and len(command) > 4:
                stream, group, ids = command[1], command[2], command[3:]
                deletes = i + 1 < len(out) and out[i + 1] == ["XDEL", stream, *ids]
                for entry in ids:
                    expanded.append(["XACK", stream, group, entry])
                    if deletes:
                        expanded.append(["XDEL", stream, entry])
                i += 2 if deletes else 1
                continue
            expanded.append(command)
            i += 1
        return expanded

    def entries(self, entries: list[tuple[str, dict[str, str]]]) -> list[tuple[str, dict[str, str]]]:
        return [(self.value(i), dict(f)) for i, f in entries]


def captured_commands(step: dict[str, Any], norm: Normaliser) -> list[list[str]]:
    """The plugin's (and its script's) commands of one step, normalised."""
    return norm.commands(
        [rc["args"] for rc in step.get("redis_commands", []) if rc["client"] in ("plugin", "lua")]
    )
