"""The e-mail provider: SMTP submission with the standard library (shared/providers.md §5).

Options (``[providers.<name>]`` with ``kind = "email"``):

=============  ============  ==================================================================
option         default       meaning
=============  ============  ==================================================================
``host``       (required)    the SMTP server
``port``       by security   587 for ``starttls``, 465 for ``tls``, 25 for ``none``
``security``   ``starttls``  ``starttls`` (upgrade, refused if not offered), ``tls`` (implicit
                             TLS) or ``none`` (plain text)
``username``   none          log in (AUTH) when set; ``password`` (secret) with it
``from_addr``  (required)    ``noti@example.com`` or ``Noti <noti@example.com>``
``reply_to``   none          a ``Reply-To`` header
``ca_file``    none          trust only the CAs in this PEM file (default: the system's)
``helo_name``  this host     the name given in EHLO
``timeout_s``  10            each network operation
=============  ============  ==================================================================

Each send opens a connection, sends one message to the record's one recipient and quits
(workers run a threads pool, so blocking I/O is fine). The message has a text part, an HTML
alternative when the record has one, ``Date``, and ``Message-ID: <record id@from domain>`` —
also the receipt's msgid (``noti_email_msgid``), the handle for matching bounces later. A
record's unsubscribe link goes out as ``List-Unsubscribe`` (and ``List-Unsubscribe-Post``
for https: :func:`noti.channels.email.unsubscribe_headers`), each written as one unfolded
line: the standard library would fold a long URL into RFC 2047 encoded words, which no mail
client reads as a link.
MAIL, RCPT and DATA are sent one by one, so every refusal is seen where it happens (smtplib's
``sendmail`` would return a refused recipient instead of raising, §5.2).

Classification (the enhanced status code first, then the reply code):

============================================  ====================================================
the server said / what happened               raised
============================================  ====================================================
cannot connect; 421 or another 4xx to the     ProviderOutage (nothing was sent)
greeting or EHLO; a timeout, hang-up or
unreadable reply before DATA
timeout, hang-up or unreadable reply during   AmbiguousOutcome (it may have been queued)
DATA
other 4xx (450, 451, 452, 454, …)             TemporaryFailure
535 / 530 / 534 / 5.7.x (auth, relay,         ProviderMisconfigured
policy); 5xx to the greeting or EHLO; a
refused sender (5xx at MAIL); no STARTTLS or
AUTH offered; an untrusted certificate
550, 551, 552, 553, 554, 5.1.x … at RCPT or   PermanentFailure
DATA
============================================  ====================================================
"""

from __future__ import annotations

import email.policy
import logging
import smtplib
import socket
import ssl
from collections.abc import Mapping
from datetime import UTC, datetime
from email.headerregistry import Address
from email.message import EmailMessage
from email.utils import format_datetime, parseaddr
from typing import Any, Literal

import redis
from pydantic import Field, SecretStr, field_validator, model_validator

from noti.channels.email import unsubscribe_headers
from noti.core.keys import Keys
from noti.core.privacy import mask_target
from noti.core.record import Channel
from noti.errors import (
    AmbiguousOutcome,
    DeliveryError,
    InvalidConfig,
    InvalidInput,
    PermanentFailure,
    ProviderMisconfigured,
    ProviderOutage,
    TemporaryFailure,
)
from noti.providers.base import Message, Provider, ProviderOptions, Receipt

__all__ = ["ENHANCED", "ERRORS", "EmailOptions", "EmailProvider", "classify"]

log = logging.getLogger(__name__)

#: SMTP reply code -> outcome class (RFC 5321; shared/providers.md §5.1).
ERRORS: dict[str, type[DeliveryError]] = {
    "421": ProviderOutage,
    "450": TemporaryFailure,
    "451": TemporaryFailure,
    "452": TemporaryFailure,
    "454": TemporaryFailure,
    "530": ProviderMisconfigured,
    "534": ProviderMisconfigured,
    "535": ProviderMisconfigured,
    "550": PermanentFailure,
    "551": PermanentFailure,
    "552": PermanentFailure,
    "553": PermanentFailure,
    "554": PermanentFailure,
}
#: Enhanced status code (RFC 3463) of a permanent reply -> outcome class; checked first.
#: ``5.7.*`` is security or policy (auth, relay, SPF/DKIM): our side must change.
ENHANCED: dict[str, type[DeliveryError]] = {
    "5.1": PermanentFailure,
    "5.2": PermanentFailure,
    "5.3": PermanentFailure,
    "5.6": PermanentFailure,
    "5.7": ProviderMisconfigured,
}
PORTS = {"starttls": 587, "tls": 465, "none": 25}
Stage = Literal["connect", "ehlo", "starttls", "auth", "mail", "rcpt", "data"]


def _enhanced(text: str) -> str:
    """The ``class.subject`` of an enhanced status code at the start of ``text`` (else "")."""
    head = text.split(" ", 1)[0].split(".")
    return f"{head[0]}.{head[1]}" if len(head) == 3 and all(p.isdigit() for p in head) else ""


