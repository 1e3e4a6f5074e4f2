"""Point 3 for e-mail (issue 33): SES's receipts through SNS (``/v1/receipts/mailses``) and
SendGrid's Event Webhook (``/v1/receipts/mailgrid``) tried as an attacker on the network would
try them, against the package's real ``noti serve``.

Refused, each with its status and stable code and the database unchanged (the digest): unsigned
or tampered signatures, another SNS topic (another AWS account's), a ``SigningCertURL`` or a
``SubscribeURL`` outside the allowed prefix by every trick (another host or port, ``http://``
for ``https://``, userinfo, ``@``, ``..``, percent-encoding, backslashes, control characters),
stale or future SendGrid timestamps, bodies over the limit (with and without a
``Content-Length``), bodies that are not JSON or not the vendor's shapes, arrays over
``NOTI_RECEIPT_PUSH_MAX``. Signed ones that name nothing of the provider's are answered as the
vendor expects and change nothing. A genuine receipt about another provider's or another
account's message moves no record and suppresses nothing (it is only counted, or kept for a
send that never comes). The genuine ones move their record and suppress its address in the
name of the record's user; posted again, they change nothing.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from noti.channels.email import ses_receipts
from noti.core.keys import Keys
from tests.fakes.ses import TOPIC_ARN
from tests.hostile_http.conftest import BODY_MAX, Deployment, _settle
from tests.hostile_http.email_receipts import (
    SIG_H,
    TS_H,
    Ctx,
    Post,
    arabic_digits,
    cert,
    changed,
    confirmation,
    deep,
    event,
    header,
    raw,
    send_all,
    sendgrid_event,
    ses_bounce,
    ses_foreign,
    sg_at,
    sg_body,
    sg_events,
    sg_foreign,
    sg_headers,
    sg_post,
    sg_tampered,
    signed,
    sns,
    sns_post,
    unknown_ids,
    without,
)
from tests.hostile_http.harness import assert_refused, changes, digest
from tests.tables import by_id

SIGNATURE, MALFORMED, TOO_MANY = (
    "e.noti.receipt.signature",
    "e.noti.receipt.malformed",
    "e.noti.receipt.toomany",
)
TOO_LARGE, CERTIFICATE = "e.noti.http.toolarge", "e.noti.receipt.certificate"
#: The topic ``mailses`` takes (the SES fake's), and the same topic of another AWS account.
TOPIC = TOPIC_ARN
OTHER_ACCOUNT_TOPIC = TOPIC_ARN.replace(":123456789012:", ":210987654321:")


@pytest.fixture(scope="module")
def ctx(deployment: Deployment, client: httpx.Client) -> Ctx:
    """The e-mails sent (``email_receipts.PLAN``), accepted by their fakes, and settled."""
    sent = send_all(deployment, client)
    tw = deployment.ask(client, "GET", "/v1/notifications/{tw_record}", who="boss").json()
    _settle(deployment.redis)
    return Ctx(deployment, sent, str(tw["noti_sms_msgid"]))


Case = tuple[str, Callable[[Ctx], Post], int, str]


def run_refused(ctx: Ctx, client: httpx.Client, build: Callable[[Ctx], Post], status: int, code: str) -> None:
    post = build(ctx)
    with ctx.d.unchanged():
        answer = post.send(ctx.d, client)
    assert_refused(answer, status, code)


OVER = BODY_MAX + 1
MAIL = {"messageId": "m"}
CHUNKS = (b" " * 8192,) * (OVER // 8192 + 1)
SES: list[Case] = [
    # unsigned, or not signed as SNS signs
    ("unsigned", signed(unsigned=True), 403, SIGNATURE),
    ("signature-empty", changed(Signature=""), 403, SIGNATURE),
    ("signature-not-base64", changed(Signature="!!!"), 403, SIGNATURE),
    ("signature-zeros", changed(Signature="A" * 344), 403, SIGNATURE),
    ("signature-a-list", changed(Signature=["x"]), 403, SIGNATURE),
    ("another-key", signed(bad_signature=True), 403, SIGNATURE),
    ("sha1-declared-2", changed(SignatureVersion="2"), 403, SIGNATURE),
    ("version-3", changed(SignatureVersion="3"), 403, SIGNATURE),
    ("version-number", changed(SignatureVersion=1), 403, SIGNATURE),
    ("version-missing", lambda c: sns_post(sns(c, drop=("SignatureVersion",))), 403, SIGNATURE),
    # tampered after signing
    ("message-changed", changed(Message=json.dumps({"notificationType": "Delivery"})), 403, SIGNATURE),
    ("message-id-changed", changed(MessageId="00000000-0000-0000-0000-000000000000"), 403, SIGNATURE),
    ("timestamp-changed", changed(Timestamp="2020-01-01T00:00:00.000Z"), 403, SIGNATURE),
    ("subject-added", changed(Subject="hi"), 403, SIGNATURE),
    # the right signature of a topic that is not ours
    ("topic-of-another-account", signed(topic_arn=OTHER_ACCOUNT_TOPIC), 403, SIGNATURE),
    ("topic-of-another-region", signed(topic_arn=TOPIC.replace("eu-west-1", "us-east-1")), 403, SIGNATURE),
    ("topic-name-longer", signed(topic_arn=TOPIC + "-x"), 403, SIGNATURE),
    ("topic-name-shorter", signed(topic_arn=TOPIC[:-1]), 403, SIGNATURE),
    ("topic-upper-case", signed(topic_arn=TOPIC.upper()), 403, SIGNATURE),
    ("topic-trailing-space", signed(topic_arn=TOPIC + " "), 403, SIGNATURE),
    ("topic-changed-after-signing", changed(TopicArn=OTHER_ACCOUNT_TOPIC), 403, SIGNATURE),
    # SigningCertURL outside the prefix (mailses': http://127.0.0.1:<port>/)
    ("cert-another-host", cert("http://127.0.0.2:{port}/{cert}"), 403, SIGNATURE),
    ("cert-localhost", cert("http://localhost:{port}/{cert}"), 403, SIGNATURE),
    ("cert-another-port", cert("http://127.0.0.1:1/{cert}"), 403, SIGNATURE),
    ("cert-https-for-http", cert("https://127.0.0.1:{port}/{cert}"), 403, SIGNATURE),
    ("cert-http-for-https", cert("http://127.0.0.1:{port}/{cert}", "mailtls"), 403, SIGNATURE),
    ("cert-scheme-upper", cert("HTTP://127.0.0.1:{port}/{cert}"), 403, SIGNATURE),
    ("cert-host-suffix", cert("http://127.0.0.1:{port}.evil.invalid/{cert}"), 403, SIGNATURE),
    ("cert-userinfo", cert("http://evil.invalid@127.0.0.1:{port}/{cert}"), 403, SIGNATURE),
    ("cert-prefix-as-userinfo", cert("http://127.0.0.1:{port}@127.0.0.2:{port}/{cert}"), 403, SIGNATURE),
    ("cert-at-in-path", cert("{prefix}@127.0.0.2/{cert}"), 403, SIGNATURE),
    ("cert-double-slash", cert("{prefix}/127.0.0.2/{cert}"), 403, SIGNATURE),
    ("cert-dot-dot", cert("{prefix}x/../{cert}"), 403, SIGNATURE),
    ("cert-backslash-dots", cert("{prefix}x\\..\\{cert}"), 403, SIGNATURE),
    ("cert-percent-dots", cert("{prefix}%2e%2e/{cert}"), 403, SIGNATURE),
    ("cert-percent-dots-upper", cert("{prefix}%2E%2E/{cert}"), 403, SIGNATURE),
    ("cert-percent-slash", cert("{prefix}x%2f..%2f{cert}"), 403, SIGNATURE),
    ("cert-percent-name", lambda c: cert("{prefix}%53" + c.cert()[1:])(c), 403, SIGNATURE),
    ("cert-percent-port", cert("http://127.0.0.1%3a{port}/{cert}"), 403, SIGNATURE),
    ("cert-query", cert("{prefix}{cert}?x=.pem"), 403, SIGNATURE),
    ("cert-fragment", cert("{prefix}{cert}#.pem"), 403, SIGNATURE),
    ("cert-not-pem", cert("{prefix}cert.txt"), 403, SIGNATURE),
    ("cert-newline", cert("{prefix}a\n.pem"), 403, SIGNATURE),
    ("cert-nul", cert("{prefix}a\x00.pem"), 403, SIGNATURE),
    ("cert-tab", cert("{prefix}a\t.pem"), 403, SIGNATURE),
    ("cert-space", cert("{prefix}a b.pem"), 403, SIGNATURE),
    ("cert-unicode", cert("{prefix}é.pem"), 403, SIGNATURE),
    ("cert-fullwidth-dots", cert("{prefix}x／．．／{cert}"), 403, SIGNATURE),
    ("cert-4000-chars", cert("{prefix}" + "a" * 4000 + ".pem"), 403, SIGNATURE),
    ("cert-file-scheme", cert("file:///etc/ssl/cert.pem"), 403, SIGNATURE),
    ("cert-empty", changed(SigningCertURL=""), 403, SIGNATURE),
    ("cert-a-number", changed(SigningCertURL=5), 403, SIGNATURE),
    ("cert-missing", lambda c: sns_post(sns(c, drop=("SigningCertURL",))), 403, SIGNATURE),
    # under the prefix, but nothing there: SNS is asked to post it again
    ("cert-not-served", cert("{prefix}missing.pem"), 503, CERTIFICATE),
    # not JSON, or not an SNS message
    ("not-json", raw(b"{not json"), 400, MALFORMED),
    ("empty", raw(b""), 400, MALFORMED),
    ("invalid-utf8", raw(b'{"Type": "Notification\xff"}'), 400, MALFORMED),
    ("json-array", raw(b"[]"), 400, MALFORMED),
    ("json-string", raw(b'"Notification"'), 400, MALFORMED),
    ("json-null", raw(b"null"), 400, MALFORMED),
    ("json-number", raw(b"1e999"), 400, MALFORMED),
    ("deep", raw(deep(20_000)), 400, MALFORMED),
    ("huge-array", raw(b"[" + b"{}," * 20_000 + b"{}]"), 400, MALFORMED),
    ("type-missing", lambda c: sns_post(sns(c, drop=("Type",))), 400, MALFORMED),
    ("type-number", changed(Type=1), 400, MALFORMED),
    ("type-unknown", changed(Type="Hello"), 400, MALFORMED),
    ("type-lower-case", changed(Type="notification"), 400, MALFORMED),
    ("message-id-number", changed(MessageId=7), 400, MALFORMED),
    ("message-an-object", changed(Message={"notificationType": "Bounce"}), 400, MALFORMED),
    ("topic-a-list", changed(TopicArn=[TOPIC]), 400, MALFORMED),
    ("timestamp-missing", lambda c: sns_post(sns(c, drop=("Timestamp",))), 400, MALFORMED),
    ("subject-number", changed(Subject=5), 400, MALFORMED),
    ("get", lambda c: Post("mailses", json.dumps(sns(c)).encode(), method="GET"), 400, MALFORMED),
    # genuinely signed, of our topic, but no SES event in it
    ("event-not-json", event("Bounce of ses-target"), 400, MALFORMED),
    ("event-an-array", event([ses_bounce("x@example.org", message_id="m")]), 400, MALFORMED),
    ("event-a-string", event('"Bounce"'), 400, MALFORMED),
    ("event-empty-object", event({}), 400, MALFORMED),
    ("event-no-mail", event({"notificationType": "Bounce", "bounce": {}}), 400, MALFORMED),
    ("event-no-message-id", event({"notificationType": "Bounce", "mail": {}, "bounce": {}}), 400, MALFORMED),
    ("event-message-id-number", event({"notificationType": "Delivery", "mail": {"messageId": 5}}), 400,
     MALFORMED),
    ("event-message-id-129", event({"notificationType": "Delivery", "mail": {"messageId": "m" * 129}}), 400,
     MALFORMED),
    ("event-bounce-without-bounce", event({**ses_bounce("x@example.org", message_id="m"), "bounce": 1}), 400,
     MALFORMED),
    ("event-complaint-without-complaint", event({"notificationType": "Complaint", "mail": MAIL}), 400,
     MALFORMED),
    ("event-delivery-without-delivery", event({"notificationType": "Delivery", "mail": MAIL}), 400,
     MALFORMED),
    ("event-deep", event(deep(5_000).decode()), 400, MALFORMED),
    # over the body limit, announced or streamed
    ("over-the-limit", raw(b"{" + b" " * OVER + b"}"), 413, TOO_LARGE),
    ("over-the-limit-signed", lambda c: sns_post(sns(c, after={"Pad": "a" * OVER})), 413, TOO_LARGE),
    ("over-the-limit-chunked", lambda c: Post("mailses", CHUNKS), 413, TOO_LARGE),
    # another vendor's post at SES's door, and SES's at SendGrid's
    ("sendgrid-post-at-ses", lambda c: Post("mailses", sg_post(c).body, sg_post(c).headers), 400, MALFORMED),
    ("ses-message-at-sendgrid", lambda c: sns_post(sns(c), "mailgrid"), 403, SIGNATURE),
]  # fmt: skip


@by_id("build, status, code", SES)
def test_an_sns_message_that_is_not_ours_is_refused(
    ctx: Ctx, client: httpx.Client, build: Callable[[Ctx], Post], status: int, code: str
) -> None:
    run_refused(ctx, client, build, status, code)


CONFIRMATIONS: list[Case] = [
    ("another-host", confirmation("http://127.0.0.2:{port}/?{query}"), 403, SIGNATURE),
    ("localhost", confirmation("http://localhost:{port}/?{query}"), 403, SIGNATURE),
    ("another-port", confirmation("http://127.0.0.1:1/?{query}"), 403, SIGNATURE),
    ("https-for-http", confirmation("https://127.0.0.1:{port}/?{query}"), 403, SIGNATURE),
    ("userinfo", confirmation("http://evil.invalid@127.0.0.1:{port}/?{query}"), 403, SIGNATURE),
    ("prefix-as-userinfo", confirmation("http://127.0.0.1:{port}@127.0.0.2:{port}/?{query}"), 403, SIGNATURE),
    ("at-in-path", confirmation("{prefix}@127.0.0.2/?{query}"), 403, SIGNATURE),
    ("dot-dot", confirmation("{prefix}x/../?{query}"), 403, SIGNATURE),
    ("percent-dots", confirmation("{prefix}%2e%2e/?{query}"), 403, SIGNATURE),
    ("double-slash", confirmation("{prefix}/127.0.0.2/?{query}"), 403, SIGNATURE),
    ("fragment", confirmation("{prefix}?{query}#x"), 403, SIGNATURE),
    ("space-in-query", confirmation("{prefix}?{query} x"), 403, SIGNATURE),
    ("newline-in-query", confirmation("{prefix}?{query}\nHost: evil"), 403, SIGNATURE),
    ("backslash-in-query", confirmation("{prefix}?{query}\\x"), 403, SIGNATURE),
    ("unsigned", confirmation("{prefix}?{query}", unsigned=True), 403, SIGNATURE),
    ("another-key", confirmation("{prefix}?{query}", bad_signature=True), 403, SIGNATURE),
    ("topic-of-another-account", confirmation("{prefix}?{query}", topic_arn=OTHER_ACCOUNT_TOPIC), 403,
     SIGNATURE),
    ("cert-on-another-host", confirmation("{prefix}?{query}", cert_url="http://127.0.0.2:1/c.pem"), 403,
     SIGNATURE),
    ("no-token", confirmation("{prefix}?{query}", drop=("Token",)), 400, MALFORMED),
]  # fmt: skip


@by_id("build, status, code", CONFIRMATIONS)
def test_a_subscription_confirmation_that_is_not_ours_is_refused_and_nothing_is_fetched(
    ctx: Ctx, client: httpx.Client, build: Callable[[Ctx], Post], status: int, code: str
) -> None:
    asked = len([r for r in ctx.ses.requests if r.method == "GET" and r.path == "/"])
    confirmed = list(ctx.ses.confirmed)
    run_refused(ctx, client, build, status, code)
    assert len([r for r in ctx.ses.requests if r.method == "GET" and r.path == "/"]) == asked
    assert ctx.ses.confirmed == confirmed


SENDGRID: list[Case] = [
    ("unsigned", sg_headers(without(SIG_H, TS_H)), 403, SIGNATURE),
    ("signature-only", sg_headers(without(TS_H)), 403, SIGNATURE),
    ("timestamp-only", sg_headers(without(SIG_H)), 403, SIGNATURE),
    ("signature-empty", sg_headers(header(SIG_H, "")), 403, SIGNATURE),
    ("signature-not-base64", sg_headers(header(SIG_H, "%%%")), 403, SIGNATURE),
    ("signature-not-der", sg_headers(header(SIG_H, "AAAA")), 403, SIGNATURE),
    ("another-accounts-key", lambda c: sg_post(c, other_key=True), 403, SIGNATURE),
    ("timestamp-moved-by-one", sg_headers(lambda h: {**h, TS_H: str(int(h[TS_H]) + 1)}), 403, SIGNATURE),
    ("bounce-made-delivered", sg_tampered(lambda b: b.replace(b'"bounce"', b'"delivered"')), 403, SIGNATURE),
    ("record-swapped", sg_tampered(lambda b: b.replace(b'"noti_id":"', b'"noti_id":"x')), 403, SIGNATURE),
    ("byte-added", sg_tampered(lambda b: b + b" "), 403, SIGNATURE),
    ("crlf-dropped", sg_tampered(lambda b: b[:-2]), 403, SIGNATURE),
    # the time: signed right, but not now
    ("stale-301s", sg_at(-301), 403, SIGNATURE),
    ("stale-an-hour", sg_at(-3600), 403, SIGNATURE),
    # clear of the 300 s edge: a post dated 301 s ahead is 300 s ahead a second later (the case
    # waits for the worker to be idle between building and sending; under load that took > 1 s)
    ("future-330s", sg_at(330), 403, SIGNATURE),
    ("future-a-day", sg_at(86_400), 403, SIGNATURE),
    ("timestamp-zero", lambda c: sg_post(c, timestamp="0"), 403, SIGNATURE),
    ("timestamp-of-2020", lambda c: sg_post(c, timestamp="1588788367"), 403, SIGNATURE),
    ("timestamp-negative", lambda c: sg_post(c, timestamp="-5"), 403, SIGNATURE),
    ("timestamp-exponent", lambda c: sg_post(c, timestamp="1.7e9"), 403, SIGNATURE),
    ("timestamp-inner-space", lambda c: sg_post(c, timestamp=str(int(time.time()))[:5] + " 0"), 403,
     SIGNATURE),
    ("timestamp-13-digits", lambda c: sg_post(c, timestamp=f"0{int(time.time())}0"), 403, SIGNATURE),
    ("timestamp-arabic-digits", lambda c: arabic_digits(c), 403, SIGNATURE),
    # signed right, but not an array of event objects
    ("an-object", sg_events(lambda c: {"event": "bounce", "sg_message_id": c.sent["sg_target"].msgid}), 400,
     MALFORMED),
    ("a-string", sg_events(lambda c: "bounce"), 400, MALFORMED),
    ("null", sg_body(b"null"), 400, MALFORMED),
    ("a-number", sg_body(b"1e999"), 400, MALFORMED),
    ("not-json", sg_body(b"event=bounce"), 400, MALFORMED),
    ("empty", sg_body(b""), 400, MALFORMED),
    ("invalid-utf8", sg_body(b'[{"event": "bounce\xff"}]'), 400, MALFORMED),
    ("array-of-strings", sg_events(lambda c: ["bounce"]), 400, MALFORMED),
    ("array-of-arrays", sg_events(lambda c: [[sendgrid_event(c.sent["sg_target"])]]), 400, MALFORMED),
    ("object-then-number", sg_events(lambda c: [sendgrid_event(c.sent["sg_target"]), 1]), 400, MALFORMED),
    ("deep", sg_body(deep(20_000)), 400, MALFORMED),
    ("20000-numbers", sg_body(b"[" + b"1," * 20_000 + b"1]"), 400, MALFORMED),
    ("get", lambda c: sg_post(c, method="GET"), 400, MALFORMED),
    # more reports than NOTI_RECEIPT_PUSH_MAX (1,000): refused whole
    ("1001-reports", sg_events(unknown_ids(1001)), 400, TOO_MANY),
    ("over-the-limit", sg_body(b"[" + b" " * OVER + b"]"), 413, TOO_LARGE),
    ("over-the-limit-chunked", lambda c: Post("mailgrid", CHUNKS, sg_post(c).headers), 413, TOO_LARGE),
]  # fmt: skip


@by_id("build, status, code", SENDGRID)
def test_a_sendgrid_post_that_is_not_ours_is_refused(
    ctx: Ctx, client: httpx.Client, build: Callable[[Ctx], Post], status: int, code: str
) -> None:
    run_refused(ctx, client, build, status, code)


#: Authentic, but about nothing the provider sent: the vendor gets its 2xx (else it posts again
#: for hours), and nothing changes.
NOTHING: list[tuple[str, Callable[[Ctx], Post]]] = [
    ("sg-empty-array", sg_events(lambda c: [])),
    ("sg-opens-and-clicks", sg_events(lambda c: [sendgrid_event(c.sent["sg_target"], k)
                                                 for k in ("open", "click")])),
    ("sg-1000-opens", sg_events(unknown_ids(1000, "open"))),
    ("sg-bounce-naming-only-a-record", sg_events(lambda c: [sendgrid_event("x@example.org",
                                                                           record=c.sent["sg_target"].id)])),
    ("sg-message-id-a-number", sg_events(lambda c: [sendgrid_event(c.sent["sg_target"], sg_id=5)])),
    ("sg-message-id-empty", sg_events(lambda c: [sendgrid_event(c.sent["sg_target"], sg_id="")])),
    ("sg-message-id-129", sg_events(lambda c: [sendgrid_event(c.sent["sg_target"], sg_id="m" * 129)])),
    ("sg-event-not-a-string", sg_events(lambda c: [sendgrid_event(c.sent["sg_target"], event=["bounce"])])),
    ("ses-open", event({"eventType": "Open", "mail": {"messageId": "m"}, "open": {}})),
    ("ses-subscription-succeeded", event({"notificationType": "AmazonSnsSubscriptionSucceeded",
                                          "message": "You have successfully subscribed"})),
    ("ses-event-publishing-validated", event(ses_receipts.SETUP_TEXT)),
    ("ses-unsubscribe-confirmation", lambda c: sns_post(sns(c, kind="UnsubscribeConfirmation", fields={
        "Token": "t" * 64, "Message": "unsubscribed", "SubscribeURL": c.prefix() + "?Action=x"}))),
]  # fmt: skip


@by_id("build", NOTHING)
def test_an_authentic_receipt_about_nothing_of_ours_is_answered_and_changes_nothing(
    ctx: Ctx, client: httpx.Client, build: Callable[[Ctx], Post]
) -> None:
    post = build(ctx)
    with ctx.d.unchanged():
        answer = post.send(ctx.d, client)
    assert answer.status_code == 200, answer.text


#: Authentic receipts, each naming a record or a message the provider did not send (or sent
#: under another vendor id: another account's message): no record moves, nothing is
#: suppressed; a report naming a record is counted as refused (``noti:metrics``), one naming
#: only an unknown vendor id is kept for a send that never comes (``noti:dlv:early``).
FOREIGN: list[tuple[str, Callable[[Ctx], Post]]] = [
    ("ses-about-sendgrids-record", ses_foreign(record="sg_target", message_id="sg_target", to="sg_target")),
    ("ses-about-twilios-record", ses_foreign(record="tw_record", message_id="tw_record")),
    ("ses-about-an-unsent-record", ses_foreign(record="alice_record", message_id="unsent-1")),
    ("ses-another-accounts-message", ses_foreign(record="ses_target", message_id="0100-other-account",
                                                 to="ses_target")),
    ("ses-another-records-message", ses_foreign(record="ses_complaint", message_id="ses_target")),
    ("ses-unknown-message", ses_foreign(message_id="0100-nobody-sent-it")),
    ("ses-sendgrids-message-no-record", ses_foreign(message_id="sg_target")),
    ("sg-about-ses-record", sg_foreign(record="ses_target", message_id="ses_target", to="ses_target")),
    ("sg-about-twilios-record", sg_foreign(record="tw_record", message_id="tw_record")),
    ("sg-about-an-unsent-record", sg_foreign(record="bob_record", message_id="unsent-2")),
    ("sg-another-accounts-message", sg_foreign(record="sg_target", message_id="other-acct", to="sg_target")),
    ("sg-another-records-message", sg_foreign(record="sg_bounce", message_id="sg_target")),
    ("sg-ses-message-no-record", sg_foreign(message_id="ses_target")),
]  # fmt: skip
#: What a foreign receipt may write (see FOREIGN).
COUNTED = {Keys().metrics, Keys().early_receipts, Keys().early_receipt_age}


def deliveries(ctx: Ctx, client: httpx.Client) -> dict[str, Any]:
    """Every seeded record's delivery state, read back as the root administrator."""
    names = {
        **{n: s.id for n, s in ctx.sent.items()},
        **{n: ctx.d.ids[n] for n in ("tw_record", "alice_record")},
    }
    return {
        name: ctx.d.ask(client, "GET", f"/v1/notifications/{rid}", who="boss").json().get("noti_dlv")
        for name, rid in names.items()
    }


