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

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

import pytest
import redis

from noti.channels.sms.aliyun import AliyunSmsProvider
from noti.channels.sms.tencent import TencentSmsProvider
from noti.channels.sms.twilio import TwilioProvider
from noti.core.keys import Keys
from noti.core.record import Channel, new_id, now_ms
from noti.delivery.state import PendingDelivery, ReceiptRequest
from noti.providers.base import Message, Provider
from tests.fakes._receipts import ReceiptSink
from tests.fakes.aliyun import AliyunFake, AliyunTemplate
from tests.fakes.tencent import TencentFake, TencentTemplate
from tests.fakes.twilio import ACCOUNT_SID, AUTH_TOKEN, FROM_NUMBER, TwilioFake, error_reply

__all__ = [
    "ALIYUN",
    "CN_FAILING",
    "CN_PHONE",
    "Clock",
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
    "pending",
    "sink",
    "sms",
    "template_kind",
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
    #: Its receipts: the code and text of a delivered message, and the fake's of an undelivered
    #: one; whether a pushed receipt names noti's record (Aliyun's ``out_id``, Twilio's
    #: ``noti_id``); what noti answers a push it takes (Twilio: an empty 200).
    delivered: tuple[str, str]
    undelivered: tuple[str, str]
    names_record: bool
    push_answer: Any
    #: One receipt as the vendor pushes it (Aliyun, Tencent: the object of a JSON array).
    report: dict[str, Any]

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

    def poll_down(self, fake: Any, down: bool = True) -> None:
        """The vendor's status API that receipts are polled from fails (Aliyun's
        ``QuerySendDetails``, Tencent's ``PullSmsSendStatus``)."""
        if self.id == "tencent":
            fake.pull_down = down
        else:
            fake.lookup_down = down

    # --- its receipts --------------------------------------------------------------------------

    def receiver(self, fake: Any, redis_url: str, sink: ReceiptSink | None = None, **changes: Any) -> Any:
        """A provider reaching ``fake`` that takes pushed receipts: Aliyun's and Tencent's with
        the receipt key; Twilio's posted to ``sink`` (its ``status_callback``) when given."""
        if self.id != "twilio":
            changes = {"receipt_key": RECEIPT_KEY, **changes}
        elif sink is not None:
            changes = {"status_callback": f"{sink.url}/v1/receipts/{self.name}", **changes}
        return self.provider(fake.url, redis_url=redis_url, **changes)

    def poller(self, fake: Any, redis_url: str, **changes: Any) -> Any:
        """A provider reaching ``fake`` with no push configured: beat polls it for receipts."""
        if self.id != "twilio":
            changes = {"receipt_key": None, **changes}
        return self.provider(fake.url, redis_url=redis_url, **changes)

    def pushed(self, body: bytes, key: str | None = RECEIPT_KEY) -> ReceiptRequest:
        """``body`` as Aliyun or Tencent push it to noti, with ``key=`` (none: None)."""
        query = f"?key={key}" if key is not None else ""
        url = f"https://noti.example.com/v1/receipts/{self.name}{query}"
        return ReceiptRequest("POST", url, {"content-type": "application/json"}, body)

    def reports(self, *changed: dict[str, Any]) -> bytes:
        """A push of :attr:`report` with each of ``changed`` (one report each; none: as it is)."""
        return json.dumps([{**self.report, **change} for change in changed or ({},)]).encode()


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
    delivered=("DELIVERED", "用户接收成功"),
    undelivered=("MK:0005", "用户接收失败"),
    names_record=True,
    push_answer={"code": 0, "msg": "接收成功"},
    report={
        "phone_number": "13900000000",
        "send_time": "2017-01-01 11:12:13",
        "report_time": "2017-01-01 11:12:14",
        "success": True,
        "err_code": "DELIVERED",
        "err_msg": "用户接收成功",
        "sms_size": "1",
        "biz_id": "932702304080415357^0",
        "out_id": "01JRECORD",
    },
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
    delivered=("DELIVRD", "用户短信送达成功"),
    undelivered=("MK:0001", "用户短信未送达"),
    names_record=False,
    push_answer={"result": 0, "errmsg": "OK"},
    report={
        "user_receive_time": "2015-10-17 08:03:04",
        "nationcode": "86",
        "mobile": "13900000000",
        "report_status": "SUCCESS",
        "errmsg": "DELIVRD",
        "description": "用户短信送达成功",
        "sid": "2645:1045710669157053657849499620",
    },
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
    delivered=("", "delivered"),
    undelivered=("30003", "undelivered"),
    names_record=True,
    push_answer=b"",
    report={"MessageSid": "SM" + "ab" * 16, "MessageStatus": "delivered", "AccountSid": ACCOUNT_SID},
)
VENDORS = [ALIYUN, TENCENT, TWILIO]
TEMPLATE_VENDORS = [ALIYUN, TENCENT]


class Clock:
    """A movable wall clock to give a fake and a provider both (``clock.at += 61`` moves them):
    the vendors' rules by time (flow control, signature skew, Beijing days) without waiting."""

    def __init__(self, at: float | None = None) -> None:
        self.at = time.time() if at is None else at

    def __call__(self) -> float:
        return self.at


def by_vendor(cases: dict[SmsVendor, dict[str, tuple[Any, ...]]]) -> list[Any]:
    """``pytest.param(vendor, *case, id="<vendor>-<case id>")`` for each vendor's named cases:
    a test parametrised with ``vendor`` first runs each vendor's own cases."""
    return [
        pytest.param(vendor, *case, id=f"{vendor}-{name}")
        for vendor, named in cases.items()
        for name, case in named.items()
    ]


def sms(
    text: str, target: str = CN_PHONE, record_id: str | None = None, *, template: dict[str, str] | None = None
) -> Message:
    """An SMS to send (a new record id unless given), naming its own vendor ``template`` per
    provider name when given."""
    fields: dict[str, Any] = {"text": text} if template is None else {"text": text, "template": template}
    return Message(id=record_id or new_id(), channel=Channel.SMS, target=target, fields=fields)


# --- fixtures ------------------------------------------------------------------------------------


@pytest.fixture(params=TEMPLATE_VENDORS, ids=str)
def vendor(request: pytest.FixtureRequest) -> SmsVendor:
    """Aliyun, then Tencent (a module that runs Twilio too defines its own ``vendor``)."""
    chosen: SmsVendor = request.param
    return chosen


@pytest.fixture
def template_kind() -> TemplateKind:
    """The kind of the fake's template (a receipts module: "notice", so that Aliyun sends one
    number more than one SMS a minute)."""
    return "verification"


@pytest.fixture
def fake(vendor: SmsVendor, template_kind: TemplateKind) -> Iterator[Any]:
    """The vendor's fake, running."""
    with vendor.fake(template_kind) as running:
        yield running


@pytest.fixture
def sink(vendor: SmsVendor, fake: Any) -> Iterator[ReceiptSink]:
    """A local server the fake pushes its receipts to, with the receipt key (Twilio posts to
    each send's ``StatusCallback``: the provider's ``status_callback`` names the sink)."""
    with ReceiptSink() as running:
        if vendor.id != "twilio":
            fake.receipt_url = f"{running.url}/v1/receipts/{vendor.name}?key={RECEIPT_KEY}"
        yield running


def pending(message: Message, vendor_id: str | None, sent_ms: int | None = None) -> PendingDelivery:
    """A record awaiting its receipt, as the delivery book hands it to a poll."""
    return PendingDelivery(
        record_id=message.id, target=message.target, vendor_id=vendor_id, sent_ms=sent_ms or now_ms()
    )
