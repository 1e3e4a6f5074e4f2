"""The Tencent Cloud SMS provider against a faithful local SendSms (tests/fakes/tencent.py)."""

from __future__ import annotations

import calendar
import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import redis

import noti
from noti.channels.sms.tencent import TencentSmsProvider, marketing_wait_s, tc3_authorization
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
from tests.fakes.tencent import TencentFake, TencentTemplate

PHONE = "+8613912345678"


@pytest.fixture
def fake() -> Iterator[TencentFake]:
    with TencentFake(
        templates={
            "1001": TencentTemplate(1, "verification"),
            "2002": TencentTemplate(3, "notice"),
            "3003": TencentTemplate(1, "verification", scope="international"),
            "4004": TencentTemplate(1, "marketing"),
        },
        blacklist={"+8613800000000"},
    ) as server:
        yield server  # type: ignore[misc]


def options(fake: TencentFake, **changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "kind": "tencent",
        "secret_id": "AKIDtestsecretid",
        "secret_key": "testsecretkey",
        "sdk_app_id": "1400006666",
        "sign_name": "noti测试",
        "template_id": "1001",
        "text_param": "code",
        "endpoint": fake.url,
        "timeout_s": 2,
    }
    base.update(changes)
    return base


def make(fake: TencentFake, **changes: Any) -> TencentSmsProvider:
    return TencentSmsProvider("tc", options(fake, **changes), redis=redis.Redis(), keys=Keys("noti:"))


def sms(text: str, target: str = PHONE, record_id: str = "01jtestrecord000000000000") -> Message:
    return Message(id=record_id, channel=Channel.SMS, target=target, fields={"text": text})


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
    provider = make(fake)
    receipt = provider.send(sms("4321", target="13912345678"))
    [sent] = fake.sent
    assert receipt.msgid == sent.serial_no and receipt.provider == "tc"
    assert sent.phone == PHONE and sent.params == ("4321",)
    assert sent.session_context == "01jtestrecord000000000000"
    request = fake.requests[0]
    assert request.headers["content-type"] == "application/json; charset=utf-8"
    assert request.headers["x-tc-action"] == "SendSms" and request.headers["x-tc-version"] == "2021-01-11"
    assert request.headers["x-tc-region"] == "ap-guangzhou"
    assert "SignedHeaders=content-type;host;x-tc-action, " in request.headers["authorization"]
    body = request.json()
    assert body["PhoneNumberSet"] == [PHONE] and body["SmsSdkAppId"] == "1400006666"
    assert body["SignName"] == "noti测试" and body["TemplateId"] == "1001"


def test_a_json_object_becomes_the_param_set_in_template_order(fake: TencentFake) -> None:
    provider = make(fake, template_id="2002", text_param=None, template_params=["name", "order", "amount"])
    provider.send(sms(json.dumps({"amount": 12.5, "name": "张三", "order": 20240501})))
    assert fake.sent[0].params == ("张三", "20240501", "12.5")


def test_international_templates_send_e164_without_a_sign(fake: TencentFake) -> None:
    provider = make(fake, template_id="3003", template_scope="international", sign_name=None)
    provider.send(sms("1234", target="+85291234567"))
    assert fake.sent[0].phone == "+85291234567"
    assert "SignName" not in fake.requests[0].json()


@pytest.mark.parametrize(
    ("changes", "text", "target", "code"),
    [
        ({}, "1234", "+85291234567", "e.cmd.noti.add.badtarget"),
        ({}, "1234", "+861012345678", "e.cmd.noti.add.badtarget"),
        (
            {"template_scope": "international", "template_id": "3003"},
            "1234",
            PHONE,
            "e.cmd.noti.add.badtarget",
        ),
        ({"text_param": None, "template_params": ["a", "b"]}, '{"a": "1"}', PHONE, "e.cmd.noti.add.badtext"),
        ({"text_param": None, "template_params": ["a", "b"]}, "plain", PHONE, "e.cmd.noti.add.badtext"),
        (
            {"text_param": None, "template_params": ["a"]},
            '{"a": "1", "b": "2"}',
            PHONE,
            "e.cmd.noti.add.badtext",
        ),
        ({}, '{"code": [1]}', PHONE, "e.cmd.noti.add.badtext"),
        ({"param_max_chars": 12}, "1234567890123", PHONE, "e.cmd.noti.add.badtext"),
    ],
)
def test_check_refuses_what_can_never_be_sent(
    fake: TencentFake, changes: dict[str, Any], text: str, target: str, code: str
) -> None:
    with pytest.raises(InvalidInput) as caught:
        make(fake, **changes).check(sms(text, target=target))
    assert caught.value.code == code


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
        make(fake, **changes)


