"""What stands in front of the routes: the request's API token (who it acts as), checked
before its body is read, and the limits on bodies.

:class:`BodyLimit` answers a request that carries a body before the app reads a byte of it:

- over ``NOTI_HTTP_BODY_MAX_BYTES`` by its ``Content-Length``: 413 ``e.noti.http.toolarge``;
- to a route that takes an API token (all but ``/v1/receipts/…``, whose vendors sign or key
  their pushes) without a valid one: 401 (or 429, 503) from its ``Authorization`` header alone
  (under ``/admin/``, the admin page's session cookie: :data:`SESSION_COOKIE`); the
  :func:`caller` and :func:`session_caller` dependencies then take the caller found here (one
  rate-limit step, one Redis round trip);
- over what is left of ``NOTI_HTTP_BODIES_MAX_BYTES``, the bytes of bodies this process reads
  at once: 503 ``e.noti.http.busy``.

Then the body streams through to the app, counted: past the limit (a chunked body declares no
length) the app is told the client went away and the answer is 413, whatever the app made of
it. An early answer closes the connection (``Connection: close``): the unread body is never
read. Nothing is buffered here; the app keeps the one copy it reads.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from noti.access.tokens import Caller, TokenStore
from noti.errors import InvalidInput, NotiError, StoreUnavailable
from noti.http.statuses import TOO_LARGE, error_response

__all__ = [
    "BUSY",
    "PUBLIC_PATHS",
    "PUBLIC_PREFIXES",
    "SESSION_COOKIE",
    "SESSION_PREFIX",
    "BodyLimit",
    "CallerDep",
    "caller",
    "refuse_unknown_query",
    "session_caller",
]

#: The code of a request refused because the process is at one of its limits (HTTP 503).
BUSY = "e.noti.http.busy"
#: Paths whose requests carry no API token: vendors' receipts (they authenticate by signature or
#: key) and unsubscribe links (the link's own signed token).
PUBLIC_PREFIXES = ("/v1/receipts/", "/v1/unsubscribe/")
#: Paths whose requests carry no API token: the admin page's login form (its body is the token,
#: authenticated by the route).
PUBLIC_PATHS = frozenset({"/admin/login"})
#: The admin page (:mod:`noti.http.admin`): its requests carry the API token in the
#: :data:`SESSION_COOKIE` its login form sets, never in an ``Authorization`` header.
SESSION_PREFIX = "/admin/"
SESSION_COOKIE = "noti_admin"
#: The scope key under which :class:`BodyLimit` leaves the caller it authenticated.
CALLER_KEY = "noti.caller"

_bearer = HTTPBearer(
    auto_error=False,
    scheme_name="token",
    description="An API token made by `noti token add -user USER`: `Authorization: Bearer noti_…`",
)


def caller(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> Caller:
    """Who the request acts as: the user of its bearer token.

    Raises:
        Unauthenticated: no token, an unknown or a revoked one (401).
        RateLimitExceeded: the token is over its rate limit (429).
        StoreUnavailable: Redis cannot be reached (503).
    """
    who: Caller | None = request.scope.get(CALLER_KEY)  # authenticated before the body was read
    if who is None:
        tokens: TokenStore = request.app.state.tokens
        who = tokens.authenticate(credentials.credentials if credentials is not None else None)
    refuse_unknown_query(request)
    return who


def session_caller(request: Request) -> Caller:
    """Who an admin page request acts as: the user of the API token in its session cookie,
    authenticated as :func:`caller` authenticates a bearer token (the same revocation, expiry
    and rate limit).

    Raises:
        Unauthenticated: no cookie, an unknown, revoked or expired token (401).
        RateLimitExceeded: the token is over its rate limit (429).
        StoreUnavailable: Redis cannot be reached (503).
    """
    who: Caller | None = request.scope.get(CALLER_KEY)  # authenticated before the body was read
    if who is None:
        tokens: TokenStore = request.app.state.tokens
        who = tokens.authenticate(request.cookies.get(SESSION_COOKIE))
    return who


def refuse_unknown_query(request: Request) -> None:
    """A query parameter the route does not take is refused, as an unknown key of a body is:
    a misspelt filter (``?stat=1``) must not silently list everything.

    Raises:
        InvalidInput: ``e.noti.http.badrequest``.
    """
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    if dependant is None or not request.query_params:
        return
    known = {param.alias for param in dependant.query_params}
    unknown = sorted(set(request.query_params) - known)
    if unknown:
        names = ", ".join(repr(name[:40]) for name in unknown[:5])
        takes = ", ".join(sorted(known)) or "none"
        raise InvalidInput(
            f"unknown query parameter(s) {names} (this call takes: {takes})", code="e.noti.http.badrequest"
        )


CallerDep = Annotated[Caller, Depends(caller)]


class BodyLimit:
    """ASGI middleware: the token before the body, and the body's limits (the module docstring).
    One per app, so one per process: ``reading`` is the bytes of bodies read at this moment."""

    def __init__(self, app: ASGIApp, *, max_bytes: int, all_max_bytes: int | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.all_max_bytes = all_max_bytes if all_max_bytes is not None else 8 * max_bytes
        self.reading = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared, chunked = _declared_body(scope)
        if not declared and not chunked:  # no body: nothing to guard
            await self.app(scope, receive, send)
            return
        if declared > self.max_bytes:
            await _refuse(scope, receive, send, self._too_large())
            return
        if not _public(scope):
            try:
                token = await _token_of(Request(scope))
                tokens: TokenStore = scope["app"].state.tokens
                scope[CALLER_KEY] = await run_in_threadpool(tokens.authenticate, token)
            except NotiError as exc:
                await _refuse(scope, receive, send, exc)
                return
        reserved = declared
        if self.reading + reserved > self.all_max_bytes:
            await _refuse(scope, receive, send, self._busy())
            return
        self.reading += reserved
        refusal: NotiError | None = None
        answered = started = False
        size = 0

        async def counted() -> Message:
            nonlocal size, reserved, refusal
            message = await receive()
            if message["type"] == "http.request" and refusal is None:
                size += len(message.get("body", b""))
                if size > self.max_bytes:
                    refusal = self._too_large()
                elif size > reserved:  # a chunked body: take its bytes from the budget as they come
                    if self.reading + size - reserved > self.all_max_bytes:
                        refusal = self._busy()
                    else:
                        self.reading += size - reserved
                        reserved = size
                if refusal is not None:  # the app sees a client that went away; we answer
                    return {"type": "http.disconnect"}
            return message

        async def guarded(message: Message) -> None:
            nonlocal answered, started
            if refusal is None:
                started = started or message["type"] == "http.response.start"
                await send(message)
            elif not answered and not started:  # whatever the app answers to the cut body: ours
                answered = True
                await _refuse(scope, receive, send, refusal)

        try:
            await self.app(scope, counted, guarded)
        except Exception:
            if refusal is None:
                raise
        finally:
            self.reading -= reserved
        if refusal is not None and not answered and not started:
            await _refuse(scope, receive, send, refusal)

    def _too_large(self) -> InvalidInput:
        return InvalidInput(f"the request body is over {self.max_bytes:,} bytes", code=TOO_LARGE)

    def _busy(self) -> StoreUnavailable:
        return StoreUnavailable(
            f"this server is reading {self.all_max_bytes:,} bytes of request bodies already; try again",
            code=BUSY,
        )


def _declared_body(scope: Scope) -> tuple[int, bool]:
    """The body's ``Content-Length`` (0 when absent or not a number) and whether it is chunked."""
    declared, chunked = 0, False
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                declared = max(0, int(value))
            except ValueError:
                declared = 0
        elif name == b"transfer-encoding":
            chunked = True
    return declared, chunked


def _path(scope: Scope) -> str:
    path: str = scope.get("path", "")
    root = scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root) :]
    return path


def _public(scope: Scope) -> bool:
    path = _path(scope)
    return path.startswith(PUBLIC_PREFIXES) or path in PUBLIC_PATHS


async def _token_of(request: Request) -> str | None:
    """The API token a request carries, as the :func:`caller` and :func:`session_caller`
    dependencies read it: the session cookie under :data:`SESSION_PREFIX`, else the bearer."""
    if _path(request.scope).startswith(SESSION_PREFIX):
        return request.cookies.get(SESSION_COOKIE)
    credentials = await _bearer(request)
    return credentials.credentials if credentials is not None else None


async def _refuse(scope: Scope, receive: Receive, send: Send, error: NotiError) -> None:
    """Answer ``error`` and close the connection: the body the client may still send is not read."""
    response = error_response(error)
    response.headers["Connection"] = "close"
    await response(scope, receive, send)
