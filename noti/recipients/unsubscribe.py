"""Unsubscribe links: a URL per recipient, category and channel that opts the recipient out
with one request, and nothing else.

``notify(recipient=…)`` gives every e-mail of a category recipients may opt out of an
``unsubscribe`` field (sent as ``List-Unsubscribe`` and ``List-Unsubscribe-Post:
List-Unsubscribe=One-Click``, RFC 2369 / RFC 8058) and every template the variable
``unsubscribe_url``, when ``NOTI_PUBLIC_URL`` says where noti's HTTP API is reached:
``<public url>/v1/unsubscribe/<token>``. A ``POST`` there (the mail client's one click, or
the page's button) sets the recipient's preference for that category on that channel to out;
a ``GET`` shows a page with that button, so a link scanner that follows links opts no one out.

The token is ``<base64url of owner, recipient, category, channel>.<HMAC-SHA256, 128 bits>``
under a random secret noti keeps in Redis (``noti:unsub:secret``, made on first use): it
cannot be forged or altered to name another recipient, and it names only what it opts out.
STOP replies to SMS are the vendors' (their opt-out reports put the number on the SMS
suppression list, which ``notify.lua`` and the claim honour).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import weakref
from dataclasses import dataclass

from noti.errors import InvalidInput
from noti.redis.kept_secret import new_secret, read_secret
from noti.sending.runtime import Runtime

__all__ = ["Unsubscribe", "read_token", "unsubscribe_url"]

_SEP = "\x1f"
#: The secret each runtime read (a runtime dropped by ``configure()`` drops its entry).
_SECRETS: weakref.WeakKeyDictionary[Runtime, bytes] = weakref.WeakKeyDictionary()
_MAC_BYTES = 16
TOKEN_MAX = 1024


@dataclass(frozen=True, slots=True)
class Unsubscribe:
    """What a token opts out."""

    owner: str
    recipient: str
    category: str
    channel: str


def _secret(runtime: Runtime, *, create: bool = True, fresh: bool = False) -> bytes | None:
    """The signing secret: kept per runtime once read, made on first use when ``create``
    (links are made), only read otherwise (links are checked: a refused request writes
    nothing). ``fresh`` reads it again (the key may have been replaced since it was kept)."""
    cached = _SECRETS.get(runtime)
    if cached is not None and not fresh:
        return cached
    secret = read_secret(
        runtime.redis, runtime.keys.unsubscribe_secret, make=new_secret() if create else None
    )
    if secret is not None:
        _SECRETS[runtime] = secret
    return secret


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def make_token(runtime: Runtime, what: Unsubscribe) -> str:
    body = _SEP.join((what.owner, what.recipient, what.category, what.channel)).encode()
    secret = _secret(runtime)
    assert secret is not None  # made above when missing
    mac = hmac.new(secret, body, hashlib.sha256).digest()[:_MAC_BYTES]
    return f"{_b64(body)}.{_b64(mac)}"


def unsubscribe_url(runtime: Runtime, owner: str, recipient: str, category: str, channel: str) -> str:
    """The one-click unsubscribe URL of one recipient, category and channel."""
    base = (runtime.settings.public_url or "").rstrip("/")
    return f"{base}/v1/unsubscribe/{make_token(runtime, Unsubscribe(owner, recipient, category, channel))}"


def read_token(runtime: Runtime, token: object) -> Unsubscribe:
    """What a token opts out, once its MAC is checked (nothing is written, even when no link
    was ever made).

    Raises:
        InvalidInput: ``e.cmd.noti.unsub.badtoken``: malformed, altered or forged.
    """
    bad = InvalidInput("this unsubscribe link is not valid", code="e.cmd.noti.unsub.badtoken")
    if not isinstance(token, str) or len(token) > TOKEN_MAX or token.count(".") != 1:
        raise bad
    body_text, mac_text = token.split(".")
    try:
        body, mac = _unb64(body_text), _unb64(mac_text)
    except (ValueError, TypeError):
        raise bad from None
    for fresh in (False, True):  # a kept secret may be stale: the key was replaced since
        secret = _secret(runtime, create=False, fresh=fresh)
        if secret is None:
            raise bad  # no link was ever made
        if hmac.compare_digest(mac, hmac.new(secret, body, hashlib.sha256).digest()[:_MAC_BYTES]):
            break
    else:
        raise bad
    parts = body.decode("utf-8", "replace").split(_SEP)
    if len(parts) != 4:
        raise bad
    return Unsubscribe(*parts)
