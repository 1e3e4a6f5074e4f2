"""At most one SMS per record (issue 20): a send whose outcome is unknown (the vendor accepted
it and answered past noti's timeout, or the worker was killed mid-send) is looked up at the
vendor before any resend. Each test counts what the phone received from the fakes
(tests/fakes/: Aliyun, Tencent, Twilio), for every vendor."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

import noti
from noti.config import load_settings
from noti.core.attempt import UNSURE_FIELD
from noti.core.record import Status
from noti.errors import InvalidConfig
from tests.conftest import ADMIN, wait_until
from tests.fakes._server import FakeServer, Reply
from tests.fakes.aliyun import AliyunFake, AliyunTemplate
from tests.fakes.tencent import TencentFake, TencentTemplate
from tests.fakes.twilio import ACCOUNT_SID, AUTH_TOKEN, FROM_NUMBER, TwilioFake, error_reply

#: Seconds a fake that accepted holds its answer: past the provider's timeout (0.5 s).
LATE_S = 2.0


@dataclass
class Vendor:
    """One vendor's fake, as the tests drive it."""

    name: str
    fake: Any
    phone: str
    text: str
    options: Callable[[], dict[str, Any]]
    #: SMS the phone received (messages the fake accepted).
    received: Callable[[], int]
    #: The vendor id of the one message accepted (None: the look-up cannot name it).
    vendor_id: Callable[[], str | None]
    #: Make every later send refused as "this account cannot send" (nothing accepted).
    refuse_sends: Callable[[], None]

    def accept_then_hang(self) -> None:
        self.fake.accept_then_hang(LATE_S)

    def hang_without_accepting(self) -> None:
        self.fake.script(Reply(hang_s=LATE_S))

    def lookup_down(self, down: bool = True) -> None:
        if isinstance(self.fake, TwilioFake):
            self.fake.list_down = down
        else:
            self.fake.lookup_down = down


def aliyun(fake: AliyunFake) -> Vendor:
    def refuse() -> None:
        fake.balance = 0

    return Vendor(
        "aliyun",
        fake,
        "+8613912345678",
        "4321",
        lambda: {
            "kind": "aliyun",
            "access_key_id": "LTAItestkey",
            "access_key_secret": "testsecret",
            "sign_name": "noti测试",
            "template_code": "SMS_100001",
            "text_param": "code",
            "endpoint": fake.url,
            "timeout_s": 0.5,
        },
        lambda: len(fake.sent),
        lambda: None,  # QuerySendDetails names no BizId
        refuse,
    )


def tencent(fake: TencentFake) -> Vendor:
    def refuse() -> None:
        fake.balance = 0

    return Vendor(
        "tencent",
        fake,
        "+8613912345678",
        "4321",
        lambda: {
            "kind": "tencent",
            "secret_id": "AKIDtestsecretid",
            "secret_key": "testsecretkey",
            "sdk_app_id": "1400006666",
            "sign_name": "noti测试",
            "template_id": "1001",
            "text_param": "code",
            "endpoint": fake.url,
            "timeout_s": 0.5,
        },
        lambda: len(fake.sent),
        lambda: fake.sent[0].serial_no,
        refuse,
    )


def twilio(fake: TwilioFake) -> Vendor:
    def refuse() -> None:
        fake.send_refusal = error_reply(60728, status=400)  # the account's hourly limit

    return Vendor(
        "twilio",
        fake,
        "+14155550123",
        "your code is 4321",
        lambda: {
            "kind": "twilio",
            "account_sid": ACCOUNT_SID,
            "auth_token": AUTH_TOKEN,
            "from": FROM_NUMBER,
            "base_url": fake.url,
            "timeout_s": 0.5,
        },
        lambda: len(fake.messages),
        lambda: next(iter(fake.messages)),
        refuse,
    )


def start(name: str) -> FakeServer:
    if name == "aliyun":
        return AliyunFake(templates={"SMS_100001": AliyunTemplate(("code",), "notice")}).start()
    if name == "tencent":
        return TencentFake(templates={"1001": TencentTemplate(1, "notice")}).start()
    return TwilioFake().start()


