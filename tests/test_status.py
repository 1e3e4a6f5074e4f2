"""``noti status``: its JSON and its screen against the keys they read, ``-watch`` in a
subprocess, and bad input."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import noti
from noti.celery.queues import PRIORITY_STEPS, queue_key, queue_names
from noti.core.attempt import Outcome
from noti.core.deadletter import DeadLetter
from noti.core.record import Channel, Status
from noti.numpool import NumberPool
from tests.conftest import ADMIN, BASE_ENV, wait_until
from tests.noti_cli import start_noti
from tests.servers import free_port
from tests.test_cli import run

PHONE = "+8613912345678"


def status_json(*args: str) -> dict[str, Any]:
    result = run("status", "-json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def a_backlog(rt: Any) -> dict[str, Any]:
    """Messages waiting at two priority steps (no worker runs), a delayed record, a failed
    one with its dead letter, an event waiting and a number pool."""
    urgent = noti.notify_sms(PHONE, "urgent", lv=500, user=ADMIN)
    for i in range(3):
        noti.notify_sms(PHONE, f"plain {i}")
    noti.notify_email("a@example.com", subject="s", text="t")
    noti.notify_sms(PHONE, "later", delay=600)
    record_id = noti.notify_sms(PHONE, "doomed")
    rt.store.claim(record_id, owner="w", lease_ms=10_000)
    outcome = Outcome(Status.FAILED, "boom", 3, error_class="exhausted")
    dead = DeadLetter(record_id, "sms", PHONE, 3, "exhausted", "boom", 1)
    assert rt.store.finish(record_id, owner="w", outcome=outcome, letter=dead)
    pool = NumberPool("senders")
    pool.add("1001")
    pool.register("1001")
    pool.add("1002")
    return {"urgent": urgent}


def test_the_json_is_the_state_the_keys_hold(rt: Any) -> None:
    a_backlog(rt)
    found = status_json()
    queues = {q["name"]: q for q in found["queues"]}
    assert list(queues) == queue_names()
    for name in queue_names():
        assert queues[name]["steps"] == [rt.redis.llen(queue_key(name, s)) for s in PRIORITY_STEPS]
    assert queues["noti.sms"]["steps"][1] == 1 and queues["noti.sms"]["steps"][9] == 4
    assert queues["noti.sms"]["total"] == 5 and queues["noti.email"]["total"] == 1
    assert queues["noti.sms"]["oldest_age_s"] >= 0 and queues["noti.intake"]["oldest_age_s"] is None
    assert found["delayed"] == {"total": 1, "due": 0, "pump_lag_s": 0.0}
    assert found["dead_letters"] == rt.redis.xlen(rt.keys.dead_letters) == 1
    assert found["records"] == {"waiting": 6, "done": 0, "failed": 1, "invalid": 0}
    assert found["workers"] == {"alive": 0, "nodes": []}
    assert found["pools"] == [
        {
            "name": "senders",
            "counts": {"idle+up": 1, "idle+down": 1, "busy+up": 0, "busy+down": 0},
            "total": 2,
        }
    ]
    assert found["unacked"] == 0 and found["events"]["processor"] is None
    added = {(c["channel"], c["provider"]): c["value"] for c in found["counters"]["added"]}
    assert added == {("sms", "default"): 6, ("email", "default"): 1}
    assert found["counters"]["failed"] == [
        {"channel": "sms", "reason": "exhausted", "provider": "none", "value": 1}
    ]


def test_the_screen_shows_the_same(rt: Any) -> None:
    a_backlog(rt)
    result = run("status")
    assert result.exit_code == 0, result.output
    screen = result.stdout
    assert "workers  0 alive" in screen
    rows = {line.split()[0]: line.split()[1:] for line in screen.splitlines() if line.startswith("noti.")}
    assert rows["noti.sms"][:11] == ["5", "0", "1", "0", "0", "0", "0", "0", "0", "0", "4"]
    assert rows["noti.email"][0] == "1" and rows["noti.intake"][-1] == "-"
    assert "delayed  1 waiting for their time, 0 due now, pump lag 0.0s" in screen
    assert "dead letters  1" in screen
    assert "records  waiting 6, done 0, failed 1, invalid 0" in screen
    assert "counted  added 7, sent 0, retried 0, failed 1, invalid 0, dead-lettered 1" in screen
    assert "senders: 2 numbers (idle+up 1, idle+down 1, busy+up 0, busy+down 0)" in screen
    assert "no processor" in screen


def test_a_running_worker_is_shown_alive_with_its_queues(rt: Any, worker: Any) -> None:
    found = wait_until(lambda: (s := status_json())["workers"]["alive"] == 1 and s)
    [node] = found["workers"]["nodes"]
    assert node["alive"] and node["pid"] == os.getpid() and set(node["queues"]) >= {c.queue for c in Channel}
    assert node["mode"] == "batch" and node["pool"] == "thread"
    noti.notify_sms(PHONE, "x")
    wait_until(lambda: status_json()["records"]["done"] == 1)
    screen = run("status").stdout
    assert "workers  1 alive" in screen and node["name"] in screen


@pytest.mark.slow
@pytest.mark.parametrize(("args", "frame"), [((), "noti status"), (("-json", "-c"), '{"at_ms":')])
def test_watch_shows_the_screen_again_until_interrupted(
    rt: Any, redis_url: str, tmp_path: Path, args: tuple[str, ...], frame: str
) -> None:
    config = tmp_path / "noti.toml"
    config.write_text("")
    env = {**os.environ, **BASE_ENV, "NOTI_REDIS_URL": redis_url, "NOTI_CONFIG": str(config)}
    proc = start_noti(env, "status", "-watch", "0.2", *args)
    assert proc.stdout is not None
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)
    reader.start()
    wait_until(lambda: sum(frame in line for line in lines) >= 2 or proc.poll() is not None, timeout=60)
    proc.send_signal(signal.SIGINT)
    proc.wait(20)
    reader.join(10)
    err = proc.stderr.read() if proc.stderr else ""
    out = "".join(lines)
    assert proc.returncode == 0, err
    assert out.count(frame) >= 2, out
    if args:
        assert all(json.loads(line)["records"] for line in out.splitlines())


@pytest.mark.parametrize("value", ["0", "0.05", "abc", "99999", "nan", "inf"])
def test_a_bad_watch_interval_is_refused(rt: Any, value: str) -> None:
    result = run("status", "-watch", value)
    assert result.exit_code == 1 and result.stderr.startswith("e.cmd.noti.status.badwatch: "), result.output


def test_redis_away_is_an_error(configure: Any) -> None:
    configure(redis_url=f"redis://127.0.0.1:{free_port()}/0")
    result = run("status")
    assert result.exit_code == 1 and result.stderr.startswith("e.noti.store.unavailable: "), result.output


def test_lags_and_ages_are_measured(rt: Any) -> None:
    from noti.core.record import now_ms
    from noti.events import dispatch

    noti.notify_sms(PHONE, "waits in its queue")
    rt.delayed.schedule("stuck", now_ms() - 5_000)  # due 5 s ago, and no pump runs
    dispatch("order.paid", {"id": 1})  # no worker: no processor takes it
    time.sleep(0.3)
    found = status_json()
    assert found["delayed"]["due"] == 1 and 5 <= found["delayed"]["pump_lag_s"] < 60
    sms = next(q for q in found["queues"] if q["name"] == "noti.sms")
    assert 0.3 <= sms["oldest_age_s"] < 60
    assert found["events"]["backlog"] == 1 and 0.3 <= found["events"]["oldest_age_s"] < 60
    assert found["events"]["processor"] is None
    lock = '{"token":"t","host":"elsewhere","pid":7,"since_ms":5}'
    rt.redis.set(rt.keys.event_lock, lock, px=60_000)
    processor = status_json()["events"]["processor"]
    assert (processor["host"], processor["pid"]) == ("elsewhere", 7)
    assert 0 < processor["lock_ttl_ms"] <= 60_000
