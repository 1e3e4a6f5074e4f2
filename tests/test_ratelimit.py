"""A provider's rate limit serves its tokens in precedence order (noti/providers/ratelimit.py).

The gate is tested on its own first (tokens are handed out by setting the bucket: the rate is
so slow that none arrive by themselves), then with a real worker: one user floods a
rate-limited SMS account while others send, and the others' notifications go out after only a
few of the flood's, not after its backlog.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

import noti
from noti.core.record import Status
from noti.providers.ratelimit import LINGER_S
from tests.conftest import ALICE, BOB, MEMBER, sandbox_outbox, wait_until

PHONE = "+8613912345678"
#: One token in 1,000 s: no token arrives during a test unless the test puts it there.
SLOW = 0.001
#: Long enough that a place is never given up for its wait in these tests.
PATIENT = 10_000.0


def ask(rt: Any, contender: str, *, level: int = 1, user: str = "u", hold_s: float = PATIENT) -> float:
    return float(
        rt.rate_limiter.acquire(
            "vendor", rate_per_s=SLOW, burst=5, contender=contender, level=level, user=user, hold_s=hold_s
        )
    )


def give_tokens(rt: Any, n: float) -> None:
    rt.redis.hset(rt.keys.rate_bucket("vendor"), mapping={"tokens": n})


def line(rt: Any) -> list[str]:
    return list(rt.redis.zrange(rt.keys.rate_line("vendor"), 0, -1))


def test_a_token_goes_to_the_highest_level_in_line_not_to_the_first_to_ask(rt: Any) -> None:
    # given an empty bucket and a level-1 record already waiting in line
    give_tokens(rt, 0)
    assert ask(rt, "low", level=1) > 0
    assert ask(rt, "high", level=100) > 0
    assert line(rt) == ["high", "low"]
    # when one token arrives
    give_tokens(rt, 1)
    # then the level-1 record, though it asked first and asks first again, does not get it
    assert ask(rt, "low", level=1) > 0
    assert ask(rt, "high", level=100) == 0
    assert line(rt) == ["low"]
    # and with the next token it does
    give_tokens(rt, 1)
    assert ask(rt, "low", level=1) == 0
    assert line(rt) == []


def test_within_a_level_a_user_with_many_waiting_stands_behind_a_user_with_few(rt: Any) -> None:
    # given one user with six records in line before another user's single record, same level
    give_tokens(rt, 0)
    flood = [f"f{i}" for i in range(6)]
    for contender in flood:
        ask(rt, contender, user="flood")
    ask(rt, "calm", user="calm")
    # then the newcomer stands beside the flood's first record (both started now: the same
    # millisecond goes by id), before every other one of the flood's
    assert set(line(rt)[:2]) == {"f0", "calm"} and line(rt)[2:] == ["f1", "f2", "f3", "f4", "f5"]
    # and two tokens go to those two, whatever order they ask in
    give_tokens(rt, 2)
    assert ask(rt, "f5", user="flood") > 0
    assert ask(rt, "calm", user="calm") == 0
    assert ask(rt, "f1", user="flood") > 0
    assert ask(rt, "f0", user="flood") == 0


def test_the_wait_answered_is_the_time_until_the_places_before_are_served(rt: Any) -> None:
    give_tokens(rt, 0)
    waits = [ask(rt, f"r{i}") for i in range(3)]
    # one token every 1,000 s: the first waits for one, the third for three
    assert [round(w / 1000) for w in waits] == [1, 2, 3]


def test_a_wait_longer_than_the_sender_holds_gives_the_place_up(rt: Any) -> None:
    # given a record that will not wait 1,000 s in line
    give_tokens(rt, 0)
    wait_s = ask(rt, "impatient", hold_s=1.0)
    # then it is told how long, and it is not in line (it is postponed, and comes back anew)
    assert wait_s > 1.0
    assert line(rt) == []
    assert rt.redis.zcard(rt.keys.rate_back("vendor")) == 0


def test_a_place_whose_sender_does_not_come_back_is_forgotten(rt: Any) -> None:
    # given a fast limit (10 a second, a bucket of 1) whose token was just taken
    def take(contender: str) -> float:
        return float(rt.rate_limiter.acquire("fast", rate_per_s=10, burst=1, contender=contender, hold_s=1.0))

    assert take("first") == 0
    # and a record that got a place ~0.1 s away, whose worker then died
    assert 0 < take("dead") <= 0.2
    # when another asks after that place's wait and its linger have passed
    time.sleep(0.2 + LINGER_S + 0.1)
    # then the dead sender's place is gone and the token is the newcomer's
    assert take("alive") == 0
    assert rt.redis.zcard(rt.keys.rate_line("fast")) == 0


def test_a_flooding_users_clock_runs_at_most_the_horizon_ahead(rt: Any) -> None:
    from noti.providers.ratelimit import HORIZON_S

    give_tokens(rt, 0)
    for i in range(50):  # each place is 1,000 s of tokens at this rate
        ask(rt, f"f{i}", user="flood")
    clock_ms = rt.redis.zscore(rt.keys.rate_clock("vendor"), "flood")
    now_ms = time.time() * 1000
    assert now_ms < clock_ms <= now_ms + HORIZON_S * 1000 + 1000


def test_levels_outside_the_range_are_held_to_it(rt: Any) -> None:
    give_tokens(rt, 0)
    ask(rt, "below", level=-5)
    ask(rt, "above", level=10**6)
    ask(rt, "top", level=1000)
    assert line(rt)[0] in {"above", "top"} and line(rt)[-1] == "below"


def test_another_users_notifications_overtake_a_flood_through_a_real_worker(
    configure: Any, start_worker_now: Any
) -> None:
    # given an SMS account limited to 20 requests a second, and a backlog of 150 level-1 SMS
    # from one user
    rt = configure(providers={"account": {"kind": "sandbox", "rate_limit_per_s": 20, "rate_burst": 1}})
    flood = [noti.notify_sms(PHONE, f"flood {i}", provider="account", user=ALICE) for i in range(150)]
    with start_worker_now():
        wait_until(lambda: len(sandbox_outbox(rt, "account")) >= 10, timeout=30)
        # when, mid-flood, a root member sends level-100 SMS and another plain user level-1 SMS
        urgent = [
            noti.notify_sms(PHONE, f"urgent {i}", provider="account", user=MEMBER, lv=100) for i in range(3)
        ]
        other = [noti.notify_sms(PHONE, f"other {i}", provider="account", user=BOB) for i in range(3)]
        before = len(sandbox_outbox(rt, "account"))
        wait_until(lambda: all(rt.store.get(i).status is Status.DONE for i in urgent + other), timeout=60)
        sent = [entry["id"] for entry in sandbox_outbox(rt, "account")]
    # then each went out after a handful of the flood's SMS, not after the flood's backlog
    # (about 140 SMS, 7 s of the account's rate, were still waiting when they were added)
    flood_left = sum(1 for i in flood if i not in sent[:before])
    assert flood_left > 100
    for record_id in urgent + other:
        overtaken_by = sum(1 for i in sent[before : sent.index(record_id)] if i in set(flood))
        assert overtaken_by <= 5, (record_id, overtaken_by)
    assert all(rt.store.get(i).retry == 0 for i in urgent + other)  # waiting is not an attempt


def test_status_and_the_metrics_show_each_line_and_who_runs_ahead(configure: Any) -> None:
    from noti.observe.prometheus import metrics_of
    from noti.observe.snapshot import Observer
    from tests.test_cli import run

    # given a provider at 1 a second with an empty bucket, four records of one user and one
    # of another waiting in its line (a token is 1 s of the provider's time: the leads shrink as
    # the test runs, and a second leaves room for a slow machine's CLI runs)
    rt = configure(providers={"vendor": {"kind": "sandbox", "rate_limit_per_s": 1, "rate_burst": 1}})
    give_tokens(rt, 0)
    for i in range(4):
        rt.rate_limiter.acquire("vendor", rate_per_s=1, burst=1, contender=f"f{i}", user="flood", hold_s=60)
    rt.rate_limiter.acquire("vendor", rate_per_s=1, burst=1, contender="c", user="calm", hold_s=60)
    # then the snapshot shows the line and the flooding user furthest ahead of its share
    [line] = Observer(rt).snapshot().rate_lines
    assert line.provider == "vendor" and line.waiting == 5
    assert [user for user, _ in line.leads] == ["flood", "calm"]
    assert 3 < dict(line.leads)["flood"] <= 4 and 0 < dict(line.leads)["calm"] <= 1
    # and so do noti status (JSON and screen) and the Prometheus metrics
    shown = run("status", "-json")
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["rate_lines"][0]["waiting"] == 5
    assert re.search(
        r"vendor: 5 in line; users ahead of their share: flood \+[34]\.\ds, calm \+[01]\.\ds",
        run("status").stdout,
    )
    samples = {
        (sample.name, sample.labels.get("provider")): sample.value
        for family in metrics_of(Observer(rt).snapshot())
        for sample in family.samples
    }
    assert samples[("noti_rate_line_waiting", "vendor")] == 5
    assert 3 < samples[("noti_rate_user_lead_max_seconds", "vendor")] <= 4
