"""Redis connections and the one place where redis-py errors become noti errors."""

from __future__ import annotations

import collections
import contextlib
import importlib.resources
import inspect
import logging
import os
import re
import socket
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Self
from urllib.parse import parse_qsl, quote, unquote, urlsplit, urlunsplit

import hiredis
import redis
from redis.backoff import ExponentialBackoff
from redis.cluster import ClusterNode, RedisCluster
from redis.commands.core import Script
from redis.retry import Retry

from noti.errors import InvalidConfig, StoreUnavailable

__all__ = [
    "CLUSTER_SCHEME",
    "ClusterUrl",
    "CommandPipeline",
    "HeldConnection",
    "Outage",
    "OutageRetry",
    "PoolClient",
    "ReplicaWait",
    "SENTINEL_SCHEME",
    "ScriptPipeline",
    "SentinelUrl",
    "check_url",
    "connect",
    "connect_any",
    "load_script",
    "pack_command",
    "masked_url",
    "pooled_connection",
    "refuses_writes",
    "run_batches",
    "run_commands",
    "script_source",
    "split_password",
    "translate_errors",
]

log = logging.getLogger(__name__)

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


#: What redis-py sends with ``CLIENT SETINFO``, its version given as ``redis.__version__``:
#: without it, redis-py looks its version up in the installed distributions' metadata for
#: every connection it makes, which took 2-3 ms of each ``noti get`` (the first lookup of a
#: process scans ``sys.path`` and imports ``email.parser``; bench scenario 10). The redis-py
#: versions that have ``redis.DriverInfo`` take one; older ones the ``lib_version`` that newer
#: ones deprecate. The version sent is the same either way.
_DRIVER_INFO: tuple[str, object] = (
    ("driver_info", redis.DriverInfo(lib_version=redis.__version__))
    if hasattr(redis, "DriverInfo")
    else ("lib_version", redis.__version__)
)


def connect(
    url: str,
    *,
    retry: Retry | None = None,
    password: str | None = None,
    sentinel_password: str | None = None,
    socket_timeout_s: float = 10.0,
    **client_options: Any,
) -> redis.Redis:
    """A client for ``url`` (decoded responses, explicit timeouts, a thread-safe pool); a
    ``redis+sentinel://`` URL (:class:`SentinelUrl`) gives a client of the primary its
    sentinels name, which finds the new primary after a failover on its next connection (a
    connection to a demoted primary is dropped at its first ``READONLY`` answer).

    No connection is made until the first command. Without ``retry`` a failed command is not
    retried (redis-py's ``from_url`` default): callers get :class:`StoreUnavailable` at once
    through :func:`translate_errors`, and a long-running loop waits with an :class:`Outage`.
    ``password`` (and for a Sentinel URL ``sentinel_password``), when given, is used instead
    of the URL's (a setting that keeps secrets apart from the URL it shows). ``client_options``
    are more options of redis-py's client (``encoding_errors``, ``protocol``).

    Raises:
        InvalidConfig: a malformed Sentinel URL.
    """
    options: dict[str, Any] = {
        "decode_responses": True,
        "socket_timeout": socket_timeout_s,
        "socket_connect_timeout": 3,
        "health_check_interval": 30,
        "retry_on_timeout": False,
        **client_options,
    }
    if retry is not None:
        options.update(retry=retry, retry_on_error=[redis.ConnectionError, redis.TimeoutError])
    options.setdefault(*_DRIVER_INFO)
    sentinel_url = SentinelUrl.parse(url)
    client: redis.Redis
    if sentinel_url is None:
        if password is not None:
            options["password"] = password
        client = redis.Redis.from_url(url, **options)
    else:
        sentinel = redis.Sentinel(  # type: ignore[no-untyped-call]
            list(sentinel_url.sentinels),
            sentinel_kwargs=sentinel_url.sentinel_kwargs(password=sentinel_password),
            username=sentinel_url.username,
            password=password if password is not None else sentinel_url.password,
            **options,
        )
        client = sentinel.master_for(sentinel_url.service, db=sentinel_url.db)  # type: ignore[no-untyped-call]
    client.noti_url = masked_url(url)  # type: ignore[attr-defined]
    return client


#: The URL scheme of a Redis Cluster (:func:`connect_any`): ``redis+cluster://h1:p1,h2:p2``.
CLUSTER_SCHEME = "redis+cluster"
#: A single Redis or a Redis Cluster client (both run scripts by SHA).
PoolClient = redis.Redis | RedisCluster


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


