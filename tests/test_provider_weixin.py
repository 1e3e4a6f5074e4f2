"""The weixin provider against a faithful fake of WeChat's token and template-send endpoints."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

import noti
from noti.channels.weixin.provider import ALREADY_SENT, ERRORS, WeixinProvider
from noti.core.attempt import ClaimState
from noti.core.record import Channel, Status
from noti.core.retry import RetryPolicy, decide
from noti.errors import (
    AmbiguousOutcome,
    DeliveryError,
    InvalidInput,
    PermanentFailure,
    ProviderMisconfigured,
    ProviderOutage,
    RateLimited,
    RecipientOptedOut,
    StaleCredential,
    TemporaryFailure,
)
from noti.providers import Message
from tests.conftest import wait_until
from tests.fakes._server import Reply
from tests.fakes.weixin import WeixinFake, error

APPID, SECRET = "wx5f0a1b2c3d4e5f60", "0123456789abcdef0123456789abcdef"
OPENID = "oUpF8uMuAJO_M2pxb1Q9zNjWeS6o"
TMPL = "ngqIpbwh8bUfcSsECmogfXcV14J0tQlEpBO27izEYtY"
CONTENT = {"first": {"value": "Order paid"}, "keyword1": {"value": "42.00"}}


@pytest.fixture
def fake() -> Iterator[WeixinFake]:
    with WeixinFake({APPID: SECRET}, templates={TMPL}) as server:
        assert isinstance(server, WeixinFake)
        yield server


def wx_options(base_url: str, *, secret: str = SECRET, appid: str = APPID, **extra: Any) -> dict[str, Any]:
    return {
        "kind": "weixin",
        "base_url": base_url,
        "accounts": {"shop": {"appid": appid, "secret": secret}},
        "timeout_s": 1.0,
        **extra,
    }


@pytest.fixture
def wx(configure: Any, fake: WeixinFake) -> Any:
    """A runtime whose weixin channel goes to the fake; short retries."""
    return configure(
        providers={"wx": wx_options(fake.url)}, channels={"weixin": {"provider": "wx"}}, retry_seconds=0.1
    )


def provider(rt: Any) -> WeixinProvider:
    instance = rt.providers.get("wx")
    assert isinstance(instance, WeixinProvider)
    return instance


def message(record_id: str = "01JTESTRECORD0000000000001", **fields: Any) -> Message:
    return Message(
        id=record_id,
        channel=Channel.WEIXIN,
        target=OPENID,
        fields={"pnb": "shop", "tmpl": TMPL, "content": CONTENT, **fields},
    )


def add(**kwargs: Any) -> str:
    options: dict[str, Any] = {"tmpl": TMPL, "pnb": "shop", "content": CONTENT, **kwargs}
    return noti.notify_weixin(OPENID, **options)


def send_now(rt: Any, record_id: str) -> Any:
    [result] = noti.send(record_id)
    assert result.claim is ClaimState.CLAIMED, result
    return rt.store.get(record_id)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


# --- success ------------------------------------------------------------------------------------


def test_a_template_message_is_sent_with_a_cached_token_and_its_msgid_stored(
    wx: Any, fake: WeixinFake
) -> None:
    # given a stored weixin record
    record_id = add(url="https://shop.example/o/1")
    # when it is sent
    record = send_now(wx, record_id)
    # then WeChat got the template message, keyed by the record id, and the record is done
    [sent] = fake.sent
    assert sent["touser"] == OPENID and sent["template_id"] == TMPL and sent["data"] == CONTENT
    assert sent["url"] == "https://shop.example/o/1" and sent["client_msg_id"] == record_id
    assert record.status is Status.DONE and record.errmsg == "ok" and record.sent_by == "wx"
    assert record.msgid == str(sent["msgid"])
    assert wx.redis.hget(wx.keys.record(record_id), "noti_wx_tmpl_msgid") == str(sent["msgid"])
    # and the token is cached for all workers, for expires_in less the grace
    token_key = wx.keys.weixin_token(APPID)
    assert wx.redis.get(token_key) == fake.current_token(APPID)
    assert 7200 - 60 - 5 <= wx.redis.ttl(token_key) <= 7200 - 60
    assert fake.send_calls[0].query["access_token"] == [fake.current_token(APPID)]


def test_many_sends_fetch_the_token_once(wx: Any, fake: WeixinFake) -> None:
    for n in range(5):
        provider(wx).send(message(f"01JTESTRECORD00000000000{n:02d}"))
    assert fake.token_calls == 1 and len(fake.sent) == 5


def test_threads_of_one_worker_fetch_the_token_once(wx: Any, fake: WeixinFake) -> None:
    # given an empty token cache and 8 sends starting at once
    fake.delay_s = 0.05  # every answer takes a while, so the sends overlap
    wx_provider = provider(wx)
    barrier = threading.Barrier(8)
    receipts: list[Any] = []

    def one(n: int) -> None:
        barrier.wait()
        receipts.append(wx_provider.send(message(f"01JTESTRECORD0000000000T{n:02d}")))

    threads = [threading.Thread(target=one, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    # then one of them fetched the token and the others waited for it
    assert len(receipts) == 8 and fake.token_calls == 1


def test_a_send_waits_for_the_token_another_worker_is_fetching(wx: Any, fake: WeixinFake) -> None:
    # given another worker holds the refresh lock
    lock = wx.redis.lock(wx.keys.lock(f"weixin:{APPID}"), timeout=10, thread_local=False)
    assert lock.acquire(blocking=False)
    # when it stores the token it fetched while this send waits
    token = httpx.post(
        f"{fake.url}/cgi-bin/stable_token",
        json={"grant_type": "client_credential", "appid": APPID, "secret": SECRET},
    ).json()["access_token"]
    timer = threading.Timer(0.3, lambda: wx.redis.set(wx.keys.weixin_token(APPID), token, ex=600))
    timer.start()
    receipt = provider(wx).send(message())
    timer.join()
    lock.release()
    # then the send used it and never called the token endpoint itself
    assert receipt.msgid == str(fake.sent[0]["msgid"])
    assert fake.token_calls == 1


def test_a_send_gives_up_waiting_for_a_token_that_never_comes(configure: Any, fake: WeixinFake) -> None:
    rt = configure(providers={"wx": wx_options(fake.url, refresh_wait_s=0.2)})
    lock = rt.redis.lock(rt.keys.lock(f"weixin:{APPID}"), timeout=10, thread_local=False)
    assert lock.acquire(blocking=False)
    with pytest.raises(RateLimited) as info:  # not an attempt: nothing was sent
        provider(rt).send(message())
    lock.release()
    assert info.value.retry_after_s > 0 and fake.token_calls == 0


def test_a_repeated_client_msg_id_is_sent_once(wx: Any, fake: WeixinFake) -> None:
    first = provider(wx).send(message())
    again = provider(wx).send(message())
    assert first.msgid == again.msgid and len(fake.sent) == 1


# --- the classification table -------------------------------------------------------------------


@pytest.mark.parametrize(("code", "expected"), sorted(ERRORS.items()))
def test_each_errcode_raises_its_class(wx: Any, fake: WeixinFake, code: str, expected: type) -> None:
    provider(wx).send(message("01JTESTRECORD0000000000W01"))  # the token is fetched and cached
    fake.script(error(int(code)))
    with pytest.raises(DeliveryError) as info:
        provider(wx).send(message())
    assert type(info.value) is expected
    assert info.value.vendor_code == code and info.value.provider == "wx"
    assert " rid: " in info.value.message  # WeChat's errmsg is kept for the record
    if expected is RateLimited:
        assert info.value.retry_after_s == 60.0


def test_the_table_covers_every_code_of_the_facts() -> None:
    facts = {-1, 40001, 40003, 40013, 40014, 40036, 40037, 40164, 41001, 42001, 43004, 43101, 45009}
    facts |= {47001, 47003, 48001, 40125, 41002, 41004, 43116, 43117, 40241, 45065, 40243, 45011}
    assert {str(c) for c in facts} == set(ERRORS) | ALREADY_SENT
    assert not set(ERRORS) & ALREADY_SENT


@pytest.mark.parametrize(
    ("code", "status", "retry"),
    [
        (-1, Status.WAITING, 1),  # R: retried, counted
        (45009, Status.WAITING, 1),  # F: no other provider: counted
        (43117, Status.WAITING, 0),  # D: waits, not an attempt
        (40003, Status.INVALID, 0),  # P
        (43101, Status.INVALID, 0),  # O
        (40037, Status.FAILED, 0),  # C
    ],
)
def test_errcodes_decide_the_record(wx: Any, fake: WeixinFake, code: int, status: Status, retry: int) -> None:
    record_id = add()
    fake.script(error(code))
    record = send_now(wx, record_id)
    assert record.status is status and record.retry == retry
    assert f"errcode {code}" in record.errmsg
    if code == 43101:
        assert wx.store.is_suppressed("weixin", OPENID)


def test_errors_decide_like_the_policy_says(wx: Any, fake: WeixinFake) -> None:
    record = wx.store.get(add())
    fake.script(error(43004))
    with pytest.raises(RecipientOptedOut) as info:
        provider(wx).send(Message.from_record(record))
    assert decide(record, info.value, policy=RetryPolicy(), now_ms=0).status is Status.INVALID


@pytest.mark.parametrize("code", sorted(ALREADY_SENT))
def test_already_sent_answers_are_success_and_never_resent(wx: Any, fake: WeixinFake, code: str) -> None:
    record_id = add()
    fake.script(error(int(code), msgid=2002283329999) if code == "45065" else error(int(code)))
    record = send_now(wx, record_id)
    assert record.status is Status.DONE and record.retry == 0
    assert record.msgid == ("2002283329999" if code == "45065" else None)
    assert len(fake.send_calls) == 1


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (Reply(200, "<html>gateway</html>", {"content-type": "text/html"}), AmbiguousOutcome),
        (Reply(200, {"errcode": "zero"}), AmbiguousOutcome),
        (Reply(502, "bad gateway"), AmbiguousOutcome),
        (Reply(429, "slow down", {"retry-after": "7"}), RateLimited),
        (Reply(404, "not found"), ProviderMisconfigured),
    ],
)
def test_http_answers_that_are_not_wechats(wx: Any, fake: WeixinFake, reply: Reply, expected: type) -> None:
    provider(wx).send(message("01JTESTRECORD0000000000W01"))
    fake.script(reply)
    with pytest.raises(DeliveryError) as info:
        provider(wx).send(message())
    assert type(info.value) is expected
    if expected is RateLimited:
        assert info.value.retry_after_s == 7.0


# --- the access token ---------------------------------------------------------------------------


def test_a_revoked_token_is_refreshed_once_and_the_send_succeeds(wx: Any, fake: WeixinFake) -> None:
    # given a cached token that WeChat revokes after some sends
    for _ in range(3):
        assert send_now(wx, add()).status is Status.DONE
    old = fake.current_token(APPID)
    fake.revoke(APPID)
    # when the next record is sent
    record = send_now(wx, add())
    # then the refused token was dropped, one new token fetched, and the send retried at once
    assert record.status is Status.DONE and record.retry == 0
    assert fake.token_calls == 2 and len(fake.sent) == 4
    assert [r.query["access_token"][0] == old for r in fake.send_calls] == [True] * 4 + [False]
    assert wx.redis.get(wx.keys.weixin_token(APPID)) == fake.current_token(APPID) != old


@pytest.mark.parametrize("code", [40001, 40014, 42001])
def test_a_token_error_drops_the_cached_token(wx: Any, fake: WeixinFake, code: int) -> None:
    provider(wx).send(message("01JTESTRECORD0000000000W01"))
    token = wx.redis.get(wx.keys.weixin_token(APPID))
    fake.script(error(code))
    with pytest.raises(StaleCredential) as info:
        provider(wx).send(message())
    assert wx.redis.get(wx.keys.weixin_token(APPID)) is None
    assert token not in str(info.value)


def test_a_stale_token_never_drops_a_newer_one(wx: Any, fake: WeixinFake) -> None:
    # given a send with the cached token, refused after another worker cached a newer one
    provider(wx).send(message("01JTESTRECORD0000000000W01"))
    token_key = wx.keys.weixin_token(APPID)
    fake.script(Reply(200, error(40001).body, hang_s=0.5))
    timer = threading.Timer(0.1, lambda: wx.redis.set(token_key, "newer-token-from-another-worker"))
    timer.start()
    with pytest.raises(StaleCredential):
        provider(wx).send(message())
    timer.join()
    # then the newer token stays cached
    assert wx.redis.get(token_key) == "newer-token-from-another-worker"


def test_a_token_refused_again_after_a_refresh_is_a_configuration_error(wx: Any, fake: WeixinFake) -> None:
    # given WeChat refuses the cached token and the fresh one
    record_id = add()
    send_now(wx, add())
    fake.script(error(40001), error(40001))
    # when the record is sent
    record = send_now(wx, record_id)
    # then the sender tried once more with a new token, then gave up as misconfigured
    assert record.status is Status.FAILED and record.retry == 0
    assert "a fresh access token was refused too" in record.errmsg
    assert fake.token_calls == 2 and len(fake.send_calls) == 3


def test_a_wrong_secret_is_refused_by_the_token_endpoint(configure: Any, fake: WeixinFake) -> None:
    rt = configure(
        providers={"wx": wx_options(fake.url, secret="not-the-secret")},
        channels={"weixin": {"provider": "wx"}},
    )
    record = send_now(rt, add())
    assert record.status is Status.FAILED
    assert "errcode 40125" in record.errmsg and "not-the-secret" not in record.errmsg
    assert fake.sent == [] and fake.send_calls == []
    assert rt.redis.get(rt.keys.weixin_token(APPID)) is None


def test_an_unknown_appid_is_a_configuration_error(configure: Any, fake: WeixinFake) -> None:
    rt = configure(providers={"wx": wx_options(fake.url, appid="wxunknown")})
    with pytest.raises(ProviderMisconfigured) as info:
        provider(rt).send(message())
    assert info.value.vendor_code == "40013"


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (error(-1), TemporaryFailure),
        (error(45009), ProviderOutage),
        (error(40164), ProviderMisconfigured),
        (Reply(200, "not json"), ProviderOutage),
        (Reply(503, "busy"), ProviderOutage),
        (Reply(200, {"access_token": "x", "expires_in": 7200}, hang_s=2.0), ProviderOutage),
    ],
)
def test_token_endpoint_failures(wx: Any, fake: WeixinFake, reply: Reply, expected: type) -> None:
    fake.token_script(reply)
    with pytest.raises(DeliveryError) as info:
        provider(wx).send(message())
    assert type(info.value) is expected and fake.send_calls == []


def test_a_short_lived_token_is_cached_for_half_its_life(configure: Any) -> None:
    with WeixinFake({APPID: SECRET}, expires_in=100) as short:
        rt = configure(providers={"wx": wx_options(short.url)})
        provider(rt).send(message())
        assert 45 <= rt.redis.ttl(rt.keys.weixin_token(APPID)) <= 50


# --- add-time checks ----------------------------------------------------------------------------


def test_an_unknown_account_is_refused_at_add_time(wx: Any) -> None:
    with pytest.raises(InvalidInput) as info:
        add(pnb="nosuchaccount")
    assert info.value.code == "e.cmd.noti.add.badfield" and "shop" in info.value.message
    assert wx.store.count() == 0


@pytest.mark.parametrize("content", [{"first": "Order paid"}, {}, {"first": {"color": "#173177"}}])
def test_content_that_is_not_template_data_is_refused_at_add_time(wx: Any, content: Any) -> None:
    with pytest.raises(InvalidInput) as info:
        add(content=content)
    assert info.value.code == "e.cmd.noti.add.badcontent"
    assert wx.store.count() == 0


def test_a_field_wechat_refuses_is_permanent(wx: Any, fake: WeixinFake) -> None:
    with pytest.raises(PermanentFailure) as info:
        provider(wx).send(message(content={"first": {"value": ""}}))
    assert info.value.vendor_code == "47003" and "data.first.value" in info.value.message


# --- transport ----------------------------------------------------------------------------------


def test_a_timeout_is_ambiguous_and_the_record_waits_for_a_retry(configure: Any, fake: WeixinFake) -> None:
    rt = configure(
        providers={"wx": wx_options(fake.url, timeout_s=0.3)},
        channels={"weixin": {"provider": "wx"}},
        retry_seconds=60,
    )
    provider(rt).send(message("01JTESTRECORD0000000000W01"))
    record_id = add()
    fake.script(Reply(hang_s=1.0))
    with pytest.raises(AmbiguousOutcome):
        provider(rt).send(message())
    fake.script(Reply(hang_s=1.0))
    record = send_now(rt, record_id)
    assert record.status is Status.WAITING and record.retry == 1
    assert "may have been sent" in record.errmsg


def test_connection_refused_is_an_outage(configure: Any) -> None:
    rt = configure(providers={"wx": wx_options(f"http://127.0.0.1:{free_port()}")})
    with pytest.raises(ProviderOutage):
        provider(rt).send(message())


def test_secrets_never_show(wx: Any, fake: WeixinFake) -> None:
    wx_provider = provider(wx)
    receipt = wx_provider.send(message())
    token = fake.current_token(APPID)
    assert token is not None
    for text in (repr(wx_provider), repr(wx_provider.options), str(wx_provider.options), repr(receipt)):
        assert SECRET not in text and token not in text


# --- real workers -------------------------------------------------------------------------------


def test_a_worker_delivers_a_template_message(configure: Any, worker: Any, fake: WeixinFake) -> None:
    rt = configure(providers={"wx": wx_options(fake.url)}, channels={"weixin": {"provider": "wx"}})
    record_id = add(url="https://shop.example/o/2")
    record = wait_until(lambda: (r := rt.store.get(record_id)).status is not Status.WAITING and r)
    assert record.status is Status.DONE and record.msgid == str(fake.sent[0]["msgid"])
    assert [s["client_msg_id"] for s in fake.sent] == [record_id]


@pytest.mark.slow
def test_two_worker_processes_share_one_token(configure: Any, spawn_worker: Any, fake: WeixinFake) -> None:
    # given two worker processes configured for the fake, and an empty token cache
    config = (
        '[channels.weixin]\nprovider = "wx"\n'
        f'[providers.wx]\nkind = "weixin"\nbase_url = "{fake.url}"\ntimeout_s = 5\n'
        f'[providers.wx.accounts.shop]\nappid = "{APPID}"\nsecret = "{SECRET}"\n'
    )
    rt = configure(providers={"wx": wx_options(fake.url)}, channels={"weixin": {"provider": "wx"}})
    fake.delay_s = 0.02
    workers = [spawn_worker(config, "-P", "threads", "-c", "4", name=f"wx{n}") for n in (1, 2)]
    # when 40 notifications are queued at once
    ids = [add(content={"keyword1": {"value": f"n{n}"}}) for n in range(40)]
    # then all are delivered, and the token was fetched once for both processes
    wait_until(lambda: rt.store.count(Status.DONE) == 40, timeout=60)
    assert fake.token_calls == 1
    assert sorted(s["client_msg_id"] for s in fake.sent) == sorted(ids)
    tokens = {r.query["access_token"][0] for r in fake.send_calls}
    assert tokens == {fake.current_token(APPID)}
    for process in workers:
        log = process.output()
        assert "ok via wx" in log, "both processes should have sent some"
        assert SECRET not in log and str(fake.current_token(APPID)) not in log


def test_a_stale_token_after_a_rate_limit_is_stale_again_not_a_configuration_error(
    wx: Any, fake: WeixinFake
) -> None:
    # given: stale token, then (after the refresh) a per-recipient limit — not an attempt
    record_id = add()
    fake.script(error(40001), error(43117))
    record = send_now(wx, record_id)
    assert record.status is Status.WAITING and record.retry == 0
    # when the same attempt later meets a stale token once more
    wx.redis.hset(wx.keys.record(record_id), "noti_timeout_at", 0)
    fake.script(error(40001))
    record = send_now(wx, record_id)
    # then it is refreshed and sent, not failed as misconfigured
    assert record.status is Status.DONE, record.errmsg
