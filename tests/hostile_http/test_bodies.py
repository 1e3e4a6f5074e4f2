"""Hostile bodies on ``POST /v1/notifications`` and ``POST /v1/events``, sent with alice's good
token: wrong types, unknown keys, nulls, huge strings, deep nesting, bytes that are not UTF-8
or not JSON, batch bounds, NaN and Infinity. Each is refused with its status and code, and
nothing is stored (the digest before and after).

A body is given as JSON-able data (sent as ``json.dumps`` makes it; ``allow_nan``, so NaN and
Infinity go as the bare words Python writes) or as raw bytes.
"""

from __future__ import annotations

import json
import math
from typing import Any

import httpx

from tests.hostile_http.conftest import BODY_MAX, PHONE, Deployment
from tests.tables import by_id

BAD = "e.noti.http.badrequest"
TOO_LARGE = "e.noti.http.toolarge"


def add(code: str) -> str:
    return f"e.cmd.noti.add.{code}"


SMS: dict[str, Any] = {"type": "sms", "to": PHONE, "text": "hello"}
URL = "https://hooks.example.com/in"
WEBHOOK: dict[str, Any] = {"type": "webhook", "to": URL, "content": {"event": "paid"}}
EMAIL: dict[str, Any] = {"type": "email", "to": "ops@example.com", "subject": "s", "text": "t"}
#: A webhook's raw JSON up to its content (what no ``json.dumps`` would write follows it).
RAW_WEBHOOK = b'{"type": "webhook", "to": "https://hooks.example.com/in", "content": '


