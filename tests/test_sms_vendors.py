"""What the template-SMS providers (Aliyun, Tencent Cloud) do alike, each test run once per
vendor against its faithful local fake (:mod:`tests.sms_vendors`): what ``check`` refuses,
each vendor answer's outcome class, what the fakes refuse, clocks, timeouts, endpoints, a
notification through noti, and a record's own template (the ``template`` field; Twilio
ignores it). What only one vendor does is in tests/test_sms_aliyun.py and
tests/test_sms_tencent.py."""

# ruff: noqa: F811 - the SMS fixtures (tests/sms_vendors.py) are imported by name

from __future__ import annotations

import json
import socket
import time
from typing import Any

import pytest

import noti
from noti.core.record import Status
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
from tests.fakes._server import Reply
from tests.fakes.aliyun import AliyunTemplate
from tests.fakes.tencent import TencentFake, TencentTemplate
from tests.sms_vendors import (  # noqa: F401 - fixtures
    ALIYUN,
    CN_PHONE,
    TENCENT,
    TWILIO,
    US_PHONE,
    Clock,
    SmsVendor,
    by_vendor,
    fake,
    sms,
    template_kind,
    vendor,
)

BADTARGET, BADTEXT = "e.cmd.noti.add.badtarget", "e.cmd.noti.add.badtext"

#: Per vendor: option changes, a text and a target that ``check`` refuses, and the code.
NEVER_SENDABLE = {
    ALIYUN: {
        "hk-number-on-a-mainland-template": ({}, "1234", "+85291234567", BADTARGET),
        "a-landline": ({}, "1234", "+861012345678", BADTARGET),
        "a-mainland-number-on-an-international-template": (
            {"template_scope": "international"},
            "1234",
            "13912345678",
            BADTARGET,
        ),
        "a-parameter-missing": (
            {"text_param": None, "template_params": ["name", "order"]},
            '{"name": "x"}',
            CN_PHONE,
            BADTEXT,
        ),
        "a-parameter-not-in-the-template": (
            {"text_param": None, "template_params": ["name"]},
            '{"name": "x", "nme": "y"}',
            CN_PHONE,
            BADTEXT,
        ),
        "plain-text-without-text-param": ({"text_param": None}, "plain text", CN_PHONE, BADTEXT),
        "an-object-value": ({}, '{"code": {"nested": 1}}', CN_PHONE, BADTEXT),
        "a-null-value": ({}, '{"code": null}', CN_PHONE, BADTEXT),
        "looks-like-json-is-not": ({}, '{"code": "12", ', CN_PHONE, BADTEXT),
        "a-value-too-long": ({"param_max_chars": 6}, "1234567", CN_PHONE, BADTEXT),
    },
    TENCENT: {
        "hk-number-on-a-mainland-template": ({}, "1234", "+85291234567", BADTARGET),
        "a-landline": ({}, "1234", "+861012345678", BADTARGET),
        "a-mainland-number-on-an-international-template": (
            {"template_scope": "international", "template_id": "3003"},
            "1234",
            CN_PHONE,
            BADTARGET,
        ),
        "a-parameter-missing": (
            {"text_param": None, "template_params": ["a", "b"]},
            '{"a": "1"}',
            CN_PHONE,
            BADTEXT,
        ),
        "plain-text-without-text-param": (
            {"text_param": None, "template_params": ["a", "b"]},
            "plain",
            CN_PHONE,
            BADTEXT,
        ),
        "a-parameter-not-in-the-template": (
            {"text_param": None, "template_params": ["a"]},
            '{"a": "1", "b": "2"}',
            CN_PHONE,
            BADTEXT,
        ),
        "a-list-value": ({}, '{"code": [1]}', CN_PHONE, BADTEXT),
        "a-value-too-long": ({"param_max_chars": 12}, "1234567890123", CN_PHONE, BADTEXT),
    },
}


def _ali_business(code: str, message: str = "") -> Reply:
    return Reply(200, {"Code": code, "Message": message or code, "RequestId": "C0A0BE93"})


def _ali_gateway(status: int, code: str) -> Reply:
    return Reply(status, {"RequestId": "X", "HostId": "dysmsapi.aliyuncs.com", "Code": code, "Message": code})


