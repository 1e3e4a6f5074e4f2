"""What the end of an attempt makes of a record: delivered, a retry (the policy's or the
application's ``decide_retry``), a failure; the suppression a vendor's opt-out leaves; and the
application's hooks told of the recorded outcome. Split from :mod:`noti.sending.sender`
(issue 39), unchanged.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Literal

from noti.core.attempt import UNSURE_FIELD, Outcome
from noti.core.deadletter import DeadLetter
from noti.core.delay import MAX_DELAY_S
from noti.core.privacy import mask_target, unworded
from noti.core.record import Notification, Status, msgid_field, now_ms
from noti.core.retry import RetryDecider, RetryPolicy, decide, delivered, outcome_error
from noti.core.suppression import Suppressed
from noti.errors import (
    DeliveryError,
    NotiError,
    split_code,
)
from noti.providers import Receipt
from noti.sending.handlers import STOP, NotificationHandler, call_hook
from noti.sending.runtime import Runtime

__all__ = ["Outcomes", "erased_view", "run_hooks", "still_unsure", "why_suppressed"]

log = logging.getLogger(__name__)


class Outcomes:
    """Outcomes for the records of one runtime."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        #: Per provider name: whether its answer is the delivery (no receipt is awaited).
        self._delivered_on_send: dict[str, bool] = {}

    def policy(self, record: Notification) -> RetryPolicy:
        try:
            return RetryPolicy.for_record(record, self.runtime.settings)
        except NotiError:  # checked at add time; a later settings change may break it
            return RetryPolicy.from_settings(self.runtime.settings)

    def failed(self, record: Notification, exc: Exception, policy: RetryPolicy) -> Outcome:
        outcome = decide(record, exc, policy=policy, now_ms=now_ms(), decider=self.retry_decider())
        if isinstance(exc, NotiError):
            log.info(
                "deliver %s [%s] to %s: %s -> st=%d",
                record.id,
                record.channel.value,
                mask_target(record.target),
                exc,
                outcome.status,
            )
        else:
            log.error("deliver %s: provider raised an unexpected error", record.id, exc_info=exc)
        return outcome

    def retry_decider(self) -> RetryDecider | None:
        """The handler's ``decide_retry`` (``NOTI_HANDLERS``) as :func:`~noti.core.retry.decide`
        takes it: a failing hook or an answer that is not a wait or ``STOP`` leaves the
        decision to the policy."""
        handler = self.runtime.handler
        if handler is None:
            return None

        def decide_retry(
            record: Notification, error: DeliveryError, attempt: int
        ) -> float | Literal["stop"] | None:
            choice = call_hook(handler, "decide_retry", record.id, record, error, attempt)
            if choice is STOP:
                return "stop"
            if (
                isinstance(choice, int | float)
                and not isinstance(choice, bool)
                and 0 <= choice <= MAX_DELAY_S
            ):
                return float(choice)
            if choice is not None:
                log.warning(
                    "deliver %s: decide_retry answered %r; the retry policy decides", record.id, choice
                )
            return None

        return decide_retry

    def delivered(self, record: Notification, receipt: Receipt) -> Outcome:
        log.info(
            "deliver %s [%s] to %s: ok via %s",
            record.id,
            record.channel.value,
            mask_target(record.target),
            receipt.provider,
        )
        on_send = self._delivered_on_send.get(receipt.provider)
        if on_send is None:
            try:
                on_send = self.runtime.providers.get(receipt.provider).delivered_on_send
            except NotiError:  # a provider no longer configured: its receipt is awaited
                on_send = False
            self._delivered_on_send[receipt.provider] = on_send
        return delivered(
            now_ms=now_ms(),
            keep_ms=int(self.runtime.settings.keep_done_s * 1000),
            sent_by=receipt.provider,
            msgid=receipt.msgid,
            msgid_field=msgid_field(record.channel),
            retry=record.retry,
            delivery="delivered" if on_send else "accepted",
        )


def why_suppressed(record: Notification, outcome: Outcome, provider: str) -> Suppressed:
    """Why a record's target is suppressed after its vendor said the recipient opted out."""
    code, text = split_code(outcome.errmsg)
    return Suppressed(
        record.channel.value,
        record.target,
        reason="optout",
        code=code or "",
        text=text,
        record=record.id,
        user=record.creator,
        provider=provider,
        at_ms=now_ms(),
    )


def still_unsure(outcome: Outcome, in_doubt: bool) -> Outcome:
    """``outcome`` keeping the record's doubt: an attempt that began in doubt (an earlier one
    may have been sent) and did not end sent leaves the record unsure, so the next attempt asks
    the vendor again (the claim's ``_inflight`` evidence of a crash is gone after the finish)."""
    if not in_doubt or outcome.status is Status.DONE or any(k == UNSURE_FIELD for k, _ in outcome.fields):
        return outcome
    return dataclasses.replace(outcome, fields=(*outcome.fields, (UNSURE_FIELD, "1")))


def erased_view(
    record: Notification, outcome: Outcome, letter: DeadLetter | None
) -> tuple[Notification, Outcome, DeadLetter | None]:
    """What the hooks of an outcome applied to a record whose recipient was erased while it
    was sent are given: the record as erasure left it (target masked, no content, no vendor
    text from an earlier attempt), the error text and the dead letter without the address or
    the vendor's words."""
    masked = mask_target(record.target)
    record = dataclasses.replace(
        record, target=masked, fields={}, errmsg=unworded(record.errmsg), delivery_text=None
    )
    outcome = dataclasses.replace(outcome, errmsg=unworded(outcome.errmsg))
    if letter is not None:
        letter = dataclasses.replace(letter, target=masked, errmsg=unworded(letter.errmsg))
    return record, outcome, letter


def run_hooks(
    handler: NotificationHandler, record: Notification, outcome: Outcome, letter: DeadLetter | None
) -> None:
    """Tell the application's handler about a recorded outcome (each hook's failure is logged)."""
    if outcome.status is Status.DONE:
        fields = dict(outcome.fields)
        sent_by = fields.get("noti_sent_by", "")
        call_hook(handler, "on_success", record.id, record, sent_by, fields.get(msgid_field(record.channel)))
    elif outcome.status is Status.WAITING:
        call_hook(handler, "on_retry", record.id, record, outcome_error(outcome), outcome.not_before_ms)
    else:
        call_hook(handler, "on_failure", record.id, record, outcome_error(outcome))
        if letter is not None:
            call_hook(handler, "on_dead_letter", record.id, letter, record)
