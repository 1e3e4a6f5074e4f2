"""A random secret noti keeps in Redis (hex text under one key), made on first use: what
unsubscribe links are signed with (:mod:`noti.recipients.unsubscribe`) and what the address
index's names are keyed with (:mod:`noti.core.search`). Every process reads the same one."""

from __future__ import annotations

import secrets

import redis

from noti.redis.outage import translate_errors

__all__ = ["new_secret", "read_secret"]


def new_secret() -> str:
    """A new secret's text: 32 random bytes in hex."""
    return secrets.token_hex(32)


def read_secret(client: redis.Redis, key: str, *, make: str | None = None) -> bytes | None:
    """The secret at ``key`` (its bytes), or None when there is none. ``make`` (hex text) is
    stored first when the key has none (``SET NX``): the first process to ask makes it, the
    others read that one.

    Raises:
        StoreUnavailable: Redis cannot be reached.
    """
    with translate_errors(client):
        if make is not None:
            client.set(key, make, nx=True)
        value = client.get(key)
    return (
        None if value is None else bytes.fromhex(value.decode() if isinstance(value, bytes) else str(value))
    )