def _tc_status(code: str, message: str = "") -> Reply:
    return TencentFake.statuses(
        {"SerialNo": "", "PhoneNumber": CN_PHONE, "Code": code, "Message": message or code}
    )


def _tc_error(code: str) -> Reply:
    return TencentFake.error(code, code)


_ALI_OK = {"Code": "OK", "Message": "OK", "BizId": "900619746936498440^0", "RequestId": "F655A8D5"}
_LIMIT = "isv.BUSINESS_LIMIT_CONTROL"

#: Per vendor: an answer, and its outcome: the msgid (a str), the class raised, or (the class,
#: its ``retry_after_s``).
ANSWERS: dict[SmsVendor, dict[str, tuple[Reply, Any]]] = {
    ALIYUN: {
        "OK": (Reply(200, _ALI_OK), "900619746936498440^0"),
        "limit-minute": (_ali_business(_LIMIT, "触发分钟级流控Permits:1"), (RateLimited, 60)),
        "limit-hour": (_ali_business(_LIMIT, "触发小时级流控Permits:5"), (RateLimited, 3600)),
        "limit-day": (_ali_business(_LIMIT, "触发天级流控Permits:10"), (RateLimited, 86400)),
        "limit-number-day": (_ali_business(_LIMIT, "触发号码天级流控Permits:40"), (RateLimited, 86400)),
        "limit-minute-english": (
            _ali_business(_LIMIT, "Triggered minute-level flow control"),
            (RateLimited, 60),
        ),
        "limit-no-window": (_ali_business(_LIMIT, "流控"), (RateLimited, 3600)),
        **{
            code: (_ali_business(code), ProviderOutage)
            for code in (
                "isv.DAY_LIMIT_CONTROL",
                "isv.MONTH_LIMIT_CONTROL",
                "isv.AMOUNT_NOT_ENOUGH",
                "isv.OUT_OF_SERVICE",
                "isv.ACCOUNT_ABNORMAL",
            )
        },
        **{
            code: (_ali_business(code), ProviderMisconfigured)
            for code in (
                "isv.SMS_SIGNATURE_ILLEGAL",
                "isv.SMS_TEMPLATE_ILLEGAL",
                "isv.SMS_SIGNATURE_SCENE_ILLEGAL",
                "isp.RAM_PERMISSION_DENY",
                "isv.DENY_IP_RANGE",
                "isv.PRODUCT_UN_SUBSCRIPT",
                "isv.DOMESTIC_NUMBER_NOT_SUPPORTED",
            )
        },
        **{
            code: (_ali_business(code), PermanentFailure)
            for code in (
                "isv.MOBILE_NUMBER_ILLEGAL",
                "isv.TEMPLATE_MISSING_PARAMETERS",
                "isv.INVALID_JSON_PARAM",
                "isv.PARAM_NOT_SUPPORT_URL",
                "isv.SMS_CONTENT_ILLEGAL",
            )
        },
        "blacklisted-keyword": (_ali_business("isv.BLACK_KEY_CONTROL_LIMIT", "黑名单管控"), PermanentFailure),
        "blacklisted-number": (
            _ali_business("isv.BLACK_KEY_CONTROL_LIMIT", "号码黑名单管控"),
            RecipientOptedOut,
        ),
        "isp.SYSTEM_ERROR": (_ali_business("isp.SYSTEM_ERROR"), AmbiguousOutcome),
        "isv.SOMETHING_NEW": (_ali_business("isv.SOMETHING_NEW"), TemporaryFailure),
        # Tencent's literal: Aliyun's success is "OK" only
        "Ok-is-not-OK": (_ali_business("Ok"), TemporaryFailure),
        "Throttling.User": (_ali_gateway(400, "Throttling.User"), TemporaryFailure),
        "SignatureNonceUsed": (_ali_gateway(400, "SignatureNonceUsed"), TemporaryFailure),
        "ServiceUnavailable": (_ali_gateway(503, "ServiceUnavailable"), TemporaryFailure),
        "InternalError": (_ali_gateway(500, "InternalError"), AmbiguousOutcome),
        "BadGateway": (_ali_gateway(502, "BadGateway"), AmbiguousOutcome),
        "SignatureDoesNotMatch": (_ali_gateway(400, "SignatureDoesNotMatch"), ProviderMisconfigured),
        "InvalidAccessKeyId.NotFound": (
            _ali_gateway(404, "InvalidAccessKeyId.NotFound"),
            ProviderMisconfigured,
        ),
        "InvalidTimeStamp.Expired": (_ali_gateway(400, "InvalidTimeStamp.Expired"), ProviderMisconfigured),
        "Forbidden.RAM": (_ali_gateway(403, "Forbidden.RAM"), ProviderMisconfigured),
        "html": (Reply(200, "<html>gateway</html>"), AmbiguousOutcome),
        "no-code": (Reply(200, {"RequestId": "no code"}), AmbiguousOutcome),
    },
    TENCENT: {
        "Ok": (
            TencentFake.statuses({"SerialNo": "5000:10457", "PhoneNumber": CN_PHONE, "Code": "Ok"}),
            "5000:10457",
        ),
        **{
            code.removeprefix("LimitExceeded."): (_tc_status(code), (RateLimited, wait_s))
            for code, wait_s in (
                ("LimitExceeded.PhoneNumberThirtySecondLimit", 30),
                ("LimitExceeded.PhoneNumberOneHourLimit", 3600),
                ("LimitExceeded.PhoneNumberDailyLimit", 86400),
                ("LimitExceeded.PhoneNumberSameContentDailyLimit", 86400),
                ("LimitExceeded.DeliveryFrequencyLimit", 3600),
            )
        },
        # a per-number limit at the request level too
        "PhoneNumberDailyLimit-as-an-error": (
            _tc_error("LimitExceeded.PhoneNumberDailyLimit"),
            (RateLimited, 86400),
        ),
        "LimitExceeded.AppDailyLimit": (_tc_status("LimitExceeded.AppDailyLimit"), ProviderOutage),
        "FailedOperation.InsufficientBalanceInSmsPackage": (
            _tc_status("FailedOperation.InsufficientBalanceInSmsPackage"),
            ProviderOutage,
        ),
        **{
            code: (_tc_error(code), ProviderOutage)
            for code in (
                "LimitExceeded.AppMainlandChinaDailyLimit",
                "UnauthorizedOperation.SerivceSuspendDueToArrears",
                "UnauthorizedOperation.SdkAppIdIsDisabled",
            )
        },
        "FailedOperation.PhoneNumberInBlacklist": (
            _tc_status("FailedOperation.PhoneNumberInBlacklist"),
            RecipientOptedOut,
        ),
        **{
            code: (_tc_status(code), PermanentFailure)
            for code in ("InvalidParameterValue.IncorrectPhoneNumber", "FailedOperation.PhoneNumberParseFail")
        },
        **{
            code: (_tc_error(code), PermanentFailure)
            for code in (
                "InvalidParameterValue.TemplateParameterFormatError",
                "InvalidParameterValue.TemplateParameterLengthLimit",
                "FailedOperation.ContainSensitiveWord",
                "FailedOperation.TemplateParamSetNotMatchApprovedTemplate",
                "UnsupportedOperation.ContainDomesticAndInternationalPhoneNumber",
                "LimitExceeded.PhoneNumberCountLimit",
                "InvalidParameterValue.SomethingNew",
            )
        },
        **{
            code: (_tc_error(code), ProviderMisconfigured)
            for code in (
                "FailedOperation.SignatureIncorrectOrUnapproved",
                "FailedOperation.TemplateIncorrectOrUnapproved",
                "InvalidParameterValue.SdkAppIdNotExist",
                "UnauthorizedOperation.RequestIpNotInWhitelist",
                "UnauthorizedOperation.IndividualUserMarketingSmsPermissionDeny",
                "AuthFailure.SignatureFailure",
                "AuthFailure.SecretIdNotFound",
                "AuthFailure.SignatureExpire",
                "InternalError.RequestTimeException",
            )
        },
        "InternalError.Timeout": (_tc_error("InternalError.Timeout"), AmbiguousOutcome),
        "InternalError.SendAndRecvFail": (_tc_status("InternalError.SendAndRecvFail"), AmbiguousOutcome),
        "InternalError.UnknownError": (_tc_error("InternalError.UnknownError"), AmbiguousOutcome),
        "InternalError": (_tc_error("InternalError"), AmbiguousOutcome),
        **{
            code: (_tc_error(code), TemporaryFailure)
            for code in (
                "RequestLimitExceeded",
                "RequestLimitExceeded.UinFreqLimit",
                "FailedOperation.SomethingNew",
            )
        },
        # Aliyun's literal: Tencent's success is "Ok" only
        "OK-is-not-Ok": (_tc_status("OK"), TemporaryFailure),
        "no-entry-for-our-number": (TencentFake.statuses(), AmbiguousOutcome),
        "only-another-numbers-entry": (
            TencentFake.statuses({"PhoneNumber": "+8613700000000", "Code": "Ok"}),
            AmbiguousOutcome,
        ),
        "not-wrapped-in-Response": (Reply(200, {"Error": "not wrapped in Response"}), AmbiguousOutcome),
        "html-502": (Reply(502, "<html>bad gateway</html>"), AmbiguousOutcome),
    },
}

