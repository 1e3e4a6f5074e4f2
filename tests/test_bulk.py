"""notify_many / schedule_many: validate everything, store the good ones, report the rest."""

from __future__ import annotations

from typing import Any

import noti
from noti.api import notify_many, schedule_many
from noti.record import Status

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
    from noti.bulk import add_many

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
