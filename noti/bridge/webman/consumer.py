"""The consumer base class, mirroring the plugin's ``Consumer`` and ``ConsumerMessage``.

Subclass :class:`Consumer`, name the PHP class that owns the queue, implement :meth:`consume`::

    class SendEmail(Consumer):
        php_class = "app\\\\queue\\\\test\\\\SendEmail"   # keys and `source` come from it
        max_attempts = 3

        def consume(self, message: ConsumerMessage) -> None:
            send(message.data)

Settings are class attributes with the plugin's defaults (layout.md §10), overridable per
instance (``options`` of a registered consumer). The handlers :meth:`Consumer.handle_fail_retry`,
:meth:`Consumer.handle_dead_letter`, :meth:`Consumer.handle_pending_timeout` and
:meth:`Consumer.handle_malformed` may be overridden; their defaults do what the plugin does,
and a dead letter also goes to noti's dead-letter stream. The loop that feeds a consumer is
:mod:`noti.bridge.webman.worker`.
"""

from __future__ import annotations

import abc
import dataclasses
import logging
import os
import socket
import time
from collections.abc import Callable
from enum import IntEnum, StrEnum
from typing import Any, ClassVar

import redis

from noti.bridge.webman.codec import Data, PhpOutcome, QueueMessage, Reason
from noti.bridge.webman.layout import QueueKeys, QueueNames, noti_consumer_name
from noti.bridge.webman.producer import Producer
from noti.bridge.webman.settings import DEFAULT_PREFIX
from noti.core.deadletter import DeadLetter, DeadLetters
from noti.core.record import now_ms
from noti.errors import BridgeError, InvalidConfig, MalformedMessage, NotiError
from noti.redis.outage import translate_errors

__all__ = ["Consumer", "ConsumerMessage", "DeadLetterKind", "PendingStrategy"]

log = logging.getLogger(__name__)

PENDING_TIMEOUT = "e.noti.bridge.pending_timeout"
PENDING_RETRY = "e.noti.bridge.pending_retry"
DELIVERIES_EXCEEDED = "e.noti.bridge.deliveries_exceeded"


class PendingStrategy(IntEnum):
    """What the pending check does with an entry left unacked past ``pending_timeout_s``."""

    #: Ack it and dead-letter it (``PENDING_PROCESSING_IGNORE``).
    IGNORE = 0
    #: Retry it through the delayed queue, as a failure (``PENDING_PROCESSING_RETRY``).
    RETRY = 1


class DeadLetterKind(StrEnum):
    """``error_class`` of the bridge's dead letters."""

    EXHAUSTED = "exhausted"
    PENDING_TIMEOUT = "pending_timeout"
    DELIVERIES_EXCEEDED = "deliveries_exceeded"
    REJECTED = "rejected"
    POISON = "poison"
    FOREIGN = "foreign"


def _kind_of(exc: BaseException) -> DeadLetterKind:
    if isinstance(exc, MalformedMessage):
        return DeadLetterKind.POISON
    if isinstance(exc, NotiError):
        return {
            PENDING_TIMEOUT: DeadLetterKind.PENDING_TIMEOUT,
            PENDING_RETRY: DeadLetterKind.EXHAUSTED,
            DELIVERIES_EXCEEDED: DeadLetterKind.DELIVERIES_EXCEEDED,
        }.get(exc.code, DeadLetterKind.REJECTED)
    return DeadLetterKind.EXHAUSTED


def printable(raw: str | None) -> str:
    """``raw`` as storable text: bytes that were not UTF-8 become ``\\xNN``."""
    if raw is None:
        return ""
    return raw.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


