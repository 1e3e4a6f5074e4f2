"""What the e-mail receipt cases of the hostile-HTTP suite share: the e-mails sent through
``mailses`` (SES) and ``mailgrid`` (SendGrid) before the cases run, and the requests SNS and
SendGrid's Event Webhook would make about them, genuine or tampered.

The SNS messages are signed by the SES fake (:meth:`tests.fakes.ses.SesFake.sns_message`),
its faults set while it signs (:func:`faults`: ``unsigned``, ``bad_signature``,
``signature_version``, ``cert_url``, ``topic_arn``); the SendGrid posts by the SendGrid fake
(:meth:`tests.fakes.sendgrid.SendGridFake.signed_request` and ``.sign``).
"""

from __future__ import annotations

import json
import secrets as random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.conftest import wait_until
from tests.hostile_http.conftest import Deployment

__all__ = [
    "SIG_H",
    "TS_H",
    "Ctx",
    "Post",
    "Sent",
    "arabic_digits",
    "cert",
    "changed",
    "confirmation",
    "deep",
    "event",
    "faults",
    "header",
    "raw",
    "send_all",
    "sendgrid_event",
    "ses_bounce",
    "ses_foreign",
    "sg_at",
    "sg_body",
    "sg_events",
    "sg_foreign",
    "sg_headers",
    "sg_post",
    "sg_tampered",
    "signed",
    "sns",
    "sns_post",
    "unknown_ids",
    "without",
]

#: SendGrid's signature headers.
SIG_H, TS_H = "x-twilio-email-event-webhook-signature", "x-twilio-email-event-webhook-timestamp"

#: The e-mails sent before the cases: name -> (sender, provider, address, how it ends at the
#: vendor). The ``*_target`` ones are what refused and foreign receipts aim at: they stay
#: ``accepted`` whatever else runs.
PLAN: dict[str, tuple[str, str, str, str]] = {
    "ses_target": ("alice", "mailses", "ses-target@example.org", "bounce"),
    "sg_target": ("alice", "mailgrid", "sg-target@example.org", "bounce"),
    "ses_bounce": ("alice", "mailses", "ses-bounce@example.org", "bounce"),
    "ses_complaint": ("bob", "mailses", "ses-complaint@example.org", "complaint"),
    "ses_delivered": ("alice", "mailses", "ses-ok@example.org", "delivery"),
    "sg_bounce": ("bob", "mailgrid", "sg-bounce@example.org", "bounce"),
    "sg_spam": ("alice", "mailgrid", "sg-spam@example.org", "spamreport"),
    "sg_delivered": ("alice", "mailgrid", "sg-ok@example.org", "delivered"),
}


@dataclass(frozen=True)
class Sent:
    """One e-mail sent through a vendor's fake: its record, its vendor id, its address."""

    name: str
    id: str
    msgid: str
    provider: str
    to: str
    user: str


@dataclass(frozen=True)
class Post:
    """A request to ``/v1/receipts/<provider>``; ``body`` given as bytes or, sent without a
    ``Content-Length`` (chunked), as the chunks."""

    provider: str
    body: bytes | tuple[bytes, ...]
    headers: dict[str, Any] = field(default_factory=dict)
    method: str = "POST"

    def send(self, deployment: Deployment, client: httpx.Client) -> httpx.Response:
        content: Any = iter(self.body) if isinstance(self.body, tuple) else self.body
        return deployment.ask(
            client,
            self.method,
            f"/v1/receipts/{self.provider}",
            who=None,
            headers=self.headers,
            content=content,
        )


