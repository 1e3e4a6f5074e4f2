"""Writing webman messages: what PHP's ``QueueProducer`` does, without its open windows.

* :meth:`Producer.push` / :meth:`Producer.push_many`: ``XADD <stream> * message <json>``, the
  batch pipelined (not MULTI), as ``pushMessage`` / ``pushMessages`` do.
* :meth:`Producer.schedule` / :meth:`Producer.schedule_many`: ``HSET`` of the payload, then
  ``ZADD`` of the due time, in one MULTI. PHP sends ZADD first in a plain pipeline, so a mover
  running between the two drops a due task (layout.md §6.2); here the mover sees both or
  neither. The same identifier replaces a waiting task, as in PHP.
* :meth:`Producer.has_delayed` is true for a waiting task due at once (score 0), which PHP's
  ``hasDelayedMessageExists`` reports as missing.

Unlike PHP's ``scheduleDelayedMessages``, :meth:`Producer.schedule_many` does not wrap each
item as the payload, and its ``delay_s=0`` means "due now" as in the single form.
"""

from __future__ import annotations

import dataclasses
import itertools
import secrets
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import redis

from noti.bridge.webman.codec import Data, QueueMessage, Reason, check_data, encode_message
from noti.bridge.webman.layout import QueueKeys, QueueNames
from noti.errors import BridgeError, MalformedMessage
from noti.redis.outage import translate_errors
from noti.redis.pipelines import run_batches

__all__ = ["Delayed", "Producer"]

#: Writes per pipeline round trip in the batch methods.
BATCH = 1000

_counter = itertools.count()


def _auto_identifier() -> str:
    """Like PHP's ``md5(microtime(true) . uniqid()) . '-' . $n``: opaque and unique."""
    return f"{secrets.token_hex(16)}-{next(_counter) % 200_000}"


@dataclass(frozen=True, slots=True)
class Delayed:
    """One task for :meth:`Producer.schedule_many`."""

    data: Data | QueueMessage
    #: Seconds from now; 0 = due at once (``delayUntil`` 0, like PHP's single form).
    delay_s: int = 0
    #: Replaces a waiting task with the same identifier; None = a fresh one.
    identifier: str | None = None


