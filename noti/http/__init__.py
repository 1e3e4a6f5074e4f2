"""noti's HTTP API (``noti serve``): an ASGI app (FastAPI) over a :class:`~noti.sending.notifier.Notifier`.

=============================  ============================================================
module                         owns
=============================  ============================================================
:mod:`~noti.http.app`          :func:`create_app`: the app and its routes
:mod:`~noti.http.models`       the request and response bodies (the OpenAPI schema's source)
:mod:`~noti.http.statuses`     noti's errors as HTTP statuses and JSON bodies; the handlers
:mod:`~noti.http.guard`        the API token of a request (:mod:`noti.access.tokens`) and the body
                               size limit
:mod:`~noti.http.receipts`     the vendors' delivery receipt endpoints (no token: signatures)
:mod:`~noti.http.server`       the app built from the settings, under uvicorn
=============================  ============================================================

Every call but health, metrics and the receipts needs an API token (``Authorization: Bearer
noti_…``); the request acts as the token's user, never as a user the request names.
"""

from __future__ import annotations

from noti.http.app import create_app

__all__ = ["create_app"]
