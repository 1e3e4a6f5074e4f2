"""Prometheus metrics against the record store's truth: a real worker subprocess delivers a mix
(sent, retried then sent, retried until failed, invalid, revoked, cancelled, an idempotent
duplicate, events), then the worker's own exporter and a ``noti metrics`` subprocess are
scraped over HTTP and every counter is compared with what the records, the dead-letter stream
and the events say, and every gauge with LLEN / ZCARD / XLEN of the keys it reads."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

import noti
from noti.celery.queues import PRIORITY_STEPS, queue_key, queue_names
from noti.core.attempt import REVOKED_CODE
from noti.core.record import Status
from noti.events import add_listener, dispatch
from noti.events.event import EventStatus
from noti.numpool import NumberPool
from noti.redis.counters import LATENCY_BOUNDS_S
from tests.conftest import ADMIN, BASE_ENV, ROOT, wait_until
from tests.servers import free_port

PHONE = "+8613912345678"
MAIL = "ops@example.com"
PROVIDERS = {
    "ok": {"kind": "sandbox"},
    "flaky": {"kind": "sandbox", "fail_first": 1},
    "broken": {"kind": "sandbox", "fail": "always"},
    "refuser": {"kind": "sandbox", "fail": "always", "error": "permanent"},
}
CHANNELS = {"sms": {"provider": "ok"}, "email": {"provider": "ok"}}
WORKER_CONFIG = (
    "retry_seconds = 0\n"
    + "".join(f'[channels.{c}]\nprovider = "{v["provider"]}"\n' for c, v in CHANNELS.items())
    + "".join(
        f"[providers.{name}]\n" + "".join(f"{k} = {_v!r}\n".replace("'", '"') for k, _v in opts.items())
        for name, opts in PROVIDERS.items()
    )
)

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture
def mixed(configure: Any) -> Any:
    """A runtime whose providers include failing sandboxes; retries are due at once."""
    return configure(channels=CHANNELS, providers=PROVIDERS, retry_seconds=0)


def scrape(url: str) -> Samples:
    """Every sample served at ``url``, by (name, sorted labels)."""
    with urllib.request.urlopen(url, timeout=10) as answer:
        text = answer.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def of(samples: Samples, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The samples of one metric name, by labels, zeros left out."""
    return {labels: value for (n, labels), value in samples.items() if n == name and value}


def key(**labels: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(labels.items()))


def env_of(redis_url: str, config: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, **BASE_ENV, "NOTI_REDIS_URL": redis_url, "NOTI_CONFIG": str(config), **extra}


class MetricsProcess:
    """``noti metrics`` in a subprocess on a free port; ``url`` once it says where it serves."""

    def __init__(self, env: dict[str, str], *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "noti", "metrics", *args],
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def url(self) -> str:
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        assert line.startswith("serving http://"), (line, self.stop())
        return line.split(" ", 1)[1].strip()

    def stop(self) -> tuple[int, str]:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        _, err = self.proc.communicate(timeout=20)
        return self.proc.returncode, err


@pytest.fixture
def metrics_process() -> Iterator[Any]:
    started: list[MetricsProcess] = []

    def _start(env: dict[str, str], *args: str) -> MetricsProcess:
        started.append(MetricsProcess(env, *args))
        return started[-1]

    yield _start
    for proc in started:
        proc.stop()


