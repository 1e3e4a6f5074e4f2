"""The number pool behind every SMS provider: Aliyun's SignName, Tencent's SignName (or
SenderId), Twilio's From, taken from ``sender_pool`` by real workers sending to the fake
vendors (tests/fakes/): each request carries a pool number, a recipient keeps its number, no
number is in two requests at once, and a killed worker's number comes back (its lease)."""

from __future__ import annotations

import json
import signal
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import noti
from noti.core.record import Status
from noti.errors import InvalidConfig
from noti.numpool import NumberPool, NumberState
from tests.conftest import ADMIN, wait_until
from tests.fakes._server import FakeServer, Received, Reply
from tests.fakes.aliyun import AliyunFake, AliyunTemplate
from tests.fakes.tencent import TencentFake, TencentTemplate
from tests.fakes.twilio import ACCOUNT_SID, AUTH_TOKEN, TwilioFake

PHONES = ["+8613912340001", "+8613912340002", "+8613912340003", "+8613912340004"]
SIGNS = ["通知一", "通知二", "通知三"]
FROMS = ["+15005550006", "+15005550007", "+15005550008"]
IU = NumberState.IDLE_UP


class Watch:
    """What a fake saw: (recipient, sender) per request, and how many requests each sender
    had open at once. A request counts from its arrival until just before its answer is
    written (so before the client can give its number back)."""

    def __init__(self, sender_of: Callable[[Received], tuple[str, str]], hold_s: float) -> None:
        self.sender_of = sender_of
        self.hold_s = hold_s
        self.seen: list[tuple[str, str]] = []
        self.open: Counter[str] = Counter()
        self.most_open: Counter[str] = Counter()
        self.lock = threading.Lock()

    def wrap(self, fake: FakeServer) -> None:
        inner = fake._next

        def _next(received: Received) -> Reply:
            if received.method != "POST":
                return inner(received)
            phone, sender = self.sender_of(received)
            with self.lock:
                self.seen.append((phone, sender))
                self.open[sender] += 1
                self.most_open[sender] = max(self.most_open[sender], self.open[sender])
            threading.Event().wait(self.hold_s)  # a vendor that takes its time
            try:
                return inner(received)
            finally:
                with self.lock:
                    self.open[sender] -= 1

        fake._next = _next  # type: ignore[method-assign]


def _aliyun(received: Received) -> tuple[str, str]:
    params = AliyunFake.params(received)
    return params["PhoneNumbers"], params["SignName"]


def _tencent(received: Received) -> tuple[str, str]:
    body = received.json()
    return body["PhoneNumberSet"][0], body["SignName"]


def _twilio(received: Received) -> tuple[str, str]:
    form = received.form()
    return form["To"][0], form["From"][0]


@pytest.fixture(params=["aliyun", "tencent", "twilio"])
def vendor(request: pytest.FixtureRequest) -> Iterator[tuple[str, dict[str, Any], list[str], Watch]]:
    """A fake vendor, the provider table that reaches it with ``sender_pool = "P"``, the
    pool's numbers, and the watch on its requests."""
    kind = str(request.param)
    fake: FakeServer
    if kind == "aliyun":
        fake = AliyunFake(signs=set(SIGNS), templates={"SMS_200002": AliyunTemplate(("text",), "notice")})
        table: dict[str, Any] = {
            "access_key_id": "LTAItestkey",
            "access_key_secret": "testsecret",
            "template_code": "SMS_200002",
            "text_param": "text",
            "endpoint": fake.url,
        }
        numbers, watch = SIGNS, Watch(_aliyun, 0.02)
    elif kind == "tencent":
        fake = TencentFake(signs=set(SIGNS), templates={"2002": TencentTemplate(1, "notice")})
        table = {
            "secret_id": "AKIDtestsecretid",
            "secret_key": "testsecretkey",
            "sdk_app_id": "1400006666",
            "template_id": "2002",
            "text_param": "text",
            "endpoint": fake.url,
        }
        numbers, watch = SIGNS, Watch(_tencent, 0.02)
    else:
        fake = TwilioFake(numbers=tuple(FROMS))
        table = {"account_sid": ACCOUNT_SID, "auth_token": AUTH_TOKEN, "base_url": fake.url}
        numbers, watch = FROMS, Watch(_twilio, 0.02)
    watch.wrap(fake)
    table.update(kind=kind, sender_pool="P", sender_sticky_s=600, sender_wait_s=30, timeout_s=5)
    with fake:
        yield kind, table, numbers, watch


def pool_of(rt: Any, numbers: list[str]) -> NumberPool:
    pool = NumberPool("P", client=rt.redis, keys=rt.keys, user=ADMIN)
    for number in numbers:
        pool.add(number)
        pool.register(number)
    return pool


def local(phone: str, kind: str) -> str:
    """The recipient as the vendor's request names it."""
    return phone[3:] if kind == "aliyun" else phone


