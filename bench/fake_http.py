"""A fake HTTP provider: answers every POST with ``200`` after a fixed delay (20 ms).

One process, one asyncio loop (uvloop when installed), HTTP/1.1 keep-alive, parsing just the
request line, the headers and a ``Content-Length`` body. Answers are sent with
``loop.call_later`` (nothing sleeps), in request order on each connection, so pipelined
requests are safe. Each POST's Standard Webhooks signature (``webhook-id``,
``webhook-timestamp``, ``webhook-signature: v1,<base64 HMAC-SHA256>``) is checked against the
``whsec_`` secret and counted good, bad or unsigned; ``(webhook-id, arrival time.time())``
is recorded.

Endpoints besides POST: ``GET /count`` (POSTs answered, a number), ``GET /stats`` (JSON:
counts and arrivals), ``GET /reset``.

    .venv/bin/python -m bench.fake_http --port 8099 [--delay-ms 20] [--secret whsec_...]

:class:`FakeHttp` starts it as a subprocess on a free port and stops it.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import binascii
import hashlib
import hmac
import http.client
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import deque
from pathlib import Path
from typing import Any, cast

__all__ = ["FakeHttp", "Stats", "serve"]

MAX_HEAD = 64 * 1024
OK_BODY = b'{"ok":true}'
OK = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(OK_BODY)
    + OK_BODY
)


def _response(status: str, body: bytes, close: bool = False) -> bytes:
    extra = b"Connection: close\r\n" if close else b""
    head = f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    return head.encode() + extra + b"\r\n" + body


class Stats:
    """What the server saw."""

    def __init__(self, key: bytes) -> None:
        self.key = key
        self.reset()

    def reset(self) -> None:
        self.good = self.bad = self.unsigned = self.answered = 0
        self.arrivals: list[tuple[str, float]] = []

    def check(self, headers: dict[str, str], body: bytes) -> None:
        """Classify one POST's signature and record its arrival."""
        arrival = time.time()
        webhook_id = headers.get("webhook-id")
        ts = headers.get("webhook-timestamp")
        signatures = headers.get("webhook-signature")
        if webhook_id is None or ts is None or signatures is None:
            self.unsigned += 1
            self.arrivals.append((webhook_id or "", arrival))
            return
        digest = hmac.new(self.key, f"{webhook_id}.{ts}.".encode() + body, hashlib.sha256).digest()
        expected = "v1," + base64.b64encode(digest).decode()
        if any(hmac.compare_digest(expected, s) for s in signatures.split()):
            self.good += 1
        else:
            self.bad += 1
        self.arrivals.append((webhook_id, arrival))

    def as_json(self) -> dict[str, Any]:
        return {
            "good": self.good,
            "bad": self.bad,
            "unsigned": self.unsigned,
            "answered": self.answered,
            "arrivals": self.arrivals,
        }


