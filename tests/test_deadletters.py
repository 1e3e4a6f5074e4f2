"""Dead letters: written with the failure, hook called, redriven, purged, trimmed."""

from __future__ import annotations

from typing import Any

import pytest

import noti
from noti.api import redrive
from noti.core.deadletter import DeadLetter, DeadLetters
from noti.core.record import Status, now_ms
from noti.errors import InvalidInput, NotFound, PermissionDenied
from tests import hooks
from tests.conftest import ADMIN, ALICE, BOB, sandbox_outbox, wait_until

PHONE = "+8613912345678"


def final(rt: Any, record_id: str) -> Any:
    return wait_until(lambda: (r := rt.store.get(record_id)).status is not Status.WAITING and r)


def test_exhausted_and_invalid_records_get_dead_letters_and_the_hook_is_called(
    configure: Any, worker: Any
) -> None:
    hooks.CALLS.clear()
    rt = configure(
        providers={
            "down": {"kind": "sandbox", "fail": "always"},
            "reject": {"kind": "sandbox", "fail": "always", "error": "permanent"},
        },
        retry_seconds=0.05,
        retry_max=2,
        dead_letter_hook="tests.hooks:collect",
    )
    exhausted = noti.notify_sms(PHONE, "x", provider="down")
    invalid = noti.notify_sms(PHONE, "y", provider="reject")
    final(rt, exhausted)
    final(rt, invalid)
    letters = {letter.record_id: letter for letter in redrive().entries(user=ADMIN)}
    assert letters[exhausted].error_class == "exhausted" and letters[exhausted].attempts == 2
    assert letters[exhausted].errmsg.startswith("e.cmd.noti.send.reachMaxRetry")
    assert letters[invalid].error_class == "invalid" and letters[invalid].type == "sms"
    assert letters[invalid].target == PHONE and letters[invalid].source == "noti"
    wait_until(lambda: len(hooks.CALLS) == 2)
    assert {c.record_id for c in hooks.CALLS} == {exhausted, invalid}


def test_retry_puts_the_record_back_with_attempts_reset(configure: Any, worker: Any) -> None:
    rt = configure(providers={"down": {"kind": "sandbox", "fail": "always"}}, retry_seconds=0.05, retry_max=2)
    record_id = noti.notify_sms(PHONE, "x", provider="down")
    final(rt, record_id)
    # when the provider is fixed and the dead letter retried
    rt = configure(providers={"down": {"kind": "sandbox"}}, retry_seconds=0.05, retry_max=2)
    revived = redrive().retry(record_id, user=ADMIN)
    assert revived.status is Status.WAITING and revived.retry == 0
    assert final(rt, record_id).status is Status.DONE
    assert [e["id"] for e in sandbox_outbox(rt, "down")] == [record_id]
    assert redrive().entries(user=ADMIN) == []


def test_retry_all_and_purge(rt: Any) -> None:
    ids = []
    for text in ("a", "b"):
        record = noti.api.notifier().build("sms", PHONE, text=text)
        rt.store.create(record)
        rt.store.claim(record.id, owner="w", lease_ms=1000)
        from noti.core.attempt import Outcome

        letter = DeadLetter(record.id, "sms", PHONE, 3, "exhausted", "boom", now_ms())
        rt.store.finish(record.id, owner="w", outcome=Outcome(Status.FAILED, "boom", 3), letter=letter)
        ids.append(record.id)
    rt.dead_letters.add(
        DeadLetter(
            "1700000000000-0",
            "orders",
            "",
            5,
            "poison",
            "bad json",
            now_ms(),
            source="webman:orders",
            payload="{",
        )
    )
    assert len(redrive().entries(user=ADMIN)) == 3
    with pytest.raises(InvalidInput) as info:
        redrive().retry("1700000000000-0", user=ADMIN)
    assert info.value.code == "e.cmd.noti.dead.notretryable"
    assert sorted(r.id for r in redrive().retry_all(user=ADMIN)) == sorted(ids)
    assert all(rt.store.get(i).status is Status.WAITING for i in ids)
    assert redrive().purge(user=ADMIN) == 1
    assert redrive().entries(user=ADMIN) == []


def test_a_user_reads_retries_and_purges_the_dead_letters_of_their_own_records_only(configure: Any) -> None:
    rt = configure(providers={"refuse": {"kind": "sandbox", "fail": "always", "error": "permanent"}})
    mine = noti.notify_sms(PHONE, "a", provider="refuse", user=ALICE)
    theirs = noti.notify_sms(PHONE, "b", provider="refuse", user=BOB)
    noti.send(user=ADMIN)
    assert {letter.record_id for letter in redrive().entries(user=ADMIN)} == {mine, theirs}
    assert [letter.record_id for letter in redrive().entries(user=ALICE)] == [mine]
    with pytest.raises(NotFound) as hidden:
        redrive().get(theirs, user=ALICE)
    with pytest.raises(NotFound) as missing:
        redrive().get("0" * 26, user=ALICE)
    assert hidden.value.code == missing.value.code == "e.cmd.noti.dead.not_found"
    with pytest.raises(NotFound):
        redrive().retry(theirs, user=ALICE)
    assert rt.store.get(theirs).status in (Status.FAILED, Status.INVALID)
    assert redrive().purge(user=ALICE) == 1
    assert [letter.record_id for letter in redrive().entries(user=ADMIN)] == [theirs]
    assert redrive().purge(user=ALICE) == 0
    with pytest.raises(PermissionDenied) as info:
        redrive().unsuppress("sms", PHONE, user=BOB)  # the suppression list is everyone's
    assert info.value.code == "e.cmd.noti.dead.nopvg"


def test_the_stream_is_capped_by_length_and_age(rt: Any) -> None:
    letters = DeadLetters(rt.redis, rt.keys, max_len=5, max_age_s=60)
    for i in range(12):
        letters.add(DeadLetter(f"r{i}", "sms", PHONE, 1, "invalid", "x", now_ms()))
    letters.trim()
    assert len(letters) == 5  # the exact length cap (XADD's own cap is approximate)
    assert [entry.record_id for entry in letters.entries()] == [f"r{i}" for i in range(11, 6, -1)]
    assert letters.trim(at_ms=now_ms() + 61_000) == 5 and len(letters) == 0
