"""Listeners act for whom they may (issue 32, point 7): a listener hears its owner's own events
only, unless its owner opted in to other users' (``from_users``), and what it makes for another
user's event gets the lesser of the two users' rights. On a real Redis, with the processor in
a real worker (or, where the worker adds nothing, run in the test thread), and the CLI."""

from __future__ import annotations

import json
from typing import Any

import pytest

import tests.test_events_tasks  # noqa: F401 - registers the listener tasks
from noti.core.record import Status, now_ms
from noti.errors import NotiError
from noti.events import Event, Events, EventStatus, add_listener, dispatch, list_listeners
from tests.clirunner import cli_runner
from tests.conftest import ADMIN, ALICE, BOB, MEMBER, sandbox_outbox, wait_until
from tests.test_events import run

PHONE = "+8613912345678"
#: What the finding's plain user sent: the number and the text come from the payload.
PAYLOAD = {"phone": PHONE, "text": "Your account is locked: call +1 555 0100"}
#: A root member's listener that sends an SMS at level 100, to the payload's number and text.
DEPUTY = {"type": "sms", "target": "{{ phone }}", "text": "{{ text }}", "lv": 100}


def done(rt: Any, event_id: str, timeout: float = 30) -> Event:
    api = Events(rt)
    return wait_until(  # type: ignore[no-any-return]
        lambda: (e := api.get(event_id, user=ADMIN)).status is EventStatus.DONE and e, timeout=timeout
    )


def records(rt: Any, event: Event) -> list[Any]:
    return [rt.store.get(o.notification) for o in event.outcomes if o.notification]


def snapshot(rt: Any) -> dict[str, Any]:
    return {k: rt.redis.dump(k) for k in sorted(rt.redis.keys("*"))}


def code_of(call: Any) -> str:
    with pytest.raises(NotiError) as caught:
        call()
    return caught.value.code


# --- in a worker ---------------------------------------------------------------------------------


def test_a_plain_users_event_does_not_reach_a_root_members_listener_that_did_not_opt_in(
    rt: Any, worker: Any
) -> None:
    # given a root member's listener that sends an SMS at level 100 to the payload's number
    add_listener("account.*", DEPUTY, name="deputy", user=MEMBER)
    # when a plain user dispatches an event it matches
    bobs = done(rt, dispatch("account.locked", PAYLOAD, user=BOB))
    # then it ran no listener, and nothing was made or sent
    assert bobs.outcomes == () and not bobs.failed
    assert rt.store.count() == 0
    # while the member's own event still runs it, at the member's level
    own = done(rt, dispatch("account.locked", PAYLOAD, user=MEMBER))
    [record] = records(rt, own)
    assert (record.creator, record.level, record.target) == (MEMBER, 100, PHONE)
    wait_until(lambda: rt.store.count(Status.DONE) == 1)
    assert [e["target"] for e in sandbox_outbox(rt)] == [PHONE]


def test_an_opted_in_listener_makes_a_plain_users_sms_at_the_plain_users_level(rt: Any, worker: Any) -> None:
    # given a root member's listeners opted in to everyone's events and to bob's, a task
    # listener opted in too, and a root administrator's listener at level 500 opted in
    add_listener("account.*", DEPUTY, name="m-all", user=MEMBER, from_users=["*"])
    add_listener("account.*", DEPUTY, name="m-bob", user=MEMBER, from_users=[BOB])
    add_listener("account.*", "tests.events.whom", name="m-task", user=MEMBER, from_users="*")
    add_listener("account.*", {**DEPUTY, "lv": 500}, name="a-all", user=ADMIN, from_users=["*"])
    # when bob (a plain user) dispatches an event
    bobs = done(rt, dispatch("account.locked", PAYLOAD, user=BOB))
    # then each made its SMS as its owner, to bob's number with bob's text, at bob's level 1
    assert not bobs.failed and [o.listener for o in bobs.outcomes] == ["m-all", "m-bob", "m-task", "a-all"]
    made = records(rt, bobs)
    assert [(r.creator, r.level) for r in made] == [(MEMBER, 1), (MEMBER, 1), (ADMIN, 1)]
    assert all(r.target == PHONE and r.fields == {"text": PAYLOAD["text"]} for r in made)
    # and the task was told for whom it runs, and the cap to keep to
    assert bobs.outcomes[2].result == {"user": BOB, "owner": MEMBER, "level_cap": 1}
    # alice's event runs only the listeners opted in to everyone's
    alices = done(rt, dispatch("account.locked", PAYLOAD, user=ALICE))
    assert [o.listener for o in alices.outcomes] == ["m-all", "m-task", "a-all"]
    assert [r.level for r in records(rt, alices)] == [1, 1]
    # the member's own event: the member's listeners at 100, the administrator's at the member's 100
    members = done(rt, dispatch("account.locked", PAYLOAD, user=MEMBER))
    assert [(r.creator, r.level) for r in records(rt, members)] == [
        (MEMBER, 100),
        (MEMBER, 100),
        (ADMIN, 100),
    ]
    assert members.outcomes[2].result == {"user": MEMBER, "owner": MEMBER, "level_cap": 100}
    # the administrator's own event: theirs at 500; the member's (who may read it) at the member's 100
    admins = done(rt, dispatch("account.locked", PAYLOAD, user=ADMIN))
    assert [(r.creator, r.level) for r in records(rt, admins)] == [(MEMBER, 100), (ADMIN, 500)]
    # and every one of them was delivered
    wait_until(lambda: rt.store.count(Status.DONE) == 10)
    assert len(sandbox_outbox(rt)) == 10


