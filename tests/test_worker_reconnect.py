"""A batch worker with a send in flight lives through Redis going away (found by ``make chaos``).

When the broker connection is lost, Celery's consumer cancels the unacknowledged late-ack
requests in its registry (``worker_cancel_long_running_tasks_on_connection_loss``), reading
``request.acknowledged`` and calling ``request.cancel(pool)``, and after reconnecting hands
every registered request its new event dispatcher (``request.eventer = …``). A batch worker
registers its messages as :class:`noti.celery.report.HeldRequest`, which had none of these:
the worker stopped with ``Unrecoverable error: AttributeError("'_Held' object has no attribute
'acknowledged'")`` whenever Redis went away while a webhook was being sent.

A pool that cannot stop a task in progress (threads, solo) has no ``terminate_job``: on Celery
5.5.0 the cancel's ``NotImplementedError`` stopped the worker whenever Redis went away while
any other task ran (found by tests/test_redis_outage.py on the lowest versions); noti cancels
only where the pool can (:class:`noti.celery.steps.CancelWhereThePoolCan`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.conftest import ADMIN, BASE_ENV, ROOT, wait_until
from tests.fakes.webhook import SECRET, WebhookReceiver
from tests.servers import CeleryProcess, RedisProcess

pytestmark = pytest.mark.slow

#: How long the receiver takes to answer: the send is in flight when Redis is killed.
ANSWER_S = 3.0


@pytest.fixture
def server() -> Iterator[RedisProcess]:
    if shutil.which("redis-server") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("redis-server is needed")
        pytest.skip("redis-server is not installed")
    workdir = tempfile.mkdtemp(prefix="noti-reconnect-")
    process = RedisProcess(workdir)
    try:
        yield process
    finally:
        process.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def _started(server: RedisProcess) -> tuple[redis.Redis, dict[str, str]]:
    """A client of the started ``server``, and the environment of a worker on it."""
    client = redis.Redis(port=server.port, decode_responses=True)
    server.start(client)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("NOTI_")},
        **BASE_ENV,
        "NOTI_USER": ADMIN,
        "NOTI_REDIS_URL": f"redis://127.0.0.1:{server.port}/0",
    }
    return client, env


def test_a_worker_sending_a_webhook_when_redis_dies_reconnects_and_records_it(
    server: RedisProcess, tmp_path: Path
) -> None:
    # given: a batch worker, and a webhook receiver that takes 3 s to answer
    client, env = _started(server)
    with WebhookReceiver() as receiver:
        receiver.delay_s = ANSWER_S
        config = tmp_path / "noti.toml"
        config.write_text(
            '[channels.webhook]\nprovider = "hook"\n\n'
            f'[providers.hook]\nkind = "webhook"\nsecret = "{SECRET}"\nallow_private = true\n'
            f'destinations = ["{receiver.url}/"]\n'
        )
        env["NOTI_CONFIG"] = str(config)
        args = ("worker", "-P", "solo", "-l", "INFO", "--without-mingle", "--without-gossip")
        worker = CeleryProcess(env, *args, name="reconnect")
        try:
            wait_until(lambda: "ready." in worker.output() or not worker.alive(), timeout=60)
            assert worker.alive(), worker.output()
            add = ("add", "webhook", "-to", f"{receiver.url}/in", "-content", "{}")
            added = subprocess.run(
                [sys.executable, "-m", "noti", *add],
                env=env,
                cwd=ROOT,
                capture_output=True,
                text=True,
            )
            assert added.returncode == 0, added.stderr
            record_id = added.stdout.strip()
            wait_until(lambda: receiver.requests, timeout=30)
            # when: Redis dies while the webhook is on its way, and comes back
            server.kill()
            time.sleep(1.0)
            server.start(client)
            # then: the worker carries on and records the delivery
            wait_until(
                lambda: client.hget(f"noti:rec:{record_id}", "noti_st") == "10" or not worker.alive(),
                timeout=60,
            )
            log = worker.output()
            assert worker.alive(), log[-5000:]
            assert "Unrecoverable error" not in log, log[-5000:]
            assert client.hget(f"noti:rec:{record_id}", "noti_st") == "10"
        finally:
            worker.stop()
            client.close()


@pytest.mark.integration
def test_a_threads_worker_running_a_task_when_redis_dies_lets_it_finish_and_lives(
    server: RedisProcess, tmp_path: Path
) -> None:
    # given: a worker on the threads pool running a task that takes 3 s
    client, env = _started(server)
    args = ("worker", "-P", "threads", "-c", "2", "-l", "INFO", "--without-mingle", "--without-gossip")
    worker = CeleryProcess(env, *args, "-I", "tests.outage_tasks", name="reconnect-threads")
    try:
        wait_until(lambda: "ready." in worker.output() or not worker.alive(), timeout=60)
        assert worker.alive(), worker.output()
        call = ("-m", "celery", "-A", "noti", "call", "tests.outage.busy")
        call += ("--args", f'[{ANSWER_S}, "tests:busy"]')
        called = subprocess.run([sys.executable, *call], env=env, cwd=ROOT, capture_output=True, text=True)
        assert called.returncode == 0, called.stderr
        wait_until(lambda: "Task tests.outage.busy[" in worker.output(), timeout=30)
        # when: Redis dies while the task runs, and comes back
        server.kill()
        time.sleep(1.0)
        server.start(client)
        # then: the task ran to its end and the worker lives on
        wait_until(lambda: client.get("tests:busy") == "done" or not worker.alive(), timeout=60)
        log = worker.output()
        assert worker.alive(), log[-5000:]
        assert client.get("tests:busy") == "done"
        assert "Unrecoverable error" not in log, log[-5000:]
        assert "does not implement kill_job" not in log, log[-5000:]
        assert "Failed to cancel active request" not in log, log[-5000:]
    finally:
        worker.stop()
        client.close()
