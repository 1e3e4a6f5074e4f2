"""What only Tencent Cloud's SMS provider does, against a faithful local SendSms
(tests/fakes/tencent.py): its TC3 signature, the request it makes, its per-number answers and
frequency limits, marketing hours, and the fake's own rules. What it does as Aliyun does is in
tests/test_sms_vendors.py."""

from __future__ import annotations

import calendar
import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

import noti
from noti.channels.sms.tencent import marketing_wait_s, tc3_authorization
from noti.core.record import Status
from noti.errors import InvalidConfig, RateLimited
from tests.fakes.tencent import TencentFake, TencentTemplate
from tests.sms_vendors import CN_PHONE, TENCENT, Clock, sms

PHONE = CN_PHONE


@pytest.fixture
def fake() -> Iterator[TencentFake]:
    templates = {
        "1001": TencentTemplate(1, "verification"),
        "2002": TencentTemplate(3, "notice"),
        "3003": TencentTemplate(1, "verification", scope="international"),
        "4004": TencentTemplate(1, "marketing"),
    }
    with TENCENT.fake(templates=templates, blacklist={"+8613800000000"}) as server:
        yield server


def test_the_signer_reproduces_tencents_published_example() -> None:
    # API 3.0 "Signature v3" worked example (CVM DescribeInstances)
    authorization = tc3_authorization(
        secret_id="AKIDz8krbsJ5yKBZQpn74WFkmLPx3EXAMPLE",
        secret_key="Gu5t9xGARNpq86cd98joQYCN3EXAMPLE",
        service="cvm",
        timestamp=1551113065,
        headers={"Content-Type": "application/json; charset=utf-8", "Host": "cvm.tencentcloudapi.com"},
        payload=b'{"Limit": 1, "Filters": [{"Values": ["\\u672a\\u547d\\u540d"], "Name": "instance-name"}]}',
    )
    assert authorization == (
        "TC3-HMAC-SHA256 Credential=AKIDz8krbsJ5yKBZQpn74WFkmLPx3EXAMPLE/2019-02-25/cvm/tc3_request, "
        "SignedHeaders=content-type;host, "
        "Signature=72e494ea809ad7a8c8f7a4507b9bddcbaa8e581f516e8da2f66e2c5a96525168"
    )


def test_the_credential_scope_is_the_utc_date_even_just_before_midnight_utc() -> None:
    # 23:59:30 UTC is already the next day in Beijing: the scope must still say the UTC date
    stamp = calendar.timegm((2024, 5, 1, 23, 59, 30, 0, 0, 0))
    authorization = tc3_authorization(
        secret_id="id", secret_key="k", service="sms", timestamp=stamp, headers={"host": "h"}, payload=b""
    )
    assert "Credential=id/2024-05-01/sms/tc3_request, " in authorization


def test_a_send_returns_the_serial_no_and_sends_what_tencent_expects(fake: TencentFake) -> None:
    provider = TENCENT.provider(fake.url)
    message = sms("4321", target="13912345678")
    receipt = provider.send(message)
    [sent] = fake.sent
    assert receipt.msgid == sent.serial_no and receipt.provider == "tc"
    assert sent.phone == PHONE and sent.params == ("4321",)
    assert sent.session_context == message.id
    request = fake.requests[0]
    assert request.headers["content-type"] == "application/json; charset=utf-8"
    assert request.headers["x-tc-action"] == "SendSms" and request.headers["x-tc-version"] == "2021-01-11"
    assert request.headers["x-tc-region"] == "ap-guangzhou"
    assert "SignedHeaders=content-type;host;x-tc-action, " in request.headers["authorization"]
    body = request.json()
    assert body["PhoneNumberSet"] == [PHONE] and body["SmsSdkAppId"] == "1400006666"
    assert body["SignName"] == "noti测试" and body["TemplateId"] == "1001"


def test_a_json_object_becomes_the_param_set_in_template_order(fake: TencentFake) -> None:
    provider = TENCENT.provider(
        fake.url, template_id="2002", text_param=None, template_params=["name", "order", "amount"]
    )
    provider.send(sms(json.dumps({"amount": 12.5, "name": "张三", "order": 20240501})))
    assert fake.sent[0].params == ("张三", "20240501", "12.5")


def test_a_records_own_template_takes_its_parameters_in_the_objects_order(fake: TencentFake) -> None:
    # keys that are not all numbers say nothing of {1}, {2}, …: the object's order is the order
    provider = TENCENT.provider(fake.url, template_params=["code"], text_param=None)
    provider.send(sms('{"order": "A-7", "name": "Ann", "amount": 12.5}', template={"tc": "2002"}))
    assert (fake.sent[0].template_id, fake.sent[0].params) == ("2002", ("A-7", "Ann", "12.5"))


def test_international_templates_send_e164_without_a_sign(fake: TencentFake) -> None:
    provider = TENCENT.provider(fake.url, template_id="3003", template_scope="international", sign_name=None)
    provider.send(sms("1234", target="+85291234567"))
    assert fake.sent[0].phone == "+85291234567"
    assert "SignName" not in fake.requests[0].json()


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"text_param": None}, "template_params"),
        ({"sign_name": None}, "sign_name"),
        ({"sdk_app_id": "app-1"}, "sdk_app_id"),
        ({"template_params": ["a", "a"], "text_param": None}, "twice"),
    ],
)
def test_options_that_cannot_send_are_refused_at_start(
    fake: TencentFake, changes: dict[str, Any], problem: str
) -> None:
    with pytest.raises(InvalidConfig, match=problem):
        TENCENT.provider(fake.url, **changes)


