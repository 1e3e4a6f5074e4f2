"""Delivery: what became of a notification after its vendor accepted it.

The vocabulary and the ledger of receipts, below the providers (they report in its types)
and independent of Celery and HTTP:

* :mod:`noti.delivery.state`: the delivery statuses (forward-only) and the types a receipt
  travels in (a vendor's request, a report, the answer).
* :mod:`noti.delivery.book`: applies reports to records atomically (forward-only, duplicates
  dropped, receipts that beat their send kept until it is recorded), marks the silent ones
  ``unknown``, cancels or hastens fallbacks, and queues status callbacks.
* :mod:`noti.delivery.fallback`: a notification's fallback chain as it is written down.

What drives the book sits on the sending path above the providers (:mod:`noti.sending.intake`:
a vendor's pushed request, :mod:`noti.sending.poll`: polled reports, :mod:`noti.sending.callbacks`:
status callbacks).

Each provider reads its own vendor's receipts (:meth:`noti.providers.base.Provider.read_receipt`,
:meth:`~noti.providers.base.Provider.poll_receipts`).
"""

from noti.delivery.state import (
    Delivery,
    DeliveryReport,
    PendingDelivery,
    ReceiptBatch,
    ReceiptReply,
    ReceiptRequest,
)

__all__ = [
    "Delivery",
    "DeliveryReport",
    "PendingDelivery",
    "ReceiptBatch",
    "ReceiptReply",
    "ReceiptRequest",
]