#: Per vendor: option changes and fake settings the fake refuses a send for, the class raised,
#: the vendor's code, and the text sent.
FAKE_REFUSALS = {
    ALIYUN: {
        "SignatureDoesNotMatch": (
            {"access_key_secret": "wrong"},
            {},
            ProviderMisconfigured,
            "SignatureDoesNotMatch",
            "1234",
        ),
        "InvalidAccessKeyId.NotFound": (
            {"access_key_id": "LTAIunknown"},
            {},
            ProviderMisconfigured,
            "InvalidAccessKeyId.NotFound",
            "1234",
        ),
        "isv.SMS_SIGNATURE_ILLEGAL": (
            {"sign_name": "未审核"},
            {},
            ProviderMisconfigured,
            "isv.SMS_SIGNATURE_ILLEGAL",
            "1234",
        ),
        "isv.SMS_TEMPLATE_ILLEGAL": (
            {"template_code": "SMS_999"},
            {},
            ProviderMisconfigured,
            "isv.SMS_TEMPLATE_ILLEGAL",
            "1234",
        ),
        "isv.AMOUNT_NOT_ENOUGH": ({}, {"balance": 0}, ProviderOutage, "isv.AMOUNT_NOT_ENOUGH", "1234"),
        "isv.PARAM_LENGTH_LIMIT": (
            {},
            {"param_max_chars": 2},
            PermanentFailure,
            "isv.PARAM_LENGTH_LIMIT",
            "1234",
        ),
    },
    TENCENT: {
        "AuthFailure.SignatureFailure": (
            {"secret_key": "wrong"},
            {},
            ProviderMisconfigured,
            "AuthFailure.SignatureFailure",
            "1234",
        ),
        "AuthFailure.SecretIdNotFound": (
            {"secret_id": "AKIDunknown"},
            {},
            ProviderMisconfigured,
            "AuthFailure.SecretIdNotFound",
            "1234",
        ),
        "InvalidParameterValue.SdkAppIdNotExist": (
            {"sdk_app_id": "1400000000"},
            {},
            ProviderMisconfigured,
            "InvalidParameterValue.SdkAppIdNotExist",
            "1234",
        ),
        "FailedOperation.SignatureIncorrectOrUnapproved": (
            {"sign_name": "未审核"},
            {},
            ProviderMisconfigured,
            "FailedOperation.SignatureIncorrectOrUnapproved",
            "1234",
        ),
        "FailedOperation.TemplateIncorrectOrUnapproved": (
            {"template_id": "9999"},
            {},
            ProviderMisconfigured,
            "FailedOperation.TemplateIncorrectOrUnapproved",
            "1234",
        ),
        "FailedOperation.InsufficientBalanceInSmsPackage": (
            {},
            {"balance": 0},
            ProviderOutage,
            "FailedOperation.InsufficientBalanceInSmsPackage",
            "1234",
        ),
        "LimitExceeded.AppDailyLimit": (
            {},
            {"app_daily_limit": 0},
            ProviderOutage,
            "LimitExceeded.AppDailyLimit",
            "1234",
        ),
        "InvalidParameterValue.TemplateParameterFormatError": (
            {},
            {},
            PermanentFailure,
            "InvalidParameterValue.TemplateParameterFormatError",
            "abc",  # a verification template takes digits only
        ),
    },
}

