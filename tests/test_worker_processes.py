"""Real `celery -A noti worker` processes: exclusive claims, priority order, SIGKILL recovery."""

from __future__ import annotations

import os
import time
from collections import Counter
from typing import Any

import pytest

import noti
from noti.api import notifier
from noti.core.record import Status
from tests.conftest import ADMIN, BASE_ENV, sandbox_outbox, wait_until
from tests.noti_cli import start_noti

pytestmark = [pytest.mark.slow, pytest.mark.integration]
PHONE = "+8613912345678"
SANDBOX = '[channels.sms]\nprovider = "sandbox"\n'


def test_two_workers_and_noti_send_deliver_each_of_1000_records_once(
    rt: Any, spawn_worker: Any, redis_url: str
) -> None:
    # given 1,000 stored records and two idle workers
    api = notifier()
    records = [api.build("sms", PHONE, text=f"race {i}", user=ADMIN) for i in range(1000)]
    rt.store.create_many(records)
    slow_sandbox = SANDBOX + "[providers.sandbox]\ndelay_ms = 2\n"
    spawn_worker(slow_sandbox, "-P", "threads", "-c", "4", name="a")
    spawn_worker(slow_sandbox, "-P", "threads", "-c", "4", name="b")
    # when `noti send` is working through them and their messages are queued meanwhile
    env = {
        **os.environ,
        **BASE_ENV,
        "NOTI_REDIS_URL": redis_url,
        "NOTI_USER": ADMIN,
        "NOTI_CHANNELS__SMS__PROVIDER": "sandbox",
        "NOTI_PROVIDERS__SANDBOX__DELAY_MS": "2",
    }
    cli = start_noti(env, "send", "-timeout", "30")
    assert cli.stdout is not None
    first_line = cli.stdout.readline()  # the CLI has sent its first record
    api.publisher.publish([(r.id, r.channel, r.level) for r in records])
    out, err = cli.communicate(timeout=120)
    out = first_line + out
    assert cli.returncode == 0, err
    wait_until(lambda: rt.store.count(Status.DONE) == 1000, timeout=120)
    # then every record was sent exactly once, by one of the three
    sent = Counter(entry["id"] for entry in sandbox_outbox(rt))
    assert len(sent) == 1000 and set(sent.values()) == {1}
    by_cli = sum(1 for line in out.splitlines() if line.startswith("OK "))
    assert 0 < by_cli < 1000, "the CLI and the workers should both have sent some"


@pytest.mark.parametrize(
    ("mode", "held"),
    [
        # one running + one prefetched (prefetch multiplier 1)
        ('delivery_mode = "task"\n', 3),
        # the bound: concurrency (1) + the prefetch window (8)
        ('delivery_mode = "batch"\ndelivery_window = 8\n', 9),
    ],
    ids=["task", "batch"],
)
def test_high_levels_overtake_a_backlog_in_the_same_queue(
    rt: Any, spawn_worker: Any, mode: str, held: int
) -> None:
    # given one worker slot working through a backlog of level-1 records
    backlog = [noti.notify_sms(PHONE, f"bulk {i}", user=ADMIN, lv=1) for i in range(300)]
    spawn_worker(
        mode + '[channels.sms]\nprovider = "slow"\n[providers.slow]\nkind = "sandbox"\ndelay_ms = 15\n',
        "-P",
        "threads",
        "-c",
        "1",
        name="prio",
    )
    wait_until(lambda: rt.redis.llen(rt.keys.sandbox_outbox("slow")) >= 20, timeout=30)
    # when a few level-1000 records arrive
    delivered_before = rt.redis.llen(rt.keys.sandbox_outbox("slow"))
    urgent = [noti.notify_sms(PHONE, f"urgent {i}", user=ADMIN, lv=1000) for i in range(5)]
    wait_until(lambda: all(rt.store.get(i).status is Status.DONE for i in urgent), timeout=30)
    # then they are delivered before all but what the worker already held
    order = [entry["id"] for entry in sandbox_outbox(rt, "slow")]
    last_urgent = max(order.index(i) for i in urgent)
    bulk_after_arrival = sum(1 for i in order[delivered_before:last_urgent] if i in set(backlog))
    assert bulk_after_arrival <= held, bulk_after_arrival
    assert rt.store.count(Status.WAITING) > 100  # most of the backlog was still waiting


def test_a_worker_killed_mid_delivery_loses_nothing(rt: Any, spawn_worker: Any) -> None:
    # given a worker stuck in a slow provider call
    slow = spawn_worker(
        '[channels.sms]\nprovider = "sandbox"\n[providers.sandbox]\ndelay_ms = 60000\n',
        "-P",
        "threads",
        "-c",
        "2",
        env={"NOTI_LEASE_TIMEOUT_S": "2"},
        name="doomed",
    )
    record_id = noti.notify_sms(PHONE, "survive", user=ADMIN)
    wait_until(lambda: rt.store.get(record_id).lease_until_ms > 0, timeout=20)
    # when it is killed with SIGKILL
    slow.kill()
    time.sleep(0.5)
    assert rt.store.get(record_id).status is Status.WAITING
    assert sandbox_outbox(rt) == []
    # then another worker gets the message back and delivers it, once
    spawn_worker(SANDBOX, "-P", "threads", "-c", "2", env={"NOTI_LEASE_TIMEOUT_S": "2"}, name="heir")
    wait_until(lambda: rt.store.get(record_id).status is Status.DONE, timeout=60)
    assert [e["id"] for e in sandbox_outbox(rt)] == [record_id]
    time.sleep(2)  # a late duplicate would show up now
    assert [e["id"] for e in sandbox_outbox(rt)] == [record_id]


def test_retries_wait_in_redis_not_in_worker_memory(configure: Any, spawn_worker: Any) -> None:
    rt = configure(providers={"flaky": {"kind": "sandbox", "fail_first": 1}})
    spawn_worker(
        '[channels.sms]\nprovider = "flaky"\n[providers.flaky]\nkind = "sandbox"\nfail_first = 1\n',
        env={"NOTI_RETRY_SECONDS": "3600"},
        name="backoff",
    )
    record_id = noti.notify_sms(PHONE, "later", user=ADMIN, provider="flaky")
    wait_until(lambda: rt.store.get(record_id).retry == 1, timeout=20)
    due = rt.delayed.due_at(record_id)
    assert due is not None and due >= rt.store.get(record_id).modified_ms + 3_599_000
    # no Celery message holds it meanwhile: the queues and the unacked set are empty
    wait_until(lambda: rt.redis.hlen("unacked") == 0, timeout=10)
    assert all(rt.redis.llen(k) == 0 for k in rt.redis.keys("noti.sms*"))
    # when it comes due, the pump queues it and it is delivered
    rt.delayed.schedule(record_id, 0)
    rt.redis.hset(rt.keys.record(record_id), "noti_timeout_at", 0)
    wait_until(lambda: rt.store.get(record_id).status is Status.DONE, timeout=20)
    assert rt.store.get(record_id).retry == 1
