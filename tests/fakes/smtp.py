"""A fake SMTP submission server (aiosmtpd in a thread on 127.0.0.1; shared/providers.md §5.3).

- ``security``: ``none`` (plain text; AUTH offered without TLS), ``starttls`` (STARTTLS is
  required before anything else, and AUTH is only offered after it, as real submission
  servers do) or ``tls`` (implicit TLS on connect). Certificates come from
  :func:`make_certificates` (a test CA and a server certificate for 127.0.0.1 / localhost).
- ``users``: login → password. When given, AUTH LOGIN and PLAIN check them (bad ones get
  ``535 5.7.8 Authentication credentials invalid``) and MAIL needs a successful AUTH
  (``530 5.7.0 Authentication required``).
- Scripting: ``refuse[address] = "550 5.1.1 …"`` refuses that recipient at RCPT every time;
  ``script(stage, reply)`` answers the next ``ehlo`` / ``mail`` / ``rcpt`` / ``data`` with
  ``reply`` (a 421 to EHLO stands for a server closing at connect); ``hang(stage, seconds)``
  makes the next answer at that stage wait (a DATA that hangs still keeps the message: the
  client cannot know whether it was taken).
- ``messages`` holds what was accepted (envelope, raw content, TLS, login); ``logins`` every
  AUTH attempt. :meth:`SmtpFake.sent_headers` gives a message's header fields as a mail client
  reads them off the wire: unfolded but not decoded, so a URL the sender wrapped into RFC 2047
  encoded words shows as such. A DATA line over 998 characters is refused (aiosmtpd's
  ``500 Line too long``, RFC 5321 §4.5.3.1.6).
- ``reset()`` forgets messages, logins, refusals and script (one server for many tests).
"""

from __future__ import annotations

import asyncio
import email
import email.policy
import re
import ssl
import threading
from collections import defaultdict, deque
from dataclasses import dataclass, field
from email.message import EmailMessage
from pathlib import Path
from typing import Any, Literal

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session

from tests.fakes._tls import Tls, make_tls

__all__ = ["ReceivedMail", "SmtpFake", "SmtpHandler", "make_certificates"]

Stage = Literal["ehlo", "mail", "rcpt", "data"]


def make_certificates(directory: Path, *, name: str = "noti test") -> Tls:
    """A new CA (``<name> CA``) and a server certificate for ``127.0.0.1`` and ``localhost``
    in ``directory`` (:func:`tests.fakes._tls.make_tls`)."""
    return make_tls(directory, name_prefix=name)


@dataclass(frozen=True, slots=True)
class ReceivedMail:
    """One message the fake accepted."""

    mail_from: str
    rcpt_tos: list[str]
    content: bytes
    tls: bool
    login: str | None

    @property
    def message(self) -> EmailMessage:
        parsed = email.message_from_bytes(self.content, policy=email.policy.default)
        assert isinstance(parsed, EmailMessage)
        return parsed

    @property
    def headers(self) -> dict[str, str]:
        """The header fields as sent, by name: unfolded (RFC 5322 §2.2.3), not decoded; a field
        named twice is a malformed message here."""
        head = re.split(rb"\r?\n\r?\n", self.content, maxsplit=1)[0]
        fields: dict[str, str] = {}
        for line in re.sub(rb"\r?\n(?=[ \t])", b"", head).splitlines():
            name, sep, value = line.decode("ascii").partition(":")
            assert sep and name == name.strip(), f"not a header field: {line[:80]!r}"
            assert name.lower() not in {n.lower() for n in fields}, f"{name} appears twice"
            fields[name] = value.strip(" \t")
        return fields


@dataclass(slots=True)
class _Script:
    replies: dict[str, deque[str]] = field(default_factory=lambda: defaultdict(deque))
    hangs: dict[str, deque[float]] = field(default_factory=lambda: defaultdict(deque))


class _Controller(Controller):
    """aiosmtpd's controller, on a port the system picks (``port=0``)."""

    def _trigger_server(self) -> None:
        if self.port == 0 and self.server is not None:
            self.port = self.server.sockets[0].getsockname()[1]
        super()._trigger_server()