#: Per vendor: how far off its clock may be, a clock past it, and the vendor's code for it.
CLOCK_SKEW = {
    ALIYUN: {"16-minutes-behind": (-16 * 60, "InvalidTimeStamp.Expired")},
    TENCENT: {"6-minutes-ahead": (6 * 60, "AuthFailure.SignatureExpire")},
}

#: Per vendor: the second of two texts to one number that its per-number flow control holds
#: back (the first is "1111"), the vendor's code and the window it names.
FLOW_LIMITS = {
    ALIYUN: {"one-a-minute": ("2222", "isv.BUSINESS_LIMIT_CONTROL", 60)},
    TENCENT: {"same-content-once-in-30-s": ("1111", "LimitExceeded.PhoneNumberThirtySecondLimit", 30)},
}


def test_the_kind_is_registered(vendor: SmsVendor) -> None:
    assert load_kind(vendor.id) is vendor.provider_class


# --- check: refused before anything is stored ---------------------------------------------------


@pytest.mark.parametrize(("vendor", "changes", "text", "target", "code"), by_vendor(NEVER_SENDABLE))
def test_check_refuses_what_can_never_be_sent(
    fake: Any, vendor: SmsVendor, changes: dict[str, Any], text: str, target: str, code: str
) -> None:
    with pytest.raises(InvalidInput) as caught:
        vendor.provider(fake.url, **changes).check(sms(text, target=target))
    assert caught.value.code == code
    assert "13912345678" not in caught.value.message  # numbers are masked


