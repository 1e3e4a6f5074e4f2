"""Notifying many recipients at once (issue 34, :mod:`noti.recipients.bulk`): a bad item
refused alone, notices over several batches each written once, stale ones (what they were
made from changed meanwhile) made again together."""

from __future__ import annotations

import json
from typing import Any

import pytest

import noti
import noti.sending.runtime
import noti.tasks
from noti import recipients
from tests.conftest import wait_until
from tests.recipients_given import (
    by,
    counters,
    given_runtime,
    outbox,
    states,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def rt(configure: Any) -> Any:
    return given_runtime(configure)


def test_notify_many_makes_each_good_notice_and_refuses_each_bad_one_alone(rt: Any, worker: Any) -> None:
    from noti.recipients.api import recipients as api

    recipients.put("43", {"addresses": {"sms": "+8613800000043"}, "locale": "en"})
    items: list[Any] = [
        {"recipient": "42", "template": "order_shipped", "data": {"order": 1}, "channels": ["sms"]},
        {"recipient": "nobody", "template": "order_shipped", "data": {"order": 2}},
        "not an object",
        {"recipient": "43", "template": "order_shipped", "data": {"order": 3}},
        {"recipient": "43", "template": "order_shipped", "data": [3]},
        {"recipient": "43", "template": "order_shipped", "data": {}},
        {"recipient": "43", "template": "order_shipped", "data": {"order": 4}, "user": "ops"},
    ]
    batch = api().notify_many(items)
    assert [i is not None for i in batch.ids] == [True, False, False, True, False, False, False]
    assert [(i, code) for i, code, _ in batch.refused] == [
        (1, "e.cmd.noti.rcpt.not_found"),
        (2, "e.cmd.noti.notify.baditem"),
        (4, "e.cmd.noti.notify.baddata"),
        (5, "e.cmd.noti.tmpl.missingvar"),
        (6, "e.cmd.noti.notify.badfield"),
    ]
    made = [noti.get_notice(i) for i in batch.ids if i]
    assert [states(n)["sms"] for n in made] == ["queued", "queued"]
    wait_until(lambda: len(outbox(rt)) == 2)
    assert sorted(e["fields"]["text"] for e in outbox(rt)) == ["Order 3 shipped", "订单 1 已发货"]


def test_a_bulk_notice_made_from_a_stale_profile_is_made_again_and_its_batch_goes_on(
    rt: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from noti.recipients.api import recipients as api
    from noti.recipients.notices import Notices

    remade: list[str] = []
    fresh = Notices._fresh

    def counted(self: Notices, request: Any, answer: Any) -> Any:
        remade.append(request.rid)
        return fresh(self, request, answer)

    monkeypatch.setattr(Notices, "_fresh", counted)

    # given: 42's profile is kept by this process (zh), then changed behind it (en)
    recipients.put("43", {"addresses": {"sms": "+8613800000043"}, "locale": "zh"})
    item = {"template": "order_shipped", "data": {"order": 1}, "channels": ["sms"]}
    api().notify_many([{**item, "recipient": "42"}, {**item, "recipient": "43"}])
    recipients.update("42", {"locale": "en"})
    # when: a batch holds 42 between two notices to 43
    batch = api().notify_many([{**item, "recipient": r} for r in ("43", "42", "43")])
    # then: 42's notice was refused by the script as stale and made again from the new profile
    texts = [
        rt.store.get(by(noti.get_notice(i), "sms").record).fields["text"] for i in batch.ids if i is not None
    ]
    assert texts == ["订单 1 已发货", "Order 1 shipped", "订单 1 已发货"]
    assert remade == ["42"]


def test_notify_many_over_several_batches_makes_one_notice_per_item_and_writes_each_once(rt: Any) -> None:
    from noti.recipients import bulk
    from noti.recipients.api import recipients as api

    # given: five recipients, one of them out of order SMS; more items than two batches hold
    for i in range(5):
        recipients.put(f"b{i}", {"addresses": {"sms": f"+86138000010{i:02d}"}, "locale": "en"})
    recipients.set_preferences("b4", {"orders": {"sms": False}})
    n = 2 * bulk.BULK_BATCH + 7
    items: list[dict[str, Any]] = [
        {"recipient": f"b{i % 5}", "template": "order_shipped", "data": {"order": i}, "category": "orders",
         "channels": ["sms"]}
        for i in range(n)
    ]  # fmt: skip
    items[10]["idempotency_key"] = items[bulk.BULK_BATCH + 10]["idempotency_key"] = "across-batches"
    items[11]["idempotency_key"] = items[12]["idempotency_key"] = "within-one-call"
    # when
    batch = api().notify_many(items)
    # then: every item has its notice, a repeated key names the first one's
    assert batch.refused == [] and None not in batch.ids and len(batch.ids) == n
    assert batch.ids[bulk.BULK_BATCH + 10] == batch.ids[10] and batch.ids[12] == batch.ids[11]
    distinct = list(dict.fromkeys(batch.ids))
    assert len(distinct) == n - 2
    notices = [noti.get_notice(i) for i in distinct if i]
    suppressed = [x for x in notices if x.recipient == "b4"]
    assert {states(x)["sms"] for x in suppressed} == {"suppressed"}
    assert {states(x)["sms"] for x in notices if x.recipient != "b4"} == {"queued"}
    # each record once in the indexes, each queued one's message once in the queue, counted once
    records = [e.record for x in notices for e in x.entries]
    assert len(set(records)) == len(notices)
    assert rt.redis.zcard(rt.keys.all_index) == len(records)
    assert rt.redis.zcard(rt.keys.waiting_index) == len(notices) - len(suppressed)
    assert rt.redis.zcard(rt.keys.status_index(-1)) == len(suppressed)
    lists = [
        k
        for k in rt.redis.scan_iter(count=1000)
        if rt.redis.type(k) == "list" and not k.startswith(rt.keys.timeline(""))  # not a timeline
    ]
    queue = [m for k in lists for m in rt.redis.lrange(k, 0, -1) if m.startswith("{")]
    queued_ids = sorted(json.loads(m)["headers"]["id"] for m in queue)
    assert queued_ids == sorted(r for x in notices if x.recipient != "b4" for r in x.records)
    assert counters(rt)[("suppressed", ("orders", "sms", "optout"))] == len(suppressed)
    for x in notices[:: bulk.PER_CALL // 2]:  # the recipients' logs name their notices
        assert x.id in recipients.history(x.recipient, limit=1000)


def test_a_template_put_again_during_a_bulk_call_remakes_the_stale_notices_together(rt: Any) -> None:
    from noti.recipients import bulk
    from noti.recipients.api import recipients as api

    # given: this process keeps the template (read by a first call), then it is put again;
    # five recipients in turn, more items than two batches hold
    for i in range(5):
        recipients.put(f"t{i}", {"addresses": {"sms": f"+86138000020{i:02d}"}, "locale": "en"})
    item = {"template": "order_shipped", "data": {"order": 0}, "channels": ["sms"]}
    api().notify_many([{**item, "recipient": f"t{i}"} for i in range(5)])
    recipients.put_template(
        "order_shipped", {"default_locale": "en", "channels": {"sms": {"en": {"text": "v2 {{ order }}"}}}}
    )
    n = 2 * bulk.BULK_BATCH + 7
    rt.redis.config_resetstat()
    # when: every notice of the batches in flight was made from the kept (stale) template
    batch = api().notify_many([{**item, "recipient": f"t{i % 5}", "data": {"order": i}} for i in range(n)])
    # then: each made again from the new one, in a few calls (a round trip each was 1,000)
    assert batch.refused == [] and None not in batch.ids and len(set(batch.ids)) == n
    texts = {rt.store.get(by(noti.get_notice(i), "sms").record).fields["text"] for i in batch.ids[:: n // 7]}  # type: ignore[arg-type]
    assert texts == {f"v2 {i}" for i in range(0, n, n // 7)}
    calls = int(rt.redis.info("commandstats")["cmdstat_evalsha"]["calls"])
    assert calls <= 3 * n // bulk.PER_CALL, calls


def test_a_bulk_notice_whose_inputs_keep_changing_is_refused_alone_after_five_tries(
    rt: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from noti.recipients.api import recipients as api
    from noti.recipients.request import parse_request
    from noti.recipients.snapshot import Snapshots

    # given: 42's profile kept, then changed behind it; this process keeps finding the old one
    item = {"template": "order_shipped", "data": {"order": 1}, "channels": ["sms"]}
    recipients.put("43", {"addresses": {"sms": "+8613800000043"}, "locale": "en"})
    api().notify_many([{**item, "recipient": "42"}, {**item, "recipient": "43"}])
    notices = api().notices
    old = notices.snapshots.kept(parse_request(notices.notifier, **item, recipient="42"))
    assert old is not None
    recipients.update("42", {"locale": "en"})
    kept = Snapshots.kept
    monkeypatch.setattr(Snapshots, "kept", lambda self, r: old if r.rid == "42" else kept(self, r))
    # when
    rt.redis.config_resetstat()
    batch = api().notify_many([{**item, "recipient": r} for r in ("43", "42", "43")])
    # then: 42's is refused as a plain notify is (made five times in all), the others are made
    assert int(rt.redis.info("commandstats")["cmdstat_evalsha"]["calls"]) == 5
    assert [i is not None for i in batch.ids] == [True, False, True]
    assert [(i, code) for i, code, _ in batch.refused] == [(1, "e.noti.store.unavailable")]
    assert "changed 5 times" in batch.refused[0][2]
