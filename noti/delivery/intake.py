"""One receipt a vendor pushed to ``/v1/receipts/<provider>``: read by its provider (which
checks the vendor's signature), applied by the delivery book, answered as the vendor expects.

The answer comes only once the reports are stored: a vendor that gets no answer (Redis down)
pushes again, and applying a report twice changes nothing (the rule is forward-only).
"""

from __future__ import annotations

import logging

from noti.delivery.state import ReceiptReply, ReceiptRequest
from noti.errors import NotiError, ReceiptRejected
from noti.runtime import Runtime

__all__ = ["ReceiptIntake"]

log = logging.getLogger(__name__)


class ReceiptIntake:
    """Takes pushed receipts for the providers of one runtime."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def take(self, provider_name: str, request: ReceiptRequest) -> ReceiptReply:
        """Read, verify and apply one pushed request; the answer the vendor expects.

        Raises:
            ReceiptRejected: ``e.noti.receipt.provider`` (no such provider, or it takes no
                receipts), ``.signature`` (its signature does not verify), ``.malformed``.
            StoreUnavailable: Redis cannot be reached (the vendor pushes again later).
        """
        try:
            provider = self.runtime.providers.get(provider_name)
        except NotiError:
            raise ReceiptRejected(
                f"no provider named {provider_name[:80]!r} takes receipts here",
                code="e.noti.receipt.provider",
            ) from None
        batch = provider.read_receipt(request)
        if batch.reports:
            results = self.runtime.delivery.apply(batch.reports)
            log.info(
                "receipts from %s: %s",
                provider_name,
                ", ".join(
                    f"{r.vendor_id or r.record_id} {r.state.value} {res}"
                    for r, res in zip(batch.reports, results, strict=True)
                ),
            )
        return batch.reply
