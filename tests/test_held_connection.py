"""notify()'s one-record path: a connection kept between calls (HeldConnection) and
RecordStore.create_one, which must write exactly what create_many writes for the record."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import pytest
import redis

import noti
from noti.api import notifier
from noti.errors import StoreUnavailable
from noti.redis.conn import ReplicaWait
from noti.redis.pipelines import HeldConnection, pack_command
from tests.conftest import wait_until

pytestmark = pytest.mark.integration

# Appends its argument to a list and returns the list's new length.
APPEND = "return redis.call('RPUSH', KEYS[1], ARGV[1])"


def _client_id(held: HeldConnection) -> int:
    return int(held.call(pack_command(("CLIENT", "ID"))))


def test_the_connection_is_kept_between_calls_and_given_back_when_idle(rt: Any) -> None:
    held = HeldConnection(rt.redis)
    first = _client_id(held)
    assert _client_id(held) == first  # the same connection, not one from the pool per call
    time.sleep(HeldConnection.IDLE_S * 2)
    # idle: back to the pool, and the next call takes one through the pool's checks (the pool
    # hands the same connection out again: it is alive)
    assert _client_id(held) == first
    held.close()
    assert rt.redis.connection_pool._in_use_connections == set()


def test_an_error_reply_keeps_the_connection(rt: Any) -> None:
    held = HeldConnection(rt.redis)
    first = _client_id(held)
    rt.redis.set("text", "x")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        held.call(pack_command(("LPUSH", "text", "y")))
    assert _client_id(held) == first  # an error reply: the connection is in step
    held.close()


def test_a_connection_the_server_closed_meanwhile_is_replaced_before_the_call(rt: Any) -> None:
    # a Sentinel reconfiguring its instance, a restart or CLIENT KILL closes the socket
    # between two calls: the call must not fail for it (nothing of it ran)
    held = HeldConnection(rt.redis)
    first = _client_id(held)
    rt.redis.client_kill_filter(_id=first)
    wait_until(lambda: first not in [c["id"] for c in rt.redis.client_list()], timeout=5)
    assert held.call(pack_command(("RPUSH", "log", "after a kill"))) == 1
    assert _client_id(held) != first
    held.close()


def test_a_connection_lost_in_a_call_is_raised_never_resent_and_replaced(rt: Any, redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url, socket_timeout=0.2)
    held = HeldConnection(client)
    first = _client_id(held)
    with pytest.raises(redis.TimeoutError):
        held.call(pack_command(("DEBUG", "SLEEP", "0.5")))  # no answer in time: in doubt
    time.sleep(0.5)  # the server sleeps on
    second = _client_id(held)
    assert second != first  # the connection in doubt was dropped, never read again
    held.close()
    client.close()


def test_threads_share_it_without_mixing_replies(rt: Any) -> None:
    held = HeldConnection(rt.redis)
    script = rt.redis.register_script(APPEND)
    rt.redis.script_load(APPEND)
    errors: list[BaseException] = []

    def calls(name: str) -> None:
        try:
            for i in range(200):
                reply = held.call(pack_command(("EVALSHA", script.sha, 1, f"log:{name}", str(i))))
                assert reply == i + 1  # this thread's own reply, never another's
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=calls, args=(str(n),)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    for n in range(8):
        assert rt.redis.lrange(f"log:{n}", 0, -1) == [str(i) for i in range(200)]
    held.close()


def test_a_forked_child_never_uses_its_parents_socket_nor_its_lock(rt: Any) -> None:
    held = HeldConnection(rt.redis)
    parent = _client_id(held)
    read, write = os.pipe()
    with held._lock:  # another thread of the parent is in a call when it forks
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            try:
                child_id = _client_id(held)
                kept = held._connection is not None  # it holds a connection of its own
                os.write(write, f"{child_id} {kept}".encode())
            finally:
                os._exit(0)
    os.close(write)
    child, kept = os.read(read, 64).decode().split()
    os.waitpid(pid, 0)
    os.close(read)
    assert int(child) != parent and kept == "True"
    assert _client_id(held) == parent  # the parent's connection is still its own and in step
    held.close()


def _snapshot(client: redis.Redis) -> dict[str, Any]:
    """Every key of the database with its type and content."""
    out: dict[str, Any] = {}
    for key in sorted(client.keys("*")):
        kind = client.type(key)
        if kind == "hash":
            out[key] = ("hash", client.hgetall(key))
        elif kind == "zset":
            out[key] = ("zset", client.zrange(key, 0, -1, withscores=True))
        elif kind == "list":
            out[key] = ("list", client.lrange(key, 0, -1))
        else:
            out[key] = (kind, client.dump(key))
    return out


@pytest.mark.parametrize(
    ("channel", "target", "fields"),
    [
        ("sms", "+8613912345678", {"text": "hello", "lv": 3}),
        ("webhook", "https://example.com/hook", {"content": {"a": 1}, "provider": "sandbox"}),
        ("email", "a@example.com", {"subject": "s", "text": "t", "delay": 60}),
        ("sms", "+8613912345678", {"text": "cb", "status_callback": "https://example.com/status"}),
    ],
)
def test_create_one_writes_what_create_many_writes(
    rt: Any, channel: str, target: str, fields: dict[str, Any]
) -> None:
    acting = notifier()
    store = rt.store
    record = acting.build(channel, target, **fields)
    message = (
        None if record.lease_until_ms else acting.publisher.message(record.id, record.channel, record.level)
    )
    # the pipelined path bulk sends take (create_many sends a lone keyless record to create_one)
    with store.create_pipeline() as creating:
        creating.send([record], messages={record.id: message} if message else None)
        assert creating.ids() == [record.id]
    many = _snapshot(rt.redis)
    # the address index's secret (noti.core.search) is made by the first write and kept by
    # the process: the flush takes it away from the database, not from the store
    del many[rt.keys.search_secret]
    rt.redis.flushdb()
    store.create_one(record, message)
    assert _snapshot(rt.redis) == many
    assert len(many) >= 5  # the record, its indexes and counters (and its message, if due now)


def test_notify_stores_through_create_one_and_survives_a_script_flush(
    rt: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = rt.store
    calls: list[str] = []
    original = store.create_one
    monkeypatch.setattr(
        store, "create_one", lambda record, message=None: (calls.append(record.id), original(record, message))
    )
    first = noti.notify_sms("+8613912345678", "one")
    rt.redis.script_flush()  # the server lost the script: the call is made again after loading it
    second = noti.notify_sms("+8613912345678", "two")
    assert calls == [first, second]
    assert noti.get(first).fields["text"] == "one"
    assert noti.get(second).fields["text"] == "two"
    queues = [k for k in rt.redis.keys("noti.sms*") if rt.redis.type(k) == "list"]
    assert sum(rt.redis.llen(k) for k in queues) == 2  # a delivery message each
    # with an idempotency key the record goes the way that checks the key
    keyed = notifier().add("sms", "+8613912345678", text="three", idempotency_key="k1").id
    assert keyed not in calls
    assert notifier().add("sms", "+8613912345678", text="three", idempotency_key="k1").id == keyed


def test_a_store_that_waits_for_replicas_never_creates_one_by_one(rt: Any) -> None:
    from noti.core.store import RecordStore

    waiting = RecordStore(rt.redis, rt.keys, replica_wait=ReplicaWait(replicas=1, timeout_ms=10))
    assert not waiting.creates_one_by_one
    record = notifier().build("sms", "+8613912345678", text="x")
    with pytest.raises(RuntimeError):
        waiting.create_one(record)
    assert rt.redis.exists(rt.keys.record(record.id)) == 0


def test_redis_down_is_store_unavailable_and_nothing_written(rt: Any) -> None:
    from noti.core.store import RecordStore

    down = RecordStore(redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=1), rt.keys)
    record = notifier().build("sms", "+8613912345678", text="x")
    with pytest.raises(StoreUnavailable, match="cannot reach Redis"):
        down.create_one(record)
    assert rt.redis.exists(rt.keys.record(record.id)) == 0
