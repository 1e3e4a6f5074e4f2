"""One receipt a vendor pushed to ``/v1/receipts/<provider>``: read by its provider (which
checks the vendor's signature), applied by the delivery book, answered as the vendor expects.

The answer comes only once the reports are stored: a vendor that gets no answer (Redis down)
pushes again, and applying a report twice changes nothing (the rule is forward-only).

This is the parse boundary of every receipt reader: whatever a reader raises on a body it
could not read (a ``RecursionError`` from a deeply nested JSON, a ``ValueError`` from an
integer of 5,000 digits, ...) is a malformed receipt (``e.noti.receipt.malformed``, HTTP 400),
never an internal error.

**Reports per push are capped** (``NOTI_RECEIPT_PUSH_MAX``, default 1,000): a push carrying
more is refused whole (``e.noti.receipt.toomany``, HTTP 400) and nothing of it is stored. Why
whole and not the first 1,000: the vendors that batch (Aliyun's SmsReport, Tencent's status
callback) push a request again, unchanged, when it is not answered with their success body
(Aliyun after 1, 5 and 10 minutes). Taking a part and answering success would lose the rest
without a trace; taking a part and answering failure would take the same part again at each
retry and never the rest. Refused whole, the vendor still holds every report and the refusal
is logged, so an operator can raise the cap and the next retry is taken whole. The vendors'
own batches are far smaller than the default (WeChat and Twilio push one report a request).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from noti.delivery.state import ReceiptBatch, ReceiptReply, ReceiptRequest
from noti.errors import NotiError, ReceiptRejected
from noti.sending.runtime import Runtime
from noti.sending.traces import traced_receipts

__all__ = ["UNREADABLE", "ReceiptIntake"]

log = logging.getLogger(__name__)

#: What a reader may raise on a body it cannot read, besides its own refusals: answered as a
#: malformed receipt (a ``UnicodeError`` is a ``ValueError``). ``MemoryError`` is not among
#: them: the body's size is bounded before it gets here.
UNREADABLE = (RecursionError, ValueError, TypeError, KeyError, IndexError, OverflowError)


class ReceiptIntake:
    """Takes pushed receipts for the providers of one runtime."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def take(self, provider_name: str, request: ReceiptRequest) -> ReceiptReply:
        """Read, verify and apply one pushed request; the answer the vendor expects.

        Raises:
            ReceiptRejected: ``e.noti.receipt.provider`` (no such provider, or it takes no
                receipts), ``.signature`` (its signature does not verify), ``.malformed``
                (it cannot be read), ``.toomany`` (more reports than ``NOTI_RECEIPT_PUSH_MAX``).
            StoreUnavailable: Redis cannot be reached (the vendor pushes again later).
        """
        try:
            provider = self.runtime.providers.get(provider_name)
        except NotiError:
            raise ReceiptRejected(
                f"no provider named {provider_name[:80]!r} takes receipts here",
                code="e.noti.receipt.provider",
            ) from None
        batch = self._read(provider_name, provider.read_receipt, request)
        most = self.runtime.settings.receipt_push_max
        if len(batch.reports) + len(batch.refused) > most:
            log.warning(
                "receipts from %s: a push of %d reports refused whole (NOTI_RECEIPT_PUSH_MAX is %d)",
                provider_name,
                len(batch.reports) + len(batch.refused),
                most,
            )
            raise ReceiptRejected(
                f"{provider_name}: a push carries {len(batch.reports) + len(batch.refused)} reports, "
                f"more than NOTI_RECEIPT_PUSH_MAX ({most}): refused whole, nothing stored",
                code="e.noti.receipt.toomany",
            )
        if batch.reports:
            with traced_receipts(self.runtime, batch.reports) as traced:
                results = self.runtime.delivery.apply(batch.reports)
                traced += results
            log.info(
                "receipts from %s: %s",
                provider_name,
                ", ".join(
                    f"{r.vendor_id or r.record_id} {r.state.value} {res}"
                    for r, res in zip(batch.reports, results, strict=True)
                ),
            )
        if batch.refused:
            self.runtime.delivery.refuse(batch.refused)
            log.warning(
                "receipts from %s: %d report(s) of another account refused: %s",
                provider_name,
                len(batch.refused),
                ", ".join(str(r.vendor_id or r.record_id) for r in batch.refused[:20]),
            )
        return batch.reply

    @staticmethod
    def _read(
        provider_name: str, read: Callable[[ReceiptRequest], ReceiptBatch], request: ReceiptRequest
    ) -> ReceiptBatch:
        """``read(request)``, whatever it raises on an unreadable body made a malformed receipt."""
        try:
            return read(request)
        except UNREADABLE as exc:
            log.info("receipts from %s: unreadable body (%s)", provider_name, type(exc).__name__)
            raise ReceiptRejected(
                f"{provider_name}: the receipt cannot be read ({type(exc).__name__})",
                code="e.noti.receipt.malformed",
            ) from None
