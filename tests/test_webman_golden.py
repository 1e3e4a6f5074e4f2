"""Golden tests: every scenario of the webman vectors (``tests/webman_fixtures/vectors.json``)
replayed through the Python bridge on a real Redis, comparing the Redis commands (recorded
with MONITOR) and the resulting state with what the real PHP plugin did.

Volatile values (stream ids, automatic identifiers, lock tokens, consumer names) are compared
by position, not by value; the clock is pinned to the capture's ``time()``. Where the bridge
differs on purpose, the step says so in :data:`BY_DESIGN` and the test checks our behaviour.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from importlib import resources
from typing import Any

import pytest
import redis

from noti.bridge.webman.connection import connect
from noti.bridge.webman.phpjson import to_int
from noti.errors import MalformedMessage
from tests.webman_fixtures.monitor import Monitor
from tests.webman_fixtures.replay import Replay, captured_state, dump_state
from tests.webman_fixtures.vectors import Normaliser, captured_commands, php_value, scenario, scenarios

BRIDGE_DB = 3

#: Steps where the bridge does something else on purpose, and what it does instead.
BY_DESIGN = {
    ("push_scalar_coercion", 0): "a float is refused (PHP truncates it); pushing int(x) writes PHP's bytes",
    ("push_scalar_coercion", 1): "a float is refused; pushing int(x) writes PHP's bytes",
    ("push_scalar_coercion", 2): "a bool is refused (PHP writes 1); pushing int(x) writes PHP's bytes",
    ("push_scalar_coercion", 3): "a bool is refused (PHP writes 0); pushing int(x) writes PHP's bytes",
    ("push_invalid_utf8", 0): "bytes that are not UTF-8 are refused (PHP writes an empty message)",
    ("consume_foreign_encodings", 24): "a poison entry is dead-lettered, acked and deleted (PHP: stuck)",
    ("pending_poison_message", 2): "a poison entry is dead-lettered, acked and deleted (PHP leaves it stuck)",
    ("pending_poison_message", 4): "nothing is left for the pending check (PHP's check dies on it)",
    ("delay_zero_and_exists_quirk", 2): "has_delayed() is true for a task due at once (PHP says false)",
    ("remove_delayed", 4): "remove_delayed() says whether a task existed (PHP always says true)",
    ("remove_delayed", 5): "remove_delayed_many() counts the tasks that existed (PHP returns raw replies)",
    ("consumer_list", 7): "the pending count is exact (XPENDING summary); Last Active from XINFO STREAM",
}


@pytest.fixture
def bridge(redis_server: str) -> Iterator[redis.Redis]:
    client = connect(f"{redis_server}/{BRIDGE_DB}")
    client.flushdb()
    yield client
    client.flushdb()
    client.close()


def _check_result(
    name: str, step: dict[str, Any], result: Any, norm_php: Normaliser, norm_ours: Normaliser
) -> None:
    method = step["method"]
    if (name, step["step"]) in BY_DESIGN:
        return
    if step.get("exception"):
        assert isinstance(result, MalformedMessage), f"{name} step {step['step']}: PHP raised, we did not"
        return
    if isinstance(result, MalformedMessage):
        return
    expected = step.get("result")
    if method == "pushMessage":
        assert norm_ours.value(result) == norm_php.value(expected)
    elif method in ("pushMessages", "DelayedQueue::moveDueTasksToStream"):
        assert [norm_ours.value(r) for r in result] == [norm_php.value(r) for r in expected]
    elif method == "hasDelayedMessageExists" or method == "removeDelayedMessage":
        assert result is expected
    elif method == "hasDelayedMessagesExist":
        assert [None if e is False else int(e["$float"]) for e in expected] == result
    elif method == "CommandUtils::cleanQueueRedisData":
        assert result == expected
    elif method == "ConsumerListCommand::execute":
        rows = [[r[4], r[5], str(r[6])] for r in expected["rows"]]
        assert [[s.stream_length, s.delay_set_length, s.php_pending_cell] for s in result] == rows
    elif method == "QueueUtility::generate*":
        for names, want in zip(result, expected, strict=True):
            assert (names.queue, names.group, names.stream, names.delayed_set, names.delayed_hash) == (
                want["queueName"],
                want["groupName"],
                want["streamKey"],
                want["delayedTaskSetKey"],
                want["delayedDataHashKey"],
            )


@pytest.mark.parametrize("name", [s["name"] for s in scenarios()])
def test_scenario_replays_like_the_php_plugin(
    name: str, bridge: redis.Redis, redis_server: str, rt: Any
) -> None:
    # given: the scenario's consumers on an empty database, the mover script loaded
    data = scenario(name)
    replay = Replay(data, bridge, rt.dead_letters)
    bridge.script_load(resources.files("noti.bridge.webman").joinpath("move_due.lua").read_text())
    norm_php, norm_ours = Normaliser(), Normaliser()
    with Monitor(redis_server, BRIDGE_DB) as monitor:
        for step in data["steps"]:
            where = f"{name} step {step['step']} ({step.get('label')})"
            if step["kind"] == "redis_setup":  # ids it names are the capture's: use ours
                ours_by_placeholder = {v: k for k, v in norm_ours.ids.items()}
                args = [ours_by_placeholder.get(norm_php.ids.get(a, ""), a) for a in step["command"]]
                bridge.execute_command(*args)
                monitor.bridge_commands()
                continue
            if step["kind"] == "state":
                if name not in _STATE_DIFFERS:
                    assert dump_state(bridge, norm_ours) == captured_state(step["state"], norm_php), where
                monitor.bridge_commands()
                continue
            # when: the same call, the bridge's way
            consumed_before = sum(len(c.consumed) for c in replay.consumers.values())
            result = replay.call(step)
            ours = norm_ours.commands(monitor.bridge_commands())
            php = captured_commands(step, norm_php)
            # then: the same commands (or the documented difference)
            if (name, step["step"]) in BY_DESIGN:
                _check_by_design(name, step["step"], ours, php, result, replay, monitor, norm_ours)
            else:
                assert ours == php, where
            _check_result(name, step, result, norm_php, norm_ours)
            consumed = [rec for c in replay.consumers.values() for rec in c.consumed][consumed_before:]
            expected = [
                {"messageId": e["messageId"], "message": e["message"]} for e in step.get("consumed", [])
            ]
            assert [(norm_ours.value(c["messageId"]), c["message"]) for c in consumed] == [
                (norm_php.value(e["messageId"]), e["message"]) for e in expected
            ], where
    final = dump_state(bridge, norm_ours)
    if name not in _STATE_DIFFERS:
        assert final == captured_state(data["final_state"], norm_php)
    else:  # the poison entry or the unencodable message is not in the stream
        assert all(not item.get("entries") for item in final)
        assert all(g["pending"] == "0" for item in final for g in item.get("groups", []))


#: Scenarios whose final state differs because of a :data:`BY_DESIGN` step.
_STATE_DIFFERS = {"push_invalid_utf8", "consume_foreign_encodings", "pending_poison_message"}


def _check_by_design(
    name: str,
    number: int,
    ours: list[list[str]],
    php: list[list[str]],
    result: Any,
    replay: Replay,
    monitor: Monitor,
    norm: Normaliser,
) -> None:
    if name == "push_scalar_coercion":
        assert isinstance(result, MalformedMessage) and ours == []
        # a caller that passes the int PHP would have made gets PHP's bytes
        value = php_value(scenario(name)["steps"][number]["args"][0])
        replay.first.producer.push(to_int(value))
        assert norm.commands(monitor.bridge_commands()) == php
    elif name == "push_invalid_utf8":
        assert isinstance(result, MalformedMessage) and ours == [] and php[0][4] == ""
    elif name in ("consume_foreign_encodings", "pending_poison_message") and number != 4:
        assert ours[0] == php[0]  # the same XREADGROUP
        assert [c[0] for c in ours[1:]] == ["XACK", "XDEL"]
        letters = replay.first.dead_letters.entries()
        assert letters[0].error_class == "poison" and "bad_field_type" in letters[0].errmsg
        assert letters[0].payload and '"failCount":"abc"' in letters[0].payload
    elif name == "pending_poison_message":
        assert [c[0] for c in ours] == ["SET", "XPENDING", "GET", "DEL"]
    elif name == "delay_zero_and_exists_quirk":
        assert ours == php and result is True
    elif name == "remove_delayed":
        assert ours == php and result == (False if number == 4 else 1)
    elif name == "consumer_list":
        assert [c[0] for c in ours if c[0] in ("XLEN", "ZCARD")] == [c[0] for c in php if c[0] != "XPENDING"]


def test_the_mover_script_is_the_plugins_own() -> None:
    source = resources.files("noti.bridge.webman").joinpath("move_due.lua").read_bytes()
    assert hashlib.sha1(source).hexdigest() == "3fdc0ac5de8c8b5720f96c13a86ad7fe2f25fb1f"
    php = scenario("move_due_tasks")["steps"][4]["redis_commands"][0]["args"][1]
    assert source.decode() == php
