"""The HTTP/1.1 protocol ``noti serve`` runs: uvicorn's httptools protocol with limits on what a
client may hold.

uvicorn bounds neither a request's headers (httptools takes a 1 MB header) nor the time they
take, and arms its keep-alive timeout only after a first response: a connection that sends
nothing, or one header byte a second (slowloris), stays open for ever. Its
``limit_concurrency`` answers a plain-text 503. :class:`GuardedProtocol` adds, per connection,
from the settings (read once per process, :func:`limits`):

- ``NOTI_HTTP_IDLE_TIMEOUT_S``: a connection with no request in progress (a new one before its
  first byte too) is closed after this long;
- ``NOTI_HTTP_HEADER_TIMEOUT_S``: a request's line and headers must arrive within this long of
  its first byte, else 408 ``e.noti.http.timeout`` and the connection is closed;
- ``NOTI_HTTP_BODY_TIMEOUT_S``: its body within this long of its headers, else the same;
- ``NOTI_HTTP_HEADER_MAX_BYTES``: a longer request line and headers are answered 431
  ``e.noti.http.headers`` (counted as they arrive: a head that never ends is cut at the limit);
- ``NOTI_HTTP_REQUESTS_MAX``: a request that finds this many in progress in the process is
  answered 503 ``e.noti.http.busy`` (``Retry-After: 1``) without reaching the app;
- ``NOTI_HTTP_CONNECTIONS_MAX``: a connection past this many open is answered 503 and closed.

Every refusal is ``{"error": {"code", "message"}}`` as the app's are, with
``Connection: close``. The body's own limits are the app's (:class:`noti.http.guard.BodyLimit`).
"""

from __future__ import annotations

import asyncio
import functools
import json
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

__all__ = ["BUSY", "HEADERS_TOO_LARGE", "TIMEOUT", "GuardedProtocol", "Limits", "limits"]

#: 503: the process is at its request or connection limit.
BUSY = "e.noti.http.busy"
#: 431: the request line and headers are over ``NOTI_HTTP_HEADER_MAX_BYTES``.
HEADERS_TOO_LARGE = "e.noti.http.headers"
#: 408: the headers or the body did not arrive in time.
TIMEOUT = "e.noti.http.timeout"

_REASONS = {408: b"Request Timeout", 431: b"Request Header Fields Too Large", 503: b"Service Unavailable"}


@dataclass(frozen=True)
class Limits:
    """What one process of ``noti serve`` lets a client hold (see the module docstring)."""

    header_max_bytes: int
    header_timeout_s: float
    body_timeout_s: float
    idle_timeout_s: float
    requests_max: int
    connections_max: int


@functools.cache
def limits() -> Limits:
    """This process's limits, from its settings."""
    from noti.config import get_settings

    settings = get_settings()
    return Limits(
        header_max_bytes=settings.http_header_max_bytes,
        header_timeout_s=settings.http_header_timeout_s,
        body_timeout_s=settings.http_body_timeout_s,
        idle_timeout_s=settings.http_idle_timeout_s,
        requests_max=settings.http_requests_max,
        connections_max=settings.http_connections_max,
    )


def refusal(status: int, code: str, message: str) -> bytes:
    """A whole HTTP/1.1 answer that closes the connection."""
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    head = [
        b"HTTP/1.1 %d %s" % (status, _REASONS[status]),
        b"content-type: application/json",
        b"content-length: %d" % len(body),
        b"connection: close",
    ]
    if status == 503:
        head.append(b"retry-after: 1")
    return b"\r\n".join(head) + b"\r\n\r\n" + body


async def _busy_app(scope: Any, receive: Any, send: Any) -> None:
    """The app a request over ``NOTI_HTTP_REQUESTS_MAX`` reaches instead of noti's."""
    body = json.dumps(
        {"error": {"code": BUSY, "message": "this server is at its limit of requests in progress; try again"}}
    ).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", b"%d" % len(body)),
        (b"retry-after", b"1"),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": 503, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class GuardedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the limits of the module docstring."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.limits = limits()
        self.timeout_keep_alive = self.limits.idle_timeout_s  # type: ignore[assignment]
        self._app = self.app
        self._in_head = True  # between requests, or reading a request's line and headers
        self._head_bytes = 0
        self._head_over = False
        self._head_size = 0
        self._deadline: asyncio.TimerHandle | None = None

    # --- connections ------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.limits.connections_max:
            self._refuse(503, BUSY, "this server holds as many connections as it may; try again")
            return
        # a new connection waits for its first request as a kept-alive one does for its next
        self.timeout_keep_alive_task = self.loop.call_later(
            self.limits.idle_timeout_s, self.timeout_keep_alive_handler
        )

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_deadline()
        self._unset_keepalive_if_required()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._in_head:
            self._head_bytes += len(data)
            if self._deadline is None:  # a request's first byte: its head must be whole in time
                self._deadline = self.loop.call_later(
                    self.limits.header_timeout_s, self._timed_out, "its line and headers"
                )
        super().data_received(data)
        if self._in_head and self._head_bytes > self.limits.header_max_bytes and not self._closing():
            self._refuse_head()

    # --- parser callbacks -------------------------------------------------------------------------

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_size = 0

    def on_url(self, url: bytes) -> None:
        super().on_url(url)
        self._head_size += len(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        super().on_header(name, value)
        self._head_size += len(name) + len(value) + 4
        if self._head_size > self.limits.header_max_bytes:
            self._head_over = True
            raise ValueError("headers over the limit")  # stops the parser: send_400_response

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._cancel_deadline()
        self._deadline = self.loop.call_later(self.limits.body_timeout_s, self._timed_out, "its body")
        over = len(self.tasks) >= self.limits.requests_max
        self.app = _busy_app if over else self._app
        try:
            super().on_headers_complete()
        finally:
            self.app = self._app

    def on_message_complete(self) -> None:
        self._cancel_deadline()
        self._in_head = True
        self._head_bytes = 0
        super().on_message_complete()

    def send_400_response(self, msg: str) -> None:
        if self._head_over:
            self._refuse_head()
        else:
            super().send_400_response(msg)

    # --- refusals ---------------------------------------------------------------------------------

    def _refuse_head(self) -> None:
        self._refuse(
            431,
            HEADERS_TOO_LARGE,
            f"the request line and headers are over {self.limits.header_max_bytes:,} bytes",
        )

    def _timed_out(self, what: str) -> None:
        self._deadline = None
        if self._closing():
            return
        if self.cycle is not None and not self._in_head and self.cycle.response_started:
            self.transport.close()  # the answer is under way: nothing more can be said
            return
        after = self.limits.header_timeout_s if self._in_head else self.limits.body_timeout_s
        self._refuse(408, TIMEOUT, f"the request did not send {what} within {after:g} s")

    def _refuse(self, status: int, code: str, message: str) -> None:
        """Answer ``status`` with ``code`` and close the connection (nothing more is read)."""
        self._cancel_deadline()
        if self._closing():
            return
        if self.cycle is not None and not self.cycle.response_complete:
            self.cycle.keep_alive = False
            self.cycle.disconnected = True  # the app's own answer, if any, goes nowhere
        self.transport.write(refusal(status, code, message))
        self.transport.close()

    def _cancel_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _closing(self) -> bool:
        return self.transport is None or self.transport.is_closing()
