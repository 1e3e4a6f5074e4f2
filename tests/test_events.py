"""Events and listeners on a real Redis, without a worker: dispatch, bad input, listeners and
their permissions, the template sandbox, the processor run in the test thread, the CLI."""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace
from typing import Any

import pytest
import redis

import tests.test_events_tasks  # noqa: F401 - registers the listener tasks
from noti.core.deadletter import DeadLetter
from noti.errors import InvalidInput, NotFound, NotiError, PermissionDenied
from noti.events import Events, EventStatus, Outcome, StopReason, add_listener, dispatch, list_listeners
from noti.events.event import matches
from noti.events.store import LockLost
from noti.events.templates import compile_template, context
from tests import hooks
from tests.conftest import ADMIN, ALICE, BOB, MEMBER
from tests.noti_cli import invoke
from tests.tables import yes_no_rows

pytestmark = pytest.mark.bounds

PHONE = "+8613912345678"
SMS = {"type": "sms", "target": "{{ customer.phone }}", "text": "Order {{ id }} paid"}
PAID = {"id": 42, "customer": {"phone": PHONE, "name": "Li"}}


def make(rt: Any) -> tuple[Events, list[int]]:
    """An events API whose processor starts are only counted."""
    starts: list[int] = []
    return Events(rt, start_processor=lambda: starts.append(1)), starts


def code_of(call: Any) -> str:
    with pytest.raises(NotiError) as caught:
        call()
    return caught.value.code


# --- dispatch --------------------------------------------------------------------------------


def test_dispatch_stores_new_events_in_arrival_order_and_queues_one_processor(rt: Any) -> None:
    api, starts = make(rt)
    ids = [api.dispatch("order.paid", {"id": i}, user=BOB) for i in range(3)]
    assert rt.redis.lrange(rt.keys.event_queue, 0, -1) == ids
    events = [api.get(i, user=BOB) for i in ids]
    assert [e.seq for e in events] == [1, 2, 3]
    assert all(e.status is EventStatus.NEW and e.user == BOB and e.created_ms > 0 for e in events)
    assert [e.payload for e in events] == [{"id": 0}, {"id": 1}, {"id": 2}]
    # then one processor was queued for the three: the starting marker holds back the others
    assert starts == [1]


class CountingRedis(redis.Redis):
    """A client that remembers the commands it sends."""

    sent: list[str]

    def execute_command(self, *args: Any, **options: Any) -> Any:
        self.sent.append(str(args[0]))
        return super().execute_command(*args, **options)


def test_dispatch_is_one_round_trip_while_a_processor_is_alive(rt: Any, redis_url: str) -> None:
    # given a live processor (its lock) and the dispatch script already loaded
    client = CountingRedis.from_url(redis_url, decode_responses=True)
    client.sent = []
    runtime = SimpleNamespace(settings=rt.settings, redis=client, keys=rt.keys)
    api = Events(runtime, start_processor=lambda: None)  # type: ignore[arg-type]
    rt.redis.set(rt.keys.event_lock, '{"token":"t","host":"h","pid":1,"since_ms":1}', px=60_000)
    api.dispatch("warm.up")
    client.sent.clear()
    # when one more event is dispatched, with and without an idempotency key
    api.dispatch("order.paid", PAID)
    assert client.sent == ["EVALSHA"]
    client.sent.clear()
    api.dispatch("order.paid", PAID, idempotency_key="order-42")
    # then each took one command: the dispatch script, which found the processor alive
    assert client.sent == ["EVALSHA"]
    assert rt.redis.llen(rt.keys.event_queue) == 3


def test_dispatch_with_an_idempotency_key_stores_one_event_per_user_and_key(rt: Any) -> None:
    api, starts = make(rt)
    # given an event dispatched with a key
    first = api.dispatch("order.paid", PAID, user=BOB, idempotency_key="task:abc")
    # when the same user dispatches again with that key (a redelivered task message)
    again = api.dispatch("order.paid", {"other": "payload"}, user=BOB, idempotency_key="task:abc")
    # then nothing more is stored and the first event's id comes back
    assert again == first
    assert rt.redis.lrange(rt.keys.event_queue, 0, -1) == [first]
    assert api.get(first, user=BOB).payload == PAID
    # another user's key is theirs: the same key stores a new event for them
    alices = api.dispatch("order.paid", PAID, user=ALICE, idempotency_key="task:abc")
    assert alices != first and api.get(alices, user=ALICE).seq == 2
    # the key is remembered for NOTI_IDEMPOTENCY_TTL_S
    ttl_ms = rt.redis.pttl(api.store.idempotency_key(BOB, "task:abc"))
    assert 0 < ttl_ms <= rt.settings.idempotency_ttl_s * 1000
    # and one processor was queued, for the first event
    assert starts == [1]
    for bad in ("", "k" * 201, 42):
        assert code_of(lambda bad=bad: api.dispatch("a.b", idempotency_key=bad)) == "e.noti.event.badkey"
    assert rt.redis.llen(rt.keys.event_queue) == 2


@pytest.mark.parametrize(
    ("name", "payload", "code"),
    [
        ("order.paid", [1, 2], "e.noti.event.badpayload"),
        ("order.paid", "text", "e.noti.event.badpayload"),
        ("order.paid", {"when": {1, 2}}, "e.noti.event.badpayload"),
        ("order.paid", {"x": float("nan")}, "e.noti.event.badpayload"),
        ("order.paid", {1: "int key"}, "e.noti.event.badpayload"),
        ("order.paid", {"blob": "x" * 200}, "e.noti.event.toolarge"),
        ("", {}, "e.noti.event.badname"),
        ("order paid", {}, "e.noti.event.badname"),
        (".hidden", {}, "e.noti.event.badname"),
        ("x" * 201, {}, "e.noti.event.badname"),
    ],
)
def test_bad_events_are_refused_and_nothing_is_stored(
    configure: Any, name: str, payload: Any, code: str
) -> None:
    rt = configure(event_payload_max_bytes=100)
    api, starts = make(rt)
    assert code_of(lambda: api.dispatch(name, payload)) == code
    assert rt.redis.llen(rt.keys.event_queue) == 0 and starts == []


