"""The record: ids, hash/JSON forms, validation limits, the level → priority mapping."""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

import pytest

from noti.celery.queues import PRIORITY_STEPS, priority_for_level
from noti.core.record import (
    Channel,
    Notification,
    Status,
    from_hash,
    new_id,
    now_ms,
    parse_channel,
    parse_level,
    to_hash,
    validate_fields,
    validate_target,
)
from noti.core.record_json import to_json_dict
from noti.errors import InvalidInput
from noti.redis.entropy import hex64

ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"


def tail_of(record_id: str) -> int:
    """The random part of an id (its last 16 characters) as a number."""
    return int("".join(f"{ALPHABET.index(c):05b}" for c in record_id[10:]), 2)


def ms_of(record_id: str) -> int:
    """The millisecond an id is dated (its first 10 characters)."""
    return int("".join(f"{ALPHABET.index(c):05b}" for c in record_id[:10]), 2)


def test_ids_are_unique_and_sort_by_creation_time_to_the_millisecond() -> None:
    ids = [new_id() for _ in range(5000)]
    assert len(set(ids)) == 5000
    assert [i[:10] for i in ids] == sorted(i[:10] for i in ids)  # the time part never goes back
    assert all(len(i) == 26 and set(i) <= set(ALPHABET) for i in ids)
    assert new_id(at_ms=1_000) < new_id(at_ms=2_000_000_000_000)
    # an id of a later millisecond sorts after every id of an earlier one, whatever its tail
    at = ms_of(new_id())
    earlier = [new_id(at_ms=at) for _ in range(200)]
    assert max(earlier) < min(new_id(at_ms=at + 1) for _ in range(200))


def test_ids_of_one_millisecond_give_no_neighbour_away() -> None:
    # given 1,000 ids made in one millisecond (they once were consecutive: x, x+1, x+2, ...)
    at = ms_of(new_id())
    ids = [new_id(at_ms=at) for _ in range(1000)]
    assert {ms_of(i) for i in ids} == {at}
    tails = sorted(tail_of(i) for i in ids)
    # then no two are near each other: the closest pair of 1,000 draws of 80 bits is about
    # 2^60 apart, and under 2^40 one run in a million
    assert min(b - a for a, b in zip(tails, tails[1:], strict=False)) > 2**40
    # and each of the 80 bits is set in about half of them (an increment, a counter or a
    # narrower random part would leave high bits fixed)
    for bit in range(80):
        ones = sum(t >> bit & 1 for t in tails)
        assert 350 < ones < 650, (bit, ones)
    # and they are made in no order: about half of them sort below the one before
    below = sum(b < a for a, b in zip(ids, ids[1:], strict=False))
    assert 350 < below < 650, below


def test_hash_round_trip_keeps_every_field() -> None:
    record = Notification(
        id=new_id(),
        channel=Channel.WEIXIN,
        target="oOPENID",
        creator="alice",
        level=7,
        status=Status.DONE,
        errmsg="ok",
        lease_until_ms=5,
        retry=2,
        retry_max=4,
        created_ms=10,
        modified_ms=20,
        expires_ms=30,
        fields={"pnb": "acct", "tmpl": "T", "content": {"k": {"value": "v"}}},
        provider="sandbox",
        sent_by="sandbox",
        msgid="m1",
    )
    data = to_hash(record)
    assert data["tp"] == "wn_noti"
    assert data["noti_wx_tmpl_id"] == "T" and data["noti_wx_tmpl_msgid"] == "m1"
    assert json.loads(data["noti_weixin_tmpl_content"]) == {"k": {"value": "v"}}
    assert from_hash(data) == record


def test_an_sms_records_own_template_is_kept_as_json() -> None:
    fields = validate_fields(Channel.SMS, {"text": "{}", "template": '{"ali": "SMS_1", "tc": "1234567"}'})
    record = Notification(
        id=new_id(), channel=Channel.SMS, target="+8613912345678", creator="a", fields=fields
    )
    data = to_hash(record)
    assert json.loads(data["noti_sms_tmpl"]) == {"ali": "SMS_1", "tc": "1234567"}
    assert from_hash(data) == record


