"""Round trips through a real Redis: Python producer → Python consumers in threads (the runner),
the delayed queue with identifier replacement, retries and dead letters, a poison corpus,
deleted streams and groups, a Redis restart, the NotificationConsumer, and the bootstep in a
real ``celery worker``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

import noti
from noti.bridge.webman import Delayed, DelayedMover, Producer, QueueKeys, QueueNames
from noti.bridge.webman.connection import connect
from noti.bridge.webman.mover import MAX_BATCH
from noti.bridge.webman.notifications import NotificationConsumer
from noti.bridge.webman.runner import BridgeRunner, ConsumerSpec
from noti.bridge.webman.settings import WebmanSettings
from noti.bridge.webman.worker import QueueWorker
from noti.core.deadletter import DeadLetters
from noti.errors import BridgeError, MalformedMessage, StoreUnavailable
from tests.conftest import ADMIN, MEMBER, sandbox_outbox, wait_until
from tests.servers import free_port, pings, sms_and_webman_config
from tests.webman_fixtures.consumers import Collect

PHONE = "+8613912345678"
DB = 4


@pytest.fixture
def bridge_url(redis_server: str) -> Iterator[str]:
    url = f"{redis_server}/{DB}"
    client = redis.Redis.from_url(url)
    client.flushdb()
    yield url
    client.flushdb()


@pytest.fixture
def run_bridge(rt: Any) -> Iterator[Callable[..., BridgeRunner]]:
    """Start a runner for specs on a URL; stopped at the end of the test."""
    started: list[BridgeRunner] = []

    def _run(url: str, *specs: ConsumerSpec, clock: Callable[[], float] = time.time) -> BridgeRunner:
        runner = BridgeRunner(
            specs,
            webman=WebmanSettings(redis_url=url),
            noti_redis_url=rt.settings.redis_url,
            dead_letters=rt.dead_letters,
            clock=clock,
        )
        runner.start()
        started.append(runner)
        return runner

    yield _run
    for runner in started:
        runner.stop()


def producer(url: str, php_class: str = Collect.php_class) -> Producer:
    return Producer(connect(url), QueueKeys(QueueNames.from_class(php_class), "webman_redis_queue_"))


def test_python_producer_to_python_consumers(bridge_url: str, run_bridge: Any, rt: Any) -> None:
    # given: three consumer threads
    Collect.reset()
    runner = run_bridge(bridge_url, ConsumerSpec("collect", Collect, processes=3))
    # when: a pipelined batch and single pushes
    send = producer(bridge_url)
    payloads: list[Any] = [{"n": i, "text": "é/😀"} for i in range(60)] + ["plain", 7, [1, [2]]]
    send.push_many(payloads[:60])
    for payload in payloads[60:]:
        send.push(send.message(payload))
    # then: each consumed once, acked and deleted
    wait_until(lambda: len(Collect.data()) >= len(payloads))
    assert sorted(map(json.dumps, Collect.data())) == sorted(map(json.dumps, payloads))
    client = send.redis
    assert client.xlen(send.keys.stream) == 0
    assert client.xpending(send.keys.stream, send.names.group)["pending"] == 0
    names = [c["name"] for c in client.xinfo_consumers(send.keys.stream, send.names.group)]
    assert names and all("-noti-" in name for name in names)
    assert len(runner.workers) == 3


def test_delayed_task_replaced_by_identifier_is_consumed_once(bridge_url: str, run_bridge: Any) -> None:
    # given: a task scheduled, then replaced under the same identifier
    Collect.reset()
    send = producer(bridge_url)
    send.schedule({"v": 1}, 60, "order-1001")
    send.schedule({"v": 2}, 120, "order-1001")
    zero = send.schedule("now", 0)
    assert send.redis.zcard(send.keys.delayed_set) == 2
    assert send.has_delayed(zero) and send.due_at(zero) == 0
    # when: consumers run with a clock an hour ahead (the mover's "now")
    run_bridge(bridge_url, ConsumerSpec("collect", Collect), clock=lambda: time.time() + 3600)
    # then: the replacement only, once, and the due-now task
    wait_until(lambda: len(Collect.data()) >= 2)
    assert sorted(map(json.dumps, Collect.data())) == sorted(['{"v": 2}', '"now"'])
    assert send.redis.zcard(send.keys.delayed_set) == 0 and send.redis.hlen(send.keys.delayed_hash) == 0


def test_failures_retry_through_the_delayed_queue_then_dead_letter(
    bridge_url: str, run_bridge: Any, rt: Any
) -> None:
    # given: every delivery fails, two retries allowed
    Collect.reset(fail_first=100)
    spec = ConsumerSpec("collect", Collect, options={"max_attempts": 2, "delayed_interval_s": 0.05})
    run_bridge(bridge_url, spec)
    # when
    send = producer(bridge_url)
    send.push({"job": 1})
    # then: three deliveries (fail counts 0, 1, 2), then a dead letter in noti's store
    wait_until(lambda: len(rt.dead_letters) >= 1)
    assert [fc for _, _, fc in Collect.seen] == [0, 1, 2]
    letter = rt.dead_letters.entries()[0]
    assert letter.source == "webman:app-queue-test-collect" and letter.error_class == "exhausted"
    assert letter.attempts == 2 and "failing delivery 3" in letter.errmsg
    assert json.loads(letter.payload)["failCount"] == 2
    # and the entry leaves the stream (the consumer acknowledges and deletes it just after
    # writing the dead letter, which the wait above may see first on a busy machine)
    wait_until(lambda: send.redis.xlen(send.keys.stream) == 0, timeout=10)


def test_unacked_entries_are_retried_by_the_pending_check(bridge_url: str, run_bridge: Any, rt: Any) -> None:
    # given: a consumer that never acks, a pending check that runs often and finds entries due
    Collect.reset()
    options = {
        "auto_ack": False,
        "pending_timeout_s": 0,
        "pending_check_interval_s": 0.1,
        "delayed_interval_s": 0.05,
        "max_attempts": 2,
    }
    run_bridge(bridge_url, ConsumerSpec("collect", Collect, options=options))
    # when
    producer(bridge_url).push("never acked")
    # then: retried as a failure (failCount 1, 2), then dead-lettered, and nothing left pending
    wait_until(lambda: len(rt.dead_letters) >= 1)
    assert [fc for _, _, fc in Collect.seen] == [0, 1, 2]
    assert rt.dead_letters.entries()[0].error_class == "exhausted"
    keys = producer(bridge_url).keys
    wait_until(lambda: producer(bridge_url).redis.xpending(keys.stream, keys.names.group)["pending"] == 0)


def _queued(url: str, count: int) -> Producer:
    """The Collect queue with its group and ``count`` entries ``{"n": i}``; Collect reset."""
    Collect.reset()
    send = producer(url)
    send.redis.xgroup_create(send.keys.stream, send.names.group, id="0", mkstream=True)
    send.push_many([{"n": i} for i in range(count)])
    return send


def _pending_entry(url: str) -> tuple[Producer, str]:
    """One entry read by a PHP worker that then died: pending, never acked; its id."""
    send = producer(url)
    send.redis.xgroup_create(send.keys.stream, send.names.group, id="0", mkstream=True)
    entry = send.push({"job": 1})
    send.redis.xreadgroup(send.names.group, f"{send.names.group}-1", {send.keys.stream: ">"})
    return send, entry


def _unreachable() -> redis.Redis:
    """A client of a Redis that is down (nothing listens on its port)."""
    return connect(f"redis://127.0.0.1:{free_port()}/0", socket_timeout_s=2)


def _left(send: Producer, rt: Any) -> tuple[int, int, int, int]:
    """(stream length, pending entries, delayed tasks, dead letters)."""
    client, keys = send.redis, send.keys
    pending = client.xpending(keys.stream, keys.names.group)["pending"]
    return client.xlen(keys.stream), pending, client.zcard(keys.delayed_set), len(rt.dead_letters)


def test_a_pending_entry_whose_retry_cannot_be_written_stays_pending(bridge_url: str, rt: Any) -> None:
    # given: an entry left pending by a dead worker, and a consumer whose delayed queue is down
    send, entry = _pending_entry(bridge_url)
    options = {"pending_timeout_s": 0, "max_attempts": 3}
    broken = Collect(client=connect(bridge_url), dead_letters=rt.dead_letters, options=options)
    broken.producer = Producer(_unreachable(), broken.keys)
    # when: its pending check retries the entry, and writing the retry fails (StoreUnavailable)
    assert QueueWorker(broken).check_pending() == 1
    # then: the entry is neither acked nor deleted: it stays pending for the next check
    assert _left(send, rt) == (1, 1, 0, 0)
    # and the next check, with the delayed queue back, retries it
    healthy = Collect(client=connect(bridge_url), dead_letters=rt.dead_letters, options=options)
    assert QueueWorker(healthy).check_pending() == 1
    assert _left(send, rt) == (0, 0, 1, 0)
    assert send.has_delayed(entry)


def test_the_ignore_strategy_acks_only_once_the_dead_letter_is_written(bridge_url: str, rt: Any) -> None:
    # given: an entry left pending, and a consumer (IGNORE) whose dead-letter store is down
    send, entry = _pending_entry(bridge_url)
    options = {"pending_timeout_s": 0, "pending_strategy": "ignore"}
    down = DeadLetters(_unreachable(), rt.keys)
    broken = Collect(client=connect(bridge_url), dead_letters=down, options=options)
    # when: the pending check cannot write the dead letter
    QueueWorker(broken).check_pending()
    # then: the entry was not acked first: it stays pending
    assert _left(send, rt) == (1, 1, 0, 0)
    # and once the dead letter can be written, it is dead-lettered, then acked and deleted
    healthy = Collect(client=connect(bridge_url), dead_letters=rt.dead_letters, options=options)
    QueueWorker(healthy).check_pending()
    assert _left(send, rt) == (0, 0, 0, 1)
    letter = rt.dead_letters.entries()[0]
    assert (letter.record_id, letter.error_class) == (entry, "pending_timeout")


def _message(**changes: Any) -> str:
    message = {
        "type": "app-queue-test-collect",
        "data": "x",
        "timestamp": 1700000000,
        "source": Collect.php_class,
        "failCount": 0,
        "nextRetry": 0,
        "delayUntil": 0,
    }
    message.update(changes)
    return json.dumps(message)


POISON: list[dict[str, Any]] = [
    {"message": "not json"},
    {"message": ""},
    {"message": b'{"type":"\xff\xfe"}'},
    {"message": _message(data="caf\u00e9").encode().replace(b"\\u00e9", b"\xe9")},
    {"payload": _message()},
    {"message": '{"type": NaN}'},
    {"message": '"a string"'},
    {"message": _message(failCount="abc")},
    {"message": _message(timestamp=[1])},
    {"message": _message(data=None)},
    {"message": _message(data="\\ud800").replace("\\\\ud800", "\\ud800")},
    {"message": "[" * 600 + "]" * 600},
    {"message": _message(type="another-queue")},
    {"message": _message(source="app\\queue\\Other")},
]


def test_poison_entries_are_dead_lettered_with_the_reason(bridge_url: str, run_bridge: Any, rt: Any) -> None:
    # given: poison entries between good ones, written raw (as any producer could)
    Collect.reset()
    raw = redis.Redis.from_url(bridge_url)
    keys = producer(bridge_url).keys
    for i, fields in enumerate(POISON):
        raw.xadd(keys.stream, fields)
        raw.xadd(keys.stream, {"message": _message(data=f"good-{i}")})
    # when
    runner = run_bridge(bridge_url, ConsumerSpec("collect", Collect, options={"prefetch_count": 3}))
    # then: every good one consumed, every poison one dead-lettered with its reason, none left
    wait_until(lambda: len(Collect.data()) >= len(POISON) and len(rt.dead_letters) >= len(POISON))
    assert sorted(Collect.data()) == sorted(f"good-{i}" for i in range(len(POISON)))
    letters = rt.dead_letters.entries(newest_first=False)
    reasons = [letter.errmsg.split(":")[1].strip() for letter in letters]
    assert reasons == [
        "bad_json",
        "empty",
        "invalid_utf8",
        "invalid_utf8",
        "no_message_field",
        "bad_json",
        "bad_field_type",
        "bad_field_type",
        "bad_field_type",
        "missing_key",
        "bad_json",
        "bad_json",
        "foreign_type",
        "foreign_source",
    ]
    assert {letter.error_class for letter in letters} == {"poison", "foreign"}
    assert "\\xff\\xfe" in letters[2].payload
    assert raw.xlen(keys.stream) == 0
    assert raw.xpending(keys.stream, keys.names.group)["pending"] == 0
    assert all(thread.is_alive() for thread in runner._threads)


@pytest.mark.parametrize("how", ["delete the stream", "destroy the group"])
def test_deleted_stream_or_group_does_not_stop_consumption(
    bridge_url: str, run_bridge: Any, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    # given: a running consumer that has consumed
    Collect.reset()
    run_bridge(bridge_url, ConsumerSpec("collect", Collect))
    send = producer(bridge_url)
    send.push("before")
    wait_until(lambda: Collect.data() == ["before"])
    # when: the clean command's DEL (or XGROUP DESTROY) under it
    if how == "delete the stream":
        send.redis.delete(*send.keys.data_keys)
    else:
        send.redis.xgroup_destroy(send.keys.stream, send.names.group)
    send.push("after")
    # then: the group is recreated, logged, and consumption goes on
    wait_until(lambda: Collect.data() == ["before", "after"])
    assert any("recreated it" in r.getMessage() for r in caplog.records)


def _redis_server(port: int, workdir: str) -> subprocess.Popen[bytes]:
    binary = shutil.which("redis-server")
    assert binary
    cmd = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    proc = subprocess.Popen([*cmd, "--dir", workdir], stdout=subprocess.DEVNULL)
    wait_until(lambda: pings(redis.Redis(port=port)), timeout=10)
    return proc


@pytest.mark.slow
def test_a_redis_restart_does_not_stop_consumption(run_bridge: Any, redis_server: str) -> None:
    if shutil.which("redis-server") is None:
        pytest.skip("needs a local redis-server to restart")
    # given: a consumer on a Redis of its own
    Collect.reset()
    port, workdir = free_port(), tempfile.mkdtemp(prefix="noti-webman-")
    server = _redis_server(port, workdir)
    try:
        url = f"redis://127.0.0.1:{port}/0"
        run_bridge(url, ConsumerSpec("collect", Collect))
        producer(url).push("first")
        wait_until(lambda: Collect.data() == ["first"])
        # when: Redis restarts empty
        server.terminate()
        server.wait(10)
        server = _redis_server(port, workdir)
        producer(url).push("second")
        # then
        wait_until(lambda: Collect.data() == ["first", "second"], timeout=30)
    finally:
        server.terminate()
        server.wait(10)
        shutil.rmtree(workdir, ignore_errors=True)


NOTIFY = "app\\queue\\Notify"


def test_notification_consumer_turns_messages_into_notifications(
    bridge_url: str, run_bridge: Any, rt: Any
) -> None:
    # given
    options = {"php_class": NOTIFY, "block_time_ms": 200, "notify_user": MEMBER}
    spec = ConsumerSpec("notify", NotificationConsumer, options=options)
    run_bridge(bridge_url, spec)
    send = producer(bridge_url, NOTIFY)
    # when: one good message and three that can never become notifications
    send.push({"type": "sms", "to": PHONE, "text": "Your code is 4321", "lv": "5"})
    send.push({"type": "sms", "text": "no target"})
    send.push({"type": "sms", "to": "12", "text": "bad target"})
    send.push("not an object")
    # then: one record, three dead letters with reasons, nothing retried
    wait_until(lambda: noti.list_notifications(user=ADMIN) and len(rt.dead_letters) >= 3)
    (record,) = noti.list_notifications(user=ADMIN)
    assert record.channel.value == "sms" and record.target == PHONE
    assert record.creator == MEMBER and record.level == 5  # the acting user's cap applies
    kinds = sorted(letter.error_class for letter in rt.dead_letters.entries())
    assert kinds == ["poison", "poison", "rejected"]
    assert rt.redis.hgetall(rt.keys.metrics) == {"added|sms|default": "1"}  # the refused: nothing
    assert send.redis.zcard(send.keys.delayed_set) == 0


@pytest.mark.slow
def test_bootstep_runs_consumers_inside_celery_worker(rt: Any, spawn_worker: Any, redis_url: str) -> None:
    # given: a worker whose settings enable the bridge with the notification consumer
    spawn_worker(sms_and_webman_config(NOTIFY, processes=2), "-P", "threads", "-c", "2", name="webman")
    # when: a PHP-shaped message arrives on the default connection (noti's Redis)
    producer(redis_url, NOTIFY).push({"type": "sms", "to": PHONE, "text": "from PHP"})
    # then: the worker consumed it and delivered the SMS
    outbox = wait_until(lambda: sandbox_outbox(rt), timeout=30)
    assert outbox[0]["target"] == PHONE


def test_producer_refuses_what_php_would_not_read_back_and_writes_nothing(bridge_url: str) -> None:
    send = producer(bridge_url)
    with pytest.raises(MalformedMessage, match="push_many"):
        send.push([{"a": 1}, {"b": 2}])  # pushMessage's guard: it looks like a batch
    with pytest.raises(MalformedMessage):
        send.push_many(["ok", float("nan")])
    with pytest.raises(BridgeError) as caught:
        send.schedule_many([Delayed("ok", 10), Delayed("bad", -1)])
    assert caught.value.code == "e.noti.bridge.baddelay"
    assert not send.redis.exists(*send.keys.data_keys)
    # a list of arrays is one payload when wrapped in a message, as with PHP's QueueMessage
    send.push(send.message([{"a": 1}, {"b": 2}]))
    assert send.redis.xlen(send.keys.stream) == 1


def test_integers_beyond_64_bits_go_through_as_php_would_carry_them(bridge_url: str, run_bridge: Any) -> None:
    # given: payloads holding integers PHP can only hold as floats (issue 18 point 7)
    Collect.reset()
    run_bridge(bridge_url, ConsumerSpec("collect", Collect))
    send = producer(bridge_url)
    # when: pushed and scheduled, as a PHP producer would write them
    send.push(send.message({"order": 2**64, "small": 3}))
    send.push(send.message(2**64))
    send.schedule_many([Delayed([-(2**63) - 1], 0)])
    # then: consumed as PHP's consumer reads them: floats inside, a string at the top
    wait_until(lambda: len(Collect.data()) >= 3)
    expected = [{"order": 1.8446744073709552e19, "small": 3}, "1.844674407371E+19", [-9.223372036854776e18]]
    assert sorted(map(repr, Collect.data())) == sorted(map(repr, expected))


def test_remove_and_has_delayed_are_exact(bridge_url: str) -> None:
    send = producer(bridge_url)
    ids = send.schedule_many([Delayed("a", 0, "a"), Delayed("b", 30, "b")])
    assert ids == ["a", "b"] and send.due_at("a") == 0 and send.has_delayed("b")
    assert send.remove_delayed("a") is True and send.remove_delayed("a") is False
    assert send.remove_delayed_many(["b", "nope"]) == 1
    assert not send.has_delayed("b")
    with pytest.raises(BridgeError):
        DelayedMover(send.redis, send.keys, batch=MAX_BATCH + 1)


def test_a_tick_acks_its_entries_together_and_the_loop_acks_them_with_its_next_read(
    bridge_url: str, rt: Any
) -> None:
    # given: five entries and a worker that reads three at a time
    send = _queued(bridge_url, 5)
    consumer = Collect(
        client=connect(bridge_url), dead_letters=rt.dead_letters, options={"prefetch_count": 3}
    )
    worker = QueueWorker(consumer)
    # when: a tick reads the way the loop does (settling left to the next read)
    assert worker.read_once(block_ms=10, settle=False) == 3
    # then: its entries are consumed but still pending, until the next tick's round trip
    assert [d["n"] for d in Collect.data()] == [0, 1, 2]
    assert _left(send, rt) == (5, 3, 0, 0)
    assert worker.read_once(block_ms=10, settle=False) == 2
    assert _left(send, rt) == (2, 2, 0, 0)
    # and a tick that settles (the default) acks and deletes all it read before returning
    assert worker.read_once(block_ms=10) == 0
    assert _left(send, rt) == (0, 0, 0, 0)


def test_acks_a_lost_connection_kept_from_redis_go_with_the_next_read(bridge_url: str, rt: Any) -> None:
    # given: a tick's entries consumed, their acks not sent yet
    send = _queued(bridge_url, 2)
    consumer = Collect(
        client=connect(bridge_url), dead_letters=rt.dead_letters, options={"prefetch_count": 5}
    )
    worker = QueueWorker(consumer)
    assert worker.read_once(block_ms=10, settle=False) == 2
    # when: the next read fails (Redis unreachable for it)
    reachable, worker.redis = worker.redis, _unreachable()
    with pytest.raises(StoreUnavailable):
        worker.read_once(block_ms=10, settle=False)
    assert _left(send, rt) == (2, 2, 0, 0)
    # then: once Redis answers again, the next read acks and deletes them first
    worker.redis = reachable
    assert worker.read_once(block_ms=10) == 0
    assert _left(send, rt) == (0, 0, 0, 0)
    assert len(Collect.data()) == 2


def test_a_stopping_loop_acks_what_it_consumed(bridge_url: str, rt: Any) -> None:
    # given: a loop told to stop by the last entry it consumes (its ack not sent yet)
    send = _queued(bridge_url, 10)
    stop = threading.Event()

    class StopAtLast(Collect):
        def consume(self, message: Any) -> None:
            super().consume(message)
            if message.data == {"n": 9}:
                stop.set()

    consumer = StopAtLast(
        client=connect(bridge_url), dead_letters=rt.dead_letters, options={"prefetch_count": 4}
    )
    # when: it runs until then
    QueueWorker(consumer).run(stop)
    # then: every entry it consumed is acked and deleted
    assert len(Collect.data()) == 10
    assert _left(send, rt) == (0, 0, 0, 0)


def test_a_long_tick_settles_as_it_goes_so_the_pending_check_never_takes_a_consumed_entry(
    bridge_url: str, rt: Any
) -> None:
    # given: a pending timeout of 0 (an entry is "timed out" at once): acks may not wait
    send = _queued(bridge_url, 4)
    options = {"prefetch_count": 4, "pending_timeout_s": 0}
    worker = QueueWorker(Collect(client=connect(bridge_url), dead_letters=rt.dead_letters, options=options))
    assert worker.settle_within_s() == 0
    # when: a tick runs the loop's way
    assert worker.read_once(block_ms=10, settle=False) == 4
    # then: every entry was acked as soon as it was consumed: none is left to the check
    assert _left(send, rt) == (0, 0, 0, 0)
    assert worker.check_pending() == 0
    default = QueueWorker(Collect(client=connect(bridge_url), dead_letters=rt.dead_letters))
    assert default.settle_within_s() == 1.0  # 300 s timeout: at most a second


def test_a_loop_that_sleeps_between_ticks_acks_before_it_sleeps(bridge_url: str, rt: Any) -> None:
    send = _queued(bridge_url, 3)
    options = {"prefetch_count": 10, "consumer_interval_s": 30}
    worker = QueueWorker(Collect(client=connect(bridge_url), dead_letters=rt.dead_letters, options=options))
    stop = threading.Event()
    loop = threading.Thread(target=worker.run, args=(stop,))
    loop.start()
    try:
        # the loop sleeps 30 s after its first tick: the acks must not wait for the next one
        wait_until(lambda: _left(send, rt) == (0, 0, 0, 0), timeout=10)
        assert len(Collect.data()) == 3
    finally:
        stop.set()
        loop.join(10)


def test_a_read_refused_by_redis_is_store_unavailable(bridge_url: str, rt: Any, monkeypatch: Any) -> None:
    worker = QueueWorker(Collect(client=connect(bridge_url), dead_letters=rt.dead_letters))
    worker.ensure_group()

    from noti.bridge.webman import worker as worker_module

    def refused(*args: Any, **kwargs: Any) -> list[Any]:
        return [redis.ResponseError("LOADING Redis is loading the dataset in memory")]

    monkeypatch.setattr(worker_module, "run_commands", refused)
    with pytest.raises(StoreUnavailable, match="not ready"):
        worker.read_once(block_ms=10)