@pytest.fixture
def granted(configure: Any, start_worker_now: Any) -> Any:
    """SMS through "cheap" by default; "premium" granted to the root member only, "extra" to
    bob only; a worker."""
    rt = configure(
        providers={
            "cheap": {"kind": "sandbox"},
            "premium": {"kind": "sandbox"},
            "extra": {"kind": "sandbox"},
        },
        channels={"sms": {"provider": "cheap"}},
        provider_grants={MEMBER: ["premium"], BOB: ["extra"]},
    )
    with start_worker_now():
        yield rt


def test_a_listener_names_for_another_users_event_only_providers_both_users_may_name(granted: Any) -> None:
    rt = granted
    # given a root member's opted-in listeners: one naming a provider granted to the member
    # only, one naming a provider granted to bob only, one using the channel's default
    add_listener("account.*", {**DEPUTY, "provider": "premium"}, name="premium", user=MEMBER, from_users="*")
    with pytest.raises(NotiError) as denied:  # the member may not name bob's provider at all
        add_listener("account.*", {**DEPUTY, "provider": "extra"}, name="x", user=MEMBER, example=PAYLOAD)
    assert denied.value.code == "e.cmd.noti.add.providerdenied"
    add_listener("account.*", {**DEPUTY, "provider": "extra"}, name="extra", user=MEMBER, from_users="*")
    add_listener("account.*", DEPUTY, name="default", user=MEMBER, from_users="*")
    # when bob dispatches an event
    bobs = done(rt, dispatch("account.locked", PAYLOAD, user=BOB))
    # then the member's provider was not lent to bob, nor bob's taken by the member: only the
    # default made an SMS, at bob's level
    premium, extra, default = bobs.outcomes
    assert (premium.error_code, premium.notification) == ("e.cmd.noti.add.providerdenied", None)
    assert "bob" in (premium.error_message or "")
    assert (extra.error_code, extra.notification) == ("e.cmd.noti.add.providerdenied", None)
    [record] = records(rt, bobs)
    assert (record.creator, record.level, record.provider) == (MEMBER, 1, None)
    # while the member's own event uses the member's provider
    members = done(rt, dispatch("account.locked", PAYLOAD, user=MEMBER))
    assert [o.listener for o in members.outcomes if o.notification] == ["premium", "default"]
    assert [o.error_code for o in members.outcomes] == [None, "e.cmd.noti.add.providerdenied", None]
    wait_until(lambda: rt.store.count(Status.DONE) == 3)
    assert [e["target"] for e in sandbox_outbox(rt, "premium")] == [PHONE]


# --- the processor in this thread ----------------------------------------------------------------


def _processor_run(rt: Any) -> Events:
    api = Events(rt, start_processor=lambda: None)
    api.processor().run()
    return api


