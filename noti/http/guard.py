"""What stands in front of the routes: the request's API token (who it acts as) and the
body size limit."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from noti.errors import InvalidInput
from noti.http.statuses import TOO_LARGE, error_response
from noti.tokens import Caller, TokenStore

__all__ = ["BodyLimit", "CallerDep", "caller"]

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
    tokens: TokenStore = request.app.state.tokens
    who = tokens.authenticate(credentials.credentials if credentials is not None else None)
    _refuse_unknown_query(request)
    return who


def _refuse_unknown_query(request: Request) -> None:
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
    """ASGI middleware: a request whose body is over ``max_bytes`` (by its Content-Length, or
    as it streams in) is answered 413 (``e.noti.http.toolarge``) before the app sees it."""

    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = 0
                if declared > self.max_bytes:
                    await self._refuse(scope, receive, send)
                    return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._refuse(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        error = InvalidInput(f"the request body is over {self.max_bytes:,} bytes", code=TOO_LARGE)
        response = error_response(error)
        response.headers["Connection"] = "close"
        await response(scope, receive, send)