# --- listeners -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("event", "action", "kwargs", "code"),
    [
        ("order.paid", {**SMS, "text": "Order {{ id "}, {}, "e.noti.listener.badtemplate"),
        ("order.paid", {**SMS, "text": "{{ customer.__class__ }}"}, {}, "e.noti.listener.unsafe"),
        ("order.paid", {**SMS, "text": "{{ customer['_x'] }}"}, {}, "e.noti.listener.unsafe"),
        ("order.paid", {**SMS, "text": "{% include 'x' %}"}, {}, "e.noti.listener.unsafe"),
        # what would build huge values, when written in the template, is refused at add time
        ("order.paid", {**SMS, "text": "{{ lipsum(n=100000) }}"}, {}, "e.noti.listener.unsafe"),
        ("order.paid", {**SMS, "text": "{{ cycler(1, 2).next() }}"}, {}, "e.noti.listener.unsafe"),
        ("order.paid", {**SMS, "text": "{{ 'a'|center(100000000) }}"}, {}, "e.noti.listener.unsafe"),
        ("order.paid", {**SMS, "text": "{{ id|indent(width=100000000) }}"}, {}, "e.noti.listener.unsafe"),
        ("order.paid", {**SMS, "text": "{{ 'a'.ljust(100000000) }}"}, {}, "e.noti.listener.unsafe"),
        ("order.paid", {**SMS, "text": "{{ id|pprint }}"}, {}, "e.noti.listener.unsafe"),
        ("order.paid", {**SMS, "text": "{{ id.translate(t) }}"}, {}, "e.noti.listener.unsafe"),
        (
            "order.paid",
            {**SMS, "text": "{% macro m() %}x{% endmacro %}{{ m() }}"},
            {},
            "e.noti.listener.unsafe",
        ),
        ("order.paid", {**SMS, "text": "{% set x %}{{ id }}{% endset %}"}, {}, "e.noti.listener.unsafe"),
        ("order.paid", {**SMS, "text": "{{ id|nosuchfilter }}"}, {}, "e.noti.listener.badtemplate"),
        ("order.paid", SMS, {"filter": "total >"}, "e.noti.listener.badfilter"),
        ("order.paid", SMS, {"filter": "x.__class__"}, "e.noti.listener.unsafe"),
        ("order.paid", "no.such.task", {}, "e.noti.listener.notask"),
        ("order.paid", "noti.deliver", {}, "e.noti.listener.notask"),
        ("order.paid", {"task": "tests.events.echo", "type": "sms"}, {}, "e.noti.listener.badaction"),
        ("order.paid", 42, {}, "e.noti.listener.badaction"),
        ("order.paid", {**SMS, "type": "fax"}, {}, "e.cmd.noti.add.badtype"),
        ("order.paid", {"type": "sms", "target": "{{ p }}"}, {}, "e.cmd.noti.add.missing"),
        ("order.paid", {**SMS, "colour": "red"}, {}, "e.cmd.noti.add.badfield"),
        ("order.paid", {**SMS, "lv": "high"}, {}, "e.cmd.noti.add.badlv"),
        ("order paid", SMS, {}, "e.noti.listener.badevent"),
        ("order.paid", SMS, {"name": "bad name"}, "e.noti.listener.badname"),
        # with an example payload, what only a payload can show is refused now too
        ("order.paid", {**SMS, "text": "{{ nope }}"}, {"example": PAID}, "e.noti.listener.undefined"),
        ("order.paid", {**SMS, "target": "{{ id }}"}, {"example": PAID}, "e.cmd.noti.add.badtarget"),
        ("order.paid", SMS, {"example": PAID, "filter": "total > 1"}, "e.noti.listener.undefined"),
        ("order.paid", SMS, {"example": [1]}, "e.noti.event.badpayload"),
    ],
)
def test_bad_listeners_are_refused_and_nothing_is_stored(
    rt: Any, event: str, action: Any, kwargs: dict[str, Any], code: str
) -> None:
    assert code_of(lambda: add_listener(event, action, **kwargs)) == code
    assert list_listeners(user=ADMIN) == []


def test_a_good_listener_is_stored_with_its_owner_and_compiled_action(rt: Any) -> None:
    added = add_listener("order.*", SMS, name="paid-sms", filter="id > 1", example=PAID, user=BOB)
    [stored] = list_listeners(user=BOB)
    assert stored == added
    assert stored.user == BOB and stored.event == "order.*" and stored.filter == "id > 1"
    assert stored.action.to_json() == {
        "kind": "notify",
        "type": "sms",
        "target": "{{ customer.phone }}",
        "fields": {"text": "Order {{ id }} paid"},
        "lv": 1,
        "provider": None,
    }
    task = add_listener("order.paid", "tests.events.echo")
    assert task.name == task.id and task.user == ALICE


def test_listeners_belong_to_their_creator(rt: Any) -> None:
    add_listener("order.paid", SMS, name="mine", user=ALICE)
    add_listener("order.paid", "tests.events.echo", name="bobs", user=BOB)
    # non-root users see and touch only their own; root members see and remove anyone's
    assert [x.name for x in list_listeners(user=ALICE)] == ["mine"]
    assert [x.name for x in list_listeners(user=MEMBER)] == ["mine", "bobs"]
    with pytest.raises(PermissionDenied) as denied:
        Events(rt).remove_listener("mine", user=BOB)
    assert denied.value.code == "e.noti.listener.del.nopvg"
    # a name is taken until removed or replaced by its owner (or root)
    assert code_of(lambda: add_listener("x.y", SMS, name="mine", user=ALICE)) == "e.noti.listener.exists"
    assert code_of(lambda: add_listener("x.y", SMS, name="mine", user=BOB, replace=True)) == (
        "e.noti.listener.replace.nopvg"
    )
    replaced = add_listener("order.refunded", SMS, name="mine", user=ALICE, replace=True)
    assert Events(rt).listeners.require("mine")[0] == replaced
    assert Events(rt).remove_listener("mine", user=MEMBER).event == "order.refunded"
    with pytest.raises(NotFound):
        Events(rt).remove_listener("mine", user=ADMIN)
    assert [x.name for x in list_listeners(user=ADMIN)] == ["bobs"]


#: A listener's pattern: names it matches, and names it does not.
WILDCARDS = {
    "order.paid": (["order.paid"], ["order.paidx"]),
    "order.*": (["order.paid", "order.item.added"], ["order", "orders.paid"]),
    "*.paid": (["invoice.paid"], []),
    "*": (["anything.at:all"], []),
    "or*er.paid": (["order.paid"], []),
}