def test_a_listener_stored_without_the_option_by_the_previous_release_is_owner_only(rt: Any) -> None:
    # given a root member's catch-all listener written as the previous release wrote it: its
    # JSON has no from_users (nor seq), and the version counter was bumped
    stored = {
        "id": "01m8j3b20spgfb57h3vz2d10x5",
        "name": "legacy",
        "event": "*",
        "user": MEMBER,
        "action": {
            "kind": "notify",
            "type": "sms",
            "target": "{{ phone }}",
            "fields": {"text": "{{ text }}"},
            "lv": 100,
            "provider": None,
        },
        "filter": None,
        "created_ms": now_ms(),
        "retries": 0,
        "backoff_s": 0.0,
    }
    rt.redis.hset(rt.keys.listeners, "legacy", json.dumps(stored, separators=(",", ":")))
    rt.redis.incr(rt.keys.listeners_version)
    [legacy] = list_listeners(user=MEMBER)
    assert legacy.from_users == () and legacy.to_json()["from_users"] == []
    # when bob and then the member dispatch an event
    bobs = Events(rt, start_processor=lambda: None).dispatch("account.locked", PAYLOAD, user=BOB)
    members = Events(rt, start_processor=lambda: None).dispatch("account.locked", PAYLOAD, user=MEMBER)
    api = _processor_run(rt)
    # then it ran for its owner's event only, at the owner's level
    assert api.get(bobs, user=ADMIN).outcomes == ()
    [outcome] = api.get(members, user=ADMIN).outcomes
    assert rt.store.get(outcome.notification).level == 100 and rt.store.count() == 1
    # and replacing it with the option restores what it did before
    add_listener("*", DEPUTY, name="legacy", user=MEMBER, replace=True, from_users="*")
    again = api.dispatch("account.locked", PAYLOAD, user=BOB)
    _processor_run(rt)
    [outcome] = api.get(again, user=ADMIN).outcomes
    assert rt.store.get(outcome.notification).level == 1


def test_a_root_member_made_a_plain_user_again_no_longer_hears_others(configure: Any) -> None:
    # given a root member's listener opted in to bob's events
    rt = configure(root_members=[MEMBER])
    add_listener("account.*", "tests.events.whom", name="ops", user=MEMBER, from_users=[BOB])
    # when the member is no longer root
    rt = configure(root_members=[])
    api = Events(rt, start_processor=lambda: None)
    bobs = api.dispatch("account.locked", PAYLOAD, user=BOB)
    own = api.dispatch("account.locked", PAYLOAD, user=MEMBER)
    _processor_run(rt)
    # then bob's event no longer runs it; the owner's own still does, at the owner's cap now
    assert api.get(bobs, user=ADMIN).outcomes == ()
    [outcome] = api.get(own, user=ADMIN).outcomes
    assert outcome.result == {"user": MEMBER, "owner": MEMBER, "level_cap": 1}


def test_a_webhook_for_another_users_event_to_a_url_of_the_listeners_needs_the_senders_signing_key(
    configure: Any,
) -> None:
    from noti.access.signing import SigningKeys
    from tests.fakes.webhook import SECRET

    # given a webhook provider whose configured receivers are under hooks.example.com/noti/,
    # a root member with a signing key of their own, and bob without one
    rt = configure(
        providers={
            "hook": {"kind": "webhook", "secret": SECRET, "destinations": ["https://hooks.example.com/noti/"]}
        },
        channels={"webhook": {"provider": "hook"}, "sms": {"provider": "sandbox"}},
    )
    SigningKeys(rt.redis, rt.keys, rt.settings).add(MEMBER, acting=MEMBER)
    content = {"content": {"text": "{{ text }}"}}
    mine = {"type": "webhook", "target": "https://member.example.com/in", **content}
    operators = {"type": "webhook", "target": "https://hooks.example.com/noti/in", **content}
    add_listener("account.*", mine, name="mine", user=MEMBER, from_users="*")
    add_listener("account.*", operators, name="operators", user=MEMBER, from_users="*")
    api = Events(rt, start_processor=lambda: None)
    bobs = api.dispatch("account.locked", PAYLOAD, user=BOB)
    members = api.dispatch("account.locked", PAYLOAD, user=MEMBER)
    _processor_run(rt)
    # then for bob's event the member's key signs nothing bob could not have had signed: the
    # webhook to the member's own URL is refused (bob has no key); the one to a receiver the
    # operator configured is made
    mine_out, operators_out = api.get(bobs, user=ADMIN).outcomes
    assert (mine_out.error_code, mine_out.notification) == ("e.cmd.noti.add.nosigningkey", None)
    assert rt.store.get(operators_out.notification).creator == MEMBER
    # and the member's own event makes both
    assert all(o.notification for o in api.get(members, user=ADMIN).outcomes)


