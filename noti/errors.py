"""The error tree of noti: every error a caller can see, with a stable code.

::

    NotiError                    .code, .message
    ├── InvalidConfig            e.noti.config            bad NOTI_* setting, missing extra
    │   └── IncompatibleDependency  e.noti.config.dependency  kombu changed what noti relies on
    ├── InvalidInput             e.cmd.noti.add.*         refused before anything is stored
    ├── PermissionDenied         e.cmd.noti.*.nopvg       the acting user may not do this
    ├── NotFound                 e.cmd.noti.not_found     unknown record (del: e.cmd.noti.del.not_a_msg)
    ├── StoreUnavailable         e.noti.store.unavailable Redis down, refused or timed out
    ├── DeliveryError            e.noti.delivery          raised by providers only; the class is the
    │   │                                                 outcome class (R, D, F, P, O, C, U below)
    │   ├── TemporaryFailure     e.noti.delivery.temporary    R: retried per the retry policy
    │   │   ├── RateLimited      e.noti.delivery.ratelimited  D: waits retry_after_s, not an attempt
    │   │   ├── ProviderOutage   e.noti.delivery.outage       F: the next provider is tried
    │   │   ├── StaleCredential  e.noti.delivery.credential   R1: refreshed and tried again at once
    │   │   └── AmbiguousOutcome e.noti.delivery.ambiguous    U: may have been sent; no failover
    │   │       └── UnconfirmedOutcome e.noti.delivery.unconfirmed  U: the vendor could not be asked
    │   ├── PermanentFailure     e.noti.delivery.permanent    P: record invalid (-1) at once
    │   │   ├── RecipientOptedOut e.noti.delivery.optedout    O: invalid, target suppressed
    │   │   └── Unsubscribed     e.noti.delivery.unsubscribed P: the recipient's preferences refuse it
    │   └── ProviderMisconfigured e.noti.delivery.config      C: next provider; else failed (0)
    ├── RetriesExhausted         e.cmd.noti.send.reachMaxRetry  record failed (0)
    ├── PoolError                e.noti.pool              sender-number pool (noti.numpool)
    │   ├── TransitionRefused    e.noti.pool.refused      the state table refuses this event now
    │   └── NoFreeNumber         e.noti.pool.empty        call found no idle, registered number
    ├── BridgeError              e.noti.bridge            webman-redis-queue bridge (noti.bridge.webman)
    │   └── MalformedMessage     e.noti.bridge.malformed  a webman payload that cannot be encoded or decoded
    ├── ReceiptRejected          e.noti.receipt           a vendor's delivery receipt refused: its signature
    │                                                     (.signature), its shape (.malformed), its provider
    ├── Unauthenticated          e.noti.auth              an HTTP caller without a valid API token
    └── RateLimitExceeded        e.noti.auth.rate         an API token over its rate limit (HTTP 429)

Codes are a contract (scripts match on them); ``tests/test_errors.py`` pins them.
Foreign exceptions are wrapped where they are met, never passed through.
"""

from __future__ import annotations

import re

__all__ = [
    "AmbiguousOutcome",
    "BridgeError",
    "DeliveryError",
    "IncompatibleDependency",
    "InvalidConfig",
    "InvalidInput",
    "MalformedMessage",
    "NoFreeNumber",
    "NotFound",
    "NotiError",
    "PermanentFailure",
    "PermissionDenied",
    "PoolError",
    "ProviderMisconfigured",
    "ProviderOutage",
    "RateLimitExceeded",
    "RateLimited",
    "ReceiptRejected",
    "RecipientOptedOut",
    "RetriesExhausted",
    "StaleCredential",
    "StoreUnavailable",
    "TemporaryFailure",
    "TransitionRefused",
    "Unauthenticated",
    "Unsubscribed",
    "UnconfirmedOutcome",
]


class NotiError(Exception):
    """Root of every error noti raises on purpose."""

    code: str = "e.noti"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"

    def __repr__(self) -> str:
        # with the code: Celery's logs, events and Flower show an exception by its repr
        return f"{type(self).__name__}({str(self)!r})"


class InvalidConfig(NotiError):
    """A setting or an installed extra is missing or wrong; raised at start-up or first use."""

    code = "e.noti.config"


class IncompatibleDependency(InvalidConfig):
    """An installed library (kombu) lacks or changed what noti relies on beyond its public
    API (:mod:`noti.celery.compat`); a worker refuses to start."""

    code = "e.noti.config.dependency"


