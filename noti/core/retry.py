"""What happens after a send attempt: the retry policy and the decision it drives.

The sender never computes a delay or sleeps: it hands the attempt's result to
:func:`decide`, which returns the record's next state (:class:`~noti.core.attempt.Outcome`).

====================  ==================================  ===========================
the attempt           next state                          counts as an attempt
====================  ==================================  ===========================
delivered             done (10), ``expi`` = now + keep     –
RateLimited           waiting until the window ends        no (yes once the record is
                                                           older than max_wait_s)
StoreUnavailable      waiting 5 s (Redis failed mid-send)  no
TemporaryFailure      waiting until now + back-off;        yes
(and ProviderOutage,  failed (0) once ``noti_retry``
StaleCredential,      reaches ``noti_retry_max``; an
AmbiguousOutcome)     AmbiguousOutcome also marks the
                      record unsure (``_unsure``): every
                      later attempt asks the vendor
                      whether it was sent before sending
                      (dead letter class ``unconfirmed``
                      for an UnconfirmedOutcome)
PermanentFailure      invalid (-1)                         –
RecipientOptedOut     invalid (-1); target suppressed      –
ProviderMisconfigured failed (0): fix the settings, retry  –
InvalidConfig/Input   failed (0): fix the settings, retry  –
anything else         invalid (-1), traceback logged       –
====================  ==================================  ===========================

A waiting record's back-off is kept in ``noti_timeout_at`` and in the delayed set, never in
a Celery ETA message (see :mod:`noti.core.delay`).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from noti.config import Settings
from noti.core.attempt import UNSURE_FIELD, Outcome
from noti.core.record import Notification, Status
from noti.errors import (
    AmbiguousOutcome,
    DeliveryError,
    InvalidConfig,
    InvalidInput,
    NotiError,
    PermanentFailure,
    ProviderMisconfigured,
    RateLimited,
    RecipientOptedOut,
    RetriesExhausted,
    StoreUnavailable,
    TemporaryFailure,
    UnconfirmedOutcome,
    error_class,
    split_code,
)
from noti.inputs import shown

__all__ = ["RetryDecider", "RetryPolicy", "decide", "delivered", "error_for", "outcome_error"]

#: A retry decider (:meth:`noti.sending.handlers.NotificationHandler.decide_retry`, wrapped): given
#: the record, the error and the attempt number, seconds to wait, ``"stop"``, or None.

UNEXPECTED_CODE = "e.cmd.noti.send.unexpected"
#: Wait before trying again when Redis failed inside a provider (not an attempt).
STORE_RETRY_S = 5.0
ERRMSG_MAX = 1000


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How long to wait before attempt ``n + 1`` after ``n`` failed attempts."""

    kind: Literal["linear", "exponential"] = "linear"
    base_s: float = 60.0
    cap_s: float = 3600.0
    #: After this long since it was created, a record's rate-limit waits count as attempts,
    #: so a receiver that always answers "slow down" cannot keep it waiting for ever.
    max_wait_s: float = 86400.0

    @classmethod
    def from_settings(cls, settings: Settings, channel: str | None = None) -> RetryPolicy:
        """The default policy, or a channel's (``[channels.<type>] retry_policy = "…"``)."""
        spec = settings.channel(channel).retry_policy if channel else None
        default = cls(
            settings.retry_policy, settings.retry_seconds, settings.retry_cap_s, settings.rate_limited_max_s
        )
        return cls.parse(spec, default=default) if spec else default

    @classmethod
    def parse(cls, spec: str, *, default: RetryPolicy | None = None) -> RetryPolicy:
        """A policy from ``"kind[:base_s[:cap_s]]"`` (``linear:60``, ``exponential:5:600``).

        Missing parts come from ``default``.

        Raises:
            InvalidInput: ``e.cmd.noti.add.badretry``.
        """
        base = default or cls()
        parts = spec.strip().split(":") if isinstance(spec, str) else []
        if not 1 <= len(parts) <= 3 or parts[0] not in ("linear", "exponential"):
            raise InvalidInput(
                f"retry policy {shown(spec)} is not 'linear[:SECONDS[:CAP]]'"
                " or 'exponential[:SECONDS[:CAP]]'",
                code="e.cmd.noti.add.badretry",
            )
        try:
            numbers = [float(p) for p in parts[1:]]
        except ValueError:
            numbers = [-1.0]
        if any(n < 0 or n != n or n > 30 * 86400 for n in numbers) or (len(numbers) == 2 and numbers[1] <= 0):
            raise InvalidInput(
                f"retry policy {shown(spec)}: seconds must be numbers from 0 to 2592000 (cap above 0)",
                code="e.cmd.noti.add.badretry",
            )
        kind: Literal["linear", "exponential"] = "linear" if parts[0] == "linear" else "exponential"
        return cls(
            kind,
            numbers[0] if numbers else base.base_s,
            numbers[1] if len(numbers) > 1 else base.cap_s,
            base.max_wait_s,
        )

    @classmethod
    def for_record(cls, record: Notification, settings: Settings) -> RetryPolicy:
        """The record's own policy, else its channel's, else the default."""
        channel_policy = cls.from_settings(settings, record.channel.value)
        if record.retry_policy:
            return cls.parse(record.retry_policy, default=channel_policy)
        return channel_policy

    def delay_s(self, failed_attempts: int, *, rng: random.Random | None = None) -> float:
        """Seconds to wait after the ``failed_attempts``-th failure (1 for the first).

        ``linear``: attempts × base (webman-redis-queue's rule). ``exponential``: a random
        time up to base × 2^(attempts-1) ("full jitter"). Both are capped at ``cap_s``.
        """
        n = max(1, failed_attempts)
        if self.kind == "linear":
            return min(self.cap_s, n * self.base_s)
        ceiling = min(self.cap_s, self.base_s * 2 ** (n - 1))
        return (rng or random).uniform(0, ceiling)


