"""A timeline per notification (noti/core/timeline.py) and the search that finds it
(noti/core/search.py), through a real worker, ``noti serve`` and the CLI.

The first test is the issue's: a notification that fails over from one provider to another,
retries, is sent and gets a receipt shows each step in order in ``noti.timeline``,
``noti get -timeline`` and ``GET /v1/notifications/{id}/timeline``. Then each other writer of a
step (revoke, dead letter and its re-drive, the fallback, the status callback, notify's holds),
the bound, the deletion with the record, erasure, the doors, and search with its permissions
and its bad inputs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

import noti
import noti.tasks
from noti import recipients
from noti.api import redrive
from noti.core.record import Status
from noti.core.timeline import MAX_STEPS, Step, step_text, why_waiting
from noti.delivery import ReceiptRequest
from noti.errors import InvalidInput, NotFound, PermissionDenied
from noti.providers.sandbox import sign_receipt
from noti.sending.intake import ReceiptIntake
from tests.conftest import ADMIN, ALICE, BOB, MEMBER, wait_until
from tests.servers import ApiProcess
from tests.test_cli import run

pytestmark = pytest.mark.integration

PHONE = "+8613912345678"
OTHER = "+8613900000000"
SECRET = "r3ceipt"


@pytest.fixture
def rt(configure: Any) -> Any:
    """sms through ``flaky`` (always a temporary failure), then ``backup`` (fails its first
    attempt of each record, then takes it: accepted, its receipt pushed signed)."""
    return configure(
        providers={
            "flaky": {"kind": "sandbox", "fail": "always"},
            "backup": {"kind": "sandbox", "fail_first": 1, "receipt_secret": SECRET},
        },
        channels={
            "sms": {"provider": "flaky,backup"},
            "email": {"provider": "sandbox"},
            "weixin": {"provider": "sandbox"},
            "webhook": {"provider": "sandbox"},
        },
        pump_interval_s=0.1,
    )


def push_receipt(rt: Any, record_id: str, state: str) -> None:
    body = json.dumps([{"msgid": f"sandbox-{record_id}", "state": state, "code": state.upper()}]).encode()
    headers = {"x-sandbox-signature": sign_receipt(SECRET, body)}
    ReceiptIntake(rt).take(
        "backup", ReceiptRequest("POST", "http://127.0.0.1/v1/receipts/backup", headers, body)
    )


def events(steps: list[dict[str, Any]]) -> list[str]:
    return [s["event"] for s in steps]


def test_failover_retry_send_and_receipt_are_each_a_step_in_order(
    rt: Any, worker: Any, api: ApiProcess
) -> None:
    record_id = noti.notify_sms(PHONE, "code 1234", retry_policy="linear:1", user=ALICE)
    wait_until(lambda: rt.store.get(record_id).status is Status.DONE, timeout=30)
    push_receipt(rt, record_id, "delivered")
    timeline = noti.timeline(record_id, user=ALICE).to_dict()
    steps = timeline["steps"]
    assert events(steps) == [
        "created",
        "claimed",
        "attempt",  # flaky: failed
        "failover",
        "attempt",  # backup: its first attempt fails
        "retry",
        "claimed",
        "attempt",  # flaky again
        "failover",
        "attempt",  # backup takes it
        "sent",
        "receipt",
    ], steps
    created, claimed = steps[0], steps[1]
    assert created["by"] == ALICE and created["door"] == "api" and created["channel"] == "sms"
    assert claimed["worker"] and claimed["claims"] == 1
    attempts = [s for s in steps if s["event"] == "attempt"]
    assert [(a["provider"], a["outcome"]) for a in attempts] == [
        ("flaky", "failed"),
        ("backup", "failed"),
        ("flaky", "failed"),
        ("backup", "ok"),
    ]
    assert all(a["ms"] >= 0 for a in attempts)
    assert attempts[0]["code"] == "e.noti.delivery.temporary" and attempts[0]["text"]
    assert attempts[3]["msgid"] == f"sandbox-{record_id}"
    assert steps[3] == {**steps[3], "from": "flaky", "to": "backup"}
    retry = steps[5]
    assert retry["retry"] == 1 and retry["at"] >= steps[4]["at"]
    sent, receipt = steps[10], steps[11]
    assert (
        sent["provider"] == "backup"
        and sent["msgid"] == f"sandbox-{record_id}"
        and sent["delivery"] == "accepted"
    )
    assert (
        receipt["state"] == "delivered" and receipt["provider"] == "backup" and receipt["code"] == "DELIVERED"
    )
    assert [s["at"] for s in steps] == sorted(s["at"] for s in steps)
    assert timeline["dropped"] == 0
    # the same through the CLI and the HTTP API
    shown = json.loads(run("get", record_id, "-timeline", "-json", user=ALICE).stdout)
    assert shown == timeline
    text = run("get", record_id, "-timeline", user=ALICE).stdout
    assert "failover" in text and "from=flaky" in text and "receipt" in text
    plain, _ = rt.tokens.add(ALICE, acting=ADMIN)
    with httpx.Client(base_url=api.url, timeout=10) as client:
        answer = client.get(
            f"/v1/notifications/{record_id}/timeline", headers={"Authorization": f"Bearer {plain}"}
        )
        assert answer.status_code == 200 and answer.json() == timeline


def test_another_users_timeline_is_answered_as_a_missing_one(rt: Any, api: ApiProcess) -> None:
    record_id = noti.notify_sms(PHONE, "a", user=ALICE)
    with pytest.raises(NotFound) as theirs:
        noti.timeline(record_id, user=BOB)
    with pytest.raises(NotFound) as missing:
        noti.timeline("0" * 26, user=BOB)
    assert str(theirs.value).replace(record_id, "X") == str(missing.value).replace("0" * 26, "X")
    assert noti.timeline(record_id, user=MEMBER).steps[0].event == "created"
    bob, _ = rt.tokens.add(BOB, acting=ADMIN)
    with httpx.Client(base_url=api.url, timeout=10) as client:
        for asked in (record_id, "0" * 26, "%00", "x" * 5000):
            answer = client.get(
                f"/v1/notifications/{asked}/timeline", headers={"Authorization": f"Bearer {bob}"}
            )
            assert answer.status_code == 404, (asked, answer.text)
        assert client.get(f"/v1/notifications/{record_id}/timeline").status_code == 401


def test_a_revoke_a_dead_letter_and_its_redrive_are_steps(rt: Any) -> None:
    revoked = noti.notify_sms(PHONE, "a", delay=60, user=ALICE)
    noti.revoke([revoked], user=ALICE)
    assert events(noti.timeline(revoked, user=ALICE).to_dict()["steps"]) == ["created", "delayed", "revoked"]
    failing = noti.notify_sms(PHONE, "b", provider="flaky", retry_max=1, user=ALICE)
    noti.send(failing)
    steps = noti.timeline(failing, user=ALICE).to_dict()["steps"]
    assert events(steps) == ["created", "claimed", "attempt", "failed", "dead_letter"]
    assert steps[3]["class"] == "exhausted" and steps[4]["class"] == "exhausted"
    assert [letter.record_id for letter in rt.dead_letters.entries()] == [failing]
    redrive().retry(failing, user=ADMIN)
    assert events(noti.timeline(failing, user=ALICE).to_dict()["steps"])[-1] == "requeued"


def test_the_timeline_keeps_its_newest_steps_and_counts_the_others(rt: Any) -> None:
    record_id = noti.notify_sms(PHONE, "a", user=ALICE)
    for n in range(MAX_STEPS + 7):
        assert rt.store.note_steps(record_id, [step_text(n, "callback", {"n": n})])
    timeline = noti.timeline(record_id, user=ALICE)
    assert timeline.dropped == 7 and len(timeline.steps) == MAX_STEPS + 1  # + its creation
    assert [s.detail["n"] for s in timeline.steps[1:]] == list(range(7, MAX_STEPS + 7))
    assert not rt.store.note_steps("0" * 26, [step_text(1, "callback", {})])
    assert not rt.redis.exists(rt.keys.timeline("0" * 26))


def test_the_timeline_and_the_address_index_go_with_the_record(rt: Any) -> None:
    record_id = noti.notify_sms(PHONE, "a", delay=60, user=ALICE)
    assert rt.redis.exists(rt.keys.timeline(record_id))
    noti.delete(record_id, user=ALICE)
    assert not rt.redis.exists(rt.keys.timeline(record_id))
    assert noti.search(to=PHONE, user=ALICE) == []
    assert [k for k in rt.redis.scan_iter(match=rt.keys.address_index("*"))] == []


def test_an_unreadable_step_is_shown_as_such_not_an_error(rt: Any) -> None:
    record_id = noti.notify_sms(PHONE, "a", user=ALICE)
    rt.redis.rpush(rt.keys.timeline(record_id), "not json", '{"no":"event"}')
    steps = noti.timeline(record_id, user=ALICE).steps
    assert [s.event for s in steps] == ["created", "unreadable", "unreadable"]


@pytest.mark.parametrize(
    ("door", "make"),
    [
        ("api", lambda: noti.notify_sms(PHONE, "a", user=ALICE)),
        ("cli", lambda: run("add", "sms", "-text", "a", "-to", PHONE, user=ALICE).stdout.strip()),
        (
            "task",
            lambda: noti.tasks.notify.apply(args=("sms", PHONE), kwargs={"text": "a", "user": ALICE}).get(),
        ),
    ],
)
def test_the_first_step_names_the_door(rt: Any, door: str, make: Any) -> None:
    record_id = make()
    assert noti.timeline(record_id, user=ALICE).steps[0].detail["door"] == door


def test_a_record_made_through_http_says_so(rt: Any, api: ApiProcess) -> None:
    plain, _ = rt.tokens.add(ALICE, acting=ADMIN)
    with httpx.Client(base_url=api.url, timeout=10) as client:
        answer = client.post(
            "/v1/notifications",
            json={"type": "sms", "to": PHONE, "text": "a"},
            headers={"Authorization": f"Bearer {plain}"},
        )
    assert answer.status_code == 201, answer.text
    assert noti.timeline(answer.json()["id"], user=ALICE).steps[0].detail["door"] == "http"


# --- search -------------------------------------------------------------------------------------


@pytest.fixture
def made(rt: Any) -> Iterator[dict[str, str]]:
    ids = {
        "alice-phone": noti.notify_sms(PHONE, "a", user=ALICE),
        "alice-other": noti.notify_sms(OTHER, "b", user=ALICE),
        "bob-phone": noti.notify_sms(PHONE, "c", user=BOB),
        "alice-mail": noti.notify_email("a@example.com", subject="s", text="t", user=ALICE),
    }
    yield ids


def test_search_by_address_finds_the_users_own_and_no_key_names_the_address(
    rt: Any, made: dict[str, str]
) -> None:
    assert [r.id for r in noti.search(to=PHONE, user=ALICE)] == [made["alice-phone"]]
    assert {r.id for r in noti.search(to=PHONE, user=MEMBER)} == {made["alice-phone"], made["bob-phone"]}
    assert [r.id for r in noti.search(to=PHONE, user=MEMBER, creator=BOB)] == [made["bob-phone"]]
    assert [r.id for r in noti.search(to="a@example.com", user=ALICE)] == [made["alice-mail"]]
    assert noti.search(to=PHONE, channel="weixin", user=ALICE) == []  # an openid could look so
    with pytest.raises(InvalidInput):
        noti.search(to=PHONE, channel="email", user=ALICE)
    with pytest.raises(PermissionDenied):
        noti.search(to=PHONE, user=ALICE, creator=BOB)
    names = [k for k in rt.redis.scan_iter(count=1000)]
    assert not [k for k in names if PHONE in k or "example.com" in k]


def test_search_by_status_provider_msgid_and_time(rt: Any, made: dict[str, str]) -> None:
    mine = made["alice-phone"]
    record = rt.store.get(mine)
    assert [r.id for r in noti.search(to=PHONE, status=1, user=ALICE)] == [mine]
    assert noti.search(to=PHONE, status=10, user=ALICE) == []
    named = noti.notify_sms(OTHER, "x", provider="backup", user=ALICE)
    assert [r.id for r in noti.search(provider="backup", user=ALICE)] == [named]
    assert noti.search(provider="flaky", user=BOB) == []
    assert [
        r.id
        for r in noti.search(to=PHONE, since_ms=record.created_ms, until_ms=record.created_ms, user=ALICE)
    ] == [mine]
    assert noti.search(to=PHONE, since_ms=record.created_ms + 1, user=ALICE) == []
    rt.redis.hset(rt.keys.record(mine), mapping={"noti_st": "10", "noti_sms_msgid": "SM123"})
    assert [r.id for r in noti.search(msgid="SM123", user=ALICE)] == [mine]
    assert noti.search(msgid="SM123", user=BOB) == []
    # a delivery status goes with the other filters
    rt.redis.hset(rt.keys.record(mine), mapping={"noti_dlv": "delivered"})
    assert [r.id for r in noti.search(to=PHONE, delivery="delivered", user=ALICE)] == [mine]
    assert noti.search(to=PHONE, delivery="undelivered", user=ALICE) == []
    assert [r.id for r in noti.search(msgid="SM123", delivery="delivered", user=ALICE)] == [mine]
    listed = json.loads(run("search", "-to", PHONE, "-delivery", "delivered", "-json").stdout)
    assert [r["id"] for r in listed] == [mine]


def test_search_by_recipient_and_notifys_holds_are_steps(configure: Any) -> None:
    configure(pump_interval_s=0.1)
    recipients.put_template("hi", {"default_locale": "en", "channels": {"sms": {"en": {"text": "hi"}}}})
    recipients.put("r1", {"addresses": {"sms": PHONE}, "timezone": "UTC", "quiet_hours": _quiet_now(600)})
    recipients.put("r2", {"addresses": {"sms": OTHER}})
    notice = noti.get_notice(noti.notify(recipient="r1", template="hi", channels=["sms"]))
    [record] = noti.search(recipient="r1")
    assert record.recipient == "r1" and record.parent == notice.id
    assert noti.search(recipient="r2") == []
    assert noti.search(recipient="r1", user=BOB) == []  # bob's r1 is another recipient
    steps = noti.timeline(record.id).to_dict()["steps"]
    assert events(steps) == ["created", "held"]
    assert steps[0]["notice"] == notice.id and steps[0]["recipient"] == "r1"
    assert steps[1]["reason"] == "quiet hours" and steps[1]["until"] == notice.held_until_ms
    # the notice's id (what noti notify printed) shows its records' timelines
    assert (
        json.loads(run("get", notice.id, "-timeline", "-json").stdout) == noti.timeline(record.id).to_dict()
    )


def _quiet_now(seconds_left: float) -> str:
    now = datetime.now(UTC)
    start, end = now - timedelta(minutes=1), now + timedelta(seconds=seconds_left)
    return f"{start:%H:%M:%S}-{end:%H:%M:%S}"


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        ({"to": "not a phone\x00"}, "e.cmd.noti.search.bad"),
        ({"to": "x" * 5000}, "e.cmd.noti.search.bad"),
        ({"to": ""}, "e.cmd.noti.search.bad"),
        ({"to": 42}, "e.cmd.noti.search.bad"),
        ({"to": "not a url", "channel": "webhook"}, "e.cmd.noti.search.bad"),
        ({"msgid": "\n"}, "e.cmd.noti.search.bad"),
        ({"provider": ["a"]}, "e.cmd.noti.search.bad"),
        ({"limit": 0}, "e.cmd.noti.search.bad"),
        ({"limit": 1001}, "e.cmd.noti.search.bad"),
        ({"limit": "many"}, "e.cmd.noti.search.bad"),
        ({"since_ms": -1}, "e.cmd.noti.search.bad"),
        ({"until_ms": 2**64}, "e.cmd.noti.search.bad"),
        ({"since_ms": 1.5}, "e.cmd.noti.search.bad"),
        ({"status": 7}, "e.cmd.noti.list.badst"),
        ({"to": PHONE, "delivery": "lost"}, "e.cmd.noti.list.baddelivery"),
        ({"msgid": "x", "delivery": ""}, "e.cmd.noti.list.baddelivery"),
        ({"msgid": "x", "delivery": ["delivered"]}, "e.cmd.noti.list.baddelivery"),
        ({"channel": "pigeon"}, "e.cmd.noti.add.badtype"),
    ],
)
def test_a_bad_search_is_refused_with_its_code(rt: Any, kwargs: dict[str, Any], code: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        noti.search(user=ALICE, **kwargs)
    assert refused.value.code == code


def test_search_over_http_and_the_cli(rt: Any, made: dict[str, str], api: ApiProcess) -> None:
    alice, _ = rt.tokens.add(ALICE, acting=ADMIN)
    bob, _ = rt.tokens.add(BOB, acting=ADMIN)
    with httpx.Client(base_url=api.url, timeout=10) as client:
        for token, expected in ((alice, [made["alice-phone"]]), (bob, [made["bob-phone"]])):
            answer = client.get(
                "/v1/notifications", params={"to": PHONE}, headers={"Authorization": f"Bearer {token}"}
            )
            assert answer.status_code == 200, answer.text
            assert [r["id"] for r in answer.json()["notifications"]] == expected
        # a delivery status goes with a search (none of alice's was delivered)
        answer = client.get(
            "/v1/notifications",
            params={"to": PHONE, "delivery": "delivered"},
            headers={"Authorization": f"Bearer {alice}"},
        )
        assert answer.status_code == 200 and answer.json() == {"notifications": []}, answer.text
        hostile = [
            {"to": "x" * 3000},
            {"to": "a\x01b"},
            {"since": "-5"},
            {"since": "yesterday"},
            {"to": PHONE, "user": BOB},
            {"to": PHONE, "delivery": "lost"},
            {"to": PHONE, "delivery": "x" * 3000},
            {"to": PHONE, "limit": "0"},
        ]
        for params in hostile:
            answer = client.get(
                "/v1/notifications", params=params, headers={"Authorization": f"Bearer {alice}"}
            )
            assert 400 <= answer.status_code < 500, (params, answer.text)
            assert answer.json()["error"]["code"], answer.text
    found = json.loads(run("search", "-to", PHONE, "-json", user=ALICE).stdout)
    assert [r["id"] for r in found] == [made["alice-phone"]]
    refused = run("search", "-to", "a\x01b", user=ALICE)
    assert refused.exit_code == 1 and "e.cmd.noti.search.bad" in refused.stderr
    assert run("search", "-since", "1h", "-to", PHONE, "-json", user=ALICE).stdout.count('"id"') == 1
    assert run("search", "-since", "soon", user=ALICE).exit_code == 1


def test_erasure_masks_the_address_in_the_steps_and_takes_the_records_out_of_the_address_index(
    configure: Any,
) -> None:
    rt = configure(pump_interval_s=0.1)
    recipients.put_template("hi", {"default_locale": "en", "channels": {"sms": {"en": {"text": "hi"}}}})
    recipients.put("r9", {"addresses": {"sms": PHONE}})
    notice = noti.get_notice(noti.notify(recipient="r9", template="hi", channels=["sms"]))
    [record] = noti.search(to=PHONE)
    assert record.parent == notice.id
    vendor_text = step_text(
        1, "attempt", {"provider": "x", "outcome": "failed", "text": f"{PHONE} is unknown"}
    )
    rt.store.note_steps(record.id, [vendor_text])
    recipients.delete("r9")
    steps = noti.timeline(record.id).steps
    assert PHONE not in json.dumps([s.to_dict() for s in steps], ensure_ascii=False)
    [told] = [s for s in steps if s.event == "attempt"]
    assert told.detail["text"].endswith(" is unknown") and told.detail["text"] != vendor_text
    assert steps[-1].event == "revoked"  # erasure revokes what still waits
    assert noti.search(to=PHONE) == []
    assert not [k for k in rt.redis.scan_iter(match=rt.keys.address_index("*"))]


def test_erasures_rewrite_is_plain_text_in_one_step_over_a_full_timeline(rt: Any) -> None:
    from noti.redis.conn import load_script

    # given a full timeline quoting an address full of Lua pattern characters, and a look-alike
    address, lookalike = "a.b+c%d-(x)@example.com", "aXb+c%d-(x)@example.com"
    key = rt.keys.timeline("r1")
    steps = [step_text(i, "attempt", {"text": f"{address} bounced"}) for i in range(MAX_STEPS - 1)]
    rt.redis.rpush(key, *steps, step_text(99, "receipt", {"text": f"{lookalike} is another"}))
    # when the script masks it (the form a step's JSON holds, as erasure passes it)
    changed = load_script(rt.redis, "timeline_mask")(
        keys=[key, rt.keys.timeline("r2")], args=[1, address, "a***", 0]
    )
    # then every step quoting it is rewritten in place, the look-alike is not, and none moved
    assert changed == MAX_STEPS - 1
    after = rt.redis.lrange(key, 0, -1)
    assert len(after) == MAX_STEPS and all(address not in s for s in after)
    assert after[0] == step_text(0, "attempt", {"text": "a*** bounced"})
    assert after[-1] == step_text(99, "receipt", {"text": f"{lookalike} is another"})


@pytest.mark.parametrize(
    "events,why",
    [
        ([("delayed", {"until": 1})], "scheduled"),
        ([("held", {"reason": "quiet hours", "until": 1})], "quiet hours"),
        ([("held", {"reason": "throttle", "until": 1})], "throttle"),
        ([("held", {"reason": "fallback", "until": 1, "of": "r1"})], "fallback"),
        ([("delayed", {}), ("claimed", {}), ("attempt", {}), ("retry", {"at": 5, "retry": 2})], "retry 2"),
        ([("retry", {"retry": 1}), ("claimed", {}), ("attempt", {})], ""),
        ([("requeued", {"by": "ops"})], ""),
        ([], ""),
    ],
)
def test_why_a_delayed_record_waits_is_its_newest_step_that_says(
    events: list[tuple[str, dict[str, Any]]], why: str
) -> None:
    assert why_waiting([Step(i, event, detail) for i, (event, detail) in enumerate(events)]) == why
