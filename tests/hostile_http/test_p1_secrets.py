"""Point 1 of issue 32 (with points 2 and 8 where they meet it): an operator's webhook secrets
never reach a URL a user chose, and the signing keys that sign such URLs instead.

* ``/v1/signing-keys`` attacked: every route without a valid token (none, unknown, revoked,
  expired); another user's key id answers byte for byte as a missing one; hostile ids in the
  path; query parameters the routes do not take; bodies on ``POST`` (it takes none: a body is
  never read, so it can choose neither the user nor the secret; one over the body limit is
  413); the fourth key; lists that show ids only, each user's own.
* Finding 1 end to end: carol (granted ``hooksinternal``, a provider with an
  ``Authorization`` header and ``allow_private``, so its webhooks reach a receiver on
  loopback) makes her key and posts a webhook to a receiver of hers: the real worker delivers
  it, signed with HER key, with no provider header and no configured secret in any header; a
  receiver holding the provider's ``whsec_`` refuses it. A user without a key is refused
  ``e.cmd.noti.add.nosigningkey`` for a URL of her choice and for a status callback, and
  nothing is stored.
* Status callbacks: a webhook a user posts, whose body imitates noti's
  ``{"type": "notification.delivered", …}``, carries its bare record id as ``webhook-id``
  (never ``cb_…``, whatever the body or the idempotency key say) and is refused by a receiver
  holding another user's key. (A real status callback cannot reach a loopback receiver in this
  deployment: the webhook channel's default, ``hookspub``, keeps the SSRF guard; the ``cb_``
  id and the creator's key on delivered callbacks are tested in ``tests/test_fallbacks.py``.)

Every key this module makes is deleted at its end (``test_p1_signing_keys.py`` expects no
keys); every secret shown is registered with the leak scan, which then finds it nowhere else.
"""

from __future__ import annotations

import secrets as random
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import wait_until
from tests.fakes.webhook import WebhookReceiver
from tests.hostile_http.conftest import BODY_MAX, PHONE, Deployment, _settle
from tests.hostile_http.harness import assert_refused, error_of, id_free

KEYS = "/v1/signing-keys"
ROUTES = [("post", "POST", KEYS), ("list", "GET", KEYS), ("delete", "DELETE", KEYS + "/sk_0")]
NOT_FOUND = "e.noti.sigkey.not_found"
BAD = "e.noti.http.badrequest"
NO_KEY = "e.cmd.noti.add.nosigningkey"
#: A public URL of a user's choice (nothing is sent there: every case with it is refused).
PUBLIC = "https://hooks.example.com/in"


def registered(deployment: Deployment, answer: httpx.Response, who: str) -> dict[str, Any]:
    """The key ``answer`` made (201, ``who``'s, a fresh ``whsec_`` secret); its secret becomes
    a secret of the run: the answer that showed it (the only one that may) leaves the leak
    scan's record, every other answer and log is searched for it."""
    assert answer.status_code == 201, answer.text
    body = answer.json()
    assert set(body) == {"id", "user", "created_ms", "secret"}, body
    assert body["user"] == who and body["id"].startswith("sk_") and body["secret"].startswith("whsec_")
    secret = body["secret"]
    deployment.answers.answers[:] = [
        (a, seen) for a, seen in deployment.answers.answers if secret not in seen
    ]
    deployment.secrets.add(f"signing key {body['id']} of {who}", secret)
    return dict(body)


def make_key(deployment: Deployment, client: httpx.Client, who: str, **kwargs: Any) -> dict[str, Any]:
    return registered(deployment, deployment.ask(client, "POST", KEYS, who=who, **kwargs), who)


def drop_key(deployment: Deployment, client: httpx.Client, who: str, key_id: str) -> None:
    answer = deployment.ask(client, "DELETE", f"{KEYS}/{key_id}", who=who)
    assert answer.status_code == 200, answer.text


def listed(deployment: Deployment, client: httpx.Client, who: str) -> list[dict[str, Any]]:
    answer = deployment.ask(client, "GET", KEYS, who=who)
    assert answer.status_code == 200, answer.text
    return list(answer.json()["signing_keys"])


@pytest.fixture(scope="module")
def keys(deployment: Deployment, client: httpx.Client) -> Iterator[dict[str, dict[str, Any]]]:
    """One key each of alice, bob and carol (by user); every key of theirs deleted at the end."""
    made = {who: make_key(deployment, client, who) for who in ("alice", "bob", "carol")}
    yield made
    for who in ("alice", "bob", "carol", "ops", "boss"):
        for key in listed(deployment, client, who):
            drop_key(deployment, client, who, key["id"])
    _settle(deployment.redis)


