"""Each user's webhook signing secrets: what signs the webhooks and status callbacks a user's
notifications post to URLs the operator did not configure.

A webhook provider's own ``secret`` and ``headers`` belong to the receivers the operator
configured for it (its ``destinations``). A webhook to any other URL is one a user chose, so
it is signed with a secret of that user's, as Stripe and Svix sign each endpoint with a
secret of its own: alice's receiver verifies alice's secret, and nothing alice can post is
ever signed with the operator's key or another user's.

A secret is ``whsec_`` and base64 of 32 random bytes (the Standard Webhooks form), shown once
when it is made (``noti signing-key add``, ``POST /v1/signing-keys``). A user has at most
:data:`KEYS_MAX`; every request is signed with each of them, newest first (``v1,<new>
v1,<old>``: the Standard Webhooks rotation), so rotating is: add a new secret, give it to the
receivers, delete the old one. Redis keeps the secrets themselves (HMAC needs the key, unlike
an API token, whose hash is enough): ``noti:sigkeys:<user>``, a HASH of key id ->
``<created ms> <secret>``.

A user makes, lists and deletes their own secrets; a root administrator anyone's. Another
user's key id answers exactly as a missing one.

Workers read a user's secrets at each send through a per-process cache of
:data:`CACHE_S` seconds: a deleted secret stops signing within that time.
"""

from __future__ import annotations

import base64
import binascii
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any, cast

import redis

from noti.access.users import User, resolve_user
from noti.config import Settings
from noti.core.keys import Keys
from noti.core.record import now_ms
from noti.errors import InvalidInput, NotFound, PermissionDenied
from noti.inputs import user_name
from noti.redis.conn import load_script
from noti.redis.outage import translate_errors

__all__ = ["CALLBACK_ID_PREFIX", "KEYS_MAX", "SECRET_PREFIX", "SigningKey", "SigningKeys", "secret_key"]

SECRET_PREFIX = "whsec_"
#: Secrets a user may have at once (a rotation needs two).
KEYS_MAX = 3
#: Random bytes of a secret's key noti makes.
KEY_BYTES = 32
#: Key sizes the Standard Webhooks spec recommends (a provider's configured secret too).
KEY_BYTES_MIN, KEY_BYTES_MAX = 24, 64
#: How long a worker keeps a user's secrets before reading them again (seconds).
CACHE_S = 2.0
#: Most users whose secrets one process caches.
CACHE_MAX = 4096
#: ``webhook-id`` of a status callback: this prefix and the callback's record id. A user's own
#: webhooks carry their record id alone, and the id is part of what is signed, so no body a
#: user posts can pass for a status callback.
CALLBACK_ID_PREFIX = "cb_"
_ID_PREFIX = "sk_"
_ID_HEX = 16


def secret_key(secret: str) -> bytes:
    """The HMAC key of a ``whsec_<base64>`` secret (the Standard Webhooks form: a key of
    :data:`KEY_BYTES_MIN` to :data:`KEY_BYTES_MAX` bytes); a user's and a webhook provider's
    alike. ValueError (never naming the secret) if it is not one."""
    if not secret.startswith(SECRET_PREFIX):
        raise ValueError(f"must start with {SECRET_PREFIX!r}")
    encoded = secret[len(SECRET_PREFIX) :]
    try:
        key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except binascii.Error:
        raise ValueError(f"the part after {SECRET_PREFIX!r} is not base64") from None
    if not KEY_BYTES_MIN <= len(key) <= KEY_BYTES_MAX:
        raise ValueError(f"the key is {len(key)} bytes; use {KEY_BYTES_MIN} to {KEY_BYTES_MAX}")
    return key


@dataclass(frozen=True, slots=True)
class SigningKey:
    """One signing secret as listed (never the secret itself)."""

    id: str
    user: str
    created_ms: int

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "user": self.user, "created_ms": self.created_ms}


