"""ScriptPipeline: pipelined script calls on one connection, replies read later."""

from __future__ import annotations

import time
from typing import Any

import pytest
import redis

from noti.redis.conn import script_source
from noti.redis.pipelines import ScriptPipeline, run_batches

pytestmark = pytest.mark.integration

# Appends its argument to a list and returns the list's new length: a call that ran twice
# would show in the list.
APPEND = "return redis.call('RPUSH', KEYS[1], ARGV[1])"


def test_batches_are_read_back_in_order_while_later_ones_are_in_flight(rt: Any) -> None:
    script = rt.redis.register_script(APPEND)
    with ScriptPipeline(rt.redis, script) as pipeline:
        pipeline.send([(["log"], ["a"]), (["log"], ["b"])])
        pipeline.send([(["log"], ["c"])])
        pipeline.send([])  # an empty batch is allowed and reads back empty
        assert pipeline.results() == [1, 2]
        pipeline.send([(["log"], ["d"])])
        assert pipeline.results() == [3]
        assert pipeline.results() == []
        assert pipeline.results() == [4]
    assert rt.redis.lrange("log", 0, -1) == ["a", "b", "c", "d"]


def test_calls_the_server_lost_the_script_for_run_once_after_reloading(rt: Any) -> None:
    script = rt.redis.register_script(APPEND)
    with ScriptPipeline(rt.redis, script) as pipeline:
        pipeline.send([(["log"], ["warm"])])
        assert pipeline.results() == [1]
        rt.redis.script_flush()
        pipeline.send([(["log"], ["a"]), (["log"], ["b"])])
        pipeline.send([(["log"], ["c"])])
        assert pipeline.results() == [2, 3]
        assert pipeline.results() == [4]
    assert rt.redis.lrange("log", 0, -1) == ["warm", "a", "b", "c"]


def test_an_error_reply_is_raised_after_the_other_calls_ran(rt: Any) -> None:
    script = rt.redis.register_script(APPEND)
    rt.redis.set("not-a-list", "x")
    with ScriptPipeline(rt.redis, script) as pipeline:
        pipeline.send([(["log"], ["a"]), (["not-a-list"], ["b"]), (["log"], ["c"])])
        with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
            pipeline.results()
        pipeline.send([(["log"], ["d"])])  # the connection is still in step
        assert pipeline.results() == [3]
    assert rt.redis.lrange("log", 0, -1) == ["a", "c", "d"]


def test_a_lost_connection_is_raised_never_resent_and_never_reused(rt: Any) -> None:
    script = rt.redis.register_script(APPEND)
    with ScriptPipeline(rt.redis, script) as pipeline:
        pipeline.send([(["log"], ["a"])])
        assert pipeline.results() == [1]
        rt.redis.client_kill_filter(_type="normal", skipme=True)  # the pipeline's connection
        with pytest.raises(redis.ConnectionError):
            pipeline.send([(["log"], ["b"])])
            pipeline.results()
        pipeline.send([(["log"], ["c"])])  # on a new connection
        assert pipeline.results() == [2]
    assert rt.redis.lrange("log", 0, -1) == ["a", "c"]


def test_the_health_check_never_reads_the_reply_of_a_batch_in_flight(rt: Any, redis_url: str) -> None:
    # given: a client that health-checks (PING) a connection idle for more than 1 ms
    client = redis.Redis.from_url(redis_url, decode_responses=True, health_check_interval=0.001)
    script = client.register_script(APPEND)
    with ScriptPipeline(client, script) as pipeline:
        pipeline.send([(["log"], ["warm"])])
        assert pipeline.results() == [1]
        time.sleep(0.01)
        # when: a second batch is written while the first one's replies are unread
        pipeline.send([(["log"], ["a"]), (["log"], ["b"])])
        time.sleep(0.01)
        pipeline.send([(["log"], ["c"])])
        # then: each batch reads its own replies
        assert pipeline.results() == [2, 3]
        assert pipeline.results() == [4]
    assert client.lrange("log", 0, -1) == ["warm", "a", "b", "c"]
    client.close()


def test_scripts_that_share_a_rule_include_its_fragment() -> None:
    fragment = script_source("claim_record")
    for name in ("claim", "bulk_fetch"):
        source = script_source(name)
        # the include line is replaced by the fragment's text, once
        assert "\n--#include" not in source and source.count(fragment) == 1, name
        assert "local function claim_record(" in source


def test_run_batches_writes_ahead_and_yields_each_batchs_replies_in_order(rt: Any) -> None:
    built: list[int] = []

    def batches() -> Any:
        for n in range(4):
            built.append(n)
            yield [("RPUSH", "order", f"{n}.{i}") for i in range(3)]

    seen = []
    for replies in run_batches(rt.redis, batches(), ahead=1):
        seen.append((len(built), replies))
    # the second batch was built (and written) before the first one's replies were read
    assert [at for at, _ in seen] == [2, 3, 4, 4]
    assert [replies for _, replies in seen] == [[1, 2, 3], [4, 5, 6], [7, 8, 9], [10, 11, 12]]
    assert rt.redis.lrange("order", 0, 2) == ["0.0", "0.1", "0.2"]


def test_run_batches_raises_an_error_reply_after_its_batch_ran(rt: Any) -> None:
    rt.redis.set("text", "x")
    with pytest.raises(redis.ResponseError):
        list(run_batches(rt.redis, [[("INCR", "text"), ("SET", "after", "1")]]))
    assert rt.redis.get("after") == "1"
