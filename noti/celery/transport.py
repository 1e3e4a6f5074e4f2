"""The workers' broker transport: kombu's Redis transport, fetching many messages per wake-up.

Stock kombu spends three blocking Redis round trips per message in the worker's consumer
loop: BRPOP one message, a MULTI to note it in the unacked hash, a MULTI to remove it on
ack (shared/perf-feasibility.md). :class:`BulkTransport` keeps the keys, the wire format and
the crash semantics, and changes when the round trips happen:

- after BRPOP wakes with one message, one script call (``noti/lua/bulk_fetch.lua``) notes
  it as unacked, takes up to :data:`BULK_MAX` - 1 more from the same priority list
  (``RPOP key COUNT k``, bounded by the free prefetch window) and notes those too,
  atomically: no message is ever out of both the list and the unacked hash (stock kombu
  has that window for one message). Only then is any handed to Celery. A quiet queue costs
  one round trip after the BRPOP, as stock kombu; a busy one one per bulk instead of two
  per message;
- when a :class:`DeliveryClaims` is set on the channel (noti's batch delivery sets one),
  the same script call also claims the record of each plain ``noti.deliver`` message it
  takes (``claim_record.lua``, the rules of ``claim.lua``) and the claims wait in
  :attr:`BulkChannel.fetched_claims` for the batcher: a notification on a quiet queue costs
  one round trip from the wake-up to its send, not two. A claim the batcher did not take
  (its message refused or put back) is given back (``release.lua``), so the redelivered
  message is sent at once, not after the lease;
- acks are buffered and removed from the unacked hash in one MULTI (multi-argument ZREM and
  HDEL) before the next BRPOP, when :data:`ACK_FLUSH_AT` are waiting, and before the
  channel restores its unacked messages on close.

A buffered ack lost to a SIGKILL leaves its message in the unacked hash: it comes back after
the visibility timeout, and the claim script (a record is sent only while waiting and
unleased) keeps it from being sent twice. The ``global_keyprefix`` transport option is not
supported (kombu would prefix only the first key of the script call). Producers, beat and
Flower keep the stock transport; the URL stays ``redis://`` (the Celery setting
``broker_transport`` names this class). Needs Redis >= 6.2 (``RPOP`` with a count).

This overrides private kombu methods (``Channel._brpop_read``, ``Channel._brpop_start``,
``Channel.conn_or_acquire``, the Redis ``QoS``): :mod:`noti.celery.compat` lists what it
relies on, and a worker checks it before it starts (a kombu that changed it is refused).

Unacked messages of a dead worker are restored every ``unacked_restore_interval`` seconds
(noti sets it from ``NOTI_UNACKED_RESTORE_INTERVAL_S``, with ``unacked_restore_throttle`` 1).
kombu reads those options from 5.7 on; with an earlier kombu this transport reads them and
runs the restore on that interval itself (kombu's own timer, every 10 s, stays).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from queue import Empty
from typing import Any
from urllib.parse import quote

import redis
from kombu.transport import redis as kombu_redis
from kombu.transport import virtual
from kombu.utils.encoding import bytes_to_str
from kombu.utils.json import loads

from noti.fastjson import loads as fast_loads
from noti.redis.conn import load_script
from noti.redis.entropy import owner_token
from noti.redis.outage import Outage, refuses_writes
from noti.redis.pipelines import ScriptPipeline
from noti.redis.urls import SentinelUrl

__all__ = [
    "ACK_FLUSH_AT",
    "BULK_MAX",
    "KOMBU_RESTORE_OPTIONS",
    "BulkChannel",
    "BulkQoS",
    "BulkSentinelChannel",
    "BulkSentinelTransport",
    "BulkTransport",
    "DeliveryClaims",
    "FetchedClaim",
    "kombu_broker",
    "kombu_json",
    "worker_transport",
]

log = logging.getLogger(__name__)


#: Most messages taken from one priority list per wake-up. Small enough that a burst of
#: higher-level messages is shared by the workers instead of taken whole by one (which
#: would send it while the others, finding none left, go on with lower levels): measured,
#: 200 let 284 level-1 through before the last of 100 level-1000 with two processes, 50 let
#: 100 (bound 258), for a drain still above 6,500/s.
BULK_MAX = 50
#: Buffered acks that force a flush before the next BRPOP.
ACK_FLUSH_AT = 256
#: kombu reads the transport options ``unacked_restore_interval`` and
#: ``unacked_restore_throttle`` (5.7 and later); an earlier kombu's event loop restores
#: unacked messages every 10 s, scanning on every tenth call: this transport adds them.
KOMBU_RESTORE_OPTIONS = "unacked_restore_interval" in kombu_redis.Channel.from_transport_options


@dataclass(frozen=True, slots=True)
class DeliveryClaims:
    """What the fetch script needs to claim the records of the delivery messages it takes.

    The records must live in the broker's Redis database (noti's default: one Redis).
    """

    #: The delivery task's name (``noti.deliver``): only its messages are claimed.
    task: str
    #: A record's hash key is this prefix and its id.
    record_prefix: str
    #: The channels, and the key of each one's opted-out set.
    optouts: tuple[tuple[str, str], ...]
    lease_ms: int
    #: Each fetch claims for a new :func:`~noti.redis.entropy.owner_token` of this prefix.
    owner_prefix: str


@dataclass(frozen=True, slots=True)
class FetchedClaim:
    """The claim the fetch script made for one message's record."""

    owner: str
    lease_ms: int
    #: The ``claim_record.lua`` row (``noti.core.attempt.claim_from_row`` reads it).
    row: list[Any]