class SigningKeys:
    """The users' signing secrets in Redis, and a short per-process cache for the senders."""

    def __init__(self, client: redis.Redis, keys: Keys, settings: Settings | None = None) -> None:
        self.redis = client
        self.keys = keys
        self.settings = settings
        self._cache: dict[str, tuple[float, list[bytes]]] = {}
        self._lock = threading.Lock()
        self._add = load_script(client, "sigkey_add")

    # --- administration -----------------------------------------------------------------------

    def add(self, owner: str | None = None, *, acting: str | None = None) -> tuple[str, SigningKey]:
        """Make a secret for ``owner`` (default: the acting user); the secret (shown this once)
        and its listing.

        Raises:
            PermissionDenied: ``e.noti.sigkey.nopvg``: another user's, and not a root admin.
            InvalidInput: ``e.noti.sigkey.full``: the user has :data:`KEYS_MAX` already (delete
                one first); ``e.cmd.noti.baduser``.
            StoreUnavailable.
        """
        user = self._owner(owner, acting, "make signing keys")
        secret = SECRET_PREFIX + base64.b64encode(secrets.token_bytes(KEY_BYTES)).decode()
        key_id = _ID_PREFIX + secrets.token_hex(_ID_HEX // 2)
        created = now_ms()
        with translate_errors(self.redis):
            added = self._add(
                keys=[self.keys.signing_keys(user)], args=[key_id, f"{created} {secret}", KEYS_MAX]
            )
        if not int(cast(int, added)):
            raise InvalidInput(
                f"{user} has {KEYS_MAX} signing keys already: delete one first (noti signing-key del)",
                code="e.noti.sigkey.full",
            )
        self._forget(user)
        return secret, SigningKey(key_id, user, created)

    def entries(self, owner: str | None = None, *, acting: str | None = None) -> list[SigningKey]:
        """``owner``'s secrets (default: the acting user's), newest first.

        Raises:
            PermissionDenied: ``e.noti.sigkey.nopvg``. StoreUnavailable.
        """
        user = self._owner(owner, acting, "list signing keys")
        return [SigningKey(key_id, user, created) for key_id, created, _ in self._read(user)]

    def delete(self, key_id: str, owner: str | None = None, *, acting: str | None = None) -> SigningKey:
        """Delete ``owner``'s secret ``key_id``: it signs nothing from now on (workers: within
        :data:`CACHE_S` seconds).

        Raises:
            NotFound: ``e.noti.sigkey.not_found``: the user has no such key (another user's
                key answers the same). PermissionDenied: ``e.noti.sigkey.nopvg``.
            StoreUnavailable.
        """
        user = self._owner(owner, acting, "delete signing keys")
        if not isinstance(key_id, str) or not key_id.startswith(_ID_PREFIX) or len(key_id) > 64:
            raise NotFound("no such signing key", code="e.noti.sigkey.not_found")
        key = self.keys.signing_keys(user)
        with translate_errors(self.redis):  # one round trip: read what it was, delete it
            pipe = self.redis.pipeline(transaction=True)
            pipe.hget(key, key_id)
            pipe.hdel(key, key_id)
            stored, removed = cast(tuple[str | None, int], tuple(pipe.execute()))
        if not removed:
            raise NotFound("no such signing key", code="e.noti.sigkey.not_found")
        self._forget(user)
        return SigningKey(key_id, user, _created(stored or ""))

    # --- per send -----------------------------------------------------------------------------

    def signing(self, user: str) -> list[bytes]:
        """The HMAC keys that sign for ``user``, newest first (empty: the user has none);
        cached for :data:`CACHE_S` seconds.

        Raises:
            StoreUnavailable.
        """
        now = time.monotonic()
        with self._lock:
            cached = self._cache.get(user)
        if cached is not None and cached[0] > now:
            return cached[1]
        found = [secret_key(secret) for _, _, secret in self._read(user)]
        with self._lock:
            if len(self._cache) >= CACHE_MAX:
                self._cache.clear()
            self._cache[user] = (now + CACHE_S, found)
        return found

    # --- inside -------------------------------------------------------------------------------

    def _owner(self, owner: str | None, acting: str | None, action: str) -> str:
        settings = self.settings
        if settings is None:  # pragma: no cover - a store built for senders only
            raise RuntimeError("SigningKeys needs the settings to administer keys")
        who: User = resolve_user(settings, acting)
        user = who.name if owner is None else user_name(owner)
        if user != who.name and not who.is_admin:
            raise PermissionDenied(
                f"only root administrators may {action} of other users (acting user: {who.name})",
                code="e.noti.sigkey.nopvg",
            )
        return user

    def _read(self, user: str) -> list[tuple[str, int, str]]:
        """``(id, created ms, secret)`` of each of ``user``'s secrets, newest first."""
        with translate_errors(self.redis):
            stored = cast(dict[str, str], self.redis.hgetall(self.keys.signing_keys(user)))
        found = []
        for key_id, value in stored.items():
            created, _, secret = value.partition(" ")
            found.append((key_id, _created(created), secret))
        found.sort(key=lambda item: (item[1], item[0]), reverse=True)
        return found

    def _forget(self, user: str) -> None:
        with self._lock:
            self._cache.pop(user, None)


def _created(text: str) -> int:
    head = text.partition(" ")[0]
    return int(head) if head.isdigit() else 0
