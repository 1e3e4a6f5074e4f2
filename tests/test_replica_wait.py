"""Writes acknowledged by a replica (``NOTI_REDIS_WAIT_REPLICAS``) cost one round trip: the
``WAIT`` is written behind the last batch (:meth:`CommandPipeline.send_wait`) and its reply
read with the batch's, on a real primary with a real replica. A wait that no longer covers
every write (calls sent again after NOSCRIPT) is made again, and a replica that does not
answer still makes the write unconfirmed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

import noti
from noti.errors import StoreUnavailable
from noti.redis.pipelines import CommandPipeline, ScriptPipeline
from tests.conftest import wait_until
from tests.servers import RedisProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PHONE = "+8613912345678"


class Pair:
    """A primary and its replica, each a redis-server of the test's own."""

    def __init__(self, workdir: Path) -> None:
        (workdir / "p").mkdir()
        (workdir / "r").mkdir()
        # the replica's full sync starts at once, not after Redis's default 5 s wait for more replicas
        self.primary_server = RedisProcess(str(workdir / "p"), "--repl-diskless-sync-delay", "0")
        self.replica_server = RedisProcess(str(workdir / "r"))
        self.url = f"redis://127.0.0.1:{self.primary_server.port}/0"
        self.primary = redis.Redis.from_url(self.url, decode_responses=True)
        self.replica = redis.Redis(port=self.replica_server.port, decode_responses=True)

    def start(self) -> None:
        self.primary_server.start(self.primary)
        self.replica_server.start(self.replica)
        self.replica.execute_command("REPLICAOF", "127.0.0.1", self.primary_server.port)
        wait_until(lambda: self.primary.info("replication")["connected_slaves"] == 1, timeout=20)
        wait_until(lambda: self.replica.info("replication")["master_link_status"] == "up", timeout=20)

    def stop(self) -> None:
        self.replica_server.kill()
        self.primary_server.kill()


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Pair]:
    started = Pair(tmp_path)
    try:
        started.start()
        yield started
    finally:
        started.stop()