def test_json_form_uses_seed_names_and_numbers() -> None:
    record = Notification(
        id="x",
        channel=Channel.SMS,
        target="+8613912345678",
        creator="a",
        fields={"text": "hi"},
        created_ms=1,
        modified_ms=1,
    )
    data = to_json_dict(record)
    assert data["noti_sms_text"] == "hi"
    assert data["noti_st"] == 1 and data["noti_lv"] == 1 and data["noti_timeout_at"] == 0
    assert data["noti_errmsg"] is None and data["expi"] is None and data["noti_sms_provider"] is None


def each(channel: Channel, *targets: str | None) -> list[tuple[Channel, str | None]]:
    return [(channel, target) for target in targets]


GOOD_TARGETS = [
    *each(Channel.SMS, "+8613912345678", "13912345678", "+14155550100"),
    *each(Channel.WEIXIN, "oUpF8uMuAJO_M2pxb1Q9zNjWeS6o"),
    *each(Channel.EMAIL, "ops@example.com"),
    *each(Channel.WEBHOOK, "https://hooks.example.com/in?x=1"),
]
BAD_TARGETS = [
    *each(Channel.SMS, "", "12345", "+0123456789", "139-1234-5678", "+86 13912345678"),
    *each(Channel.WEIXIN, "   ", "o" * 129, "has space"),
    *each(Channel.EMAIL, "no-at-sign", "a@b", "two@@example.com"),
    *each(Channel.WEBHOOK, "ftp://example.com", "not a url"),
    *each(Channel.SMS, None),
]


@pytest.mark.parametrize(("channel", "target"), GOOD_TARGETS)
def test_good_targets_are_accepted(channel: Channel, target: str) -> None:
    assert validate_target(channel, target) == target


@pytest.mark.parametrize(("channel", "target"), BAD_TARGETS)
def test_bad_targets_are_refused_with_a_clear_message(channel: Channel, target: str) -> None:
    with pytest.raises(InvalidInput) as info:
        validate_target(channel, target)
    assert info.value.code == "e.cmd.noti.add.badtarget"
    assert info.value.message


@pytest.mark.parametrize(
    ("channel", "fields", "code"),
    [
        (Channel.SMS, {}, "missing"),
        (Channel.SMS, {"text": ""}, "badtext"),
        (Channel.SMS, {"text": "   "}, "badtext"),
        (Channel.SMS, {"text": "x" * 1001}, "badtext"),
        (Channel.SMS, {"text": "a\x00b"}, "badtext"),
        (Channel.SMS, {"text": "hi", "tmpl": "T"}, "badfield"),
        (Channel.SMS, {"text": "hi", "template": {}}, "badtemplate"),
        (Channel.SMS, {"text": "hi", "template": '{"ali": " "}'}, "badtemplate"),
        (Channel.SMS, {"text": "hi", "template": ["SMS_1"]}, "badtemplate"),
        (Channel.WEIXIN, {"pnb": "a", "tmpl": "T"}, "missing"),
        (Channel.WEIXIN, {"pnb": "a", "tmpl": "T", "content": "[1, 2]"}, "badcontent"),
        (Channel.WEIXIN, {"pnb": "a", "tmpl": "T", "content": "{not json"}, "badcontent"),
        (Channel.WEIXIN, {"pnb": "a", "tmpl": "T", "content": '"a string"'}, "badcontent"),
        (Channel.WEIXIN, {"pnb": "a", "tmpl": "T", "content": {"k": "v" * 17000}}, "badcontent"),
        (Channel.WEIXIN, {"pnb": "a", "tmpl": "T", "content": {}, "url": "javascript:x"}, "badfield"),
        (Channel.WEIXIN, {"pnb": "a b", "tmpl": "T", "content": {}}, "badfield"),
        (Channel.EMAIL, {"subject": "s"}, "missing"),
        (Channel.EMAIL, {"subject": "two\nlines", "text": "t"}, "badtext"),
        (Channel.EMAIL, {"subject": "s", "text": "t", "unsubscribe": "mailto:u@example.com"}, "badfield"),
        (Channel.EMAIL, {"subject": "s", "text": "t", "unsubscribe": "https://e.example/a b"}, "badfield"),
        (Channel.EMAIL, {"subject": "s", "text": "t", "unsubscribe": "https://e.example/é"}, "badfield"),
        (
            Channel.EMAIL,
            {"subject": "s", "text": "t", "unsubscribe": "https://e.example/" + "u" * 851},
            "badfield",
        ),
        (Channel.WEBHOOK, {"content": "3"}, "badcontent"),
    ],
)
def test_bad_fields_are_refused(channel: Channel, fields: dict[str, object], code: str) -> None:
    with pytest.raises(InvalidInput) as info:
        validate_fields(channel, fields)
    assert info.value.code == f"e.cmd.noti.add.{code}"


