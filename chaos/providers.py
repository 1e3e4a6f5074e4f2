"""The provider side of a chaos run: the suite's vendor fakes (``tests/fakes``) on loopback in
the coordinator process, which is never killed, answering as :class:`Ledger` decides and
writing every attempt into it.

- SMS: :class:`~tests.fakes.aliyun.AliyunFake` (signature V1 checked, ``OutId`` = record id),
  reached through noti's ``aliyun`` provider. Not idempotent: a second request sends again;
  but noti asks ``QuerySendDetails`` before it sends a record in doubt again, answered from
  what the fake accepted (a look-up is not an attempt).
- E-mail: :class:`~tests.fakes.smtp.SmtpFake` (aiosmtpd), through the ``email`` provider;
  the record id is in ``Message-ID``. Not idempotent either.
- Webhook: :class:`~tests.fakes.webhook.WebhookReceiver` (Standard Webhooks signatures
  checked). Idempotent: a receiver drops a second POST with a ``webhook-id`` it accepted
  already (answering 2xx), as the spec asks receivers to.

Every worker incarnation names itself to the providers (its Aliyun AccessKeyId, its EHLO
name, an ``x-chaos-sender`` header), so the ledger knows which process made each send and
whether that process was killed before it could record the outcome.

Outcomes: the attempts of :attr:`Plan.bad` intents are refused for good (Aliyun
``isv.MOBILE_NUMBER_ILLEGAL``, SMTP 550 5.1.1 at DATA, HTTP 400) and those of
:attr:`Plan.flaky` ones always fail temporarily (Aliyun 503 ``ServiceUnavailable``, SMTP 451,
HTTP 503); any other attempt fails temporarily with probability ``temporary`` and, when it
is accepted, is answered ``late_s`` seconds late (past the lease) with probability ``late``.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import threading
import time
from dataclasses import dataclass
from email.parser import BytesHeaderParser
from typing import Any

from aiosmtpd.smtp import SMTP, Envelope, Session

from tests.fakes._server import FakeServer, Received, Reply
from tests.fakes.aliyun import AliyunFake, AliyunTemplate
from tests.fakes.smtp import SmtpFake, SmtpHandler
from tests.fakes.webhook import SECRET, WebhookReceiver

__all__ = [
    "ACCEPTED",
    "ALIYUN_SECRET",
    "DEDUPED",
    "IDEMPOTENT_CHANNELS",
    "PERMANENT",
    "SECRET",
    "SIGN",
    "TEMPLATE",
    "TEMPORARY",
    "TRUNCATED",
    "Attempt",
    "ChaosAliyun",
    "ChaosSmtp",
    "ChaosWebhook",
    "Ledger",
    "Providers",
]

ACCEPTED, DEDUPED, TEMPORARY, PERMANENT = "accepted", "deduped", "temporary", "permanent"
#: A request cut short (its sender was SIGKILLed while writing it): nothing to answer.
TRUNCATED = "truncated"
#: Channels whose provider drops a repeated send of one record (the receiver dedupes).
IDEMPOTENT_CHANNELS = frozenset({"webhook"})
SIGN, TEMPLATE, ALIYUN_SECRET = "noti混沌", "SMS_100001", "chaos-aliyun-secret"
SENDER_HEADER = "x-chaos-sender"


@dataclass(slots=True)
class Attempt:
    """One request a provider received and what it answered."""

    at: float
    channel: str
    record_id: str
    tag: str
    sender: str
    outcome: str
    #: How long the answer was held back (0: answered at once).
    late_s: float = 0.0
    #: A request the fake refused before deciding (bad signature…): a configuration bug.
    refusal: str = ""
    #: When the answer was written to the sender (None: never, the connection was gone).
    answered_at: float | None = None


def truncated(received: Received) -> bool:
    """Whether the request's body is shorter than its Content-Length said."""
    try:
        return len(received.body) < int(received.headers.get("content-length") or 0)
    except ValueError:
        return False


def parse_tag(tag: str) -> tuple[int, int] | None:
    """``c12v3`` → (12, 3)."""
    if not tag.startswith("c") or "v" not in tag:
        return None
    seq, _, version = tag[1:].partition("v")
    try:
        return int(seq), int(version)
    except ValueError:
        return None