def test_a_template_without_variables_takes_an_empty_object(fake: TencentFake) -> None:
    fake.templates["5005"] = TencentTemplate(0, "notice")
    TENCENT.provider(fake.url, template_id="5005", text_param=None, template_params=[]).send(sms("{}"))
    assert fake.sent[0].params == ()


def test_per_number_frequency_limits_are_rate_limits_with_their_window(fake: TencentFake) -> None:
    provider = TENCENT.provider(fake.url)
    fake.clock = provider.clock = clock = Clock()
    provider.send(sms("1111"))
    with pytest.raises(RateLimited) as thirty:  # the same content again within 30 s
        provider.send(sms("1111"))
    assert thirty.value.retry_after_s == 30
    assert thirty.value.vendor_code == "LimitExceeded.PhoneNumberThirtySecondLimit"
    for n in range(4):
        provider.send(sms(f"20{n}"))
    with pytest.raises(RateLimited) as hour:
        provider.send(sms("3333"))
    assert hour.value.retry_after_s == 3600
    for _ in range(5):
        clock.at += 3601
        provider.send(sms("4444"))
    clock.at += 3601
    with pytest.raises(RateLimited) as day:
        provider.send(sms("5555"))
    assert day.value.retry_after_s == 86400 and day.value.vendor_code == "LimitExceeded.PhoneNumberDailyLimit"


def test_our_numbers_entry_is_read_even_when_another_number_succeeded(fake: TencentFake) -> None:
    # a "successful" request can carry failed numbers: the answer is read per number
    fake.script(
        TencentFake.statuses(
            {"SerialNo": "2645:1", "PhoneNumber": "+8613700000000", "Code": "Ok", "Message": "send success"},
            {
                "SerialNo": "",
                "PhoneNumber": PHONE,
                "Code": "LimitExceeded.PhoneNumberDailyLimit",
                "Message": "daily",
            },
        )
    )
    with pytest.raises(RateLimited):
        TENCENT.provider(fake.url).send(sms("1234"))


def test_the_fake_answers_mixed_outcomes_per_number(fake: TencentFake) -> None:
    # given one number on the blacklist, one malformed and one fine, in one request
    provider = TENCENT.provider(fake.url)
    body = provider.request_body(sms("1234"))
    body["PhoneNumberSet"] = ["+8613800000000", "13912345678", "+86123"]
    payload = json.dumps(body).encode()
    # when
    answer = httpx.post(
        fake.url, content=payload, headers=provider.signed_headers(payload, timestamp=int(time.time()))
    )
    # then
    assert answer.headers["content-type"] == "application/json"
    codes = [(s["PhoneNumber"], s["Code"]) for s in answer.json()["Response"]["SendStatusSet"]]
    assert codes == [
        ("+8613800000000", "FailedOperation.PhoneNumberInBlacklist"),
        (PHONE, "Ok"),
        ("+86123", "InvalidParameterValue.IncorrectPhoneNumber"),
    ]
    assert [s.phone for s in fake.sent] == [PHONE]


def test_the_fake_refuses_mixing_mainland_and_international_numbers(fake: TencentFake) -> None:
    provider = TENCENT.provider(fake.url)
    body = provider.request_body(sms("1234"))
    body["PhoneNumberSet"] = [PHONE, "+85291234567"]
    payload = json.dumps(body).encode()
    answer = httpx.post(
        fake.url, content=payload, headers=provider.signed_headers(payload, timestamp=int(time.time()))
    )
    error = answer.json()["Response"]["Error"]
    assert error["Code"] == "UnsupportedOperation.ContainDomesticAndInternationalPhoneNumber"


def test_marketing_sms_outside_daytime_waits_until_8_beijing_time(fake: TencentFake) -> None:
    # 23:30 Beijing time is 15:30 UTC; 08:00 Beijing is 8.5 hours later
    late = calendar.timegm((2024, 5, 1, 15, 30, 0, 0, 0, 0))
    assert marketing_wait_s(late) == 8.5 * 3600
    assert marketing_wait_s(calendar.timegm((2024, 5, 1, 23, 59, 30, 0, 0, 0))) == 60  # 07:59:30: 60 s floor
    provider = TENCENT.provider(fake.url, template_id="4004")
    fake.clock = provider.clock = Clock(late)
    with pytest.raises(RateLimited) as caught:
        provider.send(sms("sale"))
    assert caught.value.vendor_code == "FailedOperation.MarketingSendTimeConstraint"
    assert caught.value.retry_after_s == 8.5 * 3600


# --- through noti: add, send, record ------------------------------------------------------------


def test_a_blacklisted_number_is_suppressed(configure: Any, fake: TencentFake) -> None:
    # given
    rt = configure(providers={"tc": TENCENT.options(fake.url), "backup": {"kind": "sandbox"}})
    record_id = noti.notify_sms("+8613800000000", "4321", provider="tc,backup")
    # when
    noti.send(record_id)
    # then: invalid at once, no failover, and the number is refused from now on
    record = rt.store.get(record_id)
    assert record.status is Status.INVALID and "PhoneNumberInBlacklist" in record.errmsg
    assert rt.redis.llen(rt.keys.sandbox_outbox("backup")) == 0
    assert rt.store.is_suppressed("sms", "+8613800000000")
