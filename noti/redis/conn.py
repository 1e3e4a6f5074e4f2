"""Redis connections: a client for a URL (a single Redis, one found through Sentinel, a
Cluster), with the driver information redis-py would otherwise look up on every connection;
the Lua scripts of ``noti/lua/`` loaded by name; and the wait for writes to reach replicas
(:class:`ReplicaWait`). URLs are :mod:`noti.redis.urls`, pipelines :mod:`noti.redis.pipelines`,
errors and outages :mod:`noti.redis.outage`."""

from __future__ import annotations

import importlib.resources
import logging
import re
import time
from dataclasses import dataclass, field
from typing import Any

import redis
from redis.cluster import ClusterNode, RedisCluster
from redis.commands.core import Script
from redis.retry import Retry

from noti.errors import StoreUnavailable
from noti.redis.outage import translate_errors
from noti.redis.pipelines import (
    CommandPipeline,
)
from noti.redis.urls import (
    ClusterUrl,
    SentinelUrl,
    masked_url,
)

__all__ = ["PoolClient", "ReplicaWait", "connect", "connect_any", "load_script", "script_source"]

log = logging.getLogger(__name__)


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


#: A single Redis or a Redis Cluster client (both run scripts by SHA).
PoolClient = redis.Redis | RedisCluster


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