def test_a_template_without_variables_takes_an_empty_object(fake: TencentFake) -> None:
    fake.templates["5005"] = TencentTemplate(0, "notice")
    make(fake, template_id="5005", text_param=None, template_params=[]).send(sms("{}"))
    assert fake.sent[0].params == ()


def test_repr_and_options_never_show_the_secret(fake: TencentFake) -> None:
    provider = make(fake)
    assert "testsecretkey" not in repr(provider) and "testsecretkey" not in repr(provider.options)


def test_per_number_frequency_limits_are_rate_limits_with_their_window(fake: TencentFake) -> None:
    now = [time.time()]
    fake.clock = lambda: now[0]
    provider = make(fake)
    provider.clock = lambda: now[0]
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
        now[0] += 3601
        provider.send(sms("4444"))
    now[0] += 3601
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
        make(fake).send(sms("1234"))


def test_the_fake_answers_mixed_outcomes_per_number(fake: TencentFake) -> None:
    # given one number on the blacklist, one malformed and one fine, in one request
    provider = make(fake)
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
    provider = make(fake)
    body = provider.request_body(sms("1234"))
    body["PhoneNumberSet"] = [PHONE, "+85291234567"]
    payload = json.dumps(body).encode()
    answer = httpx.post(
        fake.url, content=payload, headers=provider.signed_headers(payload, timestamp=int(time.time()))
    )
    error = answer.json()["Response"]["Error"]
    assert error["Code"] == "UnsupportedOperation.ContainDomesticAndInternationalPhoneNumber"


def status(code: str, message: str = "") -> Reply:
    return TencentFake.statuses(
        {"SerialNo": "", "PhoneNumber": PHONE, "Code": code, "Message": message or code}
    )


def error(code: str) -> Reply:
    return TencentFake.error(code, code)


