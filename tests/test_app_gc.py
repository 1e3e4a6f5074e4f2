"""Worker processes freeze their start-up objects out of the collector's full collections."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import BASE_ENV, ROOT

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SCRIPT = """
import gc
import sys
from celery import Celery
from celery import signals
from celery.signals import worker_init, worker_process_init, worker_ready

def receivers():
    return {name: list(s.receivers) for name, s in vars(signals).items() if isinstance(s, signals.Signal)}

before = receivers()
import noti.celery.app
import noti.tasks
from noti.celery.worker import enter_noti_worker, in_noti_worker

assert gc.get_freeze_count() == 0
# a host project's worker in a process that imported noti: no hook of noti's is connected
assert receivers() == before, "noti hooked Celery's signals"
worker_init.send(sender=None)
worker_ready.send(sender=None)
worker_process_init.send(sender=None)
assert gc.get_freeze_count() == 0, "noti froze a host project's worker"
assert not in_noti_worker()
# noti's worker (the NotiProcess bootstep of noti's app calls this)
from kombu.utils.imports import symbol_by_name
from noti.celery.worker import NotiProcess
assert NotiProcess in {symbol_by_name(step) for step in noti.celery.app.app.steps["worker"]}
enter_noti_worker(noti.celery.app.app)
assert in_noti_worker() and receivers() != before
worker_ready.send(sender=None)
frozen = gc.get_freeze_count()
print(frozen)
junk = [[] for _ in range(1000)]
worker_process_init.send(sender=None)
print(gc.get_freeze_count())
"""


def test_a_worker_freezes_what_it_holds_once_started_and_only_once() -> None:
    # given a process with noti's app loaded (a fresh one: freezing is for good)
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        env={**os.environ, **BASE_ENV},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    # when the worker is ready, its objects are moved to the permanent generation
    first, second = (int(line) for line in result.stdout.split())
    assert first > 10_000
    # and a second signal in the same process (a pool child's init) freezes nothing more
    assert second == first
