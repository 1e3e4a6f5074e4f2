"""The provider contract: what every way of delivering a notification implements.

A provider is configured under ``[providers.<name>]`` (``kind`` picks the class, and defaults
to the name), checks a message before it is stored (:meth:`Provider.check`) and delivers it
(:meth:`Provider.send`, or :meth:`Provider.send_async` on an asyncio loop), returning a
:class:`Receipt` or raising a :class:`~noti.errors.DeliveryError` subclass. Providers never
sleep, loop or retry: :mod:`noti.core.retry` decides what a failure means for the record.
"""

from __future__ import annotations

import abc
import asyncio
import contextvars
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import redis
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from noti.core.keys import Keys
from noti.core.record import Channel, Notification
from noti.delivery.state import DeliveryReport, PendingDelivery, ReceiptBatch, ReceiptRequest
from noti.errors import InvalidConfig, ReceiptRejected
from noti.redis.conn import PoolClient

__all__ = ["Message", "Provider", "ProviderOptions", "Receipt", "options_problem"]


@dataclass(frozen=True, slots=True)
class Message:
    """What a provider needs to deliver one notification. ``id`` doubles as idempotency key."""

    id: str
    channel: Channel
    target: str
    fields: Mapping[str, Any] = field(default_factory=dict)
    #: Failed attempts before this one (0 on the first attempt).
    attempt: int = 0
    level: int = 1
    creator: str = ""
    #: The sender a number pool lent this send (``sender_pool``; :mod:`noti.providers._sender`).
    sender: str | None = None
    #: An earlier attempt may have been sent (it timed out after the request went out, or its
    #: sender died mid-send): a provider that can ask its vendor does so before sending again
    #: (:class:`noti.providers._lookup.LookupProvider`); the others send again.
    in_doubt: bool = False
    #: When the record was created (ms): no earlier attempt can be older.
    created_ms: int = 0
    #: The record's other providers that can tell whether they accepted it: an earlier
    #: attempt in doubt may have gone out through any provider of the chain (one was down, the
    #: next one timed out), so each of them is asked too before a send (:mod:`noti.providers._lookup`).
    ask_also: tuple[Provider, ...] = ()
    #: A status callback: the record whose status it reports (:attr:`Notification.status_of`).
    status_of: str | None = None

    @classmethod
    def from_record(cls, record: Notification) -> Message:
        return cls(
            id=record.id,
            channel=record.channel,
            target=record.target,
            fields=dict(record.fields),
            attempt=record.retry,
            level=record.level,
            creator=record.creator,
            created_ms=record.created_ms,
            status_of=record.status_of,
        )


@dataclass(frozen=True, slots=True)
class Receipt:
    """Proof of delivery: the provider's message id and a small excerpt of its answer."""

    provider: str
    msgid: str | None = None
    raw: str = ""