class InvalidInput(NotiError):
    """A request was refused before anything was stored."""

    code = "e.cmd.noti.add.invalid"


class PermissionDenied(NotiError):
    """The acting user is not allowed to do this (seed codes ``e.cmd.noti.*.nopvg``)."""

    code = "e.cmd.noti.nopvg"


class NotFound(NotiError):
    """No notification record has this id."""

    code = "e.cmd.noti.not_found"


class StoreUnavailable(NotiError):
    """Redis could not be reached or did not answer in time."""

    code = "e.noti.store.unavailable"


class DeliveryError(NotiError):
    """A provider could not deliver; subclasses tell the sender what to do next.

    Providers raise these and nothing else; the retry policy branches on the class,
    never on ``vendor_code``, which is kept for the record and the logs.
    """

    code = "e.noti.delivery"

    def __init__(
        self,
        message: str,
        *,
        provider: str = "",
        vendor_code: str = "",
        code: str | None = None,
    ) -> None:
        super().__init__(message, code=code)
        self.provider = provider
        self.vendor_code = vendor_code


class TemporaryFailure(DeliveryError):
    """Transient failure (timeout, 5xx, vendor busy): try again later; counts as an attempt.

    ``retry_after_s`` (e.g. from a ``Retry-After`` header) makes the back-off at least that long.
    """

    code = "e.noti.delivery.temporary"

    def __init__(self, message: str, *, retry_after_s: float | None = None, **kwargs: str) -> None:
        super().__init__(message, **kwargs)
        self.retry_after_s = retry_after_s


class RateLimited(TemporaryFailure):
    """A flow limit with a known window: wait ``retry_after_s``; does not count as an attempt."""

    code = "e.noti.delivery.ratelimited"

    retry_after_s: float

    def __init__(self, message: str, *, retry_after_s: float, **kwargs: str) -> None:
        super().__init__(message, retry_after_s=retry_after_s, **kwargs)


class ProviderOutage(TemporaryFailure):
    """The provider or the account cannot send now (down, suspended, out of balance): the
    next provider of the record is tried; when none is left it counts as an attempt."""

    code = "e.noti.delivery.outage"


class StaleCredential(TemporaryFailure):
    """The provider refused a cached credential (e.g. an expired access token). The provider
    has dropped it; the sender tries once more at once, without counting an attempt."""

    code = "e.noti.delivery.credential"


class AmbiguousOutcome(TemporaryFailure):
    """The request may have been processed (a timeout after sending, an unreadable answer).
    Retried per the policy on the same provider only, never failed over, so that two
    providers never both deliver it."""

    code = "e.noti.delivery.ambiguous"


class UnconfirmedOutcome(AmbiguousOutcome):
    """An earlier attempt may have been sent and the vendor could not be asked whether it
    was (its status look-up failed or is not allowed). With the channel's ``lookup_failure =
    "hold"`` the record sends nothing: the look-up is tried again at its next attempt, and once
    its attempts run out it fails for an operator (dead letter class ``unconfirmed``)."""

    code = "e.noti.delivery.unconfirmed"


class PermanentFailure(DeliveryError):
    """This message can never be delivered as it is (bad target, rejected content)."""

    code = "e.noti.delivery.permanent"


class RecipientOptedOut(PermanentFailure):
    """The recipient unsubscribed or blocked us: the record is invalid and the target is
    suppressed for the channel, so later notifications to it are refused at add time."""

    code = "e.noti.delivery.optedout"


class Unsubscribed(PermanentFailure):
    """The recipient's preferences refused the record when it was claimed for sending (they
    opted out of its category on its channel after it was made, or were erased): it is made
    invalid, and nothing else changes (their address is not suppressed for other senders)."""

    code = "e.noti.delivery.unsubscribed"


class ProviderMisconfigured(DeliveryError):
    """Our side is wrong (bad key, template not approved, IP not whitelisted): the next
    provider is tried; when none is left the record fails (0) and is dead-lettered."""

    code = "e.noti.delivery.config"


class RetriesExhausted(NotiError):
    """Every allowed attempt failed; the record is failed (0) with the last error."""

    code = "e.cmd.noti.send.reachMaxRetry"