def connect_any(url: str, *, socket_timeout_s: float = 10.0) -> PoolClient:
    """A client for ``url``: a :class:`~redis.cluster.RedisCluster` for a ``redis+cluster://``
    URL (:class:`ClusterUrl`), else :func:`connect`'s. No connection is made until the first
    command.

    Raises:
        InvalidConfig: a malformed URL.
    """
    cluster = ClusterUrl.parse(url)
    if cluster is None:
        return connect(url, socket_timeout_s=socket_timeout_s)
    client = RedisCluster(
        startup_nodes=[ClusterNode(host, port) for host, port in cluster.nodes],  # type: ignore[no-untyped-call]
        username=cluster.username,
        password=cluster.password,
        decode_responses=True,
        socket_timeout=socket_timeout_s,
        socket_connect_timeout=3,
    )
    client.noti_url = masked_url(url)  # type: ignore[attr-defined]
    return client


#: A line ``--#include <name>.lua`` in a script stands for that fragment's text.
_INCLUDE = re.compile(r"^--#include ([\w-]+\.lua)$", re.MULTILINE)


def script_source(name: str, *, package: str = "noti.lua") -> str:
    """The text of the Lua script ``<name>.lua`` of ``package``, its ``--#include`` lines
    replaced by the fragments they name (from the same package; one level deep): two
    scripts that must apply one rule share its code."""
    files = importlib.resources.files(package)
    source = files.joinpath(f"{name}.lua").read_text()
    return _INCLUDE.sub(lambda line: files.joinpath(line.group(1)).read_text(), source)


def load_script(client: redis.Redis, name: str, *, package: str = "noti.lua") -> Script:
    """The Lua script ``<name>.lua`` of ``package`` (default ``noti/lua``, includes expanded by
    :func:`script_source`) registered on ``client``.

    Scripts run by SHA and are re-sent transparently after ``SCRIPT FLUSH`` or a fail-over.
    """
    return client.register_script(script_source(name, package=package))


Call = tuple[Sequence[Any], Sequence[Any]]
#: A command (a tuple of str, bytes, int or float) as Redis' wire protocol (hiredis, in C).
pack_command: Callable[[tuple[Any, ...]], bytes] = hiredis.pack_command
_pack_command = pack_command


#: redis-py < 5.3 requires a command name (unused) to take a connection from a pool; 5.3 and
#: later deprecate passing one.
_NAME_PARAMETER = inspect.signature(redis.ConnectionPool.get_connection).parameters.get("command_name")
_GET_CONNECTION_ARGS: tuple[str, ...] = (
    ("_",) if _NAME_PARAMETER is not None and _NAME_PARAMETER.default is inspect.Parameter.empty else ()
)


def pooled_connection(pool: redis.ConnectionPool) -> Any:
    """A connection taken from ``pool`` (give it back with ``pool.release``), whatever the
    redis-py version."""
    return pool.get_connection(*_GET_CONNECTION_ARGS)