class Ledger:
    """Decides each attempt's answer and keeps every attempt (thread-safe)."""

    def __init__(
        self,
        seed: int,
        *,
        bad: frozenset[int],
        flaky: frozenset[int],
        temporary: float = 0.06,
        late: float = 0.01,
        late_s: tuple[float, float] = (6.0, 7.0),
    ) -> None:
        self._rng = random.Random(seed + 7919)
        self._lock = threading.Lock()
        self.bad, self.flaky = bad, flaky
        self.temporary, self.late, self.late_s = temporary, late, late_s
        self.attempts: list[Attempt] = []
        self._accepted: set[str] = set()

    def decide(self, channel: str, record_id: str, tag: str) -> tuple[str, float]:
        """The outcome of this attempt and how late to answer it."""
        parsed = parse_tag(tag)
        seq = parsed[0] if parsed else -1
        with self._lock:
            if channel in IDEMPOTENT_CHANNELS and record_id in self._accepted:
                return DEDUPED, 0.0
            if seq in self.bad:
                return PERMANENT, 0.0
            if seq in self.flaky or self._rng.random() < self.temporary:
                return TEMPORARY, 0.0
            late = self._rng.uniform(*self.late_s) if self._rng.random() < self.late else 0.0
            return ACCEPTED, late

    def note(self, attempt: Attempt) -> Attempt:
        with self._lock:
            self.attempts.append(attempt)
            if attempt.outcome == ACCEPTED:
                self._accepted.add(attempt.record_id)
        return attempt

    def snapshot(self) -> list[Attempt]:
        with self._lock:
            return list(self.attempts)

    def first_accepts(self) -> dict[str, float]:
        """Record id → time of its first accepted send."""
        first: dict[str, float] = {}
        for attempt in self.snapshot():
            if attempt.outcome in (ACCEPTED, DEDUPED) and attempt.record_id not in first:
                first[attempt.record_id] = attempt.at
        return first


class _Answers:
    """Notes when each attempt's answer was written (the request's thread handles it from
    :meth:`FakeServer._next` to :meth:`FakeServer.answered`)."""

    def __init__(self) -> None:
        self._current = threading.local()

    def _noted(self, attempt: Attempt) -> Attempt:
        self._current.attempt = attempt
        return attempt

    def answered(self, received: Received) -> None:
        attempt = getattr(self._current, "attempt", None)
        if attempt is not None:
            attempt.answered_at = time.time()
            self._current.attempt = None


class ChaosAliyun(_Answers, AliyunFake):
    """Aliyun's SendSms, answering as the ledger says. ``senders`` maps an AccessKeyId to
    the worker incarnation that uses it (add one before starting that worker)."""

    def __init__(self, ledger: Ledger) -> None:
        _Answers.__init__(self)
        AliyunFake.__init__(
            self,
            access_keys={},
            signs={SIGN},
            templates={TEMPLATE: AliyunTemplate(("code",), kind="notice")},
        )
        self.ledger = ledger
        self.senders: dict[str, str] = {}

    def add_sender(self, name: str) -> str:
        """Register an AccessKeyId for worker incarnation ``name``; returns it."""
        key = f"LTAIchaos{name}"
        self.access_keys[key] = ALIYUN_SECRET
        self.senders[key] = name
        return key

    def _next(self, received: Received) -> Reply:
        at = time.time()
        params = self.params(received)
        if params.get("Action") == "QuerySendDetails" and not truncated(received):
            # a look-up of a record in doubt (noti asks before it sends again): answered from
            # what was accepted, never counted as a send
            return AliyunFake._next(self, received)
        sender = self.senders.get(params.get("AccessKeyId", ""), "?")
        record_id = params.get("OutId", "")
        try:
            tag = str(json.loads(params.get("TemplateParam", "{}")).get("code", ""))
        except ValueError:
            tag = ""
        if truncated(received):
            self.ledger.note(Attempt(at, "sms", record_id, tag, sender, TRUNCATED))
            return Reply(400, b"", close=True)
        refusal = self.verify(received)
        if refusal is not None:
            self.ledger.note(Attempt(at, "sms", record_id, tag, sender, PERMANENT, refusal=str(refusal.body)))
            return refusal
        outcome, late_s = self.ledger.decide("sms", record_id, tag)
        if outcome == TEMPORARY:
            reply = self._gateway(
                params,
                503,
                "ServiceUnavailable",
                "The request has failed due to a temporary failure of the server.",
            )
        elif outcome == PERMANENT:
            reply = self._business(params, "isv.MOBILE_NUMBER_ILLEGAL", "非法手机号")
        else:
            reply = self.succeed(received)
            body = reply.body if isinstance(reply.body, dict) else {}
            if body.get("Code") != "OK":  # the fake's own flow control or checks refused it
                self.ledger.note(Attempt(at, "sms", record_id, tag, sender, PERMANENT, refusal=str(body)))
                return reply
            if late_s:
                reply = Reply(reply.status, reply.body, reply.headers, hang_s=late_s)
        self._noted(self.ledger.note(Attempt(at, "sms", record_id, tag, sender, outcome, late_s)))
        return reply


class ChaosWebhook(_Answers, WebhookReceiver):
    """A webhook endpoint (every ``/hook/<n>`` path) answering as the ledger says."""

    def __init__(self, ledger: Ledger) -> None:
        _Answers.__init__(self)
        WebhookReceiver.__init__(self, SECRET)
        self.ledger = ledger

    def _next(self, received: Received) -> Reply:
        at = time.time()
        record_id = received.headers.get("webhook-id", "")
        sender = received.headers.get(SENDER_HEADER, "?")
        try:
            tag = str(json.loads(received.body).get("tag", ""))
        except (ValueError, AttributeError):
            tag = ""
        if truncated(received):
            self.ledger.note(Attempt(at, "webhook", record_id, tag, sender, TRUNCATED))
            return Reply(400, b"", close=True)
        refusal = self.verify(received)
        if refusal is not None:
            self.ledger.note(
                Attempt(at, "webhook", record_id, tag, sender, PERMANENT, refusal=str(refusal.body))
            )
            return refusal
        outcome, late_s = self.ledger.decide("webhook", record_id, tag)
        self._noted(self.ledger.note(Attempt(at, "webhook", record_id, tag, sender, outcome, late_s)))
        if outcome == TEMPORARY:
            return Reply(503, {"error": "busy, try again"})
        if outcome == PERMANENT:
            return Reply(400, {"error": "no such hook"})
        return Reply(200, {"ok": True}, hang_s=late_s)