class PoolError(NotiError):
    """A sender-number pool (:mod:`noti.numpool`) did not do what was asked; nothing changed."""

    code = "e.noti.pool"

    def __init__(self, message: str, *, pool: str = "", code: str | None = None) -> None:
        super().__init__(message, code=code)
        self.pool = pool


class TransitionRefused(PoolError):
    """The pool's state table refuses this event for this number in its current state.

    ``event``, ``number`` and ``state`` name the refused cell; ``reason`` is the table's
    (``unknown``: not in the pool, ``idle``: not in a call, ``down``: not registered,
    ``busy``: already in a call).
    """

    code = "e.noti.pool.refused"

    def __init__(
        self,
        message: str,
        *,
        pool: str = "",
        number: str = "",
        event: str = "",
        state: str = "",
        reason: str = "",
        code: str | None = None,
    ) -> None:
        super().__init__(message, pool=pool, code=code)
        self.number = number
        self.event = event
        self.state = state
        self.reason = reason


class NoFreeNumber(PoolError):
    """``call`` found no number that is idle and registered (for a sticky recipient: its own)."""

    code = "e.noti.pool.empty"

    def __init__(
        self, message: str, *, pool: str = "", code: str | None = None, lease_ends_in_s: float | None = None
    ) -> None:
        super().__init__(message, pool=pool, code=code)
        #: Seconds until the earliest lease of a held number ends (None: no number is leased).
        self.lease_ends_in_s = lease_ends_in_s


class BridgeError(NotiError):
    """The webman-redis-queue bridge (:mod:`noti.bridge.webman`) could not do what was asked."""

    code = "e.noti.bridge"


class MalformedMessage(BridgeError):
    """A webman message that cannot be encoded for PHP or decoded as PHP would decode it.

    ``reason`` names the rule it breaks (``bad_json``, ``invalid_utf8``, ``missing_key`` …;
    see :class:`noti.bridge.webman.codec.Reason`).
    """

    code = "e.noti.bridge.malformed"

    def __init__(self, message: str, *, reason: str = "", code: str | None = None) -> None:
        super().__init__(message, code=code)
        self.reason = reason


class ReceiptRejected(NotiError):
    """A delivery receipt a vendor pushed (or a status look-up answered) that noti refuses:
    its signature does not verify (``e.noti.receipt.signature``), it cannot be read
    (``e.noti.receipt.malformed``), it names no provider that takes receipts
    (``e.noti.receipt.provider``) or it carries more reports than ``NOTI_RECEIPT_PUSH_MAX``
    (``e.noti.receipt.toomany``). Nothing of it is stored."""

    code = "e.noti.receipt"


class Unauthenticated(NotiError):
    """An HTTP API caller without a valid API token: none given, unknown or revoked
    (:mod:`noti.access.tokens`)."""

    code = "e.noti.auth"


class RateLimitExceeded(NotiError):
    """An HTTP API caller whose token went over its rate limit (``noti token add -rate``);
    nothing was done. ``retry_after_s``: when the next request of that token is let in."""

    code = "e.noti.auth.rate"

    def __init__(self, message: str, *, retry_after_s: float, code: str | None = None) -> None:
        super().__init__(message, code=code)
        self.retry_after_s = retry_after_s


_CODED = re.compile(r"^(e\.[A-Za-z0-9_.]+): (.*)$", re.DOTALL)


def split_code(text: str) -> tuple[str | None, str]:
    """``("e.x.y", "detail")`` from an error's text ``"e.x.y: detail"`` (what ``str()`` of a
    :class:`NotiError` gives and what a record's ``noti_errmsg`` holds); ``(None, text)`` when
    it names no code."""
    matched = _CODED.match(text)
    return (matched.group(1), matched.group(2)) if matched else (None, text)


def error_class(code: str | None) -> type[NotiError] | None:
    """The class whose default code is ``code``, among those a bare message rebuilds
    (:class:`RateLimited` and :class:`RateLimitExceeded` need their window, so they are left out)."""
    return _BY_CODE.get(code) if code else None


def _classes_by_code() -> dict[str, type[NotiError]]:
    found: dict[str, type[NotiError]] = {}
    for name in __all__:
        cls = globals()[name]
        if (
            isinstance(cls, type)
            and issubclass(cls, NotiError)
            and not issubclass(cls, (RateLimited, RateLimitExceeded))
        ):
            found.setdefault(cls.code, cls)
    return found


_BY_CODE = _classes_by_code()
