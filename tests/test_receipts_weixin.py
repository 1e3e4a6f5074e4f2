"""WeChat delivery receipts: the TEMPLATESENDJOBFINISH event the fake pushes after a real
template send, signed in the query with the account's Token; the console's URL check; forged,
stale, encrypted and hostile requests refused."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from noti.channels.weixin.provider import WeixinProvider
from noti.channels.weixin.receipts import signature
from noti.core.record import Channel, new_id
from noti.delivery.state import Delivery, ReceiptRequest
from noti.errors import ReceiptRejected
from noti.providers.base import Message
from tests.fakes._receipts import ReceiptSink, answer_with
from tests.fakes.weixin import WeixinFake

APPID, SECRET = "wx5f0a1b2c3d4e5f60", "0123456789abcdef0123456789abcdef"
TOKEN = "noti-callback-token-1"
OPENID = "oUpF8uMuAJO_M2pxb1Q9zNjWeS6o"
BLOCKED = "oUpF8uMuAJO_blockedXXXXXXXXX"
TMPL = "ngqIpbwh8bUfcSsECmogfXcV14J0tQlEpBO27izEYtY"


@pytest.fixture
def fake() -> Iterator[WeixinFake]:
    with WeixinFake({APPID: SECRET}, templates={TMPL}) as server:
        assert isinstance(server, WeixinFake)
        yield server


@pytest.fixture
def sink(fake: WeixinFake) -> Iterator[ReceiptSink]:
    with ReceiptSink() as running:
        fake.receipt_url = f"{running.url}/v1/receipts/wx"
        fake.callback_token = TOKEN
        yield running


def make(configure: Any, fake: WeixinFake, **extra: Any) -> WeixinProvider:
    options = {
        "kind": "weixin",
        "base_url": fake.url,
        "accounts": {"shop": {"appid": APPID, "secret": SECRET}},
        "timeout_s": 2.0,
        "callback_token": TOKEN,
        **extra,
    }
    rt = configure(providers={"wx": options}, channels={"weixin": {"provider": "wx"}})
    provider = rt.providers.get("wx")
    assert isinstance(provider, WeixinProvider)
    return provider


def template(openid: str = OPENID) -> Message:
    return Message(
        id=new_id(),
        channel=Channel.WEIXIN,
        target=openid,
        fields={"pnb": "shop", "tmpl": TMPL, "content": {"keyword1": {"value": "42.00"}}},
    )


def signed(
    method: str = "POST", body: bytes = b"", *, token: str = TOKEN, at: float | None = None, **extra: str
) -> ReceiptRequest:
    timestamp, nonce = str(int(time.time() if at is None else at)), "1514536952"
    query = f"signature={signature(token, timestamp, nonce)}&timestamp={timestamp}&nonce={nonce}"
    query += "".join(f"&{k}={v}" for k, v in extra.items())
    return ReceiptRequest(
        method, f"https://noti.example.com/v1/receipts/wx?{query}", {"content-type": "text/xml"}, body
    )


def event(msgid: str = "200163836", status: str = "success", name: str = "TEMPLATESENDJOBFINISH") -> bytes:
    return (
        "<xml><ToUserName><![CDATA[gh_7f083739789a]]></ToUserName>"
        f"<FromUserName><![CDATA[{OPENID}]]></FromUserName><CreateTime>1395658920</CreateTime>"
        f"<MsgType><![CDATA[event]]></MsgType><Event><![CDATA[{name}]]></Event>"
        f"<MsgID>{msgid}</MsgID><Status><![CDATA[{status}]]></Status></xml>"
    ).encode()


# --- a real send, the fake's event ---------------------------------------------------------------


def test_a_template_send_gets_its_jobfinish_event_answered_success(
    configure: Any, fake: WeixinFake, sink: ReceiptSink
) -> None:
    # given the account's server URL is the sink, answering as the provider says
    provider = make(configure, fake)
    sink.handler = answer_with(provider.read_receipt)
    # when a template message is sent
    receipt = provider.send(template())
    # then WeChat pushes one event, answered "success" at the first attempt
    [push] = fake.pusher.wait(1)
    assert (push.status, push.answer, push.attempt) == (200, b"success", 1)
    [report] = provider.read_receipt(sink.requests[0]).reports
    assert (report.provider, report.state, report.vendor_id, report.record_id) == (
        "wx",
        Delivery.DELIVERED,
        receipt.msgid,
        None,
    )
    assert report.at_ms > 0


@pytest.mark.parametrize("status", ["failed:user block", "failed: system failed"])
def test_a_failed_job_is_undelivered_with_wechats_status(
    configure: Any, fake: WeixinFake, sink: ReceiptSink, status: str
) -> None:
    provider = make(configure, fake)
    fake.fail_delivery_to(BLOCKED, status)
    receipt = provider.send(template(BLOCKED))
    fake.pusher.wait(1)
    [report] = provider.read_receipt(sink.requests[0]).reports
    assert (report.state, report.code, report.vendor_id) == (Delivery.UNDELIVERED, status, receipt.msgid)


def test_the_consoles_url_check_is_answered_with_echostr(
    configure: Any, fake: WeixinFake, sink: ReceiptSink
) -> None:
    provider = make(configure, fake)
    sink.handler = answer_with(provider.read_receipt)
    assert fake.check_server_url("8741357719938412")
    assert (
        sink.replies[-1].body == b"8741357719938412"
        and provider.read_receipt(sink.requests[-1]).reports == []
    )
    fake.callback_token = "another-token"
    assert not fake.check_server_url()
    assert sink.replies[-1].status == 403


def test_a_forged_event_is_refused_and_wechat_pushes_it_three_times_in_all(
    configure: Any, fake: WeixinFake, sink: ReceiptSink
) -> None:
    provider = make(configure, fake)
    sink.handler = answer_with(provider.read_receipt)
    fake.bad_signature = True
    provider.send(template())
    assert [(p.attempt, p.status) for p in fake.pusher.wait(3)] == [(1, 403), (2, 403), (3, 403)]
    with pytest.raises(ReceiptRejected) as refused:
        provider.read_receipt(sink.requests[0])
    assert refused.value.code == "e.noti.receipt.signature"


def test_an_answer_too_late_makes_wechat_push_again_and_each_copy_is_reported(
    configure: Any, fake: WeixinFake, sink: ReceiptSink
) -> None:
    provider = make(configure, fake)
    sink.handler = answer_with(provider.read_receipt)
    fake.pusher.timeout_s = 0.2  # WeChat waits 5 s
    sink.delay_s = 0.5
    receipt = provider.send(template())
    assert [p.status for p in fake.pusher.wait(3)] == [None, None, None]
    reports = [r for request in sink.requests for r in provider.read_receipt(request).reports]
    assert [(r.vendor_id, r.state) for r in reports] == [(receipt.msgid, Delivery.DELIVERED)] * 3


def test_duplicate_events_are_each_reported(configure: Any, fake: WeixinFake, sink: ReceiptSink) -> None:
    provider = make(configure, fake)
    fake.duplicate_receipts = True
    receipt = provider.send(template())
    fake.pusher.wait(2)
    assert [provider.read_receipt(r).reports[0].vendor_id for r in sink.requests] == [receipt.msgid] * 2


# --- what is refused -----------------------------------------------------------------------------


def test_without_a_callback_token_no_push_is_taken(configure: Any, fake: WeixinFake) -> None:
    provider = make(configure, fake, callback_token=None)
    with pytest.raises(ReceiptRejected) as refused:
        provider.read_receipt(signed(body=event()))
    assert refused.value.code == "e.noti.receipt.provider" and "callback_token" in refused.value.message


@pytest.mark.parametrize(
    "request_",
    [
        pytest.param(signed(body=event(), token="not-the-token"), id="other-token"),
        pytest.param(
            ReceiptRequest("POST", "https://noti.example.com/v1/receipts/wx", {}, event()), id="unsigned"
        ),
        pytest.param(
            ReceiptRequest(
                "POST",
                "https://noti.example.com/v1/receipts/wx?signature=x&timestamp=now&nonce=1",
                {},
                event(),
            ),
            id="bad-timestamp",
        ),
    ],
)
def test_a_request_not_signed_with_the_token_is_refused(
    configure: Any, fake: WeixinFake, request_: ReceiptRequest
) -> None:
    with pytest.raises(ReceiptRejected) as refused:
        make(configure, fake).read_receipt(request_)
    assert refused.value.code == "e.noti.receipt.signature"


def test_a_timestamp_outside_the_window_is_refused_as_a_replay(configure: Any, fake: WeixinFake) -> None:
    provider = make(configure, fake, callback_window_s=60)
    at = 1_800_000_000
    request = signed(body=event(), at=at)
    provider.clock = lambda: at + 59  # type: ignore[method-assign]
    assert provider.read_receipt(request).reports
    provider.clock = lambda: at + 61  # type: ignore[method-assign]
    with pytest.raises(ReceiptRejected) as refused:
        provider.read_receipt(request)
    assert refused.value.code == "e.noti.receipt.signature" and "replay" in refused.value.message
    provider.clock = lambda: at - 61  # type: ignore[method-assign]
    with pytest.raises(ReceiptRejected):
        provider.read_receipt(request)


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(event(name="subscribe"), id="another-event"),
        pytest.param(
            b"<xml><ToUserName>gh_1</ToUserName><FromUserName>o1</FromUserName><CreateTime>1</CreateTime>"
            b"<MsgType>text</MsgType><Content>hello</Content><MsgId>1234567890123456</MsgId></xml>",
            id="a-users-message",
        ),
    ],
)
def test_what_is_not_a_template_job_is_answered_success_without_reports(
    configure: Any, fake: WeixinFake, body: bytes
) -> None:
    batch = make(configure, fake).read_receipt(signed(body=body))
    assert batch.reports == [] and batch.reply.body == b"success"


def test_safe_mode_is_refused_with_a_message_saying_plain_mode_is_needed(
    configure: Any, fake: WeixinFake
) -> None:
    provider = make(configure, fake)
    encrypted = b"<xml><ToUserName>gh_1</ToUserName><Encrypt><![CDATA[c2VjcmV0]]></Encrypt></xml>"
    for request in (signed(body=encrypted, encrypt_type="aes", msg_signature="ab"), signed(body=encrypted)):
        with pytest.raises(ReceiptRejected) as refused:
            provider.read_receipt(request)
        assert refused.value.code == "e.noti.receipt.malformed" and "plain mode" in refused.value.message


HOSTILE = {
    "billion-laughs": b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
    b'<!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">'
    b'<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]>'
    b"<xml><MsgType>event</MsgType><Event>TEMPLATESENDJOBFINISH</Event><MsgID>1</MsgID>"
    b"<Status>&lol3;</Status></xml>",
    "external-entity": b'<?xml version="1.0"?><!DOCTYPE xml [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>'
    b"<xml><MsgType>event</MsgType><Event>TEMPLATESENDJOBFINISH</Event><MsgID>1</MsgID>"
    b"<Status>&xxe;</Status></xml>",
    "external-dtd": b'<!DOCTYPE xml SYSTEM "http://127.0.0.1:1/evil.dtd"><xml><MsgID>1</MsgID></xml>',
    "undefined-entity": b"<xml><MsgType>event</MsgType><Status>&nbsp;</Status></xml>",
    "not-xml": b'{"MsgID": 1}',
    "empty": b"",
    "truncated": event()[:60],
    "other-root": b"<message><MsgType>event</MsgType></message>",
    "field-twice": event().replace(b"</xml>", b"<MsgID>999</MsgID></xml>"),
    "no-msgid": event().replace(b"<MsgID>200163836</MsgID>", b""),
    "msgid-not-a-number": event(msgid="abc"),
    "msgid-unicode-digits": event(msgid="²³"),
    "msgid-huge": event(msgid="9" * 40),
    "unknown-status": event(status="maybe"),
    "not-utf8": b"<xml><MsgType>\xff\xfe</MsgType></xml>",
}


@pytest.mark.parametrize("body", list(HOSTILE.values()), ids=list(HOSTILE))
def test_hostile_or_unreadable_xml_is_refused_as_malformed(
    configure: Any, fake: WeixinFake, body: bytes
) -> None:
    with pytest.raises(ReceiptRejected) as refused:
        make(configure, fake).read_receipt(signed(body=body))
    assert refused.value.code == "e.noti.receipt.malformed"
    assert "/etc/passwd" not in refused.value.message and "root:" not in refused.value.message


def test_a_get_without_echostr_and_other_methods_are_malformed(configure: Any, fake: WeixinFake) -> None:
    provider = make(configure, fake)
    for request in (signed("GET"), signed("PUT", event())):
        with pytest.raises(ReceiptRejected) as refused:
            provider.read_receipt(request)
        assert refused.value.code == "e.noti.receipt.malformed"
