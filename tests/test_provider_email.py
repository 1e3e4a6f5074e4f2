"""The email provider against a real SMTP server (aiosmtpd) with TLS, AUTH and scripted refusals."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import noti
from noti import errors
from noti.channels.email.smtp import ENHANCED, ERRORS, EmailProvider, classify
from noti.core.record import Channel, Status
from noti.providers import Message
from tests.conftest import wait_until
from tests.fakes._tls import Tls
from tests.fakes.smtp import SmtpFake, make_certificates
from tests.servers import free_port
from tests.vendor_env import build_provider, send_now

pytestmark = pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS")

USER, PASSWORD = "noti@example.com", "s3cret-smtp-password"
TO = "bob@example.org"
FROM = "Noti <noti@example.com>"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Tls:
    return make_certificates(tmp_path_factory.mktemp("smtp-certs"))


@pytest.fixture
def fake(certs: Tls) -> Iterator[SmtpFake]:
    """A STARTTLS submission server with one user."""
    with SmtpFake(security="starttls", certificates=certs, users={USER: PASSWORD}) as server:
        yield server


def mail_options(fake: SmtpFake, certs: Tls, **extra: Any) -> dict[str, Any]:
    return {
        "kind": "email",
        "host": fake.host,
        "port": fake.port,
        "security": fake.security,
        "username": USER,
        "password": PASSWORD,
        "from_addr": FROM,
        "ca_file": certs.ca_file,
        "helo_name": "noti.test",
        "timeout_s": 2.0,
        **extra,
    }


@pytest.fixture
def mail(configure: Any, fake: SmtpFake, certs: Tls) -> Any:
    """A runtime whose email channel goes to the fake; short retries."""
    return configure(
        providers={"mail": mail_options(fake, certs)},
        channels={"email": {"provider": "mail"}},
        retry_seconds=60,
    )


def provider(rt: Any) -> EmailProvider:
    instance = rt.providers.get("mail")
    assert isinstance(instance, EmailProvider)
    return instance


def message(target: str = TO, **fields: Any) -> Message:
    return Message(
        id="01jtestrecord0000000000001",
        channel=Channel.EMAIL,
        target=target,
        fields={"subject": "Report", "text": "All green.", **fields},
    )


# --- delivery in each security mode -------------------------------------------------------------


@pytest.mark.parametrize("security", ["starttls", "tls", "none"])
def test_each_security_mode_delivers_a_proper_message(configure: Any, certs: Tls, security: str) -> None:
    with SmtpFake(security=security, certificates=certs, users={USER: PASSWORD}) as fake:
        rt = configure(
            providers={"mail": mail_options(fake, certs, reply_to="help@example.com")},
            channels={"email": {"provider": "mail"}},
        )
        # given a record with a text and an HTML body
        record_id = noti.notify_email(TO, subject="Réport ✓", text="All grëen.", html="<p>All grëen.</p>")
        # when it is sent
        record = send_now(rt, record_id)
        # then the server got one message, over TLS unless "none", after a login
        assert record.status is Status.DONE and record.errmsg == "ok" and record.sent_by == "mail"
        assert record.msgid == f"<{record_id}@example.com>"
        assert rt.redis.hget(rt.keys.record(record_id), "noti_email_msgid") == record.msgid
        [got] = fake.messages
        assert got.tls is (security != "none") and got.login == USER
        assert got.mail_from == "noti@example.com" and got.rcpt_tos == [TO]
        # and the message is well formed: headers, text, HTML alternative
        msg = got.message
        assert msg["From"] == FROM and msg["To"] == TO and msg["Reply-To"] == "help@example.com"
        assert msg["Subject"] == "Réport ✓" and msg["Message-ID"] == record.msgid and msg["Date"]
        assert msg.get_content_type() == "multipart/alternative"
        text, html = msg.get_body(("plain",)), msg.get_body(("html",))
        assert text is not None and text.get_content().strip() == "All grëen."
        assert html is not None and html.get_content().strip() == "<p>All grëen.</p>"
        assert got.content.isascii()  # 7-bit safe for any server
        assert not any(name.lower().startswith("list-") for name in got.headers)  # no link given


@pytest.mark.parametrize("mechanism", ["LOGIN", "PLAIN"])
def test_both_auth_mechanisms_log_in(configure: Any, certs: Tls, mechanism: str) -> None:
    with SmtpFake(
        security="tls", certificates=certs, users={USER: PASSWORD}, mechanisms=(mechanism,)
    ) as fake:
        rt = configure(providers={"mail": mail_options(fake, certs)})
        provider(rt).send(message())
        assert fake.logins == [(mechanism, USER, True)] and len(fake.messages) == 1


def test_a_text_only_message_is_plain_text(mail: Any, fake: SmtpFake) -> None:
    receipt = provider(mail).send(message())
    assert receipt.msgid == "<01jtestrecord0000000000001@example.com>" and receipt.raw.startswith("250 ")
    msg = fake.messages[0].message
    assert msg.get_content_type() == "text/plain" and msg.get_content().strip() == "All green."


# --- refusals -----------------------------------------------------------------------------------


def test_a_wrong_password_is_a_configuration_error(configure: Any, fake: SmtpFake, certs: Tls) -> None:
    rt = configure(
        providers={"mail": mail_options(fake, certs, password="wrong-password")},
        channels={"email": {"provider": "mail"}},
    )
    record = send_now(rt, noti.notify_email(TO, subject="s", text="t"))
    assert record.status is Status.FAILED and record.retry == 0
    assert "535" in record.errmsg and "wrong-password" not in record.errmsg
    # smtplib tries each mechanism both sides know before giving up
    assert fake.logins == [("PLAIN", USER, False), ("LOGIN", USER, False)] and fake.messages == []


def test_an_unknown_recipient_is_permanent(mail: Any, fake: SmtpFake) -> None:
    fake.refuse[TO] = "550 5.1.1 <bob@example.org>: Recipient address rejected: User unknown"
    record = send_now(mail, noti.notify_email(TO, subject="s", text="t"))
    assert record.status is Status.INVALID and "550 5.1.1" in record.errmsg
    assert fake.messages == []


def test_only_the_refused_recipient_fails(mail: Any, fake: SmtpFake) -> None:
    fake.refuse["gone@example.org"] = "550 5.1.1 mailbox unavailable"
    with pytest.raises(errors.PermanentFailure):
        provider(mail).send(message("gone@example.org"))
    provider(mail).send(message())
    assert [m.rcpt_tos for m in fake.messages] == [[TO]]


@pytest.mark.parametrize(
    ("stage", "reply", "expected"),
    [
        ("ehlo", "421 4.3.2 Service shutting down", errors.ProviderOutage),
        ("ehlo", "554 5.7.1 Your IP is blocked", errors.ProviderMisconfigured),
        ("mail", "451 4.3.0 Try again later", errors.TemporaryFailure),
        ("mail", "553 5.7.1 Sender address rejected: not owned by user", errors.ProviderMisconfigured),
        ("mail", "550 Sender refused", errors.ProviderMisconfigured),
        ("mail", "552 5.3.4 Message size exceeds fixed limit", errors.PermanentFailure),
        ("rcpt", "421 4.7.0 Too many connections", errors.ProviderOutage),
        ("rcpt", "450 4.2.0 Mailbox busy (greylisted)", errors.TemporaryFailure),
        ("rcpt", "452 4.5.3 Too many recipients", errors.TemporaryFailure),
        ("rcpt", "550 5.1.1 User unknown", errors.PermanentFailure),
        ("rcpt", "551 5.1.6 User not local", errors.PermanentFailure),
        ("rcpt", "553 5.1.3 Bad address syntax", errors.PermanentFailure),
        ("rcpt", "550 5.7.1 Relay access denied", errors.ProviderMisconfigured),
        ("rcpt", "530 5.7.0 Authentication required", errors.ProviderMisconfigured),
        ("rcpt", "550 Requested action not taken", errors.PermanentFailure),
        ("rcpt", "not an SMTP reply", errors.ProviderOutage),
        ("data", "451 4.3.0 Local error in processing", errors.TemporaryFailure),
        ("data", "454 4.7.0 TLS not available", errors.TemporaryFailure),
        ("data", "552 5.2.2 Mailbox full", errors.PermanentFailure),
        ("data", "554 5.6.0 Message content rejected", errors.PermanentFailure),
        ("data", "554 5.7.1 Rejected by policy (spam)", errors.ProviderMisconfigured),
        ("data", "garbage", errors.AmbiguousOutcome),
    ],
)
def test_smtp_replies_raise_their_class(
    mail: Any, fake: SmtpFake, stage: Any, reply: str, expected: type
) -> None:
    fake.script(stage, reply)
    with pytest.raises(errors.DeliveryError) as info:
        provider(mail).send(message())
    assert type(info.value) is expected and info.value.provider == "mail"
    assert fake.messages == []


@pytest.mark.parametrize("code", sorted(ERRORS))
def test_every_reply_code_of_the_table_is_classified(code: str) -> None:
    assert classify("rcpt", int(code), "no enhanced code") is ERRORS[code]


@pytest.mark.parametrize("prefix", sorted(ENHANCED))
def test_enhanced_codes_come_first(prefix: str) -> None:
    assert classify("rcpt", 550, f"{prefix}.1 whatever") is ENHANCED[prefix]
    assert classify("rcpt", 450, f"4{prefix[1:]}.1 whatever") is errors.TemporaryFailure


@pytest.mark.parametrize(
    ("code", "status", "retry"),
    [
        ("451 4.3.0 Try again", Status.WAITING, 1),
        ("550 5.1.1 User unknown", Status.INVALID, 0),
        ("550 5.7.1 Relay denied", Status.FAILED, 0),
        ("421 4.3.2 Closing", Status.WAITING, 1),
    ],
)
def test_replies_decide_the_record(mail: Any, fake: SmtpFake, code: str, status: Status, retry: int) -> None:
    record_id = noti.notify_email(TO, subject="s", text="t")
    fake.script("rcpt", code)
    record = send_now(mail, record_id)
    assert record.status is status and record.retry == retry
    assert code.split(" ")[0] in record.errmsg


def test_a_server_without_starttls_is_refused(configure: Any, certs: Tls) -> None:
    with SmtpFake(security="none") as plain:
        rt = configure(
            providers={"mail": mail_options(plain, certs, security="starttls", username=None, password=None)}
        )
        with pytest.raises(errors.ProviderMisconfigured, match="STARTTLS"):
            provider(rt).send(message())
        assert plain.messages == []


def test_an_untrusted_certificate_is_refused(configure: Any, fake: SmtpFake, tmp_path: Path) -> None:
    other_ca = make_certificates(tmp_path / "other", name="someone else")
    rt = configure(providers={"mail": mail_options(fake, other_ca)})
    with pytest.raises(errors.ProviderMisconfigured, match="certificate"):
        provider(rt).send(message())
    assert fake.logins == [] and fake.messages == []


def test_a_missing_ca_file_is_a_configuration_error(configure: Any, fake: SmtpFake, certs: Tls) -> None:
    rt = configure(providers={"mail": mail_options(fake, certs, ca_file="/nonexistent/ca.pem")})
    with pytest.raises(errors.InvalidConfig, match="ca_file"):
        provider(rt)


# --- timeouts and connections -------------------------------------------------------------------


def test_a_timeout_after_data_is_ambiguous_and_the_record_waits(
    configure: Any, fake: SmtpFake, certs: Tls
) -> None:
    rt = configure(
        providers={"mail": mail_options(fake, certs, timeout_s=0.3)},
        channels={"email": {"provider": "mail"}},
        retry_seconds=60,
    )
    record_id = noti.notify_email(TO, subject="s", text="t")
    fake.hang("data", 1.0)
    record = send_now(rt, record_id)
    assert record.status is Status.WAITING and record.retry == 1
    assert "may have been sent" in record.errmsg
    # the server did take it: that is why the outcome is ambiguous, not a failure
    wait_until(lambda: len(fake.messages) == 1, timeout=5)


def test_a_timeout_before_data_is_an_outage(configure: Any, fake: SmtpFake, certs: Tls) -> None:
    rt = configure(providers={"mail": mail_options(fake, certs, timeout_s=0.3)})
    fake.hang("rcpt", 1.0)
    with pytest.raises(errors.ProviderOutage, match="rcpt"):
        provider(rt).send(message())


def test_connection_refused_is_an_outage(configure: Any, certs: Tls) -> None:
    rt = configure(
        providers={
            "mail": {
                "kind": "email",
                "host": "127.0.0.1",
                "port": free_port(),
                "from_addr": FROM,
                "timeout_s": 1,
            }
        }
    )
    with pytest.raises(errors.ProviderOutage, match="connect"):
        provider(rt).send(message())


# --- options and add-time checks ----------------------------------------------------------------


def test_a_non_ascii_address_is_refused_at_add_time(mail: Any) -> None:
    with pytest.raises(errors.InvalidInput) as info:
        noti.notify_email("bjørn@example.org", subject="s", text="t")
    assert info.value.code == "e.cmd.noti.add.badtarget" and mail.store.count() == 0


@pytest.mark.parametrize(
    "bad",
    [
        {"from_addr": "not an address"},
        {"username": "only-a-user", "password": None},
        {"security": "ssl"},
    ],
)
def test_bad_options_are_refused(configure: Any, fake: SmtpFake, certs: Tls, bad: dict[str, Any]) -> None:
    rt = configure(providers={"mail": {**mail_options(fake, certs), **bad}})
    with pytest.raises(errors.InvalidConfig):
        provider(rt)


def test_the_password_never_shows(mail: Any, fake: SmtpFake) -> None:
    instance = provider(mail)
    receipt = instance.send(message())
    for text in (repr(instance), repr(instance.options), str(instance.options), repr(receipt)):
        assert PASSWORD not in text


# --- a real worker ------------------------------------------------------------------------------


def test_a_worker_delivers_an_email(configure: Any, worker: Any, fake: SmtpFake, certs: Tls) -> None:
    rt = configure(providers={"mail": mail_options(fake, certs)}, channels={"email": {"provider": "mail"}})
    link = "https://example.com/unsubscribe?u=7f3a"
    record_id = noti.notify_email(TO, subject="From the worker", text="Delivered.", unsubscribe=link)
    record = wait_until(lambda: (r := rt.store.get(record_id)).status is not Status.WAITING and r)
    assert record.status is Status.DONE and record.msgid == f"<{record_id}@example.com>"
    [got] = fake.messages
    assert got.rcpt_tos == [TO] and got.tls and got.message["Subject"] == "From the worker"
    assert got.headers["List-Unsubscribe"] == f"<{link}>"
    assert got.headers["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"


def test_a_password_is_never_sent_without_tls_to_a_remote_host(redis_url: str) -> None:
    remote = {"kind": "email", "host": "smtp.example.com", "security": "none", "from_addr": FROM}
    with pytest.raises(errors.InvalidConfig) as info:
        build_provider("mail", {**remote, "username": "u", "password": "p"}, redis_url)
    assert "clear text" in info.value.message
