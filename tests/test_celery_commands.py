"""`celery -A noti beat` and `celery -A noti flower` work as written."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

import noti
from tests.conftest import ADMIN, BASE_ENV, ROOT, wait_until
from tests.servers import free_port

pytestmark = [pytest.mark.slow, pytest.mark.integration]
PHONE = "+8613912345678"


def _env(redis_url: str, **extra: str) -> dict[str, str]:
    return {**os.environ, **BASE_ENV, "NOTI_REDIS_URL": redis_url, **extra}


def _beat_command(schedule: Any) -> list[str]:
    return [sys.executable, "-m", "celery", "-A", "noti", "beat", "-l", "INFO", "-s", str(schedule)]


def test_beat_sends_the_clean_job_on_its_interval(rt: Any, redis_url: str, tmp_path: Any) -> None:
    beat = subprocess.Popen(
        _beat_command(tmp_path / "schedule"),
        env=_env(redis_url, NOTI_CLEAN_INTERVAL_S="1"),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:

        def cleans() -> int:  # the other jobs (delivery_tick every 2 s) share the queue
            rows = rt.redis.lrange("noti.maintenance:9", 0, -1)
            return sum(json.loads(row)["headers"]["task"] == "noti.maintenance.clean" for row in rows)

        wait_until(lambda: cleans() >= 2 or beat.poll() is not None, timeout=40)
        assert beat.poll() is None
        assert any(k.startswith("noti:beat:") for k in rt.redis.keys("noti:beat:*"))  # RedBeat state
    finally:
        beat.terminate()
        output = beat.communicate(timeout=20)[0]
    assert "Traceback" not in output, output


def test_flower_shows_queue_lengths_across_priority_steps_behind_auth(rt: Any, redis_url: str) -> None:
    for level in (1, 50, 1000):
        noti.notify_sms(PHONE, f"lv {level}", user=ADMIN, lv=level)
    port = free_port()
    flower = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "noti",
            "flower",
            "--address=127.0.0.1",
            f"--port={port}",
            "--basic-auth=ops:s3cret",
        ],
        env=_env(redis_url),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"

    def get(path: str, auth: bool = True) -> tuple[int, str]:
        request = urllib.request.Request(base + path)
        if auth:
            request.add_header("Authorization", "Basic " + base64.b64encode(b"ops:s3cret").decode())
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, ""
        except OSError:
            return 0, ""

    try:
        wait_until(lambda: get("/healthcheck")[0] == 200 or flower.poll() is not None, timeout=40)
        assert flower.poll() is None
        assert get("/api/queues/length", auth=False)[0] == 401
        status, body = get("/api/queues/length")
        assert status == 200
        lengths = {q["name"]: q["messages"] for q in json.loads(body)["active_queues"]}
        assert lengths["noti.sms"] == 3
    finally:
        flower.terminate()
        flower.communicate(timeout=20)


def test_two_beats_fire_each_job_once_per_interval(rt: Any, redis_url: str, tmp_path: Any) -> None:
    env = _env(redis_url, NOTI_CLEAN_INTERVAL_S="1")
    beats = [
        subprocess.Popen(
            _beat_command(tmp_path / f"s{i}"),
            env=env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for i in range(2)
    ]

    def cleans() -> int:
        return sum(
            1
            for raw in rt.redis.lrange("noti.maintenance:9", 0, -1)
            if json.loads(raw)["headers"]["task"] == "noti.maintenance.clean"
        )

    try:
        wait_until(lambda: cleans() >= 1, timeout=40)
        first = time.monotonic()
        start_count = cleans()
        time.sleep(6)
        fired = cleans() - start_count
        elapsed = time.monotonic() - first
    finally:
        for beat in beats:
            beat.terminate()
        for beat in beats:
            beat.wait(20)
    # one beat holds the RedBeat lock: about one clean per second, not two
    assert fired <= elapsed + 1.5, (fired, elapsed)
    assert fired >= 3
