"""Forged and malformed delivery receipts on ``/v1/receipts/<provider>`` (no API token: the
vendor's signature or key): unsigned, wrongly signed, signed for another URL, body or record,
malformed, or for a provider that takes none. Each is refused with its status and code and
changes nothing: the seeded Twilio record (delivered by the fake's real, signed callback, so
the door works) keeps its state, and no receipt is kept.

Aliyun authenticates a push by its receipt key alone (in the query, the path or a header):
the cases with the right key and a malformed body also show that the key stays out of every
log (the leak scan at the end of the package). The sandbox cases use ``vendor``, a sandbox
provider with a ``receipt_secret``.
"""

from __future__ import annotations

import json
import secrets as random
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import httpx

from noti.providers.sandbox import sign_receipt
from tests.fakes.twilio import ACCOUNT_SID, FROM_NUMBER, twilio_signature
from tests.hostile_http.conftest import US_PHONE, Deployment
from tests.tables import by_id

SIGNATURE, MALFORMED, PROVIDER = (
    "e.noti.receipt.signature",
    "e.noti.receipt.malformed",
    "e.noti.receipt.provider",
)

# --- Twilio: X-Twilio-Signature over the callback URL and the form ------------------------------


def _form(status: str = "undelivered", **changes: str) -> dict[str, str]:
    form = {
        "MessageSid": "SM" + "ab" * 16,
        "MessageStatus": status,
        "AccountSid": ACCOUNT_SID,
        "To": US_PHONE,
        "From": FROM_NUMBER,
        "ErrorCode": "30003",
    }
    return {k: v for k, v in {**form, **changes}.items() if v is not None}


#: A Twilio request: (signed URL's query record, posted form, signing token) → what is sent.
Twilio = Callable[[Deployment], tuple[str, dict[str, str], dict[str, str], bytes]]


def _twilio(
    *,
    sign: str | None = "tw_token",
    signed_record: str | None = "tw_record",
    posted_record: str = "tw_record",
    signed_form: dict[str, str] | None = None,
    form: dict[str, str] | None = None,
    signature: str | None = None,
    body: bytes | None = None,
) -> Twilio:
    def build(d: Deployment) -> tuple[str, dict[str, str], dict[str, str], bytes]:
        posted = form if form is not None else _form()
        path = f"/v1/receipts/tw?noti_id={d.ids[posted_record]}"
        signed_path = "/v1/receipts/tw" + (f"?noti_id={d.ids[signed_record]}" if signed_record else "")
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        if signature is not None:
            headers["X-Twilio-Signature"] = signature
        elif sign is not None:
            token = d.keys.get(sign, sign)
            headers["X-Twilio-Signature"] = twilio_signature(
                token, d.url + signed_path, signed_form or posted
            )
        return path, headers, posted, body if body is not None else urlencode(posted).encode()

    return build


#: (id, request, status, code)
TWILIO: list[tuple[str, Twilio, int, str]] = [
    ("unsigned", _twilio(sign=None), 403, SIGNATURE),
    ("signature-empty", _twilio(signature=""), 403, SIGNATURE),
    ("signature-garbage", _twilio(signature="!!!!"), 403, SIGNATURE),
    ("signature-of-nothing", _twilio(signature="2jmj7l5rSw0yVb/vlWAYkK/YBwk="), 403, SIGNATURE),
    ("other-auth-token", _twilio(sign="0123456789abcdef0123456789abcdef"), 403, SIGNATURE),
    ("signed-without-record", _twilio(signed_record=None), 403, SIGNATURE),
    ("signed-for-another-record", _twilio(signed_record="alice_record"), 403, SIGNATURE),
    ("signed-delivered-sent-undelivered", _twilio(signed_form=_form("delivered")), 403, SIGNATURE),
    ("extra-field-after-signing", _twilio(signed_form=_form(), form=_form(Price="0")), 403, SIGNATURE),
    ("signed-then-json-body", _twilio(body=json.dumps(_form()).encode()), 403, SIGNATURE),
    ("signed-unknown-status", _twilio(form=_form("exploded")), 400, MALFORMED),
    ("signed-no-sid", _twilio(form=_form(MessageSid=None)), 400, MALFORMED),  # type: ignore[arg-type]
    ("signed-no-status", _twilio(form=_form(MessageStatus=None)), 400, MALFORMED),  # type: ignore[arg-type]
    ("signed-sid-too-long", _twilio(form=_form(MessageSid="SM" + "a" * 300)), 400, MALFORMED),
]


