"""The digest scenario of ``make chaos`` (issue 35): digest events from four producers into
short windows of 20 recipients while workers are SIGKILLed and Redis is killed (its AOF cut to
what ``appendfsync always`` keeps), then a reconciliation of every event ``notify()``
acknowledged against the digests made.

The digests go out as webhooks (to the suite's Standard Webhooks receiver, which drops a
repeated ``webhook-id``), each naming its window and listing its events. Checked:

* **events lost** 0: every acknowledged event is in a digest record;
* **events doubled** 0: no event is in two digest records;
* **digests doubled** 0: no window made two notices (two records), and no digest record was
  accepted twice by the receiver;
* every window closed and every digest record final (sent or dead-lettered) by the deadline.

Run after the main scenario's ``always`` run (``appendfsync everysec`` may lose the last second
of acknowledged events by design: :doc:`guarantees`).
"""

from __future__ import annotations

import os
import random
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos.cluster import Cluster
from chaos.providers import ACCEPTED, Ledger, Providers
from chaos.run import SETTINGS

__all__ = ["DigestRecord", "DigestReport", "judge", "run_digests"]

RECIPIENTS, PRODUCERS = 20, 4
TEMPLATE = {
    "default_locale": "en",
    "channels": {
        "webhook": {
            "en": {
                "content": {
                    "tag": "dg {{ digest }}",
                    "count": "{{ count }}",
                    "events": "{% for e in events %}{{ e.n }} {% endfor %}",
                }
            }
        }
    },
}


@dataclass
class DigestReport:
    """What the digest scenario found."""

    fsync: str
    acknowledged: int = 0
    refused: int = 0
    windows: int = 0
    records: int = 0
    delivered: int = 0
    dead_lettered: int = 0
    events_lost: list[int] = field(default_factory=list)
    events_doubled: list[int] = field(default_factory=list)
    digests_doubled: list[str] = field(default_factory=list)
    open_at_end: int = 0
    not_final: list[str] = field(default_factory=list)
    worker_kills: int = 0
    redis_kills: int = 0
    elapsed_s: float = 0.0

    @property
    def ok(self) -> bool:
        return not (
            self.events_lost
            or self.events_doubled
            or self.digests_doubled
            or self.open_at_end
            or self.not_final
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "fsync": self.fsync,
            "ok": self.ok,
            "events_acknowledged": self.acknowledged,
            "events_refused": self.refused,
            "windows": self.windows,
            "digest_records": self.records,
            "delivered": self.delivered,
            "dead_lettered": self.dead_lettered,
            "events_lost": self.events_lost[:50],
            "events_doubled": self.events_doubled[:50],
            "digests_doubled": self.digests_doubled[:50],
            "windows_open_at_end": self.open_at_end,
            "records_not_final": self.not_final[:50],
            "worker_kills": self.worker_kills,
            "redis_kills": self.redis_kills,
            "elapsed_s": round(self.elapsed_s, 1),
        }

    def table(self) -> str:
        rows = [
            ("events acknowledged", self.acknowledged),
            ("events refused (Redis down)", self.refused),
            ("digest windows", self.windows),
            ("digest records", self.records),
            ("  delivered", self.delivered),
            ("  dead-lettered", self.dead_lettered),
            ("worker kills / Redis kills", f"{self.worker_kills} / {self.redis_kills}"),
            ("events lost", len(self.events_lost)),
            ("events doubled", len(self.events_doubled)),
            ("digests doubled", len(self.digests_doubled)),
            ("windows open at the end", self.open_at_end),
            ("records not final", len(self.not_final)),
        ]
        width = max(len(name) for name, _ in rows)
        lines = [f"digests [{self.fsync}]: {'PASS' if self.ok else 'FAIL'}"]
        lines += [f"  {name:<{width}}  {value}" for name, value in rows]
        return "\n".join(lines)


def run_digests(
    *, fsync: str, seed: int, events: int, produce_s: float, crash: str = "os", log: Any = print
) -> tuple[DigestReport, Path]:
    """One digest run (see the module); the report and the run's work directory."""
    from bench._noti import point_driver

    started = time.time()
    rng = random.Random(seed)
    workdir = Path(tempfile.mkdtemp(prefix=f"noti-chaos-digests-{fsync}-"))
    report = DigestReport(fsync)
    ledger = Ledger(seed, bad=set(), flaky=set())
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("NOTI_")}
    settings = {**SETTINGS, "NOTI_DIGEST_TICK_INTERVAL_S": "0.5"}  # the workers' pump closes them
    with Providers(ledger) as providers:
        cluster = Cluster(workdir, fsync=fsync, crash=crash, env={}, config_for=providers.config)
        cluster.env = {**base_env, **settings, "NOTI_REDIS_URL": cluster.url}
        try:
            cluster.start_redis()
            coordinator = workdir / "coordinator.toml"
            coordinator.write_text(providers.config("coordinator"))
            runtime = point_driver(
                {**settings, "NOTI_REDIS_URL": cluster.url, "NOTI_CONFIG": str(coordinator)}
            )
            _given(providers)
            log(f"  [digests {fsync}] starting 4 workers and beat (logs in {workdir / 'logs'})")
            cluster.start_all()
            acked: dict[int, str] = {}
            refused: list[int] = []
            lock = threading.Lock()
            stop = time.time() + produce_s

            def produce(p: int) -> None:
                import noti
                from noti.errors import StoreUnavailable

                for n in range(p, events, PRODUCERS):
                    pause = started + 1 + produce_s * n / events - time.time()
                    if pause > 0:
                        time.sleep(pause)
                    try:
                        window = noti.notify(
                            recipient=f"d{n % RECIPIENTS}", template="chaos_digest", data={"n": n},
                            category="chaos", digest="chaos", window=2, digest_max=1000,
                        )  # fmt: skip
                    except StoreUnavailable:  # Redis down: not acknowledged (it may have landed)
                        with lock:
                            refused.append(n)
                        continue
                    with lock:
                        acked[n] = window

            producers = [threading.Thread(target=produce, args=(p,)) for p in range(PRODUCERS)]
            for thread in producers:
                thread.start()
            _faults(cluster, rng, stop, report, log, fsync)
            for thread in producers:
                thread.join()
            log(f"  [digests {fsync}] {len(acked)} events acknowledged; draining")
            _drain(runtime, time.time() + 120)
            time.sleep(1.0)
            _reconcile(report, runtime, ledger, acked, refused)
        finally:
            cluster.stop_all()
    report.elapsed_s = time.time() - started
    return report, workdir


