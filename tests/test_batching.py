"""Batch delivery (noti/celery/tasks/batching.py): real workers, real Redis, every notification
still a ``noti.deliver`` Celery message."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import pytest

import noti
from noti.api import notifier
from noti.core.record import Status
from noti.core.store import RecordStore
from tests.conftest import sandbox_outbox, wait_until
from tests.fakes.webhook import SECRET, WebhookReceiver, hook_options

pytestmark = pytest.mark.integration

PHONE = "+8613912345678"
PHONE9 = "+8613912345679"


def _count_calls(monkeypatch: pytest.MonkeyPatch, name: str) -> list[int]:
    """Wrap ``RecordStore.<name>``; the list of batch sizes it was called with."""
    sizes: list[int] = []
    original = getattr(RecordStore, name)

    def wrapper(self: RecordStore, items: Any, *args: Any, **kwargs: Any) -> Any:
        sizes.append(len(items))
        return original(self, items, *args, **kwargs)

    monkeypatch.setattr(RecordStore, name, wrapper)
    return sizes


def test_a_backlog_is_claimed_and_finished_in_batches(
    rt: Any, monkeypatch: pytest.MonkeyPatch, start_worker_now: Any
) -> None:
    # given 300 SMS queued before any worker runs
    ids = noti.notify_many([{"type": "sms", "to": PHONE, "text": f"n{i}"} for i in range(300)]).ids
    claims = _count_calls(monkeypatch, "claim_many")
    finishes = _count_calls(monkeypatch, "finish_many")
    scripts_before = _script_calls(rt)
    # when a worker drains them
    with start_worker_now():
        wait_until(lambda: rt.store.count(Status.DONE) == 300, timeout=60)
    # then each was sent exactly once
    sent = Counter(entry["id"] for entry in sandbox_outbox(rt))
    assert set(sent) == set(ids) and set(sent.values()) == {1}
    assert {rt.redis.hget(rt.keys.record(i), "_claims") for i in ids} == {"1"}
    # and it took a few script calls, not two per notification: the first fetch's records
    # are claimed by the batcher, the later ones by the fetch script itself
    assert len(claims) == 1 and 1 <= claims[0] <= 50, claims
    assert sum(finishes) == 300 and len(finishes) <= 30, finishes
    assert _script_calls(rt) - scripts_before <= 70
    # and each one's timeline tells its claim, its one provider call and its send (the batch
    # path's claims: the batcher's and the fetch script's; its finishes: one call per batch)
    timelines = {tuple(s.event for s in noti.timeline(i).steps) for i in ids}
    assert timelines == {("created", "claimed", "attempt", "sent")}


def _script_calls(rt: Any) -> int:
    """Lua script calls the test Redis has run so far (EVAL and EVALSHA)."""
    stats = rt.redis.info("commandstats")
    return sum(int(stats.get(f"cmdstat_{name}", {}).get("calls", 0)) for name in ("eval", "evalsha"))


def test_on_a_quiet_queue_the_fetch_claims_the_record(
    rt: Any, monkeypatch: pytest.MonkeyPatch, worker: Any
) -> None:
    # given a worker that has delivered a first notification (its channel now claims on fetch)
    first = noti.notify_sms(PHONE, "first")
    wait_until(lambda: rt.store.get(first).status is Status.DONE, timeout=30)
    claims = _count_calls(monkeypatch, "claim_many")
    # when more arrive one at a time
    later = []
    for i in range(5):
        later.append(noti.notify_sms(PHONE, f"later {i}"))
        wait_until(lambda: rt.store.get(later[-1]).status is Status.DONE, timeout=30)
    # then the fetch script claimed each, once (the batcher made no claim call of its own)
    assert claims == []
    assert [rt.redis.hget(rt.keys.record(i), "_claims") for i in later] == ["1"] * 5
    assert [e["id"] for e in sandbox_outbox(rt)] == [first, *later]


def test_duplicate_messages_of_one_record_send_it_once(rt: Any, worker: Any) -> None:
    api = notifier()
    record = api.store_one(api.build("sms", PHONE, text="once"))
    # the same record's message six times over (redeliveries, a duplicate publish)
    api.publisher.publish([(record.id, record.channel, record.level)] * 5)
    wait_until(lambda: rt.store.get(record.id).status is Status.DONE, timeout=30)
    time.sleep(0.5)
    assert [e["id"] for e in sandbox_outbox(rt)] == [record.id]


def test_malformed_messages_are_refused_and_the_rest_delivered(rt: Any, worker: Any) -> None:
    from noti.celery.app import app

    good = [noti.notify_sms(PHONE, f"ok {i}") for i in range(3)]
    for args in ([], [1], ["a", "b"], [{"id": "x"}]):
        app.send_task("noti.deliver", args=args, queue="noti.sms")
    more = [noti.notify_sms(PHONE, f"ok {i}") for i in range(3, 6)]
    wait_until(lambda: all(rt.store.get(i).status is Status.DONE for i in good + more), timeout=30)
    # the refused ones are gone from the queue and from the unacked hash
    wait_until(lambda: rt.redis.hlen("unacked") == 0, timeout=10)
    assert sum(rt.redis.llen(k) for k in rt.redis.keys("noti.sms*")) == 0


def test_a_message_with_an_eta_takes_celerys_own_path(rt: Any, worker: Any) -> None:
    from noti.celery.tasks.deliver import deliver

    record = notifier().build("sms", PHONE, text="later")
    rt.store.create(record)  # no message yet
    started = time.monotonic()
    deliver.apply_async((record.id,), countdown=1, queue="noti.sms")
    wait_until(lambda: rt.store.get(record.id).status is Status.DONE, timeout=30)
    assert time.monotonic() - started >= 0.9


@pytest.fixture
def slow_receiver() -> Any:
    with WebhookReceiver() as receiver:
        receiver.delay_s = 0.4
        yield receiver


def test_slow_providers_wait_on_the_send_loop_while_the_consumer_goes_on(
    configure: Any, worker: Any, slow_receiver: WebhookReceiver
) -> None:
    # given webhooks to a receiver that takes 0.4 s per answer, and SMS to the sandbox
    rt = configure(
        providers={"hook": hook_options(slow_receiver)},
        channels={"webhook": {"provider": "hook"}, "sms": {"provider": "sandbox"}},
        provider_grants={"*": ["hook"]},
    )
    hooks = [noti.notify_webhook(slow_receiver.url + "/in", content={"n": i}) for i in range(40)]
    sms = [noti.notify_sms(PHONE, f"fast {i}") for i in range(20)]
    # then the 40 webhooks wait concurrently (not 40 x 0.4 s one after the other)
    started = time.monotonic()
    wait_until(lambda: all(rt.store.get(i).status is Status.DONE for i in hooks + sms), timeout=30)
    assert time.monotonic() - started < 8
    # and each was received once, signed
    assert sorted(slow_receiver.ids) == sorted(hooks) and slow_receiver.refusals == []
    assert [e["id"] for e in sandbox_outbox(rt)] == sms
    # the send loop's calls are told by the timeline with how long each took
    [attempt] = [s for s in noti.timeline(hooks[0]).steps if s.event == "attempt"]
    assert attempt.detail["provider"] == "hook" and attempt.detail["outcome"] == "ok"
    assert attempt.detail["ms"] >= 300


@pytest.mark.parametrize("kind", ["auto", "asyncio"])
def test_the_send_loop_is_uvloop_when_installed_unless_set_to_asyncio(
    configure: Any,
    monkeypatch: pytest.MonkeyPatch,
    start_worker_now: Any,
    slow_receiver: WebhookReceiver,
    kind: str,
) -> None:
    # given the send_loop setting, and a process whose send loop is made anew
    from noti.sending import loop as sendloop

    sendloop.send_loop().stop()
    monkeypatch.setattr(sendloop, "_loops", {})
    rt = configure(
        providers={"hook": hook_options(slow_receiver)},
        channels={"webhook": {"provider": "hook"}},
        provider_grants={"*": ["hook"]},
        send_loop=kind,
    )
    slow_receiver.delay_s = 0.05
    try:
        # when webhooks wait on their receiver through a worker
        with start_worker_now():
            hooks = [noti.notify_webhook(slow_receiver.url + "/in", content={"n": i}) for i in range(10)]
            wait_until(lambda: all(rt.store.get(i).status is Status.DONE for i in hooks), timeout=30)
            loop = sendloop.send_loop().loop
        # then they were sent on the loop the setting asks for (uvloop comes with noti[http])
        uvloop = pytest.importorskip("uvloop")
        assert isinstance(loop, uvloop.Loop) is (kind == "auto")
        assert sorted(slow_receiver.ids) == sorted(hooks) and slow_receiver.refusals == []
    finally:
        sendloop.send_loop().stop()


def test_a_prefetch_window_reduced_by_a_connection_loss_widens_again_as_messages_are_acked(
    rt: Any, start_worker_now: Any
) -> None:
    # given a worker whose prefetch window Celery reduced to one step when its broker
    # connection was lost with requests in flight (Celery < 5.7 does on Redis; set here as
    # Celery sets it, whatever the version installed)
    with start_worker_now() as worker:
        consumer = worker.consumer
        wait_until(lambda: consumer.qos is not None and consumer.qos.value, timeout=10)
        full, step = consumer.max_prefetch_count, consumer.prefetch_multiplier
        assert full >= 3 * step
        with consumer.qos._mutex:
            consumer.qos.value = consumer.initial_prefetch_count = step
            consumer.qos.set(step)
            consumer._maximum_prefetch_restored = False
        # when the batch worker delivers and acks messages
        ids = [noti.notify_sms(PHONE, f"after the loss {i}") for i in range(10)]
        wait_until(lambda: all(rt.store.get(i).status is Status.DONE for i in ids), timeout=30)
        # then each ack took a step back, as Celery's ack promises do: the whole window is back
        wait_until(lambda: consumer._maximum_prefetch_restored, timeout=10)
        assert consumer.qos.value == full


def test_a_stopping_worker_finishes_the_sends_in_flight(
    rt: Any, spawn_worker: Any, slow_receiver: WebhookReceiver
) -> None:
    # given a worker with 10 webhooks waiting on a slow receiver
    slow_receiver.delay_s = 1.5
    config = (
        f'[providers.hook]\nkind = "webhook"\nsecret = "{SECRET}"\nallow_private = true\n'
        f'destinations = ["{slow_receiver.url}/"]\n'
        '[channels.webhook]\nprovider = "hook"\n'
        '[provider_grants]\n"*" = ["hook"]\n'
    )
    ids = [noti.notify_webhook(slow_receiver.url + "/in", content={"n": i}) for i in range(10)]
    worker = spawn_worker(config, "-P", "solo", name="drain")
    wait_until(lambda: len(slow_receiver.requests) >= 10, timeout=30)
    # when it is told to stop while they are in flight
    worker.stop()
    # then it finished and recorded them before going: none is left leased or queued again
    assert worker.proc.returncode == 0, worker.output()
    assert [rt.store.get(i).status for i in ids] == [Status.DONE] * 10
    assert rt.redis.hlen("unacked") == 0, worker.output()
    assert sum(rt.redis.llen(k) for k in rt.redis.keys("noti.webhook*")) == 0
    assert Counter(slow_receiver.ids) == Counter(ids)


@pytest.mark.slow
def test_a_slow_send_does_not_hold_back_the_outcomes_of_its_batch(
    configure: Any, monkeypatch: pytest.MonkeyPatch, start_worker_now: Any
) -> None:
    # given one batch of webhooks: 9 to a receiver that answers at once, 1 to one that
    # answers after 4 s (found by the chaos run: a worker killed while the slow one was
    # pending sent the 9 others again, their outcomes not recorded yet)
    finishes = _count_calls(monkeypatch, "finish_many")
    with WebhookReceiver() as fast, WebhookReceiver() as slow:
        rt = configure(
            providers={"hook": hook_options(fast, slow)},
            channels={"webhook": {"provider": "hook"}},
            provider_grants={"*": ["hook"]},
        )
        slow.delay_s = 4.0
        items = [{"type": "webhook", "to": fast.url + "/in", "content": {"n": i}} for i in range(9)]
        items.insert(4, {"type": "webhook", "to": slow.url + "/in", "content": {"slow": True}})
        ids = noti.notify_many(items).ids
        slow_id, fast_ids = ids[4], [i for i in ids if i != ids[4]]
        with start_worker_now():
            # when the batch is sent
            wait_until(lambda: all(rt.store.get(i).status is Status.DONE for i in fast_ids), timeout=30)
            # then the 9 quick outcomes are recorded (and acked) while the slow send waits for
            # its answer
            assert rt.store.get(slow_id).status is Status.WAITING
            assert len(slow.requests) == 1
            wait_until(lambda: rt.store.get(slow_id).status is Status.DONE, timeout=30)
    assert sorted(fast.ids) == sorted(fast_ids) and slow.ids == [slow_id]
    assert sum(finishes) == 10 and len(finishes) >= 2, finishes


def test_a_send_that_raises_goes_back_to_the_queue_and_its_batch_is_recorded(
    configure: Any, monkeypatch: pytest.MonkeyPatch, start_worker_now: Any
) -> None:
    # given a bug that breaks one send of a batch on the send loop, once
    from noti.sending.sender import Sender

    original = Sender.attempt_async
    broken: list[str] = []

    async def attempt_async(self: Sender, attempt: Any) -> Any:
        if not broken:
            broken.append(attempt.record.id)
            raise RuntimeError("a bug")
        return await original(self, attempt)

    monkeypatch.setattr(Sender, "attempt_async", attempt_async)
    with WebhookReceiver() as receiver:
        rt = configure(
            providers={"hook": hook_options(receiver)},
            channels={"webhook": {"provider": "hook"}},
            provider_grants={"*": ["hook"]},
            lease_timeout_s=1,
        )
        ids = noti.notify_many(
            [{"type": "webhook", "to": receiver.url + "/in", "content": {"n": i}} for i in range(5)]
        ).ids
        # when a worker sends them: the others are recorded, the broken one is queued again
        # and sent once its lease ends
        with start_worker_now():
            wait_until(lambda: all(rt.store.get(i).status is Status.DONE for i in ids), timeout=30)
    assert broken and sorted(receiver.ids) == sorted(ids)


def test_outcomes_are_recorded_while_blocking_sends_hold_every_send_thread(
    configure: Any, monkeypatch: pytest.MonkeyPatch, start_worker_now: Any
) -> None:
    # given a send loop with two send threads, and one batch of three SMS to a blocking
    # vendor: the first answered at once, the two others held until the test says
    from noti.sending import loop as sendloop
    from tests import broken_provider

    sendloop.send_loop().stop()
    monkeypatch.setattr(sendloop, "SEND_THREADS", 2)
    rt = configure(providers={"gated": {"kind": "tests.broken_provider:GatedProvider"}})
    broken_provider.GATE.clear()
    items = [{"type": "sms", "to": to, "text": "t", "provider": "gated"} for to in (PHONE, PHONE9, PHONE9)]
    quick, *held = noti.notify_many(items).ids
    try:
        with start_worker_now():
            # when the held sends take both send threads
            # then the quick one's outcome is recorded anyway (it used to wait for a send
            # thread, where a worker killed meanwhile would send it again)
            wait_until(lambda: rt.store.get(quick).status is Status.DONE, timeout=15)
            assert [rt.store.get(i).status for i in held] == [Status.WAITING] * 2
            broken_provider.GATE.set()
            wait_until(lambda: all(rt.store.get(i).status is Status.DONE for i in held), timeout=30)
    finally:
        broken_provider.GATE.set()
        sendloop.send_loop().stop()  # the next test gets a loop with its usual threads


def test_task_mode_still_runs_one_message_per_task(
    configure: Any, monkeypatch: pytest.MonkeyPatch, start_worker_now: Any
) -> None:
    rt = configure(delivery_mode="task")
    ids = [noti.notify_sms(PHONE, f"n{i}") for i in range(5)]
    claims = _count_calls(monkeypatch, "claim_many")
    with start_worker_now():
        wait_until(lambda: rt.store.count(Status.DONE) == 5, timeout=30)
    assert claims == [1] * 5 and len(set(ids)) == 5


def test_a_batch_that_breaks_loses_nothing(
    configure: Any, monkeypatch: pytest.MonkeyPatch, start_worker_now: Any
) -> None:
    # given a bug that breaks the first batch after its claim
    rt = configure(lease_timeout_s=1)
    ids = [noti.notify_sms(PHONE, f"n{i}") for i in range(5)]
    from noti.sending.sender import Sender

    original = Sender.attempt_many
    broken: list[int] = []

    def attempt_many(self: Sender, attempts: Any, **kwargs: Any) -> Any:
        if not broken:
            broken.append(len(attempts))
            raise RuntimeError("a bug")
        return original(self, attempts, **kwargs)

    monkeypatch.setattr(Sender, "attempt_many", attempt_many)
    # when a worker runs it: the consumer survives, the messages are queued again, and the
    # records (leased by the broken batch) are sent once their lease ends
    with start_worker_now():
        wait_until(lambda: all(rt.store.get(i).status is Status.DONE for i in ids), timeout=30)
    assert broken and sorted(e["id"] for e in sandbox_outbox(rt)) == sorted(ids)


@pytest.mark.slow
def test_claims_held_through_a_redis_outage_are_renewed_or_given_up(
    configure: Any, monkeypatch: pytest.MonkeyPatch, start_worker_now: Any
) -> None:
    # given a batch whose claim is made but whose sorting meets Redis going away, retried
    # after its 1 s leases ran out; meanwhile another sender takes one of its records
    import threading

    from noti.celery.tasks import batching
    from noti.errors import StoreUnavailable
    from noti.sending.sender import Sender

    rt = configure(lease_timeout_s=1)
    monkeypatch.setattr(batching, "CLAIM_RETRY_S", 1.5)
    kept, taken = noti.notify_sms(PHONE, "kept"), noti.notify_sms(PHONE, "taken")
    original = Sender.sort_claims
    failed: list[list[str]] = []

    def sort_claims(self: Sender, claims: Any) -> Any:
        if not failed:
            failed.append([c[0] for c in claims])
            threading.Timer(1.2, lambda: rt.store.claim_many([taken], owner="thief", lease_ms=2000)).start()
            raise StoreUnavailable("Redis is not ready: LOADING")
        return original(self, claims)

    monkeypatch.setattr(Sender, "sort_claims", sort_claims)
    with start_worker_now():
        wait_until(lambda: rt.store.get(kept).status is Status.DONE, timeout=30)
        # then the record still ours was renewed and sent; the one taken was left to its
        # new owner, and sent once that lease ended (the worker was told to look again)
        assert [e["id"] for e in sandbox_outbox(rt)] == [kept]
        wait_until(lambda: rt.store.get(taken).status is Status.DONE, timeout=30)
    assert sorted(failed[0]) == sorted([kept, taken])
    assert sorted(e["id"] for e in sandbox_outbox(rt)) == sorted([kept, taken])
    assert rt.redis.hget(rt.keys.record(kept), "_claims") == "1"
    assert rt.redis.hget(rt.keys.record(taken), "_claims") == "3"  # ours, the thief's, the last
