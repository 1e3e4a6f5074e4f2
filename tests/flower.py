"""Flower for the tests: a real ``celery -A noti flower`` on a free loopback port, its HTTP API,
and its pages as headless Chromium renders them.

Chromium is Debian's ``chromium`` package (``scripts/test.sh`` installs it as root when it is
missing, as it does ``redis-server``); :func:`find_chromium` finds it, and the ``chromium``
fixture skips the browser checks when it is absent, except under ``CI=true``, where that fails.
"""

from __future__ import annotations

import base64
import html
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.servers import CeleryProcess, free_port

__all__ = [
    "CHROMIUM_INSTALL_HINT",
    "Browser",
    "FlowerProcess",
    "find_chromium",
    "require_chromium",
    "table_rows",
]

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM_INSTALL_HINT = (
    "chromium is not installed (Debian/Ubuntu: apt-get install chromium; scripts/test.sh installs it as root)"
)
#: The tasks page's columns in the tests: Flower's default set plus what the state checks read.
TASKS_COLUMNS = "name,uuid,state,args,result,retries,received,runtime,worker"


class FlowerProcess(CeleryProcess):
    """``celery -A noti flower`` on 127.0.0.1, behind basic auth as ``scripts/run.sh`` runs it."""

    def __init__(self, env: dict[str, str], *, user: str = "ops", password: str = "flower-test") -> None:
        self.port = free_port()
        self.user, self.password = user, password
        self.base = f"http://127.0.0.1:{self.port}"
        super().__init__(
            env,
            "flower",
            "--address=127.0.0.1",
            f"--port={self.port}",
            f"--basic-auth={user}:{password}",
            f"--tasks_columns={TASKS_COLUMNS}",
            "--logging=info",
            name="flower",
        )

    @property
    def auth_base(self) -> str:
        """The base URL with the credentials in it (what Chromium is given)."""
        return f"http://{self.user}:{self.password}@127.0.0.1:{self.port}"

    def request(
        self, path: str, *, auth: bool = True, timeout: float = 10, tries: int = 3
    ) -> tuple[int, bytes]:
        """GET ``path``: (HTTP status, body); status 0 (and the error as the body) when nothing
        answered ``tries`` times (a loaded machine can keep Flower from answering a moment)."""
        req = urllib.request.Request(self.base + path)
        if auth:
            token = base64.b64encode(f"{self.user}:{self.password}".encode()).decode()
            req.add_header("Authorization", f"Basic {token}")
        while True:
            tries -= 1
            try:
                with urllib.request.urlopen(req, timeout=timeout) as response:
                    return response.status, response.read()
            except urllib.error.HTTPError as exc:
                return exc.code, exc.read()
            except OSError as exc:
                if tries <= 0 or self.proc.poll() is not None:
                    return 0, repr(exc).encode()
            time.sleep(0.5)

    def api(self, path: str) -> Any:
        """The JSON ``path`` answers (with credentials); fails on any other status than 200."""
        status, body = self.request(path)
        assert status == 200, f"Flower {path}: HTTP {status}: {body[:500]!r}\n{self.output()[-3000:]}"
        return json.loads(body)

    def wait_ready(self, timeout: float = 60) -> None:
        """Until Flower answers its health check and its pages need the credentials."""
        deadline = time.monotonic() + timeout
        while self.request("/healthcheck", timeout=2, tries=1)[0] != 200:
            assert self.proc.poll() is None, f"Flower exited with {self.proc.returncode}:\n{self.output()}"
            assert time.monotonic() < deadline, f"Flower did not answer within {timeout} s:\n{self.output()}"
            time.sleep(0.2)
        assert self.request("/api/tasks", auth=False)[0] == 401, "Flower's API answered without credentials"

    # --- what Flower knows ------------------------------------------------------------------

    def tasks(self) -> dict[str, dict[str, Any]]:
        """``/api/tasks``: every task Flower holds, by uuid."""
        return self.api("/api/tasks?limit=1000")

    def task_info(self, task_id: str) -> dict[str, Any] | None:
        """``/api/task/info/<id>``, or None when Flower knows no such task (404)."""
        status, body = self.request(f"/api/task/info/{urllib.parse.quote(task_id)}")
        if status == 404:
            return None
        assert status == 200, (
            f"Flower /api/task/info/{task_id}: HTTP {status}: {body[:500]!r}\n{self.output()[-3000:]}"
        )
        return json.loads(body)

    def worker_counters(self) -> dict[str, dict[str, Any]]:
        """What the workers page shows per worker (``/workers?json=1``): the event counters
        (``task-received`` is the page's Processed, ``task-succeeded`` Succeeded, ``task-failed``
        Failed) with the worker's heartbeat fields, by hostname."""
        return {w["hostname"]: w for w in self.api("/workers?json=1")["data"]}

    def task_events_seen(self) -> int:
        """How many task events Flower has counted, over every worker."""
        return sum(n for c in self.worker_counters().values() for k, n in c.items() if k.startswith("task-"))

    def wait_settled(self, *, quiet_s: float = 1.0, timeout: float = 10.0) -> None:
        """Until Flower has counted no new task event for ``quiet_s`` (workers publish their
        buffered events every 0.1 s), or ``timeout`` passed: call it once what is awaited is done."""
        deadline = time.monotonic() + timeout
        seen, since = self.task_events_seen(), time.monotonic()
        while time.monotonic() < deadline and time.monotonic() - since < quiet_s:
            time.sleep(0.2)
            now = self.task_events_seen()
            if now != seen:
                seen, since = now, time.monotonic()

    # --- lifetime ---------------------------------------------------------------------------


