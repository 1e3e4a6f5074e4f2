"""Reading an HTTP/1.1 answer for noti's client (:mod:`noti.providers._http11`): the head
(1xx answers skipped), the body framed by ``Content-Length``, ``Transfer-Encoding: chunked``
or the connection's end (RFC 9112 §6.3) and kept up to :data:`MAX_BODY` bytes, a
``gzip``/``deflate`` body inflated when it can be, and whether the connection may carry
another request. It knows nothing of connections: a malformed answer is a ``ValueError``
(or asyncio's read errors), which the client reports as an incomplete answer.
"""

from __future__ import annotations

import asyncio
import re
import zlib
from dataclasses import dataclass

__all__ = ["MAX_BODY", "MAX_HEAD", "MAX_INFORMATIONAL", "TOKEN", "Response", "read_response"]

#: Bytes of an answer's head (status line and headers) read at most.
MAX_HEAD = 64 * 1024
#: Bytes of an answer's body kept; a longer body is cut and its connection closed.
MAX_BODY = 1024 * 1024
#: Informational (1xx) answers skipped before the final one, at most.
MAX_INFORMATIONAL = 8

_STATUS_LINE = re.compile(rb"HTTP/1\.([01]) (\d{3})(?: [^\r\n]*)?")
#: A header name (RFC 9110's token).
TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_CHARSET = re.compile(r"charset=\"?([\w.:-]+)", re.IGNORECASE)


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


async def read_response(reader: asyncio.StreamReader) -> tuple[Response, bool]:
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
        if not colon or not TOKEN.fullmatch(name):
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