def classify(stage: Stage, code: int, text: str) -> type[DeliveryError]:
    """The outcome class of an SMTP reply ``code`` / ``text`` refusing ``stage``."""
    if not 200 <= code <= 599:  # not an SMTP reply at all
        return AmbiguousOutcome if stage == "data" else ProviderOutage
    if code == 421:
        return ProviderOutage
    if stage in ("connect", "ehlo"):
        return ProviderOutage if code < 500 else ProviderMisconfigured
    if 400 <= code < 500:
        return TemporaryFailure
    if stage in ("starttls", "auth"):
        return ProviderMisconfigured
    enhanced = ENHANCED.get(_enhanced(text))
    if stage == "mail" and enhanced is not PermanentFailure:
        return ProviderMisconfigured  # our from_addr was refused
    return enhanced or ERRORS.get(str(code), PermanentFailure)


class EmailOptions(ProviderOptions):
    host: str = Field(min_length=1)
    port: int | None = Field(default=None, ge=1, le=65535)
    security: Literal["starttls", "tls", "none"] = "starttls"
    username: str | None = None
    password: SecretStr | None = None
    from_addr: str
    reply_to: str | None = None
    ca_file: str | None = None
    helo_name: str | None = None

    @field_validator("from_addr", "reply_to")
    @classmethod
    def _address(cls, value: str | None) -> str | None:
        if value is not None and "@" not in parseaddr(value)[1]:
            raise ValueError(f"{value!r} is not an e-mail address")
        return value

    @model_validator(mode="after")
    def _credentials(self) -> EmailOptions:
        if (self.username is None) != (self.password is None):
            raise ValueError("username and password go together")
        if self.username is not None and self.security == "none" and self.host not in _LOOPBACK:
            raise ValueError(
                "logging in without TLS would send the password in clear text: use security "
                "'starttls' or 'tls' (plain AUTH is allowed to a loopback host only)"
            )
        return self


_LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})


