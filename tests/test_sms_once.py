"""At most one SMS per record (issue 20): a send whose outcome is unknown (the vendor accepted
it and answered past noti's timeout, or the worker was killed mid-send) is looked up at the
vendor before any resend. Each test counts what the phone received from the fakes
(tests/fakes/: Aliyun, Tencent, Twilio), for every vendor (:mod:`tests.sms_vendors`)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

import noti
from noti.config import load_settings
from noti.core.attempt import UNSURE_FIELD
from noti.core.record import Status
from noti.errors import InvalidConfig
from tests.chat_vendors import toml_table
from tests.conftest import ADMIN, wait_until
from tests.fakes._server import Reply
from tests.sms_vendors import TWILIO, VENDORS, SmsVendor

#: Seconds a fake that accepted holds its answer: past the provider's timeout (0.5 s).
LATE_S = 2.0


@pytest.fixture(params=VENDORS, ids=str)
def vendor(request: pytest.FixtureRequest) -> SmsVendor:
    chosen: SmsVendor = request.param
    return chosen


@pytest.fixture
def fake(vendor: SmsVendor) -> Iterator[Any]:
    """The vendor's fake; its template a notice (Aliyun: no one-a-minute rule)."""
    with vendor.fake("notice") as running:
        yield running


@pytest.fixture
def backup(vendor: SmsVendor) -> Iterator[Any]:
    """A second account of the same vendor: the failover provider."""
    with vendor.fake("notice") as running:
        yield running


def runtime(configure: Any, vendor: SmsVendor, *fakes: Any, **sms: Any) -> Any:
    """Providers p1, p2, … reaching ``fakes``, in this failover order."""
    names = [f"p{i}" for i in range(1, len(fakes) + 1)]
    return configure(
        providers={name: vendor.options(f.url, timeout_s=0.5) for name, f in zip(names, fakes, strict=True)},
        channels={"sms": {"provider": ",".join(names), **sms}},
        retry_seconds=0,  # the next attempt is due at once
        retry_max=3,
    )


def hang_without_accepting(fake: Any) -> None:
    fake.script(Reply(hang_s=LATE_S))


def attempt(rt: Any, record_id: str) -> Any:
    """One delivery attempt in this process; the record after it."""
    [result] = noti.send(record_id)
    assert result.mark != "!!", result
    return rt.store.get(record_id)


def unsure(rt: Any, record_id: str) -> bool:
    return bool(rt.redis.hget(rt.keys.record(record_id), UNSURE_FIELD))


# --- a timeout after the vendor accepted ------------------------------------------------------


def test_a_timeout_then_a_retry_sends_one_sms(configure: Any, fake: Any, vendor: SmsVendor) -> None:
    rt = runtime(configure, vendor, fake)
    record_id = noti.notify_sms(vendor.phone, vendor.text)
    # given the vendor accepts the SMS and answers after noti gave up
    fake.accept_then_hang(LATE_S)
    first = attempt(rt, record_id)
    assert first.status is Status.WAITING and first.retry == 1 and unsure(rt, record_id)
    assert vendor.received(fake) == 1
    # when the record is tried again
    record = attempt(rt, record_id)
    # then the vendor is asked first, the record is done with its id, and nothing is resent
    assert record.status is Status.DONE and record.sent_by == "p1"
    assert record.msgid == vendor.found_id(fake)
    assert vendor.received(fake) == 1 and fake.lookups == 1
    assert not unsure(rt, record_id)


def test_a_timeout_before_the_vendor_accepted_is_sent_after_the_look_up(
    configure: Any, fake: Any, vendor: SmsVendor
) -> None:
    rt = runtime(configure, vendor, fake)
    record_id = noti.notify_sms(vendor.phone, vendor.text)
    hang_without_accepting(fake)
    assert attempt(rt, record_id).status is Status.WAITING and vendor.received(fake) == 0
    record = attempt(rt, record_id)
    assert record.status is Status.DONE and vendor.received(fake) == 1 and fake.lookups == 1
    # a record never in doubt is not looked up
    assert attempt(rt, noti.notify_sms(vendor.phone, vendor.text + "0")).status is Status.DONE
    assert fake.lookups == 1 and vendor.received(fake) == 2


