"""The number pool in use: a provider's sender numbers, and ``noti pool`` on the command line."""

from __future__ import annotations

import json
from typing import Any

import click
import pytest

import noti
from noti.core.record import Status
from noti.errors import InvalidConfig
from noti.numpool import NumberPool, NumberState
from tests.clirunner import cli_runner
from tests.conftest import ADMIN, sandbox_outbox, wait_until

PHONE = "+8613912345678"
OTHER_PHONE = "+8613912345679"
SENDERS = ["+8610690001", "+8610690002"]
IU = NumberState.IDLE_UP


def pool_of(rt: Any, name: str = "P", numbers: list[str] = SENDERS, *, up: bool = True) -> NumberPool:
    pool = NumberPool(name, client=rt.redis, keys=rt.keys)
    for number in numbers:
        pool.add(number)
        if up:
            pool.register(number)
    return pool


# --- a provider with sender_pool ----------------------------------------------------------------


def test_each_send_takes_a_sender_from_the_pool_and_gives_it_back(configure: Any) -> None:
    # given a sandbox provider drawing senders from pool P, which has two free numbers
    rt = configure(providers={"pooled": {"kind": "sandbox", "sender_pool": "P"}})
    pool = pool_of(rt)
    ids = [noti.notify_sms(PHONE, f"m{i}", provider="pooled", user=ADMIN) for i in range(5)]

    # when the records are sent
    results = noti.send(user=ADMIN)

    # then each went out with a sender from the pool, least recently used first
    assert [r.mark for r in results] == ["OK"] * 5
    outbox = sandbox_outbox(rt, "pooled")
    # (records made in one millisecond go out in no set order: their ids' random parts decide)
    assert sorted(e["id"] for e in outbox) == sorted(ids)
    assert [e["sender"] for e in outbox] == [SENDERS[0], SENDERS[1], SENDERS[0], SENDERS[1], SENDERS[0]]
    # and every number is idle again
    assert pool.numbers() == dict.fromkeys(SENDERS, IU)


def test_no_free_sender_leaves_the_record_waiting_without_counting_an_attempt(configure: Any) -> None:
    # given a pool whose only number is not registered
    rt = configure(providers={"pooled": {"kind": "sandbox", "sender_pool": "P", "sender_wait_s": 0.2}})
    pool = pool_of(rt, numbers=SENDERS[:1], up=False)
    record_id = noti.notify_sms(PHONE, "later", provider="pooled", user=ADMIN)

    # when it is sent
    [result] = noti.send(record_id, user=ADMIN)

    # then it waits (flow limit), its attempts are unchanged and nothing was sent
    assert result.mark == "KO"
    record = rt.store.get(record_id)
    assert record.status is Status.WAITING and record.retry == 0
    assert record.errmsg.startswith("e.noti.delivery.ratelimited: pool P: no number is idle and up")
    assert sandbox_outbox(rt, "pooled") == []
    assert pool.numbers() == {SENDERS[0]: NumberState.IDLE_DOWN}

    # and once a number is up, the record goes out on a later try, still at attempt 1
    pool.register(SENDERS[0])
    wait_until(lambda: [r.mark for r in noti.send(record_id, user=ADMIN)] == ["OK"], timeout=10, interval=0.1)
    record = rt.store.get(record_id)
    assert record.status is Status.DONE and record.retry == 0
    [sent] = sandbox_outbox(rt, "pooled")
    assert sent["sender"] == SENDERS[0] and sent["attempt"] == 1
    assert pool.state(SENDERS[0]) is IU


def test_a_failed_send_gives_its_sender_back_too(configure: Any) -> None:
    rt = configure(providers={"down": {"kind": "sandbox", "sender_pool": "P", "fail": "always"}})
    pool = pool_of(rt)
    record_id = noti.notify_sms(PHONE, "nope", provider="down", user=ADMIN)
    [result] = noti.send(record_id, user=ADMIN)
    assert result.mark == "KO" and rt.store.get(record_id).retry == 1
    assert pool.numbers() == dict.fromkeys(SENDERS, IU)


