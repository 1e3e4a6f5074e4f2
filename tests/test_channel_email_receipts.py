"""The e-mail APIs' receipts, refused unless authentic: SES feedback through SNS (signature
versions 1 and 2, the certificate's URL, the topic, the subscription) and SendGrid's signed
Event Webhook (ECDSA over timestamp + body, a time window). A refused receipt changes nothing:
the record keeps its delivery status and its address is not suppressed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from noti.channels.email import _sns, sendgrid_receipts, ses_receipts
from noti.channels.email.sendgrid import SendGridProvider
from noti.channels.email.ses import SesProvider
from noti.core.record import Channel, new_id
from noti.delivery.state import Delivery, ReceiptRequest
from noti.errors import NotiError, ReceiptRejected, StoreUnavailable
from noti.providers.base import Message
from noti.sending.intake import ReceiptIntake
from tests.fakes import sendgrid as sg
from tests.fakes import ses
from tests.fakes._receipts import ReceiptSink
from tests.vendor_env import build_provider

TO = "ann@example.org"
SIGNATURE, MALFORMED, PROVIDER = (
    "e.noti.receipt.signature",
    "e.noti.receipt.malformed",
    "e.noti.receipt.provider",
)


@pytest.fixture(scope="module")
def ses_server() -> Iterator[ses.SesFake]:
    with ses.SesFake() as running:
        assert isinstance(running, ses.SesFake)
        yield running


@pytest.fixture(scope="module")
def sg_server() -> Iterator[sg.SendGridFake]:
    with sg.SendGridFake() as running:
        assert isinstance(running, sg.SendGridFake)
        yield running


@pytest.fixture
def sink() -> Iterator[ReceiptSink]:
    with ReceiptSink() as running:
        yield running


@pytest.fixture
def ses_fake(ses_server: ses.SesFake, sink: ReceiptSink) -> ses.SesFake:
    ses_server.reset()
    ses_server.receipt_url = f"{sink.url}/v1/receipts/mail"
    _sns.CERTIFICATES.clear()
    return ses_server


@pytest.fixture
def sg_fake(sg_server: sg.SendGridFake, sink: ReceiptSink) -> sg.SendGridFake:
    sg_server.reset()
    sg_server.receipt_url = f"{sink.url}/v1/receipts/mail"
    return sg_server


def ses_provider(fake: ses.SesFake, redis_url: str, **changes: Any) -> SesProvider:
    return build_provider("mail", ses.ses_options(fake, timeout_s=2, **changes), redis_url)


def sg_provider(fake: sg.SendGridFake, redis_url: str, **changes: Any) -> SendGridProvider:
    return build_provider("mail", sg.sendgrid_options(fake, timeout_s=2, **changes), redis_url)


def email(target: str = TO) -> Message:
    return Message(
        id=new_id(), channel=Channel.EMAIL, target=target, fields={"subject": "Hi", "text": "Hello"}
    )


def code_of(provider: Any, request: ReceiptRequest) -> str:
    with pytest.raises(NotiError) as refused:
        provider.read_receipt(request)
    return refused.value.code


# --- SES through SNS: accepted ----------------------------------------------------------------


@pytest.mark.parametrize("version", ["1", "2"])
def test_sns_signature_versions_1_and_2_are_accepted(
    ses_fake: ses.SesFake, sink: ReceiptSink, redis_url: str, version: str
) -> None:
    # given SNS signing with SHA1withRSA (1) or SHA256withRSA (2)
    ses_fake.signature_version = version
    provider = ses_provider(ses_fake, redis_url)
    ses_fake.fate("gone@example.org", "bounce")
    # when two messages are sent: one delivered, one bouncing
    ok, bad = provider.send(email()), provider.send(email("gone@example.org"))
    [first, second] = [p.body for p in ses_fake.pusher.wait(2)]
    # then each notification is read, its report naming the message and the record
    reports = {r.vendor_id: r for request in sink.requests for r in provider.read_receipt(request).reports}
    delivered, bounced = reports[ok.msgid], reports[bad.msgid]
    assert (delivered.state, delivered.vendor_id, delivered.suppress) == (Delivery.DELIVERED, ok.msgid, "")
    assert (bounced.state, bounced.vendor_id, bounced.code, bounced.suppress) == (
        Delivery.UNDELIVERED,
        bad.msgid,
        "Permanent/General",
        "bounce",
    )
    assert "550 5.1.1" in bounced.text and bounced.record_id is not None
    assert json.loads(first)["SignatureVersion"] == json.loads(second)["SignatureVersion"] == version
    # and the certificate was fetched once for both
    assert ses_fake.cert_fetches == 1


def test_a_complaint_and_a_transient_bounce(ses_fake: ses.SesFake, sink: ReceiptSink, redis_url: str) -> None:
    provider = ses_provider(ses_fake, redis_url)
    ses_fake.fate("angry@example.org", "complaint")
    ses_fake.fate("full@example.org", "transient")
    provider.send(email("angry@example.org"))
    provider.send(email("full@example.org"))
    ses_fake.pusher.wait(3)
    reports = [r for request in sink.requests for r in provider.read_receipt(request).reports]
    assert sorted((r.state, r.code, r.suppress) for r in reports) == [
        (Delivery.DELIVERED, "", ""),
        (Delivery.UNDELIVERED, "Transient/MailboxFull", ""),
        (Delivery.UNDELIVERED, "complaint/abuse", "complaint"),
    ]


def test_a_subscription_is_confirmed_only_under_the_allowed_prefix(
    ses_fake: ses.SesFake, sink: ReceiptSink, redis_url: str
) -> None:
    provider = ses_provider(ses_fake, redis_url)
    # a confirmation from SNS: confirmed by a GET of its SubscribeURL
    token = ses_fake.subscribe()
    ses_fake.pusher.wait(1)
    batch = provider.read_receipt(sink.requests[0])
    assert batch.reports == [] and batch.reply.status == 200 and ses_fake.confirmed == [token]
    # a signed one whose SubscribeURL points elsewhere: refused, nothing fetched
    elsewhere = ses_fake.sns_message(
        "SubscriptionConfirmation",
        {
            "Token": "t",
            "Message": "m",
            "SubscribeURL": "https://sns.attacker.example/?Action=ConfirmSubscription",
        },
    )
    request = ReceiptRequest("POST", sink.url, {}, json.dumps(elsewhere).encode())
    assert code_of(provider, request) == SIGNATURE
    # with confirm_subscriptions off, a genuine one is answered and left to the operator
    quiet = ses_provider(ses_fake, redis_url, confirm_subscriptions=False)
    ses_fake.subscribe()
    ses_fake.pusher.wait(2)
    assert quiet.read_receipt(sink.requests[1]).reply.status == 200 and len(ses_fake.confirmed) == 1


# --- SES through SNS: refused ---------------------------------------------------------------


def _notification(fake: ses.SesFake, **changes: Any) -> dict[str, Any]:
    event = {"notificationType": "Delivery", "mail": {"messageId": "0100-x-000000"}, "delivery": {}}
    return {**fake.sns_message("Notification", {"Message": json.dumps(event)}), **changes}


def _post(message: dict[str, Any] | bytes, method: str = "POST") -> ReceiptRequest:
    body = message if isinstance(message, bytes) else json.dumps(message).encode()
    return ReceiptRequest(method, "https://noti.example.com/v1/receipts/mail", {}, body)


def _changed(**changes: Any) -> Any:
    """A builder: the notification, then ``changes`` (after signing)."""
    return lambda f: {**_notification(f), **changes}


def _cert(url: str) -> Any:
    """A builder: the notification signed with ``SigningCertURL`` = ``url`` (``{fake}``: the fake's URL)."""
    return lambda f: _notification(f, SigningCertURL=url.format(fake=f.url))


def _faulty(name: str, value: Any) -> Any:
    """A builder: the fake's fault ``name`` set, then the notification."""
    return lambda f: (setattr(f, name, value), _notification(f))[1]


SNS_REFUSALS: list[tuple[str, Any, str]] = [
    ("unsigned", _faulty("unsigned", True), SIGNATURE),
    ("another-key", _faulty("bad_signature", True), SIGNATURE),
    ("another-topic", _faulty("topic_arn", ses.TOPIC_ARN + "-other"), SIGNATURE),
    ("message-changed", _changed(Message='{"notificationType":"Bounce"}'), SIGNATURE),
    ("topic-changed-after-signing", _changed(TopicArn=ses.TOPIC_ARN + "x"), SIGNATURE),
    ("subject-added", _changed(Subject="hi"), SIGNATURE),
    ("version-3", _changed(SignatureVersion="3"), SIGNATURE),
    ("signature-not-base64", _changed(Signature="!!!"), SIGNATURE),
    ("cert-on-another-host", _cert("https://sns.evil.example/c.pem"), SIGNATURE),
    ("cert-not-pem", _cert("{fake}/cert.txt"), SIGNATURE),
    ("cert-url-with-query", _cert("{fake}/c.pem?x=1"), SIGNATURE),
    ("cert-url-dot-dot", _cert("{fake}/../c.pem"), SIGNATURE),
    ("cert-url-userinfo", _cert("{fake}@evil.example/c.pem"), SIGNATURE),
    # what a prefix test lets through: a server may read it as another path, or the HTTP
    # client cannot build it (a newline was an internal error, HTTP 500)
    ("cert-url-percent-dots", _cert("{fake}/%2e%2e/c.pem"), SIGNATURE),
    ("cert-url-at-in-path", _cert("{fake}/@evil.example/c.pem"), SIGNATURE),
    ("cert-url-newline", _cert("{fake}/a\n.pem"), SIGNATURE),
    ("cert-url-nul", _cert("{fake}/a\x00.pem"), SIGNATURE),
    ("cert-url-unicode", _cert("{fake}/é.pem"), SIGNATURE),
    ("unknown-type", _changed(Type="Hello"), MALFORMED),
    ("no-message-id", lambda f: {k: v for k, v in _notification(f).items() if k != "MessageId"}, MALFORMED),
    ("not-json", lambda f: b"{not json", MALFORMED),
    ("json-array", lambda f: b"[]", MALFORMED),
]


@pytest.mark.parametrize(("build", "code"), [r[1:] for r in SNS_REFUSALS], ids=[r[0] for r in SNS_REFUSALS])
def test_an_sns_message_that_is_not_authentic_is_refused(
    ses_fake: ses.SesFake, redis_url: str, build: Any, code: str
) -> None:
    provider = ses_provider(ses_fake, redis_url)
    assert provider.read_receipt(_post(_notification(ses_fake))).reports  # the untouched one passes
    assert code_of(provider, _post(build(ses_fake))) == code


def test_no_topic_configured_takes_no_sns_message(ses_fake: ses.SesFake, redis_url: str) -> None:
    provider = ses_provider(ses_fake, redis_url, sns_topic_arns=[])
    assert code_of(provider, _post(_notification(ses_fake))) == PROVIDER
    assert code_of(ses_provider(ses_fake, redis_url), _post(b"{}", "GET")) == MALFORMED


def test_a_certificate_that_cannot_be_fetched_is_answered_503(ses_fake: ses.SesFake, redis_url: str) -> None:
    # under the prefix, but the fake serves nothing there: SNS is asked to deliver again
    provider = ses_provider(ses_fake, redis_url)
    with pytest.raises(StoreUnavailable) as failed:
        provider.read_receipt(_post(_notification(ses_fake, SigningCertURL=f"{ses_fake.url}/missing.pem")))
    assert failed.value.code == "e.noti.receipt.certificate"


@pytest.mark.parametrize(
    "prefix", ["http://sns.eu-west-1.amazonaws.com/", "ftp://127.0.0.1/", "https://user@sns.example/"]
)
def test_a_prefix_must_be_https_unless_loopback(ses_fake: ses.SesFake, redis_url: str, prefix: str) -> None:
    with pytest.raises(NotiError) as refused:
        ses_provider(ses_fake, redis_url, sns_url_prefix=prefix)
    assert refused.value.code == "e.noti.config"


def test_ses_events_that_say_nothing_of_delivery_give_no_report() -> None:
    open_event = {"eventType": "Open", "mail": {"messageId": "m"}, "open": {}}
    assert ses_receipts.reports_of_event("mail", json.dumps(open_event)) == []
    # SES's notices that a topic is set up name no message: answered, not refused (SNS would
    # post them again)
    notice = {"notificationType": "AmazonSnsSubscriptionSucceeded", "message": "You have subscribed"}
    assert ses_receipts.reports_of_event("mail", json.dumps(notice)) == []
    assert ses_receipts.reports_of_event("mail", ses_receipts.SETUP_TEXT) == []
    send = {"eventType": "Send", "mail": {"messageId": "m", "tags": {"noti_id": ["01J"]}}}
    [report] = ses_receipts.reports_of_event("mail", json.dumps(send))
    assert (report.state, report.record_id) == (Delivery.ACCEPTED, "01J")
    for bad in ('"text"', "{}", '{"notificationType":"Bounce","mail":{"messageId":"m"}}'):
        with pytest.raises(ReceiptRejected) as refused:
            ses_receipts.reports_of_event("mail", bad)
        assert refused.value.code == MALFORMED


# --- SendGrid's Event Webhook -------------------------------------------------------------------


def test_sendgrids_published_signature_verifies() -> None:
    # the vector of SendGrid's own SDK tests (sendgrid-java EventWebhookTest, sendgrid-csharp
    # RequestValidatorTests): verification key, payload, signature, timestamp 1588788367
    key = sendgrid_receipts.load_public_key(
        "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEEDr2LjtURuePQzplybdC+u4CwrqDqBaWjcMMsTbhdbcwHBcepxo7yAQGhHPTnlvFYPAZFceEu/1FwCM/QmGUhA=="
    )
    payload = b'{"category":"example_payload","event":"test_event","message_id":"message_id"}'
    signature = (
        "MEUCIQCtIHJeH93Y+qpYeWrySphQgpNGNr/U+UyUlBkU6n7RAwIgJTz2C+8a8xonZGi6BpSzoQsbVRamr2nlxFDWYNH2j/0="
    )
    headers = {
        "x-twilio-email-event-webhook-signature": signature,
        "x-twilio-email-event-webhook-timestamp": "1588788367",
    }
    request = ReceiptRequest("POST", "https://n.example/v1/receipts/mail", headers, payload)
    sendgrid_receipts.verify("mail", request, key, max_age_s=300, now_s=1588788367)
    tampered = ReceiptRequest("POST", request.url, headers, payload.replace(b"test_event", b"delivered"))
    with pytest.raises(ReceiptRejected) as refused:
        sendgrid_receipts.verify("mail", tampered, key, max_age_s=300, now_s=1588788367)
    assert refused.value.code == SIGNATURE


def test_the_events_of_each_fate(sg_fake: sg.SendGridFake, sink: ReceiptSink, redis_url: str) -> None:
    provider = sg_provider(sg_fake, redis_url)
    sg_fake.auto_receipts = False
    fates = ["delivered", "bounce", "blocked", "dropped", "deferred", "spamreport"]
    sent = {}
    for fate in fates:
        sg_fake.fate(f"{fate}@example.org", fate)
        sent[fate] = provider.send(email(f"{fate}@example.org")).msgid
    sg_fake.settle()
    sg_fake.pusher.wait(1)
    reports = provider.read_receipt(sink.requests[0]).reports
    final = {r.vendor_id: (r.state, r.suppress) for r in reports if r.state is not Delivery.ACCEPTED}
    assert final[sent["delivered"]] == (Delivery.DELIVERED, "")
    assert final[sent["bounce"]] == (Delivery.UNDELIVERED, "bounce")
    assert final[sent["blocked"]] == (Delivery.UNDELIVERED, "")
    assert final[sent["dropped"]] == (Delivery.UNDELIVERED, "bounce")
    assert final[sent["deferred"]] == (Delivery.DELIVERED, "")
    spam = [r for r in reports if r.vendor_id == sent["spamreport"] and r.suppress]
    assert [(r.state, r.suppress) for r in spam] == [(Delivery.UNDELIVERED, "complaint")]
    assert all(r.record_id for r in reports)


SG_REFUSALS: list[tuple[str, dict[str, Any], str]] = [
    ("unsigned", {"unsigned": True}, SIGNATURE),
    ("another-key", {"bad_signature": True}, SIGNATURE),
    ("stale", {"timestamp_offset_s": -600}, SIGNATURE),
    ("from-the-future", {"timestamp_offset_s": 600}, SIGNATURE),
]


@pytest.mark.parametrize(("faults", "code"), [r[1:] for r in SG_REFUSALS], ids=[r[0] for r in SG_REFUSALS])
def test_an_event_post_that_is_not_authentic_is_refused(
    sg_fake: sg.SendGridFake, redis_url: str, faults: dict[str, Any], code: str
) -> None:
    provider = sg_provider(sg_fake, redis_url)
    events = sg_fake.events("abc", {"personalizations": [{"to": [{"email": TO}]}]})
    headers, body = sg_fake.signed_request(events)
    assert provider.read_receipt(ReceiptRequest("POST", "https://n.example/r", headers, body)).reports
    for name, value in faults.items():
        setattr(sg_fake, name, value)
    headers, body = sg_fake.signed_request(events)
    assert code_of(provider, ReceiptRequest("POST", "https://n.example/r", headers, body)) == code


@pytest.mark.parametrize(
    ("change", "code"),
    [
        (lambda h, b: (h, b.replace(b"delivered", b"bounce")), SIGNATURE),
        (lambda h, b: (h, b + b" "), SIGNATURE),
        (lambda h, b: ({**h, sendgrid_receipts.TIMESTAMP_HEADER: "12ab"}, b), SIGNATURE),
        (lambda h, b: ({**h, sendgrid_receipts.SIGNATURE_HEADER: "%%%"}, b), SIGNATURE),
        (lambda h, b: ({k: v for k, v in h.items() if "timestamp" not in k}, b), SIGNATURE),
    ],
    ids=["body-changed", "byte-added", "timestamp-not-digits", "signature-not-base64", "no-timestamp"],
)
def test_an_event_post_changed_after_signing_is_refused(
    sg_fake: sg.SendGridFake, redis_url: str, change: Any, code: str
) -> None:
    provider = sg_provider(sg_fake, redis_url)
    headers, body = sg_fake.signed_request(
        sg_fake.events("abc", {"personalizations": [{"to": [{"email": TO}]}]})
    )
    headers, body = change(headers, body)
    assert code_of(provider, ReceiptRequest("POST", "https://n.example/r", headers, body)) == code


def test_a_signed_post_that_is_not_an_array_is_malformed_and_no_key_takes_none(
    sg_fake: sg.SendGridFake, redis_url: str
) -> None:
    provider = sg_provider(sg_fake, redis_url)
    headers, _ = sg_fake.signed_request([])
    body = b'{"event":"delivered"}'
    from tests.fakes.sendgrid import event_signature

    headers[sendgrid_receipts.SIGNATURE_HEADER] = event_signature(
        sg_fake._key, headers[sendgrid_receipts.TIMESTAMP_HEADER], body
    )
    assert code_of(provider, ReceiptRequest("POST", "https://n.example/r", headers, body)) == MALFORMED
    assert (
        code_of(sg_provider(sg_fake, redis_url, webhook_public_key=None), ReceiptRequest("POST", "u"))
        == PROVIDER
    )
    with pytest.raises(NotiError) as refused:
        sg_provider(sg_fake, redis_url, webhook_public_key="bm90IGEga2V5")
    assert refused.value.code == "e.noti.config"


# --- a refused receipt changes nothing ---------------------------------------------------------


@pytest.mark.parametrize("kind", ["ses", "sendgrid"])
def test_a_refused_receipt_changes_nothing_and_the_genuine_one_suppresses(
    kind: str, configure: Any, ses_fake: ses.SesFake, sg_fake: sg.SendGridFake, sink: ReceiptSink
) -> None:
    import noti
    from noti.core.record import Status

    # given a record sent through the vendor to an address that bounces, its receipt held back
    fake: Any = ses_fake if kind == "ses" else sg_fake
    options = (ses.ses_options if kind == "ses" else sg.sendgrid_options)(fake, timeout_s=2)
    rt = configure(providers={"mail": options}, channels={"email": {"provider": "mail"}})
    fake.auto_receipts = False
    fake.fate("gone@example.org", "bounce")
    record_id = noti.notify("email", "gone@example.org", subject="Hi", text="Hello")
    [result] = noti.send(record_id)
    assert rt.store.get(record_id).status is Status.DONE
    fake.settle()
    genuine = fake.pusher.wait(1)[0]
    intake = ReceiptIntake(rt)
    before = rt.redis.hgetall(rt.keys.record(record_id))
    # when forged variants of its bounce come in: refused, the record and the list untouched
    forged_bodies = [genuine.body.replace(b"gone@", b"else@"), genuine.body[:-3]]
    for body in forged_bodies:
        with pytest.raises(NotiError):
            intake.take("mail", ReceiptRequest("POST", sink.url, genuine.headers, body))
    unsigned = {k: v for k, v in genuine.headers.items() if "signature" not in k.lower()}
    if kind == "sendgrid":
        with pytest.raises(NotiError):
            intake.take("mail", ReceiptRequest("POST", sink.url, unsigned, genuine.body))
    assert rt.redis.hgetall(rt.keys.record(record_id)) == before
    assert not rt.store.is_suppressed("email", "gone@example.org")
    # then the genuine one is taken: undelivered, and the address suppressed with why
    intake.take(
        "mail",
        ReceiptRequest("POST", sink.url, {k.lower(): v for k, v in genuine.headers.items()}, genuine.body),
    )
    assert rt.store.get(record_id).delivery == "undelivered"
    entry = rt.store.suppressions.get("email", "gone@example.org")
    assert entry is not None and (entry.reason, entry.record) == ("bounce", record_id)
