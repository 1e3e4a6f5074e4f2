"""Revoking waiting notifications for good: ``noti.revoke`` / ``noti revoke`` (by id or a
whole backlog), the way to make a backlog go where ``celery purge`` only postpones it."""

from __future__ import annotations

from typing import Any

import pytest

import noti
from noti.core.record import Status
from noti.errors import InvalidInput, NotFound, PermissionDenied
from tests.conftest import ALICE, BOB, MEMBER, sandbox_outbox, wait_until
from tests.test_cli import run

pytestmark = pytest.mark.integration

PHONE = "+8613912345678"


def _status(rt: Any, record_id: str) -> Status:
    return rt.store.get(record_id).status


def test_a_revoked_backlog_is_never_sent_and_its_messages_are_dropped(rt: Any, start_worker_now: Any) -> None:
    # given a queued backlog (no worker yet) and one delayed notification
    backlog = [noti.notify_sms(PHONE, f"old news {i}") for i in range(5)]
    later = noti.notify_email("a@example.com", subject="s", text="later", delay=1)
    # when the backlog and the delayed one are revoked before any worker runs
    done = noti.revoke(every=True)
    assert sorted(done.revoked) == sorted([*backlog, later]) and done.held == []
    fresh = noti.notify_sms(PHONE, "fresh")
    with start_worker_now():
        wait_until(lambda: _status(rt, fresh) is Status.DONE, timeout=15)
        wait_until(lambda: sum(rt.redis.llen(k) for k in rt.redis.keys("noti.sms*")) == 0, timeout=10)
        wait_until(lambda: rt.redis.hlen("unacked") == 0, timeout=10)
    # then only the fresh one went out; the revoked records say so
    assert [e["fields"]["text"] for e in sandbox_outbox(rt)] == ["fresh"]
    for record_id in [*backlog, later]:
        record = rt.store.get(record_id)
        assert record.status is Status.INVALID and record.revoked_ms and "revoked by alice" in record.errmsg
    # and the sweep of lost messages never brings them back
    from noti.celery.publish import Publisher
    from noti.sending.upkeep import sweep_lost

    publisher = Publisher(noti.celery.app.app, store_url=rt.settings.redis_url, store_redis=rt.redis)
    assert sweep_lost(rt, publisher, older_than_s=0, at_ms=10**13) == 0


def test_revoke_filters_and_permissions(rt: Any) -> None:
    mine_sms = [noti.notify_sms(PHONE, "a", user=ALICE), noti.notify_sms(PHONE, "b", user=ALICE)]
    mine_email = noti.notify_email("a@example.com", subject="s", text="t", user=ALICE)
    urgent = noti.notify_sms(PHONE, "urgent", user=MEMBER, lv=50)
    bobs = noti.notify_sms(PHONE, "bob's", user=BOB)
    # a user revokes their own, by channel
    assert sorted(noti.revoke(every=True, channel="sms", user=ALICE).revoked) == sorted(mine_sms)
    assert _status(rt, mine_email) is Status.WAITING and _status(rt, bobs) is Status.WAITING
    # not someone else's, in bulk or by id
    with pytest.raises(PermissionDenied) as denied:
        noti.revoke(every=True, creator=BOB, user=ALICE)
    assert denied.value.code == "e.cmd.noti.revoke.nopvg"
    with pytest.raises(NotFound) as hidden:  # by id: answered as a missing one
        noti.revoke([bobs], user=ALICE)
    assert hidden.value.code == "e.cmd.noti.revoke.not_found"
    # a root member revokes anyone's below a level
    assert sorted(noti.revoke(every=True, below_level=10, user=MEMBER).revoked) == sorted([mine_email, bobs])
    assert _status(rt, urgent) is Status.WAITING
    # a finished or revoked record is not revoked again
    assert noti.revoke([bobs], user=MEMBER).revoked == []


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "code"),
    [
        ((), {}, InvalidInput, "e.cmd.noti.revoke.what"),
        ((["x"],), {"every": True}, InvalidInput, "e.cmd.noti.revoke.what"),
        ((["no-such-id"],), {}, NotFound, "e.cmd.noti.revoke.not_found"),
        ((), {"every": True, "channel": "fax"}, InvalidInput, "e.cmd.noti.add.badtype"),
        ((), {"every": True, "below_level": 0}, InvalidInput, "e.cmd.noti.add.badlv"),
    ],
)
def test_bad_revoke_requests_are_refused_and_change_nothing(
    rt: Any, args: tuple[Any, ...], kwargs: dict[str, Any], error: type[Exception], code: str
) -> None:
    record_id = noti.notify_sms(PHONE, "stays")
    with pytest.raises(error) as refused:
        noti.revoke(*args, **kwargs)
    assert getattr(refused.value, "code", None) == code
    assert _status(rt, record_id) is Status.WAITING


def test_the_revoke_command(rt: Any) -> None:
    ids = [noti.notify_sms(PHONE, f"n{i}") for i in range(2)]
    email = noti.notify_email("a@example.com", subject="s", text="t")
    result = run("revoke", "-all", "-type", "sms")
    assert result.exit_code == 0 and sorted(result.stdout.split()[1::2]) == sorted(ids)
    assert "2 revoked" in result.stderr
    assert run("revoke", email).stdout.strip() == f"revoked {email}"
    usage = run("revoke", "-type", "sms")
    assert usage.exit_code == 2 and "go with -all" in usage.stderr


def test_a_record_held_by_a_sender_is_revoked_at_its_next_claim(rt: Any, start_worker_now: Any) -> None:
    from noti.sending.sender import Sender

    # given a queued notification whose record another sender holds for 1 s (about to send it)
    record_id = noti.notify_sms(PHONE, "held")
    Sender(rt, owner="elsewhere").claim_records([record_id], lease_ms=1000)
    # when it is revoked, it is only marked (the holder's send may be under way)
    done = noti.revoke([record_id])
    assert done.revoked == [] and done.held == [record_id]
    assert rt.redis.hget(rt.keys.record(record_id), "noti_revoke_requested")
    # then the holder went away without sending; the next claim revokes it instead of sending
    with start_worker_now():
        wait_until(lambda: _status(rt, record_id) is Status.INVALID, timeout=20)
    record = rt.store.get(record_id)
    assert record.revoked_ms and sandbox_outbox(rt) == []
    assert rt.redis.hget(rt.keys.record(record_id), "noti_revoke_requested") is None


def test_the_revoke_command_names_the_records_a_sender_holds(rt: Any) -> None:
    from noti.sending.sender import Sender

    record_id = noti.notify_sms(PHONE, "held")
    Sender(rt, owner="elsewhere").claim_records([record_id], lease_ms=30_000)
    result = run("revoke", record_id)
    assert result.stdout.strip() == f"held {record_id}" and "1 held by a sender now" in result.stderr
