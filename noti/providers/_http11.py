"""A small HTTP/1.1 client on asyncio for the send loop's provider POSTs (webhooks).

Why not aiohttp: with 64 POSTs in flight against the same keep-alive server on this 2-core
machine, aiohttp's request path cost 420-500 µs of CPU per request and this client 120-170
µs; a worker sending to a 20 ms receiver is bound by the GIL, so that is its throughput and
its latency. It does only what a provider POST needs:

- one request, one answer: ``POST`` with a body and a ``Content-Length``; no redirects
  (a 3xx is an answer), no cookies, no proxies, no ``Expect: 100-continue``;
- keep-alive connections per (scheme, host, port, TLS name) and event loop, reused only
  while open with nothing unread on them (bytes a server sent unasked never answer the next
  request); idle ones older than :data:`IDLE_S` are closed, for every destination;
- a user and password in the URL are sent as ``Authorization: Basic``, as httpx does;
- the timeout covers the whole request, a wait for a free connection included: a request
  whose time ran out before it was written is not sent (:class:`CannotConnect`);
- TLS with the system's trust store (``ssl.create_default_context``, which honours
  ``SSL_CERT_FILE``), SNI and host-name checks on ``server_hostname`` when the URL's host was
  replaced by its checked address;
- answers framed by ``Content-Length``, ``Transfer-Encoding: chunked`` or the connection's
  end (RFC 9112 §6.3); 1xx answers skipped; bodies up to :data:`MAX_BODY` bytes (the rest
  is dropped with the connection: receivers' answers are read for their status, headers and
  an excerpt); a ``gzip``/``deflate`` body is inflated when it can be.

Failures are three classes, which :func:`map_errors` turns into the outcome classes exactly
as :mod:`noti.providers._http` does for httpx: :class:`CannotConnect` (nothing was sent:
DNS, refused, TLS handshake or certificate, connect timeout), :class:`NoCompleteAnswer`
(the request may have arrived: timeout after connecting, closed connection, an answer
that is not HTTP) and :class:`Unencodable` (the request cannot be written).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import re
import ssl
import weakref
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache

import httpx

from noti.providers._http import cannot_connect, no_complete_answer, unencodable

__all__ = [
    "CannotConnect",
    "HttpError",
    "NoCompleteAnswer",
    "Response",
    "Unencodable",
    "Destination",
    "close_pool",
    "parse_destination",
    "map_errors",
    "post",
]

#: Requests one event loop has in flight at most (each holds one connection).
MAX_CONNECTIONS = 1000
#: Idle keep-alive connections kept per destination.
MAX_IDLE_PER_DESTINATION = 256
#: An idle connection older than this is closed rather than reused: servers drop theirs
#: (Node.js after 5 s), and one dropped as the request goes out leaves its outcome unknown.
IDLE_S = 4.0
#: Bytes of an answer's head (status line and headers) read at most.
MAX_HEAD = 64 * 1024
#: Bytes of an answer's body kept; a longer body is cut and its connection closed.
MAX_BODY = 1024 * 1024
#: Informational (1xx) answers skipped before the final one, at most.
MAX_INFORMATIONAL = 8
#: Share of the timeout that connecting (and the TLS handshake) may take.
CONNECT_SHARE = 0.9

_STATUS_LINE = re.compile(rb"HTTP/1\.([01]) (\d{3})(?: [^\r\n]*)?")
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_FIELD_VALUE = re.compile(r"[\t\x20-\x7e]*")
_CHARSET = re.compile(r"charset=\"?([\w.:-]+)", re.IGNORECASE)


class HttpError(Exception):
    """The request failed before a complete answer came back."""


class CannotConnect(HttpError):
    """No connection (DNS, refused, TLS, connect timeout): nothing was sent."""


class NoCompleteAnswer(HttpError):
    """Connected and (maybe) sent, but no complete HTTP answer: it may have arrived."""


class Unencodable(HttpError):
    """The request cannot be written (its URL or a header)."""


@dataclass(frozen=True, slots=True)
class Response:
    """A complete answer."""

    status: int
    #: Lower-case names; a repeated header's values joined with ", ".
    headers: dict[str, str]
    body: bytes

    def text(self) -> str:
        """The body as text (the ``charset`` of its content type, else UTF-8; bad bytes replaced)."""
        charset = "utf-8"
        content_type = self.headers.get("content-type", "")
        match = _CHARSET.search(content_type) if "charset" in content_type.lower() else None
        if match:
            charset = match.group(1)
        try:
            return self.body.decode(charset, errors="replace")
        except LookupError:
            return self.body.decode("utf-8", errors="replace")


@dataclass(frozen=True, slots=True)
class Destination:
    """Where a URL's requests go, and the start of their request head."""

    tls: bool
    host: str
    port: int
    #: ``POST <target> HTTP/1.1`` and ``Host:`` (unless the caller gives one).
    request_line: bytes
    host_header: bytes
    #: ``Authorization: Basic`` from the URL's user and password, as httpx sends it (unless
    #: the caller gives an ``Authorization``); empty when the URL has none.
    auth_header: bytes


