"""The supported version ranges: the lowest versions CI installs are pyproject.toml's lower
bounds, every Celery setting noti sets exists in the installed Celery, and noti and its
workers run without Flower (an extra)."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from typing import Any

import pytest
from celery.app.defaults import NAMESPACES, flatten
from packaging.requirements import Requirement

import noti
from noti.core.record import Status
from tests.conftest import BASE_ENV, ROOT, wait_until

pytestmark = pytest.mark.integration

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
LOWEST = ROOT / "scripts" / "constraints-lowest.txt"

#: Settings in noti's Celery configuration that are not Celery's: RedBeat's (read by its
#: scheduler) and ``visibility_timeout`` (kombu's, also passed in the transport options).
NOT_CELERYS = {"visibility_timeout", "redbeat_redis_url", "redbeat_redis_options", "redbeat_key_prefix"}
NOT_CELERYS |= {"redbeat_lock_timeout"}


def _lowest_pins() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in LOWEST.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            pins[name.strip().lower()] = version.strip()
    return pins


def _lower_bound(requirement: Requirement) -> str | None:
    bounds = [spec.version for spec in requirement.specifier if spec.operator == ">="]
    return bounds[0] if bounds else None


def _padded(version: str) -> tuple[int, ...]:
    parts = [int(p) for p in version.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


def test_the_lowest_versions_ci_installs_are_the_lower_bounds_of_pyproject() -> None:
    pins = _lowest_pins()
    declared = [Requirement(r) for r in PYPROJECT["project"]["dependencies"]]
    for extra in ("flower", "http"):  # the extras the lowest-versions venv's test extra installs
        declared += [Requirement(r) for r in PYPROJECT["project"]["optional-dependencies"][extra]]
    for requirement in declared:
        bound = _lower_bound(requirement)
        assert bound is not None, f"{requirement} has no lower bound"
        name = requirement.name.lower()
        assert name in pins, f"scripts/constraints-lowest.txt does not pin {name}"
        assert _padded(pins[name]) == _padded(bound), f"{name}: pinned {pins[name]}, lower bound {bound}"
    assert set(pins) == {r.name.lower() for r in declared}


def test_flower_is_an_extra_that_the_test_extra_and_make_run_install() -> None:
    dependencies = [Requirement(r).name for r in PYPROJECT["project"]["dependencies"]]
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert "flower" not in dependencies
    assert [Requirement(r).name for r in extras["flower"]] == ["flower"]
    # the HTTP API (noti serve) is an extra too, as are the vendor libraries of some channels
    [own] = [Requirement(r) for r in extras["test"] if Requirement(r).name == "noti"]
    assert {"flower", "http", "push", "email-apis", "apprise"} <= own.extras
    # make run installs Flower, the HTTP API and msgspec (noti.fastjson)
    assert (
        "NOTI_EXTRAS=${NOTI_EXTRAS:-flower,http,fast} scripts/venv.sh"
        in (ROOT / "scripts" / "run.sh").read_text()
    )
    assert [Requirement(r).name for r in extras["fast"]] == ["msgspec"]


def test_every_celery_setting_noti_sets_exists_in_the_installed_celery(rt: Any) -> None:
    from noti.celery.app import celery_config

    known = {name for name, _ in flatten(NAMESPACES)}
    unknown = set(celery_config(rt.settings)) - known - NOT_CELERYS
    assert not unknown, f"not settings of Celery {__import__('celery').__version__}: {sorted(unknown)}"


WITHOUT_FLOWER = """
import sys


class NoFlower:
    # as if Flower were not installed
    def find_spec(self, name, path=None, target=None):
        if name == "flower" or name.startswith("flower."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, NoFlower())
import noti, noti.tasks, noti.cli, noti.celery.app  # noqa: E401
assert not [m for m in sys.modules if m.split(".")[0] == "flower"]
print("imported without flower", flush=True)
from celery.__main__ import main
sys.argv = ["celery", "-A", "noti", "worker", "-l", "INFO", "-P", "threads", "-c", "2",
            "--without-mingle", "--without-gossip", "-n", "noflower@%h"]
main()
"""


@pytest.mark.slow
def test_noti_and_a_worker_run_without_flower(rt: Any, tmp_path: Any) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOTI_")}
    env |= {**BASE_ENV, "NOTI_REDIS_URL": rt.settings.redis_url, "NOTI_CHANNELS__SMS__PROVIDER": "sandbox"}
    log = tmp_path / "worker.log"
    record_id = noti.notify_sms("+8613912345678", "no Flower needed")
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", WITHOUT_FLOWER], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        wait_until(lambda: rt.store.get(record_id).status is not Status.WAITING or proc.poll(), timeout=60)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    output = log.read_text(errors="replace")
    assert "imported without flower" in output, output[-3000:]
    assert rt.store.get(record_id).status is Status.DONE, output[-3000:]