@pytest.mark.parametrize(("pattern", "name", "expected"), yes_no_rows(WILDCARDS))
def test_wildcards_match_any_run_of_characters(pattern: str, name: str, expected: bool) -> None:
    assert matches(pattern, name) is expected


# --- the template sandbox --------------------------------------------------------------------


def test_templates_see_the_payload_and_the_event() -> None:
    template = compile_template("Order {{ id }} for {{ customer.name }} ({{ _event.name }})", "text")
    values = context(PAID, event_id="E1", name="order.paid", user=ALICE, created_ms=1)
    assert template.render(values) == "Order 42 for Li (order.paid)"
    assert template.variables == {"id", "customer", "_event"}


@pytest.mark.parametrize(
    ("source", "payload", "code"),
    [
        ("{{ x | attr(k) }}", {"x": {}, "k": "__class__"}, "e.noti.event.template.unsafe"),
        ("{{ x[k] }}", {"x": {}, "k": "__class__"}, "e.noti.event.template.unsafe"),
        (
            "{{ (x | attr(k)) | attr(g) }}",
            {"x": "", "k": "__init__", "g": "__globals__"},
            "e.noti.event.template.unsafe",
        ),
        ("{{ x.update({'a': 1}) }}", {"x": {}}, "e.noti.event.template.unsafe"),
        ("{{ x.append(1) }}", {"x": []}, "e.noti.event.template.unsafe"),
        ("{{ 'a' * 10000000 }}", {}, "e.noti.event.template.unsafe"),
        ("{{ 10 ** 100000 }}", {}, "e.noti.event.template.unsafe"),
        ("{% for i in range(100000) %}{% endfor %}", {}, "e.noti.event.template.unsafe"),
        # widths and counts above the output limit are refused before anything is built:
        # .unsafe, not the .error of output found too long once made
        ("{{ x|center(n) }}", {"x": "a", "n": 10**8}, "e.noti.event.template.unsafe"),
        ("{{ x|indent(n) }}", {"x": "a\nb", "n": 10**8}, "e.noti.event.template.unsafe"),
        ("{{ x|indent(4, true) }}", {"x": "a\n" * 30000}, "e.noti.event.template.unsafe"),
        ("{{ x|wordwrap(n) }}", {"x": "a", "n": 10**8}, "e.noti.event.template.unsafe"),
        (
            "{{ x|wordwrap(1, wrapstring=w) }}",
            {"x": "a " * 30000, "w": "b" * 60000},
            "e.noti.event.template.unsafe",
        ),
        ("{{ x|truncate(n) }}", {"x": "a", "n": 10**8}, "e.noti.event.template.unsafe"),
        ("{{ '%*s'|format(n, x) }}", {"x": "a", "n": 10**8}, "e.noti.event.template.unsafe"),
        ("{{ '%0100000000d'|format(1) }}", {}, "e.noti.event.template.unsafe"),
        ("{{ '%.100000000f' % 1.5 }}", {}, "e.noti.event.template.unsafe"),
        ("{{ '{:>{w}}'.format(1, w=n) }}", {"n": 10**8}, "e.noti.event.template.unsafe"),
        ("{{ x.center(n) }}", {"x": "a", "n": 10**8}, "e.noti.event.template.unsafe"),
        ("{{ x.zfill(n) }}", {"x": "a", "n": 10**8}, "e.noti.event.template.unsafe"),
        ("{{ x|replace('a', y) }}", {"x": "a" * 60000, "y": "b" * 60000}, "e.noti.event.template.unsafe"),
        ("{{ r|join(y) }}", {"r": list(range(1000)), "y": "b" * 60000}, "e.noti.event.template.unsafe"),
        ("{{ [x] * 1000 }}", {"x": "a" * 60000}, "e.noti.event.template.unsafe"),
        ("{{ [x, x, x] }}", {"x": "a" * 60000}, "e.noti.event.template.unsafe"),
        (
            "{% set a = x ~ x %}{% set b = a ~ a %}{{ b|length }}",
            {"x": "a" * 40000},
            "e.noti.event.template.unsafe",
        ),
        ("{{ [1]|batch(n, 'x')|list|length }}", {"n": 10**8}, "e.noti.event.template.unsafe"),
        ("{{ ((10 ** 100) ** 100) ** 100 }}", {}, "e.noti.event.template.unsafe"),
        (
            "{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}",
            {},
            "e.noti.event.template.unsafe",
        ),
        ("{% for i in range(1000) %}{{ x }}{% endfor %}", {"x": "a" * 1000}, "e.noti.event.template.error"),
        ("{{ customer.phone }}", {"id": 1}, "e.noti.event.template.undefined"),
        ("{{ 1 / 0 }}", {}, "e.noti.event.template.error"),
    ],
)
def test_the_sandbox_refuses_python_internals_and_huge_values_at_run_time(
    source: str, payload: dict[str, Any], code: str
) -> None:
    template = compile_template(source, "text")
    with pytest.raises(InvalidInput) as refused:
        template.render(context(payload, event_id="E", name="n", user="u", created_ms=0))
    assert refused.value.code == code


@pytest.mark.slow
def test_a_template_that_would_build_a_huge_value_is_refused_on_its_event(rt: Any) -> None:
    # given listeners whose widths come from the payload
    api, _ = make(rt)
    texts = {
        "center": "{{ customer.name|center(width) }}",
        "indent": "{{ customer.name|indent(width, true) }}",
        "format": "{{ '%*s'|format(width, id) }}",
        "repeat": "{{ customer.name * width }}",
    }
    for name, text in texts.items():
        add_listener("order.paid", {**SMS, "text": text}, name=name, example={**PAID, "width": 3})
    # when an event asks for widths of 10**8
    event_id = api.dispatch("order.paid", {**PAID, "width": 10**8})
    api.processor().run()
    # then each listener's refusal is recorded with the limit it passed; nothing was sent
    event = api.get(event_id)
    assert event.status is EventStatus.DONE
    assert [(o.listener, o.error_code) for o in event.outcomes] == [
        (name, "e.noti.event.template.unsafe") for name in texts
    ]
    center, indent, fmt, repeat = (o.error_message for o in event.outcomes)
    assert center == "field 'text': center: 100000000 is above the limit of 65536"
    assert indent == "field 'text': indent: 100000000 is above the limit of 65536"
    assert fmt == "field 'text': this format would make 100000003 characters or more, more than 65536"
    assert repeat == "field 'text': repetition beyond 65536 characters or items is not allowed"
    assert rt.store.count() == 0


