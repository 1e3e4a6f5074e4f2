"""API tokens: the HTTP API's callers and what each may do (``noti token add | list | revoke``).

A token is ``noti_`` and 43 random URL-safe characters (256 bits), shown once when it is made.
Redis keeps only its SHA-256 (``noti:token:<sha256>``, a HASH: user, level cap, rate, note,
created, expiry, providers, revoked, last used; ``noti:tokens`` lists the digests), so a copy
of Redis yields no token. A token is bound to one user: a request made with it acts as that
user, who is never taken from the request, and is capped by the token's level cap (on top of
the user's role cap) and rate limit. A token's id is the first 12 hex digits of its digest:
what ``noti token list`` shows and ``noti token revoke`` takes. Revoked tokens stay listed
(with the time of the revocation) and authenticate nothing.

A token may expire (``-expires 30d``, or a date): from that millisecond on, by the Redis
server's clock (the one the rate limit runs on, shared by every API process), it
authenticates nothing (``e.noti.auth.expired``) and stays listed. A token may name the
providers it may use (``-providers hook,aliyun``): :class:`Caller` carries them, and adding
a notification holds the token to them (:mod:`noti.access.grants`).

Only root administrators make, list and revoke tokens (:meth:`User.require_admin`).
"""

from __future__ import annotations

import hashlib
import math
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import redis

from noti.access.users import LEVEL_CAPS, Role, resolve_user
from noti.config import Settings
from noti.core.keys import Keys
from noti.core.record import now_ms
from noti.errors import InvalidInput, NotFound, RateLimitExceeded, Unauthenticated
from noti.inputs import check_name, finite_number, integer, shown, user_name
from noti.redis.conn import load_script
from noti.redis.outage import translate_errors

__all__ = ["PREFIX", "Caller", "TokenInfo", "TokenStore", "digest_of", "parse_expiry", "parse_providers"]

#: How every token starts (so a leaked one is recognisable, e.g. by secret scanners).
PREFIX = "noti_"
#: Hex digits of the digest that name a token (its id).
ID_LEN = 12
#: The shortest id prefix ``revoke`` takes.
ID_MIN = 6
#: The longest token an ``Authorization`` header may carry (longer ones are never ours).
TOKEN_MAX = 200
#: The highest rate limit a token may be given, requests a second.
RATE_MAX = 1_000_000.0
#: The furthest ahead a token's expiry may be (ten years).
EXPIRES_MAX_S = 3650 * 86400
#: Seconds of each unit of a lifetime (``30d``, ``12h``, ``90m``, ``3600s``).
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_LIFETIME = re.compile(r"([0-9]{1,10})([smhd])")
#: The most providers a token may name, and the longest provider name.
PROVIDERS_MAX, PROVIDER_NAME_MAX = 100, 64


def digest_of(token: str) -> str:
    """The SHA-256 (hex) under which ``token`` is stored."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True, slots=True)
class TokenInfo:
    """One token as stored (never the token itself)."""

    #: The first :data:`ID_LEN` hex digits of its digest.
    id: str
    user: str
    #: The highest level its requests get (None: the user's role cap alone).
    level_cap: int | None
    #: Requests a second it may make (None: unlimited).
    rate_per_s: float | None
    note: str
    created_ms: int
    revoked_ms: int | None
    #: When it last authenticated a request, to the second (None: never).
    used_ms: int | None
    #: From when it authenticates nothing (epoch ms; None: never expires).
    expires_ms: int | None = None
    #: The only providers its notifications may name (None: no restriction of its own).
    providers: frozenset[str] | None = None

    @property
    def revoked(self) -> bool:
        return self.revoked_ms is not None

    def expired(self, at_ms: int | None = None) -> bool:
        """Has it expired by ``at_ms`` (default: now, by this machine's clock)?"""
        return self.expires_ms is not None and (now_ms() if at_ms is None else at_ms) >= self.expires_ms

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "user": self.user,
            "level_cap": self.level_cap,
            "rate_per_s": self.rate_per_s,
            "note": self.note,
            "created_ms": self.created_ms,
            "expires_ms": self.expires_ms,
            "providers": None if self.providers is None else sorted(self.providers),
            "revoked_ms": self.revoked_ms,
            "used_ms": self.used_ms,
        }


