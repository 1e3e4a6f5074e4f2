"""Redis connections and the one place where redis-py errors become noti errors."""

from __future__ import annotations

import contextlib
import importlib.resources
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import redis
from redis.commands.core import Script

from noti.errors import StoreUnavailable

__all__ = ["connect", "load_script", "masked_url", "run_pipelined", "translate_errors"]


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


def load_script(client: redis.Redis, name: str, *, package: str = "noti.lua") -> Script:
    """The Lua script ``<name>.lua`` of ``package`` (default ``noti/lua``) registered on ``client``.

    Scripts run by SHA and are re-sent transparently after ``SCRIPT FLUSH`` or a fail-over.
    """
    source = importlib.resources.files(package).joinpath(f"{name}.lua").read_text()
    return client.register_script(source)


def run_pipelined(
    client: redis.Redis, script: Script, calls: Sequence[tuple[Sequence[Any], Sequence[Any]]]
) -> list[Any]:
    """Run ``script`` once per ``(keys, args)`` in one pipelined round trip; the results.

    redis-py's own pipelined scripts cost an extra ``SCRIPT EXISTS`` round trip per
    execute; this sends bare EVALSHAs and, only if the server lost the script (after
    ``SCRIPT FLUSH`` or a fail-over), loads it and sends them again — every EVALSHA of the
    batch failed then, so nothing ran twice.
    """
    for attempt in range(2):
        pipe = client.pipeline(transaction=False)
        for keys, args in calls:
            pipe.evalsha(script.sha, len(keys), *keys, *args)
        results = pipe.execute(raise_on_error=False)
        if attempt == 0 and any(isinstance(r, redis.exceptions.NoScriptError) for r in results):
            script.sha = client.script_load(script.script)
            continue
        for result in results:
            if isinstance(result, Exception):
                raise result
        return list(results)
    raise AssertionError("unreachable")  # pragma: no cover


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
