"""The pool shared with seed 003's own clients, pools of earlier noti versions, the pool's
settings, and the pool on a Redis Cluster reached from the CLI and a provider.

``tests/seed003/numpool.lua`` is a seed client's script written from the seed's text alone:
it and noti move the same number, through the seed's keys (``{numpool}:numstate`` JSON,
``{numpool}:idle:up`` LIST) and its calling convention (``EVALSHA sha 1 {numpool} event
[number]``)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from redis.cluster import RedisCluster

import noti
from noti.config import load_settings
from noti.errors import InvalidConfig, NoFreeNumber
from noti.numpool import NumberPool, NumberState
from noti.numpool.script import source
from tests.cluster import local_cluster
from tests.conftest import ADMIN, sandbox_outbox
from tests.test_numpool_use import run

SEED_SCRIPT = (Path(__file__).parent / "seed003" / "numpool.lua").read_text()
IU, ID, BU, BD = NumberState.IDLE_UP, NumberState.IDLE_DOWN, NumberState.BUSY_UP, NumberState.BUSY_DOWN


def seed_state(client: Any, number: str, base: str = "{numpool}") -> dict[str, Any] | None:
    raw = client.hget(f"{base}:numstate", number)
    return None if raw is None else json.loads(raw)


def test_a_seed_client_and_noti_move_one_number_through_its_states(configure: Any) -> None:
    # given noti told that pool "shared" is the seed's {numpool}, and a seed client's script
    rt = configure(numpool_keys={"shared": "{numpool}"})
    client = rt.redis
    sha = client.script_load(SEED_SCRIPT)

    def seed(event: str, *number: str) -> str:
        return str(client.evalsha(sha, 1, "{numpool}", event, *number))

    pool = NumberPool("shared", user=ADMIN)

    # the seed client adds the number; noti sees it idle and down
    assert seed("add", "1001") == "1"
    assert pool.state("1001") is ID
    # noti registers it; the seed client's call takes it from the shared free list
    assert pool.register("1001").state is IU
    assert client.lrange("{numpool}:idle:up", 0, -1) == ["1001"]
    assert seed("call") == "1001"
    assert pool.state("1001") is BU
    with pytest.raises(NoFreeNumber):
        pool.call()
    # noti unregisters it mid-call; the seed client hangs up
    assert pool.unregister("1001").state is BD
    assert seed("hangup", "1001") == "1"
    assert pool.state("1001") is ID
    # the seed client registers it; noti calls it (under a lease) and the seed client sees it busy
    assert seed("reg", "1001") == "1"
    assert pool.call(lease_s=60).number == "1001"
    state = seed_state(client, "1001")
    assert state is not None and (state["callstate"], state["regstate"]) == (1, 1)
    assert set(state) == {"callstate", "regstate", "lease"}  # the one field noti adds
    assert seed("call") == "0"
    # noti hangs up: the seed's own JSON and free list, without noti's field
    assert pool.hangup("1001").state is IU
    assert seed_state(client, "1001") == {"callstate": 0, "regstate": 1}
    assert client.lrange("{numpool}:idle:up", 0, -1) == ["1001"]
    assert client.zcard("{numpool}:leases") == 0
    # the seed client deletes it; noti sees it gone
    assert seed("del", "1001") == "1"
    assert pool.numbers() == {} and pool.free_numbers() == []


def test_nois_script_takes_the_seeds_calling_convention(rt: Any) -> None:
    # a client that knows nothing of noti loads noti's script and calls it as the seed says
    client = rt.redis
    sha = client.script_load(source())

    def call(event: str, *number: str) -> str:
        return str(client.evalsha(sha, 1, "{numpool}", event, *number))

    assert [call("add", "2001"), call("add", "2002"), call("reg", "2002"), call("reg", "2001")] == ["1"] * 4
    assert call("call") == "2002"  # free the longest
    assert call("call", "2002") == "0"  # busy: refused
    assert call("hangup", "2001") == "0"  # not in a call: refused
    assert call("call") == "2001"
    assert call("call") == "0"  # none free
    assert call("hangup", "2002") == "1"
    assert seed_state(client, "2002") == {"callstate": 0, "regstate": 1}
    assert seed_state(client, "2001") == {"callstate": 1, "regstate": 1}
    # the seed's own script agrees on the same keys
    seed_sha = client.script_load(SEED_SCRIPT)
    assert client.evalsha(seed_sha, 1, "{numpool}", "call") == "2002"
    assert client.evalsha(seed_sha, 1, "{numpool}", "hangup", "2001") == "1"
    assert client.lrange("{numpool}:idle:up", 0, -1) == ["2001"]


def test_a_pool_of_an_earlier_noti_is_migrated_to_the_seed_layout(rt: Any) -> None:
    # given a pool as noti stored it before: state strings, a ZSET of free numbers, a counter
    base = rt.keys.numpool_base("old")
    client = rt.redis
    legacy = {"1": "idle+up", "2": "busy+up", "3": "idle+down", "4": "busy+down"}
    client.hset(f"{base}:numstate", mapping=legacy)
    client.hset(f"{base}:numstate", "5", "idle+up")
    client.zadd(f"{base}:idle:up", {"5": 3, "1": 7})
    client.set(f"{base}:seq", 7)
    client.set(f"{base}:owner", "alice")
    pool = NumberPool("old", user=ADMIN)

    # when noti first touches it, it reads every state and the free order as they were
    assert pool.numbers() == {"1": IU, "2": BU, "3": ID, "4": BD, "5": IU}
    # and the pool is in the seed's layout now: JSON states, a LIST in the same order
    assert client.type(f"{base}:idle:up") == "list"
    assert client.lrange(f"{base}:idle:up", 0, -1) == ["5", "1"]
    assert seed_state(client, "4", base) == {"callstate": 1, "regstate": 0}
    assert client.exists(f"{base}:seq") == 0 and pool.owner() == "alice"
    # so a seed client can use it, next to noti
    seed_sha = client.script_load(SEED_SCRIPT)
    assert client.evalsha(seed_sha, 1, base, "call") == "5"
    assert pool.hangup("2").state is IU
    assert pool.free_numbers() == ["1", "2"]


def test_an_earlier_pool_that_never_had_a_free_number_is_read_as_it_is(rt: Any) -> None:
    base = rt.keys.numpool_base("older")
    rt.redis.hset(f"{base}:numstate", mapping={"1": "idle+down", "2": "idle+down"})
    pool = NumberPool("older", user=ADMIN)
    assert pool.numbers() == {"1": ID, "2": ID}
    assert pool.register("1").state is IU  # the changed number is rewritten as JSON
    assert seed_state(rt.redis, "1", base) == {"callstate": 0, "regstate": 1}
    assert rt.redis.hget(f"{base}:numstate", "2") == "idle+down"


# --- settings ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        {"numpool_keys": {"bad name": "{x}"}},
        {"numpool_keys": {"p": "no-tag"}},
        {"numpool_keys": {"p": "{a}{b}"}},
        {"numpool_keys": {"p": "{}"}},
        {"numpool_keys": {"p": "sp ace{x}"}},
        {"numpool_keys": {"p": "{x}", "q": "{x}"}},
        {"numpool_keys": {"p": 7}},
        {"numpool_keys": "{numpool}"},
        {"numpool_redis_url": "http://127.0.0.1:7000"},
        {"numpool_redis_url": "redis+cluster://"},
        {"numpool_redis_url": "redis+cluster://127.0.0.1"},
        {"numpool_redis_url": "redis+cluster://127.0.0.1:7000/0"},
        {"numpool_redis_url": "redis+cluster://127.0.0.1:99999"},
        {"numpool_redis_url": "redis+cluster://127.0.0.1:7000?db=1"},
        {"numpool_redis_url": "redis+cluster://u:s3cret@127.0.0.1:x"},
        {"numpool_redis_url": ""},
    ],
)
def test_bad_pool_settings_are_refused_with_a_code(bad: dict[str, Any]) -> None:
    with pytest.raises(InvalidConfig) as info:
        load_settings(**bad)
    assert info.value.code == "e.noti.config"
    assert next(iter(bad)).upper() in info.value.message.upper()
    assert "s3cret" not in info.value.message


# --- a Redis Cluster, from the CLI and a provider ------------------------------------------------


@pytest.fixture(scope="module")
def cluster_ports() -> Iterator[list[int]]:
    with local_cluster(3) as ports:
        yield ports


@pytest.mark.slow
def test_the_cli_and_a_provider_use_the_pool_on_a_redis_cluster(
    configure: Any, cluster_ports: list[int]
) -> None:
    # given the pools on a 3-master cluster (numpool_redis_url), the records on the test Redis
    url = "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in cluster_ports[:2])
    rt = configure(
        numpool_redis_url=url,
        providers={"pooled": {"kind": "sandbox", "sender_pool": "C"}},
    )
    cluster = RedisCluster(host="127.0.0.1", port=cluster_ports[2], decode_responses=True)
    cluster.flushall()

    # when the CLI adds and registers numbers
    assert run("pool", "C", "add", "+8610690001", "+8610690002").exit_code == 0
    assert run("pool", "C", "reg", "+8610690001", "+8610690002").exit_code == 0

    # then they are on the cluster, in one slot, not in the records' Redis
    base = rt.keys.numpool_base("C")
    assert cluster.hlen(f"{base}:numstate") == 2
    assert rt.redis.exists(f"{base}:numstate") == 0
    # and a provider sends with them, giving them back
    ids = []
    for i in range(3):  # a millisecond apart: ids sort by age to the millisecond, not within one
        ids.append(noti.notify_sms("+8613912345678", f"m{i}", provider="pooled", user=ADMIN))
        time.sleep(0.002)
    assert [r.mark for r in noti.send(user=ADMIN)] == ["OK"] * 3
    senders = [e["sender"] for e in sandbox_outbox(rt, "pooled")]
    assert senders == ["+8610690001", "+8610690002", "+8610690001"]
    assert [e["id"] for e in sandbox_outbox(rt, "pooled")] == ids
    shown = json.loads(run("pool", "C", "show", "-json").stdout)
    assert shown["numbers"] == {"+8610690001": "idle+up", "+8610690002": "idle+up"}
    assert shown["free"] == ["+8610690002", "+8610690001"]
    # and the API (a NumberPool of this runtime) reaches the same pool
    assert NumberPool("C", user=ADMIN).call().number == "+8610690002"
    cluster.close()
