"""E-mail through the APIs teams use (issue 33, point 4): Amazon SES and SendGrid, each
against its fake (tests/fakes/ses.py, tests/fakes/sendgrid.py), parametrised over both; what
every e-mail provider does alike (the unsubscribe link, issue 34) over SMTP too
(tests/fakes/smtp.py).

Sending: the request as each vendor wants it, every mapped vendor error, timeouts and
refused connections; AWS's Signature Version 4 known answers; a record's unsubscribe link as
``List-Unsubscribe`` / ``List-Unsubscribe-Post`` through each of the three. End to end with a real
``celery -A noti worker``: delivered, a hard bounce (the address suppressed, the next send
to it refused with ``e.noti.delivery.optedout``), a complaint (suppressed too) and a transient
bounce (not suppressed). The receipt readers' refusals are in test_channel_email_receipts.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

import noti
from noti.channels.email import _sigv4
from noti.core.record import Channel, Status, new_id
from noti.delivery.state import ReceiptReply, ReceiptRequest
from noti.errors import (
    AmbiguousOutcome,
    DeliveryError,
    NotiError,
    PermanentFailure,
    ProviderMisconfigured,
    ProviderOutage,
    RateLimited,
)
from noti.http.statuses import status_of
from noti.providers.base import Message, Provider
from noti.sending.intake import ReceiptIntake
from tests.conftest import wait_until
from tests.fakes import sendgrid as sg
from tests.fakes import ses
from tests.fakes._receipts import ReceiptSink
from tests.fakes._server import FakeServer, Reply
from tests.fakes.smtp import SmtpFake
from tests.vendor_env import build_provider, nobody_listening

TO = "ann@example.org"


@dataclass
class Vendor:
    """One vendor under test: its fake, and the provider options that reach it."""

    kind: str
    fake: Any

    def options(self, **changes: Any) -> dict[str, Any]:
        return OPTIONS[self.kind](self.fake, **changes)


def smtp_options(fake: SmtpFake, **changes: Any) -> dict[str, Any]:
    """An SMTP provider's options that reach ``fake`` (plain text, no login: the headers are
    what these tests look at; TLS and AUTH are tests/test_provider_email.py's)."""
    return {
        "kind": "email",
        "host": fake.host,
        "port": fake.port,
        "security": "none",
        "from_addr": "Noti <noti@example.com>",
        "helo_name": "noti.test",
        "timeout_s": 2,
        **changes,
    }


OPTIONS: dict[str, Callable[..., dict[str, Any]]] = {
    "ses": ses.ses_options,
    "sendgrid": sg.sendgrid_options,
    "smtp": smtp_options,
}


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, FakeServer | SmtpFake]]:
    with ses.SesFake() as ses_fake, sg.SendGridFake() as sg_fake, SmtpFake() as smtp_fake:
        yield {"ses": ses_fake, "sendgrid": sg_fake, "smtp": smtp_fake}


def vendor_of(servers: dict[str, Any], kind: str) -> Vendor:
    """``kind``'s running fake, reset (no requests, script or fault of another test)."""
    servers[kind].reset()
    return Vendor(kind, servers[kind])


@pytest.fixture(params=["ses", "sendgrid"])
def vendor(request: pytest.FixtureRequest, servers: dict[str, Any]) -> Vendor:
    """An e-mail API vendor."""
    return vendor_of(servers, request.param)


@pytest.fixture(params=["smtp", "ses", "sendgrid"])
def mailer(request: pytest.FixtureRequest, servers: dict[str, Any]) -> Vendor:
    """Any e-mail provider's vendor: an SMTP server or an API."""
    return vendor_of(servers, request.param)


def make(vendor: Vendor, redis_url: str, **changes: Any) -> Provider:
    return build_provider("mail", vendor.options(**changes), redis_url)


def email(target: str = TO, **fields: Any) -> Message:
    return Message(
        id=new_id(),
        channel=Channel.EMAIL,
        target=target,
        fields={"subject": "Your order", "text": "It ships today.", **fields},
    )


# --- AWS Signature Version 4: AWS's known answers -------------------------------------------