@dataclass
class Ctx:
    """The deployment, the e-mails sent, and the genuine receipts made of them (made once
    each: posted again, a receipt is the very same request, as a vendor's retry is)."""

    d: Deployment
    sent: dict[str, Sent]
    tw_msgid: str
    genuine: dict[str, list[Post]] = field(default_factory=dict)

    @property
    def ses(self) -> Any:
        return self.d.ses

    @property
    def sendgrid(self) -> Any:
        return self.d.sendgrid

    def prefix(self) -> str:
        """``mailses``' ``sns_url_prefix``: the SES fake's own URL."""
        return str(self.ses.url) + "/"

    def cert(self) -> str:
        """The SES fake's signing certificate's file name (under the prefix)."""
        return str(self.ses.cert_path).lstrip("/")

    def port(self) -> str:
        return str(self.ses.url).rsplit(":", 1)[1]

    def receipts(self, name: str) -> list[Post]:
        """The vendor's genuine receipts of e-mail ``name``, as its fake makes them."""
        if name not in self.genuine:
            one = self.sent[name]
            if one.provider == "mailses":
                events = self.ses.events(one.msgid, self.ses.messages[one.msgid])
                self.genuine[name] = [
                    sns_post(self.ses.sns_message("Notification", {"Message": json.dumps(e)})) for e in events
                ]
            else:
                events = self.sendgrid.events(one.msgid, self.sendgrid.messages[one.msgid])
                headers, body = self.sendgrid.signed_request(events)
                self.genuine[name] = [Post("mailgrid", body, headers)]
        return self.genuine[name]


def send_all(d: Deployment, client: httpx.Client) -> dict[str, Sent]:
    """Send every e-mail of :data:`PLAN` through the API as its user, and wait until each is
    ``accepted`` by its vendor's fake (the worker recorded the vendor's id)."""
    ids = {}
    for name, (who, provider, to, fate) in PLAN.items():
        (d.ses if provider == "mailses" else d.sendgrid).fate(to, fate)
        body = {"type": "email", "to": to, "subject": "Hi", "text": "Hello", "provider": provider}
        answer = d.ask(client, "POST", "/v1/notifications", who=who, json=body)
        assert answer.status_code == 201, answer.text
        ids[name] = answer.json()["id"]
    records: dict[str, dict[str, Any]] = {}

    def accepted() -> bool:
        for name, record_id in ids.items():
            records[name] = d.ask(client, "GET", f"/v1/notifications/{record_id}", who="boss").json()
        return all(r.get("noti_dlv") == "accepted" for r in records.values())

    wait_until(accepted, timeout=30)
    return {
        name: Sent(name, ids[name], str(records[name]["noti_email_msgid"]), provider, to, who)
        for name, (who, provider, to, _) in PLAN.items()
    }


@contextmanager
def faults(fake: Any, **attributes: Any) -> Iterator[None]:
    """``fake``'s attributes set for the block (the fakes are the package's: put back after)."""
    before = {name: getattr(fake, name) for name in attributes}
    for name, value in attributes.items():
        setattr(fake, name, value)
    try:
        yield
    finally:
        for name, value in before.items():
            setattr(fake, name, value)


def ses_bounce(to: Sent | str, *, message_id: str | None = None, record: str | None = None) -> dict[str, Any]:
    """An SES hard bounce of ``to``'s e-mail (its vendor id and record id, unless given)."""
    address = to.to if isinstance(to, Sent) else to
    mail: dict[str, Any] = {"messageId": message_id or (to.msgid if isinstance(to, Sent) else "")}
    tag = record if record is not None else (to.id if isinstance(to, Sent) else None)
    if tag:
        mail["tags"] = {"noti_id": [tag]}
    bounce = {
        "bounceType": "Permanent",
        "bounceSubType": "General",
        "bouncedRecipients": [{"emailAddress": address, "diagnosticCode": "smtp; 550 5.1.1 user unknown"}],
        "timestamp": "2026-01-01T00:00:00.000Z",
    }
    return {"notificationType": "Bounce", "mail": mail, "bounce": bounce}


def sns(
    ctx: Ctx,
    event: Any = None,
    *,
    kind: str = "Notification",
    fields: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
    drop: tuple[str, ...] = (),
    **fault: Any,
) -> dict[str, Any]:
    """An SNS message signed by the SES fake with ``fault`` set (by default the hard bounce of
    ``ses_target``), then ``after`` put in and ``drop`` taken out."""
    if fields is None:
        text = event if isinstance(event, str) else json.dumps(event or ses_bounce(ctx.sent["ses_target"]))
        fields = {"Message": text}
    with faults(ctx.ses, **fault):
        message = ctx.ses.sns_message(kind, fields)
    message.update(after or {})
    return {k: v for k, v in message.items() if k not in drop}