@pytest.mark.parametrize("target", [CN_PHONE, "13912345678"])
def test_check_accepts_both_forms_of_a_mainland_number(fake: Any, vendor: SmsVendor, target: str) -> None:
    vendor.provider(fake.url).check(sms("1234", target=target))


def test_repr_and_options_never_show_the_secret(fake: Any, vendor: SmsVendor) -> None:
    provider = vendor.provider(fake.url)
    assert vendor.secret not in repr(provider) and vendor.secret not in repr(provider.options)


# --- the vendor's answers ------------------------------------------------------------------------


@pytest.mark.parametrize(("vendor", "reply", "outcome"), by_vendor(ANSWERS))
def test_each_answer_maps_to_its_outcome_class(
    fake: Any, vendor: SmsVendor, reply: Reply, outcome: Any
) -> None:
    provider = vendor.provider(fake.url)
    fake.script(reply)
    if isinstance(outcome, str):
        assert provider.send(sms("1234")).msgid == outcome
        return
    cls, wait_s = outcome if isinstance(outcome, tuple) else (outcome, None)
    with pytest.raises(DeliveryError) as caught:
        provider.send(sms("1234"))
    assert type(caught.value) is cls and caught.value.provider == vendor.name
    if wait_s is not None:
        assert caught.value.retry_after_s == wait_s  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("vendor", "changes", "fake_setup", "cls", "vendor_code", "text"), by_vendor(FAKE_REFUSALS)
)
def test_the_fake_refuses_as_its_vendor_does(
    fake: Any,
    vendor: SmsVendor,
    changes: dict[str, Any],
    fake_setup: dict[str, Any],
    cls: type,
    vendor_code: str,
    text: str,
) -> None:
    for name, value in fake_setup.items():
        setattr(fake, name, value)
    with pytest.raises(DeliveryError) as caught:
        vendor.provider(fake.url, **changes).send(sms(text))
    assert type(caught.value) is cls and caught.value.vendor_code == vendor_code
    assert fake.sent == []


@pytest.mark.parametrize(("vendor", "skew_s", "vendor_code"), by_vendor(CLOCK_SKEW))
def test_a_clock_further_off_than_the_vendor_allows_is_a_configuration_error(
    fake: Any, vendor: SmsVendor, skew_s: float, vendor_code: str
) -> None:
    provider = vendor.provider(fake.url)
    provider.clock = lambda: time.time() + skew_s
    with pytest.raises(ProviderMisconfigured) as caught:
        provider.send(sms("1234"))
    assert caught.value.vendor_code == vendor_code