class BulkQoS(kombu_redis.QoS):
    """Unacked bookkeeping in batches: many messages noted in one MULTI, acks buffered."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._noted: set[str] = set()
        self._acks: list[str] = []

    def noted(self, tags: list[str]) -> None:
        """``tags`` were noted as unacked by the fetch script: :meth:`append` skips them."""
        self._noted.update(tags)

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

    def restore_visible(self, start: int = 0, num: int = 10, interval: int | None = None) -> Any:
        """kombu's, scanning on every ``unacked_restore_throttle``-th call: kombu < 5.7 gives no
        ``interval`` (it scanned on every tenth call)."""
        if interval is None:
            interval = getattr(self.channel, "unacked_restore_throttle", 10)
        return super().restore_visible(start, num, interval)

    def restore_unacked(self, client: Any = None) -> None:
        self.flush_acks()
        super().restore_unacked(client)

    def restore_unacked_once(self, stderr: Any = None) -> Any:
        """Give this channel's unacked messages back to their queues when it closes (kombu's),
        and never fail: this runs in teardown (the channel's close, kombu's ``collect`` after
        a lost connection, a finalizer), where an exception stops the worker. A message that
        cannot be given back stays in the unacked hash, and ``restore_visible`` queues it again
        after the visibility timeout."""
        # kombu calls restore_unacked only when something is still unacked: flush the
        # buffered acks on every close
        try:
            self.flush_acks()
        except Exception:  # closing anyway: those messages come back after the visibility timeout
            pass
        try:
            return super().restore_unacked_once(stderr)
        except Exception as exc:  # noqa: BLE001 - see the docstring
            left = len(self._delivered)
            self._delivered.clear()  # kombu's next call asserts nothing is left once restored
            self._acks.clear()
            log.warning(
                "broker channel closed without Redis (%s: %s): %d unacked message(s) stay in the "
                "unacked hash and are queued again after the visibility timeout",
                type(exc).__name__,
                exc,
                left,
            )
            return None


class BulkChannel(kombu_redis.Channel):
    """A Redis channel that takes many messages per BRPOP wake-up (see the module)."""

    QoS = BulkQoS
    bulk_max = BULK_MAX
    if not KOMBU_RESTORE_OPTIONS:  # kombu < 5.7: read them here (see the module)
        from_transport_options = kombu_redis.Channel.from_transport_options + (  # type: ignore[assignment]
            "unacked_restore_interval",
            "unacked_restore_throttle",
        )
        unacked_restore_interval = 10
        unacked_restore_throttle = 10
    #: Set by the consumer of delivery messages to have their records claimed as they are
    #: fetched; None: messages are only taken.
    delivery_claims: DeliveryClaims | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        #: The one client of :meth:`conn_or_acquire` (kombu's __init__ already sends commands).
        self._shared_client: Any = None
        super().__init__(*args, **kwargs)
        #: Claims made by the fetch script, by delivery tag, until the consumer takes them.
        self.fetched_claims: dict[str, FetchedClaim] = {}
        if self.global_keyprefix:  # kombu prefixes only the first key of a script call
            raise ValueError("noti.celery.transport does not support the global_keyprefix transport option")

    @contextmanager
    def conn_or_acquire(self, client: Any = None) -> Iterator[Any]:
        """kombu builds a new ``redis.Redis`` for every command it sends outside the BRPOP
        connection (~140 µs of CPU here, on every wake-up and ack flush); one client per
        channel and connection pool serves them all (it takes a pooled connection per
        command, as each new one did)."""
        if client:
            yield client
            return
        shared = self._shared_client
        if self._pool is None and self._torn_down():
            # kombu's collect/close dropped the pools and the transport's connection: a new
            # pool would read the host from a connection that is gone (kombu#582). The client
            # built before (its pool reconnects on use) can still give messages back.
            if shared is None:
                raise redis.ConnectionError("the broker connection was torn down")
            yield shared
            return
        pool = self.pool  # kombu drops its pools after a fork: then a new client
        if shared is None or shared.connection_pool is not pool:
            shared = self._shared_client = self._create_client()
        yield shared

    def _torn_down(self) -> bool:
        """The transport was closed under this channel (``Connection._do_close_transport``
        sets its ``client`` to None)."""
        transport = self.connection
        return transport is None or getattr(transport, "client", None) is None

    def _brpop_start(self, *args: Any, **kwargs: Any) -> None:
        self.qos.flush_acks()
        super()._brpop_start(*args, **kwargs)  # kombu's default timeout (5.5: 1 s; 5.6+: brpop_timeout)

    def _brpop_read(self, **options: Any) -> bool:
        # kombu's _brpop_read (5.5.2-5.7.0; noti.celery.compat checks it is still that one),
        # plus the bulk pop and the one-MULTI registration
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
            flush_reauth = getattr(self, "_flush_brpop_reauth", None)  # kombu >= 5.7
            if flush_reauth is not None:
                flush_reauth()
        room = self.qos.can_consume_max_estimate()
        more = min(self.bulk_max, self.bulk_max if room is None else room) - 1
        claiming = self.delivery_claims
        if self._closing:  # kombu reads a pending BRPOP answer while closing: take no more
            more, claiming = 0, None
        owner = "" if claiming is None else owner_token(claiming.owner_prefix)
        rest, claims = self._note(key, max(0, more), item, claiming, owner)
        tags: list[str] = []
        payloads: list[dict[str, Any]] = []
        for n, raw in enumerate((item, *rest)):
            try:
                payload = kombu_json(raw)
                tag = payload["properties"]["delivery_tag"]
            except Exception:  # not a kombu message: the script did not note it either
                log.error("bulk fetch: dropped a message that is not a kombu envelope: %.200r", raw)
                continue
            tags.append(tag)
            payloads.append(payload)
            if claims and claims[n][0] != -1:
                assert claiming is not None
                row = [v.decode() if type(v) is bytes else v for v in claims[n]]  # a raw client
                self.fetched_claims[tag] = FetchedClaim(owner, claiming.lease_ms, row)
        self.qos.noted(tags)
        try:
            for n, payload in enumerate(payloads):
                try:
                    self.connection._deliver(payload, dest)
                except Exception:  # the rest are noted: put them back now, not after the timeout
                    for undelivered in tags[n + 1 :]:
                        self.qos.restore_by_tag(undelivered, leftmost=True)
                    raise
        finally:
            # the consumer takes each claim as its message is delivered (synchronously); one
            # left was not taken (a message refused, or put back): its claim is given back
            if self.fetched_claims:
                log.warning("bulk fetch: %d claim(s) not taken by a consumer", len(self.fetched_claims))
                untaken, self.fetched_claims = self.fetched_claims, {}
                assert claiming is not None
                self._give_back(claiming, list(untaken.values()))
        return True

    def _note(
        self, key: str, more: int, item: Any, claiming: DeliveryClaims | None, owner: str
    ) -> tuple[list[Any], list[list[Any]]]:
        """:func:`_bulk_fetch`, tried again while Redis refuses writes (full at ``maxmemory``,
        unable to persist): BRPOP already took ``item`` from its list, and only the script
        notes it as unacked, so giving up would leave it to the lost-work sweep. The consumer
        waits here (nothing else it could do needs no write); the outage is logged once."""
        while True:
            try:
                with self.conn_or_acquire() as client:
                    fetched = _bulk_fetch(client, key, self.qos, more, item, claiming, owner)
            except redis.ResponseError as exc:
                if not refuses_writes(exc) or self._closing:
                    raise
                time.sleep(self._refusal.failed(exc))
                more, claiming, owner = 0, None, ""  # only the message in hand, once room is back
                continue
            self._refusal.ok()
            return fetched

    @cached_property
    def _refusal(self) -> Outage:
        return Outage("bulk fetch", logger=log)

    def _give_back(self, claiming: DeliveryClaims, untaken: list[FetchedClaim]) -> None:
        """End the leases of claims no consumer took (``release.lua``), so their messages,
        redelivered, are sent at once rather than after the lease; if Redis does not answer,
        the leases simply run out."""
        held = [claim for claim in untaken if int(claim.row[0]) == 1]  # the others took nothing
        if not held:
            return
        try:
            ids = [_claimed_id(claim.row) for claim in held]
            with self.conn_or_acquire() as client:
                script = getattr(client, "_noti_release", None)
                if script is None:
                    script = client._noti_release = load_script(client, "release")
                script(
                    keys=[claiming.record_prefix + record_id for record_id in ids],
                    args=[int(time.time() * 1000), *(claim.owner for claim in held)],
                    client=client,
                )
        except Exception:  # noqa: BLE001 - the leases end on their own
            log.exception("bulk fetch: could not give back %d claim(s); their leases run out", len(held))


def _claimed_id(row: list[Any]) -> str:
    """The record id in a claimed ``claim_record.lua`` row (``1`` then the hash's fields)."""
    fields = iter(row[1:])
    return str(dict(zip(fields, fields, strict=True))["id"])


def _bulk_fetch(
    client: Any, key: str, qos: BulkQoS, more: int, item: Any, claiming: DeliveryClaims | None, owner: str
) -> tuple[list[Any], list[list[Any]]]:
    """Run ``bulk_fetch.lua``: note ``item`` and up to ``more`` popped messages as unacked,
    and with ``claiming`` claim their records for ``owner``. The popped messages, and one
    claim row per message (``item`` first; none without ``claiming``)."""
    script = getattr(client, "_noti_bulk_fetch", None)  # the channel's one client keeps it
    if script is None:
        script = client._noti_bulk_fetch = load_script(client, "bulk_fetch")
    now = time.time()
    keys = [key, qos.unacked_index_key, qos.unacked_key]
    args: list[Any] = [now, more, item]
    if claiming is not None:
        keys += [optout_key for _, optout_key in claiming.optouts]
        args += [claiming.record_prefix, int(now * 1000), claiming.lease_ms, owner, claiming.task]
        args += [channel for channel, _ in claiming.optouts]
    with ScriptPipeline(client, script) as call:  # hiredis-packed: a third of redis-py's CPU
        call.send([(keys, args)])
        [(popped, claims)] = call.results()
    return popped, claims


def kombu_json(raw: bytes | str) -> Any:
    """JSON decoded as kombu decodes it (``kombu.utils.json.loads``). kombu builds a decoder
    per call for its ``__type__`` hook; text without ``"__type__"`` decodes the same with
    plain JSON, about three times faster (:func:`noti.fastjson.loads`: three times faster
    again with msgspec). Used for envelopes here and for ``noti.deliver`` bodies in
    :mod:`noti.celery.tasks.batching`."""
    text = bytes_to_str(raw)
    return fast_loads(text) if '"__type__"' not in text else loads(text)


class BulkTransport(kombu_redis.Transport):
    """kombu's Redis transport with :class:`BulkChannel`; select it with the Celery setting
    ``broker_transport = "noti.celery.transport:BulkTransport"`` (noti's app does, on workers)."""

    Channel = BulkChannel

    def register_with_event_loop(self, connection: Any, loop: Any) -> None:
        super().register_with_event_loop(connection, loop)
        if not KOMBU_RESTORE_OPTIONS:  # kombu < 5.7 restores every 10 s only (see the module)
            interval = connection.client.transport_options.get("unacked_restore_interval", 10)
            if interval != 10:
                cycle: Any = self.cycle
                loop.call_repeatedly(interval, cycle.maybe_restore_messages)


class BulkSentinelChannel(BulkChannel, kombu_redis.SentinelChannel):
    """:class:`BulkChannel` on a primary found through Sentinel (kombu's ``SentinelChannel``
    gives the connection pool, this class the bulk fetch, claims and acks)."""

    from_transport_options = BulkChannel.from_transport_options + tuple(  # type: ignore[assignment]
        name
        for name in kombu_redis.SentinelChannel.from_transport_options
        if name not in BulkChannel.from_transport_options
    )


class BulkSentinelTransport(BulkTransport, kombu_redis.SentinelTransport):
    """kombu's Sentinel transport with :class:`BulkSentinelChannel`: what noti's workers
    select instead of :class:`BulkTransport` when the broker is a ``redis+sentinel://`` URL."""

    Channel = BulkSentinelChannel


def kombu_broker(url: str) -> tuple[str, dict[str, Any]]:
    """The Celery ``broker_url`` for noti's broker URL, and the transport options it needs
    besides noti's own (:func:`~noti.celery.queues.transport_options`).

    A ``redis+sentinel://`` URL (:class:`~noti.redis.urls.SentinelUrl`) becomes kombu's form,
    one ``sentinel://`` URL per sentinel joined by ``;`` (each with the primary's password
    and database), with ``master_name`` and ``sentinel_kwargs`` as transport options; any
    other URL is kombu's already.
    """
    sentinel_url = SentinelUrl.parse(url)
    if sentinel_url is None:
        return url, {}
    auth = ""
    if sentinel_url.password is not None or sentinel_url.username is not None:
        auth = f"{quote(sentinel_url.username or '', safe='')}:{quote(sentinel_url.password or '', safe='')}@"
    hosts = ";".join(
        f"sentinel://{auth}{host}:{port}/{sentinel_url.db}" for host, port in sentinel_url.sentinels
    )
    options: dict[str, Any] = {
        "master_name": sentinel_url.service,
        "sentinel_kwargs": sentinel_url.sentinel_kwargs(),
    }
    return hosts, options


def worker_transport(url: str) -> str:
    """The Celery ``broker_transport`` noti's workers consume through for noti's broker URL."""
    sentinel = SentinelUrl.parse(url) is not None
    return f"noti.celery.transport:{'BulkSentinelTransport' if sentinel else 'BulkTransport'}"
