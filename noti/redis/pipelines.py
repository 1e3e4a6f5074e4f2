"""Commands written to Redis in as few round trips as the work allows: a connection held by
one thread between calls (:class:`HeldConnection`, the hot path of ``notify()``), commands
packed by hiredis and pipelined in chunks (:class:`CommandPipeline`, :func:`run_commands`,
:func:`run_batches`), and script calls pipelined by SHA (:class:`ScriptPipeline`).
"""

from __future__ import annotations

import collections
import inspect
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Self

import hiredis
import redis
from redis.commands.core import Script

__all__ = [
    "Call",
    "CommandPipeline",
    "HeldConnection",
    "ScriptPipeline",
    "pack_command",
    "pooled_connection",
    "run_batches",
    "run_commands",
]

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


os.register_at_fork(after_in_child=_reset_held_after_fork)
