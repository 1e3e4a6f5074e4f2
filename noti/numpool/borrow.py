"""A provider's sender number: taken from a pool for one send and always given back.

A provider configured with ``sender_pool = "NAME"`` wraps each send in
:func:`borrowed_sender`. No free number is a flow limit, not a failure: the provider raises
:class:`~noti.errors.RateLimited`, so the record waits and the attempt is not counted.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

from noti.errors import NoFreeNumber, RateLimited, StoreUnavailable, TemporaryFailure, TransitionRefused
from noti.numpool.pool import NumberPool

__all__ = ["borrowed_sender"]

log = logging.getLogger(__name__)


@contextlib.contextmanager
def borrowed_sender(
    pool: NumberPool,
    *,
    provider: str,
    retry_after_s: float,
    sticky_to: str | None = None,
    sticky_ttl_s: float = 0.0,
) -> Iterator[str]:
    """Call a number from ``pool`` for one send, yield it, and hang it up whatever happens.

    With ``sticky_to`` (the recipient) and ``sticky_ttl_s > 0``, the recipient keeps its
    sender number while that number stays up.

    Raises:
        RateLimited: no number is free (``vendor_code`` ``pool.empty``); retry after
            ``retry_after_s``, not counted as an attempt.
        TemporaryFailure: the pool's Redis cannot be reached (``vendor_code`` ``pool.unavailable``).
    """
    sticky = sticky_to if sticky_ttl_s > 0 else None
    try:
        if sticky is None:
            number = pool.call().number
        else:
            number = pool.call(sticky_to=sticky, sticky_ttl_s=sticky_ttl_s).number
    except NoFreeNumber as exc:
        raise RateLimited(
            exc.message, retry_after_s=retry_after_s, provider=provider, vendor_code="pool.empty"
        ) from exc
    except StoreUnavailable as exc:
        raise TemporaryFailure(
            f"sender pool {pool.name}: {exc.message}", provider=provider, vendor_code="pool.unavailable"
        ) from exc
    try:
        yield number
    finally:
        try:
            pool.hangup(number)
        except TransitionRefused as exc:  # deleted or hung up by someone else meanwhile
            log.warning("provider %s: hang-up refused: %s", provider, exc.message)
        except StoreUnavailable as exc:
            # Raising now would turn a delivered message into a failed one; the number
            # stays busy until an operator runs `noti pool NAME hangup NUMBER`.
            log.error("provider %s: pool %s: %s stays busy: %s", provider, pool.name, number, exc.message)