def vendor_of(name: str, fake: Any) -> Vendor:
    return {"aliyun": aliyun, "tencent": tencent, "twilio": twilio}[name](fake)


@pytest.fixture(params=["aliyun", "tencent", "twilio"])
def vendor(request: pytest.FixtureRequest) -> Iterator[Vendor]:
    fake = start(request.param)
    try:
        yield vendor_of(request.param, fake)
    finally:
        fake.stop()


@pytest.fixture
def backup(vendor: Vendor) -> Iterator[Vendor]:
    """A second account of the same vendor: the failover provider."""
    fake = start(vendor.name)
    try:
        yield vendor_of(vendor.name, fake)
    finally:
        fake.stop()


def runtime(configure: Any, *vendors: Vendor, **sms: Any) -> Any:
    names = [f"p{i}" for i in range(1, len(vendors) + 1)]
    return configure(
        providers={name: v.options() for name, v in zip(names, vendors, strict=True)},
        channels={"sms": {"provider": ",".join(names), **sms}},
        retry_seconds=0,  # the next attempt is due at once
        retry_max=3,
    )


def attempt(rt: Any, record_id: str) -> Any:
    """One delivery attempt in this process; the record after it."""
    [result] = noti.send(record_id)
    assert result.mark != "!!", result
    return rt.store.get(record_id)


def unsure(rt: Any, record_id: str) -> bool:
    return bool(rt.redis.hget(rt.keys.record(record_id), UNSURE_FIELD))


# --- a timeout after the vendor accepted ------------------------------------------------------


def test_a_timeout_then_a_retry_sends_one_sms(configure: Any, vendor: Vendor) -> None:
    rt = runtime(configure, vendor)
    record_id = noti.notify_sms(vendor.phone, vendor.text)
    # given the vendor accepts the SMS and answers after noti gave up
    vendor.accept_then_hang()
    first = attempt(rt, record_id)
    assert first.status is Status.WAITING and first.retry == 1 and unsure(rt, record_id)
    assert vendor.received() == 1
    # when the record is tried again
    record = attempt(rt, record_id)
    # then the vendor is asked first, the record is done with its id, and nothing is resent
    assert record.status is Status.DONE and record.sent_by == "p1"
    assert record.msgid == vendor.vendor_id()
    assert vendor.received() == 1 and vendor.fake.lookups == 1
    assert not unsure(rt, record_id)


def test_a_timeout_before_the_vendor_accepted_is_sent_after_the_look_up(
    configure: Any, vendor: Vendor
) -> None:
    rt = runtime(configure, vendor)
    record_id = noti.notify_sms(vendor.phone, vendor.text)
    vendor.hang_without_accepting()
    assert attempt(rt, record_id).status is Status.WAITING and vendor.received() == 0
    record = attempt(rt, record_id)
    assert record.status is Status.DONE and vendor.received() == 1 and vendor.fake.lookups == 1
    # a record never in doubt is not looked up
    assert attempt(rt, noti.notify_sms(vendor.phone, vendor.text + "0")).status is Status.DONE
    assert vendor.fake.lookups == 1 and vendor.received() == 2


# --- the look-up cannot answer -------------------------------------------------------------------


def test_hold_sends_nothing_while_the_look_up_fails_then_fails_for_an_operator(
    configure: Any, vendor: Vendor
) -> None:
    rt = runtime(configure, vendor)  # lookup_failure defaults to "hold"
    record_id = noti.notify_sms(vendor.phone, vendor.text)
    vendor.accept_then_hang()
    attempt(rt, record_id)
    # when the look-up is down, each attempt asks again and sends nothing
    vendor.lookup_down()
    second = attempt(rt, record_id)
    assert second.status is Status.WAITING and second.retry == 2
    assert "e.noti.delivery.unconfirmed" in second.errmsg
    third = attempt(rt, record_id)
    # then the attempts run out: failed, dead-lettered for an operator as "unconfirmed"
    assert third.status is Status.FAILED and vendor.received() == 1
    [letter] = rt.dead_letters.entries()
    assert letter.record_id == record_id and letter.error_class == "unconfirmed"
    assert unsure(rt, record_id)
    # and once the look-up works, a redrive finds the SMS instead of sending it again
    vendor.lookup_down(False)
    rt.store.revive(record_id)
    assert attempt(rt, record_id).status is Status.DONE and vendor.received() == 1