@pytest.mark.parametrize(
    ("reply", "outcome"),
    [
        (TencentFake.statuses({"SerialNo": "5000:10457", "PhoneNumber": PHONE, "Code": "Ok"}), "5000:10457"),
        (status("LimitExceeded.PhoneNumberThirtySecondLimit"), (RateLimited, 30)),
        (status("LimitExceeded.PhoneNumberOneHourLimit"), (RateLimited, 3600)),
        (status("LimitExceeded.PhoneNumberDailyLimit"), (RateLimited, 86400)),
        (status("LimitExceeded.PhoneNumberSameContentDailyLimit"), (RateLimited, 86400)),
        (status("LimitExceeded.DeliveryFrequencyLimit"), (RateLimited, 3600)),
        (error("LimitExceeded.PhoneNumberDailyLimit"), (RateLimited, 86400)),  # request level too
        (status("LimitExceeded.AppDailyLimit"), ProviderOutage),
        (error("LimitExceeded.AppMainlandChinaDailyLimit"), ProviderOutage),
        (status("FailedOperation.InsufficientBalanceInSmsPackage"), ProviderOutage),
        (error("UnauthorizedOperation.SerivceSuspendDueToArrears"), ProviderOutage),
        (error("UnauthorizedOperation.SdkAppIdIsDisabled"), ProviderOutage),
        (status("FailedOperation.PhoneNumberInBlacklist"), RecipientOptedOut),
        (status("InvalidParameterValue.IncorrectPhoneNumber"), PermanentFailure),
        (status("FailedOperation.PhoneNumberParseFail"), PermanentFailure),
        (error("InvalidParameterValue.TemplateParameterFormatError"), PermanentFailure),
        (error("InvalidParameterValue.TemplateParameterLengthLimit"), PermanentFailure),
        (error("FailedOperation.ContainSensitiveWord"), PermanentFailure),
        (error("FailedOperation.TemplateParamSetNotMatchApprovedTemplate"), PermanentFailure),
        (error("UnsupportedOperation.ContainDomesticAndInternationalPhoneNumber"), PermanentFailure),
        (error("LimitExceeded.PhoneNumberCountLimit"), PermanentFailure),
        (error("InvalidParameterValue.SomethingNew"), PermanentFailure),
        (error("FailedOperation.SignatureIncorrectOrUnapproved"), ProviderMisconfigured),
        (error("FailedOperation.TemplateIncorrectOrUnapproved"), ProviderMisconfigured),
        (error("InvalidParameterValue.SdkAppIdNotExist"), ProviderMisconfigured),
        (error("UnauthorizedOperation.RequestIpNotInWhitelist"), ProviderMisconfigured),
        (error("UnauthorizedOperation.IndividualUserMarketingSmsPermissionDeny"), ProviderMisconfigured),
        (error("AuthFailure.SignatureFailure"), ProviderMisconfigured),
        (error("AuthFailure.SecretIdNotFound"), ProviderMisconfigured),
        (error("AuthFailure.SignatureExpire"), ProviderMisconfigured),
        (error("InternalError.RequestTimeException"), ProviderMisconfigured),
        (error("InternalError.Timeout"), AmbiguousOutcome),
        (status("InternalError.SendAndRecvFail"), AmbiguousOutcome),
        (error("InternalError.UnknownError"), AmbiguousOutcome),
        (error("InternalError"), AmbiguousOutcome),
        (error("RequestLimitExceeded"), TemporaryFailure),
        (error("RequestLimitExceeded.UinFreqLimit"), TemporaryFailure),
        (error("FailedOperation.SomethingNew"), TemporaryFailure),
        (status("OK"), TemporaryFailure),  # Aliyun's literal: Tencent's success is "Ok" only
        (TencentFake.statuses(), AmbiguousOutcome),  # no entry for our number
        (TencentFake.statuses({"PhoneNumber": "+8613700000000", "Code": "Ok"}), AmbiguousOutcome),
        (Reply(200, {"Error": "not wrapped in Response"}), AmbiguousOutcome),
        (Reply(502, "<html>bad gateway</html>"), AmbiguousOutcome),
    ],
)
def test_each_answer_maps_to_its_outcome_class(fake: TencentFake, reply: Reply, outcome: Any) -> None:
    provider = make(fake)
    fake.script(reply)
    if isinstance(outcome, str):
        assert provider.send(sms("1234")).msgid == outcome
        return
    cls, wait_s = outcome if isinstance(outcome, tuple) else (outcome, None)
    with pytest.raises(DeliveryError) as caught:
        provider.send(sms("1234"))
    assert type(caught.value) is cls and caught.value.provider == "tc"
    if wait_s is not None:
        assert caught.value.retry_after_s == wait_s  # type: ignore[attr-defined]


def test_marketing_sms_outside_daytime_waits_until_8_beijing_time(fake: TencentFake) -> None:
    # 23:30 Beijing time is 15:30 UTC; 08:00 Beijing is 8.5 hours later
    late = calendar.timegm((2024, 5, 1, 15, 30, 0, 0, 0, 0))
    assert marketing_wait_s(late) == 8.5 * 3600
    assert marketing_wait_s(calendar.timegm((2024, 5, 1, 23, 59, 30, 0, 0, 0))) == 60  # 07:59:30: 60 s floor
    fake.clock = lambda: late
    provider = make(fake, template_id="4004")
    provider.clock = lambda: late
    with pytest.raises(RateLimited) as caught:
        provider.send(sms("sale"))
    assert caught.value.vendor_code == "FailedOperation.MarketingSendTimeConstraint"
    assert caught.value.retry_after_s == 8.5 * 3600


