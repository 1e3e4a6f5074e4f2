"""The Aliyun SMS provider against a faithful local dysmsapi (tests/fakes/aliyun.py)."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import redis

import noti
from noti.channels.sms.aliyun import AliyunSmsProvider, sign_v1
from noti.core.keys import Keys
from noti.core.record import Channel, Status
from noti.errors import (
    AmbiguousOutcome,
    DeliveryError,
    InvalidConfig,
    InvalidInput,
    PermanentFailure,
    ProviderMisconfigured,
    ProviderOutage,
    RateLimited,
    RecipientOptedOut,
    TemporaryFailure,
)
from noti.providers import load_kind
from noti.providers.base import Message
from tests.fakes._server import Reply
from tests.fakes.aliyun import AliyunFake, AliyunTemplate

PHONE = "+8613912345678"


@pytest.fixture
def fake() -> Iterator[AliyunFake]:
    with AliyunFake(
        templates={
            "SMS_100001": AliyunTemplate(("code",), "verification"),
            "SMS_200002": AliyunTemplate(("name", "order"), "notice"),
            "SMS_300003": AliyunTemplate(("code",), "verification", scope="international"),
        },
        black_keywords=("赌博",),
    ) as server:
        yield server  # type: ignore[misc]


def options(fake: AliyunFake, **changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "kind": "aliyun",
        "access_key_id": "LTAItestkey",
        "access_key_secret": "testsecret",
        "sign_name": "noti测试",
        "template_code": "SMS_100001",
        "text_param": "code",
        "endpoint": fake.url,
        "timeout_s": 2,
    }
    base.update(changes)
    return base


def make(fake: AliyunFake, **changes: Any) -> AliyunSmsProvider:
    return AliyunSmsProvider("ali", options(fake, **changes), redis=redis.Redis(), keys=Keys("noti:"))


def sms(text: str, target: str = PHONE, record_id: str = "01jtestrecord000000000000") -> Message:
    return Message(id=record_id, channel=Channel.SMS, target=target, fields={"text": text})


def test_the_signer_reproduces_aliyuns_published_examples() -> None:
    # the SendSms example of the SMS "HTTP protocol and signature" page
    send_sms = {
        "AccessKeyId": "testId",
        "Action": "SendSms",
        "Format": "XML",
        "OutId": "123",
        "PhoneNumbers": "15300000001",
        "RegionId": "cn-hangzhou",
        "SignName": "阿里云短信测试专用",
        "SignatureMethod": "HMAC-SHA1",
        "SignatureNonce": "45e25e9b-0a6f-4070-8c85-2956eda1b466",
        "SignatureVersion": "1.0",
        "TemplateCode": "SMS_71390007",
        "TemplateParam": '{"customer":"test"}',
        "Timestamp": "2017-07-12T02:42:19Z",
        "Version": "2017-05-25",
    }
    assert sign_v1(send_sms, "testSecret", method="GET") == "zJDF+Lrzhj/ThnlvIToysFRq6t4="
    # the RPC signature V1 example (ECS DescribeRegions)
    describe_regions = {
        "Timestamp": "2016-02-23T12:46:24Z",
        "Format": "XML",
        "AccessKeyId": "testid",
        "Action": "DescribeRegions",
        "SignatureMethod": "HMAC-SHA1",
        "SignatureNonce": "3ee8c1b8-83d3-44af-a94f-4e0ad82fd6cf",
        "Version": "2014-05-26",
        "SignatureVersion": "1.0",
    }
    assert sign_v1(describe_regions, "testsecret", method="GET") == "OLeaidS1JvxuMvnyHOwuJ+uX5qY="


def test_a_send_returns_the_bizid_and_sends_what_aliyun_expects(fake: AliyunFake) -> None:
    # given a template with one variable, filled from plain text
    provider = make(fake)
    # when
    receipt = provider.send(sms("4321"))
    # then
    [sent] = fake.sent
    assert receipt.msgid == sent.biz_id and receipt.provider == "ali"
    assert sent.phone == "13912345678" and sent.params == {"code": "4321"}
    assert sent.out_id == "01jtestrecord000000000000" and sent.sign_name == "noti测试"
    params = AliyunFake.params(fake.requests[0])
    assert (
        params["Format"] == "JSON"
        and params["Action"] == "SendSms"
        and params["TemplateParam"] == '{"code":"4321"}'
    )
    assert fake.requests[0].method == "POST" and fake.requests[0].query == {}  # nothing personal in the URL


def test_a_json_object_becomes_the_template_param_string_with_string_values(fake: AliyunFake) -> None:
    provider = make(fake, template_code="SMS_200002", text_param=None, template_params=["name", "order"])
    provider.send(sms(json.dumps({"name": "张三", "order": 20240501})))
    assert fake.sent[0].params == {"name": "张三", "order": "20240501"}
    assert AliyunFake.params(fake.requests[0])["TemplateParam"] == '{"name":"张三","order":"20240501"}'


def test_international_numbers_go_out_as_country_code_and_number(fake: AliyunFake) -> None:
    provider = make(fake, template_code="SMS_300003", template_scope="international")
    provider.send(sms("1234", target="+85291234567"))
    assert fake.sent[0].phone == "85291234567"


@pytest.mark.parametrize(
    ("changes", "text", "target", "code"),
    [
        ({}, "1234", "+85291234567", "e.cmd.noti.add.badtarget"),  # mainland template, HK number
        ({}, "1234", "+861012345678", "e.cmd.noti.add.badtarget"),  # +86 landline
        ({"template_scope": "international"}, "1234", "13912345678", "e.cmd.noti.add.badtarget"),
        (
            {"text_param": None, "template_params": ["name", "order"]},
            '{"name": "x"}',
            PHONE,
            "e.cmd.noti.add.badtext",
        ),
        (
            {"text_param": None, "template_params": ["name"]},
            '{"name": "x", "nme": "y"}',
            PHONE,
            "e.cmd.noti.add.badtext",
        ),
        ({"text_param": None}, "plain text", PHONE, "e.cmd.noti.add.badtext"),
        ({}, '{"code": {"nested": 1}}', PHONE, "e.cmd.noti.add.badtext"),
        ({}, '{"code": null}', PHONE, "e.cmd.noti.add.badtext"),
        ({}, '{"code": "12", ', PHONE, "e.cmd.noti.add.badtext"),  # looks like JSON, is not
        ({"param_max_chars": 6}, "1234567", PHONE, "e.cmd.noti.add.badtext"),
    ],
)
def test_check_refuses_what_can_never_be_sent(
    fake: AliyunFake, changes: dict[str, Any], text: str, target: str, code: str
) -> None:
    with pytest.raises(InvalidInput) as caught:
        make(fake, **changes).check(sms(text, target=target))
    assert caught.value.code == code
    assert "13912345678" not in caught.value.message  # numbers are masked


@pytest.mark.parametrize("target", [PHONE, "13912345678"])
def test_check_accepts_both_forms_of_a_mainland_number(fake: AliyunFake, target: str) -> None:
    make(fake).check(sms("1234", target=target))


def test_options_that_contradict_each_other_are_refused_at_start(fake: AliyunFake) -> None:
    with pytest.raises(InvalidConfig, match="text_param"):
        make(fake, template_params=["a", "b"], text_param="a")
    with pytest.raises(InvalidConfig, match="access_key_secret"):
        AliyunSmsProvider("ali", {"access_key_id": "x"}, redis=redis.Redis(), keys=Keys("noti:"))


def test_repr_and_options_never_show_the_secret(fake: AliyunFake) -> None:
    provider = make(fake)
    assert "testsecret" not in repr(provider) and "testsecret" not in repr(provider.options)


def test_per_recipient_flow_control_waits_for_the_window_the_message_names(fake: AliyunFake) -> None:
    # given a verification template (1/min, 5/hour, 10/day per number) and a movable clock
    now = [time.time()]
    fake.clock = lambda: now[0]
    provider = make(fake)
    provider.clock = lambda: now[0]
    provider.send(sms("1111"))
    # when the same number is sent to again within the minute
    with pytest.raises(RateLimited) as minute:
        provider.send(sms("2222"))
    # then it waits a minute, and the rate limit is not an outage of the provider
    assert minute.value.retry_after_s == 60 and minute.value.vendor_code == "isv.BUSINESS_LIMIT_CONTROL"
    for _ in range(4):
        now[0] += 61
        provider.send(sms("3333"))
    now[0] += 61
    with pytest.raises(RateLimited) as hour:
        provider.send(sms("4444"))
    assert hour.value.retry_after_s == 3600
    for _ in range(5):
        now[0] += 3601
        provider.send(sms("5555"))
    now[0] += 3601
    with pytest.raises(RateLimited) as day:
        provider.send(sms("6666"))
    assert day.value.retry_after_s == 86400
    assert len(fake.sent) == 10


OK = {"Code": "OK", "Message": "OK", "BizId": "900619746936498440^0", "RequestId": "F655A8D5"}


def business(code: str, message: str = "") -> Reply:
    return Reply(200, {"Code": code, "Message": message or code, "RequestId": "C0A0BE93"})


def gateway(status: int, code: str) -> Reply:
    return Reply(status, {"RequestId": "X", "HostId": "dysmsapi.aliyuncs.com", "Code": code, "Message": code})


@pytest.mark.parametrize(
    ("reply", "outcome"),
    [
        (Reply(200, OK), "900619746936498440^0"),
        (business("isv.BUSINESS_LIMIT_CONTROL", "触发分钟级流控Permits:1"), (RateLimited, 60)),
        (business("isv.BUSINESS_LIMIT_CONTROL", "触发小时级流控Permits:5"), (RateLimited, 3600)),
        (business("isv.BUSINESS_LIMIT_CONTROL", "触发天级流控Permits:10"), (RateLimited, 86400)),
        (business("isv.BUSINESS_LIMIT_CONTROL", "触发号码天级流控Permits:40"), (RateLimited, 86400)),
        (business("isv.BUSINESS_LIMIT_CONTROL", "Triggered minute-level flow control"), (RateLimited, 60)),
        (business("isv.BUSINESS_LIMIT_CONTROL", "流控"), (RateLimited, 3600)),
        (business("isv.DAY_LIMIT_CONTROL"), ProviderOutage),
        (business("isv.MONTH_LIMIT_CONTROL"), ProviderOutage),
        (business("isv.AMOUNT_NOT_ENOUGH"), ProviderOutage),
        (business("isv.OUT_OF_SERVICE"), ProviderOutage),
        (business("isv.ACCOUNT_ABNORMAL"), ProviderOutage),
        (business("isv.SMS_SIGNATURE_ILLEGAL"), ProviderMisconfigured),
        (business("isv.SMS_TEMPLATE_ILLEGAL"), ProviderMisconfigured),
        (business("isv.SMS_SIGNATURE_SCENE_ILLEGAL"), ProviderMisconfigured),
        (business("isp.RAM_PERMISSION_DENY"), ProviderMisconfigured),
        (business("isv.DENY_IP_RANGE"), ProviderMisconfigured),
        (business("isv.PRODUCT_UN_SUBSCRIPT"), ProviderMisconfigured),
        (business("isv.DOMESTIC_NUMBER_NOT_SUPPORTED"), ProviderMisconfigured),
        (business("isv.MOBILE_NUMBER_ILLEGAL"), PermanentFailure),
        (business("isv.TEMPLATE_MISSING_PARAMETERS"), PermanentFailure),
        (business("isv.INVALID_JSON_PARAM"), PermanentFailure),
        (business("isv.PARAM_NOT_SUPPORT_URL"), PermanentFailure),
        (business("isv.SMS_CONTENT_ILLEGAL"), PermanentFailure),
        (business("isv.BLACK_KEY_CONTROL_LIMIT", "黑名单管控"), PermanentFailure),
        (business("isv.BLACK_KEY_CONTROL_LIMIT", "号码黑名单管控"), RecipientOptedOut),
        (business("isp.SYSTEM_ERROR"), AmbiguousOutcome),
        (business("isv.SOMETHING_NEW"), TemporaryFailure),
        (business("Ok"), TemporaryFailure),  # Tencent's literal: Aliyun's success is "OK" only
        (gateway(400, "Throttling.User"), TemporaryFailure),
        (gateway(400, "SignatureNonceUsed"), TemporaryFailure),
        (gateway(503, "ServiceUnavailable"), TemporaryFailure),
        (gateway(500, "InternalError"), AmbiguousOutcome),
        (gateway(502, "BadGateway"), AmbiguousOutcome),
        (gateway(400, "SignatureDoesNotMatch"), ProviderMisconfigured),
        (gateway(404, "InvalidAccessKeyId.NotFound"), ProviderMisconfigured),
        (gateway(400, "InvalidTimeStamp.Expired"), ProviderMisconfigured),
        (gateway(403, "Forbidden.RAM"), ProviderMisconfigured),
        (Reply(200, "<html>gateway</html>"), AmbiguousOutcome),
        (Reply(200, {"RequestId": "no code"}), AmbiguousOutcome),
    ],
)
def test_each_answer_maps_to_its_outcome_class(fake: AliyunFake, reply: Reply, outcome: Any) -> None:
    provider = make(fake)
    fake.script(reply)
    if isinstance(outcome, str):
        assert provider.send(sms("1234")).msgid == outcome
        return
    cls, wait_s = outcome if isinstance(outcome, tuple) else (outcome, None)
    with pytest.raises(DeliveryError) as caught:
        provider.send(sms("1234"))
    assert type(caught.value) is cls
    assert caught.value.provider == "ali"
    if wait_s is not None:
        assert caught.value.retry_after_s == wait_s  # type: ignore[attr-defined]


def test_throttling_honours_retry_after(fake: AliyunFake) -> None:
    fake.script(Reply(400, {"Code": "Throttling.Api", "Message": "slow"}, headers={"retry-after": "7"}))
    with pytest.raises(TemporaryFailure) as caught:
        make(fake).send(sms("1234"))
    assert caught.value.retry_after_s == 7


@pytest.mark.parametrize(
    ("changes", "fake_setup", "cls", "vendor_code"),
    [
        ({"access_key_secret": "wrong"}, {}, ProviderMisconfigured, "SignatureDoesNotMatch"),
        ({"access_key_id": "LTAIunknown"}, {}, ProviderMisconfigured, "InvalidAccessKeyId.NotFound"),
        ({"sign_name": "未审核"}, {}, ProviderMisconfigured, "isv.SMS_SIGNATURE_ILLEGAL"),
        ({"template_code": "SMS_999"}, {}, ProviderMisconfigured, "isv.SMS_TEMPLATE_ILLEGAL"),
        ({}, {"balance": 0}, ProviderOutage, "isv.AMOUNT_NOT_ENOUGH"),
        ({}, {"param_max_chars": 2}, PermanentFailure, "isv.PARAM_LENGTH_LIMIT"),
    ],
)
def test_the_fake_refuses_as_aliyun_does(
    fake: AliyunFake, changes: dict[str, Any], fake_setup: dict[str, Any], cls: type, vendor_code: str
) -> None:
    for name, value in fake_setup.items():
        setattr(fake, name, value)
    with pytest.raises(DeliveryError) as caught:
        make(fake, **changes).send(sms("1234"))
    assert type(caught.value) is cls and caught.value.vendor_code == vendor_code
    assert fake.sent == []


def test_blacklisted_keywords_and_urls_are_permanent(fake: AliyunFake) -> None:
    provider = make(fake)
    for text, code in [("赌博", "isv.BLACK_KEY_CONTROL_LIMIT"), ("www.x.cn", "isv.PARAM_NOT_SUPPORT_URL")]:
        with pytest.raises(PermanentFailure) as caught:
            provider.send(sms(text))
        assert type(caught.value) is PermanentFailure and caught.value.vendor_code == code


def test_a_clock_more_than_15_minutes_off_is_a_configuration_error(fake: AliyunFake) -> None:
    provider = make(fake)
    provider.clock = lambda: time.time() - 16 * 60
    with pytest.raises(ProviderMisconfigured) as caught:
        provider.send(sms("1234"))
    assert caught.value.vendor_code == "InvalidTimeStamp.Expired"


def test_a_timeout_after_aliyun_accepted_is_ambiguous_and_not_deduplicated(fake: AliyunFake) -> None:
    # given Aliyun accepts the send but answers after the client gave up
    provider = make(fake, timeout_s=0.3)
    fake.accept_then_hang(1.0)
    # when / then: the outcome is ambiguous, and the message did go out
    with pytest.raises(AmbiguousOutcome):
        provider.send(sms("1234"))
    assert len(fake.sent) == 1
    # and Aliyun does not deduplicate: the same message again is a second SMS
    fake.clock = lambda: time.time() + 120  # past the 1/min window
    provider.clock = fake.clock
    provider.send(sms("1234"))
    assert len(fake.sent) == 2 and fake.sent[0].out_id == fake.sent[1].out_id


def test_nobody_listening_is_an_outage() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    provider = AliyunSmsProvider(
        "ali",
        {
            "access_key_id": "k",
            "access_key_secret": "s",
            "sign_name": "n",
            "template_code": "SMS_1",
            "text_param": "code",
            "endpoint": f"http://127.0.0.1:{port}",
        },
        redis=redis.Redis(),
        keys=Keys("noti:"),
    )
    with pytest.raises(ProviderOutage):
        provider.send(sms("1234"))


def test_the_fake_rejects_a_reused_nonce_answers_xml_without_format_and_finds_sends(fake: AliyunFake) -> None:
    provider = make(fake)
    params = provider.request_params(sms("1234"))
    first = httpx.post(fake.url + "/", data=params)
    again = httpx.post(fake.url + "/", data=params)
    assert first.json()["Code"] == "OK"
    assert again.status_code == 400 and again.json()["Code"] == "SignatureNonceUsed"
    # without Format=JSON, RPC answers XML
    xml_params = provider.request_params(sms("5678"))
    del xml_params["Format"]
    xml_params["Signature"] = sign_v1(xml_params, "testsecret")
    answer = httpx.post(fake.url + "/", data=xml_params)
    assert answer.text.startswith("<?xml") and "<Code>isv.BUSINESS_LIMIT_CONTROL</Code>" in answer.text
    # QuerySendDetails finds the send by BizId
    query = {
        k: v
        for k, v in params.items()
        if k in ("AccessKeyId", "Format", "SignatureMethod", "SignatureVersion", "Version")
    }
    query.update(
        Action="QuerySendDetails",
        PhoneNumber="13912345678",
        BizId=fake.sent[0].biz_id,
        SendDate=time.strftime("%Y%m%d", time.gmtime(time.time() + 8 * 3600)),
        PageSize="10",
        CurrentPage="1",
        SignatureNonce="query-1",
        Timestamp=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    )
    query["Signature"] = sign_v1(query, "testsecret")
    details = httpx.post(fake.url + "/", data=query).json()
    assert details["TotalCount"] == 1
    assert details["SmsSendDetailDTOs"]["SmsSendDetailDTO"][0]["OutId"] == "01jtestrecord000000000000"


def test_the_kind_is_registered() -> None:
    assert load_kind("aliyun") is AliyunSmsProvider


# --- through noti: add, send, record ------------------------------------------------------------


def test_a_notification_is_delivered_and_keeps_the_bizid(configure: Any, fake: AliyunFake) -> None:
    rt = configure(providers={"ali": options(fake)})
    record_id = noti.notify_sms(PHONE, "4321", provider="ali")
    [result] = noti.send(record_id)
    record = rt.store.get(record_id)
    assert result.mark == "OK" and record.status is Status.DONE
    assert record.msgid == fake.sent[0].biz_id and record.sent_by == "ali"


def test_add_refuses_a_record_the_template_cannot_take(configure: Any, fake: AliyunFake) -> None:
    configure(providers={"ali": options(fake, text_param=None, template_params=["code"])})
    with pytest.raises(InvalidInput, match="named parameters"):
        noti.notify_sms(PHONE, "4321", provider="ali")
    with pytest.raises(InvalidInput, match="mainland"):
        noti.notify_sms("+14155550100", '{"code": "1"}', provider="ali")


def test_a_flow_limited_record_waits_without_spending_an_attempt_or_failing_over(
    configure: Any, fake: AliyunFake
) -> None:
    # given a second provider that would deliver at once
    rt = configure(providers={"ali": options(fake), "backup": {"kind": "sandbox"}})
    noti.send(noti.notify_sms(PHONE, "1111", provider="ali"))
    # when the same number hits the per-minute window
    record_id = noti.notify_sms(PHONE, "2222", provider="ali,backup")
    [result] = noti.send(record_id)
    # then the record waits about a minute, the attempt is not counted, and backup sent nothing
    record = rt.store.get(record_id)
    assert result.status is Status.WAITING and record.retry == 0
    assert "isv.BUSINESS_LIMIT_CONTROL" in record.errmsg
    assert rt.redis.llen(rt.keys.sandbox_outbox("backup")) == 0


def test_an_account_without_balance_fails_over(configure: Any, fake: AliyunFake) -> None:
    fake.balance = 0
    rt = configure(providers={"ali": options(fake), "backup": {"kind": "sandbox"}})
    record_id = noti.notify_sms(PHONE, "4321", provider="ali,backup")
    noti.send(record_id)
    assert rt.store.get(record_id).sent_by == "backup"
