"""The record store on a real Redis: indexes, the claim, the fenced finish, delete."""

from __future__ import annotations

import threading
from typing import Any

from noti.core.attempt import ClaimState, Outcome
from noti.core.record import Channel, Notification, Status, new_id, now_ms


def make(creator: str = "alice", level: int = 1, **kwargs: Any) -> Notification:
    created = kwargs.pop("created_ms", now_ms())
    return Notification(
        id=new_id(created),
        channel=Channel.SMS,
        target="+8613912345678",
        creator=creator,
        level=level,
        created_ms=created,
        modified_ms=created,
        fields={"text": "hi"},
        **kwargs,
    )


def test_create_writes_the_record_and_its_indexes(rt: Any) -> None:
    record = make()
    rt.store.create(record)
    k = rt.keys
    assert rt.store.get(record.id) == record
    assert rt.redis.zscore(k.all_index, record.id) == record.created_ms
    assert rt.redis.zscore(k.user_index("alice"), record.id) == record.created_ms
    assert rt.redis.zscore(k.status_index(1), record.id) is not None
    assert rt.redis.zscore(k.waiting_index, record.id) == -1


def test_waiting_order_is_level_desc_then_age_asc(rt: Any) -> None:
    t = now_ms()
    a, b, c, d = (
        make(level=1, created_ms=t),
        make(level=50, created_ms=t + 1),
        make(level=1, created_ms=t + 2),
        make(level=50, created_ms=t + 3),
    )
    rt.store.create_many([c, a, d, b])
    assert rt.store.waiting_head(10) == [b.id, d.id, a.id, c.id]


def test_claim_takes_a_waiting_record_once(rt: Any) -> None:
    record = make()
    rt.store.create(record)
    first = rt.store.claim(record.id, owner="w1", lease_ms=10_000)
    second = rt.store.claim(record.id, owner="w2", lease_ms=10_000)
    assert first.state is ClaimState.CLAIMED and first.record.id == record.id and first.claims == 1
    assert second.state is ClaimState.LEASED and second.until_ms >= now_ms() + 9_000


def test_claim_after_the_lease_expires_succeeds(rt: Any) -> None:
    record = make()
    rt.store.create(record)
    t = now_ms()
    rt.store.claim(record.id, owner="w1", lease_ms=1_000, at_ms=t)
    assert rt.store.claim(record.id, owner="w2", lease_ms=1_000, at_ms=t + 999).state is ClaimState.LEASED
    again = rt.store.claim(record.id, owner="w2", lease_ms=1_000, at_ms=t + 1_000)
    assert again.state is ClaimState.CLAIMED and again.claims == 2


def test_claim_reports_missing_final_and_foreign(rt: Any) -> None:
    record = make(creator="bob")
    rt.store.create(record)
    assert rt.store.claim("nope", owner="w", lease_ms=1).state is ClaimState.MISSING
    assert rt.store.claim(record.id, owner="w", lease_ms=1, creator="alice").state is ClaimState.FOREIGN
    claim = rt.store.claim(record.id, owner="w", lease_ms=1000, creator="bob")
    assert rt.store.finish(record.id, owner="w", outcome=Outcome(Status.DONE, "ok", 0))
    final = rt.store.claim(record.id, owner="w", lease_ms=1000)
    assert claim.state is ClaimState.CLAIMED
    assert final.state is ClaimState.FINAL and final.status is Status.DONE


