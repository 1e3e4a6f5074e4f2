"""The wire-format publisher writes exactly what Celery's send_task writes (ids aside)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from noti.celery.app import app
from noti.celery.publish import Publisher
from noti.celery.queues import DELIVER_TASK, priority_for_level
from noti.core.record import Channel

pytestmark = pytest.mark.integration

VOLATILE_HEADERS = {"id", "root_id", "origin"}
VOLATILE_PROPERTIES = {"correlation_id", "delivery_tag", "reply_to"}


def _strip(message: dict[str, Any]) -> dict[str, Any]:
    headers = {k: v for k, v in message["headers"].items() if k not in VOLATILE_HEADERS}
    properties = {k: v for k, v in message["properties"].items() if k not in VOLATILE_PROPERTIES}
    return {**message, "headers": headers, "properties": properties}


def test_envelope_matches_celerys_own_for_every_step(rt: Any) -> None:
    publisher = Publisher(app, store_url=rt.settings.redis_url, store_redis=rt.redis)
    assert publisher.writes_wire_format and publisher.shares_store
    for level in (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000):
        rt.redis.flushdb()
        step = priority_for_level(level)
        app.send_task(
            DELIVER_TASK,
            args=["01rec"],
            queue=Channel.SMS.queue,
            routing_key=Channel.SMS.queue,
            priority=step,
        )
        key, ours = publisher.message("01rec", Channel.SMS, level)
        [theirs] = rt.redis.lrange(key, 0, -1)  # Celery wrote to the same list
        ours_msg, theirs_msg = json.loads(ours), json.loads(theirs)
        assert _strip(ours_msg) == _strip(theirs_msg)
        assert base64.b64decode(ours_msg["body"]) == base64.b64decode(theirs_msg["body"])
        assert (
            ours_msg["headers"]["id"]
            == ours_msg["headers"]["root_id"]
            == ours_msg["properties"]["correlation_id"]
        )


def test_publish_pipelines_many_messages_onto_their_priority_lists(rt: Any) -> None:
    publisher = Publisher(app, store_url=rt.settings.redis_url, store_redis=rt.redis)
    items = [(f"id{i}", Channel.WEIXIN, 1000 if i % 2 else 1) for i in range(2500)]
    assert publisher.publish(items) == 2500
    assert rt.redis.llen("noti.weixin") == 1250 and rt.redis.llen("noti.weixin:9") == 1250
    ids = {
        json.loads(base64.b64decode(json.loads(m)["body"]))[0][0]
        for m in rt.redis.lrange("noti.weixin", 0, -1)
    }
    assert ids == {f"id{i}" for i in range(1, 2500, 2)}


def test_the_fast_template_and_the_field_by_field_envelope_agree(rt: Any) -> None:
    publisher = Publisher(app, store_url=rt.settings.redis_url, store_redis=rt.redis)
    for record_id in ("01m80bq4ap644zt7ycn1fg7557", "a", "weird id/with spaces"):
        for level in (1, 1000):
            key, fast = publisher.message(record_id, Channel.EMAIL, level)
            slow = publisher._envelope(record_id, Channel.EMAIL, priority_for_level(level))
            assert key == ("noti.email" if level == 1000 else "noti.email:9")
            a, b = json.loads(fast), json.loads(slow)
            assert _strip(a) == _strip(b) and a["body"] == b["body"]
            assert a["headers"]["argsrepr"] == repr([record_id])
            assert len({a["headers"]["id"], a["headers"]["root_id"], a["properties"]["correlation_id"]}) == 1
