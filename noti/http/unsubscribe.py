"""``/v1/unsubscribe/{token}``: the one-click unsubscribe links of e-mails and templates
(:mod:`noti.recipients.unsubscribe`), answered without an API token (the token in the path
is signed: it names one recipient, category and channel, and nothing else).

* ``GET``: a small page with a button that posts the form back. It changes nothing: a link
  scanner or a mail client's preview that follows every link opts no one out.
* ``POST`` (the button, or a mail client's RFC 8058 one-click ``List-Unsubscribe=One-Click``;
  any body is accepted and none is read): the recipient's preference for that category on
  that channel becomes *out*. Answered 200 again and again (idempotent), as JSON, or as a
  page when the client asks for HTML.

A malformed, altered or forged token: 400 ``e.cmd.noti.unsub.badtoken``; a recipient erased
since: 404 ``e.cmd.noti.rcpt.not_found`` (nothing is created for them). Until noti has made
its signing secret (on the first notice that carries a link) every token is refused without
making it: a refused request writes nothing. Pages are sent with a content security policy
that allows no script, no framing (no clickjacking of the button) and no referrer (the token
stays out of other sites' logs).
"""

from __future__ import annotations

import html
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from noti.errors import NotFound, NotiError
from noti.http.models import ErrorOut
from noti.http.recipient_models import UnsubscribedOut
from noti.http.statuses import error_response, status_of
from noti.recipients.store import RecipientStore
from noti.recipients.unsubscribe import read_token
from noti.sending.runtime import Runtime

__all__ = ["unsubscribe_routes"]

#: Headers of every page (see the module docstring).
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "
    "frame-ancestors 'none'",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="robots" content="noindex">
<meta name="viewport" content="width=device-width, initial-scale=1"><title>{title}</title>
<style>body{{font-family:sans-serif;max-width:32em;margin:3em auto;padding:0 1em}}</style></head>
<body><h1>{title}</h1>{body}</body></html>
"""
_HTML = {"text/html": {"schema": {"type": "string"}}}
_ANSWERS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorOut, "description": "Not a valid unsubscribe link", "content": _HTML},
    404: {"model": ErrorOut, "description": "The recipient was erased", "content": _HTML},
    413: {"model": ErrorOut, "description": "The body is too large"},
    422: {
        "model": ErrorOut,
        "description": "The category may not be opted out of any more",
        "content": _HTML,
    },
    503: {"model": ErrorOut, "description": "Redis did not answer; try again", "content": _HTML},
}


def _page(title: str, body: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(
        _PAGE.format(title=html.escape(title), body=body), status_code=status, headers=PAGE_HEADERS
    )


def _error_page(error: NotiError) -> HTMLResponse:
    message = f"<p>{html.escape(error.message)}</p><p><small>{html.escape(error.code)}</small></p>"
    return _page("Unsubscribe", message, status_of(error))


def _wants_html(request: Request) -> bool:
    return "text/html" in request.headers.get("accept", "")


def unsubscribe_routes(runtime: Runtime) -> APIRouter:
    """The unsubscribe page and its one-click ``POST`` over ``runtime``."""
    store = RecipientStore(runtime.redis, runtime.keys)
    router = APIRouter(prefix="/v1/unsubscribe", tags=["unsubscribe"])

    @router.get(
        "/{token}",
        response_class=HTMLResponse,
        responses={200: {"content": _HTML, "description": "A page with the unsubscribe button"}, **_ANSWERS},
        summary="The unsubscribe page (no API token): a button; following the link changes nothing",
    )
    def unsubscribe_page(token: str) -> Response:
        try:
            what = read_token(runtime, token)
            if not store.exists(what.owner, what.recipient):
                raise NotFound("this recipient is no longer known", code="e.cmd.noti.rcpt.not_found")
        except NotiError as exc:
            return _error_page(exc)
        body = (
            f"<p>Stop receiving <b>{html.escape(what.category)}</b> messages by "
            f"<b>{html.escape(what.channel)}</b>?</p>"
            '<form method="post"><button type="submit" name="List-Unsubscribe" value="One-Click">'
            "Unsubscribe</button></form>"
        )
        return _page("Unsubscribe", body)

    @router.post(
        "/{token}",
        response_model=UnsubscribedOut,
        responses={200: {"content": _HTML, "description": "Unsubscribed"}, **_ANSWERS},
        summary="Unsubscribe (no API token; RFC 8058 one-click: List-Unsubscribe=One-Click)",
    )
    def unsubscribe(token: str, request: Request) -> Response:
        html_wanted = _wants_html(request)
        try:
            what = read_token(runtime, token)
            store.set_preferences(what.owner, what.recipient, {what.category: {what.channel: False}})
        except NotiError as exc:
            return _error_page(exc) if html_wanted else error_response(exc)
        if html_wanted:
            body = (
                f"<p>You will no longer receive <b>{html.escape(what.category)}</b> messages by "
                f"<b>{html.escape(what.channel)}</b>.</p>"
            )
            return _page("Unsubscribed", body)
        answer = UnsubscribedOut(unsubscribed=True, category=what.category, channel=what.channel)
        return JSONResponse(answer.model_dump(), headers={"Cache-Control": "no-store"})

    return router