@lru_cache(maxsize=1024)  # a service posts to a few endpoints: parse each once
def parse_destination(url: str) -> Destination:
    """Where ``url``'s requests go (parsed as httpx does, once per URL; the webhook's
    target check reads its host the same way).

    Raises:
        Unencodable: not an http(s) URL with a host and a TCP port.
    """
    try:
        parts = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise Unencodable(f"not a URL: {exc}") from exc
    if parts.scheme not in ("http", "https") or not parts.host:
        raise Unencodable(f"not an http(s) URL with a host: {url!r}")
    tls = parts.scheme == "https"
    if not 0 < (parts.port or 1) < 65536:
        raise Unencodable(f"not a TCP port: {parts.port}")
    host = parts.raw_host.decode("ascii").replace("%25", "%")  # an IPv6 zone id, percent-encoded
    target = parts.raw_path or b"/"
    auth = b""
    if parts.userinfo:
        token = base64.b64encode(parts.username.encode() + b":" + parts.password.encode())
        auth = b"Authorization: Basic " + token + b"\r\n"
    return Destination(
        tls=tls,
        host=host,
        port=parts.port or (443 if tls else 80),
        request_line=b"POST " + target + b" HTTP/1.1\r\n",
        host_header=b"Host: " + parts.netloc + b"\r\n",
        auth_header=auth,
    )


@dataclass(slots=True)
class _Pool:
    """One event loop's connections."""

    #: Requests in flight, and a future set when one ends while others wait for a slot
    #: (an asyncio.Semaphore cost ~5 % of a busy worker's CPU for a limit rarely reached).
    active: int = 0
    freed: asyncio.Future[None] | None = None
    #: The timer of the next sweep of idle connections, armed while any are kept.
    sweeper: asyncio.TimerHandle | None = None
    #: Set by :func:`close_pool`: connections coming back are closed, not kept.
    closed: bool = False
    idle: dict[
        tuple[bool, str, int, str | None], list[tuple[asyncio.StreamReader, asyncio.StreamWriter, float]]
    ] = field(default_factory=dict)


_pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Pool] = weakref.WeakKeyDictionary()
_tls_context: ssl.SSLContext | None = None


def _tls() -> ssl.SSLContext:
    global _tls_context
    if _tls_context is None:
        _tls_context = ssl.create_default_context()
    return _tls_context


def _pool() -> _Pool:
    loop = asyncio.get_running_loop()
    pool = _pools.get(loop)
    if pool is None:
        pool = _pools[loop] = _Pool()
    return pool