# --- the routes: tokens ---------------------------------------------------------------------

#: (id, who, code): the token forms each route refuses
TOKENS = [
    ("none", None, "e.noti.auth.missing"),
    ("unknown", "unknown", "e.noti.auth.unknown"),
    ("revoked", "revoked", "e.noti.auth.revoked"),
    ("expired", "expired", "e.noti.auth.expired"),
]


@pytest.mark.parametrize(("who", "code"), [t[1:] for t in TOKENS], ids=[t[0] for t in TOKENS])
@pytest.mark.parametrize(("method", "path"), [r[1:] for r in ROUTES], ids=[r[0] for r in ROUTES])
def test_every_route_refuses_a_token_that_is_not_good(
    deployment: Deployment,
    client: httpx.Client,
    keys: Any,
    method: str,
    path: str,
    who: str | None,
    code: str,
) -> None:
    headers = {"Authorization": "Bearer noti_" + random.token_urlsafe(32)} if who == "unknown" else None
    with deployment.unchanged():
        answer = deployment.ask(client, method, path, who=None if who == "unknown" else who, headers=headers)
    assert_refused(answer, 401, code)


@pytest.mark.parametrize("owner", ["alice", "carol"])
def test_a_revoked_or_expired_token_of_the_owner_cannot_delete_her_key(
    deployment: Deployment, client: httpx.Client, keys: dict[str, dict[str, Any]], owner: str
) -> None:
    # revoked and expired are alice's tokens: for carol's key they are another user's, too
    for who, code in (("revoked", "e.noti.auth.revoked"), ("expired", "e.noti.auth.expired")):
        with deployment.unchanged():
            answer = deployment.ask(client, "DELETE", f"{KEYS}/{keys[owner]['id']}", who=who)
        assert_refused(answer, 401, code)
    assert keys[owner]["id"] in {key["id"] for key in listed(deployment, client, owner)}


# --- the routes: another user's key, hostile ids ----------------------------------------------


@pytest.mark.parametrize(("who", "owner"), [
    ("bob", "alice"), ("carol", "alice"), ("ops", "alice"), ("boss", "alice"), ("alice", "carol"),
    ("alice_vendor", "carol"), ("boss_vendor", "bob"),
])  # fmt: skip
def test_another_users_key_answers_byte_for_byte_as_a_missing_one(
    deployment: Deployment, client: httpx.Client, keys: dict[str, dict[str, Any]], who: str, owner: str
) -> None:
    theirs = keys[owner]["id"]
    missing = "sk_" + random.token_hex(8)
    with deployment.unchanged():
        answer = deployment.ask(client, "DELETE", f"{KEYS}/{theirs}", who=who)
        control = deployment.ask(client, "DELETE", f"{KEYS}/{missing}", who=who)
    assert_refused(answer, 404, NOT_FOUND)
    assert (answer.status_code, id_free(answer.text, theirs)) == (
        control.status_code,
        id_free(control.text, missing),
    )
    drop = {"date", "content-length", "x-request-id"}
    assert {k: v for k, v in answer.headers.items() if k not in drop} == {
        k: v for k, v in control.headers.items() if k not in drop
    }
    assert owner not in answer.text  # the owner is never named


#: (id, the id in the path given alice's key id, status, code)
HOSTILE_IDS: list[tuple[str, Any, int, str]] = [
    ("long", lambda k: "sk_" + "f" * 4000, 404, NOT_FOUND),
    ("unicode", lambda k: "sk_\u2603\u5bc6\u94a5", 404, NOT_FOUND),
    ("rtl-override", lambda k: "sk_\u202eabc", 404, NOT_FOUND),
    # a slash, even encoded, leaves the route: no route, not a key
    ("encoded-slashes", lambda k: "..%2F..%2Fnotifications", 404, "e.noti.http.noroute"),
    ("encoded-dots", lambda k: "%2e%2e", 404, NOT_FOUND),
    ("nul", lambda k: "%00", 404, NOT_FOUND),
    ("nul-after-own", lambda k: k + "%00", 404, NOT_FOUND),
    ("space", lambda k: "%20", 404, NOT_FOUND),
    ("lf-after-own", lambda k: k + "%0A", 404, NOT_FOUND),
    ("own-upper", lambda k: k.upper(), 404, NOT_FOUND),
    ("own-plus-char", lambda k: k + "0", 404, NOT_FOUND),
    ("own-less-char", lambda k: k[:-1], 404, NOT_FOUND),
    ("own-without-prefix", lambda k: k.removeprefix("sk_"), 404, NOT_FOUND),
    ("glob", lambda k: "sk_*", 404, NOT_FOUND),
    ("own-then-glob", lambda k: k[:6] + "*", 404, NOT_FOUND),
    ("redis-key-name", lambda k: "noti:sigkey:" + k, 404, NOT_FOUND),
    ("json", lambda k: '{"id":"' + k + '"}', 404, NOT_FOUND),
]


