"""The bulk-fetch broker transport (noti/celery/transport.py) against a real Redis and real kombu."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kombu import Connection, Consumer, Exchange, Producer, Queue  # type: ignore[attr-defined]
from kombu.asynchronous import Hub
from kombu.utils.encoding import bytes_to_str

from noti.celery.compat import check_kombu
from noti.celery.transport import (
    ACK_FLUSH_AT,
    BulkChannel,
    BulkQoS,
    BulkTransport,
    DeliveryClaims,
    _bulk_fetch,
)
from noti.core.attempt import ClaimState, claim_from_row
from noti.core.record import Channel, Status

pytestmark = pytest.mark.integration

QUEUE = Queue("bulktest", Exchange("bulktest", type="direct"), routing_key="bulktest")


def test_the_installed_kombu_has_what_the_transport_relies_on() -> None:
    # noti.celery.transport overrides kombu internals: the worker's start-up check
    # (tests/test_kombu_compat.py) passes on the kombu installed here
    check_kombu(bulk_transport=True)
    assert BulkTransport.Channel is BulkChannel and BulkChannel.QoS is BulkQoS


@pytest.fixture
def conn(rt: Any) -> Iterator[Connection]:
    url = rt.settings.redis_url
    with Connection(url, transport=BulkTransport, transport_options={"visibility_timeout": 1}) as c:
        yield c


def _publish(url: str, n: int) -> None:
    with Connection(url) as c:  # a stock-kombu producer: same wire format
        producer = Producer(c)
        for i in range(n):
            producer.publish({"n": i}, exchange=QUEUE.exchange, routing_key="bulktest", declare=[QUEUE])


def _consume(conn: Connection, prefetch: int, on_message: Any) -> tuple[Consumer, Any]:
    channel = conn.channel()
    consumer = Consumer(channel, [QUEUE], callbacks=[on_message], accept=["json"])
    consumer.qos(prefetch_count=prefetch)
    consumer.consume()
    return consumer, channel


def _publish_and_take(url: str, conn: Connection, n: int) -> tuple[list[Any], Any]:
    """``n`` messages published, then taken (not acked) by one wake-up of a consumer on
    ``conn`` whose prefetch window holds them all: the messages, and the consumer's channel."""
    _publish(url, n)
    got: list[Any] = []
    _, channel = _consume(conn, n, lambda body, message: got.append(message))
    conn.drain_events(timeout=2)
    return got, channel


def test_one_wake_up_takes_many_messages_and_notes_them_unacked(rt: Any, conn: Connection) -> None:
    # given 50 messages queued by a stock producer
    _publish(rt.settings.redis_url, 50)
    got: list[Any] = []
    _, channel = _consume(conn, 20, lambda body, message: got.append((body, message)))
    # when the consumer wakes once
    conn.drain_events(timeout=2)
    # then it received as many as its prefetch window allows, in queue order
    assert [body["n"] for body, _ in got] == list(range(20))
    # and all of them are noted as unacked in Redis (crash safety, as stock kombu)
    assert rt.redis.hlen(channel.unacked_key) == 20
    assert rt.redis.zcard(channel.unacked_index_key) == 20
    assert sum(rt.redis.llen(k) for k in rt.redis.keys("bulktest*")) == 30


def test_acks_are_flushed_in_one_go_before_the_next_fetch(rt: Any, conn: Connection) -> None:
    _publish(rt.settings.redis_url, 30)
    got: list[Any] = []
    _, channel = _consume(conn, 10, lambda body, message: got.append(message))
    conn.drain_events(timeout=2)
    assert len(got) == 10
    # when they are acked: buffered, still noted in Redis
    for message in got:
        message.ack()
    assert rt.redis.hlen(channel.unacked_key) == 10
    # then the next fetch removes them first, and notes the new ones
    conn.drain_events(timeout=2)
    assert len(got) == 20
    assert set(rt.redis.hkeys(channel.unacked_key)) == {m.delivery_tag for m in got[10:]}