def _given(providers: Providers) -> None:
    from noti import recipients

    recipients.put_category("chaos", {"channels": {"webhook": True}})
    recipients.put_template("chaos_digest", TEMPLATE)
    recipients.import_rows(
        [{"id": f"d{i}", "addresses": {"webhook": providers.webhook_url(i)}} for i in range(RECIPIENTS)]
    )


def _faults(
    cluster: Cluster, rng: random.Random, stop: float, report: DigestReport, log: Any, fsync: str
) -> None:
    """A worker SIGKILLed every 2-4 s, and Redis killed too at 40 % and 75 % of the producing
    time (a Redis kill took a worker kill's turn: a short run on a busy machine had one)."""
    begin = time.time()
    redis_at = [begin + (stop - begin) * share for share in (0.4, 0.75)]
    while time.time() < stop:
        time.sleep(rng.uniform(2, 4))
        cluster.kill_worker(rng.randint(1, cluster.slots))
        report.worker_kills += 1
        if redis_at and time.time() >= redis_at[0]:
            redis_at.pop(0)
            kill = cluster.kill_redis()
            report.redis_kills += 1
            log(f"  [digests {fsync}] Redis killed, {kill.cut_bytes} AOF bytes cut")


def _drain(runtime: Any, deadline: float) -> None:
    """Until no window is open or closing and every record is final (or the deadline)."""
    k, client = runtime.keys, runtime.redis
    while time.time() < deadline:
        try:
            busy = client.zcard(k.digests_due) + client.zcard(k.digests_closing)
            busy += client.zcard(k.waiting_index)
        except Exception:
            busy = 1
        if not busy:
            return
        time.sleep(0.5)


@dataclass(frozen=True, slots=True)
class DigestRecord:
    """A digest record as the run left it: its window (notice), status and events."""

    record_id: str
    window: str
    status: str
    events: tuple[int, ...]


def _reconcile(
    report: DigestReport, runtime: Any, ledger: Ledger, acked: dict[int, str], refused: list[int]
) -> None:
    import json

    from noti.core.record import Status, from_hash

    k, client = runtime.keys, runtime.redis
    open_at_end = client.zcard(k.digests_due) + client.zcard(k.digests_closing)
    records = []
    for record_id in (str(r) for r in client.zrange(k.all_index, 0, -1)):
        data = client.hgetall(k.record(record_id))
        if not data:
            continue
        record = from_hash({str(a): str(b) for a, b in data.items()})
        content = record.fields.get("content") or {}
        if isinstance(content, str):
            content = json.loads(content)
        status = {Status.DONE: "done", Status.WAITING: "waiting"}.get(record.status, "dead")
        events = tuple(int(n) for n in str(content.get("events", "")).split())
        records.append(DigestRecord(record_id, record.parent or "?", status, events))
    accepted: dict[str, int] = {}
    for attempt in ledger.snapshot():
        if attempt.outcome == ACCEPTED:
            accepted[attempt.record_id] = accepted.get(attempt.record_id, 0) + 1
    judge(report, records, acked, refused, accepted, open_at_end)


def judge(
    report: DigestReport,
    records: list[DigestRecord],
    acked: dict[int, str],
    refused: list[int],
    accepted: dict[str, int],
    open_at_end: int,
) -> None:
    """Fill ``report`` from what the run left: every acknowledged event in exactly one digest
    record, one record per window, each record accepted by the receiver at most once."""
    report.acknowledged, report.refused, report.open_at_end = len(acked), len(refused), open_at_end
    seen: dict[int, list[str]] = {}
    per_window: dict[str, list[str]] = {}
    for record in records:
        report.records += 1
        per_window.setdefault(record.window, []).append(record.record_id)
        if record.status == "done":
            report.delivered += 1
        elif record.status == "waiting":
            report.not_final.append(record.record_id)
        else:
            report.dead_lettered += 1
        for n in record.events:
            seen.setdefault(n, []).append(record.record_id)
    report.windows = len(per_window)
    report.events_lost = sorted(n for n in acked if n not in seen)
    report.events_doubled = sorted(n for n, where in seen.items() if len(where) > 1)
    report.digests_doubled = sorted(
        [w for w, where in per_window.items() if len(where) > 1] + [r for r, n in accepted.items() if n > 1]
    )