# --- the look-up cannot answer -------------------------------------------------------------------


def test_hold_sends_nothing_while_the_look_up_fails_then_fails_for_an_operator(
    configure: Any, fake: Any, vendor: SmsVendor
) -> None:
    rt = runtime(configure, vendor, fake)  # lookup_failure defaults to "hold"
    record_id = noti.notify_sms(vendor.phone, vendor.text)
    fake.accept_then_hang(LATE_S)
    attempt(rt, record_id)
    # when the look-up is down, each attempt asks again and sends nothing
    vendor.lookup_down(fake)
    second = attempt(rt, record_id)
    assert second.status is Status.WAITING and second.retry == 2
    assert "e.noti.delivery.unconfirmed" in second.errmsg
    third = attempt(rt, record_id)
    # then the attempts run out: failed, dead-lettered for an operator as "unconfirmed"
    assert third.status is Status.FAILED and vendor.received(fake) == 1
    [letter] = rt.dead_letters.entries()
    assert letter.record_id == record_id and letter.error_class == "unconfirmed"
    assert unsure(rt, record_id)
    # and once the look-up works, a redrive finds the SMS instead of sending it again
    vendor.lookup_down(fake, False)
    rt.store.revive(record_id)
    assert attempt(rt, record_id).status is Status.DONE and vendor.received(fake) == 1


@pytest.mark.parametrize(("accepted", "received"), [(False, 1), (True, 2)])
def test_resend_sends_again_when_the_look_up_fails(
    configure: Any, fake: Any, vendor: SmsVendor, accepted: bool, received: int
) -> None:
    rt = runtime(configure, vendor, fake, lookup_failure="resend")
    record_id = noti.notify_sms(vendor.phone, vendor.text)
    if accepted:
        fake.accept_then_hang(LATE_S)
    else:
        hang_without_accepting(fake)
    attempt(rt, record_id)
    vendor.lookup_down(fake)
    if vendor.id == "tencent":  # past its own "same content once per 30 s" rule
        fake.clock = lambda: time.time() + 40
    record = attempt(rt, record_id)
    # never none: the record is sent; the trade-off: two SMS when the first had been accepted
    assert record.status is Status.DONE and vendor.received(fake) == received
    assert fake.lookups == 1


# --- failover only after "not sent" --------------------------------------------------------------


@pytest.fixture
def chain(configure: Any, fake: Any, vendor: SmsVendor, backup: Any) -> tuple[Any, str]:
    """p1 (``fake``) failing over to p2 (``backup``), and an SMS to send through them."""
    return runtime(configure, vendor, fake, backup), noti.notify_sms(vendor.phone, vendor.text)


def test_no_failover_while_the_first_provider_may_have_sent(
    chain: tuple[Any, str], fake: Any, vendor: SmsVendor, backup: Any
) -> None:
    rt, record_id = chain
    fake.accept_then_hang(LATE_S)
    assert attempt(rt, record_id).status is Status.WAITING
    record = attempt(rt, record_id)
    assert record.status is Status.DONE and record.sent_by == "p1"
    assert vendor.received(fake) + vendor.received(backup) == 1 and backup.requests == []


def test_failover_after_the_look_up_said_not_sent(
    chain: tuple[Any, str], fake: Any, vendor: SmsVendor, backup: Any
) -> None:
    rt, record_id = chain
    # given a first attempt that timed out before the first provider accepted
    hang_without_accepting(fake)
    assert attempt(rt, record_id).status is Status.WAITING
    assert backup.requests == []
    # when the first provider's look-up says "not sent" and its send then fails for the account
    vendor.refuse_sends(fake)
    record = attempt(rt, record_id)
    # then the backup (asked too: it might have been the one in flight) sends it, once
    assert record.status is Status.DONE and record.sent_by == "p2"
    assert vendor.received(fake) == 0 and vendor.received(backup) == 1
    assert fake.lookups == 1 and backup.lookups == 1