# --- refusals --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("user", "value", "code"),
    [
        (MEMBER, 5, "e.noti.listener.badfrom"),
        (MEMBER, {"bob": True}, "e.noti.listener.badfrom"),
        (MEMBER, ["bob", 7], "e.noti.listener.badfrom"),
        (MEMBER, ["bob\n"], "e.noti.listener.badfrom"),
        (MEMBER, ["b o b"], "e.noti.listener.badfrom"),
        (MEMBER, ["bob:x"], "e.noti.listener.badfrom"),
        (MEMBER, [""], "e.noti.listener.badfrom"),
        (MEMBER, "bob,,alice", "e.noti.listener.badfrom"),
        (MEMBER, ["*", "bob"], "e.noti.listener.badfrom"),
        (MEMBER, ["x" * 65], "e.noti.listener.badfrom"),
        (MEMBER, [f"u{i}" for i in range(101)], "e.noti.listener.badfrom"),
        (MEMBER, "a\ud800", "e.noti.listener.badfrom"),
        # a plain user may hear only their own events
        (ALICE, ["*"], "e.noti.listener.from.nopvg"),
        (ALICE, "*", "e.noti.listener.from.nopvg"),
        (ALICE, [BOB], "e.noti.listener.from.nopvg"),
        (ALICE, [ALICE, BOB], "e.noti.listener.from.nopvg"),
    ],
)
def test_bad_from_users_are_refused_with_their_code_and_nothing_is_stored(
    rt: Any, user: str, value: Any, code: str
) -> None:
    before = snapshot(rt)
    assert code_of(lambda: add_listener("account.*", DEPUTY, name="l", user=user, from_users=value)) == code
    assert snapshot(rt) == before


def test_what_is_accepted_is_stored_as_given_without_the_owners_name(rt: Any) -> None:
    assert add_listener("a", DEPUTY, name="a", user=ALICE, from_users=[ALICE]).from_users == ()
    assert add_listener("a", DEPUTY, name="b", user=ALICE, from_users=[]).from_users == ()
    assert add_listener("a", DEPUTY, name="c", user=MEMBER, from_users="bob, alice,bob").from_users == (
        BOB,
        ALICE,
    )
    assert add_listener("a", DEPUTY, name="d", user=ADMIN, from_users=("*",)).from_users == ("*",)
    assert [x.from_users for x in list_listeners(user=ADMIN)] == [(), (), (BOB, ALICE), ("*",)]


def test_the_cli_takes_the_option_shows_it_and_refuses_with_codes(rt: Any) -> None:
    args = ["listener", "add", "account.*", "-type", "sms", "-to", "{{ phone }}", "-text", "{{ text }}"]
    added = run(*args, "-name", "ops", "-from-users", "*", user=MEMBER)
    assert added.exit_code == 0, added.output
    added = run(*args, "-name", "two", "-from-users", "bob,alice", user=MEMBER)
    assert added.exit_code == 0, added.output
    listed = run("listener", "list", user=MEMBER)
    assert " FROM " in listed.stdout.splitlines()[0]
    rows = {line.split()[0]: line.split()[3] for line in listed.stdout.splitlines()[1:3]}
    assert rows["ops"] == "*" and rows["two"] == "bob,alice"
    as_json = json.loads(run("listener", "list", "-json", user=MEMBER).stdout)
    assert [x["from_users"] for x in as_json] == [["*"], [BOB, ALICE]]
    before = snapshot(rt)
    denied = run(*args, "-name", "mine", "-from-users", "*", user=ALICE)
    assert denied.exit_code == 1 and denied.stderr.startswith("e.noti.listener.from.nopvg: ")
    bad = run(*args, "-name", "bad", "-from-users", "*,bob", user=MEMBER)
    assert bad.exit_code == 1 and bad.stderr.startswith("e.noti.listener.badfrom: ")
    assert snapshot(rt) == before
    # a plain user's own listener needs no option
    assert run(*args, "-name", "mine", user=ALICE).exit_code == 0


def test_the_cli_helps_with_the_option(rt: Any) -> None:
    from noti.cli import cli

    shown = cli_runner().invoke(cli, ["listener", "add", "--help"]).output
    assert "-from-users" in shown and "default: only your own events" in " ".join(shown.split())
