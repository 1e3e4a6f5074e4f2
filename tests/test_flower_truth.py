"""Flower shows each notification in its true state, in its API and in a real browser (issue 17, point 9).

One scenario for the module: Flower (basic auth, as ``scripts/run.sh`` runs it), a real
``celery -A noti worker`` and a real ``celery -A noti beat`` (its jobs every second or less) on
the test Redis; then five SMS through sandbox providers set up to deliver, to refuse
permanently, to refuse once and then deliver, and to refuse until the attempts run out, plus a
delayed one revoked with ``app.control.revoke(record id)`` before it is due. The tests read
Flower's HTTP API, its workers counters, and its ``/tasks`` and ``/workers`` pages as headless
Chromium renders them (screenshots under the test's ``tmp_path``).

What holds today is a plain test (a delivered notification is SUCCESS in the API and on the
page, and the page shows what the API says). The target — the Celery task id of a delivery
is the record id, and the worker sends truthful events (received, started, then succeeded,
failed, retried or revoked) — checks what the batch worker reports per notification under its
record id (``noti/celery/report.py``). Beat's housekeeping runs meanwhile (and one job is sent
with ``celery -A noti call``), and Flower lists none of it (issue 36, point 5): its tasks send
no task events (``noti/celery/beat.py``), while the worker's log and ``celery inspect stats``
still count every run.
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
import time
import tomllib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis

from noti.core.record import Notification, Status
from tests.conftest import ADMIN, BASE_ENV, WorkerProcess, sandbox_outbox, wait_until
from tests.flower import Browser, FlowerProcess, find_chromium, require_chromium, table_rows
from tests.servers import ROOT, CeleryProcess

pytestmark = [pytest.mark.slow, pytest.mark.integration]

PHONE = "+8613912345678"
#: How long the revoked notification waits before it is due (the revoke must reach the worker first).
REVOKE_DELAY_S = 4.0
#: How long Flower gets to show what the record store already says (events go out every 0.1 s).
FLOWER_LAG_S = 10.0
READY_STATES = {"SUCCESS", "FAILURE", "REVOKED"}
#: Beat's jobs, often enough that each runs while the notifications go out (beat's own
#: intervals are seconds to an hour; the digest tick's 30 s backstop is fixed).
HOUSEKEEPING_ENV = {
    "NOTI_DELIVERY_TICK_INTERVAL_S": "0.5",
    "NOTI_CLEAN_INTERVAL_S": "1",
    "NOTI_SWEEP_INTERVAL_S": "1",
    "NOTI_DEAD_LETTER_TRIM_INTERVAL_S": "1",
    "NOTI_RECEIPT_POLL_INTERVAL_S": "1",
    "NOTI_EVENT_SWEEP_INTERVAL_S": "1",
}
#: The jobs the scenario waits to see run (every beat entry but the digest backstop).
HOUSEKEEPING_RUN = (
    "noti.maintenance.delivery_tick",
    "noti.maintenance.clean",
    "noti.maintenance.sweep_lost",
    "noti.maintenance.trim_dead_letters",
    "noti.maintenance.poll_receipts",
    "noti.events.sweep",
    "noti.events.clean",
)

# Providers for every outcome; the worker reads this file, the test process the same settings.
CONFIG = """\
retry_seconds = 0.5

[channels.sms]
provider = "sandbox"

[providers.sandbox]

[providers.broken]
kind = "sandbox"
fail = "always"
error = "permanent"

[providers.flaky]
kind = "sandbox"
fail_first = 1

[providers.down]
kind = "sandbox"
fail = "always"
"""


@dataclass(frozen=True)
class Case:
    provider: str
    #: The state Flower should show for the task whose uuid is the record id.
    state: str
    #: Whether the task went through RETRY (task-retried, then task-received again).
    retried: bool = False
    options: dict[str, Any] = field(default_factory=dict)


CASES = {
    "delivered": Case("sandbox", "SUCCESS"),
    "failed": Case("broken", "FAILURE"),  # a permanent failure: invalid at once
    "retried": Case("flaky", "SUCCESS", retried=True),  # fails once, delivered on the retry
    "exhausted": Case("down", "FAILURE", retried=True, options={"retry_max": 2}),  # retries run out
    "revoked": Case("sandbox", "REVOKED", options={"delay": REVOKE_DELAY_S}),
}


@dataclass
class Scenario:
    flower: FlowerProcess
    worker: WorkerProcess
    #: Stopped once the notifications are final and every job of :data:`HOUSEKEEPING_RUN` ran.
    beat: CeleryProcess
    #: The task id of the clean job sent by name with ``celery -A noti call`` after beat stopped.
    called: str
    workdir: Path
    ids: dict[str, str]
    #: Each case's record once the store shows it final (None: the record is gone).
    records: dict[str, Notification | None]
    #: Record ids the sandbox providers delivered.
    delivered_ids: set[str]
    #: A notice to a recipient (``notify(recipient=…)``) and the id of its one record.
    notice: tuple[str, str] = ("", "")
    #: That record once final.
    notice_record: Notification | None = None

    def flower_tasks_naming(self, record_id: str) -> list[dict[str, Any]]:
        """Flower's tasks for a record: its uuid is the record id, or its args name it."""
        return [
            t
            for t in self.flower.tasks().values()
            if t.get("uuid") == record_id or t.get("args") == repr([record_id])
        ]


