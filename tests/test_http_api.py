"""The HTTP API through a real ``noti serve`` (uvicorn) on loopback, on the test Redis.

The auth matrix: no token and an unknown, revoked or expired token are 401; another user's
record or event is answered byte for byte as a missing one (404, the same code and message,
the same Redis commands), a root member's token reads it; a level above the token's cap is
lowered to the cap (as a level above a role's cap is everywhere in noti), never refused; the
user is the token's, never the body's. Every bad input is answered 4xx with a code and
nothing stored.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
import redis

from noti.access.tokens import digest_of
from noti.core.record import new_id
from tests.conftest import ADMIN, ALICE, API_BODY_MAX, API_RECEIPT_SECRET, BOB, MEMBER
from tests.servers import ApiProcess
from tests.test_hostile_input import snapshot

PHONE = "+8613912345678"
SMS = {"type": "sms", "to": PHONE, "text": "Your code is 4321"}

pytestmark = pytest.mark.bounds  # FastAPI, uvicorn, pydantic: run on the lowest versions too


@pytest.fixture
def client(api: ApiProcess, rt: Any) -> Iterator[httpx.Client]:
    """A client of the server, on a flushed test database (``rt``: the same settings here)."""
    with httpx.Client(base_url=api.url, timeout=10.0) as made:
        yield made


@pytest.fixture
def token(rt: Any) -> Callable[..., str]:
    """``token(user, cap=None, rate=None)``: a new API token (made by the root administrator)."""

    def make(user: str, cap: int | None = None, rate: float | None = None) -> str:
        plain, _ = rt.tokens.add(user, acting=ADMIN, level_cap=cap, rate_per_s=rate)
        return str(plain)

    return make


@pytest.fixture
def alice(token: Callable[..., str]) -> str:
    """A token of alice's, a plain user."""
    return token(ALICE)