async def post(
    url: str,
    body: bytes,
    headers: Mapping[str, str],
    *,
    timeout_s: float,
    server_hostname: str | None = None,
) -> Response:
    """POST ``body`` to ``url`` and read the whole answer, within ``timeout_s`` in all.

    ``headers`` are sent as given (``Host`` too, when given: the URL's host may be an
    address checked in its name's place, ``server_hostname`` then being the name for TLS);
    ``Content-Length`` is added, and ``User-Agent: noti`` unless given.

    Raises:
        CannotConnect: nothing was sent.
        NoCompleteAnswer: the request may have arrived; no complete answer came back.
        Unencodable: the URL or a header cannot be written.
    """
    destination = parse_destination(url)
    head = _request_head(destination, headers, len(body))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    pool = _pool()
    key = (destination.tls, destination.host, destination.port, server_hostname)
    while pool.active >= MAX_CONNECTIONS:
        if pool.freed is None or pool.freed.done():
            pool.freed = loop.create_future()
        try:
            async with asyncio.timeout_at(deadline):
                await asyncio.shield(pool.freed)
        except TimeoutError as exc:
            raise CannotConnect(f"no free connection within {timeout_s:g} s") from exc
    pool.active += 1
    try:
        connect_s = min(timeout_s * CONNECT_SHARE, deadline - loop.time())
        reader, writer = await _connect(pool, key, destination, server_hostname, connect_s)
        if loop.time() >= deadline:  # the wait for a slot took it all: send nothing
            _release(pool, key, reader, writer, loop.time())
            raise CannotConnect(f"no time left to send within {timeout_s:g} s")
        reusable = False
        try:
            async with asyncio.timeout_at(deadline):
                _write(writer, head + body)
                await writer.drain()
                response, reusable = await _read_response(reader)
        except TimeoutError as exc:
            raise NoCompleteAnswer(f"no complete answer within {timeout_s:g} s") from exc
        except (OSError, EOFError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as exc:
            raise NoCompleteAnswer(f"the connection ended without a complete answer: {exc!r}") from exc
        finally:
            if reusable:
                _release(pool, key, reader, writer, loop.time())
            else:
                writer.close()
    finally:
        pool.active -= 1
        if pool.freed is not None and not pool.freed.done():
            pool.freed.set_result(None)
    return response


def _write(writer: asyncio.StreamWriter, data: bytes) -> None:
    """Write the request on a connection that is still open; one the peer closed or reset
    before it (between the connect and now) had nothing written: :class:`CannotConnect`, on
    every loop (asyncio's transport would drop the bytes and fail the drain; uvloop's raises
    ``RuntimeError``)."""
    if writer.is_closing():
        raise CannotConnect("the connection closed before the request was written")
    try:
        writer.write(data)
    except RuntimeError as exc:  # uvloop: the transport closed under the write
        raise CannotConnect(f"the connection closed before the request was written: {exc}") from exc


def _request_head(destination: Destination, headers: Mapping[str, str], length: int) -> bytes:
    lines = [destination.request_line]
    given = set()
    for name, value in headers.items():
        if not _TOKEN.fullmatch(name) or not _FIELD_VALUE.fullmatch(value):
            raise Unencodable(f"header {name!r} cannot be sent")
        lower = name.lower()
        if lower in ("content-length", "transfer-encoding", "connection"):
            continue  # this client frames the request itself
        given.add(lower)
        lines.append(f"{name}: {value}\r\n".encode("ascii"))
    if "host" not in given:
        lines.insert(1, destination.host_header)
    if "user-agent" not in given:
        lines.append(b"User-Agent: noti\r\n")
    if destination.auth_header and "authorization" not in given:
        lines.append(destination.auth_header)
    lines.append(b"Content-Length: %d\r\n\r\n" % length)
    return b"".join(lines)


async def _connect(
    pool: _Pool,
    key: tuple[bool, str, int, str | None],
    destination: Destination,
    server_hostname: str | None,
    timeout_s: float,
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A kept connection to the destination that is still open, else a new one (within
    ``timeout_s``; none left of the request's time is :class:`CannotConnect`)."""
    idle = pool.idle.get(key)
    now = asyncio.get_running_loop().time()
    while idle:
        reader, writer, since = idle.pop()
        if _usable(reader, writer, since, now):
            return reader, writer
        writer.close()
    if timeout_s <= 0:
        raise CannotConnect("no time left to connect (waited for a free connection)")
    try:
        async with asyncio.timeout(timeout_s):
            return await asyncio.open_connection(
                destination.host,
                destination.port,
                ssl=_tls() if destination.tls else None,
                server_hostname=(server_hostname or destination.host) if destination.tls else None,
                limit=MAX_HEAD,
            )
    except TimeoutError as exc:
        raise CannotConnect(f"no connection within {timeout_s:g} s") from exc
    except (OSError, UnicodeError) as exc:  # DNS, refused, unreachable, TLS (ssl.SSLError)
        raise CannotConnect(f"cannot connect: {exc}") from exc


def _usable(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, since: float, now: float) -> bool:
    """An idle connection (kept since ``since``) may carry another request at ``now``."""
    return now - since < IDLE_S and _quiet(reader, writer)


def _quiet(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
    """Open, not at its end, and nothing unread: bytes a server sent on an idle connection
    (a 408 before it closes, a body longer than announced) must never be read as the
    answer to the next request. (StreamReader has no public way to ask for its buffer.)"""
    return not writer.is_closing() and not reader.at_eof() and not getattr(reader, "_buffer", b"")


def _release(
    pool: _Pool,
    key: tuple[bool, str, int, str | None],
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    now: float,
) -> None:
    kept = len(pool.idle.get(key, ()))
    if pool.closed or kept >= MAX_IDLE_PER_DESTINATION or not _quiet(reader, writer):
        writer.close()
        return
    pool.idle.setdefault(key, []).append((reader, writer, now))
    if pool.sweeper is None:
        pool.sweeper = asyncio.get_running_loop().call_later(IDLE_S, _sweep, pool)


def _sweep(pool: _Pool) -> None:
    """Close the idle connections of every destination that are too old or that their
    server ended, forget destinations with none left, and sweep again when the oldest one
    kept is due (a quiet worker closes them too, without a request to trigger it)."""
    loop = asyncio.get_running_loop()
    now = loop.time()
    pool.sweeper = None
    for key, idle in list(pool.idle.items()):
        kept = []
        for reader, writer, since in idle:
            if _usable(reader, writer, since, now):
                kept.append((reader, writer, since))
            else:
                writer.close()
        if kept:
            pool.idle[key] = kept
        else:
            del pool.idle[key]
    if pool.idle and not pool.closed:  # when the oldest kept one is due
        oldest = min(since for idle in pool.idle.values() for _, _, since in idle)
        pool.sweeper = loop.call_at(oldest + IDLE_S, _sweep, pool)


async def _read_response(reader: asyncio.StreamReader) -> tuple[Response, bool]:
    """The final answer, and whether its connection may carry another request."""
    for _ in range(MAX_INFORMATIONAL + 1):
        version, status, headers = _parse_head(await reader.readuntil(b"\r\n\r\n"))
        if not 100 <= status < 200:
            break
    else:
        raise ValueError("too many informational answers")
    keep_alive = version == 1 and "close" not in headers.get("connection", "").lower()
    if status in (204, 304):
        return Response(status, headers, b""), keep_alive
    body, complete = await _read_body(reader, headers)
    return Response(status, headers, _inflated(body, headers)), keep_alive and complete


def _parse_head(head: bytes) -> tuple[int, int, dict[str, str]]:
    """``(minor version, status, headers)`` of an answer's head (ending in a blank line)."""
    status_line, *lines = head[:-4].split(b"\r\n")
    match = _STATUS_LINE.fullmatch(status_line)
    if match is None:
        raise ValueError(f"not an HTTP answer: {status_line[:80]!r}")
    headers: dict[str, str] = {}
    last = ""
    for raw in lines:
        line = raw.decode("latin-1")
        if line[:1] in (" ", "\t") and last:  # an obsolete folded continuation
            headers[last] += " " + line.strip()
            continue
        name, colon, value = line.partition(":")
        if not colon or not _TOKEN.fullmatch(name):
            raise ValueError(f"a malformed header line: {line[:80]!r}")
        last = name.lower()
        value = value.strip(" \t")
        headers[last] = f"{headers[last]}, {value}" if last in headers else value
    return int(match.group(1)), int(match.group(2)), headers


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> tuple[bytes, bool]:
    """The body (at most MAX_BODY bytes), and whether it was read to its end by its framing."""
    coding = headers.get("transfer-encoding")
    if coding is not None:
        if coding.lower().rsplit(",", 1)[-1].strip() == "chunked":
            return await _read_chunked(reader)
        return await _read_to_end(reader), False  # framed by the connection's end
    length = headers.get("content-length")
    if length is None:
        return await _read_to_end(reader), False
    values = {v.strip() for v in length.split(",")}
    if len(values) != 1 or not next(iter(values)).isdigit():
        raise ValueError(f"a bad Content-Length: {length[:40]!r}")
    size = int(next(iter(values)))
    if size > MAX_BODY:
        return await reader.readexactly(MAX_BODY), False
    return await reader.readexactly(size), True


async def _read_to_end(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    kept = 0
    while kept < MAX_BODY:
        chunk = await reader.read(MAX_BODY - kept)
        if not chunk:
            break
        parts.append(chunk)
        kept += len(chunk)
    return b"".join(parts)


async def _read_chunked(reader: asyncio.StreamReader) -> tuple[bytes, bool]:
    parts: list[bytes] = []
    kept = 0
    while True:
        size_line = (await reader.readuntil(b"\r\n"))[:-2].split(b";", 1)[0].strip()
        if not size_line or any(c not in b"0123456789abcdefABCDEF" for c in size_line):
            raise ValueError(f"a bad chunk size: {size_line[:20]!r}")
        size = int(size_line, 16)
        if size == 0:
            while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers, ignored
                pass
            return b"".join(parts), True
        if kept + size > MAX_BODY:
            parts.append(await reader.readexactly(MAX_BODY - kept))
            return b"".join(parts), False
        parts.append(await reader.readexactly(size))
        kept += size
        if await reader.readexactly(2) != b"\r\n":
            raise ValueError("a chunk without its CRLF")


def _inflated(body: bytes, headers: dict[str, str]) -> bytes:
    """A gzip or deflate body inflated (up to MAX_BODY), when it can be; else as it came."""
    coding = headers.get("content-encoding", "").strip().lower()
    if not body or coding not in ("gzip", "deflate"):
        return body
    for wbits in (47,) if coding == "gzip" else (15, -15):  # deflate: zlib-wrapped or raw
        try:
            return zlib.decompressobj(wbits).decompress(body, MAX_BODY)
        except zlib.error:
            continue
    return body


@contextlib.contextmanager
def map_errors(provider: str) -> Iterator[None]:
    """Translate this client's failures into the outcome classes (see :mod:`noti.providers._http`)."""
    try:
        yield
    except CannotConnect as exc:
        raise cannot_connect(provider, exc) from exc
    except Unencodable as exc:
        raise unencodable(provider) from exc
    except NoCompleteAnswer as exc:
        raise no_complete_answer(provider, exc) from exc


async def close_pool() -> None:
    """Close the running loop's kept connections."""
    pool = _pools.pop(asyncio.get_running_loop(), None)
    if pool is None:
        return
    pool.closed = True  # requests still running close their connections when they end
    if pool.sweeper is not None:
        pool.sweeper.cancel()
    writers = [writer for idle in pool.idle.values() for _, writer, _ in idle]
    pool.idle.clear()
    for writer in writers:
        writer.close()
    for writer in writers:
        with contextlib.suppress(Exception):
            await writer.wait_closed()
