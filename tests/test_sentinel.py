"""Redis through Sentinel (issue 19 point 2): noti's ``redis+sentinel://`` URL, clients that
follow a failover, and acknowledgements that wait for a replica (``NOTI_REDIS_WAIT_REPLICAS``).

Real processes: a primary, a replica and three sentinels on loopback (:mod:`tests.sentinel`).
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

import noti
from noti.bridge.webman import Producer, QueueKeys, QueueNames
from noti.bridge.webman.connection import connect as webman_connect
from noti.celery.beat import redbeat_config
from noti.celery.transport import kombu_broker, worker_transport
from noti.core.keys import Keys
from noti.core.record import Status
from noti.errors import InvalidConfig, StoreUnavailable
from noti.providers.sandbox import read_outbox
from noti.redis.conn import ReplicaWait, connect
from noti.redis.pipelines import CommandPipeline
from noti.redis.urls import SentinelUrl, masked_url
from tests.conftest import BASE_ENV, wait_until
from tests.sentinel import SentinelSet, sentinel_set
from tests.servers import SMS_AND_WEBMAN_CONFIG, WEBMAN_NOTIFY_CLASS, CeleryProcess, run_noti

PHONE = "+8613912345678"

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
    assert beat["redbeat_redis_url"] == "redis-sentinel://10.0.0.1:1/3"  # RedBeat's form, no secret
    options = beat["redbeat_redis_options"]
    assert options["password"] == "pw"  # Celery masks keys naming a password
    assert options["sentinel_kwargs"]["password"] == "sp"
    assert (options["sentinels"], options["service_name"], options["db"]) == (
        [["10.0.0.1", 1], ["10.0.0.2", 2]],
        "mymaster",
        3,
    )
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


@pytest.fixture
def sentinels_two_replicas() -> Iterator[SentinelSet]:
    with sentinel_set(replicas=2) as servers:
        yield servers


def test_a_write_only_a_replica_that_is_not_promoted_acknowledged_is_not_confirmed(
    sentinels_two_replicas: SentinelSet,
) -> None:
    # given a primary with two replicas, each acknowledging writes
    sentinels = sentinels_two_replicas
    client = connect(sentinels.url())
    wait = ReplicaWait(replicas=1, timeout_ms=500)
    with CommandPipeline(client) as pipeline:
        pipeline.send([("SET", "k", "1")])
        pipeline.results()
        wait.confirm(pipeline, client)
    assert wait.required(client) == 2  # every replica the sentinels see up
    primary = sentinels.primary_port()
    promoted, other = [p for p in sentinels.data_ports if p != primary]
    # when one replica is promoted (a switch-over's first step) and the old primary takes a
    # write the other replica still acknowledges (that replica will drop it when it
    # resynchronises from the new primary)
    sentinels.data(promoted).execute_command("REPLICAOF", "NO", "ONE")
    with CommandPipeline(client) as pipeline:
        pipeline.send([("SET", "lost", "1")])
        pipeline.results()
        assert pipeline.wait_for_replicas(1, 500) == 1  # a plain WAIT 1 says it is safe
    # then noti does not confirm such a write: it waits for both replicas
    with CommandPipeline(client) as pipeline, pytest.raises(StoreUnavailable) as unconfirmed:
        pipeline.send([("SET", "lost", "2")])
        pipeline.results()
        wait.confirm(pipeline, client)
    assert (
        unconfirmed.value.code == "e.noti.store.unconfirmed"
        and "of 2 replica(s)" in unconfirmed.value.message
    )
    assert sentinels.data(other).get("lost") == "2" and sentinels.data(promoted).get("lost") is None


# --- noti through a failover and a crash -------------------------------------------------------


def _outbox_texts(url: str) -> list[str]:
    return [entry["fields"].get("text", "") for entry in read_outbox(connect(url), Keys("noti:"))]


def _notify_until_acknowledged(index: int, deadline_s: float = 60.0) -> str:
    """``noti.notify_sms`` with an idempotency key, called again while Redis answers that it
    is unavailable or that no replica acknowledged the write: what a careful caller does."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            return noti.notify_sms(PHONE, f"n{index}", idempotency_key=f"k{index}")
        except StoreUnavailable:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_workers_beat_the_cli_and_callers_carry_on_through_a_failover_and_a_crash_losing_nothing(
    sentinels_two_replicas: SentinelSet, configure: Any, tmp_path: Path
) -> None:
    # given noti on the sentinels' primary (two replicas: one is left after the crash, to
    # acknowledge writes): two workers, beat, and this process as the caller, whose notify()
    # returns only once a replica has the record
    sentinels = sentinels_two_replicas
    url = sentinels.url(db=1)
    config = tmp_path / "noti.toml"
    config.write_text(SMS_AND_WEBMAN_CONFIG)
    env = {
        **os.environ,
        **BASE_ENV,
        "NOTI_REDIS_URL": url,
        "NOTI_CONFIG": str(config),
        "NOTI_REDIS_WAIT_REPLICAS": "1",
        "NOTI_LEASE_TIMEOUT_S": "5",
        "NOTI_SWEEP_INTERVAL_S": "2",
        "NOTI_SWEEP_AFTER_S": "5",
    }
    configure(redis_url=url, redis_wait_replicas=1, lease_timeout_s=5)
    processes = [
        CeleryProcess(
            env, "worker", "-l", "INFO", "--without-mingle", "--without-gossip", "-n", f"{name}@%h", name=name
        )
        for name in ("s1", "s2")
    ]
    processes.append(CeleryProcess(env, "beat", "-l", "INFO", name="beat"))
    try:
        for process in processes[:2]:
            wait_until(lambda p=process: "ready." in p.output() or not p.alive(), timeout=60)
        cli = functools.partial(run_noti, env)
        cli("listener", "add", "failover.sms", "-type", "sms", "-to", PHONE, "-text", "event {{ n }}")
        acknowledged: dict[str, str] = {}
        # when notifications keep coming while the primary is switched over, then killed
        for i in range(240):
            acknowledged[_notify_until_acknowledged(i)] = f"n{i}"
            if i == 80:
                sentinels.failover()
            if i == 160:
                killed = sentinels.primary_port()
                sentinels.kill(killed)
            time.sleep(0.02)
        sentinels.wait_for_new_primary(killed)

        # then every notification a caller was told is stored gets sent: none lost
        def waiting() -> list[str]:
            client, keys, done = connect(url), Keys("noti:"), str(int(Status.DONE))
            statuses = [client.hget(keys.record(record_id), "noti_st") for record_id in acknowledged]
            return [rid for rid, status in zip(acknowledged, statuses, strict=True) if status != done]

        try:
            wait_until(lambda: not waiting(), timeout=150, interval=1)
        except AssertionError:
            client, keys = connect(url), Keys("noti:")
            stuck = {rid: client.hgetall(keys.record(rid)) for rid in waiting()[:5]}
            logs = "\n".join(f"--- {p.name}\n{p.output()[-4000:]}" for p in processes)
            raise AssertionError(f"{len(waiting())} records not sent, e.g. {stuck}\n{logs}") from None
        # and the event processor and the webman bridge of the workers work on the new primary
        event_id = cli("event", "dispatch", "failover.sms", "-data", '{"n": 7}')
        webman = Producer(
            webman_connect(url), QueueKeys(QueueNames.from_class(WEBMAN_NOTIFY_CLASS), "webman_redis_queue_")
        )
        webman.push({"type": "sms", "to": PHONE, "text": "from PHP"})
        wait_until(lambda: '"done"' in cli("event", "show", event_id, "-json"), timeout=60, interval=0.5)
        wait_until(lambda: {"event 7", "from PHP"} <= set(_outbox_texts(url)), timeout=60, interval=0.5)
        # and the workers and beat are still up, and the CLI reads through the sentinels
        for process in processes:
            assert process.alive(), process.output()[-3000:]
        record_id = next(iter(acknowledged))
        assert record_id in cli("get", record_id)
    finally:
        for process in processes:
            process.stop()


def test_no_password_of_a_sentinel_url_shows_where_celery_shows_the_configuration() -> None:
    from celery.app.utils import filter_hidden_settings

    from noti.celery.app import celery_config
    from noti.config import load_settings

    url = (
        "redis+sentinel://:primary-s3cret@10.0.0.1:1,10.0.0.2:2/mymaster/3?sentinel_password=sentinel-s3cret"
    )
    shown = repr(filter_hidden_settings(celery_config(load_settings(redis_url=url))))  # inspect conf, Flower
    assert "primary-s3cret" not in shown and "sentinel-s3cret" not in shown
    assert "10.0.0.2" in shown  # the settings are there, only the secrets are masked