class Producer:
    """Writes messages for the consumers of one webman queue."""

    def __init__(
        self, client: redis.Redis, keys: QueueKeys, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.redis = client
        self.keys = keys
        self._clock = clock

    @property
    def names(self) -> QueueNames:
        return self.keys.names

    def now_s(self) -> int:
        """The producer's clock in whole seconds (PHP ``time()``)."""
        return int(self._clock())

    def message(self, data: Data, *, fail_count: int = 0, timestamp: int | None = None) -> QueueMessage:
        """A new message for this queue, as ``QueueMessageFactory::create`` makes it.

        Raises:
            MalformedMessage: ``data`` is something a PHP consumer would not read back as given.
        """
        return QueueMessage(
            type=self.names.queue,
            data=check_data(data),
            timestamp=self.now_s() if timestamp is None else timestamp,
            source=self.names.php_class,
            fail_count=fail_count,
        )

    def _as_message(self, item: Data | QueueMessage) -> QueueMessage:
        return item if isinstance(item, QueueMessage) else self.message(item)

    def _single(self, data: Data | QueueMessage, batch: str) -> QueueMessage:
        """PHP's guard of the single forms: data whose element 0 is an array looks like a batch."""
        first = data[0] if isinstance(data, list) and data else None
        if isinstance(data, dict):
            first = data.get("0", data.get(0))  # type: ignore[call-overload]
        if isinstance(first, list | dict):
            raise MalformedMessage(
                f"data whose element 0 is an array looks like a batch: use {batch}, "
                "or wrap it with Producer.message() to send it as one payload",
                reason=Reason.BAD_FIELD_TYPE,
            )
        return self._as_message(data)

    # --- the stream -------------------------------------------------------------------------

    def push(self, data: Data | QueueMessage) -> str:
        """Add one message to the stream; its stream id.

        Raises:
            MalformedMessage: the data cannot be sent (nothing is written).
            StoreUnavailable: Redis cannot be reached.
        """
        payload = encode_message(self._single(data, "push_many"))
        with translate_errors(self.redis):
            return cast(str, self.redis.xadd(self.keys.stream, {"message": payload}))

    def push_many(self, items: Iterable[Data | QueueMessage]) -> list[str]:
        """Add many messages, pipelined; their stream ids, in order.

        Every item is encoded before anything is written, so a bad item writes nothing.

        Raises:
            MalformedMessage: an item cannot be sent. StoreUnavailable: Redis cannot be reached.
        """
        payloads = [encode_message(self._as_message(item)) for item in items]
        stream = self.keys.stream
        batches = (
            [("XADD", stream, "*", "message", payload) for payload in chunk] for chunk in _chunks(payloads)
        )
        with translate_errors(self.redis):  # a chunk is written while Redis adds the one before
            return [message_id for replies in run_batches(self.redis, batches) for message_id in replies]

    # --- the delayed queue ------------------------------------------------------------------

    def _delayed_entry(self, task: Delayed) -> tuple[str, int, str]:
        delay = task.delay_s
        if isinstance(delay, bool) or not isinstance(delay, int) or delay < 0:
            raise BridgeError(
                f"delay must be a whole number of seconds >= 0, got {delay!r}", code="e.noti.bridge.baddelay"
            )
        message = self._as_message(task.data)
        if delay > 0:
            message = dataclasses.replace(message, delay_until=self.now_s() + delay)
        identifier = task.identifier or _auto_identifier()
        return identifier, message.delay_until, encode_message(message)

    def _write_delayed(self, pipe: Any, identifier: str, due_s: int, payload: str) -> None:
        pipe.hset(self.keys.delayed_hash, identifier, payload)
        pipe.zadd(self.keys.delayed_set, {identifier: due_s})

    def schedule(self, data: Data | QueueMessage, delay_s: int = 0, identifier: str | None = None) -> str:
        """Schedule a message ``delay_s`` seconds from now; the task's identifier.

        A :class:`QueueMessage` keeps its own ``delay_until`` unless ``delay_s`` > 0. Scheduling
        again with the same ``identifier`` replaces the payload and the due time while the
        task waits (PHP's "debounce").

        Raises:
            MalformedMessage, BridgeError (``e.noti.bridge.baddelay``), StoreUnavailable.
        """
        identifier, due_s, payload = self._delayed_entry(
            Delayed(self._single(data, "schedule_many"), delay_s, identifier)
        )
        with translate_errors(self.redis):
            pipe = self.redis.pipeline(transaction=True)
            self._write_delayed(pipe, identifier, due_s, payload)
            pipe.execute()
        return identifier

    def schedule_many(self, tasks: Iterable[Delayed]) -> list[str]:
        """Schedule many tasks (each HSET+ZADD pair atomic, batched); their identifiers.

        Raises:
            MalformedMessage, BridgeError, StoreUnavailable: as :meth:`schedule`; a bad task
            writes nothing.
        """
        entries = [self._delayed_entry(task) for task in tasks]
        with translate_errors(self.redis):
            for chunk in _chunks(entries):
                pipe = self.redis.pipeline(transaction=True)
                for identifier, due_s, payload in chunk:
                    self._write_delayed(pipe, identifier, due_s, payload)
                pipe.execute()
        return [identifier for identifier, _, _ in entries]

    def remove_delayed(self, identifier: str) -> bool:
        """Cancel a waiting task; whether there was one (PHP always says true)."""
        return self.remove_delayed_many([identifier]) > 0

    def remove_delayed_many(self, identifiers: Sequence[str]) -> int:
        """Cancel waiting tasks; how many existed."""
        if not identifiers:
            return 0
        with translate_errors(self.redis):
            pipe = self.redis.pipeline(transaction=True)
            for identifier in identifiers:
                pipe.zrem(self.keys.delayed_set, identifier)
                pipe.hdel(self.keys.delayed_hash, identifier)
            results = pipe.execute()
        return sum(1 for zrem, hdel in zip(results[::2], results[1::2], strict=True) if zrem or hdel)

    def due_at(self, identifier: str) -> int | None:
        """When a waiting task is due (Unix seconds; 0 = at once), or None if there is none."""
        with translate_errors(self.redis):
            score = self.redis.zscore(self.keys.delayed_set, identifier)
        return None if score is None else int(score)

    def has_delayed(self, identifier: str) -> bool:
        """Whether a task with this identifier waits, including one due at once."""
        return self.due_at(identifier) is not None


def _chunks(items: list[Any]) -> Iterable[list[Any]]:
    for start in range(0, len(items), BATCH):
        yield items[start : start + BATCH]
