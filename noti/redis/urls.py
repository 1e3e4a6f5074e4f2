"""Redis URLs: a single Redis (``redis://``, ``rediss://``, ``unix://``), one found through
Sentinel (``redis+sentinel://``, :class:`SentinelUrl`) or a Cluster (``redis+cluster://``,
:class:`ClusterUrl`), checked before anything connects (:func:`check_url`, for the settings)
and masked wherever they are shown (:func:`masked_url`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlsplit, urlunsplit

from noti.errors import InvalidConfig

__all__ = [
    "CLUSTER_SCHEME",
    "ClusterUrl",
    "SENTINEL_PORT",
    "SENTINEL_SCHEME",
    "SentinelUrl",
    "check_url",
    "masked_url",
    "split_password",
]

_SENTINEL_PASSWORD = re.compile(r"([?&]sentinel_password=)[^&#]*")


def masked_url(url: str) -> str:
    """``url`` with any password replaced by ``***``, fit for messages and logs."""
    url = _SENTINEL_PASSWORD.sub(r"\1***", url)
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc}"))


def _user_password_hosts(netloc: str) -> tuple[str | None, str | None, str]:
    """``[user[:password]@]hosts`` of a URL's network location: user and password unquoted
    (None when absent), and the hosts part as written."""
    credentials, at, hosts = netloc.rpartition("@")
    if not at:
        return None, None, hosts
    user, colon, secret = credentials.partition(":")
    return unquote(user) or None, unquote(secret) if colon else None, hosts


def split_password(url: str) -> tuple[str, str | None]:
    """``url`` without its password, and the password (None when it has none): for a setting
    that must not show a secret (Celery masks a mapping key naming a password, not a URL)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url, None
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = f"{parts.username}@" if parts.username else ""
    return urlunsplit(parts._replace(netloc=f"{user}{netloc}")), unquote(parts.password)


#: The URL scheme of a Redis reached through Sentinel (:class:`SentinelUrl`; no TLS yet).
SENTINEL_SCHEME = "redis+sentinel"

SENTINEL_PORT = 26379


@dataclass(frozen=True)
class SentinelUrl:
    """A Redis primary found through Sentinel:
    ``redis+sentinel://[[user]:password@]host[:port][,host[:port]…]/<service>[/<db>]``
    with ``?sentinel_password=…`` (and ``sentinel_username``) when the sentinels have their
    own password. The port defaults to 26379. The password is the primary's (and its
    replicas'). TLS is not supported through Sentinel.
    """

    sentinels: tuple[tuple[str, int], ...]
    service: str
    db: int = 0
    username: str | None = None
    password: str | None = None
    sentinel_username: str | None = None
    sentinel_password: str | None = None

    @classmethod
    def parse(cls, url: str) -> SentinelUrl | None:
        """The Sentinel address ``url`` names, or None when it is not a Sentinel URL.

        Raises:
            InvalidConfig: a Sentinel URL without hosts or service, or with a bad port or db.
        """
        scheme, sep, rest = url.partition("://")
        if not sep or scheme.lower() != SENTINEL_SCHEME:
            return None
        netloc, _, path = rest.partition("/")
        path, _, query = path.partition("?")
        username, password, hosts = _user_password_hosts(netloc)
        sentinels = tuple(_host_port(item, url) for item in hosts.split(",") if item)
        parts = [unquote(p) for p in path.split("/") if p]
        if not sentinels or not parts or len(parts) > 2:
            raise InvalidConfig(
                f"{masked_url(url)} is not a Sentinel URL: write "
                "redis+sentinel://[:password@]host:26379[,host:26379…]/<service>[/<db>]"
            )
        if len(parts) == 2 and not parts[1].isdigit():
            raise InvalidConfig(f"{masked_url(url)}: the database must be a number, not {parts[1]!r}")
        options = dict(parse_qsl(query))
        unknown = set(options) - {"sentinel_password", "sentinel_username"}
        if unknown:
            raise InvalidConfig(f"{masked_url(url)}: unknown option(s) {', '.join(sorted(unknown))}")
        return cls(
            sentinels=sentinels,
            service=parts[0],
            db=int(parts[1]) if len(parts) == 2 else 0,
            username=username,
            password=password,
            sentinel_username=options.get("sentinel_username"),
            sentinel_password=options.get("sentinel_password"),
        )

    def public(self) -> str:
        """The URL without its secrets (the passwords of the primary and of the sentinels)."""
        user = f"{quote(self.username, safe='')}@" if self.username else ""
        hosts = ",".join(f"{host}:{port}" for host, port in self.sentinels)
        query = f"?sentinel_username={quote(self.sentinel_username)}" if self.sentinel_username else ""
        return f"{SENTINEL_SCHEME}://{user}{hosts}/{quote(self.service, safe='')}/{self.db}{query}"

    def sentinel_kwargs(self, *, password: str | None = None) -> dict[str, Any]:
        """Connection options of the sentinels themselves (``password`` instead of the URL's)."""
        options: dict[str, Any] = {"socket_timeout": 3, "socket_connect_timeout": 3}
        password = password if password is not None else self.sentinel_password
        if password is not None:
            options["password"] = password
        if self.sentinel_username is not None:
            options["username"] = self.sentinel_username
        return options