@pytest.mark.parametrize(
    ("key_id", "status", "code"), [h[1:] for h in HOSTILE_IDS], ids=[h[0] for h in HOSTILE_IDS]
)
def test_a_hostile_key_id_is_not_found_and_deletes_nothing(
    deployment: Deployment,
    client: httpx.Client,
    keys: dict[str, dict[str, Any]],
    key_id: Any,
    status: int,
    code: str,
) -> None:
    path = f"{KEYS}/{key_id(keys['alice']['id'])}".replace("{", "{{").replace("}", "}}")
    with deployment.unchanged():
        answer = deployment.ask(client, "DELETE", path, who="alice")
    assert_refused(answer, status, code)


@pytest.mark.parametrize(("method", "path"), [
    ("DELETE", KEYS + "/"), ("DELETE", KEYS), ("GET", KEYS + "/{id}"), ("PUT", KEYS + "/{id}"),
    ("PATCH", KEYS),
])  # fmt: skip
def test_a_route_that_does_not_exist_changes_nothing(
    deployment: Deployment, client: httpx.Client, keys: dict[str, dict[str, Any]], method: str, path: str
) -> None:
    """No route deletes every key, reads one, or replaces one: 404 or 405, with a code."""
    with deployment.unchanged():
        answer = deployment.ask(client, method, path.replace("{id}", keys["alice"]["id"]), who="alice")
    status, code = error_of(answer)
    assert status in (404, 405), answer.text
    assert "whsec_" not in answer.text


#: (id, query parameters): none of the routes takes a parameter
QUERIES = [
    ("user", {"user": "bob"}),
    ("id", {"id": "sk_0"}),
    ("limit", {"limit": "1"}),
    ("secret", {"secret": "whsec_" + "A" * 32}),
]


@pytest.mark.parametrize("params", [q[1] for q in QUERIES], ids=[q[0] for q in QUERIES])
@pytest.mark.parametrize(("method", "path"), [r[1:] for r in ROUTES], ids=[r[0] for r in ROUTES])
def test_a_query_parameter_is_refused(
    deployment: Deployment, client: httpx.Client, keys: Any, method: str, path: str, params: dict[str, str]
) -> None:
    with deployment.unchanged():
        answer = deployment.ask(client, method, path, who="alice", params=params)
    assert_refused(answer, 422, BAD)


# --- the routes: bodies, the fourth key, the lists -------------------------------------------

CHOSEN = "whsec_" + "QUFB" * 11  # a secret a body offers: never the one made
#: (id, the POST's httpx arguments): the route takes no body, so each makes alice a random key
BODIES: list[tuple[str, dict[str, Any]]] = [
    ("not-json", {"content": b"{oops", "headers": {"Content-Type": "application/json"}}),
    ("nul-bytes", {"content": b"\x00" * 64}),
    (
        "form",
        {"content": b"user=bob&secret=x", "headers": {"Content-Type": "application/x-www-form-urlencoded"}},
    ),
    ("user-bob", {"json": {"user": "bob"}}),
    ("chosen-secret", {"json": {"secret": CHOSEN, "id": "sk_mine"}}),
    ("array", {"json": [{"user": "boss"}] * 3}),
    ("deep", {"content": b"[" * 10_000 + b"]" * 10_000, "headers": {"Content-Type": "application/json"}}),
]


@pytest.mark.parametrize("kwargs", [b[1] for b in BODIES], ids=[b[0] for b in BODIES])
def test_a_body_on_post_is_never_read(
    deployment: Deployment, client: httpx.Client, keys: dict[str, dict[str, Any]], kwargs: dict[str, Any]
) -> None:
    made = make_key(deployment, client, "alice", **kwargs)
    try:
        assert made["secret"] != CHOSEN and made["id"] != "sk_mine"
        assert made["id"] not in {key["id"] for key in listed(deployment, client, "bob")}
        assert made["id"] in {key["id"] for key in listed(deployment, client, "alice")}
    finally:
        drop_key(deployment, client, "alice", made["id"])


