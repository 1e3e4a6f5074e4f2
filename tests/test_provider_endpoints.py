"""A provider ``endpoint`` may carry a path (a vendor's regional path, a corporate proxy's
prefix): requests go under it, still signed as the vendor expects; anything else than
``http(s)://host[:port][/path]`` is refused naming the provider and the key (issue 20)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis

from noti.channels.sms.aliyun import AliyunSmsProvider
from noti.channels.sms.tencent import TencentSmsProvider
from noti.core.keys import Keys
from noti.core.record import Channel
from noti.errors import InvalidConfig
from noti.providers.base import Message
from tests.fakes.aliyun import AliyunFake
from tests.fakes.tencent import TencentFake

SMS = Message(
    id="01jtestrecord000000000000", channel=Channel.SMS, target="+8613912345678", fields={"text": "1234"}
)


def aliyun(endpoint: str) -> AliyunSmsProvider:
    options = {
        "access_key_id": "LTAItestkey",
        "access_key_secret": "testsecret",
        "sign_name": "noti测试",
        "template_code": "SMS_100001",
        "text_param": "code",
        "endpoint": endpoint,
    }
    return AliyunSmsProvider("ali", options, redis=redis.Redis(), keys=Keys("noti:"))


def tencent(endpoint: str) -> TencentSmsProvider:
    options = {
        "secret_id": "AKIDtestsecretid",
        "secret_key": "testsecretkey",
        "sdk_app_id": "1400006666",
        "sign_name": "noti测试",
        "template_id": "1001",
        "text_param": "code",
        "endpoint": endpoint,
    }
    return TencentSmsProvider("tc", options, redis=redis.Redis(), keys=Keys("noti:"))


@pytest.fixture(params=["aliyun", "tencent"])
def vendor(request: pytest.FixtureRequest) -> Iterator[tuple[Any, Any]]:
    fake: Any = AliyunFake() if request.param == "aliyun" else TencentFake()
    with fake:
        yield fake, aliyun if request.param == "aliyun" else tencent


@pytest.mark.parametrize("prefix", ["/sms-proxy", "/sms-proxy/", "/a/b/c"])
def test_an_endpoint_path_is_kept_and_the_request_still_signed(vendor: tuple[Any, Any], prefix: str) -> None:
    fake, make = vendor
    receipt = make(fake.url + prefix).send(SMS)
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
@pytest.mark.parametrize("make", [aliyun, tencent])
def test_a_bad_endpoint_is_refused_naming_the_provider_and_key(make: Any, endpoint: str) -> None:
    with pytest.raises(InvalidConfig) as caught:
        make(endpoint)
    assert caught.value.code == "e.noti.config" and "endpoint" in caught.value.message
    assert "[providers." in caught.value.message
