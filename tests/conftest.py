"""Test fixtures: a private redis-server, noti runtimes on it, real Celery workers.

Redis is real: the session starts its own ``redis-server`` on a free loopback port (or uses
``NOTI_TEST_REDIS_URL``), so tests never touch another process's data. Under ``CI=true`` a
missing ``redis-server`` fails the run instead of skipping it.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import redis

from tests import servers
from tests.servers import ApiProcess, CeleryProcess

# how `make test` marks the slow tests and spreads the suite over pytest-xdist's workers
pytest_plugins = ["tests.xdist_plan"]

for _name in [n for n in os.environ if n.startswith("NOTI_") and n != "NOTI_TEST_REDIS_URL"]:
    del os.environ[_name]
# no settings file unless a test names one: never the noti.toml `make run` writes in the checkout
os.environ["NOTI_CONFIG"] = ""
# pytest-xdist gives its workers COLUMNS and LINES (the size of the terminal it runs in), which
# a test run in one process does not have; rich sizes its tables by them (the tests of the CLI's
# output state which terminal they mean).
if "PYTEST_XDIST_WORKER" in os.environ:
    for _name in ("COLUMNS", "LINES"):
        os.environ.pop(_name, None)
# A suite started as a background job (`make test &`, a CI runner's non-interactive shell)
# inherits SIGINT ignored, and so would every process a test starts: the tests that press
# Ctrl-C (make run, noti status -watch) would then wait forever. A handled SIGINT is reset to
# the default in a child at exec, an ignored one is not.
signal.signal(signal.SIGINT, signal.default_int_handler)

ROOT = servers.ROOT
ADMIN, MEMBER, ALICE, BOB = "boss", "ops", "alice", "bob"
BASE_ENV = {
    "NOTI_ROOT_ADMINS": ADMIN,
    "NOTI_ROOT_MEMBERS": MEMBER,
    "NOTI_USER": ALICE,
    "NOTI_VISIBILITY_TIMEOUT_S": "4",
    "NOTI_UNACKED_RESTORE_INTERVAL_S": "1",
    "NOTI_PUMP_INTERVAL_S": "0.05",
}


def wait_until(predicate: Callable[[], Any], timeout: float = 20.0, interval: float = 0.05) -> Any:
    """Poll ``predicate`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s: {predicate}")
        time.sleep(interval)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[str]:
    """URL of a Redis server for this test session (without a database number)."""
    external = os.environ.get("NOTI_TEST_REDIS_URL")
    if external:
        yield external.rstrip("/")
        return
    if shutil.which("redis-server") is None:
        if os.environ.get("CI") == "true":
            pytest.fail(servers.INSTALL_HINT)
        pytest.skip(servers.INSTALL_HINT)
    with servers.redis_server("--databases", "16", *servers.debug_command_args()) as url:
        yield url


@pytest.fixture(scope="session")
def redis_url(redis_server: str) -> str:
    """The database the tests (and the in-process Celery app) use; flushed before each test."""
    url = f"{redis_server}/1"
    os.environ.update(BASE_ENV)
    os.environ["NOTI_REDIS_URL"] = url
    import noti.config
    import noti.sending.runtime

    noti.config.get_settings.cache_clear()
    noti.sending.runtime.configure()
    from noti.celery.app import app

    assert app.conf.broker_url == url  # the app's configuration is read now, once
    return url


@pytest.fixture
def configure(redis_url: str) -> Iterator[Callable[..., Any]]:
    """Flush the test database and return a function that (re)configures noti's runtime."""
    import noti.sending.runtime

    redis.Redis.from_url(redis_url).flushdb()

    def _configure(**overrides: Any) -> Any:
        overrides.setdefault(
            "channels",
            {
                "sms": {"provider": "sandbox"},
                "weixin": {"provider": "sandbox"},
                "email": {"provider": "sandbox"},
                "webhook": {"provider": "sandbox"},
            },
        )
        # Tests of other features name the providers they configure freely: every configured
        # provider (and the sandbox) is granted to everyone unless a test gives its own grants.
        # The grant rules themselves are tested with explicit grants (tests/test_access.py).
        overrides.setdefault("provider_grants", {"*": ["sandbox", *overrides.get("providers", {})]})
        # An event processor run in this process stops above a resident-memory limit measured
        # on this very process, which the whole suite has grown past the default 256 MB by the
        # time the event tests run: the limit is tested where it is set on purpose
        # (tests/test_events_processing.py), not by the size of the suite.
        overrides.setdefault("event_processor_max_memory_mb", 1_000_000)
        return noti.sending.runtime.configure(**overrides)

    yield _configure
    noti.sending.runtime.configure()


@pytest.fixture
def rt(configure: Callable[..., Any]) -> Any:
    """A runtime with the sandbox as every channel's provider."""
    return configure()


@pytest.fixture
def worker(start_worker_now: Callable[[], Any]) -> Iterator[Any]:
    """A real Celery worker (threads pool) running in this process on the test database."""
    with start_worker_now() as running:
        yield running


def start_in_process_worker(app: Any, **options: Any) -> Any:
    """``celery.contrib.testing``'s ``start_worker`` on an event loop of its own. kombu's event
    loop is process-wide and Celery < 5.7 reuses the one an earlier in-process worker left,
    whose timer is not the new worker's: its ETA and countdown tasks never ran. (A test
    process artefact: a worker process runs one worker.)"""
    from celery.contrib.testing.worker import start_worker
    from kombu.asynchronous import set_event_loop

    set_event_loop(None)
    return start_worker(app, **options)


@pytest.fixture
def start_worker_now(rt: Any) -> Callable[[], Any]:
    """The ``worker``, started when the test says: ``with start_worker_now(): ...``."""
    from noti.celery.app import app

    def _start() -> Any:
        return start_in_process_worker(
            app,
            pool="threads",
            concurrency=4,
            perform_ping_check=False,
            loglevel="WARNING",
            shutdown_timeout=20,
        )

    return _start


def sandbox_outbox(runtime: Any, name: str = "sandbox") -> list[dict[str, Any]]:
    from noti.providers.sandbox import read_outbox

    return read_outbox(runtime.redis, runtime.keys, name)


class WorkerProcess(CeleryProcess):
    """A ``celery -A noti worker`` subprocess with its own environment."""

    def __init__(self, env: dict[str, str], *args: str, name: str = "w") -> None:
        worker_args = ("-l", "INFO", "--without-mingle", "--without-gossip", "-n", f"{name}@%h", *args)
        super().__init__(env, "worker", *worker_args, name=name)

    def wait_ready(self, timeout: float = 30) -> None:
        wait_until(lambda: "ready." in self.output() or not self.alive(), timeout=timeout)
        assert self.alive(), self.output()


@pytest.fixture
def spawn_worker(redis_url: str, tmp_path: Path) -> Iterator[Callable[..., WorkerProcess]]:
    """Start worker subprocesses: ``spawn_worker(config_toml, *celery_args, env=...)``."""
    started: list[WorkerProcess] = []

    def _spawn(
        config: str = "", *args: str, env: dict[str, str] | None = None, name: str = "w"
    ) -> WorkerProcess:
        config_file = tmp_path / f"{name}-{len(started)}.toml"
        config_file.write_text(config or '[channels.sms]\nprovider = "sandbox"\n')
        full_env = {
            **os.environ,
            **BASE_ENV,
            "NOTI_REDIS_URL": redis_url,
            "NOTI_CONFIG": str(config_file),
            **(env or {}),
        }
        proc = WorkerProcess(full_env, *args, name=name)
        started.append(proc)
        proc.wait_ready()
        return proc

    yield _spawn
    for proc in started:
        proc.stop()


#: The body limit of the ``api`` server (``NOTI_HTTP_BODY_MAX_BYTES``).
API_BODY_MAX = 64 * 1024
#: The ``api`` server's providers: the sandbox for every channel, and ``vendor``, a sandbox that
#: takes signed receipts (``X-Sandbox-Signature`` with this secret).
API_RECEIPT_SECRET = "s3cret"
_API_CONFIG = (
    "".join(f'[channels.{c}]\nprovider = "sandbox"\n' for c in ("sms", "weixin", "email", "webhook"))
    + f'[providers.vendor]\nkind = "sandbox"\nreceipt_secret = "{API_RECEIPT_SECRET}"\n'
    # granted to everyone, as ``configure`` grants its providers (tests/test_access.py: the rules)
    + '[provider_grants]\n"*" = ["vendor"]\n'
)


@pytest.fixture(scope="module")
def api(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiProcess]:
    """``noti serve`` on a free loopback port, on the test database, bodies up to 64 KiB."""
    config = tmp_path_factory.mktemp("api") / "noti.toml"
    config.write_text(_API_CONFIG)
    with serving_api(
        redis_url,
        config,
        NOTI_HTTP_BODY_MAX_BYTES=str(API_BODY_MAX),
        NOTI_PUBLIC_URL="https://noti.example.com/base",
    ) as server:
        yield server


@contextmanager
def serving_api(
    redis_url: str,
    config: Path | None = None,
    *,
    port: int | None = None,
    environ: Mapping[str, str] | None = None,
    **env: str,
) -> Iterator[ApiProcess]:
    """``noti serve`` on the test database, ready, stopped afterwards: its settings from
    ``config`` (a TOML file) and ``env``, over ``environ`` (default: this process's)."""
    full = {
        **(os.environ if environ is None else environ),
        **BASE_ENV,
        "NOTI_REDIS_URL": redis_url,
        **({"NOTI_CONFIG": str(config)} if config is not None else {}),
        **env,
    }
    server = ApiProcess(full, "--no-access-log", port=port)
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()