class _ChaosSmtpHandler(SmtpHandler):
    """Takes every message's content, then answers DATA as the ledger says."""

    fake: ChaosSmtp

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        at = time.time()
        content = envelope.original_content or b""
        headers = BytesHeaderParser().parsebytes(content)
        record_id = str(headers.get("Message-ID", "")).strip("<>").partition("@")[0]
        tag = str(headers.get("Subject", "")).removeprefix("chaos ")
        sender = (session.host_name or "?").removesuffix(".chaos.test")
        ledger = self.fake.ledger
        outcome, late_s = ledger.decide("email", record_id, tag)
        attempt = ledger.note(Attempt(at, "email", record_id, tag, sender, outcome, late_s))
        if outcome == TEMPORARY:
            reply = "451 4.3.0 Mailbox busy, try again later"
        elif outcome == PERMANENT:
            reply = "550 5.1.1 Recipient address rejected: user unknown"
        else:
            if late_s:
                await asyncio.sleep(late_s)
            reply = "250 2.0.0 Ok: queued"
        attempt.answered_at = time.time()  # aiosmtpd writes the reply as this returns
        return reply


class ChaosSmtp(SmtpFake):
    """A plain-text SMTP server answering DATA as the ledger says."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        super().__init__(security="none")

    def handler(self) -> Any:
        return _ChaosSmtpHandler(self)


def _quiet_disconnects(fake: FakeServer) -> None:
    """A worker SIGKILLed mid-request leaves its connection broken: not worth a traceback."""
    server = fake._httpd
    report = server.handle_error

    def handle_error(request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            report(request, client_address)

    server.handle_error = handle_error  # type: ignore[method-assign]


class Providers:
    """The three fakes, started and stopped together."""

    def __init__(self, ledger: Ledger, *, sms_rate_per_s: float = 100.0) -> None:
        self.ledger = ledger
        #: The SMS account's rate limit (every vendor has one): what makes a flood a backlog.
        self.sms_rate_per_s = sms_rate_per_s
        self.aliyun = ChaosAliyun(ledger)
        self.webhook = ChaosWebhook(ledger)
        self.smtp = ChaosSmtp(ledger)
        _quiet_disconnects(self.aliyun)
        _quiet_disconnects(self.webhook)

    def __enter__(self) -> Providers:
        self.aliyun.start()
        self.webhook.start()
        self.smtp.start()
        return self

    def __exit__(self, *exc: object) -> None:
        for fake in (self.aliyun, self.webhook, self.smtp):
            try:
                fake.stop()
            except Exception:  # noqa: BLE001 - stopping what may have failed to start
                pass

    def config(self, sender: str) -> str:
        """The ``[providers.*]`` and ``[channels.*]`` of a noti settings file whose sends
        name ``sender`` to the fakes."""
        key = self.aliyun.add_sender(sender)
        retry = 'retry_policy = "exponential:1:4"\nretry_max = 3\n'
        return (
            f'[channels.sms]\nprovider = "aliyun"\n{retry}\n'
            f'[channels.email]\nprovider = "mail"\n{retry}\n'
            f'[channels.webhook]\nprovider = "hook"\n{retry}\n'
            "[providers.aliyun]\n"
            'kind = "aliyun"\n'
            f'access_key_id = "{key}"\n'
            f'access_key_secret = "{ALIYUN_SECRET}"\n'
            f'sign_name = "{SIGN}"\n'
            f'template_code = "{TEMPLATE}"\n'
            'template_params = ["code"]\n'
            'text_param = "code"\n'
            f'endpoint = "{self.aliyun.url}"\n'
            f"rate_limit_per_s = {self.sms_rate_per_s}\n"
            "timeout_s = 15\n\n"
            "[providers.mail]\n"
            'kind = "email"\n'
            'host = "127.0.0.1"\n'
            f"port = {self.smtp.port}\n"
            'security = "none"\n'
            'from_addr = "Noti <noti@chaos.test>"\n'
            f'helo_name = "{sender}.chaos.test"\n'
            "timeout_s = 15\n\n"
            "[providers.hook]\n"
            'kind = "webhook"\n'
            f'secret = "{SECRET}"\n'
            "allow_private = true\n"
            "timeout_s = 15\n"
            f'destinations = ["{self.webhook.url}/"]\n'
            f'headers = {{ "{SENDER_HEADER}" = "{sender}" }}\n\n'
            "# the receiver is on loopback (allow_private): every chaos user is granted it\n"
            '[provider_grants]\n"*" = ["hook"]\n'
        )

    def webhook_url(self, seq: int) -> str:
        return f"{self.webhook.url}/hook/{seq}"
