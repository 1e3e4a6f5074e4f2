"""The sender-number pool: seed 003's state table, cell by cell, on Redis and on Redis Cluster.

The table below is transcribed from the seed independently of ``numpool.lua``; a Python
model built on it predicts random event sequences (hypothesis), and 20 threads check that
no number is ever held twice.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis.cluster import RedisCluster, key_slot

from noti.core.keys import Keys
from noti.errors import InvalidConfig, InvalidInput, NoFreeNumber, PermissionDenied, TransitionRefused
from noti.numpool import Event, NumberPool, NumberState, PoolClient, PoolStats, Transition
from tests.cluster import local_cluster
from tests.conftest import ADMIN, ALICE, BOB, MEMBER

N = NumberState.NODATA
IU = NumberState.IDLE_UP
ID = NumberState.IDLE_DOWN
BU = NumberState.BUSY_UP
BD = NumberState.BUSY_DOWN

#: Seed 003, cell by cell: (state, event) -> (next state, success).
SEED_TABLE: dict[tuple[NumberState, str], tuple[NumberState, bool]] = {
    (N, "add"): (ID, True),
    (N, "del"): (N, True),
    (N, "reg"): (N, False),
    (N, "unreg"): (N, False),
    (N, "call"): (N, False),
    (N, "hangup"): (N, False),
    (IU, "add"): (IU, True),
    (IU, "del"): (N, True),
    (IU, "reg"): (IU, True),
    (IU, "unreg"): (ID, True),
    (IU, "call"): (BU, True),
    (IU, "hangup"): (IU, False),
    (ID, "add"): (ID, True),
    (ID, "del"): (N, True),
    (ID, "reg"): (IU, True),
    (ID, "unreg"): (ID, True),
    (ID, "call"): (ID, False),
    (ID, "hangup"): (ID, False),
    (BU, "add"): (BU, True),
    (BU, "del"): (N, True),
    (BU, "reg"): (BU, True),
    (BU, "unreg"): (BD, True),
    (BU, "call"): (BU, False),
    (BU, "hangup"): (IU, True),
    (BD, "add"): (BD, True),
    (BD, "del"): (N, True),
    (BD, "reg"): (BU, True),
    (BD, "unreg"): (BD, True),
    (BD, "call"): (BD, False),
    (BD, "hangup"): (ID, True),
}

#: Why each refused cell is refused.
REFUSAL = {
    (N, "reg"): "unknown",
    (N, "unreg"): "unknown",
    (N, "call"): "unknown",
    (N, "hangup"): "unknown",
    (IU, "hangup"): "idle",
    (ID, "call"): "down",
    (ID, "hangup"): "idle",
    (BU, "call"): "busy",
    (BD, "call"): "busy",
}

#: Events that bring a new number into each state.
PATH = {
    N: [],
    ID: ["add"],
    IU: ["add", "reg"],
    BU: ["add", "reg", "call"],
    BD: ["add", "reg", "call", "unreg"],
}

KEYS = Keys("noti:")


def test_the_transcribed_table_has_all_30_cells() -> None:
    assert len(SEED_TABLE) == 30
    assert {s for s, _ in SEED_TABLE} == set(NumberState)
    assert {e for _, e in SEED_TABLE} == {e.value for e in Event}
    assert {cell for cell, (_, ok) in SEED_TABLE.items() if not ok} == set(REFUSAL)


# --- backends ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster_client() -> Iterator[RedisCluster]:
    """A RedisCluster client on three local masters started for this module."""
    with local_cluster(3) as ports:
        client = RedisCluster(host="127.0.0.1", port=ports[0], decode_responses=True)
        try:
            yield client
        finally:
            client.close()


@pytest.fixture(params=["redis", pytest.param("cluster", marks=pytest.mark.slow)])
def client(request: pytest.FixtureRequest, rt: Any) -> PoolClient:
    """The same tests on one Redis (the flushed test database) and on a Redis Cluster."""
    if request.param == "redis":
        return rt.redis  # type: ignore[no-any-return]
    cluster: RedisCluster = request.getfixturevalue("cluster_client")
    cluster.flushall()
    return cluster


def new_pool(client: PoolClient) -> NumberPool:
    return NumberPool(f"p{uuid.uuid4().hex[:10]}", client=client, keys=KEYS)


def raw(client: PoolClient, pool: NumberPool) -> tuple[Any, Any, Any]:
    """Everything the pool keeps in Redis, for "nothing changed" checks."""
    return (
        client.hgetall(KEYS.numpool(pool.name, "numstate")),
        client.lrange(KEYS.numpool(pool.name, "idle:up"), 0, -1),
        client.zrange(KEYS.numpool(pool.name, "leases"), 0, -1, withscores=True),
    )


def assert_consistent(client: PoolClient, pool: NumberPool) -> None:
    """The free set holds exactly the numbers that are idle and up."""
    states = pool.numbers()
    assert NumberState.NODATA not in states.values()
    assert set(pool.free_numbers()) == {n for n, s in states.items() if s is IU}


def put_in(pool: NumberPool, number: str, state: NumberState) -> None:
    for event in PATH[state]:
        pool.fire(event, number)
    assert pool.state(number) is state


# --- the table, cell by cell ------------------------------------------------------------------


@pytest.mark.parametrize(("state", "event"), sorted(SEED_TABLE), ids=lambda v: str(v))
def test_each_cell_of_the_seed_table(client: PoolClient, state: NumberState, event: str) -> None:
    # given a number in `state`, next to another free number the event must not touch
    pool = new_pool(client)
    put_in(pool, "other", IU)
    put_in(pool, "1001", state)
    before = raw(client, pool)
    expected, ok = SEED_TABLE[(state, event)]

    # when the event is fired for that number
    if ok:
        transition = pool.fire(event, "1001")
        # then the table's next state is reached and reported
        assert transition == Transition(pool.name, "1001", Event(event), state, expected)
        if expected is state:  # "return success": nothing at all changes
            assert raw(client, pool) == before
    else:
        with pytest.raises(TransitionRefused) as info:
            pool.fire(event, "1001")
        # then the refusal names the cell, and nothing changed
        error = info.value
        assert (error.code, error.pool, error.number, error.event, error.state, error.reason) == (
            "e.noti.pool.refused",
            pool.name,
            "1001",
            event,
            str(state),
            REFUSAL[(state, event)],
        )
        assert raw(client, pool) == before
    assert pool.state("1001") is expected
    assert pool.state("other") is IU
    assert_consistent(client, pool)


@pytest.mark.parametrize("state", list(NumberState), ids=str)
def test_call_without_a_number_takes_only_an_idle_registered_one(
    client: PoolClient, state: NumberState
) -> None:
    pool = new_pool(client)
    put_in(pool, "1001", state)
    if state is IU:
        assert pool.call() == Transition(pool.name, "1001", Event.CALL, IU, BU)
    else:
        before = raw(client, pool)
        with pytest.raises(NoFreeNumber) as info:
            pool.call()
        assert info.value.code == "e.noti.pool.empty" and info.value.pool == pool.name
        assert raw(client, pool) == before


def test_call_takes_the_number_free_the_longest(client: PoolClient) -> None:
    # given numbers that became free in the order 3, 1, 2 (reg order, then 1 used and back)
    pool = new_pool(client)
    for number in ("3", "1", "2"):
        pool.add(number)
    for number in ("1", "3", "2"):
        pool.register(number)
    pool.call("1")
    pool.hangup("1")
    pool.register("3")  # "return success" on idle+up: keeps its place
    assert pool.free_numbers() == ["3", "2", "1"]
    # when three calls are made, then they get the numbers least recently used first
    assert [pool.call().number for _ in range(3)] == ["3", "2", "1"]
    with pytest.raises(NoFreeNumber):
        pool.call()


# --- random sequences against a model of the table --------------------------------------------


class Model:
    """The seed's table in Python, with the free numbers in the order they became free."""

    def __init__(self) -> None:
        self.states: dict[str, NumberState] = {}
        self.free: list[str] = []

    def fire(self, event: Event, number: str | None) -> tuple[str, NumberState, NumberState, bool] | None:
        """(number, before, after, accepted), or None when call finds no free number."""
        if number is None:
            if not self.free:
                return None
            number = self.free[0]
        before = self.states.get(number, N)
        after, ok = SEED_TABLE[(before, event.value)]
        if not ok:
            return number, before, before, False
        if after is N:
            self.states.pop(number, None)
        else:
            self.states[number] = after
        if before is not IU and after is IU:
            self.free.append(number)
        elif before is IU and after is not IU:
            self.free.remove(number)
        return number, before, after, True


