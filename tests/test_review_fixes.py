"""Regression tests for defects found in review: each failed before its fix."""

from __future__ import annotations

from typing import Any

import pytest

import noti
from noti.api import notifier, notify_many, schedule_many
from noti.core.record import Status, now_ms
from noti.errors import InvalidInput
from tests.conftest import ALICE, BOB, sandbox_outbox, wait_until

PHONE = "+8613912345678"


def test_a_stray_message_or_noti_send_does_not_break_debounce_or_cancel(rt: Any) -> None:
    # given a scheduled record under an identifier
    first = noti.notify_sms(PHONE, "one", delay=60, identifier="cart-1")
    due = rt.delayed.due_at(first)
    # when `noti send` passes over it and a stray delivery message arrives for it
    assert noti.send() == []
    notifier().publisher.publish([(first, rt.store.get(first).channel, 1)])
    from noti.sending.sender import Sender

    Sender(rt).deliver(first)
    # then it is untouched: still replaceable and cancellable
    assert rt.delayed.due_at(first) == due
    assert noti.notify_sms(PHONE, "two", delay=60, identifier="cart-1") == first
    assert rt.store.count() == 1 and rt.store.get(first).fields == {"text": "two"}
    assert noti.cancel("cart-1").id == first


def test_rate_limits_never_turn_a_record_into_poison(configure: Any) -> None:
    rt = configure(providers={"busy": {"kind": "tests.broken_provider:ThrottledProvider"}}, retry_max=2)
    record_id = noti.notify_sms(PHONE, "x", provider="busy")
    for _ in range(12):
        [result] = noti.send(record_id)
        assert result.status is Status.WAITING
    record = rt.store.get(record_id)
    assert record.status is Status.WAITING and record.retry == 0
    assert len(rt.dead_letters) == 0


def test_idempotency_keys_belong_to_their_user(rt: Any) -> None:
    mine = noti.notify_sms(PHONE, "alice's code 1234", user=ALICE, idempotency_key="order-1:paid")
    theirs = noti.notify_sms("+8613900000000", "bob's", user=BOB, idempotency_key="order-1:paid")
    assert mine != theirs
    assert noti.get(theirs, user=BOB).fields == {"text": "bob's"}
    assert noti.notify_sms(PHONE, "again", user=ALICE, idempotency_key="order-1:paid") == mine


def test_an_idempotency_key_with_an_identifier_is_refused(rt: Any) -> None:
    with pytest.raises(InvalidInput) as info:
        noti.notify_sms(PHONE, "x", delay=5, identifier="i", idempotency_key="k")
    assert info.value.code == "e.cmd.noti.add.badkey"
    assert rt.store.count() == 0


def test_a_bad_idempotency_key_in_bulk_is_refused_and_the_rest_stored(rt: Any) -> None:
    result = notify_many(
        [
            {"type": "sms", "to": PHONE, "text": "a"},
            {"type": "sms", "to": PHONE, "text": "b", "idempotency_key": "k" * 300},
            {"type": "sms", "to": PHONE, "text": "c", "idempotency_key": "ok-key"},
        ]
    )
    assert [(r.index, r.code) for r in result.refused] == [(1, "e.cmd.noti.add.badkey")]
    assert result.ids[0] and result.ids[1] is None and result.ids[2]
    assert rt.store.count() == 2


def test_schedule_many_lets_items_keep_their_own_delay(rt: Any) -> None:
    from datetime import UTC, datetime, timedelta

    result = schedule_many(
        [
            {"type": "sms", "to": PHONE, "text": "own", "delay": 30},
            {"type": "sms", "to": PHONE, "text": "default"},
        ],
        eta=datetime.now(UTC) + timedelta(hours=1),
    )
    assert not result.refused
    own, default = (rt.store.get(str(i)).lease_until_ms for i in result.ids)
    assert own < now_ms() + 31_000 < default


def test_failover_moves_to_the_next_provider_within_one_attempt(configure: Any) -> None:
    rt = configure(providers={"down": {"kind": "sandbox", "fail": "always"}, "backup": {"kind": "sandbox"}})
    record_id = noti.notify_sms(PHONE, "x", provider="down,backup")
    [result] = noti.send(record_id)
    record = rt.store.get(record_id)
    assert result.mark == "OK" and record.sent_by == "backup" and record.retry == 0
    assert [e["id"] for e in sandbox_outbox(rt, "backup")] == [record_id]