#: Cases of AWS's "Signature Version 4 test suite" (credentials AKIDEXAMPLE /
#: wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY, 2015-08-30T12:36:00Z, us-east-1, service
#: "service"), as AWS publishes it in awslabs/aws-c-auth, tests/aws-signing-test-suite/v4/<case>/
#: (request.txt, context.json, header-signature.txt); read 2026-11 at commit 495329c.
SIGV4_SUITE = [
    ("get-vanilla", "GET", "/", {}, b"", False, None,
     "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"),
    ("post-vanilla", "POST", "/", {}, b"", False, None,
     "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"),
    ("post-vanilla-query", "POST", "/?Param1=value1", {}, b"", False, None,
     "28038455d6de14eafc1f9222cf5aa6f1a96197d7deb8263271d420d138af7f11"),
    ("get-vanilla-query-order-key-case", "GET", "/?Param2=value2&Param1=value1", {}, b"", False, None,
     "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"),
    ("post-x-www-form-urlencoded", "POST", "/",
     {"Content-Type": "application/x-www-form-urlencoded", "Content-Length": "13"}, b"Param1=value1",
     True, None, "d3875051da38690788ef43de4db0d8f280229d82040bfac253562e56c3f20e0b"),
    ("get-vanilla-with-session-token", "GET", "/", {}, b"", False,
     "6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267",
     "07ec1639c89043aa0e3e2de82b96708f198cceab042d4a97044c66dd9f74e7f8"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("method", "path", "headers", "body", "sign_body", "token", "signature"),
    [case[1:] for case in SIGV4_SUITE],
    ids=[case[0] for case in SIGV4_SUITE],
)
def test_sigv4_reproduces_awss_test_suite(
    method: str,
    path: str,
    headers: dict[str, str],
    body: bytes,
    sign_body: bool,
    token: str | None,
    signature: str,
) -> None:
    credentials = _sigv4.Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", token)
    signed = _sigv4.sign(
        method,
        "https://example.amazonaws.com" + path,
        headers,
        body,
        credentials=credentials,
        region="us-east-1",
        service="service",
        now=datetime(2015, 8, 30, 12, 36, tzinfo=UTC),
        content_sha256_header=sign_body,
    )
    scope = "Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request"
    assert signed["authorization"].startswith(f"AWS4-HMAC-SHA256 {scope}, SignedHeaders=")
    assert signed["authorization"].endswith(f", Signature={signature}")
    assert signed["x-amz-date"] == "20150830T123600Z"


def test_the_canonical_request_of_get_vanilla_is_awss() -> None:
    canonical, signed = _sigv4.canonical_request(
        "GET",
        "/",
        [],
        {"Host": "example.amazonaws.com", "X-Amz-Date": "20150830T123600Z"},
        _sigv4.payload_hash(b""),
    )
    assert signed == "host;x-amz-date"
    assert canonical == (
        "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n"
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    )
    scope = "20150830/us-east-1/service/aws4_request"
    assert _sigv4.string_to_sign("20150830T123600Z", scope, canonical).endswith(
        "bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63"
    )


def test_credentials_never_print_their_secret() -> None:
    credentials = _sigv4.Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
    assert "wJalr" not in repr(credentials)


# --- sending ---------------------------------------------------------------------------------


def test_a_message_is_sent_as_the_vendor_wants_it(vendor: Vendor, redis_url: str) -> None:
    # given a message with an HTML part
    message = email(html="<p>It ships today.</p>")
    # when the provider sends it
    receipt = make(vendor, redis_url).send(message)
    # then the vendor has it under the id the receipt names, tagged with the record's id
    [request] = vendor.fake.requests
    body = vendor.fake.messages[receipt.msgid]
    if vendor.kind == "ses":
        assert request.path == "/v2/email/outbound-emails"
        assert request.headers["authorization"].startswith(
            f"AWS4-HMAC-SHA256 Credential={ses.ACCESS_KEY_ID}/"
        )
        assert body["Destination"] == {"ToAddresses": [TO]}
        assert body["Content"]["Simple"]["Body"]["Html"]["Data"] == "<p>It ships today.</p>"
        assert body["EmailTags"] == [{"Name": "noti_id", "Value": message.id}]
        assert body["FromEmailAddress"] == f"Noti <{ses.FROM}>"
    else:
        assert request.headers["authorization"] == f"Bearer {sg.API_KEY}"
        assert body["personalizations"] == [{"to": [{"email": TO}]}]
        assert body["from"] == {"email": sg.FROM, "name": "Noti"}
        assert [c["type"] for c in body["content"]] == ["text/plain", "text/html"]
        assert body["custom_args"] == {"noti_id": message.id}
    assert receipt.provider == "mail"


def test_the_same_message_twice_is_sent_twice(vendor: Vendor, redis_url: str) -> None:
    # neither SendEmail nor mail/send takes an idempotency key: noti's own rules keep it once
    provider, message = make(vendor, redis_url), email()
    assert provider.send(message).msgid != provider.send(message).msgid
    assert len(vendor.fake.messages) == 2


aws, grid = ses.error_reply, sg.error_reply
#: (vendor, case, scripted answer or None for what the fake itself refuses, changes, class)
ERRORS: list[tuple[str, str, Callable[[], Reply] | None, dict[str, Any], type[DeliveryError]]] = [
    ("ses", "MessageRejected", lambda: aws("MessageRejected"), {}, PermanentFailure),
    ("ses", "BadRequestException", lambda: aws("BadRequestException"), {}, PermanentFailure),
    ("ses", "MailFromDomainNotVerified", lambda: aws("MailFromDomainNotVerifiedException"), {},
     ProviderMisconfigured),
    ("ses", "AccountSuspended", lambda: aws("AccountSuspendedException"), {}, ProviderMisconfigured),
    ("ses", "SendingPaused", lambda: aws("SendingPausedException"), {}, ProviderOutage),
    ("ses", "LimitExceeded", lambda: aws("LimitExceededException"), {}, ProviderOutage),
    ("ses", "TooManyRequests", lambda: aws("TooManyRequestsException", status=429), {}, RateLimited),
    ("ses", "NotFound", lambda: aws("NotFoundException", status=404), {}, ProviderMisconfigured),
    ("ses", "InternalFailure-500", lambda: aws("InternalFailure", status=500), {}, AmbiguousOutcome),
    ("ses", "ServiceUnavailable-503", lambda: aws("ServiceUnavailable", status=503), {}, ProviderOutage),
    ("ses", "bare-502", lambda: Reply(502, "<html>bad gateway</html>"), {}, AmbiguousOutcome),
    ("ses", "wrong-secret", None, {"secret_access_key": "not-the-secret"}, ProviderMisconfigured),
    ("ses", "unknown-key", None, {"access_key_id": "AKIAUNKNOWNKEY000000"}, ProviderMisconfigured),
    ("ses", "other-region", None, {"region": "us-east-1"}, ProviderMisconfigured),
    ("ses", "unverified-from", None, {"from_addr": "other@elsewhere.test"}, PermanentFailure),
    ("ses", "unknown-configuration-set", None, {"configuration_set": "nope"}, ProviderMisconfigured),
    ("sendgrid", "400", lambda: grid(400, "Does not contain a valid address.", "x"), {}, PermanentFailure),
    ("sendgrid", "413", lambda: grid(413, "Payload Too Large"), {}, PermanentFailure),
    ("sendgrid", "429", lambda: sg.rate_limited(5), {}, RateLimited),
    ("sendgrid", "500", lambda: grid(500, "internal error"), {}, AmbiguousOutcome),
    ("sendgrid", "503", lambda: grid(503, "service unavailable"), {}, ProviderOutage),
    ("sendgrid", "wrong-key", None, {"api_key": "SG.wrong"}, ProviderMisconfigured),
    ("sendgrid", "key-without-mail-send", None, {"api_key": sg.READ_ONLY_KEY}, ProviderMisconfigured),
    ("sendgrid", "unverified-from", None, {"from_addr": "other@elsewhere.test"}, ProviderMisconfigured),
]  # fmt: skip


@pytest.mark.parametrize(
    ("kind", "answer", "changes", "expected"),
    [e[0:1] + e[2:] for e in ERRORS],
    ids=[f"{e[0]}-{e[1]}" for e in ERRORS],
)
def test_each_vendor_error_raises_its_class(
    servers: dict[str, Any],
    redis_url: str,
    kind: str,
    answer: Callable[[], Reply] | None,
    changes: dict[str, Any],
    expected: type[DeliveryError],
) -> None:
    vendor = vendor_of(servers, kind)
    if answer is not None:
        vendor.fake.script(answer())
    with pytest.raises(DeliveryError) as info:
        make(vendor, redis_url, **changes).send(email())
    assert type(info.value) is expected, info.value
    assert info.value.provider == "mail" and vendor.fake.messages == {}
    if expected is RateLimited:
        assert isinstance(info.value, RateLimited) and info.value.retry_after_s >= 1.0


def test_a_stale_signature_is_refused_by_ses_as_a_configuration_problem(redis_url: str, servers: Any) -> None:
    # given SES's clock ten minutes ahead of ours (our clock is wrong)
    vendor = vendor_of(servers, "ses")
    vendor.fake.clock_offset_s = 600
    with pytest.raises(ProviderMisconfigured) as info:
        make(vendor, redis_url).send(email())
    assert info.value.vendor_code == "InvalidSignatureException" and "Signature expired" in info.value.message


def test_sendgrids_429_waits_until_its_reset(redis_url: str, servers: Any) -> None:
    vendor = vendor_of(servers, "sendgrid")
    vendor.fake.script(sg.rate_limited(30))
    with pytest.raises(RateLimited) as info:
        make(vendor, redis_url).send(email())
    assert 25 <= info.value.retry_after_s <= 31


def test_a_timeout_is_ambiguous_and_a_refused_connection_an_outage(vendor: Vendor, redis_url: str) -> None:
    vendor.fake.script(Reply(200, {}, hang_s=2))
    with pytest.raises(AmbiguousOutcome):
        make(vendor, redis_url).send(email())
    closed = nobody_listening()
    where = {"endpoint": closed} if vendor.kind == "ses" else {"base_url": closed}
    with pytest.raises(ProviderOutage):
        make(vendor, redis_url, **where).send(email())


@pytest.mark.parametrize(
    "answer",
    [Reply(200, {"Message": "no id"}), Reply(202, b"")],
    ids=["no-message-id", "no-x-message-id"],
)
def test_a_success_without_the_vendors_id_is_ambiguous(vendor: Vendor, redis_url: str, answer: Reply) -> None:
    vendor.fake.script(answer)
    with pytest.raises(AmbiguousOutcome):
        make(vendor, redis_url).send(email())


def test_a_non_ascii_address_is_refused_before_it_is_stored(mailer: Vendor, redis_url: str) -> None:
    with pytest.raises(NotiError) as info:
        make(mailer, redis_url).check(email("jörg@example.org"))
    assert info.value.code == "e.cmd.noti.add.badtarget"


# --- the unsubscribe link (issue 34): List-Unsubscribe, one-click ----------------------------

ONE_CLICK = {"List-Unsubscribe-Post": "List-Unsubscribe=One-Click"}
LINK = "https://example.com/u/7f3a?list=orders&sig=a%2Fb~c(1)"
LONGEST = "https://example.com/u/" + "a" * (868 - len("https://example.com/u/"))
#: The link given, and the List-* headers the recipient's mail must carry.
UNSUBSCRIBE = {
    "https": (LINK, {"List-Unsubscribe": f"<{LINK}>", **ONE_CLICK}),
    # RFC 8058's one-click POST is for HTTPS only: an http link is a link to open
    "http": ("http://example.com/u/1", {"List-Unsubscribe": "<http://example.com/u/1>"}),
    # 868 characters: one header line everywhere (SES: values up to 870 with the brackets)
    "longest": (LONGEST, {"List-Unsubscribe": f"<{LONGEST}>", **ONE_CLICK}),
    "none": (None, {}),
}


def _list_headers(headers: dict[str, str]) -> dict[str, str]:
    return {name: value for name, value in headers.items() if name.lower().startswith("list-")}


@pytest.mark.parametrize(("link", "expected"), UNSUBSCRIBE.values(), ids=UNSUBSCRIBE.keys())
def test_an_unsubscribe_link_reaches_the_mail_as_list_unsubscribe(
    mailer: Vendor, configure: Callable[..., Any], link: str | None, expected: dict[str, str]
) -> None:
    # given the vendor as the e-mail channel's provider
    rt = configure(providers={"mail": mailer.options()}, channels={"email": {"provider": "mail"}})
    # when a notification with (or without) an unsubscribe link is added and sent
    record_id = noti.notify("email", TO, subject="Your order", text="It ships today.", unsubscribe=link)
    assert rt.redis.hget(rt.keys.record(record_id), "noti_email_unsub") == link
    [result] = noti.send(record_id)
    # then the vendor got the headers, as one unfolded line each (SMTP: as the server read it)
    record = rt.store.get(record_id)
    assert result.mark == "OK" and record.status is Status.DONE
    assert _list_headers(mailer.fake.sent_headers(record.msgid)) == expected


BAD_LINKS = {
    "not-a-url": "unsubscribe me",
    "mailto": "mailto:unsub@example.com",
    "javascript": "javascript:alert(1)",
    "no-host": "https:///u/1",
    "a-space": "https://example.com/u 1",
    "a-newline": "https://example.com/u/1\r\nBcc: victim@example.org",
    "a-control-character": "https://example.com/u/\x00",
    "an-angle-bracket": "https://example.com/u/1>, <https://evil.example",
    "a-quote": 'https://example.com/u/"1"',
    "non-ascii": "https://example.com/désabonner",
    "a-bare-percent": "https://example.com/u/100%",
    "too-long": LONGEST + "a",
    "far-too-long": "https://example.com/" + "a" * 3000,
    "not-a-string": 42,
    "empty": "",
}


@pytest.mark.parametrize("link", BAD_LINKS.values(), ids=BAD_LINKS.keys())
def test_a_bad_unsubscribe_link_is_refused_at_notify_and_nothing_is_stored(
    mailer: Vendor, configure: Callable[..., Any], link: object
) -> None:
    rt = configure(providers={"mail": mailer.options()}, channels={"email": {"provider": "mail"}})
    with pytest.raises(NotiError) as info:
        noti.notify("email", TO, subject="Your order", text="It ships today.", unsubscribe=link)
    assert info.value.code == "e.cmd.noti.add.badfield"
    assert "unsubscribe" in info.value.message
    assert rt.store.count() == 0 and len(mailer.fake.messages) == 0


#: Per API vendor: a request's headers it refuses (the body's part), and why.
REFUSED_HEADERS: list[tuple[str, str, Any]] = [
    ("ses", "value-over-870", [{"Name": "List-Unsubscribe", "Value": "<" + "a" * 870 + ">"}]),
    ("ses", "name-with-colon", [{"Name": "List:Unsubscribe", "Value": "<https://e.example/u>"}]),
    ("ses", "non-ascii-value", [{"Name": "List-Unsubscribe", "Value": "<https://e.example/ü>"}]),
    ("ses", "twice", [{"Name": "List-Unsubscribe", "Value": "<https://e.example/u>"}] * 2),
    ("ses", "not-a-list", {"List-Unsubscribe": "<https://e.example/u>"}),
    ("sendgrid", "reserved-from", {"From": "x@example.org"}),
    ("sendgrid", "reserved-any-case", {"reply-to": "x@example.org"}),
    ("sendgrid", "not-a-string", {"List-Unsubscribe": 1}),
    ("sendgrid", "not-an-object", [["List-Unsubscribe", "<https://e.example/u>"]]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("kind", "headers"),
    [(k, h) for k, _, h in REFUSED_HEADERS],
    ids=[f"{k}-{c}" for k, c, _ in REFUSED_HEADERS],
)
def test_each_api_fake_refuses_the_headers_its_vendor_refuses(
    servers: dict[str, Any], redis_url: str, kind: str, headers: Any
) -> None:
    # given a provider whose request carries headers noti never sends
    vendor = vendor_of(servers, kind)
    provider = make(vendor, redis_url)
    message = email()
    body = provider.body(message)  # type: ignore[attr-defined]
    if kind == "ses":
        body["Content"]["Simple"]["Headers"] = headers
    else:
        body["headers"] = headers
    provider.body = lambda _message: body  # type: ignore[attr-defined]
    # when it sends, then the fake refuses as its vendor does: nothing sent
    with pytest.raises(PermanentFailure) as info:
        provider.send(message)
    assert info.value.vendor_code == ("BadRequestException" if kind == "ses" else "http.400")
    assert vendor.fake.messages == {}


# --- end to end: a real worker, the vendor's receipts, the suppression list ------------------


def _config(name: str, options: dict[str, Any]) -> str:
    def toml(value: Any) -> str:
        if isinstance(value, list):
            return "[" + ", ".join(toml(v) for v in value) + "]"
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value) if isinstance(value, int | float) else f'"{value}"'

    lines = [f'[channels.email]\nprovider = "{name}"\n', f"[providers.{name}]"]
    lines += [f"{key} = {toml(value)}" for key, value in options.items()]
    return "\n".join(lines) + f'\n[provider_grants]\n"*" = ["{name}"]\n'


@pytest.fixture
def sink(configure: Callable[..., Any]) -> Iterator[ReceiptSink]:
    with ReceiptSink() as running:
        yield running


def _intake(runtime: Any, name: str) -> Callable[[ReceiptRequest], ReceiptReply]:
    """What /v1/receipts/<name> does with a push: the intake, a refusal answered by its status."""
    intake = ReceiptIntake(runtime)

    def take(request: ReceiptRequest) -> ReceiptReply:
        try:
            return intake.take(name, request)
        except NotiError as exc:
            return ReceiptReply(status_of(exc), str(exc).encode())

    return take


@pytest.mark.integration
def test_a_worker_sends_and_the_receipts_suppress_bounces_and_complaints(
    vendor: Vendor, configure: Callable[..., Any], spawn_worker: Callable[..., Any], sink: ReceiptSink
) -> None:
    # given the vendor as the e-mail channel's provider, in this process and a worker's, and
    # its receipts pushed to the intake (as /v1/receipts/mail takes them)
    options = vendor.options(timeout_s=5)
    rt = configure(providers={"mail": options}, channels={"email": {"provider": "mail"}})
    sink.handler = _intake(rt, "mail")
    vendor.fake.receipt_url = f"{sink.url}/v1/receipts/mail"
    bounce, complaint, transient = "gone@example.org", "angry@example.org", "full@example.org"
    fates = (
        {bounce: "bounce", complaint: "complaint", transient: "transient"}
        if vendor.kind == "ses"
        else {bounce: "bounce", complaint: "spamreport", transient: "blocked"}
    )
    for address, fate in fates.items():
        vendor.fake.fate(address, fate)
    spawn_worker(_config("mail", options), "-P", "threads", "-c", "2", name=vendor.kind)

    def finished(record_id: str, delivery: str | None = None) -> Any:
        def done() -> Any:
            record = rt.store.get(record_id)
            if record.status is Status.WAITING or (delivery and record.delivery != delivery):
                return None
            return record

        return wait_until(done, timeout=30)

    # when a worker sends to a good address: delivered, by the vendor's receipt, with its
    # unsubscribe link
    ok = finished(noti.notify("email", TO, subject="Hi", text="Hello", unsubscribe=LINK), "delivered")
    assert ok.status is Status.DONE and ok.msgid in vendor.fake.messages
    assert _list_headers(vendor.fake.sent_headers(ok.msgid)) == UNSUBSCRIBE["https"][1]
    assert not rt.store.is_suppressed("email", TO)

    # a hard bounce: undelivered with the vendor's code, the address suppressed, and why
    first = finished(noti.notify("email", bounce, subject="Hi", text="Hello"), "undelivered")
    assert first.status is Status.DONE and first.delivery_code.startswith(
        "Permanent/" if vendor.kind == "ses" else "bounce/"
    )
    entry = wait_until(lambda: rt.store.suppressions.get("email", bounce))
    assert (entry.reason, entry.record, entry.user, entry.provider) == ("bounce", first.id, "alice", "mail")
    # so the next send to it is refused, and nothing reaches the vendor
    sent_before = len(vendor.fake.messages)
    second = finished(noti.notify("email", bounce, subject="Again", text="Hello"))
    assert second.status is Status.INVALID and second.errmsg.startswith("e.noti.delivery.optedout")
    assert len(vendor.fake.messages) == sent_before

    # a complaint suppresses its address too
    finished(noti.notify("email", complaint, subject="Hi", text="Hello"))
    entry = wait_until(lambda: rt.store.suppressions.get("email", complaint))
    assert entry.reason == "complaint"

    # a transient bounce (SES) or a block (SendGrid) leaves the address open
    soft = finished(noti.notify("email", transient, subject="Hi", text="Hello"), "undelivered")
    assert not rt.store.is_suppressed("email", transient)
    again = finished(noti.notify("email", transient, subject="Again", text="Hello"), "undelivered")
    assert again.status is Status.DONE and again.msgid != soft.msgid
