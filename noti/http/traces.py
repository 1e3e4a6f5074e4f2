"""A server span per request of the HTTP API, while noti traces (:mod:`noti.tracing`).

The span continues the trace the request's headers carry (W3C ``traceparent`` by default:
the process's propagators), so a caller's trace goes on through ``POST /v1/notifications``
into the notifications' messages and deliveries; a request without one, or with a
malformed one, starts a new trace. Outermost of the app's middleware: a request refused by
the body limits is a span too.
"""

from __future__ import annotations

from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from noti import tracing

__all__ = ["TraceRequests"]


class TraceRequests:
    """ASGI middleware: the request's server span (nothing more than one check per request
    while noti does not trace)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or tracing.tracer() is None:
            await self.app(scope, receive, send)
            return
        headers = {
            name.decode("latin-1"): value.decode("latin-1") for name, value in scope.get("headers", ())
        }
        method = str(scope.get("method", "GET"))
        attributes: dict[str, Any] = {
            "http.request.method": method,
            "url.path": scope.get("path", ""),
            "url.scheme": scope.get("scheme", "http"),
        }
        with tracing.span(
            method, kind="server", attributes=attributes, parent=tracing.incoming(headers)
        ) as span:
            status = 0

            async def answered(message: Message) -> None:
                nonlocal status
                if message["type"] == "http.response.start":
                    status = int(message["status"])
                await send(message)

            try:
                await self.app(scope, receive, answered)
            finally:
                if span is not None:
                    route = getattr(scope.get("route"), "path", None)
                    if route:
                        span.update_name(f"{method} {route}")
                        span.set_attribute("http.route", route)
                    if status:
                        span.set_attribute("http.response.status_code", status)
                        if status >= 500:
                            tracing.fail(span, f"HTTP {status}")