def test_a_full_ack_buffer_is_flushed_at_once(rt: Any, conn: Connection) -> None:
    n = ACK_FLUSH_AT + 5
    _publish(rt.settings.redis_url, n)
    got: list[Any] = []
    _, channel = _consume(conn, n, lambda body, message: got.append(message))
    while len(got) < n:
        conn.drain_events(timeout=2)
    for message in got[:ACK_FLUSH_AT]:
        message.ack()
    assert rt.redis.hlen(channel.unacked_key) == 5


def test_unacked_messages_of_a_dead_consumer_come_back(rt: Any, conn: Connection) -> None:
    # given a consumer that took messages and acked some, then died without cleaning up
    got, channel = _publish_and_take(rt.settings.redis_url, conn, 8)
    for message in got[:3]:
        message.ack()
    channel.qos._delivered.clear()  # as after SIGKILL: nothing restored on close
    channel.qos._acks.clear()  # the buffered acks die with it
    # when another consumer restores what passed the visibility timeout (1 s here)
    time.sleep(1.2)
    with Connection(rt.settings.redis_url, transport_options={"visibility_timeout": 1}) as other:
        other.default_channel.qos.restore_visible(num=100, interval=1)
    # then all 8 are queued again (the 3 acked ones too: the claim keeps them from being
    # sent twice), and nothing is noted unacked any more
    assert sum(rt.redis.llen(k) for k in rt.redis.keys("bulktest*")) == 8
    assert rt.redis.hlen(channel.unacked_key) == 0


class _Loop(Hub):  # type: ignore[misc]
    """kombu's event loop, noting the periodic calls registered on it."""

    def __init__(self) -> None:
        super().__init__()
        self.repeated: list[tuple[float, Any]] = []

    def call_repeatedly(self, delay: float, fun: Any, *args: Any) -> Any:
        self.repeated.append((delay, fun))
        return super().call_repeatedly(delay, fun, *args)


def test_a_workers_loop_restores_unacked_messages_on_notis_interval_on_every_kombu(rt: Any) -> None:
    # kombu < 5.7 ignores unacked_restore_interval (it restores every 10 s, scanning every
    # tenth time): the bulk transport reads it and registers the restore itself
    options = {"visibility_timeout": 1, "unacked_restore_interval": 1, "unacked_restore_throttle": 1}
    loop = _Loop()
    try:
        with Connection(rt.settings.redis_url, transport=BulkTransport, transport_options=options) as c:
            channel = c.default_channel
            assert channel.unacked_restore_interval == 1 and channel.unacked_restore_throttle == 1
            c.transport.register_with_event_loop(c.connection, loop)
            assert (1, c.transport.cycle.maybe_restore_messages) in loop.repeated
    finally:
        loop.close()


def test_a_restore_without_a_throttle_scans_on_every_call_with_throttle_one(rt: Any) -> None:
    # given a consumer that took messages and died (visibility timeout 1 s)
    options = {"visibility_timeout": 1, "unacked_restore_throttle": 1}
    with Connection(rt.settings.redis_url, transport=BulkTransport, transport_options=options) as c:
        _, channel = _publish_and_take(rt.settings.redis_url, c, 4)
        channel.qos._delivered.clear()  # as after SIGKILL
        channel.qos.restore_visible(num=100)  # a periodic restore: nothing is due yet
        time.sleep(1.2)
        # when the next restore is called as kombu < 5.7 calls it (no interval; it scanned on
        # every tenth call only)
        channel.qos.restore_visible(num=100)
        # then it scanned: the messages are queued again
        assert sum(rt.redis.llen(k) for k in rt.redis.keys("bulktest*")) == 4
        assert rt.redis.hlen(channel.unacked_key) == 0


def test_closing_restores_what_was_not_acked_and_flushes_the_acks(rt: Any) -> None:
    with Connection(rt.settings.redis_url, transport=BulkTransport) as c:
        got, channel = _publish_and_take(rt.settings.redis_url, c, 6)
        for message in got[:2]:
            message.ack()
        unacked_key = channel.unacked_key
    assert rt.redis.hlen(unacked_key) == 0
    assert sum(rt.redis.llen(k) for k in rt.redis.keys("bulktest*")) == 4


