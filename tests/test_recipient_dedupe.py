"""Deduplication of notices (issue 35): the same key for the same recipient within a window
makes one notice; the second call answers the first one's id."""

from __future__ import annotations

import time
from typing import Any

import pytest

import noti
from noti import recipients
from noti.errors import InvalidInput
from noti.redis.counters import parse
from tests.conftest import MEMBER

pytestmark = pytest.mark.integration

TEMPLATE = {"default_locale": "en", "channels": {"sms": {"en": {"text": "Order {{ order }} shipped"}}}}


@pytest.fixture
def rt(configure: Any) -> Any:
    runtime = configure(channels={"sms": {"provider": "sandbox"}})
    recipients.put_category("orders", {"channels": {"sms": True}}, user=MEMBER)
    recipients.put_template("order_shipped", TEMPLATE)
    recipients.put_template(
        "orders_today", {"default_locale": "en", "channels": {"sms": {"en": {"text": "{{ count }} orders"}}}}
    )
    for rid in ("42", "43"):
        recipients.put(rid, {"addresses": {"sms": f"+86139000000{rid}"}})
    return runtime


def tell(rid: str = "42", order: int = 7, **extra: Any) -> Any:
    from noti.recipients.api import recipients as api

    call = {"recipient": rid, "template": "order_shipped", "data": {"order": order}, "category": "orders"}
    return api().notify(**call, **extra)


def records(rt: Any) -> int:
    return len(rt.redis.zrange(rt.keys.all_index, 0, -1))


def test_the_same_key_for_the_same_recipient_makes_one_notice(rt: Any) -> None:
    first = tell(dedupe="order-7-shipped")
    again = tell(dedupe="order-7-shipped", order=8)  # a retried job: the key decides, not the data
    assert again.id == first.id and again.repeated and not first.repeated
    assert records(rt) == 1
    # another recipient, or another key, is another notice
    assert tell("43", dedupe="order-7-shipped").id != first.id
    assert tell(dedupe="order-8-shipped").id != first.id
    assert records(rt) == 3
    counts = {(f.code, labels): n for f, labels, n in parse(rt.redis.hgetall(rt.keys.metrics))}
    assert counts[("deduplicated", ("orders",))] == 1


def test_content_dedupe_keys_the_call_by_what_it_would_send(rt: Any) -> None:
    first = tell(dedupe=True)
    assert tell(dedupe=True).id == first.id
    assert tell(dedupe=True, order=8).id != first.id
    assert tell(dedupe=True, channels=["sms"]).id != first.id  # another call shape
    assert records(rt) == 3


def test_a_key_older_than_its_window_makes_a_new_notice(rt: Any) -> None:
    first = tell(dedupe="k", dedupe_window=1)
    assert tell(dedupe="k", dedupe_window=1).id == first.id
    time.sleep(1.1)
    assert tell(dedupe="k", dedupe_window=1).id != first.id


def test_a_deduplicated_digest_event_goes_into_its_window_once(rt: Any) -> None:
    from noti.recipients.api import recipients as api

    args = {"recipient": "42", "template": "orders_today", "data": {"order": 7}, "category": "orders",
            "digest": "orders", "window": 60, "dedupe": "order-7"}  # fmt: skip
    window = noti.notify(**args)
    again = noti.notify(**args)
    assert again == window
    # a plain call under the same key while the window is open answers the window
    assert tell(dedupe="order-7").id == window
    done = api().digests.tick(now=int(time.time() * 1000) + 61_000)
    assert done.made == [window]
    assert rt.redis.hget(rt.keys.digest_closed(window), "n") is None  # made and forgotten


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        ({"dedupe": "k", "idempotency_key": "k"}, "not both"),
        ({"dedupe": 5}, "a key or true"),
        ({"dedupe": False}, "a key or true"),
        ({"dedupe": ""}, "dedupe:"),
        ({"dedupe": "k" * 300}, "dedupe:"),
        ({"dedupe": "k", "dedupe_window": 0}, "1 s to 7 days"),
        ({"dedupe": "k", "dedupe_window": "8d"}, "1 s to 7 days"),
        ({"dedupe": "k", "dedupe_window": "soon"}, "seconds or text"),
        ({"dedupe_window": 60}, "a key or true"),
    ],
)
def test_a_bad_dedupe_is_refused_and_nothing_is_stored(rt: Any, extra: dict[str, Any], fragment: str) -> None:
    before = sorted(rt.redis.keys())
    with pytest.raises(InvalidInput) as refused:
        tell(**extra)
    assert refused.value.code == "e.cmd.noti.notify.baddedupe" and fragment in refused.value.message
    assert sorted(rt.redis.keys()) == before
