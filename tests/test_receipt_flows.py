"""Receipts end to end: a notification sent by a real worker through a vendor's fake, whose
signed receipt the fake pushes to a real ``noti serve`` on loopback, which moves the record to
delivered or undelivered; an SMS's e-mail fallback fires once, and only when no receipt came.

Twilio posts to the send's ``StatusCallback``, WeChat to its server URL (query signature),
Tencent Cloud and Aliyun to their callback URLs with noti's receipt key.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import noti
from noti.core.record import Status
from noti.providers.sandbox import read_outbox
from tests.conftest import serving_api, wait_until
from tests.fakes.weixin import WeixinFake
from tests.receipt_vendors import RECEIPT_KEY, WX_APPID, WX_SECRET, WX_TOKEN, authenticated, receiving
from tests.servers import ApiProcess, free_port
from tests.sms_vendors import ALIYUN, CN_FAILING, CN_PHONE, TENCENT, TWILIO, US_FAILING, US_PHONE

pytestmark = [pytest.mark.integration, pytest.mark.slow]


KEY = RECEIPT_KEY
#: The kinds by the name of their provider here.
KINDS = {"ali": "aliyun", "tc": "tencent", "tw": "twilio", "wx": "weixin", "sb": "sandbox"}
TMPL = "ngqIpbwh8bUfcSsECmogfXcV14J0tQlEpBO27izEYtY"
OPENID, BLOCKED = "oUpF8uMuAJO_M2pxb1Q9zNjWeS6o", "oUpF8uMuAJO_blockedXXXXXXXXX"
EMAIL = {"type": "email", "to": "li@example.com", "subject": "Your code", "text": "It is 4321"}


@pytest.fixture(scope="module")
def fakes() -> Iterator[dict[str, Any]]:
    with (
        TWILIO.fake() as twilio,
        WeixinFake({WX_APPID: WX_SECRET}, templates={TMPL}) as weixin,
        TENCENT.fake("verification") as tencent,
        ALIYUN.fake("notice") as aliyun,
    ):
        yield {"tw": twilio, "wx": weixin, "tc": tencent, "ali": aliyun}


def _providers(fakes: dict[str, Any], public: str) -> dict[str, dict[str, Any]]:
    """The four vendors' providers, reaching their fakes and taking their receipts (Twilio's
    posted to ``public``); and the sandbox."""
    return {
        "tw": TWILIO.options(fakes["tw"].url, status_callback=f"{public}/v1/receipts/tw"),
        "wx": receiving("weixin", base_url=fakes["wx"].url, timeout_s=2),
        "tc": TENCENT.options(fakes["tc"].url, receipt_key=KEY),
        "ali": ALIYUN.options(fakes["ali"].url, receipt_key=KEY),
        "sb": receiving("sandbox"),
    }


def _toml(tables: dict[str, Any], prefix: str) -> str:
    """``tables`` as TOML tables under ``prefix`` (strings, numbers and nested tables)."""
    lines: list[str] = []
    for name, table in tables.items():
        lines.append(f"[{prefix}.{name}]")
        nested = {k: v for k, v in table.items() if isinstance(v, dict)}
        lines += [f"{k} = {json.dumps(v, ensure_ascii=False)}" for k, v in table.items() if k not in nested]
        for key, sub in nested.items():
            lines.append(_toml(sub, f"{prefix}.{name}.{key}"))
    return "\n".join(lines) + "\n"


@pytest.fixture
def flows(
    rt: Any, worker: Any, configure: Any, fakes: dict[str, Any], redis_url: str, tmp_path: Path
) -> Iterator[tuple[Any, ApiProcess]]:
    """The runtime of this process's worker and a ``noti serve`` taking the vendors' receipts,
    both configured with the four vendors' fakes (after ``rt`` and the worker: the runtime
    configured last is the one used) (SMS through Aliyun unless a record names
    its provider; e-mail through the sandbox)."""
    port = free_port()
    public = f"http://127.0.0.1:{port}"
    providers = _providers(fakes, public)
    channels = {"sms": {"provider": "ali"}, "weixin": {"provider": "wx"}, "email": {"provider": "sandbox"}}
    config = tmp_path / "noti.toml"
    config.write_text(_toml(providers, "providers") + _toml(channels, "channels"))
    for fake in fakes.values():
        fake.receipt_delay_s, fake.auto_receipts = 0.0, True
    fakes["wx"].receipt_url = f"{public}/v1/receipts/wx"
    fakes["wx"].callback_token = WX_TOKEN
    fakes["tc"].receipt_url = f"{public}/v1/receipts/tc?key={KEY}"
    fakes["ali"].receipt_url = f"{public}/v1/receipts/ali?key={KEY}"
    runtime = configure(
        providers=providers, channels=channels, pump_interval_s=0.1, receipt_poll_interval_s=3600
    )
    with serving_api(redis_url, config, port=port, NOTI_PUBLIC_URL=public) as api:
        yield runtime, api
        for fake in fakes.values():
            fake.deliver_to(CN_FAILING)
            fake.deliver_to(US_FAILING)
            fake.deliver_to(BLOCKED)


def delivery(rt: Any, record_id: str, timeout: float = 30) -> Any:
    """The record once its delivery is final."""
    return wait_until(
        lambda: (r := rt.store.get(record_id)).delivery in ("delivered", "undelivered") and r, timeout=timeout
    )


@pytest.mark.parametrize(
    ("provider", "good", "bad"),
    [("tw", US_PHONE, US_FAILING), ("tc", CN_PHONE, CN_FAILING), ("ali", CN_PHONE, CN_FAILING)],
)
def test_an_sms_receipt_pushed_by_its_vendor_moves_the_record(
    flows: tuple[Any, ApiProcess], fakes: dict[str, Any], worker: Any, provider: str, good: str, bad: str
) -> None:
    rt, api = flows
    fakes[provider].fail_delivery_to(bad)
    delivered = noti.notify_sms(good, "4321", provider=provider)
    undelivered = noti.notify_sms(bad, "4321", provider=provider)
    ok, ko = delivery(rt, delivered), delivery(rt, undelivered)
    assert ok.status is Status.DONE and ok.sent_by == provider
    assert (ok.delivery, ko.delivery) == ("delivered", "undelivered"), api.output()[-2000:]
    assert ko.delivery_code and ok.delivery_times.keys() >= {"accepted", "delivered"}
    assert ko.status is Status.DONE  # the send itself succeeded: the vendor took it


def test_a_wechat_receipt_moves_the_record(
    flows: tuple[Any, ApiProcess], fakes: dict[str, Any], worker: Any
) -> None:
    rt, api = flows
    fakes["wx"].fail_delivery_to(BLOCKED, "failed:user block")
    content = {"keyword1": {"value": "42.00"}}
    delivered = noti.notify_weixin(OPENID, pnb="shop", tmpl=TMPL, content=content)
    undelivered = noti.notify_weixin(BLOCKED, pnb="shop", tmpl=TMPL, content=content)
    ok, ko = delivery(rt, delivered), delivery(rt, undelivered)
    assert (ok.delivery, ko.delivery) == ("delivered", "undelivered"), api.output()[-2000:]
    assert ko.delivery_code == "failed:user block" and ok.msgid


def test_an_sms_to_email_fallback_fires_once_and_only_without_a_delivery_receipt(
    flows: tuple[Any, ApiProcess], fakes: dict[str, Any], worker: Any
) -> None:
    rt, _ = flows
    fallback = {**EMAIL, "after_s": 2}
    # delivered before the deadline: no e-mail, ever
    fakes["ali"].receipt_delay_s = 0.2
    delivered = noti.notify_sms(CN_PHONE, "4321", fallback=fallback)
    assert delivery(rt, delivered).delivery == "delivered"
    # undelivered: the e-mail at once (before its deadline)
    fakes["ali"].fail_delivery_to(CN_FAILING)
    undelivered = noti.notify_sms(CN_FAILING, "4321", fallback={**EMAIL, "after_s": 600})
    assert delivery(rt, undelivered).delivery == "undelivered"
    # no receipt at all: the e-mail at its deadline
    fakes["ali"].auto_receipts = False
    silent = noti.notify_sms(CN_PHONE, "4321", fallback=fallback)
    records = {
        name: rt.store.get(i) for name, i in (("ok", delivered), ("ko", undelivered), ("silent", silent))
    }
    wait_until(lambda: rt.store.get(records["ko"].fallback).status is Status.DONE, timeout=30)
    wait_until(lambda: rt.store.get(records["silent"].fallback).status is Status.DONE, timeout=30)
    time.sleep(3)  # past every deadline: nothing more goes out
    sent = [e["id"] for e in read_outbox(rt.redis, rt.keys, "sandbox")]
    assert sorted(sent) == sorted([records["ko"].fallback, records["silent"].fallback])
    assert rt.store.get(records["ok"].fallback).errmsg.startswith("e.noti.fallback.unneeded")
    assert rt.store.get(silent).delivery == "accepted"  # the SMS itself is still awaiting its receipt


def test_beat_asks_a_vendor_without_pushes_and_applies_its_answers(
    configure: Any, fakes: dict[str, Any]
) -> None:
    from noti.sending.poll import poll_receipts
    from noti.sending.sender import Sender

    # given Aliyun with no receipt key (so it is polled), and one message of each outcome
    options = {k: v for k, v in _providers(fakes, "http://127.0.0.1:9")["ali"].items() if k != "receipt_key"}
    rt = configure(providers={"ali": options}, channels={"sms": {"provider": "ali"}})
    fakes["ali"].receipt_url, fakes["ali"].auto_receipts = None, True
    fakes["ali"].fail_delivery_to(CN_FAILING)
    try:
        ok, ko = noti.notify_sms(CN_PHONE, "4321"), noti.notify_sms(CN_FAILING, "4321")
        Sender(rt).deliver_many([ok, ko])
        assert {rt.store.get(i).delivery for i in (ok, ko)} == {"accepted"}

        # when beat's poll runs, then QuerySendDetails' answers are applied
        def polled() -> tuple[str | None, str | None]:
            poll_receipts(rt)
            return rt.store.get(ok).delivery, rt.store.get(ko).delivery

        wait_until(lambda: polled() == ("delivered", "undelivered"), timeout=20, interval=0.2)
        assert rt.redis.zcard(rt.keys.delivery_watch) == 0
    finally:
        fakes["ali"].deliver_to(CN_FAILING)


def test_reports_tencent_hands_out_once_are_held_through_a_redis_outage(
    configure: Any, fakes: dict[str, Any], tmp_path: Path
) -> None:
    import redis

    from noti.errors import StoreUnavailable
    from noti.sending.poll import held_reports, poll_receipts
    from noti.sending.sender import Sender
    from tests.servers import RedisProcess

    GOOD, FAILING = "+8613912340001", "+8613912340002"  # noqa: N806
    # given Tencent polled (no receipt key) on a Redis of the test's own, one SMS of each
    # outcome sent and settled at Tencent, and Redis stopping while Tencent answers the pull
    server = RedisProcess(str(tmp_path))
    url = f"redis://127.0.0.1:{server.port}/0"
    client = redis.Redis.from_url(url)
    server.start(client)
    options = {k: v for k, v in _providers(fakes, "http://127.0.0.1:9")["tc"].items() if k != "receipt_key"}
    tencent = fakes["tc"]
    was = tencent.receipt_url, tencent.auto_receipts
    try:
        rt = configure(redis_url=url, providers={"tc": options}, channels={"sms": {"provider": "tc"}})
        tencent.receipt_url, tencent.auto_receipts = None, False
        tencent.fail_delivery_to(FAILING)  # numbers of its own: Tencent limits one per 30 s
        ok, ko = noti.notify_sms(GOOD, "4321"), noti.notify_sms(FAILING, "4321")
        Sender(rt).deliver_many([ok, ko])
        assert {rt.store.get(i).delivery for i in (ok, ko)} == {"accepted"}
        tencent.settle()
        tencent.on_pull = server.stop
        # when beat's poll runs, then Redis did not take the reports pulled: they are held (ours,
        # and those of the module's earlier sends: a pull hands out every report not pulled yet)
        pulls = tencent.pulls
        with pytest.raises(StoreUnavailable):
            poll_receipts(rt)
        held = held_reports(rt)
        assert tencent.pulls == pulls + 1 and held >= 2
        # and a round while Redis is still away asks no vendor and keeps them
        tencent.on_pull = None
        with pytest.raises(StoreUnavailable):
            poll_receipts(rt)
        assert tencent.pulls == pulls + 1 and held_reports(rt) == held
        # when Redis is back, then the next round applies them (Tencent has none left to give):
        # ours move their records, the others name records this store does not have
        server.start(client)
        assert poll_receipts(rt) == 2 and held_reports(rt) == 0
        assert (rt.store.get(ok).delivery, rt.store.get(ko).delivery) == ("delivered", "undelivered")
        assert rt.redis.zcard(rt.keys.delivery_watch) == 0
        assert poll_receipts(rt) == 0 and tencent.pulls == pulls + 1  # nothing pending: no pull
    finally:
        tencent.on_pull = None
        tencent.deliver_to(FAILING)
        tencent.receipt_url, tencent.auto_receipts = was
        server.stop()


# --- what a receipt may not do (issue 32): through noti serve, as a vendor or an attacker pushes ---


def test_a_keyed_aliyun_push_for_an_unsent_twilio_record_moves_nothing_and_twilios_receipt_wins(
    flows: tuple[Any, ApiProcess], fakes: dict[str, Any], worker: Any
) -> None:
    import httpx

    rt, api = flows
    # given an SMS bound for Twilio, due in 3 s, with a fallback
    record_id = noti.notify_sms(US_PHONE, "4321", provider="tw", delay=3, fallback={**EMAIL, "after_s": 600})
    fallback = rt.store.get(record_id).fallback
    # when a push with Aliyun's receipt key says it was not delivered
    forged = [{"biz_id": "1234^0", "out_id": record_id, "success": False, "err_code": "FORGED"}]
    answer = httpx.post(f"{api.url}/v1/receipts/ali?key={KEY}", json=forged, timeout=10)
    # then Aliyun is answered as it expects, and neither the record nor its fallback moved
    assert answer.status_code == 200 and answer.json() == {"code": 0, "msg": "接收成功"}
    assert rt.store.get(record_id).delivery is None
    assert rt.store.get(fallback).status is Status.WAITING
    assert int(rt.redis.hget(rt.keys.metrics, "receipts|unsent|ali") or 0) == 1
    # when Twilio sends it and its receipt comes, then Twilio's word is the record's
    got = delivery(rt, record_id)
    assert (got.sent_by, got.delivery) == ("tw", "delivered") and got.delivery_code != "FORGED"
    assert rt.store.get(fallback).errmsg.startswith("e.noti.fallback.unneeded")


def _nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


@pytest.mark.parametrize(
    ("provider", "body"),
    [
        ("sb", _nested(100_000)),
        ("ali", _nested(100_000)),
        ("tc", _nested(100_000)),
        ("wx", b"<xml>" + b"<a>" * 50_000 + b"</a>" * 50_000 + b"</xml>"),
        ("tw", b"MessageSid=" + b"%5B" * 50_000 + b"&MessageStatus=delivered"),
    ],
)
def test_a_pathological_receipt_is_400_malformed_never_500(
    flows: tuple[Any, ApiProcess], provider: str, body: bytes
) -> None:
    import httpx

    from noti.channels.sms import twilio_receipts

    _, api = flows
    url = f"{api.url}/v1/receipts/{provider}"
    if provider == "tw":
        url = twilio_receipts.callback_url(url, "01J0000000000000000000000")
    request = authenticated(KINDS[provider], url, body)
    answer = httpx.post(request.url, content=body, headers=request.headers, timeout=30)
    assert answer.status_code == 400, answer.text[:500]
    assert answer.json()["error"]["code"] == "e.noti.receipt.malformed"


#: Keys the running worker writes on its own (heartbeats, renewed locks, kombu's bookkeeping):
#: not what a receipt could have changed.
_BACKGROUND = ("noti:workers", "noti:lock:", "_kombu", "unacked", "noti:beat")


def _stored(client: Any) -> dict[str, str]:
    """Each key's value digest (``DEBUG DIGEST-VALUE``), but those the worker keeps writing."""
    keys = sorted(k for k in client.scan_iter() if not any(part in k for part in _BACKGROUND))
    return (
        dict(zip(keys, client.execute_command("DEBUG", "DIGEST-VALUE", *keys), strict=True)) if keys else {}
    )


def test_a_push_of_more_reports_than_the_cap_is_refused_whole(flows: tuple[Any, ApiProcess]) -> None:
    import httpx

    rt, api = flows
    # given a push of 1,001 reports for ids noti never sent (the default cap is 1,000)
    rows = [{"biz_id": f"{n}^0", "success": True} for n in range(1001)]
    before = _stored(rt.redis)
    answer = httpx.post(f"{api.url}/v1/receipts/ali?key={KEY}", json=rows, timeout=30)
    # then it is refused with its code, and nothing is kept
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "e.noti.receipt.toomany"
    assert _stored(rt.redis) == before
    # and a push at the cap is taken (each kept for its send: ids noti has not recorded)
    answer = httpx.post(f"{api.url}/v1/receipts/ali?key={KEY}", json=rows[:1000], timeout=30)
    assert answer.status_code == 200 and rt.redis.hlen(rt.keys.early_receipts) == 1000