def test_a_bulk_takes_from_the_highest_priority_list_only(rt: Any, conn: Connection) -> None:
    queue = Queue("bulkprio", Exchange("bulkprio", type="direct"), routing_key="bulkprio")
    with Connection(rt.settings.redis_url) as c:
        producer = Producer(c)
        for i in range(5):
            producer.publish(
                {"n": i}, exchange=queue.exchange, routing_key="bulkprio", declare=[queue], priority=9
            )
        producer.publish({"n": "urgent"}, exchange=queue.exchange, routing_key="bulkprio", priority=0)
    got: list[Any] = []
    channel = conn.channel()
    consumer = Consumer(channel, [queue], callbacks=[lambda body, m: got.append(body["n"])], accept=["json"])
    consumer.qos(prefetch_count=10)
    consumer.consume()
    conn.drain_events(timeout=2)
    assert got == ["urgent"]
    conn.drain_events(timeout=2)
    assert got == ["urgent", 0, 1, 2, 3, 4]


def test_workers_consume_through_it(rt: Any, worker: Any) -> None:
    from noti.celery.app import app

    assert app.conf.broker_transport == "noti.celery.transport:BulkTransport"
    consumer = worker.consumer
    assert isinstance(consumer.connection.transport, BulkTransport)


def test_closing_after_everything_was_acked_flushes_the_acks(rt: Any) -> None:
    with Connection(rt.settings.redis_url, transport=BulkTransport) as c:
        got, channel = _publish_and_take(rt.settings.redis_url, c, 5)
        for message in got:
            message.ack()
        unacked_key = channel.unacked_key
        assert rt.redis.hlen(unacked_key) == 5  # buffered
    assert rt.redis.hlen(unacked_key) == 0


def test_an_item_that_is_not_a_kombu_message_is_dropped_and_the_rest_delivered(
    rt: Any, conn: Connection
) -> None:
    _publish(rt.settings.redis_url, 3)
    [key] = [k for k in rt.redis.keys("bulktest*")]
    rt.redis.lpush(key, "not json at all")  # behind the first
    _publish(rt.settings.redis_url, 2)
    got: list[Any] = []
    _, channel = _consume(conn, 10, lambda body, message: got.append(body["n"]))
    conn.drain_events(timeout=2)
    assert got == [0, 1, 2, 0, 1]
    assert rt.redis.hlen(channel.unacked_key) == 5 and rt.redis.llen(key) == 0


def test_a_global_key_prefix_is_refused(rt: Any) -> None:
    with Connection(
        rt.settings.redis_url, transport=BulkTransport, transport_options={"global_keyprefix": "x:"}
    ) as c:
        with pytest.raises(ValueError, match="global_keyprefix"):
            c.channel()


# --- claiming as it fetches (bulk_fetch.lua with DeliveryClaims) ------------------------------


class _Unacked:
    """What ``_bulk_fetch`` reads of a QoS: kombu's unacked keys."""

    unacked_index_key = "unacked_index"
    unacked_key = "unacked"


def _claims(rt: Any) -> DeliveryClaims:
    from noti.celery.tasks.batching import delivery_claims
    from noti.sending.sender import Sender

    claims = delivery_claims(rt, "noti.deliver", Sender(rt, owner="test"))
    assert claims is not None
    return claims


def _raw(rt: Any) -> redis.Redis:
    """A client that does not decode, as kombu's."""
    return redis.Redis.from_url(rt.settings.redis_url)


def _envelope(record_id: str, **changes: Any) -> tuple[str, dict[str, Any]]:
    """The queue list and the decoded envelope of ``record_id``'s delivery message."""
    from noti.api import notifier

    key, text = notifier().publisher.message(record_id, Channel.SMS, 1)
    envelope = json.loads(text)
    for path, value in changes.items():
        where = envelope
        *parents, leaf = path.split("__")
        for name in parents:
            where = where[name]
        where[leaf] = value
    return key, envelope


