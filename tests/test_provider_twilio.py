"""The Twilio provider against a fake Messages API: classification, success, failures."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

import noti
from noti import errors
from noti.channels.sms.twilio import ERRORS, TwilioProvider
from noti.core.record import Channel, Status
from noti.providers.base import Message
from tests.conftest import wait_until
from tests.fakes._server import Reply
from tests.fakes.twilio import (
    ACCOUNT_SID,
    AUTH_TOKEN,
    FROM_NUMBER,
    SERVICE_SID,
    TwilioFake,
    error_reply,
    twilio_options,
)
from tests.vendor_env import assert_record_after, fake_fixtures, nobody_listening, send_now

pytestmark = pytest.mark.bounds

PHONE = "+14155550123"
OPTED_OUT = "+14155550100"
LANDLINE = "+14155550199"


server, fake = fake_fixtures(lambda: TwilioFake(opted_out=(OPTED_OUT,), landlines=(LANDLINE,)))


@pytest.fixture
def rt(configure: Any, fake: TwilioFake) -> Any:
    return configure(
        providers={"tw": twilio_options(fake)},
        channels={"sms": {"provider": "tw"}},
        retry_max=5,
    )


def provider(rt: Any, name: str = "tw") -> TwilioProvider:
    instance = rt.providers.get(name)
    assert isinstance(instance, TwilioProvider)
    return instance


def message(target: str = PHONE, text: str = "hello", record_id: str = "rec1") -> Message:
    return Message(id=record_id, channel=Channel.SMS, target=target, fields={"text": text})


def send_record(rt: Any, target: str = PHONE, text: str = "hello", **kwargs: Any) -> Any:
    """Add an SMS, send it once in this process, and return the record."""
    return send_now(rt, noti.notify_sms(target, text, **kwargs))


# --- the classification table, code by code --------------------------------------------------


@pytest.mark.parametrize(("code", "expected"), sorted(ERRORS.items()))
def test_each_twilio_error_code_raises_its_class_and_sets_the_record(
    rt: Any, fake: TwilioFake, code: str, expected: type[errors.DeliveryError]
) -> None:
    # given Twilio answering with this error code
    fake.script(error_reply(int(code)))
    # when the provider sends
    with pytest.raises(errors.DeliveryError) as info:
        provider(rt).send(message())
    # then the class is the table's, the code is kept, and nothing was created
    assert type(info.value) is expected
    assert info.value.vendor_code == code and info.value.provider == "tw"
    assert fake.messages == {}
    # and through the sender the record ends as the class says
    fake.script(error_reply(int(code)))
    record = send_record(rt)
    assert_record_after(record, expected)


@pytest.mark.parametrize(
    ("reply", "expected", "retry_after_s"),
    [
        (Reply(429, "slow down"), errors.RateLimited, 1.0),
        (Reply(429, "", {"retry-after": "0"}), errors.RateLimited, 1.0),
        (error_reply(20429, headers={"retry-after": "12"}), errors.RateLimited, 12.0),
        (Reply(500, "<html>boom</html>"), errors.AmbiguousOutcome, None),
        (Reply(503, "busy", {"retry-after": "7"}), errors.AmbiguousOutcome, 7.0),
        (error_reply(20500, status=500), errors.AmbiguousOutcome, None),
        (Reply(401, ""), errors.ProviderMisconfigured, None),
        (
            Reply(403, {"code": 20008, "message": "Forbidden", "status": 403}),
            errors.ProviderMisconfigured,
            None,
        ),
        (Reply(404, "not found"), errors.ProviderMisconfigured, None),
        (Reply(301, "", {"location": "https://api.twilio.com/"}), errors.ProviderMisconfigured, None),
        (error_reply(21999), errors.TemporaryFailure, None),
        (Reply(400, "bad"), errors.TemporaryFailure, None),
    ],
)
def test_http_statuses_without_a_known_code_are_classified_by_status(
    rt: Any, fake: TwilioFake, reply: Reply, expected: type[errors.DeliveryError], retry_after_s: float | None
) -> None:
    fake.script(reply)
    with pytest.raises(errors.DeliveryError) as info:
        provider(rt).send(message())
    assert type(info.value) is expected
    if isinstance(info.value, errors.TemporaryFailure):
        assert info.value.retry_after_s == retry_after_s


def test_a_retry_after_on_a_5xx_postpones_the_record_at_least_that_long(rt: Any, fake: TwilioFake) -> None:
    fake.script(Reply(503, "busy", {"retry-after": "600"}))
    record = send_record(rt)
    assert record.status is Status.WAITING and record.retry == 1
    assert rt.delayed.due_at(record.id) >= record.modified_ms + 600_000 - 1000


# --- success -----------------------------------------------------------------------------------


def test_a_message_is_created_and_its_sid_stored_on_the_record(configure: Any, fake: TwilioFake) -> None:
    fake.auto_receipts = False  # the message stays queued (tests/test_receipts_twilio.py settles it)
    rt = configure(
        providers={"tw": twilio_options(fake, status_callback="https://hooks.example.com/twilio/status")},
        channels={"sms": {"provider": "tw"}},
    )
    record = send_record(rt, text="your code is 1234")
    assert record.status is Status.DONE and record.sent_by == "tw"
    [(sid, created)] = fake.messages.items()
    assert record.msgid == sid and sid.startswith("SM") and created["status"] == "queued"
    [request] = fake.requests
    assert request.method == "POST"
    assert request.path == f"/2010-04-01/Accounts/{ACCOUNT_SID}/Messages.json"
    assert request.headers["content-type"] == "application/x-www-form-urlencoded"
    assert request.form() == {
        "To": [PHONE],
        "From": [FROM_NUMBER],
        "Body": ["your code is 1234"],
        # the record's id rides on the callback URL, so the callbacks name the record
        "StatusCallback": [f"https://hooks.example.com/twilio/status?noti_id={record.id}"],
    }
    # the message can be fetched back, as a client reconciling after a timeout would
    fetched = httpx.get(f"{fake.url}{created['uri']}", auth=(ACCOUNT_SID, AUTH_TOKEN)).json()
    assert fetched["sid"] == sid and fetched["to"] == PHONE


def test_a_messaging_service_sends_instead_of_a_from_number(configure: Any, fake: TwilioFake) -> None:
    fake.auto_receipts = False  # the message keeps the status of its creation
    rt = configure(
        providers={"tw": twilio_options(fake, **{"from": None, "messaging_service_sid": SERVICE_SID})},
        channels={"sms": {"provider": "tw"}},
    )
    record = send_record(rt)
    assert record.status is Status.DONE
    assert fake.messages[record.msgid]["status"] == "accepted"
    form = fake.requests[0].form()
    assert form["MessagingServiceSid"] == [SERVICE_SID] and "From" not in form


def test_a_mainland_mobile_is_sent_in_e164(rt: Any, fake: TwilioFake) -> None:
    record = send_record(rt, target="13912345678")
    assert record.status is Status.DONE
    assert fake.requests[0].form()["To"] == ["+8613912345678"]


# --- each class from the fake's own rules ------------------------------------------------------


def test_a_recipient_who_replied_stop_is_opted_out_and_suppressed(rt: Any, fake: TwilioFake) -> None:
    record = send_record(rt, target=OPTED_OUT)
    assert record.status is Status.INVALID and "21610" in record.errmsg
    assert rt.store.is_suppressed("sms", OPTED_OUT)
    assert fake.messages == {}


def test_a_landline_is_a_permanent_failure(rt: Any, fake: TwilioFake) -> None:
    with pytest.raises(errors.PermanentFailure) as info:
        provider(rt).send(message(LANDLINE))
    assert info.value.vendor_code == "21614"


def test_an_invalid_to_number_is_a_permanent_failure(rt: Any, fake: TwilioFake) -> None:
    # check() refuses it at add time; a message that got past it anyway is refused by Twilio
    with pytest.raises(errors.PermanentFailure) as info:
        provider(rt).send(message("12345"))
    assert info.value.vendor_code == "21211"


def test_a_from_number_we_do_not_own_is_a_configuration_error(configure: Any, fake: TwilioFake) -> None:
    rt = configure(
        providers={"tw": twilio_options(fake, **{"from": "+15005550009"})},
        channels={"sms": {"provider": "tw"}},
    )
    record = send_record(rt)
    assert record.status is Status.FAILED and "21606" in record.errmsg


def test_a_wrong_auth_token_is_refused_by_twilio_and_never_shown(configure: Any, fake: TwilioFake) -> None:
    wrong = "deadbeef" * 4
    rt = configure(
        providers={"tw": twilio_options(fake, auth_token=wrong)}, channels={"sms": {"provider": "tw"}}
    )
    with pytest.raises(errors.ProviderMisconfigured) as info:
        provider(rt).send(message())
    assert info.value.vendor_code == "20003" and fake.messages == {}
    assert fake.requests[0].headers["authorization"].startswith("Basic ")
    record = send_record(rt)
    assert record.status is Status.FAILED
    for text in (str(info.value), record.errmsg, repr(provider(rt)), repr(provider(rt).options)):
        assert wrong not in text and AUTH_TOKEN not in text


def test_a_rate_limit_waits_without_counting_an_attempt(rt: Any, fake: TwilioFake) -> None:
    fake.script(error_reply(20429, headers={"retry-after": "30"}))
    record = send_record(rt)
    assert record.status is Status.WAITING and record.retry == 0
    assert fake.messages == {}


# --- transport failures ------------------------------------------------------------------------


def test_a_timeout_after_twilio_accepted_is_ambiguous_and_retried(rt: Any, fake: TwilioFake) -> None:
    # given Twilio creating the message but answering after the client's timeout (0.5 s)
    fake.delay_s = 1.5
    # when the record is sent
    record = send_record(rt)
    # then it may have been sent: still waiting, the attempt counted
    assert record.status is Status.WAITING and record.retry == 1
    assert "may have been sent" in record.errmsg
    wait_until(lambda: fake.messages)


def test_a_timeout_raises_ambiguous_outcome(rt: Any, fake: TwilioFake) -> None:
    fake.script(Reply(hang_s=1.5))
    with pytest.raises(errors.AmbiguousOutcome):
        provider(rt).send(message())


def test_a_refused_connection_is_a_provider_outage(configure: Any, fake: TwilioFake) -> None:
    rt = configure(
        providers={"tw": twilio_options(fake, base_url=nobody_listening())},
        channels={"sms": {"provider": "tw"}},
    )
    with pytest.raises(errors.ProviderOutage):
        provider(rt).send(message())


def test_a_closed_connection_is_ambiguous(rt: Any, fake: TwilioFake) -> None:
    fake.script(Reply(close=True))
    with pytest.raises(errors.AmbiguousOutcome):
        provider(rt).send(message())


@pytest.mark.parametrize(
    "reply",
    [Reply(201, "<html>created?</html>"), Reply(201, {"status": "queued"}), Reply(200, [1, 2])],
)
def test_a_malformed_success_answer_is_ambiguous(rt: Any, fake: TwilioFake, reply: Reply) -> None:
    fake.script(reply)
    with pytest.raises(errors.AmbiguousOutcome):
        provider(rt).send(message())


# --- options and check() -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides",
    [
        {"messaging_service_sid": SERVICE_SID},  # both senders
        {"from": None},  # neither
        {"account_sid": "AC123"},
        {"from": "15005550006"},
        {"status_callback": "ftp://x"},
        {"unknown": 1},
    ],
)
def test_bad_options_are_refused_without_showing_the_token(
    configure: Any, fake: TwilioFake, overrides: dict[str, Any]
) -> None:
    rt = configure(providers={"tw": twilio_options(fake, **overrides)}, channels={"sms": {"provider": "tw"}})
    with pytest.raises(errors.InvalidConfig) as info:
        rt.providers.get("tw")
    assert AUTH_TOKEN not in str(info.value)


def test_check_refuses_what_twilio_could_never_send(rt: Any) -> None:
    with pytest.raises(errors.InvalidInput) as info:
        provider(rt).check(message("0012"))
    assert info.value.code == "e.cmd.noti.add.badtarget"
    with pytest.raises(errors.InvalidInput):
        provider(rt).check(message(text="x" * 1601))
    provider(rt).check(message("13912345678"))


# --- a real worker -------------------------------------------------------------------------------


def test_a_worker_delivers_through_twilio(rt: Any, fake: TwilioFake, worker: Any) -> None:
    # given one SMS that Twilio first refuses with a short concurrency limit
    fake.script(error_reply(20429, headers={"retry-after": "0"}))
    # when a real worker delivers it
    record_id = noti.notify_sms(PHONE, "from the worker", lv=3)
    record = wait_until(lambda: (r := rt.store.get(record_id)).status != Status.WAITING and r)
    # then it is done with Twilio's sid, the rate limit not counted as an attempt
    assert record.status is Status.DONE and record.retry == 0 and record.sent_by == "tw"
    [(sid, created)] = fake.messages.items()
    assert record.msgid == sid and created["body"] == "from the worker" and created["to"] == PHONE
    assert [r.form()["Body"] for r in fake.requests] == [["from the worker"]] * 2
