"""``NOTI_IMPORTS``: the user's task modules, imported by the CLI, the API and the workers,
so that the README's ``noti listener add 'order.*' -task shop.tasks.audit`` works from a
shell; a module that cannot be imported is refused with a code naming it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from noti.errors import InvalidConfig
from noti.events import Events, EventStatus
from tests.conftest import ADMIN, BASE_ENV, ROOT, WorkerProcess, wait_until
from tests.test_events_processing import WORKER_CONFIG

SHOP_TASKS = """
from celery import shared_task


@shared_task(name="shop.tasks.audit")
def audit(event):
    return {"audited": event["payload"]["id"], "event": event["name"]}
"""


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    """A directory holding the user's package ``shop`` with its ``shop.tasks`` module."""
    package = tmp_path / "shop"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "tasks.py").write_text(SHOP_TASKS)
    return tmp_path


def shell(command: str, redis_url: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``command`` run by /bin/sh in a fresh environment, with the venv's ``noti`` on PATH."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    full = {
        "PATH": path,
        "HOME": os.environ.get("HOME", "/tmp"),
        **BASE_ENV,
        "NOTI_REDIS_URL": redis_url,
        **env,
    }
    return subprocess.run(
        ["/bin/sh", "-c", command], env=full, cwd="/", capture_output=True, text=True, timeout=60
    )


@pytest.mark.slow
def test_the_readme_listener_example_works_from_a_shell(rt: Any, redis_url: str, shop: Path) -> None:
    # given the user's task module on PYTHONPATH
    env = {"PYTHONPATH": str(shop), "NOTI_USER": ADMIN}
    # when the two lines of the docs (docs/howto/events.md) run from a shell, as printed
    printed = (
        "export NOTI_IMPORTS=shop.tasks          "
        '# shop/tasks.py defines @shared_task(name="shop.tasks.audit")\n'
        "noti listener add 'order.*' -task shop.tasks.audit\n"
    )
    assert printed in (ROOT / "docs" / "howto" / "events.md").read_text()
    done = shell(printed, redis_url, **env)
    # then the listener is stored, its task checked, and its name printed
    assert done.returncode == 0, done.stderr
    [listener] = Events(rt).list_listeners(user=ADMIN)
    assert done.stdout.strip() == listener.name
    action = {"kind": "task", "task": "shop.tasks.audit"}
    assert (listener.event, listener.action.to_json()) == ("order.*", action)


@pytest.mark.slow
def test_a_module_that_cannot_be_imported_is_refused_with_its_name(
    rt: Any, redis_url: str, shop: Path
) -> None:
    (shop / "shop" / "broken.py").write_text("raise RuntimeError('the database is not configured')\n")
    command = "noti listener add 'order.*' -task shop.tasks.audit"
    cases = {
        "shop.nosuch": "ModuleNotFoundError: No module named 'shop.nosuch'",
        "shop.tasks,shop.broken": "RuntimeError: the database is not configured",
    }
    for imports, cause in cases.items():
        done = shell(command, redis_url, PYTHONPATH=str(shop), NOTI_IMPORTS=imports)
        bad = imports.split(",")[-1]
        assert done.returncode == 1, done.stdout
        assert done.stderr.strip().startswith(
            f"e.noti.config.imports: NOTI_IMPORTS names the module '{bad}', which cannot be imported:"
        ), done.stderr
        assert cause in done.stderr
    # and without NOTI_IMPORTS the task is unknown, and the message says where to name it
    done = shell(command, redis_url, PYTHONPATH=str(shop))
    assert done.returncode == 1 and done.stderr.startswith("e.noti.listener.notask:"), done.stderr
    assert "NOTI_IMPORTS" in done.stderr
    assert Events(rt).list_listeners(user=ADMIN) == []


def test_the_api_imports_them_and_names_a_bad_one(configure: Any, shop: Path, monkeypatch: Any) -> None:
    monkeypatch.syspath_prepend(str(shop))
    configure(imports=["shop.missing"])
    from noti.events import add_listener

    with pytest.raises(InvalidConfig) as caught:
        add_listener("order.*", "shop.tasks.audit")
    assert caught.value.code == "e.noti.config.imports" and "'shop.missing'" in caught.value.message


@pytest.mark.slow
def test_a_worker_imports_them_and_runs_the_listener(
    rt: Any, spawn_worker: Any, shop: Path, redis_url: str
) -> None:
    # given a listener added from a shell, and a worker with the same NOTI_IMPORTS
    env = {"PYTHONPATH": str(shop), "NOTI_IMPORTS": "shop.tasks"}
    added = shell("noti listener add 'order.*' -task shop.tasks.audit -name audit", redis_url, **env)
    assert added.returncode == 0, added.stderr
    spawn_worker(WORKER_CONFIG, "-P", "threads", "-c", "2", env=env)
    # when an event is dispatched from the shell
    sent = shell("""noti event dispatch order.paid -data '{"id": 42}'""", redis_url, **env)
    assert sent.returncode == 0, sent.stderr
    event_id = sent.stdout.strip()
    # then the worker ran the user's task with it
    api = Events(rt)
    event = wait_until(
        lambda: (e := api.get(event_id, user=ADMIN)).status is EventStatus.DONE and e, timeout=60
    )
    assert not event.failed, event.error_message
    assert event.outcomes[0].result == {"audited": 42, "event": "order.paid"}


@pytest.mark.slow
def test_a_worker_with_a_module_that_cannot_be_imported_refuses_to_start_naming_it(
    rt: Any, redis_url: str, shop: Path, tmp_path: Path
) -> None:
    # given a waiting event, and NOTI_IMPORTS naming a missing module, or one whose import fails
    (shop / "shop" / "broken.py").write_text("raise RuntimeError('the database is not configured')\n")
    event_id = Events(rt, start_processor=lambda: None).dispatch("order.paid", {"id": 1})
    cases = {
        "shop.nosuch": "ModuleNotFoundError: No module named 'shop.nosuch'",
        "shop.tasks,shop.broken": "RuntimeError: the database is not configured",
    }
    for imports, cause in cases.items():
        config = tmp_path / "w.toml"
        config.write_text(WORKER_CONFIG)
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("NOTI_")},
            **BASE_ENV,
            "NOTI_REDIS_URL": redis_url,
            "NOTI_CONFIG": str(config),
            "PYTHONPATH": str(shop),
            "NOTI_IMPORTS": imports,
        }
        worker = WorkerProcess(env, "-P", "threads", "-c", "1")
        try:
            # when it starts, then it stops before it is ready, with the code naming the module
            worker.proc.wait(60)
        finally:
            worker.kill()
        output = worker.output()
        bad = imports.split(",")[-1]
        assert worker.proc.returncode != 0, output[-3000:]
        assert (
            f"e.noti.config.imports: NOTI_IMPORTS names the module '{bad}', which cannot be imported:"
            in output
        ), output[-3000:]
        assert cause in output and "ready." not in output
        # and that is the worker's last word, before Celery tried to import the module itself
        last = [line for line in output.splitlines() if line.strip()][-1]
        assert last.startswith("noti.errors.InvalidConfig: e.noti.config.imports: "), output[-3000:]
        assert "import_task_module" not in output
    # and it ran nothing: the event still waits
    assert Events(rt).get(event_id, user=ADMIN).status is EventStatus.NEW
