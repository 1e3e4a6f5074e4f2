"""The SMS vendors as the SMS tests meet them: Aliyun, Tencent Cloud and Twilio, each with its
fake (tests/fakes/), the options of a provider reaching it, a number it delivers to and one
whose delivery fails, and what its answers and receipts look like. What the vendors do alike is
one test run once per vendor (ids ``aliyun``, ``tencent``, ``twilio``), in
tests/test_sms_vendors.py, tests/test_receipts_vendors.py and tests/test_sms_once.py; only
what is a vendor's own stays in its file (tests/test_sms_aliyun.py, …).

Aliyun and Tencent send approved templates (:data:`TEMPLATE_VENDORS`); each fake here has the
one template the options name, taking one parameter (``code``) filled from plain text.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

import pytest
import redis

from noti.channels.sms.aliyun import AliyunSmsProvider
from noti.channels.sms.tencent import TencentSmsProvider
from noti.channels.sms.twilio import TwilioProvider
from noti.core.keys import Keys
from noti.core.record import Channel, new_id
from noti.providers.base import Message, Provider
from tests.fakes.aliyun import AliyunFake, AliyunTemplate
from tests.fakes.tencent import TencentFake, TencentTemplate
from tests.fakes.twilio import ACCOUNT_SID, AUTH_TOKEN, FROM_NUMBER, TwilioFake, error_reply

__all__ = [
    "ALIYUN",
    "CN_FAILING",
    "CN_PHONE",
    "RECEIPT_KEY",
    "TEMPLATE_VENDORS",
    "TENCENT",
    "TWILIO",
    "US_FAILING",
    "US_PHONE",
    "VENDORS",
    "SmsVendor",
    "by_vendor",
    "fake",
    "sms",
    "vendor",
]

CN_PHONE, CN_FAILING = "+8613912345678", "+8613912345600"
US_PHONE, US_FAILING = "+14155550123", "+14155550177"
#: The ``key=`` of the receipt URL given to Aliyun and Tencent (they sign nothing).
RECEIPT_KEY = "rk-0123456789abcdef"
TemplateKind = Literal["verification", "notice"]


@dataclass(frozen=True, eq=False)
class SmsVendor:
    """One SMS vendor, with what its tests need (a key of per-vendor tables: by identity)."""

    #: The test id, and the provider's kind.
    id: str
    #: The name the tests give its provider (``[providers.ali]``).
    name: str
    provider_class: type[Provider]
    #: The provider's options, but for where the fake is (:attr:`url_option`) and ``timeout_s``.
    base: dict[str, Any]
    url_option: str
    #: A number it delivers to, one whose delivery the tests make fail, and a text it sends.
    phone: str
    failing: str
    text: str
    #: A credential in :attr:`base` that must never show.
    secret: str
    #: Its receipts: the code of a delivered message and the fake's code of an undelivered one.
    delivered: str
    undelivered: str

    def __str__(self) -> str:
        return self.id

    def fake(self, kind: TemplateKind = "verification", **settings: Any) -> Any:
        """The vendor's fake (not started), its template of ``kind`` the one the options name."""
        if self.id == "aliyun":
            templates = {"SMS_100001": AliyunTemplate(("code",), kind)}
            return AliyunFake(templates=settings.pop("templates", templates), **settings)
        if self.id == "tencent":
            return TencentFake(
                templates=settings.pop("templates", {"1001": TencentTemplate(1, kind)}), **settings
            )
        return TwilioFake(**settings)

    def options(self, url: str, **changes: Any) -> dict[str, Any]:
        """``[providers.<name>]`` of a provider reaching ``url`` (the fake's)."""
        return {"kind": self.id, **self.base, self.url_option: url, "timeout_s": 2, **changes}

    def provider(self, url: str, *, redis_url: str | None = None, **changes: Any) -> Any:
        """A provider named :attr:`name` reaching ``url`` (redis-py connects at first use only)."""
        client = redis.Redis.from_url(redis_url) if redis_url else redis.Redis()
        return self.provider_class(self.name, self.options(url, **changes), redis=client, keys=Keys("noti:"))

    # --- what the fake got ---------------------------------------------------------------------

    def received(self, fake: Any) -> int:
        """Messages the fake accepted (SMS the phone received)."""
        return len(fake.messages) if self.id == "twilio" else len(fake.sent)

    def sent_ids(self, fake: Any) -> list[tuple[str | None, str]]:
        """Each accepted message as (its vendor id, the record it names: ``OutId``,
        ``SessionContext``; Twilio's body)."""
        if self.id == "aliyun":
            return [(s.biz_id, s.out_id) for s in fake.sent]
        if self.id == "tencent":
            return [(s.serial_no, s.session_context) for s in fake.sent]
        return [(sid, m["body"]) for sid, m in fake.messages.items()]

    def found_id(self, fake: Any) -> str | None:
        """The vendor id a look-up finds for the one message accepted (Aliyun's
        ``QuerySendDetails`` names none)."""
        return None if self.id == "aliyun" else self.sent_ids(fake)[0][0]

    # --- the fake's account --------------------------------------------------------------------

    def refuse_sends(self, fake: Any) -> None:
        """Every later send refused as "this account cannot send" (nothing accepted)."""
        if self.id == "twilio":
            fake.send_refusal = error_reply(60728, status=400)  # the account's hourly limit
        else:
            fake.balance = 0

    def restore_sends(self, fake: Any) -> None:
        """Undo :meth:`refuse_sends`."""
        if self.id == "twilio":
            fake.send_refusal = None
        else:
            fake.balance = None

    def lookup_down(self, fake: Any, down: bool = True) -> None:
        """The vendor's look-up of a message in doubt fails (its send still works)."""
        if self.id == "twilio":
            fake.list_down = down
        else:
            fake.lookup_down = down