def test_a_timeout_after_the_vendor_accepted_is_ambiguous_and_not_deduplicated(
    fake: Any, vendor: SmsVendor
) -> None:
    # given the vendor accepts the send but answers after the client gave up
    provider = vendor.provider(fake.url, timeout_s=0.3)
    fake.accept_then_hang(1.0)
    message = sms("1234")
    # when / then: the outcome is ambiguous, and the message did go out
    with pytest.raises(AmbiguousOutcome):
        provider.send(message)
    assert vendor.received(fake) == 1
    # and the vendor does not deduplicate: the same message again (past its per-number
    # windows) is a second SMS, naming the same record
    fake.clock = provider.clock = Clock(time.time() + 120)
    provider.send(message)
    [(_, first), (_, second)] = vendor.sent_ids(fake)
    assert first == second == message.id


def test_nobody_listening_is_an_outage(vendor: SmsVendor) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ProviderOutage):
        vendor.provider(f"http://127.0.0.1:{port}").send(sms("1234"))


# --- endpoints (issue 20) -------------------------------------------------------------------------


@pytest.mark.parametrize("prefix", ["/sms-proxy", "/sms-proxy/", "/a/b/c"])
def test_an_endpoint_path_is_kept_and_the_request_still_signed(
    fake: Any, vendor: SmsVendor, prefix: str
) -> None:
    # a vendor's regional path or a corporate proxy's prefix: requests go under it
    receipt = vendor.provider(fake.url + prefix).send(sms("1234"))
    assert receipt.msgid and len(fake.sent) == 1  # the fake checked the signature
    assert fake.requests[-1].path == prefix.rstrip("/") + "/"


@pytest.mark.parametrize(
    "endpoint",
    [
        "ftp://dysmsapi.aliyuncs.com",
        "https://",
        "https:///path",
        "https://host/with space",
        "https://host/path?x=1",
        "https://host/#frag",
        " https://host",
        "dysmsapi.aliyuncs.com",
        "",
    ],
)
def test_a_bad_endpoint_is_refused_naming_the_provider_and_key(vendor: SmsVendor, endpoint: str) -> None:
    # anything else than http(s)://host[:port][/path]
    with pytest.raises(InvalidConfig) as caught:
        vendor.provider(endpoint)
    assert caught.value.code == "e.noti.config" and "endpoint" in caught.value.message
    assert f"[providers.{vendor.name}]" in caught.value.message


# --- through noti: add, send, record ------------------------------------------------------------


@pytest.mark.parametrize("target", [CN_PHONE, "13912345678"])
def test_a_notification_is_delivered_and_keeps_the_vendors_id(
    configure: Any, fake: Any, vendor: SmsVendor, target: str
) -> None:
    rt = configure(providers={vendor.name: vendor.options(fake.url)})
    record_id = noti.notify_sms(target, "4321", provider=vendor.name)
    [result] = noti.send(record_id)
    record = rt.store.get(record_id)
    assert result.mark == "OK" and record.status is Status.DONE
    [(vendor_id, named)] = vendor.sent_ids(fake)
    assert record.msgid == vendor_id and named == record_id and record.sent_by == vendor.name


@pytest.mark.parametrize(("vendor", "second", "vendor_code", "window_s"), by_vendor(FLOW_LIMITS))
def test_a_flow_limited_record_waits_without_spending_an_attempt_or_failing_over(
    configure: Any, fake: Any, vendor: SmsVendor, second: str, vendor_code: str, window_s: int
) -> None:
    # given a second provider that would deliver at once
    rt = configure(providers={vendor.name: vendor.options(fake.url), "backup": {"kind": "sandbox"}})
    noti.send(noti.notify_sms(CN_PHONE, "1111", provider=vendor.name))
    # when the same number hits the vendor's per-number window
    record_id = noti.notify_sms(CN_PHONE, second, provider=f"{vendor.name},backup")
    [result] = noti.send(record_id)
    # then the record waits the window, the attempt is not counted, and backup sent nothing
    record = rt.store.get(record_id)
    assert result.status is Status.WAITING and record.retry == 0
    assert vendor_code in record.errmsg
    assert record.lease_until_ms - record.modified_ms >= (window_s - 1) * 1000
    assert rt.redis.llen(rt.keys.sandbox_outbox("backup")) == 0


