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
  end (RFC 9112 §6.3); 1xx answers skipped; bodies up to
  :data:`~noti.providers._http11_answer.MAX_BODY` bytes (the rest is dropped with the
  connection: receivers' answers are read for their status, headers and an excerpt); a
  ``gzip``/``deflate`` body is inflated when it can be. :mod:`noti.providers._http11_answer`
  reads them; this module writes the request and keeps the connections.

Failures are three classes, which :func:`map_errors` turns into the outcome classes exactly
as :mod:`noti.providers._http` does for httpx: :class:`CannotConnect` (nothing was sent:
DNS, refused, TLS handshake or certificate, connect timeout), :class:`NoCompleteAnswer`
(the request may have arrived: timeout after connecting, closed connection, an answer
that is not HTTP) and :class:`Unencodable` (the request cannot be written).

Traced (:mod:`noti.tracing`), each POST is a client span, as :mod:`noti.providers._http`'s.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import re
import ssl
import weakref
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache

import httpx

from noti import tracing
from noti.providers._http import cannot_connect, no_complete_answer, span_url, unencodable
from noti.providers._http11_answer import MAX_HEAD, TOKEN, Response, read_response

__all__ = [
    "CannotConnect",
    "HttpError",
    "NoCompleteAnswer",
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
#: Share of the timeout that connecting (and the TLS handshake) may take.
CONNECT_SHARE = 0.9
#: Share of the timeout that must be left to send at all: a request written with less left
#: could not get its answer in time, and its outcome would be unknown (the record in doubt)
#: where not sending is certain (the next provider may try).
SEND_SHARE = 0.1

_FIELD_VALUE = re.compile(r"[\t\x20-\x7e]*")


class HttpError(Exception):
    """The request failed before a complete answer came back."""


class CannotConnect(HttpError):
    """No connection (DNS, refused, TLS, connect timeout): nothing was sent."""


class NoCompleteAnswer(HttpError):
    """Connected and (maybe) sent, but no complete HTTP answer: it may have arrived."""


class Unencodable(HttpError):
    """The request cannot be written (its URL or a header)."""


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
    if tracing.tracer() is None:
        return await _post(url, body, headers, timeout_s=timeout_s, server_hostname=server_hostname)
    destination = parse_destination(url)
    host = server_hostname or destination.host
    with tracing.client_call("POST", span_url(httpx.URL(url)), host, destination.port) as call:
        sent = {**headers, **call.headers}
        response = await _post(url, body, sent, timeout_s=timeout_s, server_hostname=server_hostname)
        call.answered(response.status)
        return response


async def _post(
    url: str,
    body: bytes,
    headers: Mapping[str, str],
    *,
    timeout_s: float,
    server_hostname: str | None = None,
) -> Response:
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
        if deadline - loop.time() < timeout_s * SEND_SHARE:  # the wait took it: send nothing
            _release(pool, key, reader, writer, loop.time())
            raise CannotConnect(f"no time left to send within {timeout_s:g} s")
        reusable = False
        try:
            async with asyncio.timeout_at(deadline):
                _write(writer, head + body)
                await writer.drain()
                response, reusable = await read_response(reader)
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
        if not TOKEN.fullmatch(name) or not _FIELD_VALUE.fullmatch(value):
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


@contextlib.contextmanager
def map_errors(provider: str) -> Iterator[None]:
    """Translate this client's failures into the outcome classes (see :mod:`noti.providers._http`);
    traced, the requests made inside name ``provider``."""
    token = tracing.provider_call(provider)
    try:
        yield
    except CannotConnect as exc:
        raise cannot_connect(provider, exc) from exc
    except Unencodable as exc:
        raise unencodable(provider) from exc
    except NoCompleteAnswer as exc:
        raise no_complete_answer(provider, exc) from exc
    finally:
        tracing.provider_done(token)


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