def suppressed(ctx: Ctx, client: httpx.Client, who: str = "boss") -> dict[str, dict[str, Any]]:
    answer = ctx.d.ask(client, "GET", "/v1/suppressions?channel=email", who=who)
    assert answer.status_code == 200, answer.text
    return {e["target"]: e for e in answer.json()["suppressions"]}


@by_id("build", FOREIGN)
def test_an_authentic_receipt_about_another_providers_or_accounts_message_moves_nothing(
    ctx: Ctx, client: httpx.Client, build: Callable[[Ctx], Post]
) -> None:
    states, listed = deliveries(ctx, client), suppressed(ctx, client)
    before = digest(ctx.d.redis)
    answer = build(ctx).send(ctx.d, client)
    assert answer.status_code == 200, answer.text  # authentic: the vendor is not asked again
    moved = changes(before, digest(ctx.d.redis))
    assert set(moved) <= COUNTED, moved
    assert deliveries(ctx, client) == states and suppressed(ctx, client) == listed


# --- the genuine ones ----------------------------------------------------------------------------

#: (e-mail, its delivery state after its vendor's receipts, why its address is suppressed)
GENUINE = [
    ("ses_bounce", "undelivered", "bounce"),
    ("ses_complaint", "delivered", "complaint"),  # delivered, then the complaint
    ("ses_delivered", "delivered", None),
    ("sg_bounce", "undelivered", "bounce"),
    ("sg_spam", "delivered", "complaint"),  # delivered, then the spam report
    ("sg_delivered", "delivered", None),
]


