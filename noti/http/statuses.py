"""noti's errors as HTTP answers: a status per error class and ``{"error": {"code", "message"}}``.

=========================  ======  ==========================================================
error                      status  when
=========================  ======  ==========================================================
``InvalidInput``           422     a bad body, parameter or header; nothing stored
  ``e.noti.http.toolarge`` 413     a body over ``NOTI_HTTP_BODY_MAX_BYTES``
  ``…revoke.final``        409     ``DELETE`` of a record that is not waiting any more
``Unauthenticated``        401     no token, an unknown, revoked or expired one
``PermissionDenied``       403     a root member's right (``?user=`` of another user)
``NotFound``               404     no such record or event (or another user's), route, provider
``RateLimitExceeded``      429     the token's rate limit (``Retry-After``)
``StoreUnavailable``       503     Redis did not answer (``Retry-After``); try again
``ReceiptRejected``        400     ``.signature`` 403, ``.provider`` 404, ``.malformed`` 400
  ``…unsub.badtoken``      400     an unsubscribe link that is malformed, altered or forged
``InvalidConfig``          500     noti's settings are wrong (an operator's problem)
anything else              500     a bug (``e.noti.internal``; the traceback is logged)
=========================  ======  ==========================================================
"""

from __future__ import annotations

import logging
import math
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from noti.errors import (
    InvalidConfig,
    InvalidInput,
    NotFound,
    NotiError,
    PermissionDenied,
    RateLimitExceeded,
    ReceiptRejected,
    StoreUnavailable,
    Unauthenticated,
)

__all__ = [
    "BAD_REQUEST_CODES",
    "CONFLICT_CODES",
    "TOO_LARGE",
    "BatchRefused",
    "error_response",
    "install_error_handlers",
    "status_of",
]

log = logging.getLogger(__name__)

#: The code of a body over the size limit (HTTP 413).
TOO_LARGE = "e.noti.http.toolarge"
#: Codes of requests that conflict with the record's state (HTTP 409).
CONFLICT_CODES = frozenset({"e.cmd.noti.revoke.final", "e.cmd.noti.cancel.queued"})
#: Codes of requests whose URL itself is bad (HTTP 400): a forged or broken link.
BAD_REQUEST_CODES = frozenset({"e.cmd.noti.unsub.badtoken"})
_RECEIPT = {"e.noti.receipt.signature": 403, "e.noti.receipt.provider": 404, "e.noti.receipt.malformed": 400}
_BY_CLASS: tuple[tuple[type[NotiError], int], ...] = (
    (Unauthenticated, 401),
    (RateLimitExceeded, 429),
    (PermissionDenied, 403),
    (NotFound, 404),
    (StoreUnavailable, 503),
    (InvalidConfig, 500),
    (InvalidInput, 422),
)


def status_of(error: NotiError) -> int:
    """The HTTP status that answers ``error`` (see the module docstring)."""
    if error.code == TOO_LARGE:
        return 413
    if error.code in CONFLICT_CODES:
        return 409
    if error.code in BAD_REQUEST_CODES:
        return 400
    if isinstance(error, ReceiptRejected):
        return _RECEIPT.get(error.code, 400)
    for cls, status in _BY_CLASS:
        if isinstance(error, cls):
            return status
    return 400


def error_response(error: NotiError, **extra: Any) -> JSONResponse:
    """``{"error": {"code", "message", **extra}}`` with the status of ``error`` (and the
    headers it calls for: ``WWW-Authenticate``, ``Retry-After``)."""
    status = status_of(error)
    headers: dict[str, str] = {}
    if status == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="noti"'
    elif isinstance(error, RateLimitExceeded):
        headers["Retry-After"] = str(max(1, math.ceil(error.retry_after_s)))
    elif status == 503:
        headers["Retry-After"] = "1"
    body = {"error": {"code": error.code, "message": error.message, **extra}}
    return JSONResponse(body, status_code=status, headers=headers)


class BatchRefused(Exception):
    """A batch some of whose items were refused: answered 422 with ``error`` and each refusal
    (``{"index", "code", "message"}``) as ``items``."""

    def __init__(self, error: InvalidInput, refused: list[dict[str, Any]]) -> None:
        super().__init__(str(error))
        self.error = error
        self.refused = refused


def install_error_handlers(app: FastAPI) -> None:
    """Answer every error of ``app`` as JSON with a code: noti's errors by their class, a
    request that does not parse or fit the schema as ``e.noti.http.badrequest`` (422), an
    unknown route or method as ``e.noti.http.noroute`` (404) / ``.method`` (405), a bug as
    ``e.noti.internal`` (500, the traceback in the log, not in the answer)."""

    @app.exception_handler(NotiError)
    async def _noti_error(request: Request, exc: NotiError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(BatchRefused)
    async def _refused(request: Request, exc: BatchRefused) -> JSONResponse:
        return error_response(exc.error, items=exc.refused)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = _problems(exc)
        first = problems[0] if problems else {"loc": [], "msg": "invalid request"}
        where = ".".join(first["loc"])
        error = InvalidInput(f"{where}: {first['msg']}", code="e.noti.http.badrequest")
        return error_response(error, problems=problems)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 404:
            return error_response(NotFound(f"no route {request.url.path}", code="e.noti.http.noroute"))
        if exc.status_code == 400:  # a body FastAPI cannot decode (not UTF-8): as any bad body
            return error_response(InvalidInput(str(exc.detail), code="e.noti.http.badrequest"))
        code = "e.noti.http.method" if exc.status_code == 405 else "e.noti.http.badrequest"
        body = {"error": {"code": code, "message": str(exc.detail)}}
        return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(Exception)
    async def _bug(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error in %s %s", request.method, request.url.path)
        message = f"internal error ({type(exc).__name__}): the server's log has its details"
        body = {"error": {"code": "e.noti.internal", "message": message}}
        return JSONResponse(body, status_code=500)


#: The branches of the notifications body (one object, or an array), as pydantic names them.
_BODY_BRANCHES = ("NotificationIn", "list[NotificationIn]")


def _problems(exc: RequestValidationError) -> list[dict[str, Any]]:
    """pydantic's errors as ``{"loc", "msg"}``; for a notifications body (one object or an
    array), only those of the shape that was sent, without the union's branch name."""
    shape = "list[" if isinstance(exc.body, list) else "NotificationIn"
    found = []
    for error in exc.errors():
        loc = [str(part) for part in error.get("loc", ())]
        if len(loc) > 1 and loc[0] == "body" and loc[1].startswith(_BODY_BRANCHES):
            if not loc[1].startswith(shape):
                continue
            del loc[1]
        found.append({"loc": loc, "msg": str(error.get("msg", ""))})
    return found
