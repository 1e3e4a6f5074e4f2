"""The bulk-fetch broker transport (noti/transport.py) against a real Redis and real kombu."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import kombu
import pytest
from kombu import Connection, Consumer, Exchange, Producer, Queue  # type: ignore[attr-defined]
from kombu.transport import redis as kombu_redis

from noti.transport import ACK_FLUSH_AT, BulkChannel, BulkQoS, BulkTransport

QUEUE = Queue("bulktest", Exchange("bulktest", type="direct"), routing_key="bulktest")


def test_the_kombu_internals_it_overrides_are_the_pinned_ones() -> None:
    # noti.transport mirrors kombu 5.7.0's Channel._brpop_read: a kombu upgrade must be
    # checked against it (pyproject.toml pins kombu)
    assert kombu.__version__ == "5.7.0"
    for name in ("_brpop_read", "_brpop_start", "_flush_brpop_reauth", "conn_or_acquire"):
        assert hasattr(kombu_redis.Channel, name), name
    for name in ("append", "ack", "restore_unacked", "pipe_or_acquire", "can_consume_max_estimate"):
        assert hasattr(kombu_redis.QoS, name), name
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
    _publish(rt.settings.redis_url, 8)
    got: list[Any] = []
    _, channel = _consume(conn, 8, lambda body, message: got.append(message))
    conn.drain_events(timeout=2)
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


def test_closing_restores_what_was_not_acked_and_flushes_the_acks(rt: Any) -> None:
    _publish(rt.settings.redis_url, 6)
    got: list[Any] = []
    with Connection(rt.settings.redis_url, transport=BulkTransport) as c:
        _, channel = _consume(c, 6, lambda body, message: got.append(message))
        c.drain_events(timeout=2)
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
    from noti.app import app

    assert app.conf.broker_transport == "noti.transport:BulkTransport"
    consumer = worker.consumer
    assert isinstance(consumer.connection.transport, BulkTransport)


def test_closing_after_everything_was_acked_flushes_the_acks(rt: Any) -> None:
    _publish(rt.settings.redis_url, 5)
    got: list[Any] = []
    with Connection(rt.settings.redis_url, transport=BulkTransport) as c:
        _, channel = _consume(c, 5, lambda body, message: got.append(message))
        c.drain_events(timeout=2)
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