class ConsumerMessage:
    """A message handed to :meth:`Consumer.consume` (PHP ``ConsumerMessage``)."""

    def __init__(self, message_id: str, queue_message: QueueMessage, raw: str, consumer: Consumer) -> None:
        #: The stream entry id.
        self.id = message_id
        #: The message as read (replaced by the retried one after a retry).
        self.queue_message = queue_message
        #: The ``message`` field as it was in the stream.
        self.raw = raw
        self.consumer = consumer
        #: Whether :meth:`ack` was called, and whether its XACK went through.
        self.acked = False
        self.ack_status = False
        self.fail_retry_disabled = False
        self._on_error: Callable[[BaseException, ConsumerMessage], Any] | None = None

    @property
    def data(self) -> Data:
        return self.queue_message.data

    @property
    def fail_count(self) -> int:
        return self.queue_message.fail_count

    def ack(self) -> bool:
        """XACK the entry now; whether Redis took it (a failure is logged, not raised)."""
        self.acked = True
        try:
            self.consumer.xack(self.id)
            self.ack_status = True
        except (NotiError, redis.RedisError) as exc:
            log.warning("webman %s: ack of %s failed: %s", self.consumer.names.queue, self.id, exc)
            self.ack_status = False
        return self.ack_status

    def on_error(self, callback: Callable[[BaseException, ConsumerMessage], Any]) -> None:
        """Call ``callback(exc, message)`` when :meth:`Consumer.consume` raises."""
        self._on_error = callback

    def trigger_error(self, exc: BaseException) -> None:
        """Run the :meth:`on_error` callback (its own failure is logged)."""
        if self._on_error is None:
            return
        try:
            self._on_error(exc, self)
        except Exception:
            log.exception("webman %s: on_error callback failed for %s", self.consumer.names.queue, self.id)

    def disable_fail_retry(self) -> None:
        """If consume fails after this, ack and drop the message instead of retrying it."""
        self.fail_retry_disabled = True

    def trigger_fail_retry(self, exc: BaseException) -> bool:
        """Retry now through :meth:`Consumer.handle_fail_retry` (and never again for this delivery)."""
        self.disable_fail_retry()
        return self.consumer.handle_fail_retry(self.id, self, exc)