class Trace:
    """Each write and read of the connections of ``client``'s pool, in order."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, client: redis.Redis) -> None:
        self.steps: list[str] = []
        connection_class = client.connection_pool.connection_class
        send, read = connection_class.send_packed_command, connection_class.read_response

        def traced_send(connection: Any, command: Any, *args: Any, **kwargs: Any) -> Any:
            data = b"".join(command) if isinstance(command, list) else command
            self.steps.append("write " + " ".join(_names(data)))
            return send(connection, command, *args, **kwargs)

        def traced_read(connection: Any, *args: Any, **kwargs: Any) -> Any:
            self.steps.append("read")
            return read(connection, *args, **kwargs)

        monkeypatch.setattr(connection_class, "send_packed_command", traced_send)
        monkeypatch.setattr(connection_class, "read_response", traced_read)

    def round_trips(self) -> int:
        """How many times a reply was waited for after a write."""
        trips, writing = 0, False
        for step in self.steps:
            if step.startswith("write"):
                writing = True
            elif writing:
                trips, writing = trips + 1, False
        return trips


def _names(packed: bytes) -> list[str]:
    """The command names of RESP-packed commands (the first bulk string of each array)."""
    names, rest = [], packed
    while rest.startswith(b"*"):
        count_line, rest = rest.split(b"\r\n", 1)
        items = []
        for _ in range(int(count_line[1:])):
            length_line, rest = rest.split(b"\r\n", 1)
            length = int(length_line[1:])
            items.append(rest[:length])
            rest = rest[length + 2 :]
        names.append(items[0].decode().upper())
    return names


def test_a_wait_written_ahead_is_answered_in_the_round_trip_of_the_last_batch(
    pair: Pair, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = Trace(monkeypatch, pair.primary)
    with CommandPipeline(pair.primary) as pipeline:
        pipeline.send([("SET", "a", "1"), ("SET", "b", "2")])
        pipeline.send_wait(1, 5000)
        assert pipeline.results() == ["OK", "OK"]
        assert pipeline.wait_for_replicas(1, 5000) == 1
    assert trace.round_trips() == 1
    assert (pair.replica.get("a"), pair.replica.get("b")) == ("1", "2")


def test_a_wait_for_other_replicas_than_written_ahead_is_made_again(
    pair: Pair, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = Trace(monkeypatch, pair.primary)
    with CommandPipeline(pair.primary) as pipeline:
        pipeline.send([("SET", "a", "1")])
        pipeline.send_wait(1, 5000)
        assert pipeline.results() == ["OK"]
        assert pipeline.wait_for_replicas(1, 4000) == 1  # another timeout: another WAIT
    assert trace.round_trips() == 2
    assert [s for s in trace.steps if s.startswith("write")] == ["write SET", "write WAIT", "write WAIT"]


def test_calls_sent_again_after_noscript_get_a_wait_of_their_own(
    pair: Pair, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given a script the server lost, called with a wait written behind the call
    script = pair.primary.register_script("return redis.call('RPUSH', KEYS[1], ARGV[1])")
    pair.primary.script_flush()
    trace = Trace(monkeypatch, pair.primary)
    with ScriptPipeline(pair.primary, script) as pipeline:
        pipeline.send([(["log"], ["a"])])
        pipeline.send_wait(1, 5000)
        # when the call is read, it met NOSCRIPT and was run again after the wait
        assert pipeline.results() == [1]
        # then the wait written ahead does not cover it: another is made, after it
        assert pipeline.wait_for_replicas(1, 5000) == 1
    writes = [s for s in trace.steps if s.startswith("write")]
    assert writes[-1] == "write WAIT" and "write EVALSHA" in writes[-3:-1]
    assert pair.replica.lrange("log", 0, -1) == ["a"]


def test_notify_acknowledged_by_a_replica_takes_one_round_trip(
    pair: Pair, configure: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = configure(redis_url=pair.url, redis_wait_replicas=1)
    noti.notify_sms(PHONE, "warm")  # the scripts loaded, the connection made
    trace = Trace(monkeypatch, rt.redis)
    record_id = noti.notify_sms(PHONE, "4321")
    assert trace.round_trips() == 1, trace.steps
    assert [s for s in trace.steps if s.startswith("write")] == ["write EVALSHA", "write WAIT"]
    # and the replica has the record when notify() returns
    key = rt.keys.record(record_id)
    assert pair.replica.hgetall(key) == pair.primary.hgetall(key) != {}
    # notify_many too: its last round trip carries the wait
    trace.steps.clear()
    stored = noti.notify_many([{"type": "sms", "to": PHONE, "text": f"m{i}"} for i in range(3)])
    assert stored.stored == 3 and trace.steps[-2:] == ["read", "read"]
    assert "write WAIT" in trace.steps and trace.round_trips() == 1, trace.steps
    assert all(pair.replica.exists(rt.keys.record(i)) for i in stored.ids)


def test_a_write_no_replica_acknowledged_is_unconfirmed(pair: Pair, configure: Any) -> None:
    # the warm-up with a wait a busy machine does not miss (200 ms is for the write after the kill)
    configure(redis_url=pair.url, redis_wait_replicas=1, redis_wait_timeout_ms=5000)
    noti.notify_sms(PHONE, "warm")
    configure(redis_url=pair.url, redis_wait_replicas=1, redis_wait_timeout_ms=200)
    pair.replica_server.kill()
    wait_until(lambda: pair.primary.info("replication")["connected_slaves"] == 0, timeout=20)
    with pytest.raises(StoreUnavailable) as unconfirmed:
        noti.notify_sms(PHONE, "4321")
    assert unconfirmed.value.code == "e.noti.store.unconfirmed"
    assert "acknowledged by 0 of 1 replica(s)" in unconfirmed.value.message


def test_a_delayed_notification_under_an_identifier_waits_in_the_scripts_round_trip(
    pair: Pair, configure: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = configure(redis_url=pair.url, redis_wait_replicas=1)
    noti.notify_sms(PHONE, "warm", delay=60, identifier="warm")
    trace = Trace(monkeypatch, rt.redis)
    first = noti.notify_sms(PHONE, "one", delay=60, identifier="cart-42")
    # the identifier is read, then the script and the wait go together (then the record is read)
    at = trace.steps.index("write EVALSHA")
    assert trace.steps[at : at + 4] == ["write EVALSHA", "write WAIT", "read", "read"], trace.steps
    assert pair.replica.exists(rt.keys.record(first))
    # and a replacement under the same identifier keeps its id, on the replica too
    assert noti.notify_sms(PHONE, "two", delay=60, identifier="cart-42") == first
    key = rt.keys.record(first)
    assert pair.replica.hgetall(key) == pair.primary.hgetall(key)
