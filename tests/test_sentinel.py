"""Redis through Sentinel (issue 19 point 2): noti's ``redis+sentinel://`` URL, clients that
follow a failover, and acknowledgements that wait for a replica (``NOTI_REDIS_WAIT_REPLICAS``).

Real processes: a primary, a replica and three sentinels on loopback (:mod:`tests.sentinel`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis

from noti.celery.beat import redbeat_config
from noti.celery.transport import kombu_broker, worker_transport
from noti.errors import InvalidConfig, StoreUnavailable
from noti.redisconn import CommandPipeline, ReplicaWait, SentinelUrl, connect, masked_url
from tests.sentinel import SentinelSet, sentinel_set

pytestmark = pytest.mark.slow


# --- the URL ------------------------------------------------------------------------------


def test_a_sentinel_url_names_the_sentinels_the_service_the_database_and_the_secrets() -> None:
    url = "redis+sentinel://app:s%40cret@10.0.0.1,10.0.0.2:26380/orders/3?sentinel_password=sp"
    parsed = SentinelUrl.parse(url)
    assert parsed == SentinelUrl(
        sentinels=(("10.0.0.1", 26379), ("10.0.0.2", 26380)),
        service="orders",
        db=3,
        username="app",
        password="s@cret",
        sentinel_password="sp",
    )
    assert parsed.public() == "redis+sentinel://app@10.0.0.1:26379,10.0.0.2:26380/orders/3"
    assert "s@cret" not in masked_url(url) and "sp" not in masked_url(url).split("?")[1]
    assert SentinelUrl.parse("redis://127.0.0.1:6379/0") is None


@pytest.mark.parametrize(
    "url",
    [
        "redis+sentinel:///mymaster",  # no sentinel
        "redis+sentinel://h:26379",  # no service
        "redis+sentinel://h:26379/",  # no service
        "redis+sentinel://h:port/mymaster",  # a port that is no number
        "redis+sentinel://h:26379/mymaster/db",  # a database that is no number
        "redis+sentinel://h:26379/mymaster/0/extra",
        "redis+sentinel://h:26379/mymaster?socket_timeout=1",  # an option noti does not take
    ],
)
def test_a_malformed_sentinel_url_is_refused_with_its_problem(url: str) -> None:
    with pytest.raises(InvalidConfig) as info:
        connect(url)
    assert info.value.code == "e.noti.config"


def test_celery_and_redbeat_get_their_own_forms_without_the_secrets_in_plain_settings() -> None:
    url = "redis+sentinel://:pw@10.0.0.1:1,10.0.0.2:2/mymaster/3?sentinel_password=sp"
    broker, options = kombu_broker(url)
    assert broker == "sentinel://:pw@10.0.0.1:1/3;sentinel://:pw@10.0.0.2:2/3"  # Celery masks broker_url
    assert options["master_name"] == "mymaster" and options["sentinel_kwargs"]["password"] == "sp"
    assert worker_transport(url) == "noti.celery.transport:BulkSentinelTransport"
    assert worker_transport("redis://h/0") == "noti.celery.transport:BulkTransport"
    beat = redbeat_config(url, key_prefix="noti:beat:")
    assert beat["redbeat_redis_url"] == "redis+sentinel://10.0.0.1:1,10.0.0.2:2/mymaster/3"
    assert beat["redbeat_redis_options"]["password"] == "pw"  # Celery masks keys naming a password
    assert beat["redbeat_redis_options"]["sentinel_password"] == "sp"
    assert kombu_broker("redis://:pw@h:1/0") == ("redis://:pw@h:1/0", {})


# --- a real set -----------------------------------------------------------------------------


@pytest.fixture
def sentinels() -> Iterator[SentinelSet]:
    with sentinel_set() as servers:
        yield servers


def _incr_until(client: redis.Redis, key: str, deadline_s: float) -> int:
    """INCR ``key`` until it works (the client finds the primary again); the value."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            return int(client.incr(key))
        except (redis.ConnectionError, redis.TimeoutError, redis.ReadOnlyError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_a_client_follows_the_primary_through_a_crash_of_it(sentinels: SentinelSet) -> None:
    client = connect(sentinels.url())
    with CommandPipeline(client) as pipeline:  # a write the replica acknowledged (WAIT)
        pipeline.send([("SET", "before", "1")])
        pipeline.results()
        ReplicaWait(replicas=1, timeout_ms=2000).confirm(pipeline, client)
    old = sentinels.primary_port()
    # when the primary dies, the sentinels promote the replica and the client finds it
    sentinels.kill(old)
    new = sentinels.wait_for_new_primary(old)
    assert _incr_until(client, "after", 30) == 1
    assert sentinels.data(new).get("after") == "1" and sentinels.data(new).get("before") == "1"


def test_a_write_a_replica_did_not_acknowledge_is_reported_and_the_next_one_finds_the_new_primary(
    sentinels: SentinelSet,
) -> None:
    client = connect(sentinels.url())
    wait = ReplicaWait(replicas=1, timeout_ms=500)
    with CommandPipeline(client) as pipeline:  # acknowledged by the replica: confirmed
        pipeline.send([("SET", "k", "1")])
        pipeline.results()
        wait.confirm(pipeline, client)
    # given a switch the old primary does not know of yet (it takes writes for ~10 s more)
    old = sentinels.primary_port()
    new = sentinels.failover()
    # when a write lands on the old primary, its replica (the new primary) does not acknowledge it
    outcomes = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with CommandPipeline(client) as pipeline:
                pipeline.send([("INCR", "n")])
                pipeline.results()
                wait.confirm(pipeline, client)
            outcomes.append("confirmed")
            break
        except StoreUnavailable as exc:
            outcomes.append(exc.code)
        except redis.RedisError as exc:
            outcomes.append(type(exc).__name__)
    # then it is reported unconfirmed (or refused) until the client reaches the new primary,
    # where the next write is confirmed: nothing the caller was told is stored can be lost
    assert outcomes[-1] == "confirmed", outcomes
    assert client.connection_pool.get_master_address() == ("127.0.0.1", new) != ("127.0.0.1", old)
    assert int(sentinels.data(new).get("n")) >= 1