def test_a_sticky_sender_keeps_a_recipient_on_one_number(configure: Any) -> None:
    rt = configure(providers={"sticky": {"kind": "sandbox", "sender_pool": "P", "sender_sticky_s": 60}})
    pool = pool_of(rt)
    for i in range(3):
        noti.notify_sms(PHONE, f"a{i}", provider="sticky", user=ADMIN)
        noti.notify_sms(OTHER_PHONE, f"b{i}", provider="sticky", user=ADMIN)
    assert [r.mark for r in noti.send(user=ADMIN)] == ["OK"] * 6
    by_target: dict[str, set[str]] = {}
    for entry in sandbox_outbox(rt, "sticky"):
        by_target.setdefault(entry["target"], set()).add(entry["sender"])
    assert [len(senders) for senders in by_target.values()] == [1, 1]
    assert by_target[PHONE] != by_target[OTHER_PHONE]
    assert pool.numbers() == dict.fromkeys(SENDERS, IU)


def test_a_bad_pool_name_is_a_configuration_error(configure: Any) -> None:
    configure(providers={"bad": {"kind": "sandbox", "sender_pool": "no spaces"}})
    with pytest.raises(InvalidConfig, match="sender_pool"):
        noti.notify_sms(PHONE, "x", provider="bad", user=ADMIN)


# --- noti pool NAME … ---------------------------------------------------------------------------


def run(*args: str) -> Any:
    return cli_runner().invoke(_entry, list(args), catch_exceptions=False)


@click.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.pass_context
def _entry(ctx: click.Context) -> None:
    from noti.cli import main

    main(list(ctx.args))


def test_the_pool_commands_move_numbers_and_show_them(rt: Any) -> None:
    added = run("pool", "P", "add", "1001", "1002", "1003")
    assert added.exit_code == 0, added.output
    assert added.stdout.splitlines() == [
        "1001  add  nodata -> idle+down",
        "1002  add  nodata -> idle+down",
        "1003  add  nodata -> idle+down",
    ]
    assert run("pool", "P", "reg", "1002", "1001").exit_code == 0
    called = run("pool", "P", "call")
    assert called.exit_code == 0 and called.stdout == "1002\n"
    assert run("pool", "P", "unreg", "1002").stdout == "1002  unreg  busy+up -> busy+down\n"
    assert run("pool", "P", "add", "1001").stdout == "1001  add  idle+up (unchanged)\n"

    shown = run("pool", "P", "show")
    assert shown.exit_code == 0
    assert shown.stdout.splitlines() == [
        "owner: alice",
        "NUMBER  STATE",
        "1001    idle+up",
        "1002    busy+down",
        "1003    idle+down",
        "free, next first: 1001",
        "idle+up 1  idle+down 1  busy+up 0  busy+down 1  total 3",
    ]
    as_json = json.loads(run("pool", "P", "show", "-json").stdout)
    assert as_json == {
        "pool": "P",
        "owner": "alice",
        "numbers": {"1001": "idle+up", "1002": "busy+down", "1003": "idle+down"},
        "free": ["1001"],
        "counts": {"idle+up": 1, "idle+down": 1, "busy+up": 0, "busy+down": 1},
    }
    assert run("pool", "P", "hangup", "1002").stdout == "1002  hangup  busy+down -> idle+down\n"
    assert run("pool", "P", "del", "1001", "1002", "1003", "-Q").stdout == ""
    assert NumberPool("P", client=rt.redis, keys=rt.keys).numbers() == {}


def test_refused_events_print_the_code_and_exit_1(rt: Any) -> None:
    pool_of(rt, numbers=["1001"])
    refused = run("pool", "P", "hangup", "1001")
    assert refused.exit_code == 1
    assert refused.stderr == (
        "e.noti.pool.refused: pool P: hangup refused for 1001 in state idle+up: the number is not in a call\n"
    )
    # with several numbers, the others are still done and every refusal is reported
    mixed = run("pool", "P", "reg", "1001", "9998", "9999")
    assert mixed.exit_code == 1
    assert mixed.stdout == "1001  reg  idle+up (unchanged)\n"
    assert mixed.stderr.splitlines() == [
        "e.noti.pool.refused: pool P: reg refused for 9998 in state nodata: the number is not in the pool",
        "e.noti.pool.refused: pool P: reg refused for 9999 in state nodata: the number is not in the pool",
        "e.noti.pool.refused: reg refused for 2 of 3 numbers",
    ]
    assert run("pool", "P", "call").exit_code == 0
    empty = run("pool", "P", "call")
    assert empty.exit_code == 1 and empty.stderr.startswith("e.noti.pool.empty: ")
    bad = run("pool", "no{tag}", "show")
    assert bad.exit_code == 1 and bad.stderr.startswith("e.noti.pool.badname: ")
    usage = run("pool", "P", "add")
    assert usage.exit_code == 2