def _errmsg(text: str) -> str:
    return text if len(text) <= ERRMSG_MAX else text[: ERRMSG_MAX - 1] + "…"


def delivered(
    *,
    now_ms: int,
    keep_ms: int,
    sent_by: str,
    msgid: str | None,
    msgid_field: str,
    retry: int,
    delivery: str = "accepted",
) -> Outcome:
    """The outcome of a successful send; ``delivery`` is the record's delivery status from
    now (``accepted``: a receipt is awaited; ``delivered``: the provider's answer was it)."""
    fields: list[tuple[str, str]] = [
        ("noti_sent_by", sent_by),
        ("noti_dlv", delivery),
        ("noti_dlv_at", str(now_ms)),
        (f"noti_dlv_{delivery}_at", str(now_ms)),
    ]
    if msgid:
        fields.append((msgid_field, msgid))
    return Outcome(Status.DONE, "ok", retry, expires_ms=now_ms + keep_ms, fields=tuple(fields))


RetryDecider = Callable[[Notification, DeliveryError, int], "float | Literal['stop'] | None"]


def decide(
    record: Notification,
    error: BaseException,
    *,
    policy: RetryPolicy,
    now_ms: int,
    decider: RetryDecider | None = None,
) -> Outcome:
    """The record's next state after ``error`` ended an attempt. When the policy would try a
    delivery error again, ``decider`` may set the wait or stop the retries."""
    if isinstance(error, StoreUnavailable):  # Redis hiccup inside a provider: not the message's fault
        wait_ms = int(STORE_RETRY_S * 1000)
        return Outcome(Status.WAITING, _errmsg(str(error)), record.retry, not_before_ms=now_ms + wait_ms)
    if isinstance(error, RateLimited) and now_ms - record.created_ms < policy.max_wait_s * 1000:
        wait_ms = int(max(0.0, error.retry_after_s) * 1000)
        return Outcome(Status.WAITING, _errmsg(str(error)), record.retry, not_before_ms=now_ms + wait_ms)
    if isinstance(error, RecipientOptedOut):
        return Outcome(Status.INVALID, _errmsg(str(error)), record.retry, error_class="opted_out")
    if isinstance(error, PermanentFailure):
        return Outcome(Status.INVALID, _errmsg(str(error)), record.retry, error_class="invalid")
    if isinstance(error, (InvalidConfig, InvalidInput, ProviderMisconfigured)):
        return Outcome(Status.FAILED, _errmsg(str(error)), record.retry, error_class="config")
    if isinstance(error, DeliveryError):
        # it may have been sent: every later attempt asks the vendor first (until it is sent)
        unsure = ((UNSURE_FIELD, "1"),) if isinstance(error, AmbiguousOutcome) else ()
        attempts = record.retry + 1
        choice = (
            decider(record, error, attempts) if decider is not None and attempts < record.retry_max else None
        )
        if attempts >= record.retry_max or choice == "stop":
            why = "retries stopped by the handler" if choice == "stop" else f"after {attempts} attempts"
            message = f"{RetriesExhausted.code}: {why}, last error {error}"
            # held: nobody could tell whether it was sent; an operator decides (dead letter)
            held = "unconfirmed" if isinstance(error, UnconfirmedOutcome) else "exhausted"
            return Outcome(Status.FAILED, _errmsg(message), attempts, error_class=held, fields=unsure)
        wait_s = policy.delay_s(attempts)
        if isinstance(error, TemporaryFailure) and error.retry_after_s is not None:
            wait_s = max(wait_s, error.retry_after_s)
        if isinstance(choice, float):
            wait_s = choice
        return Outcome(
            Status.WAITING,
            _errmsg(str(error)),
            attempts,
            not_before_ms=now_ms + int(wait_s * 1000),
            fields=unsure,
        )
    detail = f"{UNEXPECTED_CODE}: {type(error).__name__}: {error}"
    return Outcome(Status.INVALID, _errmsg(detail), record.retry, error_class="unexpected")


#: The error a stored failure stands for when its message names no known code, by status.
_DEFAULT_ERRORS: dict[Status, type[NotiError]] = {
    Status.WAITING: TemporaryFailure,
    Status.FAILED: RetriesExhausted,
    Status.INVALID: PermanentFailure,
}


def error_for(status: Status, errmsg: str) -> NotiError:
    """The error a record's stored failure stands for: the class whose code its ``errmsg``
    names (``"e.noti.delivery.config: …"`` is a ``ProviderMisconfigured``), else by status
    (failed: ``RetriesExhausted``, invalid: ``PermanentFailure``, waiting for a retry:
    ``TemporaryFailure``). Celery's events, task mode and the result backend all use it, so
    every tool names one failure the same way."""
    code, detail = split_code(errmsg)
    cls = error_class(code) or _DEFAULT_ERRORS.get(status, PermanentFailure)
    return cls(detail or "no detail recorded", code=code)


def outcome_error(outcome: Outcome) -> NotiError:
    """The error that stands for a failed (0) or invalid (-1) outcome, or for a retry."""
    return error_for(outcome.status, outcome.errmsg)