class EmailProvider(Provider):
    """Sends e-mail through one SMTP server (one account)."""

    kind = "email"
    #: SMTP's 250 after DATA is the relay's acceptance: noti counts it as delivered (bounces
    #: are not read).
    delivered_on_send = True
    channels = frozenset({Channel.EMAIL})
    Options = EmailOptions
    options: EmailOptions

    def __init__(self, name: str, options: Mapping[str, Any], *, redis: redis.Redis, keys: Keys) -> None:
        super().__init__(name, options, redis=redis, keys=keys)
        opts = self.options
        self._port = opts.port or PORTS[opts.security]
        self._sender = parseaddr(opts.from_addr)[1]
        self._domain = self._sender.rpartition("@")[2]
        self._helo = opts.helo_name or socket.getfqdn()
        self._tls: ssl.SSLContext | None = None
        if opts.security != "none":
            try:
                self._tls = ssl.create_default_context(cafile=opts.ca_file)
            except (OSError, ssl.SSLError) as exc:
                raise InvalidConfig(f"[providers.{name}] ca_file {opts.ca_file!r}: {exc}") from None

    def check(self, message: Message) -> None:
        """Refuse what cannot be put in a message: e.g. a non-ASCII address (no SMTPUTF8 here)."""
        if not message.target.isascii():
            raise InvalidInput(
                f"{message.target!r}: addresses must be ASCII (internationalised addresses are not sent)",
                code="e.cmd.noti.add.badtarget",
            )
        try:
            self.payload(message)
        except (ValueError, TypeError, IndexError) as exc:
            raise InvalidInput(f"cannot build the e-mail: {exc}", code="e.cmd.noti.add.badfield") from None

    def build(self, message: Message) -> EmailMessage:
        """The message sent for ``message``: 7-bit safe, text with an optional HTML alternative."""
        mail = EmailMessage(policy=email.policy.SMTP.clone(cte_type="7bit"))
        mail["From"] = self.options.from_addr
        mail["To"] = Address(addr_spec=message.target)
        if self.options.reply_to:
            mail["Reply-To"] = self.options.reply_to
        mail["Subject"] = str(message.fields.get("subject", ""))
        mail["Date"] = format_datetime(datetime.now(UTC))
        mail["Message-ID"] = self.message_id(message)
        mail.set_content(str(message.fields.get("text", "")))
        html = message.fields.get("html")
        if html:
            mail.add_alternative(str(html), subtype="html")
        return mail

    def payload(self, message: Message) -> bytes:
        """The bytes sent as DATA: the unsubscribe headers, then :meth:`build`'s message.

        The link was checked at ``add`` (ASCII, no white space or line break: see
        :func:`noti.channels.email.unsubscribe_url`), so each header is one safe line; where
        the header section holds them does not matter (RFC 5322 §3.6).
        """
        lines = b"".join(
            f"{name}: {value}\r\n".encode("ascii") for name, value in unsubscribe_headers(message.fields)
        )
        return lines + self.build(message).as_bytes()

    def message_id(self, message: Message) -> str:
        return f"<{message.id}@{self._domain}>"

    def send(self, message: Message) -> Receipt:
        payload = self.payload(message)
        stage: Stage = "connect"
        smtp: smtplib.SMTP | None = None
        try:
            smtp = self._connect()
            stage = "ehlo"
            self._expect(stage, smtp.ehlo(self._helo), message)
            if self.options.security == "starttls":
                stage = "starttls"
                if not smtp.has_extn("starttls"):
                    raise self._error(ProviderMisconfigured, "the server does not offer STARTTLS", stage)
                self._expect(stage, smtp.starttls(context=self._tls), message, ok=(220,))
                stage = "ehlo"
                self._expect(stage, smtp.ehlo(self._helo), message)
            if self.options.username is not None and self.options.password is not None:
                stage = "auth"
                if not smtp.has_extn("auth"):
                    raise self._error(ProviderMisconfigured, "the server does not offer AUTH", stage)
                smtp.login(self.options.username, self.options.password.get_secret_value())
            stage = "mail"
            self._expect(stage, smtp.mail(self._sender), message)
            stage = "rcpt"
            self._expect(stage, smtp.rcpt(message.target), message, ok=(250, 251))
            stage = "data"
            answer = smtp.data(payload)
            self._expect(stage, answer, message)
        except DeliveryError:
            self._close(smtp, polite=True)
            raise
        except smtplib.SMTPResponseException as exc:  # greeting, STARTTLS, AUTH, the DATA command
            self._close(smtp, polite=True)
            raise self._refusal(stage, exc.smtp_code, exc.smtp_error, message) from exc
        except ssl.SSLCertVerificationError as exc:
            self._close(smtp)
            raise self._error(
                ProviderMisconfigured, f"certificate refused: {exc.verify_message}", stage
            ) from exc
        except (OSError, smtplib.SMTPServerDisconnected) as exc:  # timeouts, resets, hang-ups, TLS
            self._close(smtp)
            what = f"{type(exc).__name__}: {exc}"
            if stage == "data":
                raise AmbiguousOutcome(
                    f"email {self.name}: data: no answer ({what}); it may have been sent",
                    provider=self.name,
                    vendor_code="smtp.data",
                ) from exc
            raise self._error(ProviderOutage, what, stage) from exc
        except smtplib.SMTPException as exc:  # no AUTH mechanism in common, STARTTLS not offered…
            self._close(smtp)
            error = ProviderMisconfigured if stage in ("auth", "starttls") else ProviderOutage
            raise self._error(error, f"{type(exc).__name__}: {exc}", stage) from exc
        self._close(smtp, polite=True)
        code, reply = answer
        log.info(
            "email %s: %s to %s: accepted (%s)", message.id, self.name, mask_target(message.target), code
        )
        return Receipt(provider=self.name, msgid=self.message_id(message), raw=self._text(code, reply)[:200])

    def _connect(self) -> smtplib.SMTP:
        opts = self.options
        if opts.security == "tls":
            return smtplib.SMTP_SSL(
                opts.host, self._port, local_hostname=self._helo, timeout=opts.timeout_s, context=self._tls
            )
        return smtplib.SMTP(opts.host, self._port, local_hostname=self._helo, timeout=opts.timeout_s)

    def _expect(
        self, stage: Stage, answer: tuple[int, bytes], message: Message, *, ok: tuple[int, ...] = (250,)
    ) -> None:
        code, reply = answer
        if code not in ok:
            raise self._refusal(stage, code, reply, message)

    def _refusal(self, stage: Stage, code: int, reply: bytes | str, message: Message) -> DeliveryError:
        text = self._text(code, reply)
        error = classify(stage, code, text.partition(" ")[2])
        log.info(
            "email %s: %s to %s: %s refused: %s",
            message.id,
            self.name,
            mask_target(message.target),
            stage,
            code,
        )
        return self._error(error, text[:300], stage, vendor_code=str(code))

    def _error(
        self, cls: type[DeliveryError], what: str, stage: str, *, vendor_code: str | None = None
    ) -> DeliveryError:
        return cls(
            f"email {self.name}: {stage}: {what}",
            provider=self.name,
            vendor_code=vendor_code or f"smtp.{stage}",
        )

    @staticmethod
    def _text(code: int, reply: bytes | str) -> str:
        text = reply.decode("utf-8", "replace") if isinstance(reply, bytes) else str(reply)
        return f"{code} {' '.join(text.split())}"

    @staticmethod
    def _close(smtp: smtplib.SMTP | None, *, polite: bool = False) -> None:
        """Hang up: with QUIT when the server is answering, else just close the socket."""
        if smtp is None:
            return
        try:
            if polite and smtp.sock is not None:
                smtp.quit()
        except (OSError, smtplib.SMTPException):
            pass
        finally:
            smtp.close()
