"""Where a webhook may go: the SSRF guard (which addresses are public) and the receivers an
operator configured for a provider (:class:`Destination`, its ``destinations`` option).

Split from :mod:`noti.channels.webhook.provider`, which uses both, to keep that module to its sending.
"""

from __future__ import annotations

import functools
import ipaddress
import socket
from dataclasses import dataclass

import httpx

__all__ = ["Destination", "non_public_reason", "parsed", "resolve_public"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@functools.lru_cache(maxsize=1024)
def parsed(target: str) -> httpx.URL:
    """``target`` parsed, once per URL (a webhook goes to few URLs, each many times)."""
    return httpx.URL(target)


#: Ranges some Python versions still call global although no webhook should go there.
_DENIED = tuple(
    ipaddress.ip_network(n)
    for n in (
        "192.0.0.0/24",
        "fec0::/10",
        "100.64.0.0/10",
        "198.18.0.0/15",
        "2001:db8::/32",
        "64:ff9b:1::/48",
    )
)


def _non_public(ip: IPAddress) -> bool:
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = ip.ipv4_mapped or ip.sixtofour
        if embedded is not None and _non_public(embedded):
            return True
    if any(ip.version == net.version and ip in net for net in _DENIED):
        return True
    return not ip.is_global or ip.is_multicast or ip.is_reserved or ip.is_unspecified


def non_public_reason(host: str, port: int, *, numeric_only: bool = False) -> str | None:
    """Why ``host`` may not be a webhook target (a reason), or None when every address it
    resolves to is public. With ``numeric_only`` no DNS is asked: names pass, except
    ``localhost``.

    Raises:
        socket.gaierror: the name does not resolve (only without ``numeric_only``).
    """
    reason, _ = resolve_public(host, port, numeric_only=numeric_only)
    return reason


def resolve_public(host: str, port: int, *, numeric_only: bool = False) -> tuple[str | None, str | None]:
    """``(reason, None)`` when ``host`` may not be a target, else ``(None, address)``: the
    public address to connect to (None with ``numeric_only`` for a name).

    Raises:
        socket.gaierror: the name does not resolve (only without ``numeric_only``).
    """
    name = host.rstrip(".").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return f"{host} is this machine", None
    flags = socket.AI_NUMERICHOST if numeric_only else 0
    try:
        # a literal address with a trailing dot ("127.0.0.1.") is the address: checked as one
        infos = socket.getaddrinfo(name if numeric_only else host, port, type=socket.SOCK_STREAM, flags=flags)
    except socket.gaierror:
        if numeric_only:
            return None, None
        raise
    addresses = [str(info[4][0]).split("%", 1)[0] for info in infos]
    for address in addresses:
        if _non_public(ipaddress.ip_address(address)):
            return f"{host} resolves to the non-public address {address}", None
    return None, addresses[0] if addresses else None


@dataclass(frozen=True, slots=True)
class Destination:
    """A receiver the operator configured: a URL prefix."""

    scheme: str
    host: str
    port: int
    #: The path prefix, ending with ``/``.
    path: str

    @classmethod
    def parse(cls, text: str) -> Destination:
        """ValueError when ``text`` is no http(s) URL prefix without user-info, query or fragment."""
        try:
            url = httpx.URL(text)
        except (httpx.InvalidURL, TypeError) as exc:
            raise ValueError(f"not a URL: {exc}") from None
        if url.scheme not in ("http", "https") or not url.host:
            raise ValueError("give an http(s) URL with a host")
        if url.userinfo or url.query or url.fragment:
            raise ValueError("no user-info, query or fragment")
        written_path = text.partition("://")[2].partition("/")[2].partition("?")[0].partition("#")[0]
        if _dot_segments(written_path):  # as written: the parser resolves them
            raise ValueError("no . or .. path segments")
        path = url.path if url.path.endswith("/") else url.path + "/"
        return cls(url.scheme, url.host.lower().rstrip("."), url.port or _PORTS[url.scheme], path)

    def covers(self, target: str) -> bool:
        """Is ``target`` under this prefix (exactly as a receiver would read its URL)?"""
        try:
            url = parsed(target)
        except (httpx.InvalidURL, TypeError):
            return False
        raw_path = url.raw_path.decode("ascii", "replace").partition("?")[0]
        if _dot_segments(raw_path):  # user-info is the target's own credential: the host decides
            return False
        path = url.path if url.path.endswith("/") else url.path + "/"
        return (
            url.scheme == self.scheme
            and url.host.lower().rstrip(".") == self.host
            and (url.port or _PORTS.get(url.scheme, 0)) == self.port
            and path.startswith(self.path)
        )


_PORTS = {"http": 80, "https": 443}


def _dot_segments(raw_path: str) -> bool:
    """Does a raw path hold a ``.`` or ``..`` segment, plain or percent-encoded (which a
    receiver may resolve, leaving the prefix)?"""
    lowered = raw_path.lower().replace("%2e", ".").replace("%2f", "/").replace("\\", "/")
    return any(segment in (".", "..") for segment in lowered.split("/"))