def _fetch(rt: Any, items: list[Any], owner: str = "test:1") -> list[list[Any]]:
    """The claims of one fetch of ``items`` (the first as BRPOP's, the rest queued)."""
    key = _envelope("x")[0]
    client = _raw(rt)
    client.delete(key)
    for item in items[1:]:
        client.lpush(key, item)
    popped, claims = _bulk_fetch(client, key, _Unacked(), len(items) - 1, items[0], _claims(rt), owner)  # type: ignore[arg-type]
    assert len(popped) == len(items) - 1
    return [[bytes_to_str(v) for v in row] for row in claims]


def test_the_fetch_claims_the_records_of_plain_delivery_messages(rt: Any) -> None:
    from noti.api import notifier

    api = notifier()
    records = [api.store_one(api.build("sms", "+8613912345678", text=f"n{i}")) for i in range(3)]
    items = [json.dumps(_envelope(r.id)[1]) for r in records]
    before = int(time.time() * 1000)  # the script reads the clock in whole ms
    claims = _fetch(rt, items, owner="me:abc")
    # each record is claimed for the owner, as claim.lua would, and its hash comes back
    for record, row in zip(records, claims, strict=True):
        claim = claim_from_row(row)
        assert claim.state is ClaimState.CLAIMED and claim.record is not None
        assert claim.record.id == record.id and claim.claims == 1
        fields = rt.redis.hmget(rt.keys.record(record.id), "_owner", "noti_timeout_at", "_claims")
        assert fields[0] == "me:abc" and fields[2] == "1"
        assert int(fields[1]) >= before + rt.settings.lease_timeout_s * 1000
    # and noted as unacked, as without claims
    assert rt.redis.hlen("unacked") == 3 and rt.redis.zcard("unacked_index") == 3
    # a second fetch of the same messages finds them leased
    again = _fetch(rt, items, owner="other:def")
    assert [claim_from_row(row).state for row in again] == [ClaimState.LEASED] * 3
    assert rt.redis.hget(rt.keys.record(records[0].id), "_owner") == "me:abc"


def test_the_fetch_tells_what_it_found_as_claim_lua_does(rt: Any) -> None:
    from noti.api import notifier

    api = notifier()
    done = api.store_one(api.build("sms", "+8613912345678", text="done"))
    rt.redis.hset(rt.keys.record(done.id), "noti_st", "10")
    opted = api.store_one(api.build("sms", "+8613900000000", text="opted out"))
    rt.store.suppress("sms", "+8613900000000")
    items = [json.dumps(_envelope(i)[1]) for i in (done.id, opted.id, "0000000000000nosuchrecord")]
    found = [claim_from_row(row) for row in _fetch(rt, items)]
    assert found[0].state is ClaimState.FINAL and found[0].status is Status.DONE
    assert found[1].state is ClaimState.CLAIMED and found[1].suppressed
    assert found[2].state is ClaimState.MISSING


@pytest.mark.parametrize(
    "changes",
    [
        {"headers__eta": "2030-01-01T00:00:00+00:00"},
        {"headers__expires": "2030-01-01T00:00:00+00:00"},
        {"headers__task": "noti.other"},
        {"headers": "not a table"},
        {"properties__body_encoding": "utf-8"},
        {"content-type": "application/x-yaml"},
        {"body": base64.b64encode(b'[["a", "b"], {}, {}]').decode()},
        {"body": base64.b64encode(b"[[], {}, {}]").decode()},
        {"body": base64.b64encode(b"[[7], {}, {}]").decode()},
        {"body": base64.b64encode(b"not json").decode()},
        {"body": 12},
    ],
    ids=lambda changes: next(iter(changes)),
)
def test_a_message_that_is_not_a_plain_delivery_is_taken_but_not_claimed(
    rt: Any, changes: dict[str, Any]
) -> None:
    from noti.api import notifier

    api = notifier()
    record = api.store_one(api.build("sms", "+8613912345678", text="later"))
    _, envelope = _envelope(record.id, **changes)
    plain = api.store_one(api.build("sms", "+8613912345678", text="plain"))
    claims = _fetch(rt, [json.dumps(envelope), "not a kombu message", json.dumps(_envelope(plain.id)[1])])
    # the odd one and the garbage are not claimed; the plain message behind them is
    assert claims[0] == [-1] and claims[1] == [-1]
    assert claim_from_row(claims[2]).state is ClaimState.CLAIMED
    assert rt.redis.hget(rt.keys.record(record.id), "_owner") is None
    # the odd one is noted unacked as any message (Celery's own path takes it); the garbage not
    assert rt.redis.hlen("unacked") == 2


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(record_id=st.from_regex(r"[0-9A-Za-z_-]{1,64}", fullmatch=True))
def test_the_script_reads_the_record_id_as_python_does(rt: Any, record_id: str) -> None:
    # base64 bodies of every length decode in Lua to the id Python's envelope carries
    rt.redis.delete(rt.keys.record(record_id))
    rt.redis.hset(rt.keys.record(record_id), mapping={"noti_st": "1", "noti_type": "sms", "noti_target": "x"})
    [row] = _fetch(rt, [json.dumps(_envelope(record_id)[1])])
    assert row[0] == 1 and rt.redis.hget(rt.keys.record(record_id), "_owner") == "test:1"


