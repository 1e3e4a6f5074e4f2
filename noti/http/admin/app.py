"""The admin page as an app of its own, mounted by :func:`noti.http.app.create_app` at
``/admin``: login and logout, its static files, the headers every answer carries, and its
errors as pages.

Errors are noti's own, answered with the HTTP API's statuses (:func:`noti.http.statuses.status_of`)
as an HTML page showing the code and message. A request whose session is missing, unknown,
revoked or expired gets the login form (401), which sends the browser back where it was.
"""

from __future__ import annotations

import logging
import math
from importlib.resources import files

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from noti.errors import InvalidInput, NotFound, NotiError, RateLimitExceeded, Unauthenticated
from noti.http.admin.actions import action_routes
from noti.http.admin.pages import page_routes
from noti.http.admin.render import base_path
from noti.http.admin.session import FormDep, forget, keep, local_path, read_form, same_origin
from noti.http.admin.site import Site
from noti.http.statuses import status_of

__all__ = ["HEADERS", "build_site"]

log = logging.getLogger(__name__)

#: Headers of every answer of the admin page: nothing but its own scripts, styles and forms
#: (an injected ``<script>`` would not run even if one got through the escaping), never in
#: a frame, never cached (it shows personal data), no Referer sent to another site
#: (``same-origin``: with ``no-referrer`` Chromium sends ``Origin: null`` with the page's own
#: forms, which :func:`~noti.http.admin.session.same_origin` refuses).
HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}
_STATIC = {"admin.css": "text/css; charset=utf-8", "admin.js": "text/javascript; charset=utf-8"}
#: The longest token the login form takes (a token is 48 characters).
_LOGIN_TOKEN_MAX = 200


def build_site(site: Site) -> FastAPI:
    """The admin page's app over ``site`` (mounted at ``/admin`` by the HTTP API)."""
    app = FastAPI(
        openapi_url=None, docs_url=None, redoc_url=None, redirect_slashes=False, telemetry={"tracing": False}
    )
    app.state.tokens = site.tokens

    @app.get("/login")
    def login_form(request: Request) -> HTMLResponse:
        return site.login_page(request)

    @app.post("/login")
    async def login(request: Request) -> Response:
        same_origin(request)
        form = await read_form(request, fields_max=4)
        token = form.get("token", "").strip()[: _LOGIN_TOKEN_MAX + 1]
        try:
            await run_in_threadpool(site.tokens.authenticate, token)
        except Unauthenticated as exc:
            return site.login_page(request, message=exc.message, status_code=401)
        base = base_path(request)
        after = local_path(form.get("after", ""), base=base) or f"{base}/"
        response = RedirectResponse(after, status_code=303)
        keep(response, request, token, path=base or "/")
        return response

    @app.post("/logout")
    def logout(request: Request, form: FormDep) -> Response:
        response = RedirectResponse(f"{base_path(request)}/login", status_code=303)
        forget(response, request, path=base_path(request) or "/")
        return response

    @app.get("/static/{name}")
    def static(name: str) -> Response:
        kind = _STATIC.get(name)
        if kind is None:
            raise NotFound(f"no static file {name!r}", code="e.noti.http.noroute")
        body = files("noti.http.admin").joinpath("static", name).read_bytes()
        return Response(body, media_type=kind)

    app.include_router(page_routes(site))
    app.include_router(action_routes(site))
    _install_error_pages(app, site)
    app.add_middleware(_Headers)
    return app


def _install_error_pages(app: FastAPI, site: Site) -> None:
    def error_page(request: Request, error: NotiError) -> HTMLResponse:
        if isinstance(error, Unauthenticated):
            return site.login_page(request, message=error.message, status_code=401)
        status = status_of(error)
        headers = {}
        if isinstance(error, RateLimitExceeded):
            headers["Retry-After"] = str(max(1, math.ceil(error.retry_after_s)))
        elif status == 503:
            headers["Retry-After"] = "1"
        return site.pages.render(
            request, "error.html", status=status, error=error, status_code=status, headers=headers
        )

    @app.exception_handler(NotiError)
    async def _noti_error(request: Request, exc: NotiError) -> HTMLResponse:
        return error_page(request, exc)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> HTMLResponse:
        problems = [f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg', '')}" for e in exc.errors()]
        text = "; ".join(problems[:5]) or "invalid request"
        return error_page(request, InvalidInput(text[:1000], code="e.noti.http.badrequest"))

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> HTMLResponse:
        if exc.status_code == 404:
            missing = NotFound(f"no page {request.url.path[:200]}", code="e.noti.http.noroute")
            return error_page(request, missing)
        if exc.status_code == 405:
            error = InvalidInput(f"{request.method} is not taken here", code="e.noti.http.method")
            response = error_page(request, error)
            response.status_code = 405
            return response
        return error_page(request, InvalidInput(str(exc.detail)[:500], code="e.noti.http.badrequest"))

    @app.exception_handler(Exception)
    async def _bug(request: Request, exc: Exception) -> HTMLResponse:
        log.exception("unexpected error in %s %s", request.method, request.url.path)
        message = f"internal error ({type(exc).__name__}): the server's log has its details"
        error = NotiError(message, code="e.noti.internal")
        return site.pages.render(request, "error.html", status=500, error=error, status_code=500)


class _Headers:
    """ASGI middleware: :data:`HEADERS` on every answer of the admin page."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.raw = [(k.encode(), v.encode()) for k, v in HEADERS.items()]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {name.lower() for name, _ in message.get("headers", [])}
                extra = [(k, v) for k, v in self.raw if k not in names]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, with_headers)
