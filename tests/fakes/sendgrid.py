"""A fake SendGrid v3 Mail Send API and its signed Event Webhook.

**Mail Send** (``POST /v3/mail/send``, JSON) checks what SendGrid checks, in its order:

=============================================  =====  ===================================================
the request                                    HTTP   answer
=============================================  =====  ===================================================
another path or method                         404    ``{"errors": [{"message": "not found"}]}``
no ``Authorization: Bearer <key>``, or a key   401    "The provided authorization grant is invalid,
the fake does not know                                expired, or revoked"
a key without the ``mail.send`` scope          403    "access forbidden"
a body over :attr:`SendGridFake.max_body`      413    (SendGrid: 30 MB)
a body that is not JSON, no personalizations,  400    ``{"errors": [{"message", "field", "help"}]}``
no ``to``, an address that is not one, no            naming each field (``personalizations.0.to.0.email``
subject, no content, no from; ``headers`` (of        …)
the message or a personalization) not an
object of strings, or naming a header SendGrid
reserves (x-sg-id, x-sg-eid, received,
dkim-signature, Content-Type,
Content-Transfer-Encoding, To, From, Subject,
Reply-To, CC, BCC: any case)
a from address no Sender Identity verifies     403    "The from address does not match a verified
                                                      Sender Identity…" (field ``from``)
=============================================  =====  ===================================================

An accepted message is answered **202** with an empty body and the ``X-Message-Id`` header.
:func:`error_reply` makes what a test scripts: 429 with ``X-RateLimit-Limit``,
``X-RateLimit-Remaining: 0`` and ``X-RateLimit-Reset`` (epoch seconds), 500, 503. SendGrid keeps
no idempotency key: the same request twice sends twice (:attr:`SendGridFake.messages`).

**Event Webhook.** Each accepted message settles (by default at once) as its recipient's fate
says (:meth:`SendGridFake.fate`: ``delivered`` by default; ``bounce``, ``blocked`` (a bounce of
type ``blocked``), ``dropped`` (reason "Bounced Address"), ``deferred`` (deferred, then
delivered), ``spamreport`` (delivered, then a spam report)); with
:attr:`SendGridFake.receipt_url` set, the events settled together are POSTed there as one JSON
array, each with ``sg_message_id`` = ``<X-Message-Id>.<filter suffix>`` and the message's
``custom_args`` at its top level, as SendGrid posts them; signed (ECDSA P-256, SHA-256) over the
timestamp's digits followed by the raw body, the signature base64 DER in
``X-Twilio-Email-Event-Webhook-Signature`` and the timestamp in
``X-Twilio-Email-Event-Webhook-Timestamp``. :attr:`SendGridFake.public_key` is the
verification key as SendGrid's console shows it (base64 of the DER public key). Faults:
``bad_signature`` (another key), ``unsigned`` (no signature header), ``timestamp_offset_s``
(a signature dated that far from now).
"""

from __future__ import annotations

import base64
import json
import re
import secrets
import time
import uuid
from functools import cache
from typing import Any

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from tests.fakes._mail import MailApiFake
from tests.fakes._server import Received, Reply

__all__ = ["API_KEY", "FROM", "SendGridFake", "error_reply", "event_signature", "sendgrid_options"]

API_KEY = "SG." + "a" * 22 + "." + "b" * 43
READ_ONLY_KEY = "SG." + "c" * 22 + "." + "d" * 43
FROM = "noti@example.com"
PATH = "/v3/mail/send"
HELP = "http://sendgrid.com/docs/API_Reference/Web_API_v3/Mail/errors.html"
_ADDRESS = re.compile(r"^[^@\s<>]+@[^@\s<>]+\.[A-Za-z]{2,}$")
#: The headers Mail Send's ``headers`` may not set (SendGrid's reference of the field).
RESERVED_HEADERS = frozenset(
    h.lower()
    for h in (
        "x-sg-id",
        "x-sg-eid",
        "received",
        "dkim-signature",
        "Content-Type",
        "Content-Transfer-Encoding",
        "To",
        "From",
        "Subject",
        "Reply-To",
        "CC",
        "BCC",
    )
)


def error_reply(
    status: int, message: str, field: str | None = None, *, headers: dict[str, str] | None = None
) -> Reply:
    """SendGrid's error answer ``{"errors": [{"message", "field", "help"}]}``."""
    return Reply(status, {"errors": [{"message": message, "field": field, "help": None}]}, headers or {})


def sendgrid_options(fake: SendGridFake, **changes: Any) -> dict[str, Any]:
    """A ``sendgrid`` provider's options that send through ``fake``'s account (from its
    verified Sender Identity) and verify its signed Event Webhook."""
    return {
        "kind": "sendgrid",
        "api_key": API_KEY,
        "from_addr": f"Noti <{FROM}>",
        "base_url": fake.url,
        "webhook_public_key": fake.public_key,
        "timeout_s": 1,
        **changes,
    }