def test_claims_nobody_took_are_dropped_after_the_delivery(rt: Any, caplog: pytest.LogCaptureFixture) -> None:
    from noti.api import notifier

    api = notifier()
    records = [api.store_one(api.build("sms", "+8613912345678", text=f"n{i}")) for i in range(3)]
    from noti.celery.app import app

    got: list[Any] = []
    conn = Connection(
        rt.settings.redis_url, transport=BulkTransport, transport_options=app.conf.broker_transport_options
    )
    channel = conn.channel()
    channel.delivery_claims = _claims(rt)
    consumer = Consumer(channel, [Queue("noti.sms")], callbacks=[lambda b, m: got.append(m)], accept=["json"])
    consumer.qos(prefetch_count=10)
    consumer.consume()
    conn.drain_events(timeout=2)
    # a consumer that does not take the claims: they are dropped, not kept
    assert len(got) == 3 and channel.fetched_claims == {}
    assert "3 claim(s) not taken by a consumer" in caplog.text
    # their records keep the owner of the claim (given back, see the next test)
    assert all(rt.redis.hget(rt.keys.record(r.id), "_owner") for r in records)
    conn.close()


def test_claims_nobody_took_are_given_back_so_the_redelivery_sends_at_once(rt: Any) -> None:
    from noti.api import notifier
    from noti.celery.app import app
    from noti.core.record import now_ms

    # given three stored records whose messages a consumer receives without taking the claims
    api = notifier()
    records = [api.store_one(api.build("sms", "+8613912345678", text=f"n{i}")) for i in range(3)]
    conn = Connection(
        rt.settings.redis_url, transport=BulkTransport, transport_options=app.conf.broker_transport_options
    )
    channel = conn.channel()
    channel.delivery_claims = _claims(rt)
    got: list[Any] = []
    consumer = Consumer(channel, [Queue("noti.sms")], callbacks=[lambda b, m: got.append(m)], accept=["json"])
    consumer.qos(prefetch_count=10)
    consumer.consume()
    conn.drain_events(timeout=2)
    conn.close()
    assert len(got) == 3
    # then their leases ended and the claims are not counted (towards the poison limit)
    for record in records:
        lease, inflight = rt.redis.hmget(rt.keys.record(record.id), "noti_timeout_at", "_inflight")
        assert int(lease) <= now_ms() and int(inflight) == 0
    # and another sender claims them now, not after the lease
    claims = rt.store.claim_many([r.id for r in records], owner="other", lease_ms=30_000)
    assert [c.state for c in claims] == [ClaimState.CLAIMED] * 3


def test_commands_share_one_client_per_connection_pool(rt: Any, conn: Connection) -> None:
    channel = conn.channel()
    with channel.conn_or_acquire() as first, channel.conn_or_acquire() as second:
        assert first is second and first.connection_pool is channel.pool
    given = redis.Redis.from_url(rt.settings.redis_url)
    with channel.conn_or_acquire(given) as client:
        assert client is given
    channel._after_fork()  # kombu drops its pools: a new client on the new pool
    with channel.conn_or_acquire() as third:
        assert third is not first and third.connection_pool is channel.pool