@pytest.mark.parametrize(("accepted", "received"), [(False, 1), (True, 2)])
def test_resend_sends_again_when_the_look_up_fails(
    configure: Any, vendor: Vendor, accepted: bool, received: int
) -> None:
    rt = runtime(configure, vendor, lookup_failure="resend")
    record_id = noti.notify_sms(vendor.phone, vendor.text)
    if accepted:
        vendor.accept_then_hang()
    else:
        vendor.hang_without_accepting()
    attempt(rt, record_id)
    vendor.lookup_down()
    if vendor.name == "tencent":  # past its own "same content once per 30 s" rule
        vendor.fake.clock = lambda: time.time() + 40
    record = attempt(rt, record_id)
    # never none: the record is sent; the trade-off: two SMS when the first had been accepted
    assert record.status is Status.DONE and vendor.received() == received
    assert vendor.fake.lookups == 1


# --- failover only after "not sent" --------------------------------------------------------------


def test_no_failover_while_the_first_provider_may_have_sent(
    configure: Any, vendor: Vendor, backup: Vendor
) -> None:
    rt = runtime(configure, vendor, backup)
    record_id = noti.notify_sms(vendor.phone, vendor.text)
    vendor.accept_then_hang()
    assert attempt(rt, record_id).status is Status.WAITING
    record = attempt(rt, record_id)
    assert record.status is Status.DONE and record.sent_by == "p1"
    assert vendor.received() + backup.received() == 1 and backup.fake.requests == []


def test_failover_after_the_look_up_said_not_sent(configure: Any, vendor: Vendor, backup: Vendor) -> None:
    rt = runtime(configure, vendor, backup)
    record_id = noti.notify_sms(vendor.phone, vendor.text)
    # given a first attempt that timed out before the first provider accepted
    vendor.hang_without_accepting()
    assert attempt(rt, record_id).status is Status.WAITING
    assert backup.fake.requests == []
    # when the first provider's look-up says "not sent" and its send then fails for the account
    vendor.refuse_sends()
    record = attempt(rt, record_id)
    # then the backup (asked too: it might have been the one in flight) sends it, once
    assert record.status is Status.DONE and record.sent_by == "p2"
    assert vendor.received() == 0 and backup.received() == 1
    assert vendor.fake.lookups == 1 and backup.fake.lookups == 1


def restore_sends(v: Vendor) -> None:
    """Undo :attr:`Vendor.refuse_sends`: the account sends again."""
    if isinstance(v.fake, TwilioFake):
        v.fake.send_refusal = None
    else:
        v.fake.balance = None


def test_a_send_in_doubt_at_the_backup_is_not_made_again_by_the_recovered_first_provider(
    configure: Any, vendor: Vendor, backup: Vendor
) -> None:
    rt = runtime(configure, vendor, backup)
    record_id = noti.notify_sms(vendor.phone, vendor.text)
    # given a first attempt that failed over (the first provider's account could not send)
    # to the backup, which accepted the SMS and answered too late
    vendor.refuse_sends()
    backup.accept_then_hang()
    assert attempt(rt, record_id).status is Status.WAITING
    assert vendor.received() == 0 and backup.received() == 1
    # when the first provider can send again and the record is tried again
    restore_sends(vendor)
    record = attempt(rt, record_id)
    # then the first provider asked its vendor and the backup's, found it at the backup, and
    # nothing was sent again
    assert record.status is Status.DONE and record.sent_by == "p2"
    assert vendor.received() + backup.received() == 1
    assert vendor.fake.lookups >= 1 and backup.fake.lookups >= 1


