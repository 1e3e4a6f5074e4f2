"""One ``noti.deliver`` message the batcher holds (:mod:`noti.celery.tasks.batching`): its
record's claim, and where it is on its way to being acked or requeued, on the consumer thread
or the send loop (:mod:`noti.celery.tasks.waves`)."""

from __future__ import annotations

from typing import Any

from noti.celery.report import DeliveryReport, HeldRequest
from noti.core.attempt import Claim

__all__ = ["Held"]


class Held(HeldRequest):
    """One received message waiting for its record's outcome (what ``inspect`` lists)."""

    __slots__ = ("claim", "handed_back", "mark", "taken")

    def __init__(
        self,
        task_id: str,
        record_id: str,
        message: Any,
        received: float,
        report: DeliveryReport,
        claim: tuple[Claim, str, int] | None = None,
    ) -> None:
        super().__init__(task_id, record_id, message, received, report)
        #: The claim of its record, (claim, owner token, lease ms): made by the broker
        #: transport as it fetched the message, else by the batcher (kept for a retry).
        self.claim = claim
        #: The seed's mark once the outcome is stored ("OK", "KO", "!!").
        self.mark = ""
        #: Acked, requeued, or handed to the send loop: no longer this flush's to settle.
        self.taken = False
        #: Handed back by the send loop to the consumer thread, to be acked or requeued.
        self.handed_back = False

    @property
    def retries(self) -> int:
        """Attempts made before this one (from the claimed record)."""
        record = self.claim[0].record if self.claim is not None else None
        return record.retry if record is not None else 0
