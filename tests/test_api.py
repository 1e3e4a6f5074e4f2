"""The Python API: level caps, permissions, bad input stores nothing."""

from __future__ import annotations

from typing import Any

import pytest

import noti
from noti.api import notifier
from noti.core.record import Status
from noti.errors import InvalidInput, NotFound, PermissionDenied
from tests.conftest import ADMIN, ALICE, BOB, MEMBER

PHONE = "+8613912345678"


def stored_keys(rt: Any) -> set[str]:
    return {k for k in rt.redis.keys("*") if not k.startswith("_kombu")}


@pytest.mark.parametrize(
    ("user", "asked", "got"),
    [
        (ADMIN, 1000, 1000),
        (ADMIN, 5000, 1000),
        (ADMIN, 7, 7),
        (MEMBER, 1000, 100),
        (MEMBER, 100, 100),
        (MEMBER, 50, 50),
        (ALICE, 1000, 1),
        (ALICE, 2, 1),
        (ALICE, 1, 1),
    ],
)
def test_levels_are_capped_by_role(rt: Any, user: str, asked: int, got: int) -> None:
    record_id = noti.notify("sms", PHONE, text="hi", lv=asked, user=user)
    assert rt.store.get(record_id).level == got


def test_default_user_comes_from_the_settings(rt: Any) -> None:
    record_id = noti.notify_sms(PHONE, "hi")
    assert rt.store.get(record_id).creator == ALICE


def test_notify_queues_a_message_with_only_the_record_id(rt: Any) -> None:
    import base64
    import json

    record_id = noti.notify_sms(PHONE, "secret text", lv=1, user=ADMIN)
    raw = rt.redis.lrange("noti.sms:9", 0, -1)
    assert len(raw) == 1
    body = json.loads(base64.b64decode(json.loads(raw[0])["body"]))
    assert body[0] == [record_id] and body[1] == {}
    assert "secret text" not in raw[0]


def test_high_levels_go_to_early_priority_steps(rt: Any) -> None:
    noti.notify_sms(PHONE, "urgent", lv=1000, user=ADMIN)
    noti.notify_sms(PHONE, "member", lv=100, user=MEMBER)
    assert rt.redis.llen("noti.sms") == 1  # step 0 has no suffix
    assert rt.redis.llen("noti.sms:3") == 1


def test_notify_helpers_build_each_channel(rt: Any) -> None:
    wx = noti.notify_weixin(
        "oOPENID", tmpl="T1", pnb="acct", content={"first": {"value": "x"}}, url="https://a.cn"
    )
    mail = noti.notify_email("ops@example.com", subject="s", text="t")
    hook = noti.notify_webhook("https://example.com/h", content='{"a": 1}')
    assert rt.store.get(wx).fields == {
        "tmpl": "T1",
        "pnb": "acct",
        "content": {"first": {"value": "x"}},
        "url": "https://a.cn",
    }
    assert rt.store.get(mail).fields == {"subject": "s", "text": "t"}
    assert rt.store.get(hook).fields == {"content": {"a": 1}}
    assert (
        rt.redis.llen("noti.weixin:9")
        == rt.redis.llen("noti.email:9")
        == rt.redis.llen("noti.webhook:9")
        == 1
    )


@pytest.mark.parametrize(
    ("args", "kwargs", "code"),
    [
        (("fax", PHONE), {"text": "x"}, "e.cmd.noti.add.badtype"),
        (("sms", ""), {"text": "x"}, "e.cmd.noti.add.badtarget"),
        (("sms", "12"), {"text": "x"}, "e.cmd.noti.add.badtarget"),
        (("sms", PHONE), {"text": ""}, "e.cmd.noti.add.badtext"),
        (("sms", PHONE), {"text": "y" * 5000}, "e.cmd.noti.add.badtext"),
        (("sms", PHONE), {"text": "x", "lv": "high"}, "e.cmd.noti.add.badlv"),
        (("sms", PHONE), {"text": "x", "lv": 0}, "e.cmd.noti.add.badlv"),
        (("sms", PHONE), {"text": "x", "provider": "nosuch"}, "e.cmd.noti.add.providerdenied"),
        (("sms", PHONE), {"text": "x", "provider": " "}, "e.cmd.noti.add.noprovider"),
        (("sms", PHONE), {"text": "x", "retry_max": 0}, "e.cmd.noti.add.badretry"),
        (("sms", PHONE), {"text": "x", "color": "red"}, "e.cmd.noti.add.badfield"),
        (("weixin", "oX"), {"tmpl": "T", "pnb": "p", "content": "[]"}, "e.cmd.noti.add.badcontent"),
        (("weixin", "oX"), {"tmpl": "T", "pnb": "p", "content": "{oops"}, "e.cmd.noti.add.badcontent"),
        (("email", "nobody"), {"subject": "s", "text": "t"}, "e.cmd.noti.add.badtarget"),
        (("webhook", "http://x.io/h"), {"content": [1]}, "e.cmd.noti.add.badcontent"),
    ],
)
def test_bad_input_is_refused_and_nothing_is_stored(
    rt: Any, args: tuple[str, str], kwargs: dict[str, Any], code: str
) -> None:
    before = stored_keys(rt)
    with pytest.raises((InvalidInput, PermissionDenied)) as info:  # a provider not granted: denied
        noti.notify(*args, **kwargs)
    assert info.value.code == code
    assert str(info.value).startswith(code + ": ")
    assert stored_keys(rt) == before