# --- the browser ------------------------------------------------------------------------------


def find_chromium() -> str | None:
    """Debian's ``chromium`` (or a ``chromium-browser`` / ``google-chrome`` on the PATH)."""
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


def require_chromium() -> str:
    """Chromium's path; skips the calling test when it is missing, or fails it under ``CI=true``."""
    path = find_chromium()
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail(CHROMIUM_INSTALL_HINT)
        pytest.skip(CHROMIUM_INSTALL_HINT)
    return path


@dataclass(frozen=True, slots=True)
class Browser:
    """Headless Chromium, one fresh process (and throw-away profile) per page."""

    binary: str
    workdir: Path

    def _run(self, url: str, *extra: str, budget_ms: int = 5000) -> subprocess.CompletedProcess[str]:
        profile = tempfile.mkdtemp(prefix="chromium-", dir=self.workdir)
        cmd = [
            self.binary,
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--no-first-run",
            "--disable-dev-shm-usage",
            f"--user-data-dir={profile}",
            "--window-size=1400,1000",
            # let the page's scripts fetch and draw the table before the DOM or the picture is taken
            f"--virtual-time-budget={budget_ms}",
            *extra,
            url,
        ]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
        finally:
            shutil.rmtree(profile, ignore_errors=True)
        assert done.returncode == 0, f"{' '.join(cmd)} exited with {done.returncode}:\n{done.stderr[-3000:]}"
        return done

    def dom(self, url: str) -> str:
        """The page's DOM after its scripts ran (``--dump-dom``)."""
        return self._run(url, "--dump-dom").stdout

    def screenshot(self, url: str, path: Path) -> Path:
        """A 1400x1000 PNG of the rendered page at ``path``."""
        self._run(url, f"--screenshot={path}")
        assert path.is_file() and path.stat().st_size > 0, f"no screenshot at {path}"
        return path


_ROW = re.compile(r"<tr\b([^>]*)>(.*?)</tr>", re.S)
_ROW_ID = re.compile(r'\bid="([^"]*)"')
_CELL = re.compile(r"<t([dh])\b[^>]*>(.*?)</t[dh]>", re.S)
_TAG = re.compile(r"<[^>]+>")


def _text(fragment: str) -> str:
    """A cell's text as shown: tags dropped without a space (Flower splits a worker's name
    into two spans, ``w`` + ``@host``), whitespace runs made one space."""
    return " ".join(html.unescape(_TAG.sub("", fragment)).split())


def table_rows(dom: str, table_id: str) -> list[dict[str, str]]:
    """The body rows of the DataTables table ``table_id`` as the page's scripts filled it: one
    dict per row, cell texts by their column labels, and the row's element id under ``"_id"``
    (Flower's tasks table gives each row its task's uuid; its UUID cell holds the uuid twice,
    in full and shortened, for the two widths of the page). DataTables moves the visible header
    into a table of its own and leaves a hidden sizing row with the same labels in this one."""
    start = dom.find(f'id="{table_id}"')
    assert start >= 0, f"no table #{table_id} in the rendered page:\n{_text(dom)[:2000]}"
    table = dom[start : dom.find("</table>", start)]
    header: list[str] = []
    rows: list[dict[str, str]] = []
    for attrs, row in _ROW.findall(table):
        cells = _CELL.findall(row)
        if cells and all(kind == "h" for kind, _ in cells):
            header = header or [_text(c) for _, c in cells]
            continue
        values = [_text(c) for _, c in cells]
        if len(values) != len(header):  # "No data available in table" spans every column
            continue
        row_id = _ROW_ID.search(attrs)
        rows.append({**dict(zip(header, values, strict=True)), "_id": row_id.group(1) if row_id else ""})
    return rows