# --- the processor, run in this thread --------------------------------------------------------


def test_the_processor_runs_listeners_in_creation_order_and_records_their_return_data(rt: Any) -> None:
    # given a root member's listeners, opted in to everyone's events, and bob's event
    api, _ = make(rt)
    add_listener("order.*", SMS, name="sms", user=MEMBER, from_users=["*"])
    add_listener("order.paid", "tests.events.echo", name="echo", user=MEMBER, from_users=["*"])
    add_listener("order.paid", SMS, name="big-only", filter="id > 100", user=MEMBER, from_users="*")
    add_listener("invoice.*", SMS, name="other", user=MEMBER, from_users="*")
    event_id = api.dispatch("order.paid", PAID, user=BOB)
    # when a processor runs
    report = api.processor().run()
    # then it did the one event, and let go of its lock with nothing left
    assert (report.reason, report.processed, report.successor) == (StopReason.IDLE, 1, False)
    assert not rt.redis.exists(rt.keys.event_lock) and rt.redis.llen(rt.keys.event_queue) == 0
    event = api.get(event_id, user=BOB)
    assert event.status is EventStatus.DONE and not event.failed and event.tries == 1
    assert event.activated_ms >= event.created_ms and event.done_ms >= event.activated_ms
    sms, echo, skipped = event.outcomes
    assert sms.listener == "sms" and sms.notification is not None
    record = rt.store.get(sms.notification)
    assert record.creator == MEMBER and record.target == PHONE and record.fields == {"text": "Order 42 paid"}
    assert echo.result == {
        "payload": PAID,
        "user": BOB,
        "key": f"event:{event_id}:{list_listeners(user=MEMBER)[1].id}",
        "odd": "{1}",
    }
    assert (skipped.listener, skipped.skipped) == ("big-only", "filter")
    assert api.status().last_stop["reason"] == "idle"