def test_concurrent_claims_give_each_record_to_one_owner(rt: Any) -> None:
    records = [make() for _ in range(300)]
    rt.store.create_many(records)
    ids = [r.id for r in records]
    won: dict[str, list[str]] = {}
    lock = threading.Lock()

    def grab(owner: str) -> None:
        for claim, record_id in zip(rt.store.claim_many(ids, owner=owner, lease_ms=60_000), ids, strict=True):
            if claim.state is ClaimState.CLAIMED:
                with lock:
                    won.setdefault(record_id, []).append(owner)

    threads = [threading.Thread(target=grab, args=(f"w{i}",)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(won) == sorted(ids)
    assert all(len(owners) == 1 for owners in won.values())


def test_finish_is_fenced_by_the_lease_owner(rt: Any) -> None:
    record = make()
    rt.store.create(record)
    rt.store.claim(record.id, owner="w1", lease_ms=10_000)
    assert not rt.store.finish(record.id, owner="w2", outcome=Outcome(Status.DONE, "ok", 0))
    assert rt.store.get(record.id).status is Status.WAITING
    assert rt.store.finish(record.id, owner="w1", outcome=Outcome(Status.DONE, "ok", 0, expires_ms=99))
    done = rt.store.get(record.id)
    assert (
        done.status is Status.DONE
        and done.errmsg == "ok"
        and done.expires_ms == 99
        and done.lease_until_ms == 0
    )
    k = rt.keys
    assert rt.redis.zscore(k.waiting_index, record.id) is None
    assert rt.redis.zscore(k.status_index(1), record.id) is None
    assert rt.redis.zscore(k.status_index(10), record.id) is not None
    assert not rt.store.finish(record.id, owner="w1", outcome=Outcome(Status.FAILED, "late", 1))


def test_finish_with_retry_schedules_the_record_in_the_delayed_set(rt: Any) -> None:
    record = make()
    rt.store.create(record)
    rt.store.claim(record.id, owner="w1", lease_ms=10_000)
    due = now_ms() + 60_000
    assert rt.store.finish(
        record.id, owner="w1", outcome=Outcome(Status.WAITING, "busy", 1, not_before_ms=due)
    )
    again = rt.store.get(record.id)
    assert again.status is Status.WAITING and again.retry == 1 and again.lease_until_ms == due
    assert rt.delayed.due_at(record.id) == due
    waiting = rt.store.claim(record.id, owner="w2", lease_ms=1)
    assert waiting.state is ClaimState.NOT_DUE and waiting.until_ms == due


def test_delete_removes_the_record_from_every_index(rt: Any) -> None:
    record = make()
    rt.store.create(record)
    rt.delayed.schedule(record.id, now_ms() + 1000)
    assert rt.store.delete(record.id) == record
    assert rt.store.find(record.id) is None
    for key in rt.redis.keys(f"{rt.keys.prefix}*"):
        if rt.redis.type(key) == "zset":
            assert rt.redis.zscore(key, record.id) is None, key
    assert rt.store.delete(record.id) is None


def test_select_by_creator_and_status_newest_first(rt: Any) -> None:
    t = now_ms()
    mine = [make("alice", created_ms=t + i) for i in range(3)]
    theirs = [make("bob", created_ms=t + 10 + i) for i in range(2)]
    rt.store.create_many(mine + theirs)
    rt.store.claim(mine[0].id, owner="w", lease_ms=1000)
    rt.store.finish(mine[0].id, owner="w", outcome=Outcome(Status.DONE, "ok", 0))
    assert [r.id for r in rt.store.select(creator="alice")] == [r.id for r in reversed(mine)]
    assert [r.id for r in rt.store.select(status=Status.DONE)] == [mine[0].id]
    assert [r.id for r in rt.store.select(creator="alice", status=Status.WAITING)] == [mine[2].id, mine[1].id]
    assert len(rt.store.select(limit=2)) == 2
    assert len(rt.store.select()) == 5


def test_delayed_pump_publishes_due_records_and_keeps_them_until_confirmed(rt: Any) -> None:
    record = make()
    rt.store.create(record)
    t = now_ms()
    rt.delayed.schedule(record.id, t)
    published: list[tuple[str, Channel, int]] = []

    def failing_publish(items: Any) -> int:
        raise RuntimeError("broker down")

    try:
        rt.delayed.pump_once(failing_publish, at_ms=t)
    except RuntimeError:
        pass
    # taken but not confirmed: it is still there, re-armed to fire again
    assert rt.delayed.due_at(record.id) == t + rt.delayed.REARM_MS
    assert rt.delayed.pump_once(lambda items: published.extend(items) or 0, at_ms=t) == 0
    assert (
        rt.delayed.pump_once(lambda items: published.extend(items) or 0, at_ms=t + rt.delayed.REARM_MS) == 1
    )
    assert published == [(record.id, Channel.SMS, 1)]
    assert rt.delayed.due_at(record.id) is None


def test_records_are_stored_after_the_server_lost_its_scripts(rt: Any) -> None:
    import noti

    rt.redis.script_flush()
    record_id = noti.notify_sms("+8613912345678", "after a flush")
    assert rt.store.get(record_id).fields == {"text": "after a flush"}
    assert rt.redis.llen("noti.sms:9") == 1
    rt.redis.script_flush()
    assert rt.store.claim(record_id, owner="w", lease_ms=1000).state is ClaimState.CLAIMED


def test_text_survives_storage_byte_for_byte(rt: Any) -> None:
    import noti

    text = '您的验证码是 4321 😀 "quoted" \\ back\\slash \t tab \u2028 ~'
    record_id = noti.notify_sms("+8613912345678", text)
    assert rt.store.get(record_id).fields == {"text": text}
    content = {"first": {"value": "订单 ✓ 😀"}, "n": 1.5, "list": [1, "二"], "nested": {"a": None}}
    wx = noti.notify_weixin("oOPENID", tmpl="T", pnb="acct", content=content)
    assert rt.store.get(wx).fields["content"] == content
