"""``GET|POST /v1/receipts/{provider}``: delivery receipts vendors push. No API token: each
vendor authenticates by its signature, which :class:`noti.sending.intake.ReceiptIntake`
verifies against the URL the vendor called (``NOTI_PUBLIC_URL`` + path and query when that
setting is given: behind a proxy the request's own URL differs from the one signed).

A vendor that does not sign (Aliyun, Tencent) is configured with a URL that carries the
provider's ``receipt_key`` as its last path segment, ``/v1/receipts/{provider}/{key}``: the
route hands it to the provider in the ``X-Noti-Receipt-Key`` header
(:func:`noti.providers._receipts.check_key`), and every log writes the segment as ``***``
(:mod:`noti.access.redact`). The ``?key=`` of URLs configured before still works, redacted alike.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import Request, Response
from starlette.concurrency import run_in_threadpool

from noti.delivery.state import ReceiptReply, ReceiptRequest
from noti.sending.intake import ReceiptIntake
from noti.sending.runtime import Runtime

if TYPE_CHECKING:
    from noti.config import Settings

__all__ = ["KEY_HEADER", "Receipts", "receipt_request"]


#: The header the provider reads the receipt key from (the route sets it from the path).
KEY_HEADER = "x-noti-receipt-key"


def receipt_request(
    request: Request, body: bytes, settings: Settings, key: str | None = None
) -> ReceiptRequest:
    """The :class:`ReceiptRequest` of an HTTP request: method, URL as signed, headers (names
    in lower case; ``key``, the URL's key segment, as ``x-noti-receipt-key``) and body."""
    query = request.url.query
    if settings.public_url:
        url = settings.public_url.rstrip("/") + request.url.path + (f"?{query}" if query else "")
    else:
        url = str(request.url)
    headers = dict(request.headers.items())
    if key is not None:
        headers[KEY_HEADER] = key
    return ReceiptRequest(request.method, url, headers, body)


class Receipts:
    """The receipt intake of one runtime (:class:`noti.sending.intake.ReceiptIntake`)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.intake = ReceiptIntake(runtime)

    def take(self, provider: str, receipt: ReceiptRequest) -> ReceiptReply:
        """Hand one receipt to the intake; what to answer the vendor.

        Raises:
            ReceiptRejected: ``.signature``, ``.malformed``, ``.provider`` (no provider of that
                name takes receipts). StoreUnavailable: the vendor should push again.
        """
        return self.intake.take(provider, receipt)

    async def endpoint(self, provider: str, request: Request) -> Response:
        """The route: read the request, take it off the event loop, answer as the intake says."""
        return await self._take(provider, request, None)

    async def keyed_endpoint(self, provider: str, key: str, request: Request) -> Response:
        """The route of ``/v1/receipts/{provider}/{key}``: as :meth:`endpoint`, the key given."""
        return await self._take(provider, request, key)

    async def _take(self, provider: str, request: Request, key: str | None) -> Response:
        body = await request.body()
        receipt = receipt_request(request, body, self.runtime.settings, key)
        reply = await run_in_threadpool(self.take, provider, receipt)
        return Response(content=reply.body, status_code=reply.status, media_type=reply.content_type)
