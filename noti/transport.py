"""The workers' broker transport: kombu's Redis transport, fetching many messages per wake-up.

Stock kombu spends three blocking Redis round trips per message in the worker's consumer
loop: BRPOP one message, a MULTI to note it in the unacked hash, a MULTI to remove it on
ack (shared/perf-feasibility.md). :class:`BulkTransport` keeps the keys, the wire format and
the crash semantics, and changes when the round trips happen:

- after BRPOP wakes with one message, one MULTI notes it as unacked and takes up to
  :data:`BULK_MAX` - 1 more from the same priority list (``RPOP key COUNT k``, bounded by
  the free prefetch window); one more MULTI notes those; only then is any handed to Celery
  (a quiet queue costs one round trip after the BRPOP, as stock kombu; a busy one two per
  bulk instead of two per message);
- acks are buffered and removed from the unacked hash in one MULTI (multi-argument ZREM and
  HDEL) before the next BRPOP, when :data:`ACK_FLUSH_AT` are waiting, and before the
  channel restores its unacked messages on close.

A buffered ack lost to a SIGKILL leaves its message in the unacked hash: it comes back after
the visibility timeout, and the claim script (a record is sent only while waiting and
unleased) keeps it from being sent twice. Producers, beat and Flower keep the stock
transport; the URL stays ``redis://`` (the Celery setting ``broker_transport`` names this
class). Needs Redis >= 6.2 (``RPOP`` with a count).

This overrides private kombu methods (``Channel._brpop_read``, ``Channel._brpop_start``, the
Redis ``QoS``): kombu is pinned in pyproject.toml and tests/test_transport.py checks them.
"""

from __future__ import annotations

import json
import time
from queue import Empty
from typing import Any

from kombu.transport import redis as kombu_redis
from kombu.transport import virtual
from kombu.utils.encoding import bytes_to_str
from kombu.utils.json import dumps, loads

__all__ = ["ACK_FLUSH_AT", "BULK_MAX", "BulkChannel", "BulkQoS", "BulkTransport"]

#: Most messages taken from one priority list per wake-up.
BULK_MAX = 200
#: Buffered acks that force a flush before the next BRPOP.
ACK_FLUSH_AT = 256


class BulkQoS(kombu_redis.QoS):
    """Unacked bookkeeping in batches: many messages noted in one MULTI, acks buffered."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._noted: set[str] = set()
        self._acks: list[str] = []

    def note_many(self, payloads: list[tuple[dict[str, Any], str]], pipe: Any = None) -> None:
        """Note ``payloads`` (kombu messages, decoded and as received) as unacked, in one
        MULTI; with ``pipe``, the commands are added to it and the caller executes it."""
        if not payloads:
            return
        now = time.time()
        index: dict[str, float] = {}
        unacked: dict[str, str] = {}
        for payload, raw in payloads:
            props = payload["properties"]
            tag = props["delivery_tag"]
            delivery = props["delivery_info"]
            index[tag] = now
            # kombu's [message, exchange, routing_key], the message as received (not re-encoded)
            where = dumps([delivery["exchange"], delivery["routing_key"]])
            unacked[tag] = f"[{raw}, {where[1:]}"
        if pipe is not None:
            pipe.zadd(self.unacked_index_key, index).hset(self.unacked_key, mapping=unacked)
        else:
            with self.pipe_or_acquire() as own:
                own.zadd(self.unacked_index_key, index).hset(self.unacked_key, mapping=unacked).execute()
        self._noted.update(index)

    def append(self, message: Any, delivery_tag: str) -> None:
        if delivery_tag in self._noted:
            self._noted.discard(delivery_tag)
            virtual.QoS.append(self, message, delivery_tag)
        else:
            super().append(message, delivery_tag)

    def ack(self, delivery_tag: str) -> None:
        self._acks.append(delivery_tag)
        virtual.QoS.ack(self, delivery_tag)
        if len(self._acks) >= ACK_FLUSH_AT:
            self.flush_acks()

    def flush_acks(self) -> None:
        """Remove the buffered acks from the unacked index and hash, in one MULTI."""
        if not self._acks:
            return
        tags, self._acks = self._acks, []
        try:
            with self.pipe_or_acquire() as pipe:
                pipe.zrem(self.unacked_index_key, *tags).hdel(self.unacked_key, *tags).execute()
        except Exception:
            self._acks[:0] = tags  # try again at the next flush; lost only if the process dies
            raise

    def restore_unacked(self, client: Any = None) -> None:
        self.flush_acks()
        super().restore_unacked(client)


class BulkChannel(kombu_redis.Channel):
    """A Redis channel that takes many messages per BRPOP wake-up (see the module)."""

    QoS = BulkQoS
    bulk_max = BULK_MAX

    def _brpop_start(self, timeout: float | None = None) -> None:
        self.qos.flush_acks()
        super()._brpop_start(timeout)

    def _brpop_read(self, **options: Any) -> bool:
        # kombu 5.7's _brpop_read, plus the bulk pop and the one-MULTI registration
        try:
            try:
                dest__item = self.client.parse_response(self.client.connection, "BRPOP", **options)
            except self.connection_errors:
                self.client.connection.disconnect()
                raise
            if not dest__item:
                raise Empty()
            key, item = dest__item
            key = bytes_to_str(key)
            dest = key.rsplit(self.sep, 1)[0]
            self._queue_cycle.rotate(dest)
        finally:
            self._in_poll = None  # type: ignore[assignment]
            self._flush_brpop_reauth()
        first = _decoded(item)
        room = self.qos.can_consume_max_estimate()
        more = min(self.bulk_max, self.bulk_max if room is None else room) - 1
        if self.global_keyprefix and key.startswith(self.global_keyprefix):
            key = key[len(self.global_keyprefix) :]  # the client adds it again
        with self.conn_or_acquire() as client:
            # one round trip when the list held only this one (a quiet queue): note it and
            # look for more in the same MULTI
            pipe = client.pipeline()
            self.qos.note_many([first], pipe)
            if more > 0:
                pipe.rpop(key, more)
            rest = pipe.execute()[-1] if more > 0 else None
        payloads = [first, *(_decoded(raw) for raw in rest or ())]
        self.qos.note_many(payloads[1:])
        for payload, _ in payloads:
            self.connection._deliver(payload, dest)
        return True


def _decoded(raw: bytes | str) -> tuple[dict[str, Any], str]:
    """A message as kombu decodes it, and its text. kombu's ``loads`` builds a decoder per call
    for its ``__type__`` hook; text without ``"__type__"`` decodes the same with plain
    ``json.loads``, about three times faster."""
    text = bytes_to_str(raw)
    payload = json.loads(text) if '"__type__"' not in text else loads(text)
    return payload, text


class BulkTransport(kombu_redis.Transport):
    """kombu's Redis transport with :class:`BulkChannel`; select it with the Celery setting
    ``broker_transport = "noti.transport:BulkTransport"`` (noti's app does, on workers)."""

    Channel = BulkChannel