class HttpProtocol(asyncio.Protocol):
    """One keep-alive connection: parse requests, answer them in order."""

    def __init__(self, stats: Stats, delay_s: float) -> None:
        self.stats = stats
        self.delay_s = delay_s
        self.buffer = bytearray()
        self.pending: deque[list[Any]] = deque()  # [ready, response, counts as answered, close]
        self.transport: asyncio.Transport | None = None
        self.loop = asyncio.get_running_loop()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a stream transport (uvloop's are not asyncio.Transport subclasses)
        self.transport = cast(asyncio.Transport, transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while self.transport is not None:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buffer) > MAX_HEAD:
                    self._queue(_response("431 Too Large", b"{}", close=True), ready=True)
                return
            lines = bytes(self.buffer[:end]).decode("latin-1").split("\r\n")
            headers = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            length = int(headers.get("content-length", "0") or 0)
            if len(self.buffer) < end + 4 + length:
                return
            body = bytes(self.buffer[end + 4 : end + 4 + length])
            del self.buffer[: end + 4 + length]
            method, _, rest = lines[0].partition(" ")
            self._handle(method, rest.partition(" ")[0], headers, body)

    def _handle(self, method: str, path: str, headers: dict[str, str], body: bytes) -> None:
        close = headers.get("connection", "").lower() == "close"
        if "chunked" in headers.get("transfer-encoding", ""):
            self._queue(_response("411 Length Required", b"{}", True), ready=True, close=True)
        elif method == "POST":
            self.stats.check(headers, body)
            slot = self._queue(
                _response("200 OK", OK_BODY, True) if close else OK, answered=True, close=close
            )
            self.loop.call_later(self.delay_s, self._ready, slot)
        elif path == "/count":
            self._queue(
                _response("200 OK", str(self.stats.answered).encode(), close), ready=True, close=close
            )
        elif path == "/stats":
            data = json.dumps(self.stats.as_json()).encode()
            self._queue(_response("200 OK", data, close), ready=True, close=close)
        elif path == "/reset":
            self.stats.reset()
            self._queue(_response("200 OK", b"{}", close), ready=True, close=close)
        else:
            self._queue(_response("404 Not Found", b"{}", close), ready=True, close=close)

    def _queue(
        self, response: bytes, *, ready: bool = False, answered: bool = False, close: bool = False
    ) -> list[Any]:
        slot: list[Any] = [ready, response, answered, close]
        self.pending.append(slot)
        if ready:
            self._flush()
        return slot

    def _ready(self, slot: list[Any]) -> None:
        slot[0] = True
        self._flush()

    def _flush(self) -> None:
        while self.pending and self.pending[0][0]:
            slot = self.pending.popleft()
            if self.transport is None or self.transport.is_closing():
                continue
            self.transport.write(slot[1])
            if slot[2]:
                self.stats.answered += 1
            if slot[3]:
                self.transport.close()


def _key(secret: str) -> bytes:
    encoded = secret.removeprefix("whsec_")
    try:
        return base64.b64decode(encoded + "=" * (-len(encoded) % 4))
    except binascii.Error:
        sys.exit("--secret is not whsec_<base64>")


async def serve(port: int, delay_s: float, secret: str) -> None:
    """Serve on 127.0.0.1:``port`` until SIGTERM or SIGINT."""
    loop = asyncio.get_running_loop()
    stats = Stats(_key(secret))
    server = await loop.create_server(lambda: HttpProtocol(stats, delay_s), "127.0.0.1", port, backlog=1024)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument("--secret", default="whsec_")
    args = parser.parse_args()
    try:
        import uvloop

        uvloop.run(serve(args.port, args.delay_ms / 1000, args.secret))
    except ImportError:
        asyncio.run(serve(args.port, args.delay_ms / 1000, args.secret))


class FakeHttp:
    """The fake provider as a subprocess on a free loopback port (a context manager)."""

    def __init__(self, secret: str, delay_ms: float = 20.0) -> None:
        from bench._harness import free_port

        self.secret = secret
        self.delay_ms = delay_ms
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self._conn: http.client.HTTPConnection | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def __enter__(self) -> FakeHttp:
        from bench._harness import wait_for

        self._log = tempfile.NamedTemporaryFile(prefix="noti-bench-fakehttp-", suffix=".log", delete=False)
        cmd = [sys.executable, "-m", "bench.fake_http", "--port", str(self.port)]
        cmd += ["--delay-ms", str(self.delay_ms), "--secret", self.secret]
        root = Path(__file__).resolve().parent.parent
        self.proc = subprocess.Popen(
            cmd, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True, cwd=root
        )
        wait_for(self._answers, 10, 0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._conn is not None:
            self._conn.close()
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        self._log.close()
        Path(self._log.name).unlink(missing_ok=True)

    def _answers(self) -> bool:
        try:
            self.count()
            return True
        except OSError:
            self._conn = None
            return False

    def _get(self, path: str) -> bytes:
        for attempt in (1, 2):  # one reconnect if the kept-alive connection went away
            if self._conn is None:
                self._conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
            try:
                self._conn.request("GET", path)
                response = self._conn.getresponse()
                return response.read()
            except (http.client.HTTPException, OSError):
                self._conn.close()
                self._conn = None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def count(self) -> int:
        """POSTs answered so far."""
        return int(self._get("/count"))

    def stats(self) -> dict[str, Any]:
        result: dict[str, Any] = json.loads(self._get("/stats"))
        return result

    def reset(self) -> None:
        self._get("/reset")

    def expect(self, n: int, ids: set[str] | None = None) -> None:
        """Raise :class:`~bench._drain.DrainFailed` unless exactly ``n`` POSTs arrived since the
        last :meth:`reset`, every one correctly signed (and, with ``ids``, their webhook-ids
        are exactly ``ids``)."""
        from bench._drain import DrainFailed

        stats = self.stats()
        seen = [a[0] for a in stats["arrivals"]]
        if stats["good"] != n or stats["bad"] or stats["unsigned"] or len(seen) != n:
            counts = {k: v for k, v in stats.items() if k != "arrivals"}
            raise DrainFailed(f"the fake server saw {len(seen)} POSTs for {n}: {counts}")
        if ids is not None and set(seen) != ids:
            raise DrainFailed(f"the fake server saw other webhook-ids than expected ({len(set(seen) - ids)})")

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid


if __name__ == "__main__":
    main()
