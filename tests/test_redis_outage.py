"""A Redis outage under every long-running process (issue 19, point 5).

One private ``redis-server`` (AOF on, a password) serves two beats, a worker (delay pump,
webman bridge, event processor) and Flower, all real ``celery -A noti …`` subprocesses. The
module's fixture SIGKILLs Redis for :data:`OUTAGE_S` while an event processor is busy,
starts it again on the same port and data directory, and each test then checks one process:
still alive, the outage logged a bounded number of times, and back at work. The outage
happens once for the whole module (about 40 s of its run).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import redis
from kombu import Connection

from noti.bridge.webman import Producer, QueueKeys, QueueNames
from noti.bridge.webman.connection import connect as webman_connect
from noti.celery.transport import BulkTransport
from noti.core.keys import Keys
from noti.providers.sandbox import read_outbox
from noti.redis.conn import connect
from tests.conftest import ADMIN, BASE_ENV, ROOT, wait_until
from tests.servers import (
    SMS_AND_WEBMAN_CONFIG,
    WEBMAN_NOTIFY_CLASS,
    CeleryProcess,
    RedisProcess,
    free_port,
    run_noti,
)

pytestmark = [pytest.mark.slow, pytest.mark.integration]

PASSWORD = "outage-s3cret"
PHONE = "+8613912345678"
#: How long Redis stays down.
OUTAGE_S = 10.0
#: A beat log line that sends the 1 s entry (noti-events-sweep, NOTI_EVENT_SWEEP_INTERVAL_S=1).
SEND = re.compile(
    r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}): INFO/MainProcess\] "
    r"Scheduler: Sending due task noti-events-sweep"
)


class Process(CeleryProcess):
    """A ``celery -A noti`` process of the outage scenario, logging to ``<workdir>/<name>.log``."""

    def __init__(self, name: str, env: dict[str, str], *args: str, workdir: Path) -> None:
        super().__init__(env, *args, log=workdir / f"{name}.log", name=name)


@dataclass
class Outage:
    """What the module's fixture started, and when Redis went away and came back."""

    url: str
    env: dict[str, str]
    redis: redis.Redis
    worker: Process
    beats: list[Process]
    flower: Process
    flower_port: int
    killed_at: datetime
    restarted_at: datetime
    slow_event: str
    workdir: Path
    extra: dict[str, Any] = field(default_factory=dict)

    def noti(self, *args: str) -> str:
        # the CLI checks a task listener's task is registered: import the test's task module first
        return run_noti(self.env, *args, preload="tests.outage_tasks")

    def outbox_texts(self) -> list[str]:
        return [entry["fields"].get("text", "") for entry in read_outbox(self.redis, Keys("noti:"))]

    def flower_get(self, path: str) -> Any:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.flower_port}{path}", timeout=30) as reply:
            return reply.read().decode()


