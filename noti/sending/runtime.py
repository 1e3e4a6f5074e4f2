"""The composition root: one settings object and the Redis client, store, delayed set and
providers built from it, shared by everything in a process.

Applications, the CLI, tasks and the worker all reach noti's parts through
:func:`get_runtime`. Tests (and embedding applications) replace it with :func:`configure`.
"""

from __future__ import annotations

import functools
import threading
from typing import TYPE_CHECKING, Any

from noti.config import Settings, get_settings, load_settings
from noti.core.deadletter import DeadLetters, load_hook
from noti.core.delay import DelayedQueue
from noti.core.keys import Keys
from noti.core.store import RecordStore
from noti.redis.conn import PoolClient, ReplicaWait, connect, connect_any
from noti.tracing import configure as configure_tracing

if TYPE_CHECKING:
    from noti.access.signing import SigningKeys
    from noti.access.tokens import TokenStore
    from noti.core.lease import LeaseKeeper
    from noti.delivery.book import DeliveryBook
    from noti.providers import ProviderSet
    from noti.providers.ratelimit import RateLimiter
    from noti.sending.handlers import NotificationHandler

# What only delivery uses (providers, handlers, rate limits, leases) is imported by the
# property that builds it: reading or adding records (the CLI) needs none of it.

__all__ = ["Runtime", "configure", "get_runtime"]


class Runtime:
    """Everything built from one :class:`~noti.config.Settings`."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        configure_tracing(mode=settings.tracing, propagate=settings.tracing_propagate)
        self.keys = Keys(settings.key_prefix, tuple(sorted(settings.numpool_keys.items())))
        self.redis = connect(settings.redis_url)
        replica_wait = None
        if settings.redis_wait_replicas:
            replica_wait = ReplicaWait(settings.redis_wait_replicas, settings.redis_wait_timeout_ms)
        self.store = RecordStore(self.redis, self.keys, replica_wait=replica_wait)
        self.delayed = DelayedQueue(self.redis, self.keys)
        self._providers: ProviderSet | None = None
        self._providers_lock = threading.Lock()
        self.dead_letters = DeadLetters(
            self.redis,
            self.keys,
            max_len=settings.dead_letter_max_len,
            max_age_s=settings.dead_letter_max_age_s,
            hook=load_hook(settings.dead_letter_hook),
        )

    @functools.cached_property
    def numpool_redis(self) -> PoolClient:
        """Where the number pools live: ``numpool_redis_url`` (a Redis, Sentinel or Cluster
        URL), else the records' Redis."""
        url = self.settings.numpool_redis_url
        return self.redis if url is None else connect_any(url)

    @property
    def providers(self) -> ProviderSet:
        """The configured providers, built on first use (reading records needs none of their
        code); one set per runtime, whichever thread asks first."""
        found = self._providers
        if found is None:
            with self._providers_lock:
                found = self._providers
                if found is None:
                    from noti.providers import ProviderSet

                    found = self._providers = ProviderSet(
                        self.settings, redis=self.redis, keys=self.keys, pool_redis=self.numpool_redis
                    )
        return found

    @functools.cached_property
    def handler(self) -> NotificationHandler | None:
        """The application's delivery hooks (``NOTI_HANDLERS``), built on first use: by the
        worker at start-up, so a bad setting stops it there.

        Raises:
            InvalidConfig: the setting names nothing usable.
        """
        from noti.sending.handlers import load_handler

        return load_handler(self.settings.handlers)

    @functools.cached_property
    def rate_limiter(self) -> RateLimiter:
        """Per-provider token buckets shared by all workers."""
        from noti.providers.ratelimit import RateLimiter

        return RateLimiter(self.redis, self.keys)

    @functools.cached_property
    def tokens(self) -> TokenStore:
        """The HTTP API's tokens (:mod:`noti.access.tokens`)."""
        from noti.access.tokens import TokenStore

        return TokenStore(self.redis, self.keys, self.settings)

    @functools.cached_property
    def signing_keys(self) -> SigningKeys:
        """The users' webhook signing secrets (:mod:`noti.access.signing`)."""
        from noti.access.signing import SigningKeys

        return SigningKeys(self.redis, self.keys, self.settings)

    @functools.cached_property
    def delivery(self) -> DeliveryBook:
        """Applies vendors' delivery reports to the records (:mod:`noti.delivery`)."""
        from noti.delivery.book import DeliveryBook

        return DeliveryBook(
            self.redis,
            self.keys,
            window_s=self.settings.receipt_window_s,
            early_max=self.settings.receipt_early_max,
            early_ttl_s=self.settings.receipt_early_ttl_s,
        )

    @functools.cached_property
    def lease_keeper(self) -> LeaseKeeper:
        """Renews the leases of this process's sends in progress (started on first use)."""
        from noti.core.lease import LeaseKeeper

        return LeaseKeeper(self.store)

    def close(self) -> None:
        self.store.close()
        if self._providers is not None:
            self._providers.close()
        pools = self.__dict__.get("numpool_redis")  # made only if used
        if pools is not None and pools is not self.redis:
            pools.close()
        self.redis.close()


_lock = threading.Lock()
_current: Runtime | None = None


def get_runtime() -> Runtime:
    """This process's runtime, built from :func:`~noti.config.get_settings` on first use."""
    global _current
    with _lock:
        if _current is None:
            _current = Runtime(get_settings())
        return _current


def configure(settings: Settings | None = None, **overrides: Any) -> Runtime:
    """Replace this process's runtime: with ``settings``, or the environment plus ``overrides``."""
    global _current
    runtime = Runtime(settings if settings is not None else load_settings(**overrides))
    with _lock:
        old, _current = _current, runtime
    if old is not None:
        old.close()
    return runtime