@pytest.fixture
def raw(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


def bearer(plain: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {plain}"}


def stored(raw: redis.Redis) -> dict[str, str]:
    """Every key but the tokens' hashes (which note when a token was last used) and its digest."""
    return snapshot(raw, leave_out=lambda key: key.startswith("noti:token:"))


def error_of(response: httpx.Response) -> tuple[int, str]:
    body = response.json()
    assert set(body) == {"error"} and body["error"]["message"], body
    return response.status_code, str(body["error"]["code"])


# --- the auth matrix ------------------------------------------------------------------------------


def test_no_token_is_401_and_stores_nothing(client: httpx.Client, raw: redis.Redis) -> None:
    before = stored(raw)
    for method, path, body in (
        ("POST", "/v1/notifications", SMS),
        ("GET", "/v1/notifications", None),
        ("GET", "/v1/notifications/01m8ewcqpf43ecf26k9wqs6cww", None),
        ("DELETE", "/v1/notifications/01m8ewcqpf43ecf26k9wqs6cww", None),
        ("POST", "/v1/events", {"name": "order.paid"}),
    ):
        response = client.request(method, path, json=body)
        assert error_of(response) == (401, "e.noti.auth.missing"), (method, path)
        assert response.headers["WWW-Authenticate"].startswith("Bearer")
    # the token is checked before the body: a body that does not fit the schema is 401 too
    assert error_of(client.post("/v1/notifications", json={"bad": 1})) == (401, "e.noti.auth.missing")
    too_many = [{"type": "sms", "to": PHONE}] * 1001  # (within the body limit)
    assert error_of(client.post("/v1/notifications", json=too_many)) == (401, "e.noti.auth.missing")
    for header in ("Bearer", "Basic YWxpY2U6eA==", "Bearer noti_" + "x" * 43, "Bearer " + "y" * 5000):
        response = client.post("/v1/notifications", json=SMS, headers={"Authorization": header})
        assert response.status_code == 401, header
        assert response.json()["error"]["code"] in ("e.noti.auth.missing", "e.noti.auth.unknown")
    assert stored(raw) == before


def test_a_revoked_token_is_401_from_the_next_request_on(
    client: httpx.Client, token: Callable[..., str], rt: Any, raw: redis.Redis
) -> None:
    # given a token that works
    plain = token(ALICE)
    assert client.post("/v1/notifications", json=SMS, headers=bearer(plain)).status_code == 201
    before = stored(raw)
    # when it is revoked
    rt.tokens.revoke(plain, acting=ADMIN)
    # then it authenticates nothing, and nothing more is stored
    response = client.post("/v1/notifications", json=SMS, headers=bearer(plain))
    assert error_of(response) == (401, "e.noti.auth.revoked")
    assert error_of(client.get("/v1/notifications", headers=bearer(plain))) == (401, "e.noti.auth.revoked")
    assert stored(raw) == before


def commands_run(raw: redis.Redis) -> dict[str, int]:
    """Redis's count of calls, by command, since the server started (INFO commandstats)."""
    return {name: int(stats["calls"]) for name, stats in raw.info("commandstats").items()}


def answer(client: httpx.Client, method: str, path: str, plain: str, raw: redis.Redis) -> tuple[Any, ...]:
    """Everything a caller sees of one request (status, headers but the date, body), and the
    Redis commands it ran (this one's, less the INFO that counts them)."""
    before = commands_run(raw)
    response = client.request(method, path, headers=bearer(plain))
    after = commands_run(raw)
    ran = {name: after[name] - before.get(name, 0) for name in after if after[name] != before.get(name, 0)}
    ran["cmdstat_info"] = ran.get("cmdstat_info", 1) - 1
    headers = sorted((k, v) for k, v in response.headers.items() if k != "date")
    return response.status_code, headers, response.content, {k: v for k, v in ran.items() if v}


def test_another_users_record_or_event_answers_exactly_as_a_missing_one(
    client: httpx.Client, token: Callable[..., str], raw: redis.Redis
) -> None:
    alice, bob, member = token(ALICE), token(BOB), token(MEMBER)
    record_id = client.post("/v1/notifications", json={**SMS, "delay": 3600}, headers=bearer(alice)).json()[
        "id"
    ]
    event_id = client.post("/v1/events", json={"name": "order.paid"}, headers=bearer(alice)).json()["id"]
    before = stored(raw)
    for method, path, real in (
        ("GET", "/v1/notifications/{}", record_id),
        ("DELETE", "/v1/notifications/{}", record_id),
        ("GET", "/v1/events/{}", event_id),
    ):
        for _ in range(2):  # the first request of each kind loads what later ones reuse
            theirs = answer(client, method, path.format(real), bob, raw)
            ghost = new_id()  # an id of the same shape that names nothing
            missing = answer(client, method, path.format(ghost), bob, raw)
        # then bob gets for alice's what he gets for nothing at all: the same status, headers
        # and body byte for byte (but the id he asked for), after the same Redis commands
        status, headers, body, ran = missing
        assert status == 404, body
        assert theirs == (status, headers, body.replace(ghost.encode(), real.encode()), ran), (method, path)
        assert ALICE.encode() not in theirs[2] and b"permission" not in theirs[2].lower()
    assert stored(raw) == before  # bob's DELETE left it waiting
    # listing: a plain user sees only their own; naming another user is refused alike for a
    # user who has records and for a name nobody has (user names are no secret objects: the
    # answer says only that listing others' is for root members)
    assert client.get("/v1/notifications", headers=bearer(bob)).json() == {"notifications": []}
    named = client.get(f"/v1/notifications?user={ALICE}", headers=bearer(bob))
    nobody = client.get("/v1/notifications?user=nobody", headers=bearer(bob))
    assert error_of(named) == error_of(nobody) == (403, "e.cmd.noti.list.nopvg")
    assert named.content == nobody.content.replace(b"nobody", ALICE.encode())
    assert stored(raw) == before
    seen = client.get(f"/v1/notifications/{record_id}", headers=bearer(member))
    assert seen.status_code == 200 and seen.json()["noti_c"] == ALICE and seen.json()["noti_st"] == 1
    own = client.get(f"/v1/notifications/{record_id}", headers=bearer(alice))
    assert own.status_code == 200 and own.json()["id"] == record_id


def test_a_level_above_the_tokens_cap_is_lowered_to_it(
    client: httpx.Client, token: Callable[..., str]
) -> None:
    capped_admin = token(ADMIN, cap=5)
    plain_user = token(ALICE, cap=50)
    cases = [
        (capped_admin, 1000, 5),  # the token's cap
        (capped_admin, 3, 3),  # under it: as asked
        (token(ADMIN), 1000, 1000),  # no cap: the role's (root administrator: 1000)
        (plain_user, 1000, 1),  # the role's cap (1) is below the token's
        (token(MEMBER, cap=200), 500, 100),  # a root member's role cap (100)
    ]
    for plain, asked, got in cases:
        made = client.post("/v1/notifications", json={**SMS, "lv": asked}, headers=bearer(plain))
        assert made.status_code == 201, made.text
        record = client.get(f"/v1/notifications/{made.json()['id']}", headers=bearer(plain)).json()
        assert record["noti_lv"] == got, (asked, record)
    batch = client.post("/v1/notifications", json=[{**SMS, "lv": 900}] * 3, headers=bearer(capped_admin))
    levels = {
        client.get(f"/v1/notifications/{i}", headers=bearer(capped_admin)).json()["noti_lv"]
        for i in batch.json()["ids"]
    }
    assert levels == {5}


def test_the_user_is_the_tokens_never_the_requests(
    client: httpx.Client, alice: str, raw: redis.Redis
) -> None:
    before = stored(raw)
    for body in ({**SMS, "user": ADMIN}, {**SMS, "creator": ADMIN}, {**SMS, "noti_c": ADMIN}):
        assert error_of(client.post("/v1/notifications", json=body, headers=bearer(alice)))[0] == 422
    assert stored(raw) == before
    made = client.post(
        "/v1/notifications", json=SMS, headers={**bearer(alice), "X-Noti-User": ADMIN, "Cookie": "user=boss"}
    )
    record = client.get(f"/v1/notifications/{made.json()['id']}", headers=bearer(alice)).json()
    assert record["noti_c"] == ALICE


# --- adding -------------------------------------------------------------------------------------


def test_one_notification_is_stored_and_queued(client: httpx.Client, alice: str, rt: Any) -> None:
    made = client.post("/v1/notifications", json=SMS, headers=bearer(alice))
    assert made.status_code == 201
    record_id = made.json()["id"]
    assert made.headers["Location"] == f"/v1/notifications/{record_id}"
    record = rt.store.get(record_id)
    assert (record.creator, record.target, record.fields["text"]) == (ALICE, PHONE, SMS["text"])
    assert rt.redis.zscore(rt.keys.waiting_index, record_id) is not None  # queued, not only stored


def test_a_status_callback_is_kept_with_the_record(client: httpx.Client, alice: str) -> None:
    body = {**SMS, "status_callback": "https://shop.example.com/noti-status"}
    record_id = client.post("/v1/notifications", json=body, headers=bearer(alice)).json()["id"]
    record = client.get(f"/v1/notifications/{record_id}", headers=bearer(alice)).json()
    assert record["noti_status_cb"] == "https://shop.example.com/noti-status"


def test_a_batch_of_100_is_stored_whole(client: httpx.Client, alice: str, rt: Any) -> None:
    items = [{**SMS, "text": f"message {i}"} for i in range(100)]
    made = client.post("/v1/notifications", json=items, headers=bearer(alice))
    assert made.status_code == 201, made.text
    ids = made.json()["ids"]
    assert len(set(ids)) == 100 and made.json()["refused"] == []
    assert [rt.store.get(i).fields["text"] for i in ids] == [f"message {i}" for i in range(100)]


def test_an_idempotency_key_stores_once(
    client: httpx.Client, token: Callable[..., str], rt: Any, raw: redis.Redis
) -> None:
    alice, bob = token(ALICE), token(BOB)
    headers = {**bearer(alice), "Idempotency-Key": "order-42"}
    first = client.post("/v1/notifications", json=SMS, headers=headers)
    again = client.post("/v1/notifications", json=SMS, headers=headers)
    assert first.status_code == again.status_code == 201
    assert first.json() == again.json()
    assert rt.redis.zcard(rt.keys.all_index) == 1
    # keys are per user: bob's same key is another notification
    bobs = client.post("/v1/notifications", json=SMS, headers={**bearer(bob), "Idempotency-Key": "order-42"})
    assert bobs.json()["id"] != first.json()["id"]
    # a batch under one key: item i is <key>#i; sent twice, stored once
    items = [{**SMS, "text": f"m{i}"} for i in range(10)]
    batch_headers = {**bearer(alice), "Idempotency-Key": "batch-7"}
    one = client.post("/v1/notifications", json=items, headers=batch_headers)
    before = stored(raw)
    two = client.post("/v1/notifications", json=items, headers=batch_headers)
    assert one.json()["ids"] == two.json()["ids"] and len(set(one.json()["ids"])) == 10
    assert rt.redis.zcard(rt.keys.all_index) == 12
    assert stored(raw) == before


def test_a_batch_with_a_bad_item_is_refused_whole(client: httpx.Client, alice: str, raw: redis.Redis) -> None:
    before = stored(raw)
    items = [SMS, {**SMS, "to": "not a phone"}, SMS, {"type": "fax", "to": PHONE}]
    response = client.post("/v1/notifications", json=items, headers=bearer(alice))
    assert error_of(response) == (422, "e.noti.http.batch")
    refused = response.json()["error"]["items"]
    assert [(r["index"], r["code"]) for r in refused] == [
        (1, "e.cmd.noti.add.badtarget"),
        (3, "e.cmd.noti.add.badtype"),
    ]
    assert stored(raw) == before


BAD = [
    # (id, body as bytes or JSON, extra headers, status, code)
    ("not json", b"{not json", {}, 422, "e.noti.http.badrequest"),
    ("empty body", b"", {}, 422, "e.noti.http.badrequest"),
    ("a string", "sms", {}, 422, "e.noti.http.badrequest"),
    ("a number", 5, {}, 422, "e.noti.http.badrequest"),
    ("null", None, {}, 422, "e.noti.http.badrequest"),
    ("empty batch", [], {}, 422, "e.noti.http.badrequest"),
    ("1001 items", [{"type": "sms", "to": PHONE}] * 1001, {}, 422, "e.noti.http.badrequest"),
    ("no type", {"to": PHONE, "text": "x"}, {}, 422, "e.noti.http.badrequest"),
    ("unknown key", {**SMS, "priority": 9}, {}, 422, "e.noti.http.badrequest"),
    ("text a number", {**SMS, "text": 5}, {}, 422, "e.noti.http.badrequest"),
    ("lv a string", {**SMS, "lv": "5"}, {}, 422, "e.noti.http.badrequest"),
    ("lv a float", {**SMS, "lv": 2.5}, {}, 422, "e.noti.http.badrequest"),
    ("lv true", {**SMS, "lv": True}, {}, 422, "e.noti.http.badrequest"),
    ("lv 0", {**SMS, "lv": 0}, {}, 422, "e.cmd.noti.add.badlv"),
    ("lv 2**64", {**SMS, "lv": 2**64}, {}, 422, "e.cmd.noti.add.badlv"),
    ("unknown type", {**SMS, "type": "fax"}, {}, 422, "e.cmd.noti.add.badtype"),
    ("bad phone", {**SMS, "to": "12"}, {}, 422, "e.cmd.noti.add.badtarget"),
    ("no target", {"type": "sms", "text": "x"}, {}, 422, "e.cmd.noti.add.badtarget"),
    ("empty text", {**SMS, "text": ""}, {}, 422, "e.cmd.noti.add.badtext"),
    ("NUL in text", {**SMS, "text": "a\x00b"}, {}, 422, "e.cmd.noti.add.badtext"),
    ("retry_max 0", {**SMS, "retry_max": 0}, {}, 422, "e.cmd.noti.add.badretry"),
    ("negative delay", {**SMS, "delay": -5}, {}, 422, "e.cmd.noti.add.baddelay"),
    ("bad eta", {**SMS, "eta": "tomorrow"}, {}, 422, "e.cmd.noti.add.baddelay"),
    ("unknown provider", {**SMS, "provider": "nope"}, {}, 422, "e.cmd.noti.add.providerdenied"),
    (
        "webhook to no URL",
        {"type": "webhook", "to": "ftp://x", "content": {}},
        {},
        422,
        "e.cmd.noti.add.badtarget",
    ),  # fmt: skip
    (
        "key and identifier",
        {**SMS, "identifier": "d1"},
        {"Idempotency-Key": "k"},
        422,
        "e.cmd.noti.add.badkey",
    ),
    (
        "header and item key",
        {**SMS, "idempotency_key": "a"},
        {"Idempotency-Key": "b"},
        422,
        "e.cmd.noti.add.badkey",
    ),  # fmt: skip
    ("key too long", SMS, {"Idempotency-Key": "k" * 191}, 422, "e.noti.http.badrequest"),
    ("status_callback no URL", {**SMS, "status_callback": "ftp://x"}, {}, 422, "e.cmd.noti.add.badtarget"),
    ("key with a tab", SMS, {"Idempotency-Key": "a\tb"}, 422, "e.cmd.noti.add.badkey"),
    ("too large", {**SMS, "text": "x" * (API_BODY_MAX + 1)}, {}, 413, "e.noti.http.toolarge"),
]


@pytest.mark.parametrize(("body", "headers", "status", "code"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_every_bad_input_is_4xx_and_stores_nothing(
    client: httpx.Client,
    alice: str,
    raw: redis.Redis,
    body: Any,
    headers: dict[str, str],
    status: int,
    code: str,
) -> None:
    before = stored(raw)
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    response = client.post(
        "/v1/notifications",
        content=content,
        headers={**bearer(alice), "Content-Type": "application/json", **headers},
    )
    assert error_of(response) == (status, code), response.text
    assert stored(raw) == before


def test_a_body_too_large_is_413_without_a_content_length_too(
    client: httpx.Client, alice: str, raw: redis.Redis
) -> None:
    before = stored(raw)

    def chunks() -> Iterator[bytes]:  # a chunked body: no Content-Length to read the size from
        yield b'{"type": "sms", "to": "+8613912345678", "text": "'
        for _ in range(20):
            yield b"x" * 4096
        yield b'"}'

    response = client.post(
        "/v1/notifications", content=chunks(), headers={**bearer(alice), "Content-Type": "application/json"}
    )
    assert error_of(response) == (413, "e.noti.http.toolarge")
    assert stored(raw) == before


def test_a_token_over_its_rate_is_429_with_retry_after(
    client: httpx.Client, token: Callable[..., str], raw: redis.Redis
) -> None:
    slow = token(ALICE, rate=0.5)  # a burst of 1, then one request every 2 s
    assert client.post("/v1/notifications", json=SMS, headers=bearer(slow)).status_code == 201
    before = stored(raw)
    response = client.post("/v1/notifications", json=SMS, headers=bearer(slow))
    assert error_of(response) == (429, "e.noti.auth.rate")
    assert 1 <= int(response.headers["Retry-After"]) <= 2
    assert stored(raw) == before
    # another token of the same user has a bucket of its own
    assert client.post("/v1/notifications", json=SMS, headers=bearer(token(ALICE))).status_code == 201


# --- reading and cancelling -------------------------------------------------------------------------


def test_listing_filters_by_status_and_type(client: httpx.Client, alice: str) -> None:
    sms = client.post("/v1/notifications", json=SMS, headers=bearer(alice)).json()["id"]
    mail = {"type": "email", "to": "ops@example.com", "subject": "s", "text": "t"}
    email = client.post("/v1/notifications", json=mail, headers=bearer(alice)).json()["id"]

    def ids(query: str) -> list[str]:
        response = client.get(f"/v1/notifications{query}", headers=bearer(alice))
        assert response.status_code == 200, response.text
        return [r["id"] for r in response.json()["notifications"]]

    assert ids("") == [email, sms]
    assert ids("?type=sms") == [sms]
    assert ids("?st=1&type=email") == [email]
    assert ids("?st=10") == []
    assert ids("?limit=1") == [email]
    for query, code in (
        ("?st=7", "e.cmd.noti.list.badst"),
        ("?st=x", "e.noti.http.badrequest"),
        ("?type=fax", "e.cmd.noti.add.badtype"),
        ("?limit=0", "e.noti.http.badrequest"),
        ("?limit=1001", "e.noti.http.badrequest"),
        ("?user=a:b", "e.cmd.noti.baduser"),
        ("?delivery=lost", "e.cmd.noti.list.baddelivery"),
        ("?delivery=", "e.cmd.noti.list.baddelivery"),
        ("?stat=1", "e.noti.http.badrequest"),  # a misspelt filter is refused, not ignored
    ):
        assert error_of(client.get(f"/v1/notifications{query}", headers=bearer(alice))) == (422, code), query


def test_delete_revokes_a_waiting_record_and_is_409_once_it_is_not(
    client: httpx.Client, alice: str, rt: Any
) -> None:
    record_id = client.post("/v1/notifications", json={**SMS, "delay": 600}, headers=bearer(alice)).json()[
        "id"
    ]
    done = client.delete(f"/v1/notifications/{record_id}", headers=bearer(alice))
    assert done.status_code == 200 and done.json() == {"id": record_id, "state": "revoked"}
    record = rt.store.get(record_id)
    assert record.status == -1 and record.revoked_ms
    assert rt.redis.zscore(rt.keys.delayed, record_id) is None  # never sent
    again = client.delete(f"/v1/notifications/{record_id}", headers=bearer(alice))
    assert error_of(again) == (409, "e.cmd.noti.revoke.final")
    missing = client.delete("/v1/notifications/01m8ewcqpf43ecf26k9wqs6cww", headers=bearer(alice))
    assert error_of(missing) == (404, "e.cmd.noti.revoke.not_found")
    assert error_of(client.get("/v1/notifications/nope", headers=bearer(alice))) == (
        404,
        "e.cmd.noti.not_found",
    )


def test_ids_next_to_anothers_are_not_ids(client: httpx.Client, token: Callable[..., str]) -> None:
    # given a batch of alice's, made within a few milliseconds (ids once ran x, x+1, x+2, ...)
    alice, member = token(ALICE), token(MEMBER)
    batch = [{**SMS, "delay": 3600}] * 100
    made = client.post("/v1/notifications", json=batch, headers=bearer(alice))
    ids = made.json()["ids"]
    assert made.status_code == 201 and len(set(ids)) == 100
    alphabet = "0123456789abcdefghjkmnpqrstvwxyz"

    def shifted(record_id: str, by: int) -> str:
        tail = 0
        for c in record_id[10:]:
            tail = tail * 32 + alphabet.index(c)
        tail = (tail + by) % 32**16
        digits = [alphabet[tail >> shift & 31] for shift in range(75, -1, -5)]
        return record_id[:10] + "".join(digits)

    # when the ids next to each of hers are tried, by a root member who may read anyone's
    guesses = {shifted(i, by) for i in ids for by in (-2, -1, 1, 2)} - set(ids)
    assert len(guesses) == 400
    # then none is anyone's record: each is a 404, as any made-up id is
    answers = {g: client.get(f"/v1/notifications/{g}", headers=bearer(member)).status_code for g in guesses}
    assert {g: status for g, status in answers.items() if status != 404} == {}
    assert all(
        client.get(f"/v1/notifications/{i}", headers=bearer(alice)).status_code == 200 for i in ids[:5]
    )


def test_an_expired_token_is_401_expired_and_stores_nothing(
    client: httpx.Client, token: Callable[..., str], rt: Any, raw: redis.Redis
) -> None:
    plain, info = rt.tokens.add(ALICE, acting=ADMIN, expires="30d")
    assert client.post("/v1/notifications", json=SMS, headers=bearer(plain)).status_code == 201
    # its thirty days pass (the stored expiry moved to the Redis server's last millisecond)
    seconds, micros = raw.time()
    raw.hset(rt.keys.token(digest_of(plain)), "expires_ms", str(seconds * 1000 + micros // 1000 - 1))
    before = stored(raw)
    for method, path, body in (
        ("POST", "/v1/notifications", SMS),
        ("GET", "/v1/notifications", None),
        ("POST", "/v1/events", {"name": "order.paid"}),
    ):
        response = client.request(method, path, json=body, headers=bearer(plain))
        assert error_of(response) == (401, "e.noti.auth.expired"), (method, path)
        assert response.headers["WWW-Authenticate"].startswith("Bearer")
    assert stored(raw) == before


# --- events, operations, receipts --------------------------------------------------------------


def test_an_event_is_dispatched_as_the_tokens_user(client: httpx.Client, token: Callable[..., str]) -> None:
    alice, bob = token(ALICE), token(BOB)
    headers = {**bearer(alice), "Idempotency-Key": "paid-42"}
    made = client.post("/v1/events", json={"name": "order.paid", "payload": {"id": 42}}, headers=headers)
    assert made.status_code == 202, made.text
    event_id = made.json()["id"]
    again = client.post("/v1/events", json={"name": "order.paid", "payload": {"id": 42}}, headers=headers)
    assert again.json()["id"] == event_id
    shown = client.get(f"/v1/events/{event_id}", headers=bearer(alice)).json()
    assert shown["user"] == ALICE and shown["name"] == "order.paid"
    assert error_of(client.get(f"/v1/events/{event_id}", headers=bearer(bob))) == (
        404,
        "e.noti.event.not_found",
    )
    bad = client.post("/v1/events", json={"name": "bad name!"}, headers=bearer(alice))
    assert error_of(bad) == (422, "e.noti.event.badname")
    assert (
        error_of(client.post("/v1/events", json={"name": "x", "payload": []}, headers=bearer(alice)))[0]
        == 422
    )


def test_health_metrics_and_openapi_need_no_token(client: httpx.Client) -> None:
    assert client.get("/v1/health").json() == {"status": "ok", "redis": "up"}
    metrics = client.get("/metrics")
    assert metrics.status_code == 200 and "noti_store_up 1.0" in metrics.text
    schema = client.get("/openapi.json").json()
    assert {"/v1/notifications", "/v1/notifications/{record_id}", "/v1/events", "/v1/health"} <= set(
        schema["paths"]
    )
    assert schema["components"]["securitySchemes"]["token"]["scheme"] == "bearer"


def test_a_signed_receipt_needs_no_token_and_delivers_the_record(
    client: httpx.Client, token: Callable[..., str], configure: Any, raw: redis.Redis
) -> None:
    import noti
    from noti.providers.sandbox import sign_receipt
    from noti.sending.sender import Sender

    # given an SMS sent through a vendor whose delivery comes as a pushed receipt
    rt = configure(providers={"vendor": {"kind": "sandbox", "receipt_secret": API_RECEIPT_SECRET}})
    record_id = noti.notify_sms(PHONE, "hi", provider="vendor", user=ALICE)
    Sender(rt).deliver(record_id)
    assert rt.store.get(record_id).delivery == "accepted"
    body = json.dumps([{"msgid": f"sandbox-{record_id}", "state": "delivered", "code": "OK"}]).encode()
    before = stored(raw)
    # a forged, a malformed and an unknown provider's receipt change nothing
    for path, headers, content, expected in (
        ("/v1/receipts/vendor", {"X-Sandbox-Signature": "sha256=0"}, body, (403, "e.noti.receipt.signature")),
        ("/v1/receipts/vendor", {"X-Sandbox-Signature": sign_receipt(API_RECEIPT_SECRET, b"[1]")}, b"[1]",
         (400, "e.noti.receipt.malformed")),
        ("/v1/receipts/sandbox", {}, body, (404, "e.noti.receipt.provider")),
        ("/v1/receipts/nobody", {}, body, (404, "e.noti.receipt.provider")),
    ):  # fmt: skip
        assert error_of(client.post(path, content=content, headers=headers)) == expected, path
    assert stored(raw) == before
    # when the vendor pushes a signed one (no API token)
    signature = sign_receipt(API_RECEIPT_SECRET, body)
    pushed = client.post("/v1/receipts/vendor", content=body, headers={"X-Sandbox-Signature": signature})
    # then it is answered as the vendor expects, and the record is delivered
    assert pushed.status_code == 200, pushed.text
    assert rt.store.get(record_id).delivery == "delivered"
    alice = token(ALICE)
    listed = client.get("/v1/notifications?delivery=delivered", headers=bearer(alice)).json()["notifications"]
    assert [r["id"] for r in listed] == [record_id]
    assert client.get("/v1/notifications?delivery=accepted", headers=bearer(alice)).json() == {
        "notifications": []
    }


def test_unknown_routes_and_methods_answer_json(client: httpx.Client, token: Callable[..., str]) -> None:
    assert error_of(client.get("/v2/notifications")) == (404, "e.noti.http.noroute")
    response = client.put("/v1/notifications", json=SMS, headers=bearer(token(ALICE)))
    assert error_of(response) == (405, "e.noti.http.method")


def test_the_receipt_request_is_what_the_vendor_signed(rt: Any) -> None:
    """The URL a vendor signed is NOTI_PUBLIC_URL + path + query when it is set (behind a
    proxy), else the request's own; header names in lower case; the body as sent."""
    from starlette.requests import Request

    from noti.http.receipts import receipt_request

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/v1/receipts/twilio",
        "raw_path": b"/v1/receipts/twilio",
        "query_string": b"a=1&b=2",
        "headers": [(b"x-twilio-signature", b"abc="), (b"host", b"10.0.0.5:8700")],
        "scheme": "http",
        "server": ("10.0.0.5", 8700),
    }
    behind = rt.settings.model_copy(update={"public_url": "https://noti.example.com/base/"})
    made = receipt_request(Request(scope), b"x=1", behind)
    assert made.url == "https://noti.example.com/base/v1/receipts/twilio?a=1&b=2"
    assert made.header("X-Twilio-Signature") == "abc=" and made.body == b"x=1" and made.method == "POST"
    direct = receipt_request(Request(scope), b"", rt.settings.model_copy(update={"public_url": None}))
    assert direct.url == "http://10.0.0.5:8700/v1/receipts/twilio?a=1&b=2"


def test_the_status_of_every_error_class(rt: Any) -> None:
    from noti import errors
    from noti.http.statuses import status_of

    assert status_of(errors.InvalidInput("x")) == 422
    assert status_of(errors.InvalidInput("x", code="e.noti.http.toolarge")) == 413
    assert status_of(errors.InvalidInput("x", code="e.cmd.noti.revoke.final")) == 409
    assert status_of(errors.Unauthenticated("x")) == 401
    assert status_of(errors.PermissionDenied("x")) == 403
    assert status_of(errors.NotFound("x")) == 404
    assert status_of(errors.RateLimitExceeded("x", retry_after_s=1)) == 429
    assert status_of(errors.StoreUnavailable("x")) == 503
    assert status_of(errors.InvalidConfig("x")) == 500
    assert status_of(errors.ReceiptRejected("x", code="e.noti.receipt.signature")) == 403
    assert status_of(errors.ReceiptRejected("x", code="e.noti.receipt.malformed")) == 400
    assert status_of(errors.ReceiptRejected("x", code="e.noti.receipt.provider")) == 404


@pytest.mark.parametrize(
    ("args", "code"),
    [(["-workers", "0"], "e.cmd.noti.serve.badworkers"), (["-workers", "65"], "e.cmd.noti.serve.badworkers"),
     (["-port", "70000"], "e.cmd.noti.serve.badport"), (["-port", "0"], "e.cmd.noti.serve.badport")],
)  # fmt: skip
@pytest.mark.slow
def test_serve_refuses_bad_options_before_listening(rt: Any, args: list[str], code: str) -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "noti", "serve", "-bind", "127.0.0.1", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "NOTI_CONFIG": ""},
    )
    assert done.returncode == 1 and done.stderr.startswith(f"{code}: "), done.stderr
    assert "Uvicorn running" not in done.stderr


def test_a_fallback_comes_with_its_notification_capped_like_it(
    client: httpx.Client, token: Callable[..., str], rt: Any
) -> None:
    email = {"type": "email", "to": "li@example.com", "subject": "code", "text": "4321", "lv": 900}
    answer = client.post(
        "/v1/notifications", json={**SMS, "lv": 900, "fallback": email}, headers=bearer(token(ADMIN, cap=5))
    )
    assert answer.status_code == 201, answer.text
    record = rt.store.get(answer.json()["id"])
    standby = rt.store.get(record.fallback)
    assert standby.fallback_of == record.id and standby.creator == ADMIN
    assert (record.level, standby.level) == (5, 5)  # the token's cap holds for the fallback too
    bad = client.post(
        "/v1/notifications", json={**SMS, "fallback": {"type": "email"}}, headers=bearer(token(ALICE))
    )
    assert error_of(bad) == (422, "e.cmd.noti.add.badfallback")


def test_a_fallback_over_http_is_shown_revoked_and_deduplicated_with_its_notification(
    client: httpx.Client, alice: str, rt: Any
) -> None:
    email = {"type": "email", "to": "li@example.com", "subject": "code", "text": "4321", "after_s": 60}
    # in a batch, each item's fallback is stored with it; the answer gives the notifications' ids
    batch = client.post(
        "/v1/notifications",
        json=[{**SMS, "fallback": email}, SMS],
        headers={**bearer(alice), "Idempotency-Key": "order-7"},
    )
    assert batch.status_code == 201, batch.text
    first, second = batch.json()["ids"]
    shown = client.get(f"/v1/notifications/{first}", headers=bearer(alice)).json()
    standby_id = shown["noti_fallback"]
    assert (
        standby_id
        and client.get(f"/v1/notifications/{second}", headers=bearer(alice)).json()["noti_fallback"] is None
    )
    standby = client.get(f"/v1/notifications/{standby_id}", headers=bearer(alice)).json()
    assert standby["noti_fallback_of"] == first and standby["noti_c"] == ALICE and standby["noti_st"] == 1
    # the same key again stores nothing more, fallback included
    again = client.post(
        "/v1/notifications",
        json=[{**SMS, "fallback": email}, SMS],
        headers={**bearer(alice), "Idempotency-Key": "order-7"},
    )
    assert again.json()["ids"] == [first, second]
    assert len(rt.store.select(creator=ALICE)) == 3
    # DELETE of the notification revokes its waiting fallback too
    assert client.delete(f"/v1/notifications/{first}", headers=bearer(alice)).json()["state"] == "revoked"
    assert client.get(f"/v1/notifications/{standby_id}", headers=bearer(alice)).json()["noti_st"] == -1
    # a notification with an identifier takes no fallback
    refused = client.post(
        "/v1/notifications",
        json={**SMS, "identifier": "cart-1", "delay": 60, "fallback": email},
        headers=bearer(alice),
    )
    assert error_of(refused) == (422, "e.cmd.noti.add.badfallback")
