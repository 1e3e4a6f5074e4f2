"""A scriptable fake HTTP server on 127.0.0.1 for provider tests (and benchmarks).

A vendor fake subclasses :class:`FakeServer` and implements :meth:`Scripted.verify`
(check the request exactly as the vendor does — signature, token, required fields — and
return the vendor's refusal, or None) and :meth:`Scripted.succeed` (the vendor's success
answer). A request that fails verification always gets the refusal; one that passes gets
the next scripted reply, else the success. Tests script the next answers
(``fake.script(Reply(...))``), make the fake slow (``fake.delay_s``), drop connections
(``Reply(hang_s=…)``, ``Reply(close=True)``), read what it received (``fake.requests``) and
:meth:`~Scripted.reset` a fake kept running across tests; a subclass hears when each answer
has been written (:meth:`Scripted.answered`). :class:`Scripted` is that contract whatever
the fake speaks (HTTP/2 over TLS: :mod:`tests.fakes._h2`).

:class:`LoopbackServer` (a threading server on a free loopback port), :func:`read_request` and
:func:`write_answer` (the two ends of one HTTP/1.1 exchange) serve any local HTTP server of the
tests, as they serve :class:`FakeServer` (the receipt sink of :mod:`tests.fakes._receipts` is
another).
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self
from urllib.parse import parse_qs, urlsplit

__all__ = ["FakeServer", "LoopbackServer", "Received", "Reply", "Scripted", "read_request", "write_answer"]


@dataclass(frozen=True, slots=True)
class Received:
    """One request the fake received."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    def json_object(self) -> dict[str, Any] | None:
        """The body as a JSON object; None when it is not one (not UTF-8, not JSON, not an
        object): what a vendor refuses before it reads a single field."""
        try:
            body = json.loads(self.body.decode("utf-8"))
        except ValueError:  # UnicodeDecodeError too
            return None
        return body if isinstance(body, dict) else None

    def form(self) -> dict[str, list[str]]:
        return parse_qs(self.body.decode())


@dataclass(frozen=True, slots=True)
class Reply:
    """An answer: status, headers, body (bytes, str, or JSON-able), or a misbehaviour."""

    status: int = 200
    body: Any = b""
    headers: dict[str, str] = field(default_factory=dict)
    #: Sleep this long before answering (longer than the client's timeout: a timeout).
    hang_s: float = 0.0
    #: Close the connection without answering.
    close: bool = False

    def encoded(self) -> tuple[bytes, str]:
        if isinstance(self.body, bytes):
            return self.body, self.headers.get("content-type", "application/octet-stream")
        if isinstance(self.body, str):
            return self.body.encode(), self.headers.get("content-type", "text/plain; charset=utf-8")
        return json.dumps(self.body, ensure_ascii=False).encode(), "application/json"


def read_request(handler: BaseHTTPRequestHandler) -> tuple[dict[str, str], bytes]:
    """The headers (names in lower case) and the body of the request ``handler`` is serving."""
    length = int(handler.headers.get("content-length") or 0)
    body = handler.rfile.read(length) if length else b""
    return {k.lower(): v for k, v in handler.headers.items()}, body


def write_answer(
    handler: BaseHTTPRequestHandler,
    status: int,
    payload: bytes,
    content_type: str,
    headers: dict[str, str] | None = None,
) -> None:
    """Answer the request ``handler`` is serving: ``status``, ``payload`` of ``content_type``
    (its length stated, the connection kept), and ``headers`` (a content-type among them is
    ``content_type``'s to say)."""
    handler.send_response(status)
    handler.send_header("content-type", content_type)
    handler.send_header("content-length", str(len(payload)))
    for name, value in (headers or {}).items():
        if name.lower() != "content-type":
            handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(payload)
    handler.wfile.flush()


class Scripted:
    """What every vendor fake has, whatever it speaks: the requests it received, its script of
    answers, its delay, and the vendor's own checks and success (:meth:`verify`,
    :meth:`succeed`) that a subclass writes. A transport (:class:`FakeServer`,
    :class:`~tests.fakes._h2.H2FakeServer`) hands each request to :meth:`_next` and writes the
    answer it returns."""

    #: The thread the transport serves on.
    _thread: threading.Thread

    def __init__(self) -> None:
        self.requests: list[Received] = []
        self.delay_s = 0.0
        self._script: deque[Reply] = deque()
        self._lock = threading.Lock()

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def reset(self) -> None:
        """Forget the requests, the script and the delay, to reuse one running fake across
        tests (a fake with more state forgets that too)."""
        with self._lock:
            self.requests.clear()
            self._script.clear()
        self.delay_s = 0.0

    def script(self, *replies: Reply) -> None:
        """Answer the next requests with these replies (after the checks of :meth:`verify`)."""
        with self._lock:
            self._script.extend(replies)

    def _next(self, received: Received) -> Reply:
        with self._lock:
            self.requests.append(received)
        refusal = self.verify(received)
        if refusal is not None:
            return refusal
        with self._lock:
            scripted = self._script.popleft() if self._script else None
        return scripted if scripted is not None else self.succeed(received)

    def verify(self, received: Received) -> Reply | None:
        """The vendor's refusal of a request it would not accept (bad signature…), or None."""
        raise NotImplementedError

    def succeed(self, received: Received) -> Reply:
        """The vendor's answer to an accepted request nobody scripted an answer for."""
        raise NotImplementedError

    def answered(self, received: Received) -> None:
        """Called once the answer to ``received`` is written (on the thread that wrote it)."""


class LoopbackServer(ThreadingHTTPServer):
    """A threading HTTP/1.1 server on a free loopback port whose every request ``handle``
    answers (e.g. with :func:`read_request` and :func:`write_answer`); :meth:`serving` is
    the thread to serve it on."""

    # a vendor accepts many connections at once (batch-mode workers open dozens); the
    # default backlog of 5 resets some of them under load
    request_queue_size = 256
    daemon_threads = True

    def __init__(self, handle: Callable[[BaseHTTPRequestHandler], None]) -> None:
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                handle(self)

            do_GET = do_POST = do_PUT = do_DELETE = _handle

        super().__init__(("127.0.0.1", 0), Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    def serving(self, name: str) -> threading.Thread:
        # a short poll: shutdown() waits up to one poll interval (0.5 s by default, per test)
        return threading.Thread(
            target=self.serve_forever, kwargs={"poll_interval": 0.05}, name=name, daemon=True
        )


class FakeServer(Scripted):
    """Base of the vendor fakes over HTTP/1.1: a threading HTTP server on 127.0.0.1."""

    def __init__(self) -> None:
        super().__init__()
        self._httpd = LoopbackServer(self._exchange)
        self._thread = self._httpd.serving(type(self).__name__)

    def _exchange(self, handler: BaseHTTPRequestHandler) -> None:
        headers, body = read_request(handler)
        parts = urlsplit(handler.path)
        received = Received(handler.command, parts.path, parse_qs(parts.query), headers, body)
        reply = self._next(received)
        if self.delay_s:
            time.sleep(self.delay_s)
        if reply.hang_s:
            time.sleep(reply.hang_s)
        if reply.close:
            handler.close_connection = True
            handler.connection.shutdown(2)
            return
        payload, content_type = reply.encoded()
        write_answer(handler, reply.status, payload, content_type, reply.headers)
        self.answered(received)

    @property
    def url(self) -> str:
        return self._httpd.url

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
