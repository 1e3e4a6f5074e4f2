"""A vendor credential shared by every worker through Redis: an FCM access token, an APNs
provider JWT.

The credential lives at :meth:`noti.core.keys.Keys.credential` for its reuse life (the key's
TTL). A send that finds none makes one under the lock ``noti:lock:cred:<kind>:<account>``
while the other workers' sends poll the cache for up to ``wait_s`` instead of making their
own: one worker asks Google for a token, and APNs sees one provider-token update, whatever
the number of workers. Past ``wait_s`` the send is a :class:`~noti.errors.RateLimited` of a few
seconds (nothing was sent: not an attempt). A credential the vendor refused is dropped only
if it is still the cached one, so a refusal of an old credential never drops a newer one
another worker already made.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import redis

from noti.core.keys import Keys
from noti.errors import RateLimited
from noti.redis.outage import translate_errors

__all__ = ["POLL_S", "WAIT_RETRY_S", "SharedCredential"]

#: How often a send waiting for another worker's credential looks at the cache again.
POLL_S = 0.05
#: When the credential is still not there after ``wait_s``, the record waits this long.
WAIT_RETRY_S = 5.0


class SharedCredential:
    """One cached credential: :meth:`get` it (made by ``make`` when none is cached), :meth:`drop` it."""

    def __init__(
        self,
        client: redis.Redis,
        keys: Keys,
        *,
        kind: str,
        account: str,
        provider: str,
        wait_s: float,
        make_timeout_s: float,
    ) -> None:
        self.redis = client
        self.key = keys.credential(kind, account)
        self.lock_key = keys.lock(f"cred:{kind}:{account}")
        self.provider = provider
        self.wait_s = wait_s
        self.make_timeout_s = make_timeout_s

    def cached(self) -> str | None:
        with translate_errors(self.redis):
            value = self.redis.get(self.key)
        return str(value) if value else None

    def get(self, make: Callable[[], tuple[str, float]]) -> str:
        """The cached credential, or one made now by ``make`` (it returns the credential and
        the seconds it may be reused) or by another worker meanwhile.

        Raises:
            RateLimited: another worker is still making it after ``wait_s``.
            DeliveryError: whatever ``make`` raises (the vendor refused or failed).
            StoreUnavailable: Redis failed.
        """
        deadline = time.monotonic() + self.wait_s
        lock = self.redis.lock(
            self.lock_key, timeout=self.make_timeout_s + 5, blocking=False, thread_local=False
        )
        while True:
            cached = self.cached()
            if cached:
                return cached
            with translate_errors(self.redis):
                acquired = lock.acquire(blocking=False)
            if acquired:
                try:
                    cached = self.cached()  # made while we waited for the lock
                    if cached:
                        return cached
                    value, ttl_s = make()
                    with translate_errors(self.redis):
                        self.redis.set(self.key, value, ex=max(1, int(ttl_s)))
                    return value
                finally:
                    try:
                        lock.release()
                    except redis.exceptions.RedisError:  # expired meanwhile: nothing to free
                        pass
            if time.monotonic() >= deadline:
                raise RateLimited(
                    f"{self.provider}: another worker is still making the vendor credential",
                    retry_after_s=WAIT_RETRY_S,
                    provider=self.provider,
                )
            time.sleep(POLL_S)

    def drop(self, value: str) -> bool:
        """Delete the cached credential if it is still ``value``; whether it was."""
        with translate_errors(self.redis), self.redis.pipeline() as pipe:
            try:
                pipe.watch(self.key)  # type: ignore[no-untyped-call]
                if pipe.get(self.key) == value:
                    pipe.multi()
                    pipe.delete(self.key)
                    pipe.execute()
                    return True
                pipe.unwatch()
            except redis.exceptions.WatchError:  # replaced meanwhile: keep the new one
                pass
        return False