NUMBERS = ["1", "2", "3"]
#: Where each number starts (reached by the events of PATH), so that every cell is tried
#: often, not only those a walk from "no data" happens to reach.
STARTS = st.lists(st.sampled_from(list(NumberState)), min_size=len(NUMBERS), max_size=len(NUMBERS))
STEPS = st.lists(
    st.one_of(
        st.tuples(st.just(Event.CALL), st.none()),
        st.tuples(st.sampled_from(list(Event)), st.sampled_from(NUMBERS)),
    ),
    max_size=50,
)


@settings(
    max_examples=200,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(starts=STARTS, steps=STEPS)
def test_random_event_sequences_follow_the_model(
    client: PoolClient, starts: list[NumberState], steps: list[tuple[Event, str | None]]
) -> None:
    pool = new_pool(client)
    model = Model()
    setup = [
        (Event(event), number) for number, state in zip(NUMBERS, starts, strict=True) for event in PATH[state]
    ]
    for event, number in [*setup, *steps]:
        expected = model.fire(event, number)
        if expected is None:
            with pytest.raises(NoFreeNumber):
                pool.call()
            continue
        got_number, before, after, ok = expected
        if ok:
            result = pool.call() if number is None else pool.fire(event, number)
            assert result == Transition(pool.name, got_number, event, before, after)
        else:
            with pytest.raises(TransitionRefused) as info:
                pool.fire(event, got_number)
            assert (info.value.number, info.value.state) == (got_number, str(before))
    assert pool.numbers() == dict(sorted(model.states.items()))
    assert pool.free_numbers() == model.free
    assert pool.stats() == PoolStats.of(model.states.values())


# --- concurrency ------------------------------------------------------------------------------


def test_twenty_threads_never_hold_a_number_twice_and_lose_none(rt: Any) -> None:
    # given five free numbers
    pool = NumberPool("threads", client=rt.redis, keys=rt.keys)
    numbers = [f"10{i}" for i in range(5)]
    for number in numbers:
        pool.add(number)
        pool.register(number)
    holders: dict[str, int] = {}
    lock = threading.Lock()
    violations: list[str] = []
    uses = dict.fromkeys(numbers, 0)
    errors: list[BaseException] = []
    stop_at = time.monotonic() + 3.0

    def worker(me: int) -> None:
        rng = random.Random(me)
        try:
            while time.monotonic() < stop_at:
                try:
                    with pool.calling() as number:
                        with lock:
                            if number in holders:
                                violations.append(f"{number} taken by {me} while {holders[number]} holds it")
                            holders[number] = me
                            uses[number] += 1
                        time.sleep(rng.random() / 1000)
                        with lock:  # released here, before the hang-up makes it free again
                            if holders.pop(number, None) != me:
                                violations.append(f"{number} lost by {me}")
                except NoFreeNumber:
                    time.sleep(rng.random() / 2000)
        except BaseException as exc:  # surfaced by the main thread
            errors.append(exc)

    # when 20 threads call and hang up for 3 seconds
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    # then no number was ever held twice, and all five are idle and up again
    assert not errors, errors
    assert not violations, violations[:5]
    assert pool.numbers() == dict.fromkeys(numbers, IU)
    assert sorted(pool.free_numbers()) == numbers
    assert all(count > 0 for count in uses.values()), uses


# --- script loading ---------------------------------------------------------------------------


def test_the_script_is_reloaded_after_script_flush(client: PoolClient) -> None:
    # given a pool whose script has run, then a SCRIPT FLUSH (on every master of a cluster)
    pool = new_pool(client)
    pool.add("1001")
    sha = pool._script.lua.sha
    assert client.script_exists(sha) == [True]
    client.script_flush()
    assert client.script_exists(sha) == [False]
    # when the next event is fired, then the script is loaded again and runs
    assert pool.register("1001").state is IU
    assert client.script_exists(sha) == [True]


@pytest.mark.slow
def test_all_keys_of_a_pool_share_one_cluster_slot_and_pools_spread_over_masters(
    cluster_client: RedisCluster,
) -> None:
    names = [f"pool{i}" for i in range(12)]
    for name in names:
        parts = ["numstate", "idle:up", "seq", "sticky:abc"]
        assert len({key_slot(KEYS.numpool(name, part).encode()) for part in parts}) == 1
    nodes = {cluster_client.get_node_from_key(KEYS.numpool(name, "numstate")).name for name in names}
    assert len(nodes) >= 2
    for name in names:  # every master runs the script
        pool = NumberPool(name, client=cluster_client, keys=KEYS)
        pool.add("1")
        pool.register("1")
        assert pool.call().number == "1"


# --- sticky senders, the context manager, input checks ----------------------------------------


def test_a_sticky_recipient_keeps_its_number_while_it_stays_up(rt: Any) -> None:
    pool = NumberPool("sticky", client=rt.redis, keys=rt.keys)
    for number in ("1", "2", "3"):
        pool.add(number)
        pool.register(number)
    first = pool.call(sticky_to="+8613900000001", sticky_ttl_s=60).number
    pool.hangup(first)
    # LRU alone would now pick another number; the recipient gets its own back
    assert pool.call(sticky_to="+8613900000001", sticky_ttl_s=60).number == first
    # while it is in a call, the recipient waits instead of switching
    with pytest.raises(NoFreeNumber, match="sticky sender number"):
        pool.call(sticky_to="+8613900000001", sticky_ttl_s=60)
    # another recipient is not held back
    other = pool.call(sticky_to="+8613900000002", sticky_ttl_s=60).number
    assert other != first
    pool.hangup(first)
    pool.hangup(other)
    # once its number is down, the recipient is moved to another one and stays there
    pool.unregister(first)
    moved = pool.call(sticky_to="+8613900000001", sticky_ttl_s=60).number
    assert moved != first
    pool.hangup(moved)
    assert pool.call(sticky_to="+8613900000001", sticky_ttl_s=60).number == moved
    # each binding has a TTL and does not name its recipient
    bindings = rt.redis.keys(rt.keys.numpool("sticky", "sticky:*"))
    assert len(bindings) == 2
    for key in bindings:
        assert "139000000" not in key
        assert 0 < rt.redis.pttl(key) <= 60_000


def test_calling_always_hangs_up(rt: Any) -> None:
    pool = NumberPool("ctx", client=rt.redis, keys=rt.keys)
    pool.add("1")
    pool.register("1")
    with pytest.raises(RuntimeError), pool.calling() as number:
        assert pool.state(number) is BU
        raise RuntimeError("the send failed")
    assert pool.state("1") is IU
    # a number deleted during the call: the hang-up is refused, logged, not raised
    with pool.calling("1"):
        pool.delete("1")
    assert pool.numbers() == {}


def test_bad_input_is_refused_before_redis_is_touched(rt: Any) -> None:
    for name in ("", "a b", "{x}", "x" * 65, "-x", "p\n"):
        with pytest.raises(InvalidInput) as info:
            NumberPool(name, client=rt.redis, keys=rt.keys)
        assert info.value.code == "e.noti.pool.badname"
    pool = NumberPool("checks", client=rt.redis, keys=rt.keys)
    for number in ("", "1 2", "x" * 65, "a\n"):
        with pytest.raises(InvalidInput) as info:
            pool.add(number)
        assert info.value.code == "e.noti.pool.badnumber"
    with pytest.raises(InvalidInput) as info:
        pool.fire("ring", "1")
    assert info.value.code == "e.noti.pool.badevent"
    with pytest.raises(InvalidInput) as info:
        pool.call("1", sticky_to="+8613900000001")
    assert info.value.code == "e.noti.pool.badsticky"
    with pytest.raises(InvalidConfig):
        NumberPool("p", client=rt.redis, keys=Keys("noti{x}:"))
    assert rt.redis.keys("*numpool*") == []


def test_stats_count_numbers_per_state(rt: Any) -> None:
    pool = NumberPool("stats", client=rt.redis, keys=rt.keys)
    for state, number in zip([IU, IU, ID, BU, BD], "12345", strict=True):
        put_in(pool, number, state)
    stats = pool.stats()
    assert stats.as_dict() == {"idle+up": 2, "idle+down": 1, "busy+up": 1, "busy+down": 1}
    assert (stats.total, stats.free, stats[N]) == (5, 2, 0)


# --- owners (the whole matrix of who may do what is tests/test_permissions.py) -----------------


def test_a_pool_is_its_creators_and_stays_so_once_emptied(rt: Any) -> None:
    # given bob's pool, emptied by bob
    bobs = NumberPool("owned", user=BOB, client=rt.redis, keys=rt.keys)
    bobs.add("1")
    bobs.delete("1")
    assert (bobs.owner(), bobs.numbers()) == (BOB, {})
    # then alice can neither take the name over nor read it, and nothing changes
    before = raw(rt.redis, bobs), rt.redis.get(rt.keys.numpool("owned", "owner"))
    alices = NumberPool("owned", user=ALICE, client=rt.redis, keys=rt.keys)
    for attempt, verb in ((lambda: alices.add("2"), "add"), (alices.numbers, "show"), (alices.call, "call")):
        with pytest.raises(PermissionDenied) as info:
            attempt()
        assert info.value.code == f"e.noti.pool.{verb}.nopvg"
        assert "belongs to bob" in info.value.message
    assert (raw(rt.redis, bobs), rt.redis.get(rt.keys.numpool("owned", "owner"))) == before
    # a root member may, without becoming its owner
    NumberPool("owned", user=MEMBER, client=rt.redis, keys=rt.keys).add("3")
    assert bobs.owner() == BOB and bobs.numbers() == {"3": ID}


def test_chown_is_for_root_checks_the_name_and_can_make_a_pool(rt: Any) -> None:
    pool = NumberPool("given", user=ADMIN, client=rt.redis, keys=rt.keys)
    for bad in ("", "a b", "bob\n", "x:y", 7):
        with pytest.raises(InvalidInput) as info:
            pool.chown(bad)  # type: ignore[arg-type]
        assert info.value.code == "e.cmd.noti.baduser"
    assert rt.redis.keys("*numpool*") == []
    # an operator makes an empty pool for alice, who may then use it
    assert pool.chown(ALICE) is None
    alices = NumberPool("given", user=ALICE, client=rt.redis, keys=rt.keys)
    alices.add("1")
    with pytest.raises(PermissionDenied) as info:
        alices.chown(BOB)  # its owner may not give it away: root only
    assert info.value.code == "e.noti.pool.chown.nopvg"
    assert alices.owner() == ALICE


def test_a_pool_made_before_owners_is_roots_until_chown_and_providers_still_use_it(rt: Any) -> None:
    # given a pool written before pools had owners (no owner key)
    legacy = NumberPool.trusted("legacy", client=rt.redis, keys=rt.keys)
    legacy.add("1")
    legacy.register("1")
    assert legacy.owner() is None
    alices = NumberPool("legacy", user=ALICE, client=rt.redis, keys=rt.keys)
    with pytest.raises(PermissionDenied, match="no owner") as info:
        alices.call()
    assert info.value.code == "e.noti.pool.call.nopvg"
    # a provider (trusted: the operator named the pool) still takes senders from it
    with legacy.calling() as number:
        assert number == "1"
    # once root gives it to alice, it is hers
    assert NumberPool("legacy", user=MEMBER, client=rt.redis, keys=rt.keys).chown(ALICE) is None
    assert alices.call().number == "1"
    assert legacy.state("1") is BU
