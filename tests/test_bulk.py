"""notify_many / schedule_many: validate everything, store the good ones, report the rest."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

import noti
from noti.api import notify_many, schedule_many
from noti.celery.publish import queue_key
from noti.celery.queues import priority_for_level
from noti.core.record import Status
from noti.errors import StoreUnavailable
from tests.conftest import ADMIN

PHONE = "+8613912345678"


def keys_of(rt: Any) -> set[str]:
    return {k for k in rt.redis.keys(f"{rt.keys.prefix}*")}


def test_good_items_are_stored_and_bad_ones_reported_without_storing(rt: Any) -> None:
    items: list[Any] = [{"type": "sms", "to": PHONE, "text": f"m{i}"} for i in range(10)]
    items[2] = {"type": "sms", "to": "12", "text": "bad target"}
    items[5] = {"type": "fax", "to": PHONE, "text": "bad type"}
    items[7] = "not a mapping"
    items[8] = {"type": "sms", "to": PHONE, "text": "x", "user": "root"}  # no impersonation
    result = notify_many(items)
    assert result.stored == 6
    assert [(r.index, r.code) for r in result.refused] == [
        (2, "e.cmd.noti.add.badtarget"),
        (5, "e.cmd.noti.add.badtype"),
        (7, "e.cmd.noti.add.baditem"),
        (8, "e.cmd.noti.add.badfield"),
    ]
    assert [i is None for i in result.ids] == [
        False,
        False,
        True,
        False,
        False,
        True,
        False,
        True,
        True,
        False,
    ]
    assert rt.store.count() == 6
    assert {rt.store.get(i).fields["text"] for i in result.ids if i} == {"m0", "m1", "m3", "m4", "m6", "m9"}
    assert rt.redis.llen("noti.sms:9") == 6


def test_fifty_thousand_in_one_call(rt: Any) -> None:
    items = [{"type": "sms", "target": PHONE, "text": f"bulk {i}", "lv": 1} for i in range(50_000)]
    result = notify_many(items)
    assert result.stored == 50_000 and not result.refused
    assert rt.store.count() == 50_000 and rt.store.count(Status.WAITING) == 50_000
    assert rt.redis.llen("noti.sms:9") == 50_000
    assert len(set(result.ids)) == 50_000


def test_schedule_many_delays_every_item_and_keeps_identifiers(rt: Any) -> None:
    items = [
        {"type": "sms", "to": PHONE, "text": "a"},
        {"type": "sms", "to": PHONE, "text": "b", "identifier": "dup"},
        {"type": "sms", "to": PHONE, "text": "c", "identifier": "dup"},
        {"type": "email", "to": "a@example.com", "subject": "s", "text": "t", "delay": 5},
    ]
    result = schedule_many(items, delay=60)
    assert result.stored == 4 and result.ids[1] == result.ids[2]
    assert rt.store.count() == 3 and rt.delayed.size() == 3
    assert rt.store.get(str(result.ids[1])).fields == {"text": "c"}
    assert not [k for k in rt.redis.keys("noti.*") if rt.redis.llen(k)]


def test_bulk_respects_level_caps_and_the_acting_user(rt: Any) -> None:
    result = notify_many([{"type": "sms", "to": PHONE, "text": "x", "lv": 1000}], user="bob")
    record = noti.get(str(result.ids[0]), user="bob")
    assert record.creator == "bob" and record.level == 1


def test_refusals_and_ids_keep_their_places_across_chunks(rt: Any) -> None:
    from noti.api import notifier
    from noti.sending.bulk import add_many

    # given 2,500 items, chunks of 1,000 stored while the next is checked, bad ones here and there
    bad = {5, 999, 1000, 1500, 2499}
    items = [{"type": "sms", "to": "oops" if i in bad else PHONE, "text": f"n{i}"} for i in range(2500)]
    result = add_many(notifier(), items, chunk_size=1000)
    # then every refusal names its own index, and every stored id is that item's record
    assert [r.index for r in result.refused] == sorted(bad)
    assert [i for i, record_id in enumerate(result.ids) if record_id is None] == sorted(bad)
    stored = {i: record_id for i, record_id in enumerate(result.ids) if record_id is not None}
    for i in (0, 998, 1001, 1999, 2000, 2498):
        assert rt.store.get(stored[i]).fields["text"] == f"n{i}"
    assert rt.store.count() == 2500 - len(bad)


MIXED: list[dict[str, Any]] = [
    {"type": "sms", "to": PHONE, "text": "plain"},
    {"type": "sms", "to": PHONE, "text": "urgent", "lv": 500},
    {"type": "sms", "to": PHONE, "text": "later", "delay": 30},
    {"type": "email", "to": "a@example.com", "subject": "s", "text": "t", "html": "<p>t</p>"},
    {"type": "webhook", "to": "https://example.com/h", "content": {"n": 1, "s": "二"}},
    {"type": "weixin", "to": "oOPENID", "tmpl": "T1", "pnb": "acct", "content": {"k": {"value": "v"}}},
    {"type": "sms", "to": PHONE, "text": "chosen", "provider": "sandbox", "retry_max": 7},
    {"type": "sms", "to": PHONE, "text": "policy", "retry_policy": "linear:5"},
    {"type": "sms", "to": PHONE, "text": "plain"},
]
#: Fields that differ between two records made from the same item.
_PER_RECORD = {"id", "ct", "lm", "noti_timeout_at"}


def test_a_mixed_bulk_stores_each_record_as_a_single_notify_would(rt: Any) -> None:
    # given items of every channel, level, delay and option, bulk-stored in small chunks
    # (records of one script call share the hash fields they have alike, and are cut
    # where creator, status or queue changes), and the same items sent one at a time
    from noti.api import notifier
    from noti.sending.bulk import add_many

    bulk = add_many(notifier(), MIXED * 3, chunk_size=4, user=ADMIN)
    single = add_many(notifier(), MIXED, chunk_size=1, user=ADMIN)
    assert bulk.stored == 3 * len(MIXED) and single.stored == len(MIXED)
    k = rt.keys
    for i, record_id in enumerate(bulk.ids):
        twin = single.ids[i % len(MIXED)]
        # then every record's hash is the one its twin got, field for field
        mine, theirs = rt.redis.hgetall(k.record(record_id)), rt.redis.hgetall(k.record(twin))
        assert {f: v for f, v in mine.items() if f not in _PER_RECORD} == {
            f: v for f, v in theirs.items() if f not in _PER_RECORD
        }
        assert mine["id"] == record_id
        record = rt.store.get(record_id)
        # and it is in every index it belongs to, with its own scores
        assert rt.redis.zscore(k.all_index, record_id) == record.created_ms
        assert rt.redis.zscore(k.user_index(record.creator), record_id) == record.created_ms
        assert rt.redis.zscore(k.status_index(1), record_id) == record.created_ms
        assert rt.redis.zscore(k.waiting_index, record_id) == -record.level
        delayed = rt.redis.zscore(k.delayed, record_id)
        assert delayed == (record.lease_until_ms if "delay" in MIXED[i % len(MIXED)] else None)
    # and every undelayed record has exactly one message, on its own priority list
    queued = {}
    for name in rt.redis.keys("noti.*"):
        for raw in rt.redis.lrange(name, 0, -1):
            from noti.celery.transport import kombu_json

            body = kombu_json(raw)
            record_id = json.loads(base64.b64decode(body["body"]))[0][0]
            assert record_id not in queued
            queued[record_id] = name
    expected = {}
    for record_id in [*bulk.ids, *single.ids]:
        record = rt.store.get(record_id)
        if not record.lease_until_ms:
            expected[record_id] = queue_key(record.channel.queue, priority_for_level(record.level))
    assert queued == expected
    assert queued[bulk.ids[1]] == "noti.sms:1"  # level 500, asked for by a root admin


def test_idempotency_keys_within_one_bulk_call_and_across_calls(rt: Any) -> None:
    items = [
        {"type": "sms", "to": PHONE, "text": "first", "idempotency_key": "k1"},
        {"type": "sms", "to": PHONE, "text": "other", "idempotency_key": "k2"},
        {"type": "sms", "to": PHONE, "text": "repeat", "idempotency_key": "k1"},
        {"type": "sms", "to": PHONE, "text": "no key"},
    ]
    first = notify_many(items)
    assert first.stored == 4 and first.ids[2] == first.ids[0] and len(set(first.ids)) == 3
    again = notify_many(items[:2])
    assert again.ids == first.ids[:2]
    assert rt.store.count() == 3 and rt.redis.llen("noti.sms:9") == 3
    assert rt.store.get(str(first.ids[0])).fields == {"text": "first"}


def test_a_connection_lost_mid_call_raises_and_leaves_no_record_without_its_message(
    rt: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from noti.sending import bulk

    # given a bulk call whose Redis connections are killed after its second chunk is built
    built = 0
    build = bulk._build_chunk

    def build_then_kill(*args: Any, **kwargs: Any) -> Any:
        nonlocal built
        built += 1
        if built == 2:
            rt.redis.client_kill_filter(_type="normal", skipme=True)
        return build(*args, **kwargs)

    monkeypatch.setattr(bulk, "_build_chunk", build_then_kill)
    items = [{"type": "sms", "to": PHONE, "text": f"n{i}"} for i in range(3000)]
    # then it fails with StoreUnavailable
    with pytest.raises(StoreUnavailable, match="cannot reach Redis"):
        bulk.add_many(bulk_notifier(), items, chunk_size=1000)
    # and whatever was stored is whole: script calls (100 records each) ran entirely or not
    # at all, each record with its message
    stored = rt.store.count()
    assert stored % 100 == 0 and stored <= 2000
    assert rt.redis.llen("noti.sms:9") == stored == len(rt.redis.keys(rt.keys.record("*")))
    # and the next call works on a fresh connection
    assert notify_many(items[:10]).stored == 10


def bulk_notifier() -> Any:
    from noti.api import notifier

    return notifier()


def test_a_chunk_that_cannot_be_built_stops_the_call_after_the_chunk_before_is_stored_whole(
    rt: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from noti.errors import InvalidConfig
    from noti.sending import bulk

    # given: a second chunk whose provider settings turn out broken
    build = bulk._build_chunk
    calls = 0

    def build_or_fail(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise InvalidConfig("provider 'x' is misconfigured")
        return build(*args, **kwargs)

    monkeypatch.setattr(bulk, "_build_chunk", build_or_fail)
    items: list[dict[str, Any]] = [{"type": "sms", "to": PHONE, "text": f"n{i}"} for i in range(4)]
    items[1] = {"type": "sms", "to": PHONE, "text": "identified", "identifier": "one", "delay": 60}
    # when: it is sent in chunks of two
    with pytest.raises(InvalidConfig):
        bulk.add_many(bulk_notifier(), items, chunk_size=2)
    # then: the first chunk is stored whole, its identified record included, and nothing more
    assert rt.store.count() == 2 and rt.delayed.size() == 1
    assert {r.fields["text"] for r in rt.store.select()} == {"n0", "identified"}