def test_no_failover_when_the_look_up_cannot_answer(configure: Any, vendor: Vendor, backup: Vendor) -> None:
    rt = runtime(configure, vendor, backup)
    record_id = noti.notify_sms(vendor.phone, vendor.text)
    vendor.hang_without_accepting()
    attempt(rt, record_id)
    vendor.lookup_down()
    record = attempt(rt, record_id)
    assert record.status is Status.WAITING and backup.fake.requests == []


# --- a worker killed mid-send --------------------------------------------------------------------


def toml_table(name: str, options: dict[str, Any]) -> str:
    lines = [f"[providers.{name}]"]
    lines += [f"{key} = {json.dumps(value, ensure_ascii=False)}" for key, value in options.items()]
    return "\n".join(lines) + "\n"


def test_a_worker_killed_mid_send_then_redelivery_sends_one_sms(
    configure: Any, vendor: Vendor, spawn_worker: Any
) -> None:
    rt = runtime(configure, vendor)
    options = {**vendor.options(), "timeout_s": 30}
    config = '[channels.sms]\nprovider = "p1"\n' + toml_table("p1", options)
    env = {"NOTI_LEASE_TIMEOUT_S": "2"}
    # given a worker whose send the vendor accepted and holds the answer of
    vendor.fake.accept_then_hang(60)
    doomed = spawn_worker(config, "-P", "threads", "-c", "2", env=env, name="doomed")
    record_id = noti.notify_sms(vendor.phone, vendor.text, user=ADMIN)
    wait_until(lambda: vendor.received() == 1, timeout=30)
    # when the worker is killed while it waits for the answer
    doomed.kill()
    assert rt.store.get(record_id).status is Status.WAITING
    # then another worker gets the message back, asks the vendor, and sends nothing more
    spawn_worker(config, "-P", "threads", "-c", "2", env=env, name="heir")
    record = wait_until(lambda: (r := rt.store.get(record_id)).status is Status.DONE and r, timeout=60)
    assert record.sent_by == "p1" and record.msgid == vendor.vendor_id()
    assert vendor.received() == 1 and vendor.fake.lookups >= 1
    time.sleep(1)  # a late duplicate would show up now
    assert vendor.received() == 1


# --- Twilio: the body is the tag ------------------------------------------------------------------


def test_twilio_cannot_tell_between_two_records_with_the_same_body(configure: Any) -> None:
    fake = TwilioFake().start()
    try:
        v = twilio(fake)
        rt = runtime(configure, v)
        attempt(rt, noti.notify_sms(v.phone, v.text))
        record_id = noti.notify_sms(v.phone, v.text)
        v.accept_then_hang()
        attempt(rt, record_id)
        # two messages with this body since the record was made: the look-up cannot tell
        record = attempt(rt, record_id)
        assert record.status is Status.WAITING and "e.noti.delivery.unconfirmed" in record.errmsg
        assert v.received() == 2
    finally:
        fake.stop()


# --- the setting ---------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["maybe", "", "HOLD", 1, None, ["hold"]])
def test_a_bad_lookup_failure_setting_is_refused_with_its_name(value: Any) -> None:
    with pytest.raises(InvalidConfig) as caught:
        load_settings(channels={"sms": {"lookup_failure": value}})
    assert caught.value.code == "e.noti.config" and "lookup_failure" in caught.value.message.lower()


def test_lookup_failure_defaults_to_hold_and_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert load_settings().channel("sms").lookup_failure == "hold"
    monkeypatch.setenv("NOTI_CHANNELS__SMS__LOOKUP_FAILURE", "resend")
    assert load_settings().channel("sms").lookup_failure == "resend"
    monkeypatch.setenv("NOTI_CHANNELS__SMS__LOOKUP_FAILURE", "sometimes")
    with pytest.raises(InvalidConfig, match="LOOKUP_FAILURE"):
        load_settings()
