"""Redis connections and the one place where redis-py errors become noti errors."""

from __future__ import annotations

import collections
import contextlib
import importlib.resources
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Self
from urllib.parse import urlsplit, urlunsplit

import hiredis
import redis
from redis.commands.core import Script

from noti.errors import StoreUnavailable

__all__ = [
    "CommandPipeline",
    "ScriptPipeline",
    "run_batches",
    "run_commands",
    "connect",
    "load_script",
    "masked_url",
    "script_source",
    "translate_errors",
]


def masked_url(url: str) -> str:
    """``url`` with any password replaced by ``***``, fit for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc}"))


def connect(url: str) -> redis.Redis:
    """A client for ``url`` (decoded responses, explicit timeouts, a thread-safe pool).

    No connection is made until the first command.
    """
    client: redis.Redis = redis.Redis.from_url(
        url,
        decode_responses=True,
        socket_timeout=10,
        socket_connect_timeout=3,
        health_check_interval=30,
        retry_on_timeout=False,
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
#: A command as Redis' wire protocol (hiredis, in C).
_pack_command: Callable[[tuple[Any, ...]], bytes] = hiredis.pack_command


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

    def _write(self, commands: Sequence[Any]) -> None:
        packed = [self._pack(command) for command in commands]
        if self._connection is None:
            self._connection = self._client.connection_pool.get_connection()
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


@contextlib.contextmanager
def translate_errors(client: redis.Redis) -> Iterator[None]:
    """Turn Redis connection failures into :class:`StoreUnavailable` with one clear line."""
    try:
        yield
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        where = getattr(client, "noti_url", "Redis")
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise StoreUnavailable(f"cannot reach Redis at {where}: {reason}") from exc
    except redis.ResponseError as exc:
        if str(exc).startswith(("LOADING ", "MASTERDOWN ", "READONLY ", "BUSY ")):
            raise StoreUnavailable(f"Redis is not ready: {exc}") from exc
        raise
