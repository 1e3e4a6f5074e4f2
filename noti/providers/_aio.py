"""Asynchronous HTTP for providers: one pooled ``aiohttp.ClientSession`` per asyncio loop, and
aiohttp's failures mapped to the outcome classes exactly as :mod:`noti.providers._http` maps
httpx's (the table there).

Why aiohttp on the hot path: with many requests in flight, httpx's connection pool costs
1.3-6.7 ms of CPU per request on a 2-core host, aiohttp about 0.15 ms
(shared/perf-feasibility.md, encode/httpx#3215). httpx stays for the blocking calls.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp

from noti.providers._http import cannot_connect, no_complete_answer, transport_failed, unencodable

__all__ = ["close_session", "map_errors", "session"]

#: Connections one process keeps open at most (all hosts together).
MAX_CONNECTIONS = 1000

_sessions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aiohttp.ClientSession] = (
    weakref.WeakKeyDictionary()
)


def session() -> aiohttp.ClientSession:
    """The running loop's pooled session (created on first use)."""
    loop = asyncio.get_running_loop()
    current = _sessions.get(loop)
    if current is None or current.closed:
        current = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=MAX_CONNECTIONS, limit_per_host=0),
            headers={"user-agent": "noti"},
            auto_decompress=True,
        )
        _sessions[loop] = current
    return current


async def close_session() -> None:
    """Close the running loop's session, if it has one."""
    current = _sessions.pop(asyncio.get_running_loop(), None)
    if current is not None:
        await current.close()


@asynccontextmanager
async def map_errors(provider: str) -> AsyncIterator[None]:
    """Translate aiohttp failures into the outcome classes (see :mod:`noti.providers._http`)."""
    try:
        yield
    except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError) as exc:
        raise cannot_connect(provider, exc) from exc
    except (aiohttp.InvalidURL, ValueError) as exc:  # we built a request aiohttp refuses
        raise unencodable(provider) from exc
    except (
        TimeoutError,
        aiohttp.ServerDisconnectedError,
        aiohttp.ClientPayloadError,
        aiohttp.ClientResponseError,  # an answer that is not HTTP (raise_for_status is never used)
        aiohttp.ClientOSError,
    ) as exc:
        raise no_complete_answer(provider, exc) from exc
    except aiohttp.ClientError as exc:
        raise transport_failed(provider, exc) from exc
