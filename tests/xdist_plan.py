"""How ``make test`` spreads the suite over pytest-xdist's workers, and which tests are slow.

``scripts/test.sh`` runs each suite with ``-n N --dist loadgroup --no-loadscope-reorder``:

- the tests that share a fixture of module or package scope (an API server, a deployment, a
  Redis Cluster, a worker some module starts once) run together on one worker, which sets the
  fixture up once and runs them in pytest's order (tests/test_hostile_input.py counts on it);
  so do tests marked ``xdist_group``. The other tests go one by one to whichever worker is free;
- the workers take them in collection order, which this plugin makes :data:`LONGEST` first,
  then the other ``slow`` tests, then the rest: the long runs start at once, side by side,
  instead of one of them running alone at the end.

pytest-xdist's own ``loadgroup`` learns the groups from ``@group`` suffixes its workers append
to the test ids, which pytest 9.2 no longer lets a plugin change (pytest-xdist issue 1386): the
groups silently vanish. Here each worker writes the groups it found to a file in a directory the
controller names (``workerinput``), and the controller's scheduler reads them (every worker
collects the same tests, so any worker's file will do).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

#: Fixtures that start processes of their own (Celery worker subprocesses, ``noti serve``): a test
#: that uses one, itself or through another fixture, is marked ``slow`` (not in ``make test-fast``).
PROCESS_FIXTURES = frozenset({"spawn_worker", "api", "deployment"})

#: The longest tests (a minute or more each on 2 busy cores), by test id prefix, longest first.
LONGEST = (
    "tests/test_bench_smoke.py::",
    "tests/test_chaos.py::test_the_short_chaos_run",
    "tests/test_chaos.py::test_the_short_digest_chaos_run",
    "tests/test_http_schema.py::",
    "tests/test_hostile_input.py::",
    "tests/test_sentinel.py::test_workers_beat",
    "tests/test_run_script.py::test_make_run_at_a_terminal",
    "tests/test_run_script.py::test_ctrl_c",
    "tests/test_redis_outage.py::",
    "tests/test_celery_native.py::test_inspect_lists_notifications_in_flight",
)

_GROUPS_DIR = pytest.StashKey[Path]()


def pytest_itemcollected(item: pytest.Item) -> None:
    if PROCESS_FIXTURES.intersection(getattr(item, "fixturenames", ())):
        item.add_marker(pytest.mark.slow)


def group_of(item: pytest.Item) -> str | None:
    """The group the item runs in: its ``xdist_group`` marks, else the package or module whose
    tests share a fixture with it (session fixtures do not count: each worker sets its own up)."""
    marked = sorted(
        {
            str(m.args[0] if m.args else m.kwargs.get("name", "default"))
            for m in item.iter_markers("xdist_group")
        }
    )
    if marked:
        return "_".join(marked)
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    module = None
    for defs in info.name2fixturedefs.values():
        fixture = defs[-1]
        if fixture.scope == "package":
            return fixture.baseid or "."
        if fixture.scope in ("module", "class"):
            module = item.nodeid.split("::", 1)[0]
    return module


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In an xdist worker: the order (the tests of a group keep pytest's order, which sets a
    parametrized module fixture up once per parameter, and move with the first of them), and
    the groups, written for the controller."""
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    if workerinput is None:
        return

    def rank(item: pytest.Item) -> int:
        for index, prefix in enumerate(LONGEST):
            if item.nodeid.startswith(prefix):
                return index
        return len(LONGEST) + (0 if item.get_closest_marker("slow") else 1)

    groups = {item.nodeid: group_of(item) for item in items}
    ranks = {item.nodeid: rank(item) for item in items}
    first: dict[str, int] = {}
    for nodeid, group in groups.items():
        if group is not None:
            first[group] = min(first.get(group, ranks[nodeid]), ranks[nodeid])
    items.sort(key=lambda item: first.get(groups[item.nodeid] or "", ranks[item.nodeid]))  # stable

    where = workerinput.get("noti_groups_dir")
    if where is not None:
        name = Path(where) / f"{workerinput.get('workerid', 'gw')}.json"
        written = name.with_suffix(".tmp")
        written.write_text(json.dumps({nodeid: group for nodeid, group in groups.items() if group}))
        os.replace(written, name)  # whole, or not there


# --- the controller -------------------------------------------------------------------------


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput") or not config.pluginmanager.hasplugin("xdist"):
        return
    if config.getoption("dist", None) == "loadgroup" and config.getoption("numprocesses", None):
        config.stash[_GROUPS_DIR] = Path(tempfile.mkdtemp(prefix="noti-xdist-groups-"))


def pytest_unconfigure(config: pytest.Config) -> None:
    where = config.stash.get(_GROUPS_DIR, None)
    if where is not None:
        shutil.rmtree(where, ignore_errors=True)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    where = node.config.stash.get(_GROUPS_DIR, None)
    if where is not None:
        node.workerinput["noti_groups_dir"] = str(where)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    where = config.stash.get(_GROUPS_DIR, None)
    if where is None:
        return None
    from xdist.scheduler import LoadGroupScheduling

    class FixtureGroupScheduling(LoadGroupScheduling):  # type: ignore[misc]
        """``loadgroup`` with the groups the workers wrote (see the module's docstring)."""

        groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:
                written = sorted(where.glob("*.json"))
                self.groups = json.loads(written[0].read_text()) if written else {}
            return self.groups.get(nodeid) or super()._split_scope(nodeid)

    return FixtureGroupScheduling(config, log)
