"""Messages a foreign Celery app sends to noti's queues are never stranded.

A host project's Celery app writes the priority lists of *its* transport options: with
kombu's defaults (steps 0, 3, 6, 9; separator ``"\\x06\\x16"``) ``priority=9`` lands in
``noti.intake\\x06\\x169``, a list no noti worker reads (the interop issue's data loss). The
workers' pump adopts those messages onto noti's own lists (``noti.celery.queues.ForeignPriorities``).
Each test drives a real foreign Celery app against the test Redis and real noti workers.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from celery import Celery

from noti.celery.publish import queue_key
from noti.celery.queues import ADOPT_BATCH, INTAKE_QUEUE, KOMBU_DEFAULT_SEPARATOR, ForeignPriorities
from noti.core.record import Channel
from tests.conftest import sandbox_outbox, wait_until

pytestmark = pytest.mark.integration

#: The transport options of the foreign apps under test: kombu's defaults, the options
#: Celery's documentation suggests (noti's own steps and separator), and odd ones.
FOREIGN_OPTIONS = {
    "kombu-defaults": {},
    "celery-docs": {"priority_steps": list(range(10)), "sep": ":", "queue_order_strategy": "priority"},
    "own-sep-and-steps": {"priority_steps": [0, 4, 8], "sep": "|"},
    "default-sep-ten-steps": {"priority_steps": list(range(10))},
}
PRIORITIES: list[int | None] = [None, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9]


@pytest.fixture
def foreign(redis_url: str) -> Iterator[Any]:
    """``foreign(options)``: a host project's Celery app on noti's broker, with its own options."""
    apps: list[Celery] = []

    def _app(options: dict[str, Any]) -> Celery:
        app = Celery(f"host{len(apps)}", broker=redis_url, set_as_current=False)
        app.conf.broker_transport_options = options
        apps.append(app)
        return app

    yield _app
    for app in apps:
        app.close()


def _send(app: Celery, text: str, priority: int | None, queue: str = INTAKE_QUEUE) -> None:
    options = {} if priority is None else {"priority": priority}
    app.send_task(
        "noti.notify",
        queue=queue,
        kwargs={"type": "sms", "target": "+8613912345678", "text": text, "lv": 1},
        **options,
    )


def _lists(client: redis.Redis) -> dict[str, list[dict[str, Any]]]:
    """Every list in the database and its messages, oldest first (the store's client decodes)."""
    return {
        key: [json.loads(raw) for raw in reversed(client.lrange(key, 0, -1))]
        for key in client.keys("*")
        if client.type(key) == "list"
    }


def _text(message: dict[str, Any]) -> str:
    import base64

    return str(json.loads(base64.b64decode(message["body"]))[1]["text"])


def test_every_priority_of_every_foreign_app_is_delivered(
    rt: Any, foreign: Any, start_worker_now: Any
) -> None:
    # given: foreign apps sent every priority before any worker of this version ran (what an
    # earlier version left stranded), and keep sending while one runs
    sent = []
    for name, options in FOREIGN_OPTIONS.items():
        app = foreign(options)
        for priority in PRIORITIES:
            sent.append(f"{name} before p{priority}")
            _send(app, sent[-1], priority)
    stranded = [key for key in _lists(rt.redis) if KOMBU_DEFAULT_SEPARATOR in key or "|" in key]
    assert stranded, "the foreign apps wrote no list noti's workers do not read: the test proves nothing"
    # when
    with start_worker_now():
        for name, options in FOREIGN_OPTIONS.items():
            app = foreign(options)
            for priority in PRIORITIES:
                sent.append(f"{name} after p{priority}")
                _send(app, sent[-1], priority)
        # then: each one is delivered, once
        wait_until(lambda: len(sandbox_outbox(rt)) >= len(sent), timeout=30)
    delivered = sorted(entry["fields"]["text"] for entry in sandbox_outbox(rt))
    assert delivered == sorted(sent)
    assert not any(key for key, messages in _lists(rt.redis).items() if messages and key.startswith("noti."))


def test_adopted_messages_wait_at_noti_step_of_their_celery_priority(rt: Any, foreign: Any) -> None:
    # given: a host app with kombu's default options sends every priority, oldest first
    app = foreign({})
    for priority in PRIORITIES:
        _send(app, f"p{priority}", priority)
    _send(app, "sms p5", 5, queue=Channel.SMS.queue)
    # when
    moved = ForeignPriorities(rt.redis).adopt()
    # then: priority p waits in noti's list for step p (0 is the queue's own list, which
    # kombu's steps also give 1 and 2 and a message without a priority, sent as 0)
    lists = _lists(rt.redis)
    assert moved == 8  # 3, 4, 5, 6, 7, 8 and 9 on noti.intake; 5 on noti.sms
    assert [_text(m) for m in lists[INTAKE_QUEUE]] == ["pNone", "p0", "p1", "p2"]
    for step in range(3, 10):
        assert [_text(m) for m in lists[queue_key(INTAKE_QUEUE, step)]] == [f"p{step}"]
    assert [_text(m) for m in lists[queue_key(Channel.SMS.queue, 5)]] == ["sms p5"]
    assert not [key for key in lists if KOMBU_DEFAULT_SEPARATOR in key]


def test_a_separator_of_the_producers_own_is_found_in_kombus_binding_set(rt: Any, foreign: Any) -> None:
    # given: a host app with a separator of its own
    _send(foreign({"sep": "~", "priority_steps": list(range(10))}), "tilde p7", 7)
    adopter = ForeignPriorities(rt.redis)
    # when / then
    assert adopter.separators() == [KOMBU_DEFAULT_SEPARATOR, "~"]
    assert adopter.adopt() == 1
    [message] = _lists(rt.redis)[queue_key(INTAKE_QUEUE, 7)]
    assert _text(message) == "tilde p7"


def test_adoption_keeps_order_bytes_and_every_message_of_a_large_backlog(rt: Any) -> None:
    # given: a stranded backlog larger than one script call moves, and messages that are not
    # kombu envelopes (they keep the step their list names)
    source = f"{INTAKE_QUEUE}{KOMBU_DEFAULT_SEPARATOR}6"
    backlog = [json.dumps({"properties": {"priority": 6}, "n": n}) for n in range(ADOPT_BATCH * 2 + 5)]
    odd = ["not json", json.dumps({"properties": {"priority": "high"}}), json.dumps([1, 2])]
    rt.redis.lpush(source, *backlog, *odd)
    # when
    moved = ForeignPriorities(rt.redis).adopt()
    # then: every message, byte for byte, oldest first, nothing left behind
    assert moved == len(backlog) + len(odd)
    assert rt.redis.llen(source) == 0
    adopted = rt.redis.lrange(queue_key(INTAKE_QUEUE, 6), 0, -1)[::-1]
    assert adopted == backlog + odd


@pytest.mark.parametrize(
    ("priority", "step"),
    [(7, 7), (0, 0), (-3, 0), (42, 9), (8.9, 8), ("5", 5), (None, 3), ("NaN", 3), ("x", 3)],
)
def test_the_step_follows_the_message_priority_clamped_like_kombu(
    rt: Any, priority: object, step: int
) -> None:
    # given: a message on the step-3 list of kombu's default separator
    raw = json.dumps({"properties": {"priority": priority}})
    rt.redis.lpush(f"{Channel.EMAIL.queue}{KOMBU_DEFAULT_SEPARATOR}3", raw)
    # when
    ForeignPriorities(rt.redis).adopt()
    # then
    assert rt.redis.lrange(queue_key(Channel.EMAIL.queue, step), 0, -1) == [raw]


@pytest.mark.parametrize(
    "member",
    [
        b"noti.intake::noti.intake",  # noti's own separator
        b"noti.intakenoti.intake",  # no separator
        b"noti.intake|x|noti.intake",  # a pattern: not the shape Celery declares
        b"other|&|other",
        b"noti.intake|",
        b"\xff\xfe",
    ],
)
def test_binding_members_that_name_no_foreign_separator_are_ignored(rt: Any, member: bytes) -> None:
    rt.redis.sadd(f"_kombu.binding.{INTAKE_QUEUE}", member)
    assert ForeignPriorities(rt.redis).separators() == [KOMBU_DEFAULT_SEPARATOR]


def test_a_noti_worker_adopts_without_anyone_calling_it(rt: Any, foreign: Any, worker: Any) -> None:
    # given: a running worker; when: a host app with kombu's defaults sends at priority 9
    _send(foreign({}), "late p9", 9)
    # then: the pump's worker moves it within its interval and it is delivered
    wait_until(lambda: [e["fields"]["text"] for e in sandbox_outbox(rt)] == ["late p9"], timeout=15)