@pytest.mark.parametrize(
    ("changes", "fake_setup", "cls", "vendor_code"),
    [
        ({"secret_key": "wrong"}, {}, ProviderMisconfigured, "AuthFailure.SignatureFailure"),
        ({"secret_id": "AKIDunknown"}, {}, ProviderMisconfigured, "AuthFailure.SecretIdNotFound"),
        ({"sdk_app_id": "1400000000"}, {}, ProviderMisconfigured, "InvalidParameterValue.SdkAppIdNotExist"),
        (
            {"sign_name": "未审核"},
            {},
            ProviderMisconfigured,
            "FailedOperation.SignatureIncorrectOrUnapproved",
        ),
        ({"template_id": "9999"}, {}, ProviderMisconfigured, "FailedOperation.TemplateIncorrectOrUnapproved"),
        ({}, {"balance": 0}, ProviderOutage, "FailedOperation.InsufficientBalanceInSmsPackage"),
        ({}, {"app_daily_limit": 0}, ProviderOutage, "LimitExceeded.AppDailyLimit"),
        ({}, {}, PermanentFailure, "InvalidParameterValue.TemplateParameterFormatError"),
    ],
)
def test_the_fake_refuses_as_tencent_does(
    fake: TencentFake, changes: dict[str, Any], fake_setup: dict[str, Any], cls: type, vendor_code: str
) -> None:
    for name, value in fake_setup.items():
        setattr(fake, name, value)
    text = "abc" if vendor_code.endswith("FormatError") else "1234"
    with pytest.raises(DeliveryError) as caught:
        make(fake, **changes).send(sms(text))
    assert type(caught.value) is cls and caught.value.vendor_code == vendor_code
    assert fake.sent == []


def test_a_clock_more_than_5_minutes_off_is_a_configuration_error(fake: TencentFake) -> None:
    provider = make(fake)
    provider.clock = lambda: time.time() + 6 * 60
    with pytest.raises(ProviderMisconfigured) as caught:
        provider.send(sms("1234"))
    assert caught.value.vendor_code == "AuthFailure.SignatureExpire"


def test_a_timeout_after_tencent_accepted_is_ambiguous_and_not_deduplicated(fake: TencentFake) -> None:
    provider = make(fake, timeout_s=0.3)
    fake.accept_then_hang(1.0)
    with pytest.raises(AmbiguousOutcome):
        provider.send(sms("1234"))
    assert len(fake.sent) == 1
    provider.send(sms("5678"))
    assert len(fake.sent) == 2 and fake.sent[0].session_context == fake.sent[1].session_context


def test_the_kind_is_registered() -> None:
    assert load_kind("tencent") is TencentSmsProvider


# --- through noti: add, send, record ------------------------------------------------------------


def test_a_notification_is_delivered_and_keeps_the_serial_no(configure: Any, fake: TencentFake) -> None:
    rt = configure(providers={"tc": options(fake)})
    record_id = noti.notify_sms("13912345678", "4321", provider="tc")
    [result] = noti.send(record_id)
    record = rt.store.get(record_id)
    assert result.mark == "OK" and record.status is Status.DONE
    assert record.msgid == fake.sent[0].serial_no


def test_a_blacklisted_number_is_suppressed(configure: Any, fake: TencentFake) -> None:
    # given
    rt = configure(providers={"tc": options(fake), "backup": {"kind": "sandbox"}})
    record_id = noti.notify_sms("+8613800000000", "4321", provider="tc,backup")
    # when
    noti.send(record_id)
    # then: invalid at once, no failover, and the number is refused from now on
    record = rt.store.get(record_id)
    assert record.status is Status.INVALID and "PhoneNumberInBlacklist" in record.errmsg
    assert rt.redis.llen(rt.keys.sandbox_outbox("backup")) == 0
    assert rt.store.is_suppressed("sms", "+8613800000000")


def test_a_frequency_limited_record_waits_without_spending_an_attempt(
    configure: Any, fake: TencentFake
) -> None:
    rt = configure(providers={"tc": options(fake)})
    noti.send(noti.notify_sms(PHONE, "1111", provider="tc"))
    record_id = noti.notify_sms(PHONE, "1111", provider="tc")
    [result] = noti.send(record_id)
    record = rt.store.get(record_id)
    assert result.status is Status.WAITING and record.retry == 0
    assert record.lease_until_ms - record.modified_ms >= 29_000