class ProviderOptions(BaseModel):
    """Base of each provider's options model; unknown keys are refused.

    Secrets are ``pydantic.SecretStr`` fields, so they print as ``**********``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str | None = None
    #: Requests per second this provider (account) may receive, shared by all workers.
    rate_limit_per_s: float | None = Field(default=None, gt=0)
    #: Bucket size of the rate limit (default: one second's worth).
    rate_burst: int | None = Field(default=None, ge=1)
    #: Seconds a request may take; keep it below the lease (``NOTI_LEASE_TIMEOUT_S``).
    timeout_s: float = Field(default=10.0, gt=0, le=120)


def options_problem(name: str, exc: ValidationError) -> str:
    """What is wrong with ``[providers.<name>]``, each problem naming its key as written in the
    table (``[providers.tw] from: …``); a rule across keys names the table and says which keys."""
    problems = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"])
        message = str(err["msg"]).removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            message = "unknown option"
        problems.append(
            f"[providers.{name}] {where}: {message}" if where else f"[providers.{name}]: {message}"
        )
    return "; ".join(problems) or f"[providers.{name}] is invalid"


class Provider(abc.ABC):
    """One configured provider instance (one account of one vendor)."""

    kind: ClassVar[str]
    channels: ClassVar[frozenset[Channel]]
    Options: ClassVar[type[ProviderOptions]] = ProviderOptions
    #: Where the number pools live (``numpool_redis_url``); None: :attr:`redis`.
    pool_redis: PoolClient | None = None

    def __init__(self, name: str, options: Mapping[str, Any], *, redis: redis.Redis, keys: Keys) -> None:
        """Raises :class:`InvalidConfig` when ``options`` do not fit :attr:`Options`."""
        self.name = name
        self.redis = redis
        self.keys = keys
        try:
            self.options = self.Options(**options)
        except ValidationError as exc:
            raise InvalidConfig(options_problem(name, exc)) from None

    @property
    def reaches_private(self) -> bool:
        """It may send to private, loopback or link-local addresses: only users granted it by
        name may use it (:mod:`noti.access.grants`). Default: no."""
        return False

    def check(self, message: Message) -> None:
        """Refuse a message this provider could never send (raise InvalidInput); default: accept."""
        return None

    @abc.abstractmethod
    def send(self, message: Message) -> Receipt:
        """Deliver once, or raise a :class:`~noti.errors.DeliveryError` subclass."""

    def send_many(self, messages: Sequence[Message]) -> Sequence[Receipt | Exception]:
        """:meth:`send` each message; per message its receipt or the error raised (a
        :class:`DeliveryError`, or any other exception: a bug, judged per message).
        Providers that can send many in one request or round trip override it."""
        results: list[Receipt | Exception] = []
        for message in messages:
            try:
                results.append(self.send(message))
            except Exception as exc:
                results.append(exc)
        return results

    async def send_async(self, message: Message) -> Receipt:
        """:meth:`send` on an asyncio loop. This default runs :meth:`send` in the loop's
        executor (a thread), in a copy of the caller's context (as ``asyncio.to_thread``
        does: the record's trace goes on there); providers with a native asynchronous client
        override it."""
        run = contextvars.copy_context().run
        return await asyncio.get_running_loop().run_in_executor(None, run, self.send, message)

    #: A send this provider makes is delivered when it returns (the webhook's 2xx is the
    #: application's own answer; SMTP's 250 is the relay's): no receipt is awaited.
    delivered_on_send: bool = False

    def read_receipt(self, request: ReceiptRequest) -> ReceiptBatch:
        """The delivery reports a vendor pushed to ``/v1/receipts/<name>``, its signature
        checked, and the answer the vendor expects. Default: this provider takes none.

        Raises:
            ReceiptRejected: a bad signature (``e.noti.receipt.signature``), a body that cannot
                be read (``e.noti.receipt.malformed``), or a provider taking no receipts
                (``e.noti.receipt.provider``).
        """
        raise ReceiptRejected(
            f"provider {self.name!r} ({self.kind}) takes no pushed receipts", code="e.noti.receipt.provider"
        )

    @property
    def polls_receipts(self) -> bool:
        """True when beat asks this provider's vendor for receipts (:meth:`poll_receipts`)."""
        return False

    def poll_receipts(self, pending: Sequence[PendingDelivery]) -> list[DeliveryReport]:
        """Ask the vendor for the delivery of ``pending`` (sent through this provider, no
        receipt yet): the reports it has; messages it says nothing of are left out.

        Raises:
            DeliveryError: the vendor could not be asked (beat asks again next round).
        """
        return []

    @property
    def inline(self) -> bool:
        """True when :meth:`send` answers at once (no network wait), so a batch may run it on
        the worker's consumer thread instead of handing it to the send loop."""
        return False

    def close(self) -> None:
        """Release connections; called when the worker process stops."""
        return None

    def __repr__(self) -> str:  # never shows options: they hold secrets
        return f"<{type(self).__name__} {self.name!r} kind={self.kind!r}>"