def test_a_worker_sends_each_sms_with_a_pool_number_sticky_and_never_shared(
    configure: Any, vendor: tuple[str, dict[str, Any], list[str], Watch], start_worker_now: Any
) -> None:
    # given a provider drawing its sender from pool P (three numbers), sticky per recipient
    kind, table, numbers, watch = vendor
    rt = configure(providers={"pooled": table}, channels={"sms": {"provider": "pooled"}})
    pool = pool_of(rt, numbers)

    # when a real worker sends three SMS to each of four phones, all at once
    with start_worker_now():
        ids = [noti.notify_sms(phone, f"m{i}", user=ADMIN) for i in range(3) for phone in PHONES]
        wait_until(lambda: all(rt.store.get(i).status is Status.DONE for i in ids), timeout=60, interval=0.05)

    # then every request carried one of the pool's numbers...
    assert len(watch.seen) == 12
    assert {sender for _, sender in watch.seen} <= set(numbers)
    # ...the same one for the same phone...
    by_phone: dict[str, set[str]] = {}
    for phone, sender in watch.seen:
        by_phone.setdefault(phone, set()).add(sender)
    assert sorted(by_phone) == sorted(local(p, kind) for p in PHONES)
    assert all(len(senders) == 1 for senders in by_phone.values()), by_phone
    # ...no number was in two requests at once, and every number is free again
    assert set(watch.most_open.values()) == {1}
    assert pool.numbers() == dict.fromkeys(numbers, IU)
    assert rt.redis.zcard(rt.keys.numpool("P", "leases")) == 0
    # and no attempt was spent waiting for a number
    assert {rt.store.get(i).retry for i in ids} == {0}


def test_without_sender_pool_the_table_must_name_its_sender(
    configure: Any, vendor: tuple[str, dict[str, Any], list[str], Watch]
) -> None:
    kind, table, _, _ = vendor
    del table["sender_pool"]
    configure(providers={"pooled": table})
    with pytest.raises(InvalidConfig, match="sign_name|from"):
        noti.notify_sms(PHONES[0], "x", provider="pooled", user=ADMIN)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"sender_pool": "has space"}, "sender_pool"),
        ({"sender_pool": "{tag}"}, "sender_pool"),
        ({"sender_lease_s": 5}, "sender_lease_s"),  # not more than timeout_s: a live send would lose it
        ({"sender_lease_s": -1}, "sender_lease_s"),
        ({"sender_wait_s": float("nan")}, "sender_wait_s"),
        ({"sender_wait_s": -0.5}, "sender_wait_s"),
        ({"sender_wait_s": 0}, "sender_wait_s"),
        ({"sender_sticky_s": "soon"}, "sender_sticky_s"),
    ],
)
def test_bad_pool_options_are_refused_with_a_code_and_nothing_is_stored(
    configure: Any, vendor: tuple[str, dict[str, Any], list[str], Watch], change: dict[str, Any], field: str
) -> None:
    _, table, _, _ = vendor
    rt = configure(providers={"pooled": {**table, **change}})
    with pytest.raises(InvalidConfig, match=field) as info:
        noti.notify_sms(PHONES[0], "x", provider="pooled", user=ADMIN)
    assert info.value.code == "e.noti.config"
    assert rt.redis.dbsize() == 0


def test_a_killed_workers_number_comes_back_when_its_lease_ends(
    configure: Any, spawn_worker: Any, redis_url: str
) -> None:
    # given a Twilio account whose answer never comes, and a pool with one number
    with TwilioFake(numbers=(FROMS[0],)) as fake:
        assert isinstance(fake, TwilioFake)
        fake.script(Reply(hang_s=60))
        table = {
            "kind": "twilio",
            "account_sid": ACCOUNT_SID,
            "auth_token": AUTH_TOKEN,
            "base_url": fake.url,
            "sender_pool": "P",
            "timeout_s": 20,
            "sender_lease_s": 21,
        }
        rt = configure(providers={"tw": table}, channels={"sms": {"provider": "tw"}})
        pool = pool_of(rt, FROMS[:1])
        in_worker = {**table, "sender_lease_s": 9, "timeout_s": 8}
        config = '[channels.sms]\nprovider = "tw"\n[providers.tw]\n' + "".join(
            f"{key} = {json.dumps(value)}\n" for key, value in in_worker.items()
        )
        proc = spawn_worker(config)

        # when the worker is killed while its request is in flight (the number is busy)
        noti.notify_sms(PHONES[0], "hello", user=ADMIN)
        wait_until(lambda: len(fake.requests) == 1, timeout=30)
        assert pool.state(FROMS[0]) is NumberState.BUSY_UP
        proc.proc.send_signal(signal.SIGKILL)
        proc.proc.wait(10)

        # then its number is free again once the lease ends (any script call reclaims it)
        wait_until(lambda: pool.state(FROMS[0]) is IU, timeout=30, interval=0.1)
        assert rt.redis.zcard(rt.keys.numpool("P", "leases")) == 0
        # and the next send takes it
        fake.reset()
        record_id = noti.notify_sms(PHONES[1], "again", provider="tw", user=ADMIN)
        [result] = noti.send(record_id, user=ADMIN)
        assert result.mark == "OK"
        assert [r.form()["From"] for r in fake.requests] == [[FROMS[0]]]