class Consumer(abc.ABC):
    """A consumer of one webman queue (PHP ``Consumer``)."""

    #: The PHP class that owns the queue (``app\\queue\\SendEmail``): names, keys, ``source``.
    php_class: str = ""
    #: Named connection (``[webman.connections.<name>]``; ``default`` is the bridge's Redis).
    connection: str = "default"
    #: The five per-class name overrides; empty = derived from ``php_class``.
    queue_name: str = ""
    group_name: str = ""
    stream_key: str = ""
    delayed_task_set_key: str = ""
    delayed_data_hash_key: str = ""
    #: XREADGROUP COUNT and BLOCK (ms).
    prefetch_count: int = 1
    block_time_ms: int = 5000
    #: Pause after each read (PHP's 0.5 s consume timer paces its worker; noti reads at once).
    consumer_interval_s: float = 0.0
    #: failCount limit, and the linear back-off step: retry n waits n × retry_seconds.
    max_attempts: int = 5
    retry_seconds: int = 60
    auto_ack: bool = True
    auto_delete: bool = True
    #: The delayed-task mover: batch per pass, pass interval; False = leave it to others.
    delayed_batch_size: int = 128
    delayed_interval_s: float = 1.0
    run_mover: bool = True
    #: The pending check.
    pending_strategy: PendingStrategy = PendingStrategy.RETRY
    pending_timeout_s: int = 300
    pending_check_interval_s: float = 60.0
    pending_check_batch: int = 50

    #: Attributes a registered consumer's ``options`` may set.
    SETTINGS: ClassVar[frozenset[str]] = frozenset(
        {
            "php_class", "connection", "queue_name", "group_name", "stream_key", "delayed_task_set_key",
            "delayed_data_hash_key", "prefetch_count", "block_time_ms", "consumer_interval_s",
            "max_attempts", "retry_seconds", "auto_ack", "auto_delete", "delayed_batch_size",
            "delayed_interval_s", "run_mover", "pending_strategy", "pending_timeout_s",
            "pending_check_interval_s", "pending_check_batch",
        }
    )  # fmt: skip

    def __init__(
        self,
        *,
        client: redis.Redis,
        prefix: str = DEFAULT_PREFIX,
        dead_letters: DeadLetters | None = None,
        clock: Callable[[], float] = time.time,
        tag: str = "0",
        options: dict[str, Any] | None = None,
    ) -> None:
        """Build the consumer for one thread (``tag`` makes its Redis consumer name unique).

        Raises:
            InvalidConfig: an unknown option, a value of the wrong type, or no ``php_class``.
        """
        for name, value in (options or {}).items():
            self._set_option(name, value)
        if not self.php_class or self.php_class.startswith("\\"):
            raise InvalidConfig(
                f"{type(self).__name__}.php_class must name the PHP class that owns the queue, "
                f"without a leading backslash (got {self.php_class!r})"
            )
        self._check_ranges()
        self.redis = client
        self.dead_letters = dead_letters
        self.clock = clock
        self.names = QueueNames.from_class(
            self.php_class,
            queue_name_=self.queue_name,
            group_name_=self.group_name,
            stream_key=self.stream_key,
            delayed_task_set_key=self.delayed_task_set_key,
            delayed_data_hash_key=self.delayed_data_hash_key,
        )
        self.keys = QueueKeys(self.names, prefix)
        self.producer = Producer(client, self.keys, clock=clock)
        self.consumer_name = noti_consumer_name(self.names.group, socket.gethostname(), os.getpid(), tag)

    def _set_option(self, name: str, value: Any) -> None:
        if name not in self.SETTINGS:
            raise InvalidConfig(f"{type(self).__name__}: unknown option {name!r}")
        setattr(self, name, self._checked(name, getattr(type(self), name), value))

    def _checked(self, name: str, default: Any, value: Any) -> Any:
        if isinstance(default, PendingStrategy):
            try:
                return PendingStrategy[value.upper()] if isinstance(value, str) else PendingStrategy(value)
            except (KeyError, ValueError):
                pass
        elif isinstance(default, bool):
            if isinstance(value, bool):
                return value
        elif isinstance(default, float):
            if isinstance(value, int | float) and not isinstance(value, bool):
                return float(value)
        elif isinstance(default, int):
            if isinstance(value, int) and not isinstance(value, bool):
                return value
        elif isinstance(value, str):
            return value
        raise InvalidConfig(f"{type(self).__name__}: option {name}={value!r} has the wrong type")

    def _check_ranges(self) -> None:
        limits = {
            "prefetch_count": (1, 10_000),
            "block_time_ms": (0, 55_000),  # under the client's 60 s socket timeout
            "max_attempts": (0, 1_000),
            "retry_seconds": (0, 86_400 * 30),
            "pending_timeout_s": (0, 86_400 * 30),
            "pending_check_batch": (1, 10_000),
        }
        for name, (low, high) in limits.items():
            value = getattr(self, name)
            if not low <= value <= high:
                raise InvalidConfig(f"{type(self).__name__}: {name} must be {low} to {high}, got {value}")

    def now_s(self) -> int:
        """The consumer's clock in whole seconds (PHP ``time()``)."""
        return int(self.clock())

    @abc.abstractmethod
    def consume(self, message: ConsumerMessage) -> None:
        """Handle one message; raise to have it retried (see :meth:`handle_fail_retry`)."""

    # --- overridable handlers (the plugin's defaults) ---------------------------------------

    def handle_fail_retry(self, message_id: str, message: ConsumerMessage, exc: BaseException) -> bool:
        """Reschedule a failed message, or dead-letter it once ``max_attempts`` failures are used.

        failCount + 1, then ``nextRetry = delayUntil = now + failCount × retry_seconds``, through
        the delayed queue with the failed stream id as identifier. True = the caller acks it.
        """
        current = message.queue_message
        if current.fail_count >= self.max_attempts:
            self.handle_dead_letter(message_id, message, exc)
            return True
        fail_count = current.fail_count + 1
        due = self.now_s() + fail_count * self.retry_seconds
        retried = dataclasses.replace(current, fail_count=fail_count, next_retry=due, delay_until=due)
        message.queue_message = retried
        self.producer.schedule(retried, identifier=message_id)
        return True

    def handle_dead_letter(self, message_id: str, message: ConsumerMessage, exc: BaseException) -> None:
        """Log the dead letter (as PHP does) and add it to noti's dead-letter stream."""
        queue_message = message.queue_message
        log.warning(
            "webman %s: dead letter %s (failCount %s): %s: %s",
            self.names.queue,
            message_id,
            queue_message.fail_count,
            type(exc).__name__,
            exc,
        )
        self._dead_letter(
            message_id, _kind_of(exc), f"{type(exc).__name__}: {exc}", message.raw, queue_message
        )

    def handle_pending_timeout(
        self, message_id: str, message: ConsumerMessage, owner: str, idle_ms: int, deliveries: int
    ) -> None:
        """An entry left unacked for ``pending_timeout_s`` (claimed from ``owner``).

        The entry is acked only once its dead letter or its retry is written: if that raises,
        it stays pending for the next check.
        """
        if self.pending_strategy is PendingStrategy.IGNORE:
            self.handle_dead_letter(
                message_id,
                message,
                BridgeError("PENDING_PROCESSING_IGNORE: Message pending timeout.", code=PENDING_TIMEOUT),
            )
            message.ack()
            return
        if deliveries + 1 > self.max_attempts:
            self.handle_dead_letter(
                message_id,
                message,
                BridgeError(
                    "PENDING_PROCESSING_RETRY: The number of message delivery times exceeds "
                    "the maximum number of retries.",
                    code=DELIVERIES_EXCEEDED,
                ),
            )
            message.ack()
            return
        retried = self.handle_fail_retry(
            message_id,
            message,
            BridgeError("PENDING_PROCESSING_RETRY: Message pending timeout retry.", code=PENDING_RETRY),
        )
        if retried:
            message.ack()

    def handle_malformed(self, message_id: str, raw: str | None, error: MalformedMessage) -> None:
        """An entry that is not a message for this queue (PHP drops it silently or chokes on it).

        The default logs it and dead-letters it with the reason; the caller then acks and
        deletes it. Raise to leave it pending instead.
        """
        try:
            reason: Reason | None = Reason(error.reason)
        except ValueError:
            reason = None
        foreign = reason in (Reason.FOREIGN_TYPE, Reason.FOREIGN_SOURCE)
        outcome = reason.php_outcome.value if reason else PhpOutcome.DROPPED.value
        log.warning("webman %s: discarding entry %s: %s", self.names.queue, message_id, error.message)
        self._dead_letter(
            message_id,
            DeadLetterKind.FOREIGN if foreign else DeadLetterKind.POISON,
            f"{error.code}: {error.message} (PHP consumers: {outcome})",
            raw,
            None,
        )

    def _dead_letter(
        self,
        message_id: str,
        kind: DeadLetterKind,
        errmsg: str,
        raw: str | None,
        message: QueueMessage | None,
    ) -> None:
        if self.dead_letters is None:
            return
        self.dead_letters.add(
            DeadLetter(
                record_id=message_id,
                type=self.names.queue,
                target=self.keys.stream,
                attempts=message.fail_count if message else 0,
                error_class=kind.value,
                errmsg=errmsg,
                at_ms=now_ms(),
                source=f"webman:{self.names.queue}",
                payload=printable(raw),
            )
        )

    # --- stream operations ------------------------------------------------------------------

    def xack(self, message_id: str) -> int:
        """XACK one entry of this queue's group."""
        with translate_errors(self.redis):
            return int(self.redis.xack(self.keys.stream, self.names.group, message_id))

    def xdel(self, message_id: str) -> None:
        """XDEL one entry (a failure is logged: the entry is acked already)."""
        try:
            with translate_errors(self.redis):
                self.redis.xdel(self.keys.stream, message_id)
        except (NotiError, redis.RedisError) as exc:
            log.warning("webman %s: delete of %s failed: %s", self.names.queue, message_id, exc)

    def ack_and_delete(self, message_id: str) -> None:
        """XACK then XDEL, whatever ``auto_delete`` says (PHP's treatment of bad entries)."""
        self.xack(message_id)
        self.xdel(message_id)