class HeldConnection:
    """One connection of a client's pool kept between the calls of a one-command hot path
    (``notify()``: a record and its message in one ``EVALSHA``), instead of taking it from
    the pool and giving it back per call.

    Measured reason (``bench/enqueue_bench.py``, scenario 1, and the profile in
    ``docs/benchmarks.md``): redis-py's ``Redis.execute_command`` costs ~40 µs per command
    over the connection's own ``send_packed_command``/``read_response`` on this 2-core
    machine, and a pool's get and release 7 µs, of a ``notify()`` of ~170 µs (scenario 1 went
    from 4,741/s to 5,953/s with the single-record path this serves).

    Thread- and fork-safe: the calling thread that finds the held connection busy (another
    thread is in a call) takes one from the pool for that call; after ``fork`` the child
    never uses its parent's socket (redis-py's pool makes it a new one). A connection that
    failed in any way is disconnected and given back, so the next call starts clean (redis-py
    reconnects it; through Sentinel, to the current primary).
    """

    #: A connection idle longer than this goes back to the pool, and the next call takes
    #: one through the pool's checks.
    IDLE_S = 0.1

    def __init__(self, client: redis.Redis) -> None:
        self._pool = client.connection_pool
        self._lock = threading.Lock()
        self._connection: Any = None
        self._used = 0.0
        _HELD.add(self)

    def _after_fork(self) -> None:
        """In a forked child: its parent's socket and lock are not its own (another thread
        of the parent may have been in a call at the fork)."""
        self._lock, self._connection = threading.Lock(), None

    def call(self, packed: bytes) -> Any:
        """Write one packed command and read its reply.

        Raises:
            redis.RedisError: an error reply (the connection stays) or a connection failure
                (it is dropped).
        """
        lock = self._lock
        if not lock.acquire(blocking=False):  # another thread is in a call
            connection = pooled_connection(self._pool)
            try:
                return self._run(connection, packed)
            finally:
                self._pool.release(connection)
        connection = None
        try:
            connection, now = self._connection, time.monotonic()
            self._connection = None
            if connection is not None and now - self._used > self.IDLE_S:
                self._pool.release(connection)
                connection = None
            if connection is None:
                connection = pooled_connection(self._pool)
            else:
                _drop_if_closed(connection)
            self._used = now
            try:
                reply = self._run(connection, packed)
            except redis.ResponseError:
                self._connection = connection  # an error reply: the connection is in step
                raise
            except BaseException:
                self._pool.release(connection)  # disconnected by _run
                raise
            self._connection = connection
            return reply
        finally:
            lock.release()

    def call_script(self, script: Script, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        """Run one call of ``script``; its reply. A call the server answers with NOSCRIPT did
        nothing: the script is loaded and the call made once more (as :class:`ScriptPipeline`
        does for its batches).

        Raises:
            redis.RedisError: as :meth:`call` (a second NOSCRIPT included).
        """
        try:
            return self.call(pack_command(("EVALSHA", script.sha, len(keys), *keys, *args)))
        except redis.exceptions.NoScriptError:  # never loaded, or lost to a flush or a failover
            script.sha = script.registered_client.script_load(script.script)
            return self.call(pack_command(("EVALSHA", script.sha, len(keys), *keys, *args)))

    @staticmethod
    def _run(connection: Any, packed: bytes) -> Any:
        try:
            connection.send_packed_command([packed], check_health=False)
            return connection.read_response()
        except redis.ResponseError:
            raise  # an error reply: the connection is in step
        except BaseException:
            connection.disconnect()  # a reply may be left unread: never reuse it
            raise

    def close(self) -> None:
        """Give the held connection back to the pool."""
        with self._lock:
            if self._connection is not None:
                self._pool.release(self._connection)
            self._connection = None


def _drop_if_closed(connection: Any) -> None:
    """Disconnect a held connection whose socket the server closed meanwhile (a Sentinel
    reconfiguring its instance kills its clients; a restart; ``CLIENT KILL``): the send
    reconnects, where writing to the dead socket would fail a call that had not run. One
    non-blocking read (~1 µs); the pool checks a connection it hands out the same way."""
    try:
        stale = connection.can_read()
    except (redis.ConnectionError, OSError):
        stale = True
    if stale:  # nothing is in flight on a held connection: anything readable means closed
        connection.disconnect()


#: Every HeldConnection of this process, reset in a forked child.
_HELD: weakref.WeakSet[HeldConnection] = weakref.WeakSet()


def _reset_held_after_fork() -> None:
    for held in list(_HELD):
        held._after_fork()


os.register_at_fork(after_in_child=_reset_held_after_fork)


class CommandPipeline:
    """Commands pipelined on one held connection: :meth:`send` writes a batch and returns
    at once, :meth:`results` reads the replies of the oldest batch not read yet, so the
    caller can prepare the next batch while Redis runs this one.

    Commands are tuples of arguments (str, bytes or int) packed by hiredis as they are:
    redis-py's pipeline costs about twice the client CPU per argument. Nothing is re-sent
    after a connection error: it is raised and the connection dropped (the batches not
    read may have run in part).
    """

    def __init__(self, client: redis.Redis) -> None:
        self._client = client
        self._connection: Any = None
        #: Batches sent, oldest first, with their replies once read.
        self._batches: collections.deque[tuple[Sequence[Any], list[Any] | None]] = collections.deque()
        #: The batch of a ``WAIT`` written ahead (:meth:`send_wait`), and whether nothing was
        #: written after it (its reply then covers every write).
        self._wait_ahead: Sequence[Any] | None = None
        self._wait_covers = False

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def send(self, commands: Sequence[Any]) -> None:
        """Write a batch of commands without waiting for the replies."""
        if commands:
            self._write(commands)
        self._batches.append((commands, None))

    def results(self, *, raise_on_error: bool = True) -> list[Any]:
        """The replies of the oldest batch sent and not read yet, in order; an error reply
        is its exception, raised unless ``raise_on_error`` is false (then in its place).

        Raises:
            redis.RedisError: the first error reply of the batch (the other commands ran),
                or a connection failure.
        """
        commands, replies = self._batches.popleft()
        replies = self._read(commands) if replies is None else replies
        if raise_on_error:
            for reply in replies:
                if isinstance(reply, Exception):
                    raise reply
        return replies

    def send_wait(self, replicas: int, timeout_ms: int) -> None:
        """Write a Redis ``WAIT`` behind the batches sent, for :meth:`wait_for_replicas` to
        read: the last batch and the wait then take one round trip, not two."""
        wait: list[Any] = [("WAIT", replicas, timeout_ms)]
        self._write(wait, script=False)
        self._batches.append((wait, None))
        self._wait_ahead, self._wait_covers = wait, True

    def wait_for_replicas(self, replicas: int, timeout_ms: int) -> int:
        """Redis ``WAIT`` on this pipeline's connection, every other batch's replies read:
        how many replicas acknowledged every write sent on it (``replicas`` when nothing was
        sent). The reply of the same wait written ahead (:meth:`send_wait`) is used when
        nothing was written after it; else the wait is made now.

        Raises:
            redis.RedisError: a connection failure.
        """
        ahead, covers = self._wait_ahead, self._wait_covers
        self._wait_ahead, self._wait_covers = None, False
        if ahead is not None:
            while self._batches and self._batches[0][0] is not ahead:
                if self._batches[0][1] is None:
                    raise RuntimeError("read every batch's replies before waiting for replicas")
                self._batches.popleft()  # read, not taken: e.g. calls sent again after NOSCRIPT
            if self._batches:
                commands, replies = self._batches.popleft()
                [reply] = self._read(commands) if replies is None else replies
                if covers and not self._batches and commands[0][1:] == (replicas, timeout_ms):
                    if isinstance(reply, Exception):
                        raise reply
                    return int(reply)
        if any(replies is None and commands for commands, replies in self._batches):
            raise RuntimeError("read every batch's replies before waiting for replicas")
        if self._connection is None:
            return replicas
        try:
            self._connection.send_packed_command([_pack_command(("WAIT", replicas, timeout_ms))])
            return int(self._connection.read_response())
        except BaseException:
            self._drop()
            raise

    def close(self) -> None:
        """Give the connection back (dropped if replies were left unread)."""
        if any(replies is None and commands for commands, replies in self._batches):
            self._drop()
        elif self._connection is not None:
            self._client.connection_pool.release(self._connection)
            self._connection = None
        self._batches.clear()

    def _pack(self, command: Any) -> bytes:
        return _pack_command(command)

    def _write(self, commands: Sequence[Any], *, script: bool = True) -> None:
        """Write ``commands`` (packed by :meth:`_pack`, or as plain commands when not
        ``script``) in one write."""
        self._wait_covers = False  # a write after a wait written ahead: it does not cover it
        pack = self._pack if script else _pack_command
        packed = [pack(command) for command in commands]
        if self._connection is None:
            self._connection = pooled_connection(self._client.connection_pool)
        # redis-py's health check (a PING every health_check_interval) would read the reply
        # of a batch in flight as the PONG: only with nothing in flight.
        idle = not any(replies is None and sent for sent, replies in self._batches)
        try:
            self._connection.send_packed_command([b"".join(packed)], check_health=idle)  # one write
        except BaseException:
            self._drop()
            raise

    def _read(self, commands: Sequence[Any]) -> list[Any]:
        replies: list[Any] = []
        try:
            for _ in commands:
                try:
                    replies.append(self._connection.read_response())
                except redis.ResponseError as exc:
                    replies.append(exc)
        except BaseException:
            self._drop()
            raise
        return replies

    def _drop(self) -> None:
        self._batches.clear()
        if self._connection is not None:
            self._connection.disconnect()  # replies may be left unread: never reuse it
            self._client.connection_pool.release(self._connection)
            self._connection = None


def run_commands(client: redis.Redis, commands: Sequence[Any], *, raise_on_error: bool = True) -> list[Any]:
    """Run ``commands`` (tuples of arguments) in one pipelined round trip; their replies
    (see :meth:`CommandPipeline.results`).

    Raises:
        redis.RedisError: the first error reply (the other commands ran), or a connection
            failure.
    """
    with CommandPipeline(client) as pipeline:
        pipeline.send(commands)
        return pipeline.results(raise_on_error=raise_on_error)


def run_batches(
    client: redis.Redis, batches: Iterable[Sequence[Any]], *, ahead: int = 1
) -> Iterator[list[Any]]:
    """Run batches of commands on one connection, writing each batch while up to ``ahead``
    before it are still running in Redis; yields each batch's replies, in order (see
    :meth:`CommandPipeline.results`). Batches come from ``batches`` as they are needed, so
    a caller may build one while Redis runs the last.

    Raises:
        redis.RedisError: the first error reply (the other commands of its batch ran), or a
            connection failure (the batches written and not read may have run in part).
    """
    with CommandPipeline(client) as pipeline:
        written = 0
        for batch in batches:
            pipeline.send(batch)
            written += 1
            if written > ahead:
                written -= 1
                yield pipeline.results()
        for _ in range(written):
            yield pipeline.results()


class ScriptPipeline(CommandPipeline):
    """Calls of one Lua script, ``(keys, args)``, pipelined as a :class:`CommandPipeline`
    (redis-py's pipelined scripts also cost a ``SCRIPT EXISTS`` round trip per execute).

    A call the server answers with NOSCRIPT (the script was never loaded, or lost to
    ``SCRIPT FLUSH`` or a fail-over) did nothing: every batch in flight is read, the script
    loaded, and the calls that did nothing sent again in their order, before anything newer
    is sent. (Calls in flight that did run, when another client loaded the script in
    between, stay ahead of them: after a flush, writes of different calls may land out of
    order, each call still whole.)
    """

    def __init__(self, client: redis.Redis, script: Script) -> None:
        super().__init__(client)
        self._script = script

    def results(self, *, raise_on_error: bool = True) -> list[Any]:
        """The replies of the oldest batch of calls not read yet (see :class:`CommandPipeline`)."""
        calls, replies = self._batches[0]
        if replies is None:
            replies = self._read(calls)
            self._batches[0] = (calls, replies)
        if any(isinstance(reply, redis.exceptions.NoScriptError) for reply in replies):
            self._run_lost_again()
        return super().results(raise_on_error=raise_on_error)

    def _pack(self, command: Any) -> bytes:
        keys, args = command
        return _pack_command(("EVALSHA", self._script.sha, len(keys), *keys, *args))

    def _run_lost_again(self) -> None:
        """Read every batch in flight, load the script, and run the calls that met NOSCRIPT
        again in their order (once: a second NOSCRIPT is left as the reply)."""
        batches = [
            (calls, self._read(calls) if replies is None else replies) for calls, replies in self._batches
        ]
        self._script.sha = self._client.script_load(self._script.script)
        lost = [
            (calls, replies, i)
            for calls, replies in batches
            for i, reply in enumerate(replies)
            if isinstance(reply, redis.exceptions.NoScriptError)
        ]
        again = [calls[i] for calls, _, i in lost]
        self._write(again)
        for (_, replies, i), reply in zip(lost, self._read(again), strict=True):
            replies[i] = reply
        self._batches = collections.deque(batches)


#: How long the number of replicas the sentinels see up is reused before they are asked again.
REPLICAS_SEEN_TTL_S = 1.0


@dataclass(frozen=True)
class ReplicaWait:
    """Writes acknowledged to a caller only once replicas have them (Redis ``WAIT``,
    ``NOTI_REDIS_WAIT_REPLICAS``): a failover then cannot lose them, where asynchronous
    replication loses what the primary had not passed on when it died (and what a demoted
    primary took after the switch, ~10 s with Sentinel's defaults).

    Through Sentinel the wait is for **every replica the sentinels see up, and at least
    ``replicas``**. Fewer is not enough for a planned switch-over: the old primary keeps
    taking writes for a moment after the sentinels promoted another replica, and a write that
    only a third replica acknowledged then is discarded when that replica resynchronises from
    the new primary (measured: ``tests/test_sentinel.py`` lost such writes with ``WAIT 1`` of
    two replicas). A replica that is down (a crash) is not waited for, so writes go on being
    acknowledged by those left.
    """

    replicas: int
    timeout_ms: int
    #: ``(monotonic time, replicas up)`` last read from the sentinels.
    _seen: list[tuple[float, int]] = field(default_factory=list, compare=False, repr=False)

    def required(self, client: redis.Redis) -> int:
        """How many replicas a write must reach: ``replicas``, or through Sentinel every
        replica the sentinels see up (not down subjectively or objectively) if more."""
        pool = client.connection_pool
        manager = getattr(pool, "sentinel_manager", None)
        if manager is None:
            return self.replicas
        now = time.monotonic()
        if self._seen and now - self._seen[-1][0] < REPLICAS_SEEN_TTL_S:
            return max(self.replicas, self._seen[-1][1])
        try:
            seen = len(manager.discover_slaves(getattr(pool, "service_name", "")))
        except (redis.RedisError, OSError):  # the sentinels cannot tell now: the last count
            seen = self._seen[-1][1] if self._seen else 0
        self._seen[:] = [(now, seen)]
        return max(self.replicas, seen)

    def ask(self, pipeline: CommandPipeline, client: redis.Redis) -> None:
        """Write the wait behind what ``pipeline`` wrote, so :meth:`confirm` reads its answer
        with the last batch's, in the same round trip."""
        pipeline.send_wait(self.required(client), self.timeout_ms)

    def confirm(self, pipeline: CommandPipeline, client: redis.Redis) -> None:
        """Wait until the replicas have what ``pipeline`` wrote (the answer of the wait
        :meth:`ask` wrote ahead, when nothing was written after it).

        Raises:
            StoreUnavailable: ``e.noti.store.unconfirmed``: fewer replicas acknowledged it
                within ``timeout_ms``. The write is on the primary and may or may not survive
                a failover; the client's connections are dropped, so the next command finds
                the primary again (through Sentinel, a new one after a switch).
        """
        required = self.required(client)
        with translate_errors(client):
            acknowledged = pipeline.wait_for_replicas(required, self.timeout_ms)
        if acknowledged < required:
            client.connection_pool.disconnect()
            self._seen.clear()  # ask the sentinels again next time
            raise StoreUnavailable(
                f"written, but acknowledged by {acknowledged} of {required} replica(s) within "
                f"{self.timeout_ms} ms: it may not survive a failover; call again (with an "
                "idempotency key a repeat is not stored twice)",
                code="e.noti.store.unconfirmed",
            )


#: Error replies of a Redis that takes no writes for now: full (``maxmemory`` with
#: ``noeviction``), unable to persist (a full disk: ``MISCONF``), or short of the replicas
#: ``min-replicas-to-write`` asks for. Nothing was written; the caller may try again later.
_REFUSED_WRITES = ("OOM", "MISCONF", "NOREPLICAS")


def refuses_writes(exc: BaseException) -> bool:
    """True for an error reply of a Redis that takes no writes for now (full, unable to
    persist, short of replicas, or a replica): nothing was written, and waiting may help."""
    return isinstance(exc, redis.ResponseError) and _error_code(exc) in (*_REFUSED_WRITES, "READONLY")


def _error_code(exc: redis.ResponseError) -> str:
    """The error code of a Redis error reply (``OOM``, ``READONLY`` …): redis-py keeps it as
    ``status_code`` where it turns the reply into a class of its own (and strips it from the
    message), else it starts the message."""
    status = getattr(exc, "status_code", None)
    if status:
        return str(status)
    first = str(exc).split(" ", 1)[0]
    return first if first.isupper() else ""


def _reason(exc: BaseException) -> str:
    """The first line of ``exc``'s message (its class name when it has none)."""
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


class Outage:
    """What one long-running part of a process (a loop, or a client's connections) knows of a
    Redis outage: it logs the first failure and the recovery, once each (the failures in
    between at debug level), and gives the capped exponential back-off before the next try.

    The one place for noti's outage back-off and logging: :class:`OutageRetry` reports to one
    from inside redis-py, and the worker's loops (delay pump, webman bridge, event lock
    renewal) call :meth:`failed` / :meth:`ok` themselves. Thread-safe. Never copied:
    redis-py deep-copies a client's ``Retry`` into each of its connections, and every copy
    must report to the same outage.
    """

    def __init__(
        self,
        what: str,
        *,
        cap_s: float = 2.0,
        base_s: float = 0.1,
        logger: logging.Logger | None = None,
    ) -> None:
        #: Who waits, as the log lines name it (``"beat"``, ``"delay pump"``).
        self.what = what
        self.cap_s = cap_s
        self.base_s = base_s
        self._backoff = ExponentialBackoff(cap=cap_s, base=base_s)
        self._log = logger or log
        self._lock = threading.Lock()
        self._since: float | None = None
        self._failures = 0
        self._giving_up = threading.Event()

    def __deepcopy__(self, memo: dict[int, Any]) -> Outage:
        return self

    @property
    def down(self) -> bool:
        """True from the first failure until the next success."""
        return self._since is not None

    @property
    def giving_up(self) -> bool:
        """True once :meth:`give_up` was called: the next failure is final."""
        return self._giving_up.is_set()

    def give_up(self) -> None:
        """Stop waiting (the process is stopping): an :class:`OutageRetry` raises the next
        failure instead of retrying it."""
        self._giving_up.set()

    def failed(self, exc: BaseException) -> float:
        """Note a failed try; the seconds to wait before the next one (capped at ``cap_s``)."""
        with self._lock:
            first = self._since is None
            if first:
                self._since = time.monotonic()
            self._failures += 1
            failures = self._failures
        if first:
            self._log.warning(
                "%s: Redis unavailable (%s); waiting for it, trying again at least every %g s",
                self.what,
                _reason(exc),
                self.cap_s,
            )
        else:
            self._log.debug("%s: Redis still unavailable (%s)", self.what, _reason(exc))
        return float(self._backoff.compute(failures))

    def ok(self) -> None:
        """Note a successful try: logs the recovery if Redis was unavailable."""
        if self._since is None:
            return
        with self._lock:
            since, failures = self._since, self._failures
            self._since, self._failures = None, 0
        if since is not None:
            self._log.warning(
                "%s: Redis is back after %.1f s (%d failed tries); carrying on",
                self.what,
                time.monotonic() - since,
                failures,
            )


class OutageRetry(Retry):
    """redis-py's :class:`~redis.retry.Retry` with an :class:`Outage`'s back-off, reporting to it:
    a client built with it (``retry=``, ``retry_on_error=[ConnectionError, TimeoutError]``)
    waits through an outage (forever with ``retries=-1``) inside each command, and the
    process logs the outage and the recovery once. After :meth:`Outage.give_up` a failure is
    raised at once, so a stopping process is not held by a dead Redis."""

    def __init__(self, outage: Outage, *, retries: int = -1) -> None:
        super().__init__(
            ExponentialBackoff(cap=outage.cap_s, base=outage.base_s),
            retries,
            # OSError: redis-py < 7.2 retries only the socket's connect, whose refusal is
            # then still an OSError (later versions retry the whole connect, as a ConnectionError)
            (redis.ConnectionError, redis.TimeoutError, socket.timeout, OSError),
        )
        self.outage = outage

    def __repr__(self) -> str:
        times = "forever" if self._retries < 0 else f"{self._retries} times"
        return f"<OutageRetry {self.outage.what!r}: {times}, back-off up to {self.outage.cap_s:g} s>"

    def call_with_retry(
        self, do: Callable[[], Any], fail: Callable[..., Any], *args: Any, **kwargs: Any
    ) -> Any:
        # redis-py's own call, whatever its version takes (``is_retryable`` and
        # ``with_failure_count`` are newer than 5.0)
        def failed(error: Exception, *count: int) -> None:
            fail(error, *count)
            self.outage.failed(error)
            if self.outage.giving_up:
                raise error

        result = super().call_with_retry(do, failed, *args, **kwargs)
        self.outage.ok()
        return result


@contextlib.contextmanager
def translate_errors(client: redis.Redis) -> Iterator[None]:
    """Turn Redis connection failures into :class:`StoreUnavailable` with one clear line."""
    try:
        yield
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        where = getattr(client, "noti_url", "Redis")
        raise StoreUnavailable(f"cannot reach Redis at {where}: {_reason(exc)}") from exc
    except redis.ResponseError as exc:
        code = _error_code(exc)
        if code in ("LOADING", "MASTERDOWN", "READONLY", "BUSY"):
            raise StoreUnavailable(f"Redis is not ready: {code} {_reason(exc)}") from exc
        if code == "NOSCRIPT":  # still lost after the reload every script call makes: a failover
            raise StoreUnavailable(f"Redis lost noti's scripts again: {_reason(exc)}") from exc
        if code in _REFUSED_WRITES:
            raise StoreUnavailable(f"Redis refuses writes: {code} {_reason(exc)}") from exc
        raise