def test_an_account_without_balance_fails_over(configure: Any, fake: Any, vendor: SmsVendor) -> None:
    fake.balance = 0
    rt = configure(providers={vendor.name: vendor.options(fake.url), "backup": {"kind": "sandbox"}})
    record_id = noti.notify_sms(CN_PHONE, "4321", provider=f"{vendor.name},backup")
    noti.send(record_id)
    assert rt.store.get(record_id).sent_by == "backup"


# --- a record's own template (the template field, issue 34) -------------------------------------

#: Per vendor: a second approved template (its code, as the fake has it), a text of its
#: parameters given in another order than the template's, and the parameters the vendor gets.
OWN_TEMPLATE: dict[SmsVendor, tuple[str, Any, str, Any]] = {
    ALIYUN: (
        "SMS_200002",
        AliyunTemplate(("name", "order"), "notice"),
        '{"order": "A-7", "name": "Ann"}',
        {"order": "A-7", "name": "Ann"},
    ),
    # Tencent's variables are {1}, {2}: keys that are all numbers go in their order
    TENCENT: ("2002", TencentTemplate(2, "notice"), '{"2": "A-7", "1": "Ann"}', ("Ann", "A-7")),
}


def _with_own_template(vendor: SmsVendor) -> Any:
    """The vendor's fake with its configured template and :data:`OWN_TEMPLATE`'s."""
    configured = vendor.fake().templates
    code, template, _, _ = OWN_TEMPLATE[vendor]
    return vendor.fake(templates={**configured, code: template})


def _sent_template(vendor: SmsVendor, fake: Any) -> tuple[str, Any]:
    """The template code and parameters of the one message the fake accepted."""
    [sent] = fake.sent
    return (sent.template_code, sent.params) if vendor is ALIYUN else (sent.template_id, sent.params)


def test_a_records_own_template_goes_out_instead_of_the_configured_one(
    configure: Any, vendor: SmsVendor
) -> None:
    code, _, text, params = OWN_TEMPLATE[vendor]
    with _with_own_template(vendor) as fake:
        # given a provider whose configured template takes one parameter, named
        rt = configure(providers={vendor.name: vendor.options(fake.url, template_params=["code"])})
        # when a record names its own template for this provider (and another for someone else)
        mapping = {vendor.name: code, "other-account": "SMS_999"}
        record_id = noti.notify_sms(CN_PHONE, text, template=mapping, provider=vendor.name)
        stored = rt.redis.hget(rt.keys.record(record_id), "noti_sms_tmpl")
        assert json.loads(stored) == mapping
        [result] = noti.send(record_id)
        # then the vendor (which checked the signature and the template's variables) sent that
        # template with the record's parameters: the configured names were not asked for
        assert result.mark == "OK" and rt.store.get(record_id).status is Status.DONE
        assert _sent_template(vendor, fake) == (code, params)


@pytest.mark.parametrize("keyed_by", ["another-provider", "the-vendor-not-the-name"])
def test_without_an_entry_for_its_name_a_provider_sends_its_configured_template(
    configure: Any, vendor: SmsVendor, keyed_by: str
) -> None:
    # the key is the provider's name ([providers.ali]), never its kind ("aliyun"): two accounts
    # of one vendor have templates of their own
    code = OWN_TEMPLATE[vendor][0]
    key = "someone-else" if keyed_by == "another-provider" else vendor.id
    assert key != vendor.name
    with _with_own_template(vendor) as fake:
        configure(providers={vendor.name: vendor.options(fake.url)})
        record_id = noti.notify_sms(CN_PHONE, "4321", template={key: code}, provider=vendor.name)
        [result] = noti.send(record_id)
        assert result.mark == "OK"
        configured = vendor.base.get("template_code") or vendor.base["template_id"]
        assert _sent_template(vendor, fake)[0] == configured