@dataclass(frozen=True, slots=True)
class Caller:
    """Who an authenticated request acts as: the token's user, capped by the token."""

    token_id: str
    user: str
    level_cap: int | None
    #: The only providers the token's requests may name (None: the token adds no
    #: restriction; the user's own grants still apply).
    providers: frozenset[str] | None = None


class TokenStore:
    """Tokens in Redis: made, listed and revoked by root administrators; checked per request."""

    def __init__(self, client: redis.Redis, keys: Keys, settings: Settings) -> None:
        self.redis = client
        self.keys = keys
        self.settings = settings
        self._auth = load_script(client, "token_auth")

    # --- administration -------------------------------------------------------------------------

    def add(
        self,
        user: str,
        *,
        acting: str | None = None,
        level_cap: int | None = None,
        rate_per_s: float | None = None,
        note: str = "",
        expires: object = None,
        providers: object = None,
    ) -> tuple[str, TokenInfo]:
        """Make a token for ``user``; the token (shown this once) and what is stored of it.

        ``expires``: when it stops authenticating: a lifetime (``"30d"``, ``"12h"``, ``"90m"``,
        ``"3600s"``, a :class:`~datetime.timedelta`) or a moment (an ISO 8601 date or time,
        ``"2027-01-31"`` being its midnight UTC, a :class:`~datetime.datetime`); None: never.
        ``providers``: the only providers its notifications may name (names, or one
        comma-separated text); None: no restriction of its own.

        Raises:
            PermissionDenied: ``e.noti.token.nopvg``: the acting user is no root administrator.
            InvalidInput: ``e.cmd.noti.baduser``, ``e.noti.token.badcap`` (not 1-1000),
                ``e.noti.token.badrate`` (not a number above 0 and at most 1,000,000),
                ``e.noti.token.badnote`` (over 200 characters, or control characters),
                ``e.noti.token.badexpiry`` (neither a lifetime nor a moment, not in the
                future, or more than ten years ahead), ``e.noti.token.badproviders`` (no
                name, or one that cannot be a provider's).
            StoreUnavailable: Redis cannot be reached.
        """
        resolve_user(self.settings, acting).require_admin("e.noti.token.nopvg", "make API tokens")
        user = user_name(user)
        if level_cap is not None:
            level_cap = integer(
                level_cap,
                what="level cap",
                code="e.noti.token.badcap",
                minimum=1,
                maximum=LEVEL_CAPS[Role.ROOT_ADMIN],
                digits=True,
            )
        if rate_per_s is not None:
            rate_per_s = finite_number(
                rate_per_s, what="rate (requests a second)", code="e.noti.token.badrate", above=0
            )
            if rate_per_s > RATE_MAX:
                raise InvalidInput(
                    f"rate {shown(rate_per_s)} is above {RATE_MAX:,.0f} requests a second",
                    code="e.noti.token.badrate",
                )
        if note:
            check_name(note, what="note", code="e.noti.token.badnote", max_len=200)
        created = now_ms()
        expires_ms = None if expires is None else parse_expiry(expires, now=created)
        allowed = None if providers is None else parse_providers(providers)
        token = PREFIX + secrets.token_urlsafe(32)
        digest = digest_of(token)
        fields = {
            "user": user,
            "cap": "" if level_cap is None else str(level_cap),
            "rate": "" if rate_per_s is None else repr(rate_per_s),
            "note": note,
            "created_ms": str(created),
        }
        if expires_ms is not None:
            fields["expires_ms"] = str(expires_ms)
        if allowed is not None:
            fields["providers"] = ",".join(sorted(allowed))
        with translate_errors(self.redis):
            pipe = self.redis.pipeline(transaction=True)
            pipe.hset(self.keys.token(digest), mapping=cast(Any, fields))
            pipe.zadd(self.keys.tokens, {digest: created})
            pipe.execute()
        info = TokenInfo(
            digest[:ID_LEN], user, level_cap, rate_per_s, note, created, None, None, expires_ms, allowed
        )
        return token, info

    def entries(self, *, acting: str | None = None) -> list[TokenInfo]:
        """Every token, oldest first, revoked ones included.

        Raises:
            PermissionDenied: ``e.noti.token.nopvg``. StoreUnavailable.
        """
        resolve_user(self.settings, acting).require_admin("e.noti.token.nopvg", "list API tokens")
        digests = self._digests()
        with translate_errors(self.redis):
            pipe = self.redis.pipeline(transaction=False)
            for digest in digests:
                pipe.hgetall(self.keys.token(digest))
            hashes = pipe.execute()
        return [_info(d, h) for d, h in zip(digests, hashes, strict=True) if h]

    def revoke(self, ident: str, *, acting: str | None = None) -> TokenInfo:
        """Revoke the token whose id starts with ``ident`` (at least 6 hex digits), or the
        token ``ident`` itself; from now on it authenticates nothing. Revoking a revoked token
        changes nothing and answers it.

        Raises:
            PermissionDenied: ``e.noti.token.nopvg``.
            NotFound: ``e.noti.token.not_found``: no token has that id.
            InvalidInput: ``e.noti.token.badid``: not a token or an id prefix, or one that
                names several tokens.
            StoreUnavailable.
        """
        resolve_user(self.settings, acting).require_admin("e.noti.token.nopvg", "revoke API tokens")
        digest = self._find(ident)
        key = self.keys.token(digest)
        with translate_errors(self.redis):
            # HSETNX: the first revocation's time stays
            self.redis.hsetnx(key, "revoked_ms", str(now_ms()))
            stored = cast(dict[str, str], self.redis.hgetall(key))
        return _info(digest, stored)

    def _digests(self) -> list[str]:
        with translate_errors(self.redis):
            return cast(list[str], self.redis.zrange(self.keys.tokens, 0, -1))

    def _find(self, ident: str) -> str:
        if not isinstance(ident, str) or not ident:
            raise InvalidInput(f"{shown(ident)} is no token id", code="e.noti.token.badid")
        if ident.startswith(PREFIX):
            digest = digest_of(ident)
            with translate_errors(self.redis):
                found = self.redis.zscore(self.keys.tokens, digest) is not None
            if not found:
                raise NotFound("no such token", code="e.noti.token.not_found")
            return digest
        prefix = ident.lower()
        if len(prefix) < ID_MIN or len(prefix) > 64 or any(c not in "0123456789abcdef" for c in prefix):
            raise InvalidInput(
                f"{shown(ident)} is no token id: give at least {ID_MIN} hex digits of one "
                "(noti token list shows them)",
                code="e.noti.token.badid",
            )
        matches = [d for d in self._digests() if d.startswith(prefix)]
        if not matches:
            raise NotFound(f"no token has the id {shown(ident)}", code="e.noti.token.not_found")
        if len(matches) > 1:
            raise InvalidInput(
                f"{len(matches)} tokens have ids starting with {shown(ident)}: give more digits",
                code="e.noti.token.badid",
            )
        return str(matches[0])

    # --- per request ------------------------------------------------------------------------------

    def authenticate(self, token: str | None) -> Caller:
        """Who a request carrying ``token`` acts as; takes one request from its rate limit.

        Raises:
            Unauthenticated: ``e.noti.auth.missing`` (no token), ``e.noti.auth.unknown`` (no
                such token), ``e.noti.auth.revoked``, ``e.noti.auth.expired`` (past its
                expiry, by the Redis server's clock).
            RateLimitExceeded: ``e.noti.auth.rate``, with the seconds until the next request
                is let in.
            StoreUnavailable: Redis cannot be reached.
        """
        if not token:
            raise Unauthenticated(
                "this call needs an API token: Authorization: Bearer <token> (noti token add)",
                code="e.noti.auth.missing",
            )
        if len(token) > TOKEN_MAX or not token.startswith(PREFIX):
            raise Unauthenticated("unknown API token", code="e.noti.auth.unknown")
        digest = digest_of(token)
        with translate_errors(self.redis):
            reply = self._auth(keys=[self.keys.token(digest)])
        state = int(reply[0])
        if state == 0:
            raise Unauthenticated("unknown API token", code="e.noti.auth.unknown")
        if state == -1:
            raise Unauthenticated("this API token was revoked", code="e.noti.auth.revoked")
        if state == -3:
            raise Unauthenticated(
                f"this API token expired at {_utc(int(reply[1]))} (UTC)", code="e.noti.auth.expired"
            )
        if state == -2:
            wait_s = max(0.001, int(reply[1]) / 1000)
            raise RateLimitExceeded(
                f"this API token is over its rate limit; try again in {wait_s:.3f} s", retry_after_s=wait_s
            )
        user, cap, allowed = _text(reply[1]), _text(reply[2]), _text(reply[4])
        return Caller(digest[:ID_LEN], user, int(cap) if cap else None, _provider_set(allowed))


