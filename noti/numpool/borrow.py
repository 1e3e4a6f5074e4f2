"""A provider's sender number: taken from a pool for one send and always given back.

A provider configured with ``sender_pool = "NAME"`` wraps each send in
:func:`borrowed_sender` (through :func:`noti.providers._sender.pooled_send`). When no number
is free, the send waits up to ``wait_s`` for one, woken as soon as a number is released (a
blocking pop on the pool's ``released`` list, pushed by the script that frees a number), then
raises :class:`~noti.errors.RateLimited`: the record waits and the attempt is not counted.
The number is held under a lease, so the pool takes it back from a worker that dies mid-send.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator

from noti.errors import NoFreeNumber, RateLimited, StoreUnavailable, TemporaryFailure, TransitionRefused
from noti.numpool.pool import NumberPool

__all__ = ["MAX_BLOCK_S", "borrowed_sender", "take_number"]

log = logging.getLogger(__name__)

#: Longest single blocking pop (below the client's socket timeout); a longer wait loops.
MAX_BLOCK_S = 5.0


def take_number(
    pool: NumberPool,
    *,
    wait_s: float,
    sticky_to: str | None = None,
    sticky_ttl_s: float = 0.0,
    lease_s: float | None = None,
) -> str:
    """Call a number from ``pool``; when none is free (or the sticky one is busy), wait up to
    ``wait_s`` for a release and try again.

    Raises:
        NoFreeNumber: still none after ``wait_s``.
        StoreUnavailable: the pool's Redis cannot be reached.
    """
    sticky = sticky_to if sticky_ttl_s > 0 else None
    deadline = time.monotonic() + wait_s
    while True:
        try:
            if sticky is None:
                return pool.call(lease_s=lease_s).number
            return pool.call(sticky_to=sticky, sticky_ttl_s=sticky_ttl_s, lease_s=lease_s).number
        except NoFreeNumber as exc:
            left = deadline - time.monotonic()
            if left <= 0:
                raise
            block = min(left, MAX_BLOCK_S)
            if exc.lease_ends_in_s is not None:  # a dead holder's number comes back then
                block = min(block, exc.lease_ends_in_s + 0.005)
            pool.wait_released(block)


@contextlib.contextmanager
def borrowed_sender(
    pool: NumberPool,
    *,
    provider: str,
    retry_after_s: float,
    sticky_to: str | None = None,
    sticky_ttl_s: float = 0.0,
    lease_s: float | None = None,
) -> Iterator[str]:
    """Call a number from ``pool`` for one send (waiting up to ``retry_after_s`` for one,
    see :func:`take_number`), yield it, and hang it up whatever happens.

    With ``sticky_to`` (the recipient) and ``sticky_ttl_s > 0``, the recipient keeps its
    sender number while that number stays up.

    Raises:
        RateLimited: no number became free (``vendor_code`` ``pool.empty``); retry after
            ``retry_after_s``, not counted as an attempt.
        TemporaryFailure: the pool's Redis cannot be reached (``vendor_code`` ``pool.unavailable``).
    """
    try:
        number = take_number(
            pool, wait_s=retry_after_s, sticky_to=sticky_to, sticky_ttl_s=sticky_ttl_s, lease_s=lease_s
        )
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
            # Raising now would turn a delivered message into a failed one; the lease
            # gives the number back once it ends.
            log.error(
                "provider %s: pool %s: %s stays busy until its lease ends: %s",
                provider,
                pool.name,
                number,
                exc.message,
            )
