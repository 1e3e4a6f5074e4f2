"""Per-recipient throttles (issue 35): a category's ``throttle`` holds each recipient to at most
``limit`` notifications per channel in any ``period``, decided in ``notify.lua`` (so the limit
holds under concurrent producers); over it, a record is dropped (invalid, saying so) or
delayed to the first moment it fits."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

import noti
from noti import recipients
from noti.core.record import Status
from noti.errors import InvalidInput
from noti.providers.sandbox import read_outbox
from noti.redis.counters import parse
from tests.conftest import MEMBER, wait_until

pytestmark = pytest.mark.integration

TEMPLATE = {
    "default_locale": "en",
    "channels": {
        "sms": {"en": {"text": "Comment {{ n }}"}},
        "email": {"en": {"subject": "Comment {{ n }}", "text": "Comment {{ n }}"}},
    },
}


@pytest.fixture
def rt(configure: Any) -> Any:
    runtime = configure(channels={"sms": {"provider": "sandbox"}, "email": {"provider": "sandbox"}},
                        pump_interval_s=0.1)  # fmt: skip
    recipients.put_template("comment", TEMPLATE)
    for rid in ("42", "43"):
        recipients.put(rid, {"addresses": {"sms": f"+86139000000{rid}", "email": f"u{rid}@example.com"}})
    return runtime


def declare(throttle: dict[str, Any]) -> None:
    recipients.put_category("social", {"throttle": throttle}, user=MEMBER)


def burst(rid: str, count: int, producers: int = 4, channels: tuple[str, ...] = ("sms",)) -> list[Any]:
    """``count`` notices from each of ``producers`` threads at once; the notices."""
    from noti.recipients.api import recipients as api

    made: list[Any] = []
    lock = threading.Lock()
    start = threading.Barrier(producers)

    def produce(p: int) -> None:
        start.wait()
        for i in range(count):
            notice = api().notify(recipient=rid, template="comment", data={"n": p * 100 + i},
                                  category="social", channels=list(channels))  # fmt: skip
            with lock:
                made.append(notice)

    threads = [threading.Thread(target=produce, args=(p,)) for p in range(producers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return made


def states(notices: list[Any], channel: str = "sms") -> list[str]:
    return sorted(next(e.state for e in n.entries if e.channel == channel) for n in notices)


def counts(rt: Any) -> dict[tuple[str, tuple[str, ...]], int]:
    return {(f.code, labels): n for f, labels, n in parse(rt.redis.hgetall(rt.keys.metrics))}


def test_a_dropping_throttle_holds_at_its_limit_under_four_producers(rt: Any) -> None:
    declare({"limit": 3, "period": "1h", "over": "drop"})
    made = burst("42", 5)
    assert states(made) == ["queued"] * 3 + ["suppressed"] * 17
    dropped = [e for n in made for e in n.entries if e.state == "suppressed"]
    assert {e.reason for e in dropped} == {"throttled"}
    record = rt.store.get(dropped[0].record)
    assert record.status is Status.INVALID and record.errmsg.startswith("e.noti.pref.throttled: ")
    assert counts(rt)[("throttled", ("social", "sms", "drop"))] == 17
    # another recipient, or another channel, has its own allowance
    assert states(burst("43", 1, producers=1)) == ["queued"]
    assert states(burst("42", 1, producers=1, channels=("email",)), "email") == ["queued"]


def test_a_delaying_throttle_spreads_the_sends_and_every_one_goes(rt: Any, worker: Any) -> None:
    # given: at most 2 per second; 8 notices at once from 4 producers
    declare({"limit": 2, "period": 1, "over": "delay"})
    made = burst("42", 2)
    assert states(made) == ["queued"] * 2 + ["throttled"] * 6
    # then: the send times keep any second to 2, and all 8 are sent
    # (the times the throttle noted: a queued record's own created_ms is its builder's clock)
    from noti.api import notifier

    owner = notifier().user(None).name
    noted = rt.redis.zrange(rt.keys.throttle(owner, "42", "social", "sms"), 0, -1, withscores=True)
    due = sorted(int(score) for _, score in noted)
    assert len(due) == 8
    assert all(later - earlier >= 1000 for earlier, later in zip(due, due[2:], strict=False)), due
    delayed = sorted(
        rt.store.get(e.record).lease_until_ms for n in made for e in n.entries if e.state == "throttled"
    )
    assert delayed == due[2:]
    wait_until(lambda: len(read_outbox(rt.redis, rt.keys, "sandbox")) == 8, timeout=20)
    assert counts(rt)[("throttled", ("social", "sms", "delay"))] == 6


@pytest.mark.parametrize(
    "throttle",
    [
        {"limit": 0, "period": 60},
        {"limit": 10_001, "period": 60},
        {"limit": "3", "period": 60},
        {"limit": 3},
        {"limit": 3, "period": 0},
        {"limit": 3, "period": "8d"},
        {"limit": 3, "period": 60, "over": "digest"},
        {"limit": 3, "period": 60, "every": 1},
        [3, 60],
    ],
)
def test_a_bad_throttle_is_refused_and_nothing_is_stored(rt: Any, throttle: Any) -> None:
    before = rt.redis.hgetall(rt.keys.categories)
    with pytest.raises(InvalidInput) as refused:
        declare(throttle)
    assert refused.value.code == "e.cmd.noti.cat.bad"
    assert rt.redis.hgetall(rt.keys.categories) == before


def test_a_critical_category_is_never_throttled(rt: Any) -> None:
    with pytest.raises(InvalidInput, match="never throttled"):
        recipients.put_category(
            "security", {"critical": True, "throttle": {"limit": 1, "period": 60}}, user=MEMBER
        )
    recipients.put_category("security", {"critical": True}, user=MEMBER)
    sent = [
        noti.notify(recipient="42", template="comment", data={"n": i}, category="security", channels=["sms"])
        for i in range(5)
    ]
    assert all(next(iter(noti.get_notice(i).entries)).state == "queued" for i in sent)


def test_a_throttle_reads_back_with_its_category(rt: Any) -> None:
    declare({"limit": 3, "period": "1h", "over": "delay"})
    [social] = [c for c in recipients.list_categories() if c.name == "social"]
    assert social.to_dict()["throttle"] == {"limit": 3, "period": 3600.0, "over": "delay"}


def test_a_digesting_throttle_puts_what_is_over_it_into_one_digest_sent_when_it_fits(rt: Any) -> None:
    from noti.recipients.api import recipients as api

    # given: at most 2 per second on each channel, what is over it digested through social_digest
    text = "{{ count }} more: {% for e in events %}{{ e.n }} {% endfor %}"
    recipients.put_template(
        "social_digest", {"default_locale": "en", "channels": {"sms": {"en": {"text": text}}}}
    )
    declare({"limit": 2, "period": 1, "over": "digest", "template": "social_digest"})
    # when: five notices at once
    made = burst("42", 5, producers=1)
    # then: two sent, three into one digest window (their "record": the notice it will make)
    assert states(made) == ["digested"] * 3 + ["queued"] * 2
    windows = {e.record for n in made for e in n.entries if e.state == "digested"}
    assert len(windows) == 1
    [window] = windows
    assert counts(rt)[("throttled", ("social", "sms", "digest"))] == 3
    # the window is due when a send fits again; its notice is the digest, on SMS alone
    done = api().digests.tick(now=int(time.time() * 1000) + 1001)
    assert done.made == [window]
    digest = noti.get_notice(window)
    [entry] = digest.entries
    assert entry.channel == "sms" and entry.state in ("queued", "throttled")  # never digested again
    assert rt.store.get(entry.record).fields["text"] == "3 more: 2 3 4 "


def test_a_digesting_throttle_needs_its_template() -> None:
    from noti.recipients.categories import parse_category

    for throttle in ({"limit": 1, "period": 60, "over": "digest"},
                     {"limit": 1, "period": 60, "over": "drop", "template": "t"},
                     {"limit": 1, "period": 60, "over": "digest", "template": "bad name"}):  # fmt: skip
        with pytest.raises(InvalidInput, match="throttle.template"):
            parse_category("social", {"throttle": throttle})