def make_the_mix(rt: Any) -> dict[str, Any]:
    """Notifications and events whose outcomes cover every counter; what was done aside."""
    for i in range(5):
        noti.notify_sms(PHONE, f"ok {i}")
    for i in range(3):
        noti.notify_email(MAIL, subject="s", text=f"ok {i}")
    for i in range(2):
        noti.notify_sms(PHONE, f"flaky {i}", provider="flaky")  # retried once, then sent
        noti.notify_sms(PHONE, f"broken {i}", provider="broken")  # retried until failed
        noti.notify_email(MAIL, subject="s", text=f"refused {i}", provider="refuser")  # invalid
    first = noti.notify_sms(PHONE, "once", idempotency_key="k1")
    assert noti.notify_sms(PHONE, "once again", idempotency_key="k1") == first  # not stored twice
    with pytest.raises(noti.InvalidInput):
        noti.notify_sms("not a phone", "refused at add")  # nothing stored, nothing counted
    later = [noti.notify_sms(PHONE, f"later {i}", delay=3600, provider="ok") for i in range(4)]
    revocation = noti.revoke(later[:2], user=ADMIN)
    assert sorted(revocation.revoked) == sorted(later[:2])
    noti.cancel(later[2])  # deleted: only the counter remembers it
    bulk = noti.schedule_many([{"type": "sms", "to": PHONE, "text": "bulk later", "delay": 3600}])
    add_listener("order.paid", {"type": "sms", "target": "{{ phone }}", "text": "paid"}, name="paid")
    add_listener("order.odd", {"type": "sms", "target": "{{ buyer.phone }}", "text": "x"}, name="odd")
    events = [dispatch("order.paid", {"phone": PHONE}), dispatch("order.odd", {"phone": PHONE})]
    assert dispatch("order.paid", {"phone": PHONE}, idempotency_key="e1") == dispatch(
        "order.paid", {"phone": PHONE}, idempotency_key="e1"
    )
    pool = NumberPool("main")
    for number in ("1001", "1002", "1003"):
        pool.add(number)
    pool.register("1001")
    pool.register("1002")
    pool.call("1001")
    return {"cancelled": Counter({("sms", "ok"): 1}), "delayed": {later[3], *bulk.ids}, "events": events}


def settled(rt: Any, delayed: set[str]) -> bool:
    """Everything but the ``delayed`` records has its final state, the events are done and
    the workers hold no message: the gauges stay still while they are compared."""
    from noti.events import Events

    waiting = {r.id for r in rt.store.select(status=Status.WAITING)}
    events = Events(rt).select(user=ADMIN, limit=None)
    return (
        waiting == delayed
        and len(events) == 3
        and all(e.status is EventStatus.DONE for e in events)
        and not Events(rt).status().alive  # its task acked: nothing moves any more
        and rt.redis.hlen("unacked") == 0
    )


def counter_truth(rt: Any, cancelled: Counter[tuple[str, str]]) -> dict[str, Counter[Any]]:
    """What the counters must say, from the records, the dead letters and the events."""
    from noti.events import Events

    truth: dict[str, Counter[Any]] = {
        n: Counter()
        for n in ("added", "sent", "retried", "failed", "invalid", "dead", "revoked", "calls", "cancelled")
    }
    for r in rt.store.select():
        channel, asked = r.channel.value, r.provider or "default"
        truth["added"][(channel, asked)] += 1
        provider = r.provider or CHANNELS[channel]["provider"]
        if r.status is Status.DONE:
            assert r.sent_by == provider
            truth["sent"][(channel, r.sent_by)] += 1
            truth["retried"][(channel, provider)] += r.retry
            truth["calls"][(channel, provider)] += r.retry + 1
        elif r.status is Status.FAILED:
            assert r.errmsg.startswith("e.cmd.noti.send.reachMaxRetry")
            truth["failed"][(channel, "exhausted", provider)] += 1
            truth["retried"][(channel, provider)] += r.retry - 1
            truth["calls"][(channel, provider)] += r.retry
        elif r.status is Status.INVALID and r.errmsg.startswith(REVOKED_CODE):
            truth["revoked"][(channel, asked)] += 1
        elif r.status is Status.INVALID:
            truth["invalid"][(channel, "invalid", provider)] += 1
            truth["calls"][(channel, provider)] += r.retry + 1
    for letter in rt.dead_letters.entries():
        truth["dead"][(letter.type, letter.error_class)] += 1
    truth["cancelled"] = cancelled
    for channel_provider, n in cancelled.items():
        truth["added"][channel_provider] += n
    events = Events(rt).select(user=ADMIN, limit=None)
    truth["events"] = Counter("error" if e.failed else "ok" for e in events)
    return truth