def parse_expiry(value: object, *, now: int | None = None) -> int:
    """When a token made at ``now`` (epoch ms, default: now) given ``expires`` stops
    authenticating, in epoch ms: see :meth:`TokenStore.add`.

    Raises:
        InvalidInput: ``e.noti.token.badexpiry``.
    """
    now = now_ms() if now is None else now
    at: int | None = None
    if isinstance(value, timedelta):
        at = now + math.ceil(value.total_seconds() * 1000)
    elif isinstance(value, datetime):
        at = _epoch_ms(value)
    elif isinstance(value, str):
        text = value.strip()
        lifetime = _LIFETIME.fullmatch(text.lower())
        if lifetime:
            at = now + int(lifetime[1]) * _UNITS[lifetime[2]] * 1000
        elif len(text) >= 10 and text[:4].isdigit() and text[4:5] == "-":
            try:
                moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
            except ValueError:
                at = None
            else:
                at = _epoch_ms(moment)
    if at is None:
        raise InvalidInput(
            f"expiry {shown(value)} is neither a lifetime (30d, 12h, 90m, 3600s) nor an ISO 8601 "
            "date or time (2027-01-31, 2027-01-31T12:00:00Z)",
            code="e.noti.token.badexpiry",
        )
    if at <= now:
        raise InvalidInput(f"expiry {shown(value)} is not in the future", code="e.noti.token.badexpiry")
    if at - now > EXPIRES_MAX_S * 1000:
        raise InvalidInput(
            f"expiry {shown(value)} is more than {EXPIRES_MAX_S // 86400} days ahead "
            "(make a token without -expires for one that never expires)",
            code="e.noti.token.badexpiry",
        )
    return at