def test_a_send_in_doubt_at_the_backup_is_not_made_again_by_the_recovered_first_provider(
    chain: tuple[Any, str], fake: Any, vendor: SmsVendor, backup: Any
) -> None:
    rt, record_id = chain
    # given a first attempt that failed over (the first provider's account could not send)
    # to the backup, which accepted the SMS and answered too late
    vendor.refuse_sends(fake)
    backup.accept_then_hang(LATE_S)
    assert attempt(rt, record_id).status is Status.WAITING
    assert vendor.received(fake) == 0 and vendor.received(backup) == 1
    # when the first provider can send again and the record is tried again
    vendor.restore_sends(fake)
    record = attempt(rt, record_id)
    # then the first provider asked its vendor and the backup's, found it at the backup, and
    # nothing was sent again
    assert record.status is Status.DONE and record.sent_by == "p2"
    assert vendor.received(fake) + vendor.received(backup) == 1
    assert fake.lookups >= 1 and backup.lookups >= 1


def test_no_failover_when_the_look_up_cannot_answer(
    chain: tuple[Any, str], fake: Any, vendor: SmsVendor, backup: Any
) -> None:
    rt, record_id = chain
    hang_without_accepting(fake)
    attempt(rt, record_id)
    vendor.lookup_down(fake)
    record = attempt(rt, record_id)
    assert record.status is Status.WAITING and backup.requests == []


# --- a worker killed mid-send --------------------------------------------------------------------


def test_a_worker_killed_mid_send_then_redelivery_sends_one_sms(
    configure: Any, fake: Any, vendor: SmsVendor, spawn_worker: Any
) -> None:
    rt = runtime(configure, vendor, fake)
    options = vendor.options(fake.url, timeout_s=30)
    config = '[channels.sms]\nprovider = "p1"\n' + toml_table("p1", options)
    env = {"NOTI_LEASE_TIMEOUT_S": "2"}
    # given a worker whose send the vendor accepted and holds the answer of
    fake.accept_then_hang(60)
    doomed = spawn_worker(config, "-P", "threads", "-c", "2", env=env, name="doomed")
    record_id = noti.notify_sms(vendor.phone, vendor.text, user=ADMIN)
    wait_until(lambda: vendor.received(fake) == 1, timeout=30)
    # when the worker is killed while it waits for the answer
    doomed.kill()
    assert rt.store.get(record_id).status is Status.WAITING
    # then another worker gets the message back, asks the vendor, and sends nothing more
    spawn_worker(config, "-P", "threads", "-c", "2", env=env, name="heir")
    record = wait_until(lambda: (r := rt.store.get(record_id)).status is Status.DONE and r, timeout=60)
    assert record.sent_by == "p1" and record.msgid == vendor.found_id(fake)
    assert vendor.received(fake) == 1 and fake.lookups >= 1
    time.sleep(1)  # a late duplicate would show up now
    assert vendor.received(fake) == 1


# --- Twilio: the body is the tag ------------------------------------------------------------------


def test_twilio_cannot_tell_between_two_records_with_the_same_body(configure: Any) -> None:
    with TWILIO.fake() as fake:
        rt = runtime(configure, TWILIO, fake)
        attempt(rt, noti.notify_sms(TWILIO.phone, TWILIO.text))
        record_id = noti.notify_sms(TWILIO.phone, TWILIO.text)
        fake.accept_then_hang(LATE_S)
        attempt(rt, record_id)
        # two messages with this body since the record was made: the look-up cannot tell
        record = attempt(rt, record_id)
        assert record.status is Status.WAITING and "e.noti.delivery.unconfirmed" in record.errmsg
        assert TWILIO.received(fake) == 2


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