def test_listeners_made_in_one_millisecond_run_in_the_order_they_were_stored(
    rt: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given a listener stored by a release without "seq" (it runs first, by id), then twelve
    # listeners made in one millisecond: their ids share the time and differ by a random tail
    import noti.events.api

    api, _ = make(rt)
    old = add_listener("order.paid", "tests.events.echo", name="old")
    text = rt.redis.hget(rt.keys.listeners, "old")
    rt.redis.hset(
        rt.keys.listeners, "old", json.dumps({k: v for k, v in json.loads(text).items() if k != "seq"})
    )
    monkeypatch.setattr(noti.events.api, "now_ms", lambda: 1_800_000_000_000)
    names = [f"l{i:02d}" for i in range(12)]
    for name in names:
        add_listener("order.paid", "tests.events.echo", name=name)
    # then they are listed and run in the order they were stored, not in the order of their ids
    assert [x.name for x in list_listeners()] == ["old", *names]
    # (sorted by id, they would run in another order: 12 random tails sort as made once in 12!)
    ids = [x.id for x in list_listeners()[1:]]
    assert len({i[:10] for i in ids}) == 1 and sorted(ids) != ids
    monkeypatch.undo()
    event_id = api.dispatch("order.paid", PAID)
    api.processor().run()
    assert [o.listener for o in api.get(event_id).outcomes] == ["old", *names]
    assert list_listeners()[0] == old and list_listeners()[0].seq == 0 < list_listeners()[1].seq


def test_listeners_run_only_for_events_their_owner_may_read(rt: Any) -> None:
    # given alice's catch-all listeners (a webhook to a server of hers, a task), bob's own
    # listener, the catch-all listeners of a root member and a root administrator opted in to
    # everyone's events, and a root administrator's catch-all that did not opt in
    api, _ = make(rt)
    spy = {"type": "webhook", "target": "https://alice.example.com/", "content": {"got": "{{ secret }}"}}
    add_listener("*", spy, name="alice-hook", user=ALICE)
    add_listener("*", "tests.events.echo", name="alice-task", user=ALICE)
    add_listener("order.*", "tests.events.echo", name="bob-task", user=BOB)
    add_listener("*", "tests.events.echo", name="member-task", user=MEMBER, from_users=["*"])
    add_listener("*", "tests.events.echo", name="admin-task", user=ADMIN, from_users=["*"])
    add_listener("*", "tests.events.echo", name="admin-own", user=ADMIN)
    # when bob and alice each dispatch an event
    bobs = api.dispatch("order.paid", {"secret": "bob's"}, user=BOB)
    alices = api.dispatch("order.paid", {"secret": "alice's"}, user=ALICE)
    api.processor().run()
    # then bob's event ran his listener and root's, none of alice's, and records nothing of hers
    bob_event = api.get(bobs, user=ADMIN)
    assert [o.listener for o in bob_event.outcomes] == ["bob-task", "member-task", "admin-task"]
    assert all(o.result["payload"] == {"secret": "bob's"} for o in bob_event.outcomes)
    # alice's event ran her listeners and root's, not bob's
    alice_event = api.get(alices, user=ALICE)
    assert [o.listener for o in alice_event.outcomes] == [
        "alice-hook",
        "alice-task",
        "member-task",
        "admin-task",
    ]
    # and the only notification alice's webhook made carries her own event's payload
    [record] = rt.store.select()
    assert record.creator == ALICE and record.fields["content"] == {"got": "alice's"}


def test_an_event_whose_processors_all_died_is_set_aside_as_poison(configure: Any) -> None:
    # given an event activated by as many processors as NOTI_EVENT_MAX_TRIES allows (3 by
    # default), each of which died, and an event behind it
    rt = configure(dead_letter_hook="tests.hooks:collect")
    hooks.CALLS.clear()
    api, _ = make(rt)
    add_listener("order.paid", "tests.events.echo", name="echo")
    pill = api.dispatch("order.paid", {"id": 1})
    after = api.dispatch("order.paid", {"id": 2})
    assert rt.settings.event_max_tries == 3
    for _ in range(3):
        rt.redis.set(rt.keys.event_lock, "dead", px=60_000)
        activation = api.store.activate("dead", now_ms=1, processor="dead", max_tries=3)
        assert activation is not None and activation.id == pill
        rt.redis.delete(rt.keys.event_lock)  # it died; its lock expired
    # when the next processor runs
    report = api.processor().run()
    # then it does not take the event a fourth time: it is done, as poison, with no outcomes
    assert report.processed == 1
    poisoned = api.get(pill)
    assert poisoned.status is EventStatus.DONE and poisoned.tries == 3 and poisoned.outcomes == ()
    assert poisoned.error_code == "e.noti.event.poison"
    assert poisoned.error_message.startswith("activated 3 times without finishing")
    # and it has its dead letter (the hook was told), and the queue went on
    [letter] = rt.dead_letters.entries()
    expected = DeadLetter(
        record_id=pill,
        type="event:order.paid",
        target="",
        attempts=3,
        error_class="poison",
        errmsg=f"e.noti.event.poison: {poisoned.error_message}",
        at_ms=poisoned.done_ms,
        source="events",
        payload='{"id":1}',
    )
    assert letter == dataclasses.replace(expected, entry_id=letter.entry_id)
    assert hooks.CALLS == [expected]
    behind = api.get(after)
    assert behind.status is EventStatus.DONE and not behind.failed and behind.tries == 1
    assert rt.redis.llen(rt.keys.event_queue) == 0
    # and the counters (noti.redis.counters) say so: two stored, one poison, one processed
    counted = rt.redis.hgetall(rt.keys.metrics)
    assert counted == {"events_dispatched": "2", "events_done|poison": "1", "events_done|ok": "1"}


def test_a_processor_exits_at_once_while_another_holds_the_lock(rt: Any) -> None:
    api, _ = make(rt)
    api.dispatch("order.paid", PAID)
    rt.redis.set(rt.keys.event_lock, '{"token":"t","host":"elsewhere","pid":7,"since_ms":5}', px=60_000)
    report = api.processor().run()
    assert (report.reason, report.processed) == (StopReason.BUSY, 0)
    assert api.status().alive and api.status().holder.host == "elsewhere"  # type: ignore[union-attr]
    assert api.status().counts.new == 1


def test_a_resumed_event_creates_no_second_notification(rt: Any) -> None:
    # given a processor that activated an event, created its notification and died
    api, _ = make(rt)
    add_listener("order.paid", SMS, name="sms")
    event_id = api.dispatch("order.paid", PAID)
    dead = api.processor()
    rt.redis.set(rt.keys.event_lock, dead.holder.encode(), px=60_000)
    activation = api.store.activate(dead.holder.encode(), now_ms=1, processor=dead.holder.name)
    assert activation is not None and activation.id == event_id
    [first] = dead.run_listeners(activation)
    rt.redis.delete(rt.keys.event_lock)  # its lock expired
    assert api.get(event_id).status is EventStatus.ACTIVATED
    # when a new processor runs
    report = api.processor().run()
    # then it finished the same event with the same notification, created once
    assert report.processed == 1
    event = api.get(event_id)
    assert event.status is EventStatus.DONE and event.tries == 2
    assert event.outcomes[0].notification == first.notification
    assert rt.store.count() == 1


def test_a_processor_that_lost_its_lock_writes_nothing(rt: Any) -> None:
    api, _ = make(rt)
    event_id = api.dispatch("order.paid", PAID)
    rt.redis.set(rt.keys.event_lock, "mine", px=60_000)
    assert api.store.activate("mine", now_ms=1, processor="p") is not None
    rt.redis.set(rt.keys.event_lock, "someone else", px=60_000)
    with pytest.raises(LockLost):
        api.store.finish("mine", event_id, [], now_ms=2)
    with pytest.raises(LockLost):
        api.store.activate("mine", now_ms=3, processor="p")
    assert api.get(event_id).status is EventStatus.ACTIVATED


def test_the_sweep_queues_a_processor_only_for_waiting_events_without_one(rt: Any) -> None:
    api, starts = make(rt)
    assert api.sweep() is False  # nothing waits
    api.dispatch("order.paid", PAID)  # queues one, and marks it as starting
    assert starts == [1] and api.sweep() is False
    rt.redis.delete(rt.keys.event_starting)  # that processor never came
    rt.redis.set(rt.keys.event_lock, "alive", px=60_000)
    assert api.sweep() is False  # a live processor will get to it
    rt.redis.delete(rt.keys.event_lock)
    assert api.sweep() is True and starts == [1, 1]


def test_clean_removes_done_events_past_their_keep_window(rt: Any) -> None:
    api, _ = make(rt)
    old, recent = api.dispatch("a.b", user=BOB), api.dispatch("a.b", user=BOB)
    api.processor().run()
    waiting = api.dispatch("a.b", user=BOB)
    done_index = rt.keys.event_status_index("done")
    rt.redis.zadd(done_index, {old: 1_000})  # finished long ago
    assert api.clean_done(keep_s=3600) == 1
    assert [e.id for e in api.select(user=ADMIN)] == [waiting, recent]
    assert not rt.redis.exists(rt.keys.event(old))
    assert rt.redis.zrange(rt.keys.event_user_index(BOB), 0, -1) == [recent, waiting]
    assert api.clean_done(keep_s=0) == 1 and api.get(waiting, user=BOB).status is EventStatus.NEW


def test_listing_events_filters_and_respects_ownership(rt: Any) -> None:
    api, _ = make(rt)
    a = api.dispatch("order.paid", user=ALICE)
    b = api.dispatch("order.cancelled", user=BOB)
    c = api.dispatch("invoice.paid", user=ALICE)
    assert [e.id for e in api.select(user=ALICE)] == [c, a]
    assert [e.id for e in api.select(user=ADMIN)] == [c, b, a]
    assert [e.id for e in api.select(user=ADMIN, name="order.*")] == [b, a]
    assert [e.id for e in api.select(user=MEMBER, status="new", creator=BOB)] == [b]
    assert api.select(user=ADMIN, status="done") == []
    assert [e.id for e in api.select(user=ADMIN, limit=1)] == [c]
    assert code_of(lambda: api.select(user=ALICE, creator=BOB)) == "e.noti.event.list.nopvg"
    assert code_of(lambda: api.select(user=ADMIN, status="finished")) == "e.noti.event.badst"
    assert code_of(lambda: api.get(b, user=ALICE)) == "e.noti.event.not_found"  # as a missing one
    assert code_of(lambda: api.get("nope", user=ADMIN)) == "e.noti.event.not_found"


# --- the command line ------------------------------------------------------------------------


def run(*args: str, user: str = ALICE) -> Any:
    return invoke("--as", user, *args)


def test_cli_listener_and_event_commands(rt: Any) -> None:
    added = run(
        "listener", "add", "order.paid", "-name", "paid-sms", "-type", "sms",
        "-to", "{{ customer.phone }}", "-text", "Order {{ id }} paid", "-lv", "5",
        "-example", json.dumps(PAID),
    )  # fmt: skip
    assert added.exit_code == 0, added.output
    assert added.stdout.strip() == "paid-sms"
    listed = run("listener", "list")
    assert "paid-sms" in listed.stdout and "sms to {{ customer.phone }}" in listed.stdout
    as_json = json.loads(run("listener", "list", "-json", "-c").stdout)
    assert as_json[0]["action"]["lv"] == 5 and as_json[0]["user"] == ALICE
    dispatched = run("event", "dispatch", "order.paid", "-data", json.dumps(PAID))
    event_id = dispatched.stdout.strip()
    assert dispatched.exit_code == 0 and len(event_id) == 26
    listed_events = run("event", "list", "-st", "new", "-name", "order.*")
    assert event_id in listed_events.stdout and "1 event\n" in listed_events.stdout
    shown = json.loads(run("event", "show", event_id, "-json").stdout)
    assert shown["status"] == "new" and shown["payload"] == PAID and shown["result"] is None
    assert "status     new" in run("event", "show", event_id).stdout
    status = run("event", "status")
    assert "none alive" in status.stdout and "backlog    1 (1 new, 0 activated)" in status.stdout
    assert json.loads(run("event", "status", "-json").stdout)["backlog"] == 1
    task = run("listener", "add", "order.*", "-task", "tests.events.echo", "-name", "audit")
    assert task.exit_code == 0 and task.stdout.strip() == "audit"


def test_cli_errors_print_their_code(rt: Any) -> None:
    bad = run("event", "dispatch", "order.paid", "-data", "[1, 2]")
    assert bad.exit_code == 1 and bad.stderr.startswith("e.noti.event.badpayload: ")
    not_json = run("event", "dispatch", "order.paid", "-data", "{oops")
    assert not_json.exit_code == 1 and "e.noti.event.badpayload" in not_json.stderr
    unsafe = run("listener", "add", "x", "-type", "sms", "-to", "{{ a.__class__ }}", "-text", "t")
    assert unsafe.exit_code == 1 and unsafe.stderr.startswith("e.noti.listener.unsafe: ")
    neither = run("listener", "add", "x")
    assert neither.exit_code == 2
    run("listener", "add", "x", "-task", "tests.events.echo", "-name", "alices", user=ALICE)
    denied = run("listener", "del", "alices", user=BOB)
    assert denied.exit_code == 1 and denied.stderr.startswith("e.noti.listener.del.nopvg: ")
    removed = run("listener", "del", "alices", user=ADMIN)
    assert removed.stdout.strip() == "rm listener alices (x) > task tests.events.echo"
    assert run("event", "show", "nope").exit_code == 1


def test_module_level_dispatch_uses_the_acting_user(rt: Any) -> None:
    event_id = dispatch("order.paid", PAID)
    assert Events(rt).get(event_id).user == ALICE


# --- the starting marker: exact, so no dispatch waits for the sweep ---------------------------


def test_a_dispatch_right_after_a_processor_went_idle_queues_a_processor_at_once(rt: Any) -> None:
    # given an event whose dispatch queued a processor (and marked it as starting)
    api, starts = make(rt)
    api.dispatch("order.paid", PAID)
    assert starts == [1] and rt.redis.exists(rt.keys.event_starting)
    # when that processor runs, empties the queue and goes idle
    assert api.processor().run().reason is StopReason.IDLE
    # then nothing says a processor is starting any more ...
    assert not rt.redis.exists(rt.keys.event_starting)
    # ... so the very next dispatch queues one itself instead of leaving its event to the sweep
    api.dispatch("order.paid", PAID)
    assert starts == [1, 1]


def test_the_starting_marker_is_dropped_when_a_processor_takes_the_lock_or_finds_it_taken(rt: Any) -> None:
    api, starts = make(rt)
    # a processor that takes the lock drops the marker as it does (it is no longer "starting")
    api.dispatch("order.paid", PAID)
    processor = api.processor()
    seen: list[int] = []
    processor.listeners_of = lambda event: seen.append(rt.redis.exists(rt.keys.event_starting)) or []  # type: ignore[method-assign]
    processor.run()
    assert seen == [0]
    # a queued processor that finds another one alive exits, and drops the marker too
    rt.redis.set(rt.keys.event_starting, "dispatch", px=60_000)
    rt.redis.set(rt.keys.event_lock, '{"token":"t","host":"h","pid":1,"since_ms":1}', px=60_000)
    assert api.processor().run().reason is StopReason.BUSY
    assert not rt.redis.exists(rt.keys.event_starting)


def test_a_processor_stopped_by_a_bug_leaves_no_marker_behind(rt: Any) -> None:
    # given a processor whose listener lookup has a bug, and two events waiting
    api, starts = make(rt)
    api.dispatch("order.paid", PAID)
    api.dispatch("order.paid", PAID)
    processor = api.processor()

    def broken(event: Any) -> Any:
        raise ZeroDivisionError("a bug")

    processor.listeners_of = broken  # type: ignore[method-assign]
    report = processor.run()
    # then it queued no successor and left no marker: the next dispatch queues a processor
    assert (report.reason, report.successor) == (StopReason.ERROR, False)
    assert not rt.redis.exists(rt.keys.event_starting) and not rt.redis.exists(rt.keys.event_lock)
    api.dispatch("order.paid", PAID)
    assert starts == [1, 1]


def test_a_processor_handing_over_marks_its_successor_as_starting(configure: Any) -> None:
    rt = configure(event_processor_max_runtime_s=1e-6)
    api, starts = make(rt)
    api.dispatch("order.paid", PAID)
    api.dispatch("order.paid", PAID)
    report = api.processor().run()
    assert (report.reason, report.processed, report.successor) == (StopReason.TIME, 1, True)
    assert starts == [1, 1] and rt.redis.exists(rt.keys.event_starting)
    api.dispatch("order.paid", PAID)  # the successor is on its way: no third processor
    assert starts == [1, 1]


# --- fencing: a processor that lost its lock writes nothing and stops -------------------------


def test_a_processor_that_loses_its_lock_mid_event_stops_and_its_successor_runs_each_listener_once(
    rt: Any,
) -> None:
    # given three listeners; while the second runs, another processor takes the lock (as
    # after a stall past the lock's time-to-live)
    from tests.test_events_tasks import SEEN, THIEF, attempts_key

    api, _ = make(rt)
    add_listener("order.paid", "tests.events.record_order", name="a-first")
    add_listener("order.paid", "tests.events.steal_lock", name="b-stall")
    add_listener("order.paid", "tests.events.record_order", name="c-last")
    add_listener("order.paid", SMS, name="d-sms")
    event_id = api.dispatch("order.paid", PAID)
    stalled = api.processor()
    report = stalled.run()
    # then it stopped there: no later listener ran, no notification was made, nothing was
    # written after the loss (the outcome of b, the event's end), and the lock is the thief's
    assert (report.reason, report.processed) == (StopReason.LOST, 0)
    assert rt.redis.lrange(SEEN, 0, -1) == [f"{event_id}:event:{event_id}:{list_listeners()[0].id}"]
    assert rt.store.count() == 0
    stored = rt.redis.hgetall(rt.keys.event(event_id))
    assert stored["status"] == "activated" and stored["tries"] == "1"
    assert sorted(f for f in stored if f.startswith("o:")) == [f"o:{list_listeners()[0].id}"]
    assert rt.redis.get(rt.keys.event_lock) == THIEF
    # and it said it stalled (it did not die)
    assert rt.redis.exists(rt.keys.event_stalled(stalled.holder.name))
    # when the thief's lock expires and a successor runs
    rt.redis.delete(rt.keys.event_lock)
    assert api.processor().run().processed == 1
    # then it took the same event over: the first listener was not run again, the one that
    # was interrupted ran again (same key), the others ran once; one notification
    event = api.get(event_id)
    assert event.status is EventStatus.DONE and event.tries == 2 and not event.failed
    assert [o.listener for o in event.outcomes] == ["a-first", "b-stall", "c-last", "d-sms"]
    assert [o.result for o in event.outcomes[:3]] == [1, 2, 2]
    assert rt.redis.get(attempts_key(event_id)) == "2"
    assert len(rt.redis.lrange(SEEN, 0, -1)) == 2 and rt.store.count() == 1
    # and the outcomes recorded one by one were folded into the return data
    assert not [f for f in rt.redis.hkeys(rt.keys.event(event_id)) if f.startswith("o:")]


def test_a_processor_that_lost_its_lock_records_no_listener_outcome(rt: Any) -> None:
    api, _ = make(rt)
    event_id = api.dispatch("order.paid", PAID)
    rt.redis.set(rt.keys.event_lock, "mine", px=60_000)
    assert api.store.activate("mine", now_ms=1, processor="p") is not None
    api.store.record_outcome("mine", event_id, "L1", Outcome("one", result=1))
    rt.redis.set(rt.keys.event_lock, "someone else", px=60_000)
    with pytest.raises(LockLost):
        api.store.record_outcome("mine", event_id, "L2", Outcome("two", result=2))
    assert api.store.holds("someone else") and not api.store.holds("mine")
    assert {f for f in rt.redis.hkeys(rt.keys.event(event_id)) if f.startswith("o:")} == {"o:L1"}


def test_processors_that_stalled_are_not_counted_as_deaths_towards_poison(rt: Any) -> None:
    # given an event activated three times (NOTI_EVENT_MAX_TRIES): its first processor died,
    # the other two lost their lock while alive (stalled) and said so
    api, _ = make(rt)
    add_listener("order.paid", "tests.events.echo", name="echo")
    event_id = api.dispatch("order.paid", {"id": 1})
    for name in ("dead", "stalled-1", "stalled-2"):
        rt.redis.set(rt.keys.event_lock, name, px=60_000)
        assert api.store.activate(name, now_ms=1, processor=name, max_tries=3) is not None
        rt.redis.delete(rt.keys.event_lock)
    api.store.mark_stalled("stalled-1")
    api.store.mark_stalled("stalled-2")
    # when the next processor runs, it takes the event over instead of poisoning it
    api.processor().run()
    event = api.get(event_id)
    assert event.status is EventStatus.DONE and not event.failed and event.tries == 4
    assert rt.dead_letters.entries() == []
    # and tries counts every activation; deaths and stalls say what became of the processors
    # that did not finish it, in the API, the JSON and noti event show
    assert (event.deaths, event.stalls) == (1, 2)
    assert (event.to_json()["tries"], event.to_json()["deaths"], event.to_json()["stalls"]) == (4, 1, 2)
    shown = run("event", "show", event_id, user=ADMIN)
    assert "tries      4 (activations: 3 processor(s) did not finish it: 1 died, 2 stalled)" in shown.stdout


def test_tries_of_a_poisoned_event_count_its_dead_processors(rt: Any) -> None:
    api, _ = make(rt)
    add_listener("order.paid", "tests.events.echo", name="echo")
    fine = api.dispatch("order.fine", {})  # no listener
    rt.redis.set(rt.keys.event_lock, "first", px=60_000)
    api.store.activate("first", now_ms=1, processor="first", max_tries=3)  # fine: its first try
    rt.redis.delete(rt.keys.event_lock)
    api.processor().run()
    assert api.get(fine).tries == 2  # its first processor died; the second finished it
    pill = api.dispatch("order.paid", {"id": 1})
    for n in range(3):
        rt.redis.set(rt.keys.event_lock, f"dead-{n}", px=60_000)
        api.store.activate(f"dead-{n}", now_ms=1, processor=f"dead-{n}", max_tries=3)
        rt.redis.delete(rt.keys.event_lock)
    api.store.mark_stalled("dead-1")  # one of them said it stalled: not a death
    rt.redis.set(rt.keys.event_lock, "dead-3", px=60_000)
    api.store.activate("dead-3", now_ms=1, processor="dead-3", max_tries=3)
    rt.redis.delete(rt.keys.event_lock)
    api.processor().run()
    poisoned = api.get(pill)
    assert poisoned.error_code == "e.noti.event.poison"
    assert (poisoned.tries, poisoned.deaths, poisoned.stalls) == (4, 3, 1)
    assert (api.get(fine).deaths, api.get(fine).stalls) == (1, 0)
    shown = run("event", "show", pill, user=ADMIN)
    assert "tries      4 (activations: 4 processor(s) did not finish it: 3 died, 1 stalled)" in shown.stdout
    new = run("event", "show", api.dispatch("order.new", {}), user=ADMIN)
    assert "tries      0 (activations)" in new.stdout


# --- retry and replay ----------------------------------------------------------------------------


def test_retry_re_runs_the_failed_listeners_in_a_new_ordered_step(rt: Any) -> None:
    # given an event whose second listener failed (a bug), while the others succeeded
    api, starts = make(rt)
    add_listener("order.*", SMS, name="a-sms")
    add_listener("order.*", "tests.events.fail_first", name="b-flaky")
    add_listener("order.*", "tests.events.echo", name="c-echo")
    failed = api.dispatch("order.paid", PAID)
    api.processor().run()
    before = api.get(failed)
    assert before.failed and [o.listener for o in before.outcomes if o.failed] == ["b-flaky"]
    assert [e.id for e in api.select(failed=True)] == [failed]
    # when, after the fix, it is retried between two other dispatches
    later = api.dispatch("invoice.later", {})  # no listener
    queued = api.retry(failed)
    last = api.dispatch("invoice.last", {})
    # then it is queued again as a new step, after the events dispatched before the retry
    assert queued.status is EventStatus.NEW and queued.replays == 1
    assert rt.redis.lrange(rt.keys.event_queue, 0, -1) == [later, failed, last]
    api.processor().run()
    after = api.get(failed)
    assert after.status is EventStatus.DONE and not after.failed and after.replays == 1
    # only the failed listener ran again; the others kept their outcomes, nothing made twice
    assert [o.listener for o in after.outcomes] == ["a-sms", "b-flaky", "c-echo"]
    assert after.outcomes[0] == before.outcomes[0] and after.outcomes[2] == before.outcomes[2]
    assert after.outcomes[1].result == 2
    assert rt.store.count() == 1  # the SMS, made once
    assert api.select(failed=True) == []
    # and the steps ran in queue order
    done = sorted((api.get(i) for i in (later, failed, last)), key=lambda e: e.done_ms)
    assert [e.id for e in done] == [later, failed, last]


def test_retry_of_one_listener_re_runs_only_that_one(rt: Any) -> None:
    api, _ = make(rt)
    add_listener("order.*", "tests.events.explode", name="a-explodes")
    add_listener("order.*", "tests.events.fail_first", name="b-flaky")
    event_id = api.dispatch("order.paid", PAID)
    api.processor().run()
    api.retry(event_id, listener="b-flaky")
    api.processor().run()
    event = api.get(event_id)
    a, b = event.outcomes
    assert (a.error_code, b.failed, b.result) == ("e.noti.event.task.failed", False, 2)
    assert event.error_code == "e.noti.event.task.failed"  # a-explodes still failed


def test_retry_refuses_what_it_cannot_retry_and_changes_nothing(rt: Any) -> None:
    api, _ = make(rt)
    add_listener("order.*", "tests.events.explode", name="boom", user=MEMBER, from_users="*")
    bobs = api.dispatch("order.paid", PAID, user=BOB)
    api.processor().run()
    fine = api.dispatch("invoice.fine", {}, user=BOB)  # no listener: done without error
    api.processor().run()
    waiting = api.dispatch("order.paid", PAID, user=BOB)
    snapshot = {k: rt.redis.dump(k) for k in rt.redis.keys("noti:*")}
    cases = {
        "e.noti.event.not_found": lambda: api.retry("0" * 20, user=BOB),
        "e.noti.event.retry.nopvg": lambda: api.retry(bobs, user=ALICE),
        "e.noti.listener.badname": lambda: api.retry(bobs, listener="../etc", user=BOB),
        "e.noti.event.retry.badlistener": lambda: api.retry(bobs, listener="nosuch", user=BOB),
        "e.noti.event.retry.notdone": lambda: api.retry(waiting, user=BOB),
        "e.noti.event.retry.nofailure": lambda: api.retry(fine, user=BOB),
    }
    for code, call in cases.items():
        assert code_of(call) == code
    assert {k: rt.redis.dump(k) for k in rt.redis.keys("noti:*")} == snapshot
    # the owner and root members may
    assert api.retry(bobs, user=MEMBER).status is EventStatus.NEW


def test_a_poisoned_event_is_replayed_after_a_fix_and_leaves_the_dead_letters(rt: Any) -> None:
    # given an event set aside as poison (each processor that took it died), dead-lettered
    api, _ = make(rt)
    add_listener("order.paid", "tests.events.echo", name="echo")
    pill = api.dispatch("order.paid", {"id": 1})
    for n in range(3):
        rt.redis.set(rt.keys.event_lock, f"dead-{n}", px=60_000)
        api.store.activate(f"dead-{n}", now_ms=1, processor=f"dead-{n}", max_tries=3)
        rt.redis.delete(rt.keys.event_lock)
    api.processor().run()
    assert api.get(pill).error_code == "e.noti.event.poison"
    assert [e.id for e in api.select(failed=True)] == [pill]
    [letter] = rt.dead_letters.entries()
    assert letter.record_id == pill
    # when it is replayed (after the fix)
    api.retry(pill)
    api.processor().run()
    # then every listener ran, and it left the dead letters
    event = api.get(pill)
    assert event.status is EventStatus.DONE and not event.failed and event.replays == 1
    assert [o.listener for o in event.outcomes] == ["echo"] and event.outcomes[0].result["payload"] == {
        "id": 1
    }
    assert rt.dead_letters.entries() == []


def test_cli_event_retry_and_list_errors(rt: Any) -> None:
    add_listener("order.*", "tests.events.fail_first", name="flaky")
    event_id = dispatch("order.paid", PAID)
    Events(rt, start_processor=lambda: None).processor().run()
    listed = run("event", "list", "-errors", "-json")
    assert listed.exit_code == 0, listed.output
    assert [e["id"] for e in json.loads(listed.stdout)] == [event_id]
    retried = run("event", "retry", event_id, "-listener", "flaky")
    assert retried.exit_code == 0, retried.output
    assert retried.stdout.strip() == event_id
    bad = run("event", "retry", event_id)
    assert bad.exit_code == 1 and bad.stderr.startswith("e.noti.event.retry.notdone: ")
    unknown = run("event", "retry", "nosuch")
    assert unknown.exit_code == 1 and unknown.stderr.startswith("e.noti.event.not_found: ")