def parse_providers(value: object) -> frozenset[str]:
    """The provider names a token is limited to: names, or one comma-separated text.

    Raises:
        InvalidInput: ``e.noti.token.badproviders``: no name, more than 100, or one with
        white space, a comma or a control character, or over 64 characters.
    """
    code = "e.noti.token.badproviders"
    if isinstance(value, str):
        names: list[object] = [part.strip() for part in value.split(",")]
    elif isinstance(value, Iterable) and not isinstance(value, (bytes, dict)):
        names = list(value)
    else:
        raise InvalidInput(f"providers must be names, got {shown(value)}", code=code)
    if not names or names == [""]:
        raise InvalidInput("name at least one provider (or leave -providers out)", code=code)
    if len(names) > PROVIDERS_MAX:
        raise InvalidInput(f"{len(names)} providers named; the limit is {PROVIDERS_MAX}", code=code)
    for name in names:
        check_name(name, what="provider name", code=code, max_len=PROVIDER_NAME_MAX, spaces=False)
        if "," in cast(str, name):
            raise InvalidInput(f"provider name {shown(name)} must not contain a comma", code=code)
    return frozenset(cast(list[str], names))


def _epoch_ms(moment: datetime) -> int | None:
    """``moment`` as epoch ms (a time without a zone is UTC); None when no date can hold it."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        return math.floor(moment.timestamp() * 1000)
    except (OverflowError, ValueError, OSError):
        return None


def _utc(ms: int) -> str:
    try:
        return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")
    except (OverflowError, ValueError, OSError):
        return str(ms)


def _provider_set(stored: str) -> frozenset[str] | None:
    return frozenset(stored.split(",")) if stored else None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _info(digest: str, stored: dict[str, str]) -> TokenInfo:
    cap, rate = stored.get("cap", ""), stored.get("rate", "")
    revoked, used = stored.get("revoked_ms", ""), stored.get("used_ms", "")
    expires = stored.get("expires_ms", "")
    rate_per_s = float(rate) if rate else None
    return TokenInfo(
        id=digest[:ID_LEN],
        user=stored.get("user", ""),
        level_cap=int(cap) if cap else None,
        rate_per_s=rate_per_s if rate_per_s is None or math.isfinite(rate_per_s) else None,
        note=stored.get("note", ""),
        created_ms=int(stored.get("created_ms") or 0),
        revoked_ms=int(revoked) if revoked else None,
        used_ms=int(used) if used else None,
        expires_ms=int(expires) if expires else None,
        providers=_provider_set(stored.get("providers", "")),
    )