def assert_counters(samples: Samples, truth: dict[str, Counter[Any]]) -> None:
    def by(name: str, *labels: str) -> Counter[Any]:
        return Counter({tuple(dict(k)[label] for label in labels): v for k, v in of(samples, name).items()})

    assert by("noti_notifications_added_total", "channel", "provider") == truth["added"]
    assert by("noti_notifications_sent_total", "channel", "provider") == truth["sent"]
    assert by("noti_notifications_retried_total", "channel", "provider") == +truth["retried"]
    assert by("noti_notifications_failed_total", "channel", "reason", "provider") == truth["failed"]
    assert by("noti_notifications_invalid_total", "channel", "reason", "provider") == truth["invalid"]
    assert by("noti_notifications_revoked_total", "channel", "provider") == truth["revoked"]
    assert by("noti_notifications_cancelled_total", "channel", "provider") == truth["cancelled"]
    dead = Counter()
    for (channel, reason, _), n in by(
        "noti_notifications_dead_lettered_total", "channel", "reason", "provider"
    ).items():
        dead[(channel, reason)] += n
    assert dead == truth["dead"] and sum(dead.values()) == sum(truth["failed"].values()) + sum(
        truth["invalid"].values()
    )
    assert by("noti_provider_latency_seconds_count", "channel", "provider") == truth["calls"]
    for (channel, provider), calls in truth["calls"].items():
        top = samples[
            ("noti_provider_latency_seconds_bucket", key(channel=channel, le="+Inf", provider=provider))
        ]
        first = samples[
            (
                "noti_provider_latency_seconds_bucket",
                key(channel=channel, le=f"{LATENCY_BOUNDS_S[0]:g}", provider=provider),
            )
        ]
        assert top == calls and 0 <= first <= top
        assert samples[("noti_provider_latency_seconds_sum", key(channel=channel, provider=provider))] > 0
    assert by("noti_events_processed_total", "result") == Counter(
        {(k,): v for k, v in truth["events"].items()}
    )
    assert samples[("noti_events_dispatched_total", ())] == sum(truth["events"].values())


def assert_gauges(samples: Samples, rt: Any, *, workers: int) -> None:
    r = rt.redis
    for status, name in ((1, "waiting"), (10, "done"), (0, "failed"), (-1, "invalid")):
        assert samples[("noti_records", key(status=name))] == r.zcard(rt.keys.status_index(status))
    for queue in queue_names():
        for step in PRIORITY_STEPS:
            assert samples[("noti_queue_messages", key(queue=queue, step=str(step)))] == r.llen(
                queue_key(queue, step)
            )
    assert samples[("noti_delayed_records", ())] == r.zcard(rt.keys.delayed)
    assert samples[("noti_delayed_due_records", ())] == 0
    assert samples[("noti_delayed_pump_lag_seconds", ())] == 0
    assert samples[("noti_dead_letters", ())] == r.xlen(rt.keys.dead_letters)
    assert samples[("noti_events_backlog", ())] == r.llen(rt.keys.event_queue) == 0
    assert samples[("noti_broker_unacked_messages", ())] == r.hlen("unacked")
    assert samples[("noti_workers_alive", ())] == workers
    pool = {
        dict(k)["state"]: v
        for k, v in of(samples, "noti_numpool_numbers").items()
        if dict(k)["pool"] == "main"
    }
    assert pool == {"busy+up": 1, "idle+up": 1, "idle+down": 1}
    assert samples[("noti_store_up", ())] == 1


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["batch", "task"])
def test_counters_equal_the_record_store_truth(
    mixed: Any, spawn_worker: Any, metrics_process: Any, redis_url: str, tmp_path: Path, mode: str
) -> None:
    # given a worker serving the metrics itself, and `noti metrics` beside it
    port = free_port()
    worker = spawn_worker(
        WORKER_CONFIG,
        env={"NOTI_METRICS_PORT": str(port), "NOTI_METRICS_BIND": "127.0.0.1", "NOTI_DELIVERY_MODE": mode},
    )
    config = tmp_path / "cli.toml"
    config.write_text(WORKER_CONFIG)
    served = metrics_process(env_of(redis_url, config), "-port", "0", "-bind", "127.0.0.1")
    # when the mix is delivered
    aside = make_the_mix(mixed)
    wait_until(lambda: settled(mixed, aside["delayed"]), timeout=60)
    truth = counter_truth(mixed, aside["cancelled"])
    assert truth["sent"] and truth["failed"] and truth["invalid"] and truth["revoked"] and truth["retried"]
    # then both endpoints serve the store's truth, the same numbers
    from_worker = scrape(f"http://127.0.0.1:{port}/metrics")
    from_cli = scrape(served.url())
    for samples in (from_worker, from_cli):
        assert_counters(samples, truth)
        assert_gauges(samples, mixed, workers=1)
    counters = [n for n, _ in from_worker if n.endswith(("_total", "_count", "_bucket"))]
    assert {k: v for k, v in from_worker.items() if k[0] in counters} == {
        k: v for k, v in from_cli.items() if k[0] in counters
    }
    assert worker.alive()


