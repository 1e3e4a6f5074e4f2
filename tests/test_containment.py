"""noti's Celery app inside a host project's environment: the host's ``CELERY_*`` variables
and Django settings do not reach it (the interop issue's containment point, in part)."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest
import redis

import noti
from noti.celery.app import IGNORED_CELERY_VARIABLES, app
from noti.core.record import Status
from tests.conftest import BASE_ENV, wait_until

pytestmark = pytest.mark.integration

PHONE = "+8613912345678"


@pytest.fixture
def host_broker(redis_server: str) -> Any:
    """A database of the test Redis that stands for the host project's own broker."""
    url = f"{redis_server}/4"
    client = redis.Redis.from_url(url)
    client.flushdb()
    yield url
    client.flushdb()


@pytest.mark.parametrize("name", IGNORED_CELERY_VARIABLES)
def test_a_host_projects_celery_variables_do_not_move_notis_broker(
    redis_url: str, host_broker: str, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(name, host_broker)
    assert app.conf.broker_url == app.conf.broker_read_url == app.conf.broker_write_url == redis_url
    assert app.conf.result_backend != host_broker
    with app.connection_for_write() as conn:
        assert conn.as_uri().endswith(redis_url.rsplit(":", 1)[1].split("/")[0] + "/1")


@pytest.mark.slow
def test_a_worker_under_a_host_projects_environment_delivers_through_notis_redis(
    rt: Any, spawn_worker: Any, host_broker: str
) -> None:
    # given a noti worker started with a Django project's variables in its environment
    env = {"CELERY_BROKER_URL": host_broker, "DJANGO_SETTINGS_MODULE": "no_such_project.settings"}
    worker = spawn_worker("", env=env)
    # when a notification is queued, then noti's worker delivers it from noti's Redis
    record_id = noti.notify_sms(PHONE, "hello")
    wait_until(lambda: rt.store.get(record_id).status is Status.DONE, timeout=20)
    # and the host's broker saw nothing; the worker said once what it ignores
    assert redis.Redis.from_url(host_broker).dbsize() == 0
    log = worker.output()
    assert log.count("noti ignores CELERY_BROKER_URL") == 1, log[-2000:]
    assert "no_such_project" not in log


def test_notis_tasks_belong_to_notis_app_only() -> None:
    from celery import Celery

    import noti.tasks  # noqa: F401 - what a host project imports to call notify.delay()

    host = Celery("host", set_as_current=False)
    assert not [name for name in host.tasks if name.startswith("noti.")]
    assert {"noti.notify", "noti.deliver", "noti.maintenance.clean"} <= set(app.tasks)


@pytest.mark.parametrize(
    "first_read",
    [
        "app.conf.broker_url",
        "app.conf.result_backend",
        "Publisher(app).broker_url",
        "type(app.AsyncResult('x').backend).__name__",
    ],
)
@pytest.mark.slow
def test_the_first_thing_a_fresh_process_reads_already_ignores_the_host_variables(
    redis_url: str, host_broker: str, first_read: str
) -> None:
    # a fresh process (nothing of noti's configuration read yet) whose first read is `first_read`
    code = (
        f"from noti.celery.app import app\nfrom noti.celery.publish import Publisher\nprint({first_read})\n"
    )
    env = {**os.environ, "CELERY_BROKER_URL": host_broker, "CELERY_RESULT_BACKEND": host_broker}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert host_broker not in result.stdout and "RedisBackend" not in result.stdout, result.stdout


HOST_PROCESS = """
from celery import Celery, current_app, signals

def receivers():
    return {name: len(s.receivers) for name, s in vars(signals).items() if isinstance(s, signals.Signal)}

host = Celery("host", broker=HOST_BROKER)
host.conf.task_default_queue = "host-tasks"
host.set_current()
host.conf.broker_url  # the host's settings, loaded
before = (receivers(), dict(host.conf.changes), host.conf.broker_url)

import noti
record_id = noti.notify_sms("+8613912345678", "hello")
import noti.tasks
noti.tasks.notify.delay(type="sms", target="+8613912345678", text="hi")

assert current_app._get_current_object() is host, current_app.main
assert (receivers(), dict(host.conf.changes), host.conf.broker_url) == before
assert not [name for name in host.tasks if name.startswith("noti.")]
print(record_id)
"""


@pytest.mark.slow
def test_import_noti_and_its_calls_leave_the_host_apps_current_app_settings_and_signals_alone(
    rt: Any, redis_url: str, host_broker: str
) -> None:
    # given a host process with its own current Celery app, when it imports noti and notifies
    code = f"HOST_BROKER = {host_broker!r}\n{HOST_PROCESS}"
    env = {**os.environ, **BASE_ENV, "NOTI_REDIS_URL": redis_url, "NOTI_CHANNELS__SMS__PROVIDER": "sandbox"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    # then its app, settings and signals are as they were, and noti's messages went to noti's Redis
    assert result.returncode == 0, result.stderr
    assert rt.store.get(result.stdout.strip()).target == PHONE
    assert redis.Redis.from_url(host_broker).dbsize() == 0