class SmtpFake:
    """An SMTP server for one test: see the module docstring."""

    def __init__(
        self,
        *,
        security: Literal["none", "starttls", "tls"] = "none",
        certificates: Tls | None = None,
        users: dict[str, str] | None = None,
        mechanisms: tuple[str, ...] = ("LOGIN", "PLAIN"),
    ) -> None:
        self.security = security
        self.users = dict(users or {})
        self.refuse: dict[str, str] = {}
        self.messages: list[ReceivedMail] = []
        #: (mechanism, login, accepted) of every AUTH attempt.
        self.logins: list[tuple[str, str, bool]] = []
        self._script = _Script()
        self._lock = threading.Lock()
        server_tls: ssl.SSLContext | None = None
        if security != "none":
            if certificates is None:
                raise ValueError(f"security={security!r} needs certificates")
            server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            server_tls.load_cert_chain(certificates.cert_file, certificates.key_file)
        smtp_options: dict[str, Any] = {
            "server_hostname": "smtp.fake.test",
            "ident": "noti SMTP fake",
            "auth_require_tls": security == "starttls",
            "auth_exclude_mechanism": [m for m in ("LOGIN", "PLAIN") if m not in mechanisms],
            "authenticator": self._authenticate if self.users else None,
            "auth_required": bool(self.users),
        }
        if security == "starttls":
            smtp_options.update(tls_context=server_tls, require_starttls=True)
        self._controller = _Controller(
            self.handler(),
            hostname="127.0.0.1",
            port=0,
            ssl_context=server_tls if security == "tls" else None,
            **smtp_options,
        )

    def handler(self) -> Any:
        """The aiosmtpd handler answering for this fake (a subclass may answer otherwise)."""
        return SmtpHandler(self)

    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def port(self) -> int:
        port: int = self._controller.port
        return port

    def start(self) -> SmtpFake:
        self._controller.start()
        return self

    def stop(self) -> None:
        self._controller.stop()

    def __enter__(self) -> SmtpFake:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def reset(self) -> None:
        """Forget what was sent and scripted (the same server for the next test)."""
        with self._lock:
            self.refuse.clear()
            self.messages.clear()
            self.logins.clear()
            self._script = _Script()

    def sent_headers(self, message_id: str) -> dict[str, str]:
        """The header fields (:attr:`ReceivedMail.headers`) of the message with this
        ``Message-ID``."""
        found = [m.headers for m in self.messages if m.headers.get("Message-ID") == message_id]
        assert len(found) == 1, f"{len(found)} messages have Message-ID {message_id}"
        return found[0]

    def script(self, stage: Stage, *replies: str) -> None:
        """Answer the next commands of ``stage`` with these replies."""
        with self._lock:
            self._script.replies[stage].extend(replies)

    def hang(self, stage: Stage, seconds: float) -> None:
        """Make the next answer at ``stage`` wait ``seconds``."""
        with self._lock:
            self._script.hangs[stage].append(seconds)

    # --- the server side ---------------------------------------------------------------------

    def _authenticate(
        self, server: SMTP, session: Session, envelope: Envelope, mechanism: str, auth_data: Any
    ) -> AuthResult:
        assert isinstance(auth_data, LoginPassword)
        login, password = auth_data.login.decode(), auth_data.password.decode()
        ok = login in self.users and self.users[login] == password
        with self._lock:
            self.logins.append((mechanism, login, ok))
        return AuthResult(success=ok, handled=False, auth_data=login if ok else None)

    def _take(self, stage: Stage) -> tuple[float, str | None]:
        """The scripted wait and reply for the next command of ``stage``."""
        with self._lock:
            hangs = self._script.hangs[stage]
            replies = self._script.replies[stage]
            return (hangs.popleft() if hangs else 0.0), (replies.popleft() if replies else None)

    async def _turn(self, stage: Stage) -> str | None:
        """Wait if a hang is scripted for ``stage``; the scripted reply, if any."""
        pause, reply = self._take(stage)
        if pause:
            await asyncio.sleep(pause)
        return reply


class SmtpHandler:
    """aiosmtpd hooks, delegating to the fake's script."""

    def __init__(self, fake: SmtpFake) -> None:
        self.fake = fake

    async def handle_EHLO(
        self, server: SMTP, session: Session, envelope: Envelope, hostname: str, responses: list[str]
    ) -> list[str]:
        scripted = await self.fake._turn("ehlo")
        if scripted is not None:
            return [scripted]
        session.host_name = hostname
        return responses

    async def handle_MAIL(
        self, server: SMTP, session: Session, envelope: Envelope, address: str, options: list[str]
    ) -> str:
        """The scripted reply, else the sender taken."""
        return await self.fake._turn("mail") or _take_sender(envelope, address, options)

    async def handle_RCPT(
        self, server: SMTP, session: Session, envelope: Envelope, address: str, options: list[str]
    ) -> str:
        """The scripted reply, else the recipient's refusal, else the recipient taken."""
        return (
            await self.fake._turn("rcpt")
            or self.fake.refuse.get(address)
            or _take_recipient(envelope, address)
        )

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        pause, scripted = self.fake._take("data")
        if scripted is None:  # taken before any hang: a client that gives up cannot tell
            transport = server.transport
            tls = session.ssl is not None or (
                transport is not None and transport.get_extra_info("ssl_object") is not None
            )
            content = envelope.original_content or b""
            mail = ReceivedMail(
                str(envelope.mail_from), list(envelope.rcpt_tos), content, tls, session.auth_data
            )
            with self.fake._lock:
                self.fake.messages.append(mail)
                queued = len(self.fake.messages)
        if pause:
            await asyncio.sleep(pause)
        return scripted if scripted is not None else f"250 2.0.0 Ok: queued as FAKE{queued}"


def _take_sender(envelope: Envelope, address: str, options: list[str]) -> str:
    envelope.mail_from = address
    envelope.mail_options.extend(options)
    return "250 2.1.0 OK"


def _take_recipient(envelope: Envelope, address: str) -> str:
    envelope.rcpt_tos.append(address)
    return "250 2.1.5 OK"
