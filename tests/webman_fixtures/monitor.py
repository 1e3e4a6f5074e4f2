"""Recording the commands a Redis database receives (MONITOR), for comparison with the vectors."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from urllib.parse import urlsplit

import redis

_ESCAPES = {ord("n"): b"\n", ord("r"): b"\r", ord("t"): b"\t", ord("a"): b"\a", ord("b"): b"\b"}
#: Connection chatter that is not part of what the bridge does.
_NOISE = {"HELLO", "SELECT", "CLIENT", "PING", "ECHO", "MULTI", "EXEC", "SCRIPT", "INFO"}


def _unquote(line: bytes) -> list[str]:
    """The quoted arguments of a MONITOR line (``sdscatrepr`` escaping) as text."""
    args: list[str] = []
    i = line.index(b"]") + 1
    while i < len(line):
        if line[i : i + 1] != b'"':
            i += 1
            continue
        i += 1
        out = bytearray()
        while line[i : i + 1] != b'"':
            ch = line[i]
            if ch == ord("\\"):
                nxt = line[i + 1]
                if nxt == ord("x"):
                    out.append(int(line[i + 2 : i + 4], 16))
                    i += 4
                    continue
                out += _ESCAPES.get(nxt, bytes([nxt]))
                i += 2
                continue
            out.append(ch)
            i += 1
        args.append(out.decode("utf-8", "surrogateescape"))
        i += 1
    return args


@dataclass(frozen=True, slots=True)
class Command:
    db: int
    lua: bool
    args: list[str]


class Monitor:
    """``with Monitor(url) as m: ...; m.commands()``: the commands database ``db`` received."""

    def __init__(self, server_url: str, db: int) -> None:
        parts = urlsplit(server_url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 6379
        self.db = db
        self._conn = redis.Connection(host=self.host, port=self.port, protocol=2)

    def __enter__(self) -> Monitor:
        self._conn.connect()
        self._conn.send_command("MONITOR")
        assert self._conn.read_response() == b"OK"
        return self

    def __exit__(self, *exc: object) -> None:
        self._conn.disconnect()

    def commands(self) -> list[Command]:
        """Everything received so far, in order (a sentinel marks the end)."""
        sentinel = f"monitor-end-{uuid.uuid4().hex}"
        with redis.Redis(host=self.host, port=self.port, db=self.db, protocol=2) as client:
            client.echo(sentinel)
        found: list[Command] = []
        while True:
            line = self._conn.read_response()
            assert isinstance(line, bytes)
            head = line[line.index(b"[") + 1 : line.index(b"]")].split()
            args = _unquote(line)
            if args[:2] == ["ECHO", sentinel]:
                return found
            found.append(Command(int(head[0]), head[1] == b"lua", args))

    def bridge_commands(self) -> list[list[str]]:
        """What the monitored database received, without connection chatter."""
        return [c.args for c in self.commands() if c.db == self.db and c.args[0].upper() not in _NOISE]