ALIYUN = SmsVendor(
    id="aliyun",
    name="ali",
    provider_class=AliyunSmsProvider,
    base={
        "access_key_id": "LTAItestkey",
        "access_key_secret": "testsecret",
        "sign_name": "noti测试",
        "template_code": "SMS_100001",
        "text_param": "code",
    },
    url_option="endpoint",
    phone=CN_PHONE,
    failing=CN_FAILING,
    text="4321",
    secret="testsecret",
    delivered="DELIVERED",
    undelivered="MK:0005",
)
TENCENT = SmsVendor(
    id="tencent",
    name="tc",
    provider_class=TencentSmsProvider,
    base={
        "secret_id": "AKIDtestsecretid",
        "secret_key": "testsecretkey",
        "sdk_app_id": "1400006666",
        "sign_name": "noti测试",
        "template_id": "1001",
        "text_param": "code",
    },
    url_option="endpoint",
    phone=CN_PHONE,
    failing=CN_FAILING,
    text="4321",
    secret="testsecretkey",
    delivered="DELIVRD",
    undelivered="MK:0001",
)
TWILIO = SmsVendor(
    id="twilio",
    name="tw",
    provider_class=TwilioProvider,
    base={"account_sid": ACCOUNT_SID, "auth_token": AUTH_TOKEN, "from": FROM_NUMBER},
    url_option="base_url",
    phone=US_PHONE,
    failing=US_FAILING,
    text="your code is 4321",
    secret=AUTH_TOKEN,
    delivered="",
    undelivered="30003",
)
VENDORS = [ALIYUN, TENCENT, TWILIO]
TEMPLATE_VENDORS = [ALIYUN, TENCENT]


def by_vendor(cases: dict[SmsVendor, dict[str, tuple[Any, ...]]]) -> list[Any]:
    """``pytest.param(vendor, *case, id="<vendor>-<case id>")`` for each vendor's named cases:
    a test parametrised with ``vendor`` first runs each vendor's own cases."""
    return [
        pytest.param(vendor, *case, id=f"{vendor}-{name}")
        for vendor, named in cases.items()
        for name, case in named.items()
    ]


def sms(text: str, target: str = CN_PHONE, record_id: str | None = None) -> Message:
    """An SMS to send (a new record id unless given)."""
    return Message(id=record_id or new_id(), channel=Channel.SMS, target=target, fields={"text": text})


# --- fixtures ------------------------------------------------------------------------------------


@pytest.fixture(params=TEMPLATE_VENDORS, ids=str)
def vendor(request: pytest.FixtureRequest) -> SmsVendor:
    """Aliyun, then Tencent (a module that runs Twilio too defines its own ``vendor``)."""
    chosen: SmsVendor = request.param
    return chosen


@pytest.fixture
def fake(vendor: SmsVendor) -> Iterator[Any]:
    """The vendor's fake, running (its template a verification one)."""
    with vendor.fake() as running:
        yield running