def _http_up(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthcheck", timeout=2):
            return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def outage() -> Iterator[Outage]:
    if shutil.which("redis-server") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("redis-server is needed")
        pytest.skip("redis-server is not installed")
    workdir = Path(tempfile.mkdtemp(prefix="noti-outage-"))
    server = RedisProcess(str(workdir), "--requirepass", PASSWORD)
    url = f"redis://:{PASSWORD}@127.0.0.1:{server.port}/0"
    client = connect(url)
    server.start(client)
    (workdir / "noti.toml").write_text(SMS_AND_WEBMAN_CONFIG)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("NOTI_")},
        **BASE_ENV,
        "NOTI_USER": ADMIN,
        "NOTI_REDIS_URL": url,
        "NOTI_CONFIG": str(workdir / "noti.toml"),
        "NOTI_EVENT_SWEEP_INTERVAL_S": "1",
        "NOTI_EVENT_LOCK_TTL_S": "6",
        "FLOWER_UNAUTHENTICATED_API": "true",
    }
    worker_args = ("worker", "-l", "INFO", "-P", "threads", "-c", "2")
    worker_args += ("--without-mingle", "--without-gossip", "-n", "outage@%h", "-I", "tests.outage_tasks")
    flower_port = free_port()
    started: list[Process] = []
    try:
        worker = Process("worker", env, *worker_args, workdir=workdir)
        started.append(worker)
        beats = []
        for name in ("beat-a", "beat-b"):
            beats.append(Process(name, env, "beat", "-l", "INFO", workdir=workdir))
            started.append(beats[-1])
            if name == "beat-a":  # the first holds the lock, the second is the standby
                wait_until(lambda: "Acquired lock" in beats[0].output() or not beats[0].alive(), timeout=30)
        flower_args = ("flower", "--address=127.0.0.1", f"--port={flower_port}")
        flower = Process("flower", env, *flower_args, workdir=workdir)
        started.append(flower)
        wait_until(lambda: "ready." in worker.output() or not worker.alive(), timeout=60)
        wait_until(lambda: _http_up(flower_port) or not flower.alive(), timeout=30)
        for process in started:
            assert process.alive(), process.output()
        now = datetime.now()
        handle = Outage(url, env, client, worker, beats, flower, flower_port, now, now, "", workdir)
        # given: listeners, and a notification delivered before the outage
        handle.noti("listener", "add", "outage.slow", "-task", "tests.outage.slow")
        handle.noti("listener", "add", "outage.sms", "-type", "sms", "-to", PHONE, "-text", "event {{ n }}")
        handle.noti("add", "sms", "-to", PHONE, "-text", "before")
        wait_until(lambda: "before" in handle.outbox_texts(), timeout=30)
        # and an event processor busy with a listener that outlasts the lock's time-to-live
        handle.slow_event = handle.noti("event", "dispatch", "outage.slow", "-data", '{"sleep_s": 4}')
        # read from Redis, not through `noti event show`: a CLI process takes seconds to start
        # beside the whole suite, and the event is activated for its listener's 4 s only
        event_key = Keys("noti:").event(handle.slow_event)
        wait_until(lambda: handle.redis.hget(event_key, "status") in ("activated", b"activated"), timeout=30)
        # when: Redis is killed, stays down, and comes back with its data
        handle.killed_at = datetime.now()
        server.kill()
        time.sleep(OUTAGE_S)
        server.start(client)
        handle.restarted_at = datetime.now()
        handle.extra["restart_monotonic"] = time.monotonic()
    except BaseException:
        try:
            print("outbox:", read_outbox(client, Keys("noti:")), "slow:", client.keys("*"))
        except Exception as exc:
            print("debug failed", exc)
        for process in started:
            print(f"--- {process.name} ---\n{process.output()[-4000:]}")
        _clean_up(started, client, server, workdir)
        raise
    try:
        yield handle
    finally:
        _clean_up(started, client, server, workdir)


def _clean_up(started: list[Process], client: redis.Redis, server: RedisProcess, workdir: Path) -> None:
    for process in started:
        process.stop()
    client.close()
    server.stop()
    shutil.rmtree(workdir, ignore_errors=True)


def _sends(beat: Process) -> list[datetime]:
    return [
        datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f")
        for line in beat.output().splitlines()
        if (match := SEND.match(line))
    ]


def test_beats_wait_through_the_outage_and_the_1s_entry_fires_on_without_a_double(outage: Outage) -> None:
    # then: a few seconds after Redis is back, the entry fires again
    wait_until(
        lambda: (
            sum(t > outage.restarted_at for b in outage.beats for t in _sends(b)) >= 4
            or not all(b.alive() for b in outage.beats)
        ),
        timeout=30,
    )
    for beat in outage.beats:
        assert beat.alive(), beat.output()[-3000:]
        # the outage is logged once (the standby too: it waits for the lock through it)
        assert beat.count("beat: Redis unavailable") <= 1, beat.output()[-3000:]
    holder, standby = outage.beats
    assert holder.count("beat: Redis unavailable") == 1 and holder.count("beat: Redis is back") == 1
    assert not _sends(standby), "the standby fired while the holder held the lock"
    sends = sorted(t for b in outage.beats for t in _sends(b))
    during = [t for t in sends if outage.killed_at < t < outage.restarted_at]
    assert not during
    # no double fire, no catch-up burst: consecutive runs at least most of a second apart
    gaps = [(b - a).total_seconds() for a, b in zip(sends, sends[1:], strict=False)]
    assert min(gaps) >= 0.9, gaps
    per_second = {t.replace(microsecond=0) for t in sends}
    assert len(per_second) == len(sends)


def test_the_worker_reconnects_and_delivers_a_notification_sent_after_the_outage(outage: Outage) -> None:
    # when: a notification is sent once Redis is back
    outage.noti("add", "sms", "-to", PHONE, "-text", "after")
    # then: the sandbox provider delivers it, and the worker lived through it
    wait_until(lambda: "after" in outage.outbox_texts() or not outage.worker.alive(), timeout=60)
    log = outage.worker.output()
    assert outage.worker.alive(), log[-5000:]
    assert "after" in outage.outbox_texts()
    assert "Unrecoverable error" not in log
    # the threads pool cannot stop the listener task in progress: it was not asked to (Celery
    # 5.5.0 stopped the worker on that NotImplementedError; later releases log a traceback)
    assert "does not implement kill_job" not in log, log[-5000:]
    assert "Failed to cancel active request" not in log
    # the consumer retried with no limit on its tries (Celery's default gives up after 100)
    assert re.search(r"Trying again in \d+(\.\d+)? seconds\.\.\. \(\d+/None\)", log), log[-5000:]
    # the delay pump waited quietly: one line for the outage, one for the recovery
    assert outage.worker.count("delay pump: Redis unavailable") == 1, log[-5000:]
    assert outage.worker.count("delay pump: pass failed") == 0


