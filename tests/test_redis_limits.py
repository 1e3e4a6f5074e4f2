"""A Redis that refuses writes (full at ``maxmemory`` with ``noeviction``, or unable to write
its snapshot to disk: ``MISCONF``) makes noti's calls fail with ``e.noti.store.unavailable``
and a clear line, storing nothing, and they work again once Redis takes writes again; a
worker waits through it (issue 19 point 7's full disk / ``maxmemory`` row)."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

import noti
from noti.core.record import Status
from noti.errors import StoreUnavailable
from noti.sending.runtime import get_runtime
from tests import servers
from tests.conftest import sandbox_outbox, wait_until

pytestmark = pytest.mark.slow  # a redis-server of its own, each

PHONE = "+8613912345678"


@pytest.fixture
def small_redis(configure: Any) -> Iterator[tuple[str, redis.Redis]]:
    """A private Redis of 2 MB that evicts nothing, and noti's runtime pointed at it."""
    limits = ("--maxmemory", "2mb", "--maxmemory-policy", "noeviction", "--enable-protected-configs", "yes")
    with servers.redis_server(*limits) as url:
        configure(redis_url=f"{url}/0")
        yield url, redis.Redis.from_url(f"{url}/0")


def _fill(client: redis.Redis) -> None:
    """Make Redis full: its memory limit below what it uses, so every write is refused (a
    write that frees memory, an ack or a pop, cannot make room for the next one)."""
    client.config_set("maxmemory", "1")
    try:
        client.set("probe", "x")
    except redis.exceptions.OutOfMemoryError:
        return
    raise AssertionError("Redis took a write past its limit")


def _make_room(client: redis.Redis) -> None:
    client.config_set("maxmemory", "2mb")


def test_a_full_redis_is_store_unavailable_with_its_reason_and_nothing_is_stored(
    small_redis: tuple[str, redis.Redis],
) -> None:
    _, client = small_redis
    _fill(client)
    keys_before = client.dbsize()
    with pytest.raises(StoreUnavailable) as info:
        noti.notify_sms(PHONE, "hello")
    assert info.value.code == "e.noti.store.unavailable"
    assert "Redis refuses writes: OOM" in info.value.message
    assert client.dbsize() == keys_before
    # and once there is room again, the same call stores and queues the notification
    _make_room(client)
    record_id = noti.notify_sms(PHONE, "hello")
    assert noti.get(record_id).target == PHONE


def test_a_redis_that_cannot_persist_is_store_unavailable_with_its_reason(
    small_redis: tuple[str, redis.Redis],
) -> None:
    _, client = small_redis
    doomed = tempfile.mkdtemp(prefix="noti-misconf-")
    client.config_set("dir", doomed)
    client.config_set("save", "3600 1")
    shutil.rmtree(doomed)  # the snapshot cannot be written: what a full disk does too
    client.bgsave()
    wait_until(lambda: client.info("persistence")["rdb_last_bgsave_status"] == "err", timeout=10)
    with pytest.raises(StoreUnavailable) as info:
        noti.notify_sms(PHONE, "hello")
    assert "Redis refuses writes: MISCONF" in info.value.message
    # once it can write again (a disk with room), the same call works
    os.makedirs(doomed)
    client.config_set("dir", doomed)
    client.bgsave()
    wait_until(lambda: client.info("persistence")["rdb_last_bgsave_status"] == "ok", timeout=10)
    assert noti.get(noti.notify_sms(PHONE, "hello")).target == PHONE
    client.config_set("save", "")  # nothing to save when the fixture stops it
    shutil.rmtree(doomed)


def test_a_worker_waits_while_redis_is_full_and_delivers_everything_once_it_has_room(
    small_redis: tuple[str, redis.Redis], spawn_worker: Any, configure: Any
) -> None:
    url, client = small_redis
    worker = spawn_worker("", env={"NOTI_REDIS_URL": f"{url}/0"}, name="full")
    # given notifications due in 4 s, then a Redis that fills up before they are due
    ids = [noti.notify_sms(PHONE, f"n{i}", delay=4) for i in range(5)]
    _fill(client)
    time.sleep(7)  # due meanwhile: the pump (or, had it moved them already, the worker) meets OOM
    assert worker.alive(), worker.output()[-3000:]
    assert "Redis refuses writes: OOM" in worker.output()  # the pump's move, or the outcome's record
    # when there is room again, then every notification is sent, each once
    _make_room(client)
    wait_until(lambda: all(noti.get(i).status is Status.DONE for i in ids), timeout=60)
    texts = sorted(entry["fields"]["text"] for entry in sandbox_outbox(get_runtime()))
    assert texts == sorted(f"n{i}" for i in range(5))
    assert worker.alive(), worker.output()[-3000:]


def test_a_message_the_bulk_transport_took_while_redis_was_full_is_noted_once_there_is_room(
    small_redis: tuple[str, redis.Redis],
) -> None:
    from kombu import Connection, Consumer, Exchange, Producer, Queue

    from noti.celery.transport import BulkTransport

    url, client = small_redis
    queue = Queue("fulltest", Exchange("fulltest"), routing_key="fulltest")
    got: list[Any] = []
    with Connection(f"{url}/0", transport=BulkTransport) as conn:
        channel = conn.channel()
        on_message = lambda body, message: got.append((body, message))  # noqa: E731
        consumer = Consumer(channel, [queue], callbacks=[on_message], accept=["json"])
        consumer.qos(prefetch_count=10)
        consumer.consume()
        with Connection(f"{url}/0") as producing:
            Producer(producing).publish({"n": 1}, exchange=queue.exchange, routing_key="fulltest")
        # given a Redis full by the time the consumer's BRPOP takes the message: the script
        # that notes it as unacked is refused
        _fill(client)
        freed = threading.Timer(1.5, lambda: _make_room(client))
        freed.start()
        # when the consumer drains (it waits while Redis refuses the note), then it gets the
        # message once there is room, noted as unacked as usual (never held only in memory)
        conn.drain_events(timeout=15)
        freed.join()
        assert [body for body, _ in got] == [{"n": 1}]
        assert client.hlen("unacked") == 1