def sns_post(message: Any, provider: str = "mailses") -> Post:
    """``message`` posted as SNS posts (a body of raw bytes as it is)."""
    body = message if isinstance(message, bytes) else json.dumps(message).encode()
    kind = message.get("Type", "") if isinstance(message, dict) else ""
    headers = {"Content-Type": "text/plain; charset=UTF-8", "x-amz-sns-message-type": str(kind)[:40]}
    return Post(provider, body, headers)


def sendgrid_event(
    to: Sent | str, kind: str = "bounce", *, sg_id: Any = None, record: Any = None, **extra: Any
) -> dict[str, Any]:
    """One Event Webhook event about ``to``'s e-mail (its ids, unless given; None leaves one out)."""
    one = to if isinstance(to, Sent) else None
    event: dict[str, Any] = {
        "email": one.to if one else to,
        "timestamp": int(time.time()),
        "event": kind,
        "sg_event_id": random.token_urlsafe(16),
        "sg_message_id": sg_id if sg_id is not None else (f"{one.msgid}.filterdrecv-1" if one else None),
        "noti_id": record if record is not None else (one.id if one else None),
    }
    if kind == "bounce":
        event.update(type="bounce", status="5.1.1", reason="550 5.1.1 user unknown")
    event.update(extra)
    return {k: v for k, v in event.items() if v is not None}


def sg_post(
    ctx: Ctx,
    events: Any = None,
    *,
    body: bytes | None = None,
    timestamp: str | None = None,
    other_key: bool = False,
    headers: Callable[[dict[str, str]], dict[str, str]] | None = None,
    method: str = "POST",
) -> Post:
    """A SendGrid Event Webhook post of ``events`` (by default a bounce of ``sg_target``), or of
    raw ``body``, signed at ``timestamp`` (now) by the account's key (or another's), then its
    headers passed through ``headers``."""
    if body is None:
        chosen = events if events is not None else [sendgrid_event(ctx.sent["sg_target"])]
        body = (json.dumps(chosen, separators=(",", ":")) + "\r\n").encode()
    stamp = timestamp if timestamp is not None else str(int(time.time()))
    signed = {"content-type": "application/json", **ctx.sendgrid.sign(stamp, body, other_key=other_key)}
    return Post("mailgrid", body, headers(signed) if headers else signed, method)


# --- case builders: each returns what makes its request, given the Ctx ---------------------


def cert(url: str, provider: str = "mailses") -> Callable[[Ctx], Post]:
    """A notification signed with ``SigningCertURL`` = ``url`` (``{prefix}``, ``{cert}``, ``{port}``)."""
    return lambda c: sns_post(
        sns(c, cert_url=url.format(prefix=c.prefix(), cert=c.cert(), port=c.port())), provider
    )


def changed(**after: Any) -> Callable[[Ctx], Post]:
    """The genuine-looking notification, ``after`` put in once it is signed."""
    return lambda c: sns_post(sns(c, after=after))


def signed(**fault: Any) -> Callable[[Ctx], Post]:
    """A notification signed with the SES fake's ``fault`` set."""
    return lambda c: sns_post(sns(c, **fault))


def raw(body: bytes, provider: str = "mailses") -> Callable[[Ctx], Post]:
    """``body`` posted as SNS posts, as it is."""
    return lambda c: sns_post(body, provider)


def event(text: Any) -> Callable[[Ctx], Post]:
    """A genuinely signed notification of our topic carrying ``text`` (JSON-able or a string)."""
    return lambda c: sns_post(sns(c, text if isinstance(text, str) else json.dumps(text)))