def _final(record: Notification | None) -> bool:
    return record is None or record.status is not Status.WAITING


def housekeeping_tasks() -> set[str]:
    """The tasks beat sends (every entry of the app's schedule)."""
    from noti.celery.app import app

    return {entry["task"] for entry in app.conf.beat_schedule.values()}


def housekeeping_runs(worker_log: str) -> Counter[str]:
    """The housekeeping runs a worker's log shows done, by task name (Celery's ``Task
    <name>[<id>] succeeded in …`` line at INFO)."""
    names = "|".join(re.escape(name) for name in sorted(housekeeping_tasks()))
    return Counter(re.findall(rf"Task ({names})\[[^\]]+\] succeeded in ", worker_log))


@pytest.fixture(scope="module")
def scenario(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    import noti.sending.runtime
    from noti.celery.app import app

    redis.Redis.from_url(redis_url).flushdb()
    workdir = tmp_path_factory.mktemp("flower-truth")
    config = workdir / "noti.toml"
    config.write_text(CONFIG)
    rt = noti.sending.runtime.configure(**tomllib.loads(CONFIG))
    env = {
        **os.environ,
        **BASE_ENV,
        **HOUSEKEEPING_ENV,
        "NOTI_REDIS_URL": redis_url,
        "NOTI_CONFIG": str(config),
    }
    flower = FlowerProcess(env)
    worker: WorkerProcess | None = None
    beat: CeleryProcess | None = None
    try:
        flower.wait_ready()
        worker = WorkerProcess(env, name="flowertruth")
        worker.wait_ready()
        # Flower has seen the worker come online: its event receiver listens (events are a
        # Redis PUBLISH, lost when nobody subscribes)
        wait_until(lambda: any(h.startswith("flowertruth@") for h in flower.worker_counters()), timeout=30)
        # beat's housekeeping runs while the notifications go out, as it does in production
        beat = CeleryProcess(env, "beat", "-l", "INFO", "-s", str(workdir / "beat-schedule"), name="beat")

        sent_at = time.monotonic()
        ids = {
            name: noti.notify_sms(
                PHONE, f"flower truth: {name}", provider=case.provider, user=ADMIN, **case.options
            )
            for name, case in CASES.items()
        }
        # a broadcast (fire and forget: collecting replies with revoke(reply=True) once hung in
        # the full suite until pytest's timeout); the worker logs what it flagged
        app.control.revoke(ids["revoked"])
        # a notice to a recipient: its delivery names the notice as its parent
        from noti import recipients

        recipients.put("42", {"addresses": {"sms": PHONE}}, user=ADMIN)
        recipients.put_template(
            "hello", {"channels": {"sms": {"en": {"text": "hi"}}}, "default_locale": "en"}, user=ADMIN
        )
        notice = recipients.get_notice(noti.notify(recipient="42", template="hello", user=ADMIN), user=ADMIN)
        notice_record = notice.records[0]
        wait_until(lambda: f"flagged as revoked: {ids['revoked']}" in worker.output(), timeout=15)
        took = time.monotonic() - sent_at
        assert took < REVOKE_DELAY_S, f"the revoke reached the worker {took:.1f} s after the send: too late"

        store = rt.store
        settled = [name for name in CASES if name != "revoked"]
        wait_until(lambda: all(_final(store.find(ids[name])) for name in settled), timeout=30)
        wait_until(lambda: _final(store.find(notice_record)), timeout=30)
        # the revoked one: final in the store (today: delivered once due), or REVOKED in Flower
        deadline = time.monotonic() + REVOKE_DELAY_S + 15
        while time.monotonic() < deadline:
            if _final(store.find(ids["revoked"])):
                break
            info = flower.task_info(ids["revoked"])
            if info and info.get("state") == "REVOKED":
                break
            time.sleep(0.1)
        # every job beat sends (but the digest backstop) has run on the worker, then beat stops:
        # what the worker counted of them can be compared with its log
        running = worker
        wait_until(
            lambda: (
                all(housekeeping_runs(running.output())[name] for name in HOUSEKEEPING_RUN)
                or not (beat and beat.alive())
            ),
            timeout=30,
        )
        assert beat.alive(), f"beat exited:\n{beat.output()[-3000:]}"
        beat.stop()
        # a job sent by name from a process that imported none of noti's tasks
        call = subprocess.run(
            [sys.executable, "-m", "celery", "-A", "noti", "call", "noti.maintenance.clean"],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert call.returncode == 0, call.stderr
        called = call.stdout.strip()
        wait_until(lambda: f"noti.maintenance.clean[{called}] succeeded" in running.output(), timeout=15)
        flower.wait_settled()  # the events of those outcomes have reached Flower
        records = {name: store.find(record_id) for name, record_id in ids.items()}
        delivered = {e["id"] for name in ("sandbox", "flaky") for e in sandbox_outbox(rt, name)}
        yield Scenario(
            flower,
            worker,
            beat,
            called,
            workdir,
            ids,
            records,
            delivered,
            (notice.id, notice_record),
            store.find(notice_record),
        )
    finally:
        if beat is not None:
            beat.stop()
        if worker is not None:
            worker.stop()
        flower.stop()
        noti.sending.runtime.configure()


def _attempts(record: Notification | None) -> int:
    """Attempts made for a finished record, as its dead letter counts them: ``noti_retry``
    counts the temporary failures, so it is the attempts once they ran out, else one less."""
    if record is None or record.status is Status.WAITING:
        return 0
    if record.status is Status.FAILED and record.retry >= record.retry_max:
        return record.retry
    return record.retry + 1


def _describe(tasks: list[dict[str, Any]]) -> str:
    if not tasks:
        return "none"
    return ", ".join(
        f"{t['uuid']} {t.get('state')} (result {t.get('result')}, retries {t.get('retries')})" for t in tasks
    )


# --- what holds today: the harness ------------------------------------------------------------


def test_flower_shows_a_delivered_notification_as_success(scenario: Scenario, tmp_path: Path) -> None:
    flower, record_id = scenario.flower, scenario.ids["delivered"]
    record = scenario.records["delivered"]
    assert record is not None and record.status is Status.DONE, record
    assert record_id in scenario.delivered_ids

    # the API: the delivery's task (found by uuid or by its args) is noti.deliver, SUCCESS
    tasks = wait_until(lambda: scenario.flower_tasks_naming(record_id), timeout=FLOWER_LAG_S)
    assert [(t["name"], t["state"]) for t in tasks] == [("noti.deliver", "SUCCESS")], _describe(tasks)
    info = flower.task_info(tasks[0]["uuid"])
    assert info is not None and info["state"] == "SUCCESS" and info["args"] == repr([record_id]), info

    counters = flower.worker_counters()
    assert sum(c.get("task-succeeded", 0) for c in counters.values()) >= 1, counters

    # the rendered page: the row of that task says SUCCESS, and every row says what the API says
    browser = Browser(require_chromium(), tmp_path)
    rows = table_rows(browser.dom(f"{flower.auth_base}/tasks"), "tasks-table")
    api_states = {uuid: t["state"] for uuid, t in flower.tasks().items()}
    rendered = {row["_id"]: row for row in rows}
    assert {uuid: row["State"] for uuid, row in rendered.items()} == api_states, rows
    row = rendered[tasks[0]["uuid"]]
    assert (row["Name"], row["State"], row["args"]) == ("noti.deliver", "SUCCESS", repr([record_id])), row

    # the rendered workers page counts what the events counter holds
    workers = table_rows(browser.dom(f"{flower.auth_base}/workers"), "workers-table")
    assert {w["Worker"]: int(w["Succeeded"]) for w in workers} == {
        name: c.get("task-succeeded", 0) for name, c in counters.items()
    }, workers

    shot = browser.screenshot(f"{flower.auth_base}/tasks", tmp_path / "flower-tasks.png")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    print(f"Flower tasks page: {shot}")


def test_flower_shows_the_notice_a_delivery_belongs_to(scenario: Scenario) -> None:
    notice_id, record_id = scenario.notice
    assert notice_id.startswith("n") and record_id
    tasks = wait_until(lambda: scenario.flower_tasks_naming(record_id), timeout=FLOWER_LAG_S)
    assert [(t["name"], t["state"]) for t in tasks] == [("noti.deliver", "SUCCESS")], _describe(tasks)
    info = scenario.flower.task_info(tasks[0]["uuid"])
    assert info is not None and info["parent_id"] == notice_id and info["root_id"] == notice_id, info


# --- the target: truthful events, task id = record id ----------------------------------------


def test_flower_shows_each_notification_in_its_true_state(scenario: Scenario, tmp_path: Path) -> None:
    flower, ids, records = scenario.flower, scenario.ids, scenario.records
    # Flower gets a moment to show a ready state under every record id
    deadline = time.monotonic() + FLOWER_LAG_S
    while time.monotonic() < deadline:
        if all((flower.task_info(i) or {}).get("state") in READY_STATES for i in ids.values()):
            break
        time.sleep(0.2)

    chromium = find_chromium()
    browser = Browser(chromium, tmp_path) if chromium else None
    if browser is not None:  # saved before any check, so a failure can be looked at
        for page in ("tasks", "workers"):
            shot = browser.screenshot(f"{flower.auth_base}/{page}", tmp_path / f"flower-{page}.png")
            print(f"Flower {page} page: {shot}")

    problems: list[str] = []

    # the record store: the revoked one was never sent
    if ids["revoked"] in scenario.delivered_ids or (
        records["revoked"] and records["revoked"].status is Status.DONE
    ):
        problems.append(
            f"revoked   {ids['revoked']}: the record store says it was delivered after "
            f"`revoke {ids['revoked']}` (status {records['revoked'] and records['revoked'].status!r})"
        )

    # the API: one task per notification, its uuid the record id, in its true state
    for name, case in CASES.items():
        record_id = ids[name]
        info = flower.task_info(record_id)
        naming = scenario.flower_tasks_naming(record_id)
        where = f"{name:<9} {record_id}: expected {case.state}{' after RETRY' if case.retried else ''}"
        if info is None:
            shown = "/".join(t.get("state") or "?" for t in naming) or "nothing"
            problems.append(
                f"{where}; Flower shows {shown}, and no task with uuid == record id "
                f"(tasks whose args name it: {_describe(naming)})"
            )
            continue
        if info.get("state") != case.state:
            problems.append(f"{where}; Flower shows {info.get('state')} (result {info.get('result')!r})")
        if case.retried and not ((info.get("retries") or 0) >= 1 and info.get("retried")):
            problems.append(
                f"{where}; Flower shows retries={info.get('retries')}, retried={info.get('retried')}"
            )
        others = [t for t in naming if t["uuid"] != record_id]
        if others:
            problems.append(f"{where}; Flower also holds other tasks for it: {_describe(others)}")

    # the counters (workers page: Processed = task-received, Succeeded, Failed) against the store;
    # the revoked one is never attempted: as in Celery's own strategy, a message whose id is
    # revoked gets task-revoked without a task-received
    sent = [r for name, r in records.items() if name != "revoked" and r is not None]
    sent.append(scenario.notice_record)  # the notice's delivery counts too
    truth = {
        "task-received": sum(_attempts(r) for r in sent),
        "task-succeeded": sum(r.status is Status.DONE for r in sent),
        "task-failed": sum(r.status in (Status.FAILED, Status.INVALID) for r in sent),
        "task-retried": sum(max(_attempts(r) - 1, 0) for r in sent),
        "task-revoked": 1,
    }
    counters = flower.worker_counters()
    shown = {event: sum(c.get(event, 0) for c in counters.values()) for event in truth}
    for event, expected in truth.items():
        if shown[event] != expected:
            problems.append(
                f"counter   {event}: Flower counts {shown[event]}, the record store says {expected}"
            )

    if browser is not None:
        rendered = {
            row["_id"]: row for row in table_rows(browser.dom(f"{flower.auth_base}/tasks"), "tasks-table")
        }
        for name, case in CASES.items():
            row = rendered.get(ids[name])
            if row is None:
                problems.append(f"page      {name:<9} {ids[name]}: no row with this uuid on the tasks page")
            elif row["State"] != case.state or (case.retried and row["Retries"] in ("", "0")):
                problems.append(
                    f"page      {name:<9} {ids[name]}: the row says {row['State']}, retries "
                    f"{row['Retries'] or '-'}; expected {case.state}"
                )
        page = table_rows(browser.dom(f"{flower.auth_base}/workers"), "workers-table")
        for label, event in (
            ("Processed", "task-received"),
            ("Succeeded", "task-succeeded"),
            ("Failed", "task-failed"),
        ):
            count = sum(int(w[label] or 0) for w in page)
            if count != truth[event]:
                problems.append(f"page      workers {label}: {count}, the record store says {truth[event]}")

    store = {name: (r.status.name, _attempts(r)) if r else None for name, r in records.items()}
    assert not problems, (
        "Flower does not show the notifications' true states:\n  "
        + "\n  ".join(problems)
        + f"\nrecord store (status, attempts): {store}"
    )
    if browser is None:
        if os.environ.get("CI") == "true":
            require_chromium()
        pytest.skip("the browser part: chromium is not installed")


# --- housekeeping stays off Flower's list (issue 36, point 5) -------------------------------


def test_beat_sends_housekeeping_only_and_only_it_sends_no_events(redis_url: str) -> None:
    # (redis_url: the app reads its settings once, and they must name the test Redis)
    from noti.celery.app import app
    from noti.celery.beat import HOUSEKEEPING_TASKS

    for module in app.conf.include:  # what a worker and beat import at start
        importlib.import_module(module)
    assert housekeeping_tasks() == HOUSEKEEPING_TASKS == {*HOUSEKEEPING_RUN, "noti.maintenance.digest_tick"}
    quiet = {name for name, task in app.tasks.items() if not task.send_events}
    assert quiet == HOUSEKEEPING_TASKS  # the deliveries, noti.notify and the event tasks send theirs


def test_flower_lists_the_deliveries_and_no_housekeeping(scenario: Scenario, tmp_path: Path) -> None:
    flower, ids = scenario.flower, scenario.ids
    housekeeping = housekeeping_tasks()
    # given: beat sent its jobs while the notifications went out, and the worker ran them
    runs = housekeeping_runs(scenario.worker.output())
    assert all(runs[name] for name in HOUSEKEEPING_RUN), runs
    assert f"noti.maintenance.clean[{scenario.called}] succeeded" in scenario.worker.output()

    # then: Flower's API holds every notification's task (the revoked one's too) and no housekeeping
    tasks = flower.tasks()
    listed = Counter(t.get("name") for t in tasks.values())
    assert not {name: n for name, n in listed.items() if name in housekeeping}, (
        f"Flower lists housekeeping tasks: {listed}"
    )
    deliveries = [*ids.values(), scenario.notice[1]]
    names = {i: (tasks.get(i) or {}).get("name") for i in deliveries}
    assert names == dict.fromkeys(deliveries, "noti.deliver"), listed
    assert not housekeeping & set(flower.api("/api/task/types")["task-types"])
    assert flower.task_info(scenario.called) is None  # no task-sent from `celery call` either

    # the workers' counters: Flower's (events) count the deliveries' attempts only; the
    # worker's own (`celery inspect stats`, Flower's worker page) every task it ran, the
    # housekeeping runs by name, as its log lists them
    counters = flower.worker_counters()
    (hostname,) = [h for h in counters if h.startswith("flowertruth@")]
    received = counters[hostname].get("task-received", 0)

    def totals() -> dict[str, int]:
        stats = flower.api("/api/workers?refresh=1").get(hostname, {}).get("stats") or {}
        return dict(stats.get("total") or {})

    def counted_and_logged() -> tuple[dict[str, int], dict[str, int]]:
        total, logged = totals(), housekeeping_runs(scenario.worker.output())
        return {n: total.get(n, 0) for n in housekeeping}, {n: logged[n] for n in housekeeping}

    # beat has stopped: the jobs it sent last are soon run and logged
    deadline = time.monotonic() + 20
    while (both := counted_and_logged())[0] != both[1] and time.monotonic() < deadline:
        time.sleep(0.5)
    counted, logged = both
    assert counted == logged, f"inspect stats counts {counted}; the worker's log shows {logged}"
    total = totals()
    assert total.get("noti.deliver") == received > 0, (total, counters[hostname])

    # the rendered tasks page: a row per notification, none of housekeeping
    browser = Browser(require_chromium(), tmp_path)
    rows = table_rows(browser.dom(f"{flower.auth_base}/tasks"), "tasks-table")
    assert [row for row in rows if row["Name"] in housekeeping] == [], rows
    rendered = {row["_id"]: row["Name"] for row in rows}
    assert {i: rendered.get(i) for i in deliveries} == dict.fromkeys(deliveries, "noti.deliver"), rows
    shot = browser.screenshot(f"{flower.auth_base}/tasks", tmp_path / "flower-tasks.png")
    print(f"Flower tasks page: {shot}")