def deep(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for _ in range(depth):
        value = {"a": value}
    return value


def deep_text(depth: int, array: bool = False) -> bytes:
    return (b"[" * depth + b"]" * depth) if array else (b'{"a":' * depth + b"1" + b"}" * depth)


#: (id, body: JSON-able or bytes, status, code)
NOTIFICATIONS: list[tuple[str, Any, int, str]] = [
    # not JSON, or not an object / array of objects
    ("not-json", b"{oops", 422, BAD),
    ("empty", b"", 422, BAD),
    ("whitespace", b"   \n", 422, BAD),
    ("null", None, 422, BAD),
    ("true", True, 422, BAD),
    ("a-number", 5, 422, BAD),
    ("a-string", "sms", 422, BAD),
    ("xml", b"<notification type='sms'/>", 422, BAD),
    ("form-encoded", b"type=sms&to=%2B8613912345678&text=x", 422, BAD),
    ("trailing-garbage", json.dumps(SMS).encode() + b"}", 422, BAD),
    ("two-objects", json.dumps(SMS).encode() * 2, 422, BAD),
    ("invalid-utf8", b'{"type": "sms", "to": "+8613912345678", "text": "\xff\xfe"}', 422, BAD),
    ("nul-bytes", b"\x00" * 32, 422, BAD),
    # wrong types, field by field
    ("type-number", {**SMS, "type": 5}, 422, BAD),
    ("type-null", {**SMS, "type": None}, 422, BAD),
    ("type-list", {**SMS, "type": ["sms"]}, 422, BAD),
    ("to-number", {**SMS, "to": 8613912345678}, 422, BAD),
    ("to-list", {**SMS, "to": [PHONE]}, 422, BAD),
    ("to-object", {**SMS, "to": {"phone": PHONE}}, 422, BAD),
    ("text-number", {**SMS, "text": 5}, 422, BAD),
    ("text-object", {**SMS, "text": {"a": 1}}, 422, BAD),
    ("text-list", {**SMS, "text": ["a"]}, 422, BAD),
    ("lv-string", {**SMS, "lv": "5"}, 422, BAD),
    ("lv-float", {**SMS, "lv": 2.5}, 422, BAD),
    ("lv-true", {**SMS, "lv": True}, 422, BAD),
    ("lv-list", {**SMS, "lv": [5]}, 422, BAD),
    ("retry-max-string", {**SMS, "retry_max": "3"}, 422, BAD),
    ("delay-string", {**SMS, "delay": "5"}, 422, BAD),
    ("delay-bool", {**SMS, "delay": True}, 422, BAD),
    ("eta-number", {**SMS, "eta": 1_700_000_000}, 422, BAD),
    ("identifier-number", {**SMS, "delay": 60, "identifier": 5}, 422, BAD),
    ("provider-list", {**SMS, "provider": ["sandbox"]}, 422, BAD),
    ("status-callback-object", {**SMS, "status_callback": {"url": URL}}, 422, BAD),
    ("idempotency-key-number", {**SMS, "idempotency_key": 5}, 422, BAD),
    ("content-number", {**WEBHOOK, "content": 5}, 422, BAD),
    ("content-list", {**WEBHOOK, "content": [1, 2]}, 422, BAD),
    ("fallback-string", {**SMS, "fallback": "email"}, 422, BAD),
    ("fallback-list", {**SMS, "fallback": [EMAIL]}, 422, BAD),
    ("subject-number", {**EMAIL, "subject": 5}, 422, BAD),
    # unknown keys: who the record belongs to is never the body's
    ("key-user", {**SMS, "user": "boss"}, 422, BAD),
    ("key-creator", {**SMS, "creator": "boss"}, 422, BAD),
    ("key-noti_c", {**SMS, "noti_c": "boss"}, 422, BAD),
    ("key-id", {**SMS, "id": "01m8ewcqpf43ecf26k9wqs6cww"}, 422, BAD),
    ("key-priority", {**SMS, "priority": 9}, 422, BAD),
    ("key-level", {**SMS, "level": 1000}, 422, BAD),
    ("key-proto", {**SMS, "__proto__": {"admin": True}}, 422, BAD),
    ("key-type-upper", {"TYPE": "sms", "to": PHONE, "text": "x"}, 422, BAD),
    ("key-with-space", {**SMS, "text ": "x"}, 422, BAD),
    ("key-empty", {**SMS, "": 1}, 422, BAD),
    # nulls and missing values
    ("no-type", {"to": PHONE, "text": "x"}, 422, BAD),
    ("empty-object", {}, 422, BAD),
    ("to-null", {**SMS, "to": None}, 422, add("badtarget")),
    ("no-target", {"type": "sms", "text": "x"}, 422, add("badtarget")),
    ("text-empty", {**SMS, "text": ""}, 422, add("badtext")),
    # values noti refuses
    ("type-fax", {**SMS, "type": "fax"}, 422, add("badtype")),
    ("type-empty", {**SMS, "type": ""}, 422, add("badtype")),
    ("to-letters", {**SMS, "to": "call me"}, 422, add("badtarget")),
    ("to-nul", {**SMS, "to": "+86139\x0012345678"}, 422, add("badtarget")),
    ("to-lone-surrogate", b'{"type": "sms", "to": "+86139\\udcff12345678", "text": "x"}',
     422, add("badtarget")),
    ("text-nul", {**SMS, "text": "a\x00b"}, 422, add("badtext")),
    ("text-escape", {**SMS, "text": "\x1b[2J"}, 422, add("badtext")),
    ("text-lone-surrogate", b'{"type": "sms", "to": "+8613912345678", "text": "a\\ud800"}',
     422, add("badtext")),
    ("subject-lf", {**EMAIL, "subject": "Hi\nBcc: x@evil.example"}, 422, add("badtext")),
    ("subject-u2028", {**EMAIL, "subject": "a\u2028b"}, 422, add("badtext")),
    ("email-two-targets", {**EMAIL, "to": "a@example.com, b@example.com"}, 422, add("badtarget")),
    ("lv-zero", {**SMS, "lv": 0}, 422, add("badlv")),
    ("lv-negative", {**SMS, "lv": -1}, 422, add("badlv")),
    ("lv-2**64", {**SMS, "lv": 2**64}, 422, add("badlv")),
    ("lv-5000-digits", b'{"type": "sms", "to": "+8613912345678", "text": "x", "lv": 1' + b"0" * 5000 + b"}",
     422, BAD),
    ("retry-max-zero", {**SMS, "retry_max": 0}, 422, add("badretry")),
    ("retry-max-101", {**SMS, "retry_max": 101}, 422, add("badretry")),
    ("retry-policy-word", {**SMS, "retry_policy": "forever"}, 422, add("badretry")),
    ("delay-negative", {**SMS, "delay": -5}, 422, add("baddelay")),
    ("eta-word", {**SMS, "eta": "tomorrow"}, 422, add("baddelay")),
    ("delay-and-eta", {**SMS, "delay": 5, "eta": "2030-01-01T00:00:00Z"}, 422, add("baddelay")),
    ("identifier-lf", {**SMS, "delay": 60, "identifier": "a\nb"}, 422, add("badident")),
    ("idempotency-key-nul", {**SMS, "idempotency_key": "k\x00"}, 422, add("badkey")),
    ("webhook-javascript", {**WEBHOOK, "to": "javascript:alert(1)"}, 422, add("badtarget")),
    ("webhook-ftp", {**WEBHOOK, "to": "ftp://example.com/x"}, 422, add("badtarget")),
    ("webhook-no-host", {**WEBHOOK, "to": "https://"}, 422, add("badtarget")),
    ("webhook-lf", {**WEBHOOK, "to": "https://example.com/a\nb"}, 422, add("badtarget")),
    ("status-callback-ftp", {**SMS, "status_callback": "ftp://example.com/x"}, 422, add("badtarget")),
    ("fallback-no-type", {**SMS, "fallback": {"to": "li@example.com"}}, 422, add("badfallback")),
    # NaN, Infinity and numbers JSON cannot carry
    ("lv-nan", {**SMS, "lv": math.nan}, 422, BAD),
    ("lv-infinity", {**SMS, "lv": math.inf}, 422, BAD),
    ("delay-nan", {**SMS, "delay": math.nan}, 422, add("baddelay")),
    ("delay-infinity", {**SMS, "delay": math.inf}, 422, add("baddelay")),
    ("delay-minus-infinity", {**SMS, "delay": -math.inf}, 422, add("baddelay")),
    ("delay-1e400", b'{"type": "sms", "to": "+8613912345678", "text": "x", "delay": 1e400}',
     422, add("baddelay")),
    ("content-nan", {**WEBHOOK, "content": {"a": math.nan}}, 422, add("badcontent")),
    ("content-infinity", {**WEBHOOK, "content": {"a": math.inf}}, 422, add("badcontent")),
    ("content-nan-text", {**WEBHOOK, "content": '{"a": NaN}'}, 422, add("badcontent")),
    ("content-not-json-text", {**WEBHOOK, "content": "{oops"}, 422, add("badcontent")),
    ("content-huge-int", RAW_WEBHOOK + b'{"a": 1' + b"0" * 5000 + b"}}", 422, BAD),
    # deep nesting
    ("content-deep-65", {**WEBHOOK, "content": deep(65)}, 422, add("badcontent")),
    ("content-deep-900", RAW_WEBHOOK + deep_text(900) + b"}", 422, add("badcontent")),
    ("body-deep-5000", deep_text(5000), 422, BAD),
    ("body-deep-array-20000", deep_text(20000, array=True), 422, BAD),
    ("fallback-deep", {**SMS, "fallback": deep(200)}, 422, add("badfallback")),
    # huge strings (within the body limit) and bodies over it
    ("to-60k", {**SMS, "to": "1" * 60_000}, 422, add("badtarget")),
    ("text-60k", {**SMS, "text": "x" * 60_000}, 422, add("badtext")),
    ("identifier-60k", {**SMS, "delay": 60, "identifier": "i" * 60_000}, 422, add("badident")),
    ("webhook-url-60k", {**WEBHOOK, "to": URL + "?" + "a" * 60_000}, 422, add("badtarget")),
    ("over-the-limit", {**SMS, "text": "x" * (BODY_MAX + 1)}, 413, TOO_LARGE),
    ("far-over-the-limit", b"[" + b"0," * (2 * BODY_MAX) + b"0]", 413, TOO_LARGE),
    # batch bounds
    ("batch-empty", [], 422, BAD),
    ("batch-1001", [{"type": "sms", "to": PHONE}] * 1001, 422, BAD),
    ("batch-nested", [[SMS]], 422, BAD),
    ("batch-of-null", [None], 422, BAD),
    ("batch-of-strings", ["sms"], 422, BAD),
    ("batch-unknown-key", [SMS, {**SMS, "user": "boss"}], 422, BAD),
    ("batch-one-bad-item", [SMS, {**SMS, "to": "12"}], 422, "e.noti.http.batch"),
    ("batch-all-bad", [{**SMS, "type": "fax"}] * 3, 422, "e.noti.http.batch"),
    ("batch-last-of-1000-bad", [SMS] * 999 + [{**SMS, "text": ""}], 422, "e.noti.http.batch"),
]  # fmt: skip


JSON = {"Content-Type": "application/json"}


def _content(body: Any) -> bytes:
    return body if isinstance(body, bytes) else json.dumps(body).encode()


@by_id("body, status, code", NOTIFICATIONS)
def test_a_hostile_notification_body_is_refused_and_stores_nothing(
    deployment: Deployment, client: httpx.Client, body: Any, status: int, code: str
) -> None:
    deployment.refuses(
        status, code, client, "POST", "/v1/notifications", content=_content(body), headers=JSON
    )


DENIED = add("providerdenied")
#: (id, who, provider named, status, code): a plain user names the channel's defaults and what
#: the operator granted (carol: ``hooks``), checked before the name is looked up, so an
#: ungranted name is refused alike whether it exists or not; a root administrator names any.
PROVIDERS: list[tuple[str, str, str, int, str]] = [
    ("alice-unknown", "alice", "nope", 422, DENIED),
    ("alice-ungranted", "alice", "hooks", 422, DENIED),
    ("alice-ungranted-private", "alice", "hooksinternal", 422, DENIED),
    ("alice-default-then-unknown", "alice", "sandbox,nope", 422, DENIED),
    ("alice-60k", "alice", "p" * 60_000, 422, DENIED),
    ("alice-empty", "alice", "", 422, add("noprovider")),
    ("alice-blank", "alice", "   ", 422, add("noprovider")),
    ("carol-unknown", "carol", "nope", 422, DENIED),
    ("carol-granted-wrong-channel", "carol", "hooks", 422, add("noprovider")),
    ("admin-unknown", "boss", "nope", 422, add("noprovider")),
    ("admin-wrong-channel", "boss", "hooks", 422, add("noprovider")),
    ("admin-60k", "boss", "p" * 60_000, 422, add("noprovider")),
]


@by_id("who, provider, status, code", PROVIDERS)
def test_a_provider_one_may_not_name_or_that_cannot_send_it_is_refused(
    deployment: Deployment, client: httpx.Client, who: str, provider: str, status: int, code: str
) -> None:
    body = {**SMS, "provider": provider, "delay": 3600}
    deployment.refuses(status, code, client, "POST", "/v1/notifications", json=body, who=who)


#: (id, extra headers, code): the Idempotency-Key header, on a good body
KEY_HEADERS: list[tuple[str, dict[str, str], str]] = [
    ("key-191-chars", {"Idempotency-Key": "k" * 191}, BAD),
    ("key-tab", {"Idempotency-Key": "a\tb"}, add("badkey")),
    ("key-and-item-key", {"Idempotency-Key": "a", "X-Body": "item"}, add("badkey")),
]


@by_id("headers, code", KEY_HEADERS)
def test_a_bad_idempotency_key_is_refused(
    deployment: Deployment, client: httpx.Client, headers: dict[str, str], code: str
) -> None:
    body = {**SMS, "idempotency_key": "b"} if headers.pop("X-Body", None) else SMS
    deployment.refuses(422, code, client, "POST", "/v1/notifications", json=body, headers=headers)


#: (id, content type, body): a good body under a type that is not JSON is not read as JSON
CONTENT_TYPES: list[tuple[str, str, bytes]] = [
    ("text-plain", "text/plain", json.dumps(SMS).encode()),
    ("form", "application/x-www-form-urlencoded", b"type=sms&to=%2B8613912345678&text=x"),
    (
        "multipart",
        "multipart/form-data; boundary=x",
        b"--x\r\nContent-Disposition: form-data; name=type\r\n\r\nsms\r\n--x--\r\n",
    ),
]


@by_id("ctype, body", CONTENT_TYPES)
def test_a_body_that_is_not_json_by_its_type_is_refused(
    deployment: Deployment, client: httpx.Client, ctype: str, body: bytes
) -> None:
    deployment.refuses(
        422, BAD, client, "POST", "/v1/notifications", content=body, headers={"Content-Type": ctype}
    )


EVENT = {"name": "order.paid", "payload": {"id": 42}}
BAD_NAME, BAD_PAYLOAD = "e.noti.event.badname", "e.noti.event.badpayload"

#: (id, body, status, code)
EVENTS: list[tuple[str, Any, int, str]] = [
    ("not-json", b"{oops", 422, BAD),
    ("empty", b"", 422, BAD),
    ("null", None, 422, BAD),
    ("a-list", [EVENT], 422, BAD),
    ("a-string", "order.paid", 422, BAD),
    ("invalid-utf8", b'{"name": "order.\xff"}', 422, BAD),
    ("no-name", {"payload": {}}, 422, BAD),
    ("name-null", {"name": None}, 422, BAD),
    ("name-number", {"name": 5}, 422, BAD),
    ("name-list", {"name": ["order.paid"]}, 422, BAD),
    ("name-empty", {"name": ""}, 422, BAD_NAME),
    ("name-spaces", {"name": "bad name!"}, 422, BAD_NAME),
    ("name-lf", {"name": "order.paid\n"}, 422, BAD_NAME),
    ("name-nul", {"name": "order\x00paid"}, 422, BAD_NAME),
    ("name-60k", {"name": "n" * 60_000}, 422, BAD_NAME),
    ("key-user", {**EVENT, "user": "boss"}, 422, BAD),
    ("key-id", {**EVENT, "id": "01m8ewcqpf43ecf26k9wqs6cww"}, 422, BAD),
    ("key-lv", {**EVENT, "lv": 1000}, 422, BAD),
    ("payload-list", {**EVENT, "payload": [1]}, 422, BAD),
    ("payload-string", {**EVENT, "payload": "{}"}, 422, BAD),
    ("payload-number", {**EVENT, "payload": 5}, 422, BAD),
    ("payload-null", {**EVENT, "payload": None}, 422, BAD),
    ("payload-nan", {**EVENT, "payload": {"a": math.nan}}, 422, BAD_PAYLOAD),
    ("payload-infinity", {**EVENT, "payload": {"a": math.inf}}, 422, BAD_PAYLOAD),
    ("payload-lone-surrogate", b'{"name": "order.paid", "payload": {"a": "\\ud800"}}', 422, BAD_PAYLOAD),
    ("payload-deep-100", {**EVENT, "payload": deep(100)}, 422, BAD_PAYLOAD),
    ("payload-deep-text-5000", b'{"name": "order.paid", "payload": ' + deep_text(5000) + b"}", 422, BAD),
    ("payload-huge-int", b'{"name": "order.paid", "payload": {"a": 1' + b"0" * 5000 + b"}}", 422, BAD),
    ("over-the-limit", {**EVENT, "payload": {"a": "x" * (BODY_MAX + 1)}}, 413, TOO_LARGE),
]


@by_id("body, status, code", EVENTS)
def test_a_hostile_event_body_is_refused_and_dispatches_nothing(
    deployment: Deployment, client: httpx.Client, body: Any, status: int, code: str
) -> None:
    deployment.refuses(status, code, client, "POST", "/v1/events", content=_content(body), headers=JSON)