@pytest.fixture
def receipted(ctx: Ctx, client: httpx.Client) -> Iterator[Callable[[str], list[httpx.Response]]]:
    """Post e-mail ``name``'s genuine receipts (again, when they were: the vendor's retry)."""

    def post(name: str) -> list[httpx.Response]:
        return [p.send(ctx.d, client) for p in ctx.receipts(name)]

    yield post
    _settle(ctx.d.redis)


@pytest.mark.parametrize(("name", "state", "reason"), GENUINE, ids=[g[0] for g in GENUINE])
def test_a_genuine_receipt_moves_its_record_and_suppresses_its_address_once(
    ctx: Ctx, client: httpx.Client, receipted: Any, name: str, state: str, reason: str | None
) -> None:
    sent = ctx.sent[name]
    # when the vendor posts its receipts: answered 200, the record moved, the address suppressed
    assert [a.status_code for a in receipted(name)] == [200] * len(ctx.receipts(name))
    assert deliveries(ctx, client)[name] == state
    entry = suppressed(ctx, client).get(sent.to)
    if reason is None:
        assert entry is None
    else:
        assert entry is not None, sent.to
        assert (entry["reason"], entry["record"], entry["user"], entry["provider"]) == (
            reason, sent.id, sent.user, sent.provider,
        )  # fmt: skip
    # then posted again (a vendor's retry, a replay): answered, and nothing but counters moves
    before = digest(ctx.d.redis)
    assert [a.status_code for a in receipted(name)] == [200] * len(ctx.receipts(name))
    assert set(changes(before, digest(ctx.d.redis))) <= {Keys().metrics}


