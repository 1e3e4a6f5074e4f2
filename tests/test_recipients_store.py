"""Recipients in Redis (issue 34): profiles checked before they are stored, merge patches,
merging two recipients, preferences and categories with their locks, bulk import from CSV and
JSON lines, and who may touch whose recipients."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from noti import recipients
from noti.errors import InvalidInput, NotFound, PermissionDenied
from noti.recipients.importing import rows_of_csv, rows_of_jsonl
from noti.recipients.profile import ADDRESSES_MAX
from tests.conftest import MEMBER

PROFILE = {
    "addresses": {"sms": ["+8613912345678", "13800000000"], "email": "ada@example.com"},
    "locale": "zh_hant_tw",
    "timezone": "Asia/Taipei",
    "quiet_hours": "22:00-07:00",
    "attributes": {"name": "Ada", "plan": "pro"},
}


@pytest.fixture
def rt(configure: Any) -> Any:
    return configure()


def test_a_profile_is_stored_normalised_and_read_back(rt: Any) -> None:
    profile, created = recipients.put("42", PROFILE)
    assert created
    again = recipients.get("42")
    assert again == profile
    assert again.addresses == {"sms": ("+8613912345678", "13800000000"), "email": ("ada@example.com",)}
    assert again.primary("sms") == "+8613912345678"
    assert again.locale == "zh-Hant-TW" and again.timezone == "Asia/Taipei"
    assert again.quiet_hours == "22:00-07:00" and again.attributes == {"name": "Ada", "plan": "pro"}
    replaced, created = recipients.put("42", {"addresses": {"email": "b@example.com"}})
    assert not created and replaced.created_ms == profile.created_ms and replaced.locale is None


def _too_many() -> dict[str, Any]:
    return {"addresses": {"sms": [f"+861391234{n:04d}" for n in range(ADDRESSES_MAX + 1)]}}


@pytest.mark.parametrize(
    ("rid", "body", "code"),
    [
        ("../etc", {}, "e.cmd.noti.rcpt.badid"),
        ("a b", {}, "e.cmd.noti.rcpt.badid"),
        ("x" * 129, {}, "e.cmd.noti.rcpt.badid"),
        ("42\n", {}, "e.cmd.noti.rcpt.badid"),
        ("42", {"id": "43"}, "e.cmd.noti.rcpt.badid"),
        ("42", [1, 2], "e.cmd.noti.rcpt.baddoc"),
        ("42", "{not json", "e.cmd.noti.rcpt.baddoc"),
        ("42", {"adresses": {}}, "e.cmd.noti.rcpt.baddoc"),
        ("42", {"addresses": {"pager": "1"}}, "e.cmd.noti.rcpt.badaddr"),
        ("42", {"addresses": {"sms": "not a phone"}}, "e.cmd.noti.rcpt.badaddr"),
        ("42", {"addresses": {"sms": 13912345678}}, "e.cmd.noti.rcpt.badaddr"),
        ("42", {"addresses": ["+8613912345678"]}, "e.cmd.noti.rcpt.badaddr"),
        ("42", _too_many(), "e.cmd.noti.rcpt.badaddr"),
        ("42", {"locale": "english please"}, "e.cmd.noti.rcpt.badlocale"),
        ("42", {"locale": "en\x00"}, "e.cmd.noti.rcpt.badlocale"),
        ("42", {"timezone": "Mars/Olympus"}, "e.cmd.noti.rcpt.badtz"),
        ("42", {"timezone": "../../etc/passwd"}, "e.cmd.noti.rcpt.badtz"),
        ("42", {"quiet_hours": "25:00-07:00"}, "e.cmd.noti.rcpt.badquiet"),
        ("42", {"quiet_hours": "22:00-22:00"}, "e.cmd.noti.rcpt.badquiet"),
        ("42", {"attributes": [1]}, "e.cmd.noti.rcpt.badattrs"),
        ("42", {"attributes": {"x": float("nan")}}, "e.cmd.noti.rcpt.badattrs"),
        ("42", {"attributes": {"big": "x" * 20_000}}, "e.cmd.noti.rcpt.badattrs"),
        ("42", {"attributes": {"a\u0000": 1}}, "e.cmd.noti.rcpt.badattrs"),
        ("42", {"attributes": {"x": [{"line\nbreak": 1}]}}, "e.cmd.noti.rcpt.badattrs"),
        ("42", {"attributes": {"": 1}}, "e.cmd.noti.rcpt.badattrs"),
        ("42", "x" * 70_000, "e.cmd.noti.rcpt.toobig"),
    ],
)
def test_a_bad_profile_is_refused_and_nothing_is_stored(rt: Any, rid: str, body: Any, code: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        recipients.put(rid, body)
    assert caught.value.code == code
    assert rt.redis.keys("noti:rcpt*") == []


def test_a_merge_patch_changes_only_what_it_names(rt: Any) -> None:
    recipients.put("42", PROFILE)
    updated = recipients.update(
        "42", {"locale": "en", "attributes": {"plan": None, "vip": True}, "quiet_hours": None}
    )
    assert updated.locale == "en" and updated.timezone == "Asia/Taipei"
    assert updated.attributes == {"name": "Ada", "vip": True}
    assert updated.quiet_hours == "default"
    with pytest.raises(InvalidInput) as caught:
        recipients.update("42", {"addresses": {"sms": "nope"}})
    assert caught.value.code == "e.cmd.noti.rcpt.badaddr"
    assert recipients.get("42") == updated
    with pytest.raises(NotFound):
        recipients.update("43", {"locale": "en"})


def test_merging_joins_addresses_keeps_the_first_ones_say_and_removes_the_second(rt: Any) -> None:
    recipients.put("42", {"addresses": {"sms": "+8613912345678"}, "locale": "en"})
    recipients.put(
        "anon-7", {"addresses": {"sms": "+8613800000000", "email": "a@example.com"}, "locale": "fr"}
    )
    recipients.put_category("orders", {}, user=MEMBER)
    recipients.set_preferences("anon-7", {"orders": {"email": False}, "*": {"sms": False}})
    recipients.set_preferences("42", {"*": {"sms": True}})
    merged = recipients.merge("42", "anon-7")
    assert merged.addresses == {"sms": ("+8613912345678", "+8613800000000"), "email": ("a@example.com",)}
    assert merged.locale == "en"
    assert recipients.preferences("42") == {"*": {"sms": True}, "orders": {"email": False}}
    with pytest.raises(NotFound):
        recipients.get("anon-7")
    with pytest.raises(InvalidInput):
        recipients.merge("42", "42")


def test_preferences_are_set_cleared_and_locked_for_categories_that_forbid_opting_out(rt: Any) -> None:
    recipients.put("42", PROFILE)
    recipients.put_category("security", {"critical": True}, user=MEMBER)
    recipients.put_category("billing", {"opt_out": False}, user=MEMBER)
    recipients.put_category("news", {"channels": {"sms": False}}, user=MEMBER)
    assert recipients.set_preferences("42", {"news": {"email": False, "*": True}}) == {
        "news": {"email": False, "*": True}
    }
    assert recipients.set_preferences("42", {"news": {"email": None}}) == {"news": {"*": True}}
    for category in ("security", "billing"):
        with pytest.raises(InvalidInput) as caught:
            recipients.set_preferences("42", {category: {"sms": False}})
        assert caught.value.code == "e.cmd.noti.pref.locked"
    recipients.set_preferences("42", {"security": {"sms": True}})  # opting in is always allowed


@pytest.mark.parametrize(
    ("prefs", "code"),
    [
        ({}, "e.cmd.noti.pref.bad"),
        ([], "e.cmd.noti.pref.bad"),
        ({"news": True}, "e.cmd.noti.pref.bad"),
        ({"news": {"pager": False}}, "e.cmd.noti.pref.bad"),
        ({"news": {"sms": "no"}}, "e.cmd.noti.pref.bad"),
        ({"nosuch": {"sms": False}}, "e.cmd.noti.cat.not_found"),
        ({"BAD NAME": {"sms": False}}, "e.cmd.noti.cat.badname"),
    ],
)
def test_bad_preferences_are_refused_and_nothing_changes(rt: Any, prefs: Any, code: str) -> None:
    recipients.put("42", PROFILE)
    recipients.put_category("news", {}, user=MEMBER)
    with pytest.raises((InvalidInput, NotFound)) as caught:
        recipients.set_preferences("42", prefs)
    assert caught.value.code == code
    assert recipients.preferences("42") == {}


@pytest.mark.parametrize(
    ("name", "declaration", "code"),
    [
        ("Orders", {}, "e.cmd.noti.cat.badname"),
        ("orders", {"critical": True, "opt_out": True}, "e.cmd.noti.cat.bad"),
        ("orders", {"channels": {"pager": True}}, "e.cmd.noti.cat.bad"),
        ("orders", {"channels": {"sms": "yes"}}, "e.cmd.noti.cat.bad"),
        ("orders", {"colour": "red"}, "e.cmd.noti.cat.bad"),
        ("orders", [1], "e.cmd.noti.cat.bad"),
    ],
)
def test_bad_categories_are_refused(rt: Any, name: str, declaration: Any, code: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        recipients.put_category(name, declaration, user=MEMBER)
    assert caught.value.code == code
    assert [c.name for c in recipients.list_categories()] == ["general"]


def test_only_root_members_declare_categories(rt: Any) -> None:
    with pytest.raises(PermissionDenied) as caught:
        recipients.put_category("orders", {}, user="alice")
    assert caught.value.code == "e.cmd.noti.cat.nopvg"
    recipients.put_category("orders", {"critical": True}, user="ops")
    assert recipients.list_categories()[1].to_dict()["critical"] is True


def test_users_see_only_their_own_recipients_and_root_may_name_an_owner(rt: Any) -> None:
    recipients.put("42", PROFILE, user="alice")
    with pytest.raises(NotFound):
        recipients.get("42", user="bob")
    with pytest.raises(PermissionDenied):
        recipients.get("42", user="bob", owner="alice")
    assert recipients.get("42", user="ops", owner="alice").locale == "zh-Hant-TW"
    assert [r.id for r in recipients.list_recipients(user="alice")] == ["42"]
    recipients.put("43", PROFILE, user="alice")
    assert [r.id for r in recipients.list_recipients(user="alice", after="42")] == ["43"]
    with pytest.raises(NotFound):  # paging after a deleted id: no silent restart from the top
        recipients.list_recipients(user="alice", after="41")
    assert recipients.list_recipients(user="bob") == []


def test_a_bulk_import_stores_good_rows_and_lists_bad_ones(rt: Any) -> None:
    csv_text = "id,sms,email,locale,attr.name,attributes\n" + "".join(
        f'u{n},+86139{n:08d},u{n}@example.com,en,User {n},"{{""n"": {n}}}"\n' for n in range(2000)
    )
    csv_text += "bad id,+8613900000000,,,,\nu9999,not-a-phone,,,,\n"
    result = recipients.import_rows(rows_of_csv(io.StringIO(csv_text)))
    assert (result.created, result.updated) == (2000, 0)
    assert [(n, code) for n, code, _ in result.refused] == [
        (2001, "e.cmd.noti.rcpt.badid"),
        (2002, "e.cmd.noti.rcpt.badaddr"),
    ]
    u7 = recipients.get("u7")
    assert u7.primary("email") == "u7@example.com" and u7.attributes == {"n": 7, "name": "User 7"}
    lines = [json.dumps({"id": "u1", "locale": "fr"}), "", "{oops", json.dumps({"id": "v1"})]
    again = recipients.import_rows(rows_of_jsonl(lines))
    assert (again.created, again.updated) == (1, 1)
    assert [code for _, code, _ in again.refused] == ["e.cmd.noti.rcpt.baddoc"]


@pytest.mark.parametrize(
    "text", ["", "sms,email\n+8613912345678,a@b.co\n", "id,pager\n1,2\n", "id,id\n1,1\n"]
)
def test_a_csv_file_with_a_bad_header_is_refused_whole(rt: Any, text: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        recipients.import_rows(rows_of_csv(io.StringIO(text)))
    assert caught.value.code == "e.cmd.noti.rcpt.badcsv"
    assert rt.redis.keys("noti:rcpt*") == []


def test_concurrent_writes_to_one_recipient_are_retried_never_lost_or_refused(rt: Any) -> None:
    import threading

    recipients.put("42", PROFILE)
    recipients.put_category("news", {}, user=MEMBER)
    failures: list[BaseException] = []

    def write(n: int) -> None:
        try:
            for i in range(15):
                recipients.update("42", {"attributes": {f"t{n}": i}})
                recipients.set_preferences("42", {"news": {"sms": i % 2 == 0}})
        except BaseException as exc:  # noqa: BLE001 - the test reports any
            failures.append(exc)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert {k: v for k, v in recipients.get("42").attributes.items() if k.startswith("t")} == {
        f"t{n}": 14 for n in range(6)
    }


@pytest.mark.parametrize("scores", [1, 3, 1203], ids=["one-score", "three-scores", "every-one-its-own"])
def test_erasure_reads_every_old_record_of_the_owner_however_the_pages_fall(rt: Any, scores: int) -> None:
    from noti.recipients import erasure

    # given: 1,203 old records of one owner (pages of 500 end inside a run of equal scores),
    # every third one made for recipient r1, and a newer one (the log's: not read here)
    index = rt.keys.user_index("alice")
    ids = [f"01old{i:05d}" for i in range(1203)]
    pipe = rt.redis.pipeline()
    for i, record_id in enumerate(ids):
        pipe.zadd(index, {record_id: 1_000 + i % scores})
        pipe.hset(rt.keys.record(record_id), "noti_rcpt", "r1" if i % 3 == 0 else "r2")
    pipe.zadd(index, {"01new": 5_000})
    pipe.hset(rt.keys.record("01new"), "noti_rcpt", "r1")
    pipe.execute()
    # when
    found = erasure._older_records(rt.redis, rt.keys, "alice", "r1", before_ms=5_000)
    # then: each of r1's old records once, none of r2's, not the newer one
    assert sorted(found) == [r for i, r in enumerate(ids) if i % 3 == 0]