def test_a_body_over_the_limit_is_413_and_makes_no_key(
    deployment: Deployment, client: httpx.Client, keys: Any
) -> None:
    with deployment.unchanged():
        answer = deployment.ask(client, "POST", KEYS, who="alice", content=b"x" * (BODY_MAX + 1))
    assert_refused(answer, 413, "e.noti.http.toolarge")


def test_a_fourth_key_is_422_full_and_changes_nothing(
    deployment: Deployment, client: httpx.Client, keys: dict[str, dict[str, Any]]
) -> None:
    extra = [make_key(deployment, client, "carol")["id"] for _ in range(2)]  # carol has 1: 3 in all
    try:
        for who in ("carol",):
            with deployment.unchanged():
                answer = deployment.ask(client, "POST", KEYS, who=who)
            assert_refused(answer, 422, "e.noti.sigkey.full")
        assert len(listed(deployment, client, "carol")) == 3
        assert len(listed(deployment, client, "alice")) == 1  # one user's limit is not another's
    finally:
        for key_id in extra:
            drop_key(deployment, client, "carol", key_id)


@pytest.mark.parametrize("who", ["alice", "alice2", "bob", "carol", "ops", "boss", "boss_vendor"])
def test_a_list_shows_ids_of_ones_own_keys_only(
    deployment: Deployment, client: httpx.Client, keys: dict[str, dict[str, Any]], who: str
) -> None:
    user = {"alice2": "alice", "boss_vendor": "boss"}.get(who, who)
    answer = deployment.ask(client, "GET", KEYS, who=who)
    assert answer.status_code == 200
    assert "whsec_" not in answer.text and "secret" not in answer.text
    shown = answer.json()["signing_keys"]
    assert all(set(key) == {"id", "user", "created_ms"} and key["user"] == user for key in shown)
    assert {key["id"] for key in shown} == ({keys[user]["id"]} if user in keys else set())


# --- finding 1 end to end ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def carols_receiver(keys: dict[str, dict[str, Any]]) -> Iterator[WebhookReceiver]:
    receiver = WebhookReceiver(keys["carol"]["secret"])
    with receiver:
        yield receiver


def post_and_wait(
    deployment: Deployment,
    client: httpx.Client,
    receiver: WebhookReceiver,
    body: dict[str, Any],
    who: str = "carol",
) -> tuple[str, Any]:
    """``body`` posted as ``who`` through ``hooksinternal`` to ``receiver`` (reset first); the
    record id and the one request it received, once the worker has settled."""
    receiver.reset()
    answer = deployment.ask(
        client, "POST", "/v1/notifications", who=who,
        json={"type": "webhook", "to": receiver.url + "/in", "provider": "hooksinternal", **body},
    )  # fmt: skip
    assert answer.status_code == 201, answer.text
    wait_until(lambda: len(receiver.requests) >= 1, timeout=30)
    _settle(deployment.redis)
    [received] = receiver.requests
    return str(answer.json()["id"]), received


def test_finding1_a_users_webhook_is_signed_with_her_key_and_carries_no_operator_secret(
    deployment: Deployment, client: httpx.Client, carols_receiver: WebhookReceiver
) -> None:
    record, received = post_and_wait(deployment, client, carols_receiver, {"content": {"event": "paid"}})
    assert carols_receiver.ids == [record] and carols_receiver.refusals == []  # verified under HER key
    names = {name.lower() for name in received.headers}
    assert "authorization" not in names and "x-internal-key" not in names
    configured = set(deployment.secrets) | set(deployment.keys.values())
    assert not [name for name, value in received.headers.items() if value in configured or any(
        secret in value for secret in configured)], "a configured secret reached the user's URL"  # fmt: skip


@pytest.mark.parametrize("provider", ["hooksinternal", "hooks", "hookspub"])
def test_finding1_a_receiver_holding_a_providers_secret_refuses_the_users_webhook(
    deployment: Deployment, client: httpx.Client, keys: Any, provider: str
) -> None:
    receiver = WebhookReceiver(deployment.secrets.values[f"whsec of {provider}"])
    with receiver:
        post_and_wait(deployment, client, receiver, {"content": {"event": "paid"}})
        assert receiver.ids == [] and len(receiver.refusals) == 1, receiver.refusals