def test_a_permanent_failure_does_not_fail_over(configure: Any) -> None:
    rt = configure(
        providers={
            "reject": {"kind": "sandbox", "fail": "always", "error": "permanent"},
            "backup": {"kind": "sandbox"},
        }
    )
    record_id = noti.notify_sms(PHONE, "x", provider="reject,backup")
    noti.send(record_id)
    assert rt.store.get(record_id).status is Status.INVALID
    assert sandbox_outbox(rt, "backup") == []


def test_a_redis_failure_inside_a_provider_waits_without_counting(configure: Any) -> None:
    rt = configure(providers={"flaky": {"kind": "tests.broken_provider:RedisDownProvider"}})
    record_id = noti.notify_sms(PHONE, "x", provider="flaky")
    [result] = noti.send(record_id)
    record = rt.store.get(record_id)
    assert result.status is Status.WAITING and record.retry == 0
    assert record.lease_until_ms >= now_ms() + 4000
    assert rt.delayed.due_at(record_id) == record.lease_until_ms


def test_a_send_slower_than_the_lease_is_not_taken_over(configure: Any, worker: Any) -> None:
    # given a provider call three times longer than the lease
    rt = configure(providers={"slow": {"kind": "sandbox", "delay_ms": 1500}}, lease_timeout_s=0.5)
    record_id = noti.notify_sms(PHONE, "x", provider="slow")
    wait_until(lambda: rt.store.get(record_id).lease_until_ms > 0)
    # when duplicate messages keep arriving during the send
    for _ in range(3):
        notifier().publisher.publish([(record_id, rt.store.get(record_id).channel, 1)])
        import time

        time.sleep(0.4)
    wait_until(lambda: rt.store.get(record_id).status is Status.DONE)
    # then it was sent once
    wait_until(lambda: rt.redis.hlen("unacked") == 0, timeout=10)
    assert [e["id"] for e in sandbox_outbox(rt, "slow")] == [record_id]


def test_sweep_uses_the_broker_even_when_it_is_another_database(rt: Any, redis_server: str) -> None:
    from celery import Celery

    from noti.celery.publish import Publisher
    from noti.sending.upkeep import sweep_lost

    broker_url = f"{redis_server}/2"
    other = Celery("other-broker", broker=broker_url, set_as_current=False)
    publisher = Publisher(other, store_url=rt.settings.redis_url, store_redis=rt.redis)
    assert not publisher.shares_store
    record = notifier().build("sms", PHONE, text="x")
    rt.store.create(record)
    publisher.publish([(record.id, record.channel, record.level)])
    assert publisher.broker_redis.llen("noti.sms:9") == 1
    publisher.broker_redis.delete("noti.sms:9")  # lost in the broker
    assert sweep_lost(rt, publisher, older_than_s=0, at_ms=now_ms() + 1000) == 1
    assert publisher.broker_redis.llen("noti.sms:9") == 1
    publisher.broker_redis.flushdb()


def test_user_names_that_could_collide_in_keys_are_refused(rt: Any) -> None:
    for name in ("a:b", "has space", "x" * 65, ["alice"], {"alice": 1}, 7):
        with pytest.raises(InvalidInput) as info:
            noti.notify_sms(PHONE, "x", user=name)
        assert info.value.code == "e.cmd.noti.baduser"
    assert rt.store.count() == 0


def test_rate_limit_waits_count_once_a_record_is_older_than_the_cap(rt: Any) -> None:
    from noti.core.retry import RetryPolicy, decide
    from noti.errors import RateLimited

    record = rt.store.get(noti.notify_sms(PHONE, "x"))
    policy = RetryPolicy(max_wait_s=60)
    young = decide(
        record, RateLimited("slow", retry_after_s=1), policy=policy, now_ms=record.created_ms + 1000
    )
    old = decide(
        record, RateLimited("slow", retry_after_s=1), policy=policy, now_ms=record.created_ms + 61_000
    )
    assert young.retry == 0 and old.retry == 1