def _host_port(item: str, url: str) -> tuple[str, int]:
    host, colon, port = item.strip().rpartition(":") if ":" in item else (item.strip(), "", "")
    host = host.strip("[]")
    if not host or (colon and not port.isdigit()):
        raise InvalidConfig(f"{masked_url(url)}: {item!r} is not host:port")
    return host, int(port) if colon else SENTINEL_PORT


#: The URL scheme of a Redis Cluster (:func:`connect_any`): ``redis+cluster://h1:p1,h2:p2``.
CLUSTER_SCHEME = "redis+cluster"


@dataclass(frozen=True, slots=True)
class ClusterUrl:
    """``redis+cluster://[[user]:password@]host:port[,host:port…][/]``: some of a Redis
    Cluster's nodes (the client learns the others); no database, no options."""

    nodes: tuple[tuple[str, int], ...]
    username: str | None = None
    password: str | None = None

    @classmethod
    def parse(cls, url: str) -> ClusterUrl | None:
        """The cluster ``url`` names, or None when it is not a cluster URL.

        Raises:
            InvalidConfig: no node, a node without a port, a database or an option.
        """
        scheme, sep, rest = url.partition("://")
        if not sep or scheme.lower() != CLUSTER_SCHEME:
            return None
        netloc, slash, path = rest.partition("/")
        if path or "?" in netloc or "#" in netloc:
            raise InvalidConfig(
                f"{masked_url(url)}: a cluster URL names nodes only (no database, path or options): "
                "redis+cluster://host:port[,host:port…]"
            )
        username, password, hosts = _user_password_hosts(netloc)
        nodes = []
        for item in hosts.split(","):
            host, colon, port = item.strip().rpartition(":")
            host = host.strip("[]")
            if not host or not colon or not port.isdigit() or not 0 < int(port) < 65536:
                raise InvalidConfig(f"{masked_url(url)}: {item[:80]!r} is not host:port")
            nodes.append((host, int(port)))
        return cls(tuple(nodes), username, password)


def check_url(url: str) -> str | None:
    """What is wrong with ``url`` as the address of a Redis, a Sentinel or a Cluster (None:
    nothing): for settings, which must refuse a bad value before anything connects."""
    scheme = url.partition("://")[0].lower()
    if scheme not in ("redis", "rediss", "unix", SENTINEL_SCHEME, CLUSTER_SCHEME):
        return (
            f"{masked_url(url)[:120]!r} is not a Redis URL: use redis://, rediss://, unix://, "
            f"{SENTINEL_SCHEME}:// or {CLUSTER_SCHEME}://"
        )
    try:
        ClusterUrl.parse(url)
        SentinelUrl.parse(url)
    except InvalidConfig as exc:
        return exc.message
    return None