def test_a_records_own_template_takes_a_json_object_of_parameters(configure: Any, vendor: SmsVendor) -> None:
    # text_param names the configured template's parameter, not the record's own template's
    code = OWN_TEMPLATE[vendor][0]
    with _with_own_template(vendor) as fake:
        rt = configure(providers={vendor.name: vendor.options(fake.url)})
        with pytest.raises(InvalidInput) as caught:
            noti.notify_sms(CN_PHONE, "4321", template={vendor.name: code}, provider=vendor.name)
        assert caught.value.code == BADTEXT and "JSON object" in caught.value.message
        assert rt.store.count() == 0 and fake.sent == []


def test_a_records_own_template_keeps_the_accounts_parameter_length_limit(
    fake: Any, vendor: SmsVendor
) -> None:
    code = OWN_TEMPLATE[vendor][0]
    provider = vendor.provider(fake.url, param_max_chars=4)
    with pytest.raises(InvalidInput) as caught:
        provider.check(sms('{"1": "12345"}', template={vendor.name: code}))
    assert caught.value.code == BADTEXT


BAD_TEMPLATES: dict[str, Any] = {
    "empty": {},
    "a-list": ["SMS_1"],
    "a-string": "SMS_1",
    "not-json": "{SMS_1",
    "json-of-a-list": '["SMS_1"]',
    "seventeen-providers": {f"p{n}": "SMS_1" for n in range(17)},
    "a-number-as-code": {"ali": 1234},
    "an-empty-code": {"ali": ""},
    "a-code-of-65": {"ali": "S" * 65},
    "a-code-with-a-space": {"ali": "SMS 1"},
    "a-code-with-a-newline": {"ali": "SMS_1\n"},
    "a-code-with-a-control-character": {"ali": "SMS_\x001"},
    "an-object-as-code": {"ali": {"code": "SMS_1"}},
    "a-name-with-a-space": {"my provider": "SMS_1"},
    "a-name-starting-with-a-dot": {".ali": "SMS_1"},
    "a-name-of-65": {"a" * 65: "SMS_1"},
    "an-empty-name": {"": "SMS_1"},
}


@pytest.mark.parametrize("template", BAD_TEMPLATES.values(), ids=BAD_TEMPLATES.keys())
def test_a_bad_template_field_is_refused_at_notify_and_nothing_is_stored(
    configure: Any, fake: Any, vendor: SmsVendor, template: Any
) -> None:
    rt = configure(providers={vendor.name: vendor.options(fake.url)})
    with pytest.raises(InvalidInput) as caught:
        noti.notify_sms(CN_PHONE, '{"code": "4321"}', template=template, provider=vendor.name)
    assert caught.value.code == "e.cmd.noti.add.badtemplate" and "template" in caught.value.message
    assert rt.store.count() == 0 and fake.sent == []


def test_the_template_field_at_its_limits_is_taken(configure: Any, fake: Any, vendor: SmsVendor) -> None:
    # 16 providers, names of 64, codes of 64, given as JSON text (as the CLI and HTTP give it)
    mapping = {f"{n:02d}" + "p" * 62: "S" * 64 for n in range(16)}
    rt = configure(providers={vendor.name: vendor.options(fake.url)})
    record_id = noti.notify_sms(CN_PHONE, "4321", template=json.dumps(mapping), provider=vendor.name)
    assert rt.store.get(record_id).fields["template"] == mapping


def test_twilio_sends_its_text_and_ignores_the_template_field(configure: Any) -> None:
    with TWILIO.fake() as fake:
        rt = configure(providers={TWILIO.name: TWILIO.options(fake.url)})
        template = {TWILIO.name: "HX0123", "ali": "SMS_200002"}
        record_id = noti.notify_sms(US_PHONE, TWILIO.text, template=template, provider=TWILIO.name)
        [result] = noti.send(record_id)
        assert result.mark == "OK" and rt.store.get(record_id).status is Status.DONE
        [sent] = fake.messages.values()
        assert sent["body"] == TWILIO.text and "HX0123" not in json.dumps(sent)