#: (id, who, the notification): webhooks to URLs of the user's choice, status callbacks, from
#: users without a key; each waits an hour if it is stored after all
NO_KEY_CASES: list[tuple[str, str, Any]] = [
    ("ops-default-provider", "ops", {"type": "webhook", "to": PUBLIC, "content": {}}),
    ("boss-default-provider", "boss", {"type": "webhook", "to": PUBLIC, "content": {}}),
    ("boss-names-hooks", "boss", {"type": "webhook", "to": PUBLIC, "content": {}, "provider": "hooks"}),
    ("boss-names-hooksinternal", "boss",
     {"type": "webhook", "to": "http://127.0.0.1:9/in", "content": {}, "provider": "hooksinternal"}),
    ("ops-status-callback", "ops", {"type": "sms", "to": PHONE, "text": "x", "status_callback": PUBLIC}),
    ("boss-status-callback", "boss", {"type": "sms", "to": PHONE, "text": "x", "status_callback": PUBLIC}),
    ("boss-vendor-token-status-callback", "boss_vendor",
     {"type": "sms", "to": PHONE, "text": "x", "provider": "vendor", "status_callback": PUBLIC}),
    ("ops-batch", "ops",
     [{"type": "sms", "to": PHONE, "text": "x"}, {"type": "webhook", "to": PUBLIC, "content": {}}]),
]  # fmt: skip


@pytest.mark.parametrize(("who", "body"), [c[1:] for c in NO_KEY_CASES], ids=[c[0] for c in NO_KEY_CASES])
def test_a_user_without_a_key_is_refused_nosigningkey_and_nothing_is_stored(
    deployment: Deployment, client: httpx.Client, keys: Any, who: str, body: Any
) -> None:
    delayed = [{**b, "delay": 3600} for b in body] if isinstance(body, list) else {**body, "delay": 3600}
    with deployment.unchanged():
        answer = deployment.ask(client, "POST", "/v1/notifications", who=who, json=delayed)
    if isinstance(body, list):  # a batch: refused whole, the item's code in its items
        assert_refused(answer, 422, "e.noti.http.batch")
        assert [item["code"] for item in answer.json()["error"]["items"]] == [NO_KEY], answer.text
    else:
        assert_refused(answer, 422, NO_KEY)
    assert "whsec_" not in answer.text


def test_a_key_deleted_is_a_key_no_more(deployment: Deployment, client: httpx.Client, keys: Any) -> None:
    made = make_key(deployment, client, "ops")
    drop_key(deployment, client, "ops", made["id"])
    with deployment.unchanged():
        answer = deployment.ask(
            client, "POST", "/v1/notifications", who="ops",
            json={"type": "webhook", "to": PUBLIC, "content": {}, "delay": 3600},
        )  # fmt: skip
    assert_refused(answer, 422, NO_KEY)


# --- status callbacks: a user's imitation is not one ------------------------------------------

IMITATION = {
    "type": "notification.delivered",
    "timestamp": "2026-11-27T16:00:00.123Z",
    "data": {"id": "01m8ewcqpf43ecf26k9wqs6cww", "channel": "sms", "status": "sent", "delivery": "delivered"},
}


@pytest.mark.parametrize("extra", [{}, {"idempotency_key": "cb_01m8ewcqpf43ecf26k9wqs6cww"}],
                         ids=["plain", "cb-idempotency-key"])  # fmt: skip
def test_an_imitated_status_callback_is_refused_by_another_users_receiver(
    deployment: Deployment, client: httpx.Client, keys: dict[str, dict[str, Any]], extra: dict[str, Any]
) -> None:
    bobs = WebhookReceiver(keys["bob"]["secret"])
    with bobs:
        post_and_wait(deployment, client, bobs, {"content": IMITATION, **extra})
        assert bobs.ids == [] and len(bobs.refusals) == 1, bobs.refusals


@pytest.mark.parametrize("extra", [{}, {"idempotency_key": "cb_02m8ewcqpf43ecf26k9wqs6cww"}],
                         ids=["plain", "cb-idempotency-key"])  # fmt: skip
def test_an_imitated_status_callback_carries_its_bare_record_id(
    deployment: Deployment, client: httpx.Client, carols_receiver: WebhookReceiver, extra: dict[str, Any]
) -> None:
    record, received = post_and_wait(deployment, client, carols_receiver, {"content": IMITATION, **extra})
    assert received.headers["webhook-id"] == record and not record.startswith("cb_")
    assert received.json() == IMITATION