@by_id("request_, status, code", TWILIO)
def test_a_forged_or_malformed_twilio_callback_is_refused(
    deployment: Deployment, client: httpx.Client, request_: Twilio, status: int, code: str
) -> None:
    path, headers, _, body = request_(deployment)
    deployment.refuses(status, code, client, "POST", path, who=None, headers=headers, content=body)


def test_a_twilio_callback_by_get_is_refused(deployment: Deployment, client: httpx.Client) -> None:
    query = urlencode({**_form(), "noti_id": deployment.ids["tw_record"]})
    deployment.refuses(400, MALFORMED, client, "GET", f"/v1/receipts/tw?{query}", who=None)


# --- Aliyun: ?key= (wrong ones only: see the module docstring) -------------------------------


def _aliyun_body(d: Deployment) -> bytes:
    report = {
        "phone_number": "13912345678",
        "send_time": "2026-01-01 11:12:13",
        "report_time": "2026-01-01 11:12:14",
        "success": False,
        "err_code": "MK:0005",
        "err_msg": "failed",
        "sms_size": "1",
        "biz_id": "932702304080415357^0",
        "out_id": d.ids["tw_record"],
    }
    return json.dumps([report]).encode()


#: (id, query string after the path, extra headers)
ALIYUN: list[tuple[str, str, dict[str, str]]] = [
    ("no-key", "", {}),
    ("empty-key", "?key=", {}),
    ("wrong-key", f"?key=ark-{random.token_hex(16)}", {}),
    ("two-wrong-keys", f"?key=ark-{random.token_hex(4)}&key=ark-{random.token_hex(4)}", {}),
    ("key-in-a-header", "", {"X-Key": "ark-0000"}),
    ("key-5000-chars", "?key=" + "k" * 5000, {}),
    ("key-nul", "?key=ark%00", {}),
]


@by_id("query, headers", ALIYUN)
def test_an_aliyun_push_without_its_key_is_refused(
    deployment: Deployment, client: httpx.Client, query: str, headers: dict[str, str]
) -> None:
    deployment.refuses(
        403, SIGNATURE, client, "POST", f"/v1/receipts/ali{query}", who=None,
        content=_aliyun_body(deployment), headers={"Content-Type": "application/json", **headers},
    )  # fmt: skip


#: (id, body): malformed pushes with the right key
ALIYUN_MALFORMED: list[tuple[str, bytes]] = [
    ("not-json", b"<xml/>"),
    ("an-object", b'{"biz_id": "1"}'),
    ("array-of-arrays", b"[[1]]"),
    ("no-biz-id", b'[{"success": true, "out_id": "x"}]'),
    ("success-a-string", b'[{"biz_id": "1", "success": "true"}]'),
    ("deep", b"[" * 20_000 + b"]" * 20_000),
]
#: Where the key goes: the query (as Aliyun's console takes it), a path segment, a header.
KEY_PLACES = [
    ("query", lambda key: (f"/v1/receipts/ali?key={key}", {})),
    ("path", lambda key: (f"/v1/receipts/ali/{key}", {})),
    ("header", lambda key: ("/v1/receipts/ali", {"X-Noti-Receipt-Key": key})),
]


@by_id("body", ALIYUN_MALFORMED)
@by_id("place", KEY_PLACES)
def test_a_keyed_aliyun_push_that_cannot_be_read_is_malformed(
    deployment: Deployment, client: httpx.Client, place: Any, body: bytes
) -> None:
    path, headers = place(deployment.keys["ali_receipt"])
    deployment.refuses(400, MALFORMED, client, "POST", path, who=None, content=body, headers=headers)


# --- the sandbox vendor: X-Sandbox-Signature over the body ------------------------------------


def _rows(d: Deployment, **changes: Any) -> bytes:
    row = {"msgid": f"sandbox-{d.ids['alice_record']}", "state": "delivered", "code": "OK", **changes}
    return json.dumps([row]).encode()