def test_fields_at_the_limits_are_accepted() -> None:
    assert validate_fields(Channel.SMS, {"text": "x" * 1000}) == {"text": "x" * 1000}
    link = "https://e.example/" + "u" * (868 - len("https://e.example/"))
    assert (
        validate_fields(Channel.EMAIL, {"subject": "s", "text": "t", "unsubscribe": link})["unsubscribe"]
        == link
    )
    out = validate_fields(
        Channel.WEIXIN, {"pnb": "a", "tmpl": "T", "content": '{"k": 1}', "url": "https://x.cn/a"}
    )
    assert out["content"] == {"k": 1}


@pytest.mark.parametrize("value", ["abc", "1.5", "", 0, -3, "0", None, True, 2.0])
def test_bad_levels_are_refused(value: object) -> None:
    with pytest.raises(InvalidInput) as info:
        parse_level(value)
    assert info.value.code == "e.cmd.noti.add.badlv"


@pytest.mark.parametrize(("value", "level"), [(1, 1), ("5", 5), (" 1000 ", 1000), (5000, 5000)])
def test_levels_parse(value: object, level: int) -> None:
    assert parse_level(value) == level


def test_unknown_type_names_the_known_ones() -> None:
    with pytest.raises(InvalidInput) as info:
        parse_channel("fax")
    assert info.value.code == "e.cmd.noti.add.badtype"
    assert "sms" in info.value.message and "weixin" in info.value.message


def test_level_to_priority_is_monotonic_and_uses_every_step() -> None:
    steps = [priority_for_level(level) for level in range(1, 1001)]
    assert all(a >= b for a, b in zip(steps, steps[1:], strict=False))  # higher level, earlier step
    assert priority_for_level(1) == 9 and priority_for_level(1000) == 0
    assert priority_for_level(100) == 3 and priority_for_level(99) == 4 and priority_for_level(10) == 6
    assert sorted(set(steps)) == PRIORITY_STEPS


def _in_a_forked_child(make: Any) -> list[str]:
    """What ``make()`` returns three times in a forked child, read back through a pipe."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.write(write, json.dumps([make() for _ in range(3)]).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        made = json.loads(pipe.read())
    os.waitpid(pid, 0)
    return list(made)


def test_a_forked_child_never_makes_the_ids_its_parent_makes_next() -> None:
    # given a parent that made an id in this millisecond (the next would be an increment)
    new_id(at_ms=now_ms() + 60_000)
    at = now_ms() + 60_000
    child = _in_a_forked_child(lambda: new_id(at_ms=at))
    parent = [new_id(at_ms=at) for _ in range(3)]
    assert not set(child) & set(parent)


def test_a_forked_child_never_draws_its_parents_random_digits() -> None:
    hex64()  # the parent holds a block of random digits
    child = _in_a_forked_child(hex64)
    parent = [hex64() for _ in range(3)]
    assert not set(child) & set(parent)
    assert all(len(h) == 64 and int(h, 16) >= 0 for h in child + parent)


def test_random_digits_are_never_handed_out_twice_across_threads() -> None:
    drawn: list[list[str]] = [[] for _ in range(4)]

    def draw(into: list[str]) -> None:
        into.extend(hex64() for _ in range(2000))

    threads = [threading.Thread(target=draw, args=(into,)) for into in drawn]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    every = [h for into in drawn for h in into]
    assert len(set(every)) == len(every) == 8000


def test_an_id_dated_in_the_future_does_not_date_the_ids_after_it() -> None:
    # found by the whole suite: one test's id for a far future moment dated every later id of
    # the process there, so ids made a millisecond apart no longer sorted by time
    future = new_id(now_ms() + 10**9)
    first = new_id()
    time.sleep(0.002)
    second = new_id()
    assert future[:10] > first[:10] and first[:10] < second[:10] and second < future