def test_a_channel_without_a_provider_is_refused(configure: Any) -> None:
    rt = configure(channels={})
    with pytest.raises(InvalidInput) as info:
        noti.notify_sms(PHONE, "hi")
    assert info.value.code == "e.cmd.noti.add.noprovider"
    assert "-provider" in info.value.message
    assert rt.store.count() == 0
    # naming a provider works without a channel default
    assert noti.notify_sms(PHONE, "hi", provider="sandbox")


def test_users_see_only_their_own_records_and_root_sees_all(rt: Any) -> None:
    mine = noti.notify_sms(PHONE, "a", user=ALICE)
    theirs = noti.notify_sms(PHONE, "b", user=BOB)
    assert [r.id for r in noti.list_notifications(user=ALICE)] == [mine]
    assert {r.id for r in noti.list_notifications(user=MEMBER)} == {mine, theirs}
    assert [r.id for r in noti.list_notifications(user=ADMIN, creator=BOB)] == [theirs]
    with pytest.raises(PermissionDenied) as info:
        noti.list_notifications(user=ALICE, creator=BOB)
    assert info.value.code == "e.cmd.noti.list.nopvg"
    assert noti.get(mine, user=ALICE).id == mine
    with pytest.raises(NotFound) as hidden:  # another user's record: as if there were none
        noti.get(theirs, user=ALICE)
    assert hidden.value.code == "e.cmd.noti.not_found"


def test_delete_rules(rt: Any) -> None:
    mine = noti.notify_sms(PHONE, "a", user=ALICE)
    theirs = noti.notify_sms(PHONE, "b", user=BOB)
    with pytest.raises(PermissionDenied) as info:
        noti.delete(theirs, user=ALICE)
    assert info.value.code == "e.cmd.noti.del.nopvg"
    assert rt.store.find(theirs) is not None
    assert noti.delete(mine, user=ALICE).id == mine
    assert noti.delete(theirs, user=MEMBER).id == theirs
    with pytest.raises(NotFound) as missing:
        noti.delete(mine, user=ADMIN)
    assert missing.value.code == "e.cmd.noti.del.not_a_msg"


def test_clean_is_for_root_members_and_removes_only_old_done_records(rt: Any) -> None:
    done_old, done_new, waiting = (noti.notify_sms(PHONE, t, user=ALICE) for t in "abc")
    for record_id in (done_old, done_new):
        list(notifier().send(record_id, user=ADMIN))
    rt.redis.zadd(rt.keys.status_index(10), {done_old: 1_000})  # finished long ago
    with pytest.raises(PermissionDenied) as info:
        noti.clean(user=ALICE)
    assert info.value.code == "e.cmd.noti.clean.nopvg"
    removed = noti.clean(user=MEMBER, keep_s=3600)
    assert [r.id for r in removed] == [done_old]
    assert rt.store.find(done_new) is not None and rt.store.find(waiting) is not None
    assert [r.id for r in noti.clean(user=ADMIN, keep_s=0)] == [done_new]
    assert rt.store.get(waiting).status is Status.WAITING


def test_send_picks_own_records_in_level_then_age_order(rt: Any) -> None:
    low = noti.notify_sms(PHONE, "low", user=ADMIN, lv=1)
    high = noti.notify_sms(PHONE, "high", user=ADMIN, lv=500)
    mid = noti.notify_sms(PHONE, "mid", user=ADMIN, lv=20)
    alice = noti.notify_sms(PHONE, "alice", user=ALICE)
    assert [r.record_id for r in noti.send(user=ALICE)] == [alice]
    assert [r.record_id for r in noti.send(user=ADMIN, limit=2)] == [high, mid]
    assert [r.record_id for r in noti.send(user=ADMIN)] == [low]
    with pytest.raises(PermissionDenied) as info:
        noti.send(user=ALICE, creator=ADMIN)
    assert info.value.code == "e.cmd.noti.send.nopvg"


def test_send_refuses_another_users_record_by_id(rt: Any) -> None:
    theirs = noti.notify_sms(PHONE, "b", user=BOB)
    with pytest.raises(PermissionDenied) as info:
        noti.send(theirs, user=ALICE)
    assert info.value.code == "e.cmd.noti.send.nopvg"
    assert rt.store.get(theirs).status is Status.WAITING
    with pytest.raises(NotFound):
        noti.send("0000000000000000000000000", user=ADMIN)


def test_an_idempotency_key_creates_one_record_however_often_it_is_used(rt: Any) -> None:
    first = noti.notify_sms(PHONE, "once", idempotency_key="order-7:paid")
    again = noti.notify_sms(PHONE, "twice", idempotency_key="order-7:paid")
    other = noti.notify_sms(PHONE, "other", idempotency_key="order-8:paid")
    assert first == again != other
    assert rt.store.count() == 2
    assert rt.redis.llen("noti.sms:9") == 2  # the repeat queued nothing
    assert rt.store.get(first).fields == {"text": "once"}
    with pytest.raises(InvalidInput) as info:
        noti.notify_sms(PHONE, "x", idempotency_key="")
    assert info.value.code == "e.cmd.noti.add.badkey"