def deep(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def confirmation(url: str, drop: tuple[str, ...] = (), **fault: Any) -> Callable[[Ctx], Post]:
    """A ``SubscriptionConfirmation`` signed by the SES fake whose ``SubscribeURL`` is ``url``
    (``{prefix}``, ``{port}``, ``{query}``: SNS's own query for our topic)."""

    def build(c: Ctx) -> Post:
        token = random.token_hex(32)
        query = f"Action=ConfirmSubscription&TopicArn={c.ses.topic_arn}&Token={token}"
        fields = {
            "Token": token,
            "Message": f"You have chosen to subscribe to the topic {c.ses.topic_arn}.",
            "SubscribeURL": url.format(prefix=c.prefix(), port=c.port(), query=query),
        }
        return sns_post(sns(c, kind="SubscriptionConfirmation", fields=fields, drop=drop, **fault))

    return build


def sg_events(events: Callable[[Ctx], Any], **kwargs: Any) -> Callable[[Ctx], Post]:
    """A SendGrid post of ``events(ctx)``, signed (``kwargs``: :func:`sg_post`'s)."""
    return lambda c: sg_post(c, events(c), **kwargs)


def sg_body(body: bytes, **kwargs: Any) -> Callable[[Ctx], Post]:
    return lambda c: sg_post(c, body=body, **kwargs)


def sg_headers(change: Callable[[dict[str, str]], dict[str, str]]) -> Callable[[Ctx], Post]:
    return lambda c: sg_post(c, headers=change)


def sg_at(offset_s: int) -> Callable[[Ctx], Post]:
    """Signed right, at ``offset_s`` from now."""
    return lambda c: sg_post(c, timestamp=str(int(time.time()) + offset_s))


def sg_tampered(change: Callable[[bytes], bytes]) -> Callable[[Ctx], Post]:
    """Signed right, then the body changed."""

    def build(c: Ctx) -> Post:
        post = sg_post(c)
        assert isinstance(post.body, bytes)
        return Post(post.provider, change(post.body), post.headers)

    return build


def without(*names: str) -> Callable[[dict[str, str]], dict[str, str]]:
    return lambda h: {k: v for k, v in h.items() if k not in names}


def header(name: str, value: str) -> Callable[[dict[str, str]], dict[str, str]]:
    return lambda h: {**h, name: value}


def unknown_ids(n: int, kind: str = "delivered") -> Callable[[Ctx], Any]:
    return lambda c: [{"event": kind, "sg_message_id": f"u{i}.f"} for i in range(n)]


def arabic_digits(c: Ctx) -> Post:
    """Signed over now in Arabic-Indic digits (``str.isdigit`` takes them), sent as UTF-8."""
    stamp = str(int(time.time())).translate(str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩"))
    post = sg_post(c, timestamp=stamp)
    return Post(post.provider, post.body, {**post.headers, TS_H: stamp.encode()})


def ses_foreign(**kwargs: Any) -> Callable[[Ctx], Post]:
    """A genuine hard bounce through our topic about ``kwargs`` (names in ``ctx.sent``, or
    ``tw_record`` / ``alice_record`` / a literal for ``message_id`` and ``record``)."""

    def build(c: Ctx) -> Post:
        record = _resolve(c, kwargs.get("record"), "id")
        message_id = _resolve(c, kwargs.get("message_id"), "msgid")
        to = c.sent[kwargs["to"]] if "to" in kwargs else "x@example.org"
        return sns_post(sns(c, ses_bounce(to, message_id=message_id, record=record)))

    return build


def sg_foreign(**kwargs: Any) -> Callable[[Ctx], Post]:
    """A signed SendGrid bounce about ``kwargs`` (as :func:`ses_foreign`)."""

    def build(c: Ctx) -> Post:
        record = _resolve(c, kwargs.get("record"), "id")
        message_id = _resolve(c, kwargs.get("message_id"), "msgid")
        to = c.sent[kwargs["to"]] if "to" in kwargs else "x@example.org"
        return sg_post(c, [sendgrid_event(to, sg_id=f"{message_id}.filterdrecv-1" if message_id else None,
                                          record=record)])  # fmt: skip

    return build


def _resolve(c: Ctx, name: str | None, part: str) -> str | None:
    """``part`` (``id`` or ``msgid``) of a sent e-mail or a seeded record; else ``name`` itself."""
    if name is None:
        return None
    if name in c.sent:
        return str(getattr(c.sent[name], part))
    if name == "tw_record":
        return c.d.ids["tw_record"] if part == "id" else c.tw_msgid
    return c.d.ids.get(name, name)
