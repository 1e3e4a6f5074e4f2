"""The admin page's session: the API token in a cookie, and what guards its forms.

**Logging in** is pasting an API token (``noti token add``) into the login form. The token is
authenticated as any request's is (:meth:`~noti.access.tokens.TokenStore.authenticate`: the
same revocation, expiry and rate limit) and kept in the :data:`~noti.http.guard.SESSION_COOKIE`
cookie: ``HttpOnly`` (no script reads it), ``SameSite=Strict`` (no other site's page or link
sends it), ``Secure`` when the page is served over HTTPS, ``Path`` the admin page's, no
``Max-Age`` (it goes when the browser closes). Every later request is authenticated from it
anew (:func:`noti.http.guard.session_caller`): a token revoked or expired since logs the page
out at its next request. Nothing about sessions is stored in Redis.

**Forms that change something** (retry, purge, lift, revoke, log out) are ``POST`` requests
that must carry :func:`csrf_of` the session's token, an HMAC keyed with the token (no other
site can compute it: the cookie is ``HttpOnly`` and the page is not readable cross-origin; a
page that leaks it leaks no token), and must not come from another origin (``Origin`` and
``Sec-Fetch-Site``, when the browser sends them). The body is read only after the token was
authenticated (:class:`noti.http.guard.BodyLimit`, which also bounds it).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated
from urllib.parse import parse_qsl, urlsplit

from fastapi import Depends, Request
from fastapi.responses import Response

from noti.access.tokens import Caller
from noti.errors import InvalidInput, PermissionDenied
from noti.http.guard import SESSION_COOKIE, session_caller

__all__ = [
    "FORM_FIELDS_MAX",
    "Form",
    "FormDep",
    "SessionDep",
    "csrf_of",
    "forget",
    "keep",
    "local_path",
    "read_form",
    "same_origin",
]

#: The most fields a form of the admin page may post.
FORM_FIELDS_MAX = 16
_CSRF_MESSAGE = b"noti admin page: a form of this session"

SessionDep = Annotated[Caller, Depends(session_caller)]


def csrf_of(token: str) -> str:
    """The form token of a session whose cookie holds ``token`` (hex HMAC-SHA256)."""
    return hmac.new(token.encode("utf-8", "surrogatepass"), _CSRF_MESSAGE, hashlib.sha256).hexdigest()


def keep(response: Response, request: Request, token: str, *, path: str) -> None:
    """Set the session cookie holding ``token`` on ``response`` (see the module docstring)."""
    response.set_cookie(
        SESSION_COOKIE,
        token,
        path=path,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def forget(response: Response, request: Request, *, path: str) -> None:
    """Clear the session cookie."""
    response.delete_cookie(
        SESSION_COOKIE, path=path, httponly=True, samesite="strict", secure=request.url.scheme == "https"
    )


def same_origin(request: Request) -> None:
    """Refuse a form posted from another origin (as far as the browser tells).

    Raises:
        PermissionDenied: ``e.noti.admin.origin``.
    """
    site = request.headers.get("sec-fetch-site")
    origin = request.headers.get("origin")
    own = f"{request.url.scheme}://{request.url.netloc}"
    if site not in (None, "same-origin", "none") or (origin is not None and origin != own):
        raise PermissionDenied(
            "this form was posted from another site; use the admin page's own forms",
            code="e.noti.admin.origin",
        )


@dataclass(frozen=True, slots=True)
class Form:
    """A form posted by the session's caller, its CSRF token checked."""

    who: Caller
    fields: Mapping[str, str]

    def get(self, name: str) -> str:
        """The field ``name`` ("" when the form has none)."""
        return self.fields.get(name, "")


async def read_form(request: Request, *, fields_max: int = FORM_FIELDS_MAX) -> dict[str, str]:
    """The ``application/x-www-form-urlencoded`` body of ``request`` (each name once).

    Raises:
        InvalidInput: ``e.noti.admin.badform``: another content type, not UTF-8, more than
            ``fields_max`` fields, or a name given twice.
    """
    kind = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if kind != "application/x-www-form-urlencoded":
        raise InvalidInput(
            "the admin page's forms are posted as application/x-www-form-urlencoded",
            code="e.noti.admin.badform",
        )
    body = await request.body()
    try:
        pairs = parse_qsl(
            body.decode("utf-8"), keep_blank_values=True, strict_parsing=False, max_num_fields=fields_max
        )
    except (UnicodeDecodeError, ValueError):
        raise InvalidInput(
            f"a form of the admin page is UTF-8 text of at most {fields_max} fields",
            code="e.noti.admin.badform",
        ) from None
    found: dict[str, str] = {}
    for name, value in pairs:
        if name in found:
            raise InvalidInput(f"the form gives {name[:40]!r} twice", code="e.noti.admin.badform")
        found[name] = value
    return found


async def _posted(request: Request, who: SessionDep) -> Form:
    """The form of a state-changing request: same origin, CSRF token of the session.

    Raises:
        PermissionDenied: ``e.noti.admin.origin``, ``e.noti.admin.csrf``.
        InvalidInput: ``e.noti.admin.badform``.
    """
    same_origin(request)
    fields = await read_form(request)
    token = request.cookies.get(SESSION_COOKIE, "")
    if not hmac.compare_digest(fields.get("csrf", "").encode(), csrf_of(token).encode()):
        raise PermissionDenied(
            "this form's session check is missing or stale: reload the page and submit it again",
            code="e.noti.admin.csrf",
        )
    return Form(who, fields)


FormDep = Annotated[Form, Depends(_posted)]


def local_path(target: str, *, base: str) -> str | None:
    """``target`` if it is a path of the admin page (where a login may send the browser on
    to), else None: no other site, scheme or host."""
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not target.startswith(base + "/") or "\\" in target:
        return None
    if target.startswith("//") or any(ord(c) < 0x21 for c in target):
        return None
    return target