def test_a_genuine_subscription_confirmation_is_confirmed_and_changes_nothing(
    ctx: Ctx, client: httpx.Client
) -> None:
    confirmed = len(ctx.ses.confirmed)
    post = confirmation("{prefix}?{query}")(ctx)
    assert isinstance(post.body, bytes)
    token = json.loads(post.body)["Token"]
    for _ in range(2):  # SNS's, and a replay of it: confirming twice is harmless
        with ctx.d.unchanged():
            answer = post.send(ctx.d, client)
        assert answer.status_code == 200, answer.text
    assert ctx.ses.confirmed[confirmed:] == [token, token]
    # its signature covers the SubscribeURL: pointed elsewhere after signing, it is refused
    moved = json.loads(post.body)
    moved["SubscribeURL"] = moved["SubscribeURL"].replace(ctx.prefix(), ctx.prefix() + "x/")
    with ctx.d.unchanged():
        answer = sns_post(moved).send(ctx.d, client)
    assert_refused(answer, 403, SIGNATURE)


def test_what_receipts_suppress_is_seen_by_its_user_alone_and_lifted_by_root_alone(
    ctx: Ctx, client: httpx.Client, receipted: Any
) -> None:
    # given the vendors' receipts taken (again, when the cases above took them: idempotent)
    for name, _, reason in GENUINE:
        if reason:
            receipted(name)
    caused = {name: ctx.sent[name] for name, _, reason in GENUINE if reason}
    # then each user sees the addresses her e-mails' receipts suppressed, and no other user's
    for who in ("alice", "bob", "carol"):
        shown = suppressed(ctx, client, who)
        assert {s.to for s in caused.values() if s.user == who} <= set(shown)
        assert {e["user"] for e in shown.values()} <= {who}, shown
    assert {s.to for s in caused.values()} <= set(suppressed(ctx, client, "ops"))
    # and no plain user lifts one, hers or another's, nor learns by asking which exist
    for who, target in (("alice", "ses-bounce@example.org"), ("alice", "sg-bounce@example.org"),
                        ("bob", "sg-spam@example.org"), ("bob", "never@example.org")):  # fmt: skip
        with ctx.d.unchanged():
            answer = ctx.d.ask(client, "DELETE", f"/v1/suppressions/email/{target}", who=who)
        assert_refused(answer, 403, "e.cmd.noti.suppress.nopvg")
