"""The sender of a provider whose table names a number pool (``sender_pool = "NAME"``): one
piece every SMS provider calls at one place (its ``send`` decorated with :func:`pooled_send`,
its request reading ``message.sender``), so the pool is chosen the same way for all.

Options (:class:`SenderPoolOptions`, in each such provider's table):

===================  =========================  =================================================
option               default                    meaning
===================  =========================  =================================================
``sender_pool``      none                       the pool (:mod:`noti.numpool`) each send takes
                                                its sender from: Aliyun's ``SignName``,
                                                Tencent's ``SignName`` (mainland) or
                                                ``SenderId`` (international), Twilio's ``From``,
                                                the sandbox's ``sender``
``sender_wait_s``    1.0                        how long a send waits for a free number (woken
                                                at once by a release), and then how long the
                                                record waits (rate limited, not an attempt)
``sender_sticky_s``  0                          > 0: a recipient keeps its sender number while
                                                that number stays up, for that many seconds
                                                after its last send
``sender_lease_s``   ``timeout_s`` + 60          a number held longer (its worker died) goes
                                                back to the pool; more than ``timeout_s``
===================  =========================  =================================================

The provider's operator names the pool, so sends pass no owner check
(:meth:`~noti.numpool.NumberPool.trusted`). The pool lives in ``numpool_redis_url``'s Redis
(or Redis Cluster) when that is set.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Self, TypeVar

from pydantic import Field, model_validator

from noti.inputs import POOL_NAME_PATTERN
from noti.providers.base import Message, Provider, ProviderOptions, Receipt

if TYPE_CHECKING:  # the pool is loaded by the first pooled send: checking a message (noti add) needs none
    from noti.numpool import NumberPool

__all__ = ["SenderPoolOptions", "pooled_send"]

#: Lease of a pool number beyond the provider's ``timeout_s``, by default.
LEASE_MARGIN_S = 60.0


class SenderPoolOptions(ProviderOptions):
    """The options of a provider that may take its sender from a number pool."""

    sender_pool: str | None = Field(default=None, pattern=POOL_NAME_PATTERN)
    #: At least 0.1 s: it is also the record's wait when no number came, and a wait of 0 would
    #: send the record round claim, wait and finish without pause while the pool is empty.
    sender_wait_s: float = Field(default=1.0, ge=0.1, le=3600)
    sender_sticky_s: float = Field(default=0.0, ge=0, le=10 * 366 * 86400)
    sender_lease_s: float | None = Field(default=None, gt=0, le=86400)

    @model_validator(mode="after")
    def _lease_outlasts_a_send(self) -> Self:
        if self.sender_lease_s is not None and self.sender_lease_s <= self.timeout_s:
            raise ValueError(
                f"sender_lease_s ({self.sender_lease_s}) must be more than timeout_s ({self.timeout_s}): "
                "a live send would lose its number"
            )
        return self

    @property
    def lease_s(self) -> float:
        """How long a send holds its number at most (its worker may have died)."""
        return self.sender_lease_s if self.sender_lease_s is not None else self.timeout_s + LEASE_MARGIN_S


P = TypeVar("P", bound=Provider)


def _pool_of(provider: Provider, name: str) -> NumberPool:
    """The provider's handle on pool ``name``, made once."""
    from noti.numpool import NumberPool

    pool: NumberPool | None = provider.__dict__.get("_sender_pool")
    if pool is None or pool.name != name:
        client = provider.pool_redis if provider.pool_redis is not None else provider.redis
        pool = NumberPool.trusted(name, client=client, keys=provider.keys)
        provider.__dict__["_sender_pool"] = pool
    return pool


def pooled_send(send: Callable[[P, Message], Receipt]) -> Callable[[P, Message], Receipt]:
    """Decorate a provider's ``send``: with ``sender_pool`` set, each send runs with a number
    of that pool in ``message.sender`` and gives it back after, whatever the outcome (a
    crash: the lease). Without it, ``send`` runs as it is (``message.sender`` None).

    Raises (besides ``send``'s):
        RateLimited: no number became free within ``sender_wait_s``.
        TemporaryFailure: the pool's Redis cannot be reached.
    """

    @functools.wraps(send)
    def wrapper(self: P, message: Message) -> Receipt:
        opts = self.options
        if not isinstance(opts, SenderPoolOptions) or opts.sender_pool is None:
            return send(self, message)
        from noti.numpool import borrowed_sender

        with borrowed_sender(
            _pool_of(self, opts.sender_pool),
            provider=self.name,
            retry_after_s=opts.sender_wait_s,
            sticky_to=message.target,
            sticky_ttl_s=opts.sender_sticky_s,
            lease_s=opts.lease_s,
        ) as sender:
            return send(self, dataclasses.replace(message, sender=sender))

    return wrapper