def counts(rt: Any) -> dict[str, int]:
    """The counter fields of the runtime's Redis, as the scripts wrote them."""
    return {k: int(v) for k, v in rt.redis.hgetall(rt.keys.metrics).items()}


def test_an_outcome_recorded_by_a_sender_that_lost_its_lease_counts_nothing(rt: Any) -> None:
    from noti.core.attempt import Outcome

    record_id = noti.notify_sms(PHONE, "x")
    assert rt.store.claim(record_id, owner="w1", lease_ms=60_000).record is not None
    assert not rt.store.finish(record_id, owner="w2", outcome=Outcome(Status.DONE, "ok", 0))
    assert rt.store.revoke([record_id], reason="r", owner="w2")[0].name == "HELD"
    assert counts(rt) == {"added|sms|default": 1}
    assert rt.store.finish(record_id, owner="w1", outcome=Outcome(Status.DONE, "ok", 0))
    assert not rt.store.finish(record_id, owner="w1", outcome=Outcome(Status.DONE, "ok", 0))  # once
    assert rt.store.revoke([record_id], reason="r")[0].name == "FINAL"
    assert counts(rt) == {"added|sms|default": 1, "sent|sms|none": 1}


def test_sends_from_the_command_line_and_dead_letter_retries_are_counted(mixed: Any) -> None:
    from noti.api import redrive

    record_id = noti.notify_email(MAIL, subject="s", text="x", provider="refuser")
    [result] = noti.send(record_id, user=ADMIN)  # `noti send`: this process is the sender
    assert result.status is Status.INVALID
    revived = redrive().retry(record_id, user=ADMIN)
    assert revived.status is Status.WAITING
    found = counts(mixed)
    assert found["added|email|refuser"] == 1
    assert found["invalid|email|invalid|refuser"] == found["dead_lettered|email|invalid|refuser"] == 1
    assert found["revived|email|refuser"] == 1
    assert found["lat|email|0.005|refuser"] == 1 and found["latsum|email|refuser"] >= 0


def test_replacing_a_debounced_record_is_not_a_new_one(rt: Any) -> None:
    noti.notify_sms(PHONE, "first", delay=600, identifier="cart-1")
    noti.notify_sms(PHONE, "second", delay=600, identifier="cart-1")  # replaces it
    assert counts(rt) == {"added|sms|default": 1}
    noti.cancel("cart-1")
    assert counts(rt) == {"added|sms|default": 1, "cancelled|sms|default": 1}


def test_a_scrape_while_redis_is_away_says_so(rt: Any) -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from noti.observe.prometheus import NotiCollector
    from noti.observe.snapshot import Observer
    from noti.sending.runtime import Runtime

    away = Runtime(rt.settings.model_copy(update={"redis_url": f"redis://127.0.0.1:{free_port()}/0"}))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(NotiCollector(Observer(away).snapshot))
    text = generate_latest(registry).decode()
    assert "noti_store_up 0.0" in text and "noti_notifications_sent_total" not in text


def test_every_documented_metric_is_served_and_nothing_else(rt: Any) -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from noti.observe.prometheus import METRICS, NotiCollector
    from noti.observe.snapshot import Observer

    registry = CollectorRegistry(auto_describe=False)
    registry.register(NotiCollector(Observer(rt).snapshot))
    families = {f.name: f.type for f in text_string_to_metric_families(generate_latest(registry).decode())}
    assert families == {m.name.removesuffix("_total"): m.type for m in METRICS}


def test_the_docs_list_the_metrics_the_collector_serves() -> None:
    """The metrics page's table is generated from METRICS when the site is built."""
    from docsgen.reference import page
    from noti.observe.docs import table
    from noti.observe.prometheus import METRICS

    shown = page("howto/metrics.md")
    assert table() in shown
    assert all(f"`{m.name}`" in shown for m in METRICS)


def served_names() -> set[str]:
    """Every sample name noti serves (counters with _total, histograms with their parts)."""
    from noti.observe.prometheus import METRICS

    names = set()
    for m in METRICS:
        names.add(m.name)
        if m.type == "histogram":
            names |= {f"{m.name}_bucket", f"{m.name}_count", f"{m.name}_sum"}
    return names


