"""noti's errors as HTTP answers: a status per error class and ``{"error": {"code", "message"}}``.

=========================  ======  ==========================================================
error                      status  when
=========================  ======  ==========================================================
``InvalidInput``           422     a bad body, parameter or header; nothing stored
  ``e.noti.http.toolarge`` 413     a body over ``NOTI_HTTP_BODY_MAX_BYTES``
  ``…revoke.final``        409     ``DELETE`` of a record that is not waiting any more
``Unauthenticated``        401     no token, an unknown or a revoked one
``PermissionDenied``       403     another user's record (root members and admins may)
``NotFound``               404     no such record, event, route or receipt provider
``RateLimitExceeded``      429     the token's rate limit (``Retry-After``)
``StoreUnavailable``       503     Redis did not answer (``Retry-After``); try again
``ReceiptRejected``        400     ``.signature`` 403, ``.provider`` 404, ``.malformed`` 400
``InvalidConfig``          500     noti's settings are wrong (an operator's problem)
anything else              500     a bug (``e.noti.internal``; the traceback is logged)
=========================  ======  ==========================================================
"""

from __future__ import annotations

import math
from typing import Any

from fastapi.responses import JSONResponse

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

__all__ = ["CONFLICT_CODES", "TOO_LARGE", "error_response", "status_of"]

#: The code of a body over the size limit (HTTP 413).
TOO_LARGE = "e.noti.http.toolarge"
#: Codes of requests that conflict with the record's state (HTTP 409).
CONFLICT_CODES = frozenset({"e.cmd.noti.revoke.final", "e.cmd.noti.cancel.queued"})
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