def rate_limited(reset_in_s: int = 1) -> Reply:
    """429 as SendGrid answers it, its window ending ``reset_in_s`` from now."""
    return error_reply(
        429,
        "too many requests",
        headers={
            "X-RateLimit-Limit": "600",
            "X-RateLimit-Remaining": "0",
            "X-RateLimit-Reset": str(int(time.time()) + reset_in_s),
        },
    )


@cache
def _key_pair(label: str) -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def public_key_text(key: ec.EllipticCurvePrivateKey) -> str:
    """The verification key as SendGrid's console shows it: base64 of the DER public key."""
    der = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return base64.b64encode(der).decode()


def event_signature(key: ec.EllipticCurvePrivateKey, timestamp: str, payload: bytes) -> str:
    return base64.b64encode(key.sign(timestamp.encode() + payload, ec.ECDSA(hashes.SHA256()))).decode()


class SendGridFake(MailApiFake):
    """One SendGrid account whose Sender Identities are ``verified`` (addresses or domains)."""

    FATES = ("delivered", "bounce", "blocked", "dropped", "deferred", "spamreport")

    def __init__(self, *, verified: tuple[str, ...] = (FROM,)) -> None:
        super().__init__()
        self.api_keys = {API_KEY: True, READ_ONLY_KEY: False}  # key -> has mail.send
        self.verified = set(verified)
        self._key = _key_pair("events")
        self._other_key = _key_pair("other")
        self.public_key = public_key_text(self._key)
        self.reset()

    def reset(self) -> None:
        super().reset()
        self.max_body = 30 * 1024 * 1024
        self.timestamp_offset_s = 0

    # --- Mail Send --------------------------------------------------------------------------

    def verify(self, received: Received) -> Reply | None:
        if received.method != "POST" or received.path != PATH:
            return error_reply(404, "not found")
        scheme, _, key = received.headers.get("authorization", "").partition(" ")
        if scheme != "Bearer" or key not in self.api_keys:
            return error_reply(401, "The provided authorization grant is invalid, expired, or revoked")
        if not self.api_keys[key]:
            return error_reply(403, "access forbidden")
        if len(received.body) > self.max_body:
            return error_reply(413, "Payload Too Large")
        body = received.json_object()
        return error_reply(400, "Bad Request", None) if body is None else self._check(body)

    def _check(self, body: dict[str, Any]) -> Reply | None:
        errors: list[dict[str, Any]] = []

        def refuse(message: str, field: str) -> None:
            errors.append({"message": message, "field": field, "help": f"{HELP}#message.{field}"})

        def check_headers(headers: object, field: str) -> None:
            if headers is None:
                return
            if not isinstance(headers, dict) or not all(
                isinstance(k, str) and k and isinstance(v, str) for k, v in headers.items()
            ):
                refuse("The headers parameter must be a collection of key/value pairs, both strings.", field)
                return
            reserved = sorted(k for k in headers if k.lower() in RESERVED_HEADERS)
            if reserved:
                refuse(f"These headers are reserved and cannot be set: {', '.join(reserved)}.", field)

        check_headers(body.get("headers"), "headers")
        people = body.get("personalizations")
        if not isinstance(people, list) or not people:
            refuse(
                "The personalizations field is required and must have at least one personalization.",
                "personalizations",
            )
        else:
            for n, person in enumerate(people):
                if isinstance(person, dict):
                    check_headers(person.get("headers"), f"personalizations.{n}.headers")
                to = person.get("to") if isinstance(person, dict) else None
                if not isinstance(to, list) or not to:
                    refuse(
                        "The to array is required for all personalization objects", f"personalizations.{n}.to"
                    )
                    continue
                for m, entry in enumerate(to):
                    email = entry.get("email") if isinstance(entry, dict) else None
                    if not isinstance(email, str) or not _ADDRESS.match(email):
                        refuse("Does not contain a valid address.", f"personalizations.{n}.to.{m}.email")
        sender = body.get("from")
        email = sender.get("email") if isinstance(sender, dict) else None
        if not isinstance(email, str) or not _ADDRESS.match(email):
            refuse("The from object must be provided for every email send.", "from")
        subject = body.get("subject")
        if not isinstance(subject, str) or not subject:
            refuse("The subject is required.", "subject")
        content = body.get("content")
        if (
            not isinstance(content, list)
            or not content
            or not all(
                isinstance(c, dict) and isinstance(c.get("value"), str) and c.get("value") for c in content
            )
        ):
            refuse("Unless a valid template_id is provided, the content parameter is required.", "content")
        if errors:
            return Reply(400, {"errors": errors})
        assert isinstance(email, str)
        if email not in self.verified and email.rpartition("@")[2] not in self.verified:
            return error_reply(
                403,
                "The from address does not match a verified Sender Identity. Mail cannot be sent "
                "until this error is resolved.",
                "from",
            )
        return None

    def succeed(self, received: Received) -> Reply:
        message_id = base64.urlsafe_b64encode(secrets.token_bytes(16)).decode().rstrip("=")
        self.accept(message_id, received.json())
        return Reply(202, b"", {"X-Message-Id": message_id})

    def headers_of(self, body: dict[str, Any]) -> dict[str, str]:
        """The message's ``headers``, with the first personalization's over them (SendGrid's
        order: a personalization's field wins)."""
        person = body["personalizations"][0]
        return {**(body.get("headers") or {}), **(person.get("headers") or {})}

    # --- Event Webhook ----------------------------------------------------------------------

    def settle(self, *ids: str) -> None:
        """Post the events of these messages (every one not settled yet when none are named)
        in one signed request."""
        events = [e for m, body in self.to_settle(ids) for e in self.events(m, body)]
        if events and self.receipt_url is not None:
            self.post_events(events)

    def events(self, message_id: str, body: dict[str, Any]) -> list[dict[str, Any]]:
        """The events of one message, by its recipient's fate."""
        person = body["personalizations"][0]
        email = person["to"][0]["email"]
        extra = {**(body.get("custom_args") or {}), **(person.get("custom_args") or {})}
        now = int(time.time())

        def event(kind: str, **fields: Any) -> dict[str, Any]:
            return {
                "email": email,
                "timestamp": now,
                "smtp-id": f"<{message_id}@ismtpd0001p1iad2.sendgrid.net>",
                "event": kind,
                "category": ["noti"],
                "sg_event_id": base64.urlsafe_b64encode(secrets.token_bytes(16)).decode().rstrip("="),
                "sg_message_id": f"{message_id}.filterdrecv-p3iad2-{secrets.token_hex(4)}-{len(email)}-0",
                **extra,
                **fields,
            }

        delivered = event("delivered", response="250 OK", ip="168.1.1.1", tls=1)
        kind = self.fate_of(email)
        if kind == "delivered":
            return [event("processed"), delivered]
        if kind == "deferred":
            return [
                event("processed"),
                event("deferred", response="400 try again later", attempt="1"),
                delivered,
            ]
        if kind == "spamreport":
            return [event("processed"), delivered, event("spamreport")]
        if kind == "dropped":
            return [event("dropped", reason="Bounced Address", status="5.0.0")]
        blocked = kind == "blocked"
        return [
            event("processed"),
            event(
                "bounce",
                type="blocked" if blocked else "bounce",
                status="5.0.0" if blocked else "5.1.1",
                reason="550 5.7.1 blocked by the receiving server's policy"
                if blocked
                else "550 5.1.1 The email account that you tried to reach does not exist.",
                bounce_classification="Reputation" if blocked else "Invalid Address",
            ),
        ]

    def signed_request(self, events: list[dict[str, Any]]) -> tuple[dict[str, str], bytes]:
        """The headers and body SendGrid posts for ``events`` (signed as the faults say)."""
        body = (json.dumps(events, separators=(",", ":")) + "\r\n").encode()
        timestamp = str(int(time.time()) + self.timestamp_offset_s)
        headers = {"content-type": "application/json", "user-agent": "SendGrid Event API"}
        if not self.unsigned:
            key = self._other_key if self.bad_signature else self._key
            headers["x-twilio-email-event-webhook-signature"] = event_signature(key, timestamp, body)
            headers["x-twilio-email-event-webhook-timestamp"] = timestamp
        return headers, body

    def sign(self, timestamp: str, body: bytes, *, other_key: bool = False) -> dict[str, str]:
        """The Event Webhook's signature headers of ``body`` at ``timestamp`` (any text: a
        verifier's tests sign what SendGrid never would), by this account's key or another's."""
        key = self._other_key if other_key else self._key
        return {
            "x-twilio-email-event-webhook-signature": event_signature(key, timestamp, body),
            "x-twilio-email-event-webhook-timestamp": timestamp,
        }

    def post_events(self, events: list[dict[str, Any]]) -> None:
        assert self.receipt_url is not None, "set receipt_url first"
        headers, body = self.signed_request(events)
        self.pusher.push([(self.receipt_url, headers, body)])


def new_message_id() -> str:
    """An id of the form ``X-Message-Id`` has (for tests that build events)."""
    return str(uuid.uuid4()).replace("-", "")[:22]