def test_the_grafana_dashboard_loads_only_metrics_noti_serves() -> None:
    import json
    import re

    dashboard = json.loads((ROOT / "deploy" / "grafana" / "noti.json").read_text())
    panels = [p for p in dashboard["panels"] if p.get("type") != "row"]
    exprs = [t["expr"] for p in panels for t in p.get("targets", [])]
    assert len(exprs) >= 15 and all(p.get("targets") for p in panels)
    used = {name for expr in exprs for name in re.findall(r"\bnoti_[a-z_]+\b", expr)}
    assert used and used <= served_names(), used - served_names()
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    assert {"ds_prometheus"} <= {v["name"] for v in dashboard["templating"]["list"]}
    # every metric but the scrape's own bookkeeping has a panel
    plain = {m.removesuffix("_bucket") for m in used}
    from noti.observe.prometheus import METRICS

    missing = {m.name for m in METRICS} - plain - {"noti_scrape_read_seconds"}
    assert not missing, missing


def test_a_worker_metrics_port_must_be_a_port(rt: Any) -> None:
    from noti.config import load_settings

    for bad in (0, 70000, "x"):
        with pytest.raises(noti.InvalidConfig, match="NOTI_METRICS_PORT"):
            load_settings(metrics_port=bad)


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (("-port", "abc"), "e.cmd.noti.metrics.badport"),
        (("-port", "70000"), "e.cmd.noti.metrics.badport"),
        (("-port", "-1"), "e.cmd.noti.metrics.badport"),
        (("-port", "0", "-bind", "no where"), "e.cmd.noti.metrics.badbind"),
        (("-port", "0", "-bind", "999.1.1.1"), "e.cmd.noti.metrics.badbind"),
    ],
)
def test_noti_metrics_refuses_bad_input(rt: Any, args: tuple[str, ...], code: str) -> None:
    from tests.test_cli import run

    result = run("metrics", *args)
    assert result.exit_code == 1 and result.stderr.startswith(f"{code}: "), result.output


def test_noti_metrics_refuses_a_port_in_use(rt: Any) -> None:
    import socket

    from tests.test_cli import run

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run("metrics", "-port", str(port), "-bind", "127.0.0.1")
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith("e.cmd.noti.metrics.portinuse: "), result.stderr
    assert str(port) in result.stderr


@pytest.mark.slow
def test_noti_metrics_stops_on_sigterm(rt: Any, redis_url: str, metrics_process: Any, tmp_path: Path) -> None:
    config = tmp_path / "noti.toml"
    config.write_text("")
    served = metrics_process(env_of(redis_url, config), "--port", "0", "--bind", "127.0.0.1")
    samples = scrape(served.url())
    assert samples[("noti_store_up", ())] == 1 and samples[("noti_workers_alive", ())] == 0
    code, err = served.stop()
    assert code == 0, err


@pytest.mark.slow
def test_a_worker_whose_metrics_port_is_taken_still_delivers(rt: Any, spawn_worker: Any) -> None:
    import socket

    from noti.observe.snapshot import Observer

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        worker = spawn_worker(env={"NOTI_METRICS_PORT": str(port), "NOTI_METRICS_BIND": "127.0.0.1"})
        record_id = noti.notify_sms(PHONE, "still delivered")
        wait_until(lambda: rt.store.get(record_id).status is Status.DONE)
    assert "metrics exporter not started: e.cmd.noti.metrics.portinuse" in worker.output()
    # its heartbeat says it is alive; once stopped, it is gone
    [node] = Observer(rt).snapshot().workers
    assert node.name.startswith("w@") and node.alive(node.seen_ms) and "noti.sms" in node.queues
    worker.stop()
    assert Observer(rt).snapshot().workers == ()


def test_the_heartbeat_is_a_step_of_notis_workers_only() -> None:
    from celery import Celery
    from kombu.utils.imports import symbol_by_name

    from noti.celery.app import app
    from noti.celery.observe import Observing

    assert Observing in {symbol_by_name(step) for step in app.steps["worker"]}
    assert Observing not in {
        symbol_by_name(step) for step in Celery("host", set_as_current=False).steps["worker"]
    }