def test_the_event_processor_stops_quietly_and_a_new_one_resumes_its_event(outage: Outage) -> None:
    # when: another event is dispatched once Redis is back
    event_id = outage.noti("event", "dispatch", "outage.sms", "-data", '{"n": 7}')
    # then: the event being processed when Redis went away is done (taken again), and the new one too
    wait_until(lambda: '"done"' in outage.noti("event", "show", event_id, "-json"), timeout=60)
    wait_until(lambda: '"done"' in outage.noti("event", "show", outage.slow_event, "-json"), timeout=60)
    assert "event 7" in outage.outbox_texts()
    log = outage.worker.output()
    # the lock renewal logged the outage once, not at every renewal, and without tracebacks
    assert outage.worker.count("cannot renew the liveness lock") == 0, log[-5000:]
    assert outage.worker.count("lock renewal: Redis unavailable") <= 1


def test_the_webman_bridge_waits_and_consumes_after_the_outage(outage: Outage) -> None:
    # when: a PHP-shaped message arrives once Redis is back
    keys = QueueKeys(QueueNames.from_class(WEBMAN_NOTIFY_CLASS), "webman_redis_queue_")
    producer = Producer(webman_connect(outage.url), keys)
    producer.push({"type": "sms", "to": PHONE, "text": "from PHP after"})
    # then: the bridge consumed it and the SMS went out
    wait_until(lambda: "from PHP after" in outage.outbox_texts(), timeout=60)
    log = outage.worker.output()
    # one line per loop (the reader and the housekeeper), not one per retry
    bridge_lines = re.findall(r"webman [^:]*: Redis unavailable", log)
    assert 1 <= len(bridge_lines) <= 2, log[-5000:]
    assert "retrying in" not in log


def test_flower_reconnects_and_shows_the_worker_with_no_password(outage: Outage) -> None:
    assert outage.flower.alive(), outage.flower.output()[-3000:]

    # then: task events emitted after the outage reach Flower (beat's 1 s entry runs a task)
    def task_after_restart() -> bool:
        tasks = json.loads(outage.flower_get("/api/tasks?limit=1000"))
        cutoff = outage.restarted_at.timestamp()
        return any((task.get("received") or 0) > cutoff for task in tasks.values())

    wait_until(task_after_restart, timeout=60, interval=0.5)
    outage.extra["flower_recovered_s"] = time.monotonic() - outage.extra["restart_monotonic"]
    # and its worker view, with the worker's configuration, shows no password
    workers = outage.flower_get("/api/workers?refresh=1")
    assert "outage@" in workers and "redbeat_redis_url" in workers, workers[:2000]
    assert PASSWORD not in workers
    assert outage.flower.count("Failed to capture events") <= 4


def test_inspect_conf_masks_every_url_setting(outage: Outage) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "celery", "-A", "noti", "inspect", "conf", "-j", "-t", "10"],
        env=outage.env,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    assert "redbeat_redis_url" in done.stdout and "broker_url" in done.stdout
    assert PASSWORD not in done.stdout


def test_a_channel_closed_after_its_connection_was_torn_down_does_not_raise(redis_url: str) -> None:
    # given: a BulkTransport channel holding one delivered, unacked message
    with Connection(redis_url, transport=BulkTransport) as conn:
        channel: Any = conn.channel()
        conn.SimpleQueue("noti.outage-test", channel=channel).put({"n": 1})
        message = channel.basic_get("noti.outage-test", no_ack=False)
        assert message is not None and channel.qos._delivered
        # when: kombu's collect after a lost connection drops the pools and the transport's
        # client before this channel is closed (the worker's crash on reconnect)
        channel._disconnect_pools()
        conn.transport.client = None
        channel.qos.restore_unacked_once()  # raised AttributeError ('NoneType' … 'hostname')
        # then: the message went back to its queue (or waits in the unacked hash)
        client = redis.Redis.from_url(redis_url)
        assert client.llen("noti.outage-test") == 1 or client.hlen("unacked") == 1
