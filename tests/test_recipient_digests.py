"""Digests (:mod:`noti.recipients.digests`): events for one recipient collected in a window in
Redis and made into exactly one notice when it closes; an event racing the close lands in one
window; a run that dies after closing is taken over; through a real worker."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

import noti
from noti import recipients
from noti.errors import InvalidInput
from noti.providers.sandbox import read_outbox
from noti.redis.counters import parse
from tests.conftest import MEMBER, wait_until

pytestmark = pytest.mark.integration

PHONE = "+8613912345678"
TEMPLATE = {
    "default_locale": "en",
    "channels": {"sms": {"en": {"text": "{{ count }} new: {% for e in events %}{{ e.n }} {% endfor %}"}}},
}


@pytest.fixture
def rt(configure: Any) -> Any:
    runtime = configure(channels={"sms": {"provider": "sandbox"}}, pump_interval_s=0.1)
    recipients.put_category("comments", {"channels": {"sms": True}}, user=MEMBER)
    recipients.put_template("new_comments", TEMPLATE)
    recipients.put("42", {"addresses": {"sms": PHONE}, "locale": "en"})
    return runtime


def digests() -> Any:
    from noti.recipients.api import recipients as api

    return api().digests


def event(n: int, **extra: Any) -> str:
    return noti.notify(
        recipient="42", template="new_comments", data={"n": n}, category="comments", digest="comments",
        window=extra.pop("window", 1), **extra,
    )  # fmt: skip


def texts(rt: Any) -> list[str]:
    return [e["fields"]["text"] for e in read_outbox(rt.redis, rt.keys, "sandbox")]


def made_text(rt: Any, notice_id: str) -> str:
    notice = noti.get_notice(notice_id)
    [entry] = notice.entries
    return str(rt.store.get(entry.record).fields["text"])


def test_a_burst_becomes_one_notice_when_its_window_closes(rt: Any, worker: Any) -> None:
    # given: ten events in a one-second window
    ids = {event(n) for n in range(10)}
    # then: one window, which makes nothing before it is due
    assert len(ids) == 1
    [window] = ids
    assert digests().tick().closed == 0
    # when: it is due, the worker's pump closes it (no tick called here)
    wait_until(lambda: rt.redis.exists(rt.keys.notice(window)), timeout=10)
    # then: one notice, named by the window, of every event in order, sent once
    assert made_text(rt, window) == "10 new: 0 1 2 3 4 5 6 7 8 9 "
    wait_until(lambda: texts(rt) == ["10 new: 0 1 2 3 4 5 6 7 8 9 "])
    assert digests().tick().closed == 0
    counts = {(f.code, labels): n for f, labels, n in parse(rt.redis.hgetall(rt.keys.metrics))}
    assert counts[("digested", ("comments",))] == 10
    assert counts[("digests", ("comments", "made"))] == 1
    # and the next event opens a new window
    assert event(10) != window


def test_an_event_racing_the_close_lands_in_exactly_one_window(rt: Any) -> None:
    # given: four producers adding events while the windows are closed as fast as they can be
    stop = threading.Event()
    added: list[int] = []
    lock = threading.Lock()

    def produce(start: int) -> None:
        n = start
        while not stop.is_set():
            event(n, window=1, digest_max=100)  # 100 listed at most: an SMS holds 1,000 characters
            with lock:
                added.append(n)
            n += 4

    producers = [threading.Thread(target=produce, args=(i,)) for i in range(4)]
    for thread in producers:
        thread.start()
    made: list[str] = []
    failed: list[str] = []
    deadline = time.monotonic() + 4
    while time.monotonic() < deadline:
        done = digests().tick(now=int(time.time() * 1000) + 1000)  # every open window due
        made, failed = made + done.made, failed + done.failed
    stop.set()
    for thread in producers:
        thread.join()
    done = digests().tick(now=int(time.time() * 1000) + 1000)
    made, failed = made + done.made, failed + done.failed
    # then: every event is counted in one notice, listed in none twice, none lost (a window
    # that took more than its 100 lists the first 100: a slow run fills some)
    counted, seen = 0, []
    assert failed == []
    for window in made:
        count, listed = made_text(rt, window).split(" new: ", 1)
        events = [int(n) for n in listed.split()]
        assert len(events) == min(int(count), 100), window
        counted += int(count)
        seen += events
    assert len(made) > 3
    assert counted == len(added) and len(seen) == len(set(seen)) and set(seen) <= set(added)


def test_a_window_closed_by_a_run_that_died_is_made_once_by_the_next(rt: Any) -> None:
    # given: a run closed the window and died before making its notice
    window = event(1)
    event(2)
    now = int(time.time() * 1000) + 1000
    d = digests()
    k = rt.keys
    owner = noti.api.notifier().user(None).name
    keys = [k.digest(owner, "42", "comments"), k.digests_due, k.digests_closing, k.digests_of(owner)]
    assert d._close(keys=keys, args=[now, 60_000, k.digest_closed("")]) == window
    # when: the next runs come while its lease holds, then after it
    assert d.tick(now=now).closed == 0
    later = d.tick(now=now + 60_001)
    # then: the notice is made once, with both events
    assert later.made == [window]
    assert made_text(rt, window) == "2 new: 1 2 "
    # and making it again (two runs took it over at once) makes nothing more
    assert d._make(window) is None
    assert len(noti.get_notice(window).entries) == 1


def test_an_idempotency_key_puts_an_event_in_once(rt: Any) -> None:
    first = event(1, idempotency_key="comment-1")
    assert event(1, idempotency_key="comment-1") == first
    event(2)
    done = digests().tick(now=int(time.time() * 1000) + 1000)
    assert made_text(rt, done.made[0]) == "2 new: 1 2 "


def test_erasure_drops_the_recipients_open_windows_and_their_events(rt: Any) -> None:
    recipients.put("43", {"addresses": {"sms": "+8613900000043"}})
    window = event(1)
    other = noti.notify(recipient="43", template="new_comments", data={"n": 2}, category="comments",
                        digest="comments", window=1)  # fmt: skip
    recipients.delete("42")
    owner = noti.api.notifier().user(None).name
    assert not rt.redis.exists(rt.keys.digest(owner, "42", "comments"), rt.keys.digest_events(window))
    assert [w.window for w in digests().open_windows(owner)] == [other]
    assert digests().tick(now=int(time.time() * 1000) + 1000).made == [other]


def test_a_window_whose_template_was_deleted_is_dropped_and_counted(rt: Any) -> None:
    window = event(1)
    recipients.delete_template("new_comments")
    done = digests().tick(now=int(time.time() * 1000) + 1000)
    assert (done.made, done.failed) == ([], [window])
    assert not rt.redis.exists(rt.keys.digest_closed(window), rt.keys.digest_events(window))
    assert rt.redis.zcard(rt.keys.digests_closing) == 0


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ({"digest": "Comments", "window": 60}, "is a key"),
        ({"digest": "c" * 65, "window": 60}, "is a key"),
        ({"digest": 5, "window": 60}, "is a key"),
        ({"digest": "comments"}, "window is seconds"),
        ({"window": 60}, "is a key"),
        ({"digest": "comments", "window": "10 minutes"}, "window is seconds"),
        ({"digest": "comments", "window": 0.5}, "1 s to 7 days"),
        ({"digest": "comments", "window": "8d"}, "1 s to 7 days"),
        ({"digest": "comments", "window": float("nan")}, "window is seconds"),
        ({"digest": "comments", "window": True}, "window is seconds"),
        ({"digest": "comments", "window": 60, "digest_max": 0}, "digest_max"),
        ({"digest": "comments", "window": 60, "digest_max": 1001}, "digest_max"),
        ({"digest": "comments", "window": 60, "delay": 5}, "no delay or eta"),
        ({"digest": "comments", "window": "daily 24:00"}, "24-hour clock"),
        ({"digest": "comments", "window": "daily 9"}, "window is seconds"),
        ({"digest": "comments", "window": 60, "backoff": "yes"}, "true or false"),
        ({"backoff": True}, "is a key"),
    ],
)
def test_a_bad_digest_is_refused_and_nothing_is_stored(rt: Any, args: dict[str, Any], fragment: str) -> None:
    before = sorted(rt.redis.keys())
    with pytest.raises(InvalidInput) as refused:
        noti.notify(recipient="42", template="new_comments", data={"n": 1}, category="comments", **args)
    assert refused.value.code == "e.cmd.noti.notify.baddigest" and fragment in refused.value.message
    assert sorted(rt.redis.keys()) == before


def test_a_digest_event_at_a_bad_level_is_refused_now_not_when_its_window_closes(rt: Any) -> None:
    with pytest.raises(InvalidInput) as refused:
        event(1, lv="loud")
    assert refused.value.code == "e.cmd.noti.add.badlv"
    assert rt.redis.zcard(rt.keys.digests_due) == 0


def test_an_event_the_template_cannot_render_is_refused_now(rt: Any) -> None:
    recipients.put_template(
        "strict", {"default_locale": "en", "channels": {"sms": {"en": {"text": "{{ events[0].title }}"}}}}
    )
    with pytest.raises(InvalidInput) as refused:
        noti.notify(
            recipient="42", template="strict", data={"n": 1}, category="comments", digest="c", window=60
        )
    assert refused.value.code == "e.cmd.noti.tmpl.missingvar"
    assert rt.redis.zcard(rt.keys.digests_due) == 0


def test_notify_many_puts_digest_events_in_their_window_beside_plain_notices(rt: Any) -> None:
    from noti.recipients.api import recipients as api

    item = {"recipient": "42", "template": "new_comments", "category": "comments"}
    digest = {**item, "digest": "comments", "window": 60}
    batch = api().notify_many(
        [{**digest, "data": {"n": 1}}, {**item, "data": {"events": [], "count": 0}},
         {**digest, "data": {"n": 2}}, {**digest, "data": {"n": 3}, "window": "forever"}]
    )  # fmt: skip
    window, plain, again, bad = batch.ids
    assert window == again and plain not in (None, window) and bad is None
    assert [(i, code) for i, code, _ in batch.refused] == [(3, "e.cmd.noti.notify.baddigest")]
    assert made_text(rt, plain) == "0 new: "
    done = digests().tick(now=int(time.time() * 1000) + 61_000)
    assert done.made == [window] and made_text(rt, window) == "2 new: 1 2 "


def test_delay_puts_an_event_in_once_and_answers_the_window(rt: Any, worker: Any) -> None:
    import noti.tasks
    from noti.celery.tasks.maintenance import digest_tick

    kwargs = {"recipient": "42", "template": "new_comments", "category": "comments", "digest": "comments",
              "window": 1}  # fmt: skip
    results = [noti.tasks.notify.delay(data={"n": n}, **kwargs) for n in range(3)]
    windows = {r.get(timeout=20) for r in results}
    assert len(windows) == 1
    [window] = windows
    # the same task delivered twice (a redelivery after a crash) is one event
    noti.tasks.notify.apply_async(kwargs={"data": {"n": 0}, **kwargs}, task_id=results[0].id).get(timeout=20)
    time.sleep(1.1)
    digest_tick.delay()  # beat's job, run by the worker
    wait_until(lambda: rt.redis.exists(rt.keys.notice(window)), timeout=20)
    # (the worker took the three tasks at once: the window holds them in the order they came)
    text = made_text(rt, window)
    assert text.startswith("3 new: ") and sorted(text[7:].split()) == ["0", "1", "2"]
    wait_until(lambda: texts(rt) == [text])


def test_one_tick_closes_every_window_due_however_many(rt: Any) -> None:
    from noti.recipients import digests as module
    from noti.recipients.api import recipients as api

    n = 2 * module.CLOSE_BATCH + 50
    recipients.import_rows([{"id": f"r{i}", "addresses": {"sms": f"+86139{i:08d}"}} for i in range(n)])
    batch = api().notify_many(
        [{"recipient": f"r{i}", "template": "new_comments", "data": {"n": i}, "category": "comments",
          "digest": "comments", "window": 1} for i in range(n)]
    )  # fmt: skip
    assert batch.refused == [] and len(set(batch.ids)) == n
    done = digests().tick(now=int(time.time() * 1000) + 1000)
    assert done.closed == n and sorted(done.made) == sorted(batch.ids)
    assert rt.redis.zcard(rt.keys.digests_due) == rt.redis.zcard(rt.keys.digests_closing) == 0


def test_a_back_off_window_sends_its_first_event_at_once_and_digests_the_rest(rt: Any) -> None:
    # given: a back-off digest: the first event goes now, the next ones wait for the window
    first = event(1, backoff=True)
    window = event(2, backoff=True)
    event(3, backoff=True)
    assert first != window
    assert made_text(rt, first) == "1 new: 1 "
    # when the window closes: one digest of the events after the first
    done = digests().tick(now=int(time.time() * 1000) + 1000)
    assert done.made == [window] and made_text(rt, window) == "2 new: 2 3 "
    # a window with only its first event makes nothing more
    alone = event(4, backoff=True)
    assert made_text(rt, alone) == "1 new: 4 "
    assert digests().tick(now=int(time.time() * 1000) + 1000).made == []


def test_a_back_off_first_event_not_sent_before_the_close_is_carried_by_the_digest(rt: Any) -> None:
    # given: the process that opened a back-off window died before sending its first event
    from noti.recipients import digests as module

    real = module.Digests.add

    def opened_then_died(self: Any, request: Any, snapshot: Any) -> Any:
        from dataclasses import replace

        return real(self, replace(request, backoff=False), snapshot)  # the window, no first notice

    module.Digests.add = opened_then_died  # type: ignore[method-assign]
    try:
        window = event(1, backoff=True)
    finally:
        module.Digests.add = real  # type: ignore[method-assign]
    rt.redis.hset(rt.keys.digest(noti.api.notifier().user(None).name, "42", "comments"), "first", "1")
    event(2, backoff=True)
    # when the window closes, the digest carries the first event too: never lost
    done = digests().tick(now=int(time.time() * 1000) + 1000)
    assert done.made == [window] and made_text(rt, window) == "2 new: 1 2 "


def test_a_daily_window_is_due_at_that_time_in_each_recipients_timezone(rt: Any) -> None:
    from datetime import datetime
    from zoneinfo import ZoneInfo

    recipients.put("sh", {"addresses": {"sms": "+8613900000001"}, "timezone": "Asia/Shanghai"})
    recipients.put("ny", {"addresses": {"sms": "+12125550100"}, "timezone": "America/New_York"})
    call = {"template": "new_comments", "data": {"n": 1}, "category": "comments", "digest": "daily",
            "window": "daily 09:00"}  # fmt: skip
    owner = noti.api.notifier().user(None).name
    for rid, zone in (("sh", "Asia/Shanghai"), ("ny", "America/New_York")):
        noti.notify(recipient=rid, **call)
        due = int(rt.redis.hget(rt.keys.digest(owner, rid, "daily"), "due"))
        local = datetime.fromtimestamp(due / 1000, ZoneInfo(zone))
        assert (local.hour, local.minute, local.second) == (9, 0, 0)
        assert 0 < due - time.time() * 1000 <= 86_400_000


def test_the_next_nine_oclock_across_a_daylight_saving_change() -> None:
    from datetime import datetime
    from datetime import time as clock
    from zoneinfo import ZoneInfo

    from noti.recipients.quiet import next_at_ms

    zone = ZoneInfo("America/New_York")
    # the evening before the clocks go forward (2026-03-08 02:00 -> 03:00): the next 09:00 is
    # 23 hours away, and the next 02:30 (skipped) is 03:00 the first instant after the gap
    evening = int(datetime(2026, 3, 7, 10, 0, tzinfo=zone).timestamp() * 1000)
    nine = next_at_ms(clock(9, 0), "America/New_York", evening)
    assert datetime.fromtimestamp(nine / 1000, zone) == datetime(2026, 3, 8, 9, 0, tzinfo=zone)
    skipped = next_at_ms(clock(2, 30), "America/New_York", evening)
    assert datetime.fromtimestamp(skipped / 1000, zone).replace(tzinfo=None) == datetime(2026, 3, 8, 3, 0)


def test_open_windows_are_listed_by_owner_and_recipient_soonest_due_first(rt: Any) -> None:
    recipients.put("43", {"addresses": {"sms": "+8613900000043"}})
    later = event(1, window=600)
    sooner = noti.notify(recipient="43", template="new_comments", data={"n": 2}, category="comments",
                         digest="comments", window=60)  # fmt: skip
    event(3, window=600)
    owner = noti.api.notifier().user(None).name
    listed = digests().open_windows(owner)
    assert [(w.window, w.recipient, w.digest, w.events) for w in listed] == [
        (sooner, "43", "comments", 1), (later, "42", "comments", 2)]  # fmt: skip
    assert [w.window for w in digests().open_windows(owner, recipient="42")] == [later]
    assert digests().open_windows(owner, limit=1)[0].window == sooner
    assert digests().open_windows("bob") == []
    digests().tick(now=int(time.time() * 1000) + 61_000)  # the sooner one closes
    assert [w.window for w in digests().open_windows(owner)] == [later]
