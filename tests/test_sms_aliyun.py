"""What only Aliyun's SMS provider does, against a faithful local dysmsapi
(tests/fakes/aliyun.py): its signature, the SendSms it makes, its flow-control windows and
blacklist, and the fake's own rules. What it does as Tencent does is in
tests/test_sms_vendors.py."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import redis

import noti
from noti.channels.sms.aliyun import AliyunSmsProvider, sign_v1
from noti.core.keys import Keys
from noti.errors import InvalidConfig, InvalidInput, PermanentFailure, RateLimited, TemporaryFailure
from tests.fakes._server import Reply
from tests.fakes.aliyun import AliyunFake, AliyunTemplate
from tests.sms_vendors import ALIYUN, CN_PHONE, Clock, sms

PHONE = CN_PHONE
RECORD = "01jtestrecord000000000000"


@pytest.fixture
def fake() -> Iterator[AliyunFake]:
    templates = {
        "SMS_100001": AliyunTemplate(("code",), "verification"),
        "SMS_200002": AliyunTemplate(("name", "order"), "notice"),
        "SMS_300003": AliyunTemplate(("code",), "verification", scope="international"),
    }
    with ALIYUN.fake(templates=templates, black_keywords=("赌博",)) as server:
        yield server


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
    provider = ALIYUN.provider(fake.url)
    message = sms("4321")
    # when
    receipt = provider.send(message)
    # then
    [sent] = fake.sent
    assert receipt.msgid == sent.biz_id and receipt.provider == "ali"
    assert sent.phone == "13912345678" and sent.params == {"code": "4321"}
    assert sent.out_id == message.id and sent.sign_name == "noti测试"
    params = AliyunFake.params(fake.requests[0])
    assert (
        params["Format"] == "JSON"
        and params["Action"] == "SendSms"
        and params["TemplateParam"] == '{"code":"4321"}'
    )
    assert fake.requests[0].method == "POST" and fake.requests[0].query == {}  # nothing personal in the URL


def test_a_json_object_becomes_the_template_param_string_with_string_values(fake: AliyunFake) -> None:
    provider = ALIYUN.provider(
        fake.url, template_code="SMS_200002", text_param=None, template_params=["name", "order"]
    )
    provider.send(sms(json.dumps({"name": "张三", "order": 20240501})))
    assert fake.sent[0].params == {"name": "张三", "order": "20240501"}
    assert AliyunFake.params(fake.requests[0])["TemplateParam"] == '{"name":"张三","order":"20240501"}'


def test_international_numbers_go_out_as_country_code_and_number(fake: AliyunFake) -> None:
    provider = ALIYUN.provider(fake.url, template_code="SMS_300003", template_scope="international")
    provider.send(sms("1234", target="+85291234567"))
    assert fake.sent[0].phone == "85291234567"


def test_options_that_contradict_each_other_are_refused_at_start(fake: AliyunFake) -> None:
    with pytest.raises(InvalidConfig, match="text_param"):
        ALIYUN.provider(fake.url, template_params=["a", "b"], text_param="a")
    with pytest.raises(InvalidConfig, match="access_key_secret"):
        AliyunSmsProvider("ali", {"access_key_id": "x"}, redis=redis.Redis(), keys=Keys("noti:"))


def test_per_recipient_flow_control_waits_for_the_window_the_message_names(fake: AliyunFake) -> None:
    # given a verification template (1/min, 5/hour, 10/day per number) and a movable clock
    provider = ALIYUN.provider(fake.url)
    fake.clock = provider.clock = clock = Clock()
    provider.send(sms("1111"))
    # when the same number is sent to again within the minute; then, a minute apart, until the
    # hour's 5 are spent; then, an hour apart, until the day's 10 are
    for sends, apart_s, window_s in ((0, 0, 60), (4, 61, 3600), (5, 3601, 86400)):
        for _ in range(sends):
            clock.at += apart_s
            provider.send(sms("3333"))
        clock.at += apart_s
        with pytest.raises(RateLimited) as limited:
            provider.send(sms("4444"))
        # then each waits the window its message names (a rate limit, not an outage)
        assert limited.value.retry_after_s == window_s
        assert limited.value.vendor_code == "isv.BUSINESS_LIMIT_CONTROL"
    assert len(fake.sent) == 10


def test_throttling_honours_retry_after(fake: AliyunFake) -> None:
    fake.script(Reply(400, {"Code": "Throttling.Api", "Message": "slow"}, headers={"retry-after": "7"}))
    with pytest.raises(TemporaryFailure) as caught:
        ALIYUN.provider(fake.url).send(sms("1234"))
    assert caught.value.retry_after_s == 7


def test_blacklisted_keywords_and_urls_are_permanent(fake: AliyunFake) -> None:
    provider = ALIYUN.provider(fake.url)
    for text, code in [("赌博", "isv.BLACK_KEY_CONTROL_LIMIT"), ("www.x.cn", "isv.PARAM_NOT_SUPPORT_URL")]:
        with pytest.raises(PermanentFailure) as caught:
            provider.send(sms(text))
        assert type(caught.value) is PermanentFailure and caught.value.vendor_code == code


def test_the_fake_rejects_a_reused_nonce_answers_xml_without_format_and_finds_sends(fake: AliyunFake) -> None:
    provider = ALIYUN.provider(fake.url)
    params = provider.request_params(sms("1234", record_id=RECORD))
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
    assert details["SmsSendDetailDTOs"]["SmsSendDetailDTO"][0]["OutId"] == RECORD


# --- through noti: add ---------------------------------------------------------------------------


def test_add_refuses_a_record_the_template_cannot_take(configure: Any, fake: AliyunFake) -> None:
    configure(providers={"ali": ALIYUN.options(fake.url, text_param=None, template_params=["code"])})
    with pytest.raises(InvalidInput, match="named parameters"):
        noti.notify_sms(PHONE, "4321", provider="ali")
    with pytest.raises(InvalidInput, match="mainland"):
        noti.notify_sms("+14155550100", '{"code": "1"}', provider="ali")