#: (id, body given the deployment, signature given (secret, body), status, code)
Body = Callable[[Deployment], bytes]
Sign = Callable[[str, bytes], str]
SIGNED: Sign = sign_receipt
SANDBOX: list[tuple[str, Body, Sign, int, str]] = [
    ("unsigned", _rows, lambda s, b: "", 403, SIGNATURE),
    ("signature-zero", _rows, lambda s, b: "sha256=0", 403, SIGNATURE),
    ("other-secret", _rows, lambda s, b: sign_receipt("vrs-other", b), 403, SIGNATURE),
    ("signed-other-body", _rows, lambda s, b: sign_receipt(s, b + b" "), 403, SIGNATURE),
    ("sha1-label", _rows, lambda s, b: "sha1=" + sign_receipt(s, b).split("=", 1)[1], 403, SIGNATURE),
    ("hex-alone", _rows, lambda s, b: sign_receipt(s, b).split("=", 1)[1], 403, SIGNATURE),
    (
        "hex-upper",
        _rows,
        lambda s, b: "sha256=" + sign_receipt(s, b).split("=", 1)[1].upper(),
        403,
        SIGNATURE,
    ),
    ("two-signatures", _rows, lambda s, b: "sha256=00, " + sign_receipt(s, b), 403, SIGNATURE),
    ("not-json", lambda d: b"<xml/>", SIGNED, 400, MALFORMED),
    ("empty", lambda d: b"", SIGNED, 400, MALFORMED),
    (
        "an-object",
        lambda d: json.dumps({"msgid": "x", "state": "delivered"}).encode(),
        SIGNED,
        400,
        MALFORMED,
    ),
    ("empty-array", lambda d: b"[]", SIGNED, 400, MALFORMED),
    ("array-of-numbers", lambda d: b"[1]", SIGNED, 400, MALFORMED),
    ("array-of-empty", lambda d: b"[{}]", SIGNED, 400, MALFORMED),
    ("state-unknown", lambda d: _rows(d, state="exploded"), SIGNED, 400, MALFORMED),
    ("msgid-number", lambda d: _rows(d, msgid=5), SIGNED, 400, MALFORMED),
    ("msgid-empty", lambda d: _rows(d, msgid=""), SIGNED, 400, MALFORMED),
    ("msgid-201", lambda d: _rows(d, msgid="m" * 201), SIGNED, 400, MALFORMED),
    (
        "1001-receipts",
        lambda d: json.dumps([{"msgid": "m", "state": "delivered"}] * 1001).encode(),
        SIGNED,
        400,
        MALFORMED,
    ),
    ("invalid-utf8", lambda d: b'[{"msgid": "\xff", "state": "delivered"}]', SIGNED, 400, MALFORMED),
]


@by_id("body, sign, status, code", SANDBOX)
def test_a_forged_or_malformed_sandbox_receipt_is_refused(
    deployment: Deployment, client: httpx.Client, body: Body, sign: Sign, status: int, code: str
) -> None:
    content = body(deployment)
    headers = {
        "Content-Type": "application/json",
        "X-Sandbox-Signature": sign(deployment.keys["vendor"], content),
    }
    deployment.refuses(
        status, code, client, "POST", "/v1/receipts/vendor", who=None, content=content, headers=headers
    )


def test_a_deeply_nested_signed_receipt_is_malformed(deployment: Deployment, client: httpx.Client) -> None:
    content = b"[" * 20_000 + b"]" * 20_000  # within the body limit
    headers = {"X-Sandbox-Signature": sign_receipt(deployment.keys["vendor"], content)}
    deployment.refuses(
        400, MALFORMED, client, "POST", "/v1/receipts/vendor", who=None, content=content, headers=headers
    )


#: (id, provider path segment): none of these takes receipts
NO_RECEIPTS: list[tuple[str, str]] = [
    ("unknown", "nobody"),
    ("sandbox-without-secret", "sandbox"),
    ("webhook-provider", "hooks"),
    ("webhook-default", "hookspub"),
    ("upper-case-name", "VENDOR"),
    ("name-300", "p" * 300),
    ("name-nul", "vendor%00"),
    ("name-dots", "..vendor"),
]


@by_id("provider", NO_RECEIPTS)
def test_a_receipt_for_a_provider_that_takes_none_is_404(
    deployment: Deployment, client: httpx.Client, provider: str
) -> None:
    content = _rows(deployment)
    headers = {"X-Sandbox-Signature": sign_receipt(deployment.keys["vendor"], content)}
    deployment.refuses(
        404, PROVIDER, client, "POST", f"/v1/receipts/{provider}", who=None, content=content, headers=headers
    )
