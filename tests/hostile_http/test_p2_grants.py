"""Point 2 of issue 32 (and point 8's expiring tokens): who may name which provider, over HTTP.

Every user names every configured provider (and one that does not exist), alone and in a
batch: a plain user (alice, bob, and ops, a root member) may name only the channel's default
chain (``sandbox`` for SMS); the root administrator (boss) any that can send the channel;
``hooksinternal`` (``allow_private``) only those granted it by name. A refusal is
``e.cmd.noti.add.providerdenied`` (a batch: ``e.noti.http.batch`` with the item's code), says
the name asked for and never another provider's, and stores nothing. An API token made with
``providers=["vendor"]`` narrows its user's rights to that name, boss's too, and widens
nobody's. An expired token is 401 ``e.noti.auth.expired`` on every route.

A name boss may use ends in a record: it waits an hour (``delay``) and is revoked at once, so
nothing is sent under the cases that follow. boss's webhooks to a URL of his choice meet point
1 after the grant: he has no signing key (``e.cmd.noti.add.nosigningkey``).
"""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from tests.hostile_http.conftest import PHONE, US_PHONE, Deployment
from tests.hostile_http.harness import assert_refused
from tests.hostile_http.test_tokens import ROUTES as TOKEN_ROUTES

DENIED = "e.cmd.noti.add.providerdenied"
NO_PROVIDER = "e.cmd.noti.add.noprovider"
NO_KEY = "e.cmd.noti.add.nosigningkey"
BATCH = "e.noti.http.batch"
#: Every provider the deployment configures, and the built-in sandbox the SMS channel uses.
PROVIDERS = ("hookspub", "hooks", "hooksinternal", "vendor", "ali", "tw", "sandbox")
PUBLIC = "https://hooks.example.com/in"


def body_for(provider: str) -> dict[str, Any]:
    """A notification of the channel ``provider`` sends, naming it, waiting an hour."""
    if provider.startswith("hooks"):
        return {"type": "webhook", "to": PUBLIC, "content": {"e": 1}, "provider": provider, "delay": 3600}
    to = US_PHONE if provider == "tw" else PHONE
    return {"type": "sms", "to": to, "text": "x", "provider": provider, "delay": 3600}


OK = (201, "")
PLAIN = {"hooks": DENIED, "hooksinternal": DENIED, "vendor": DENIED, "ali": DENIED, "tw": DENIED,
         "sandbox": OK, "nope": DENIED}  # fmt: skip
BOSS = {"hooks": NO_KEY, "hooksinternal": NO_KEY, "vendor": OK, "ali": OK, "tw": OK, "sandbox": OK,
        "nope": NO_PROVIDER}  # fmt: skip
#: what each token gets for each name: a code (refused, 422), or OK
EXPECTED: dict[str, dict[str, Any]] = {
    "alice": PLAIN,
    "bob": PLAIN,
    "ops": PLAIN,
    "boss": BOSS,
    # narrowed to vendor: boss may name vendor only; alice, never granted vendor, nothing
    "boss_vendor": {**{name: DENIED for name in PLAIN}, "vendor": OK},
    "alice_vendor": {name: DENIED for name in PLAIN},
}
MATRIX = [(who, name, want) for who, names in EXPECTED.items() for name, want in names.items()]


def revoke(deployment: Deployment, client: httpx.Client, who: str, record: str) -> None:
    answer = deployment.ask(client, "DELETE", f"/v1/notifications/{record}", who=who)
    assert answer.status_code == 200, answer.text


def others_named(message: str, asked: str) -> list[str]:
    """The providers other than ``asked`` that ``message`` names (as whole words)."""
    return [name for name in PROVIDERS if name != asked and re.search(rf"(?<![\w-]){name}(?![\w-])", message)]


@pytest.mark.parametrize("batch", [False, True], ids=["single", "batch"])
@pytest.mark.parametrize(("who", "name", "want"), MATRIX, ids=[f"{w}-{n}" for w, n, _ in MATRIX])
def test_naming_a_provider(
    deployment: Deployment, client: httpx.Client, who: str, name: str, want: Any, batch: bool
) -> None:
    one = body_for(name)
    # a batch: the item that names the provider after one any user may send
    sent: Any = [{"type": "sms", "to": PHONE, "text": "x", "delay": 3600}, one] if batch else one
    if want == OK:
        answer = deployment.ask(client, "POST", "/v1/notifications", who=who, json=sent)
        assert answer.status_code in (201, 207), answer.text
        made = answer.json()
        ids = made["ids"] if batch else [made["id"]]
        assert len(ids) == (2 if batch else 1) and all(ids) and not made.get("refused"), made
        for record in ids:
            revoke(deployment, client, who, record)
        return
    with deployment.unchanged():
        answer = deployment.ask(client, "POST", "/v1/notifications", who=who, json=sent)
    if batch:
        assert_refused(answer, 422, BATCH)
        items = answer.json()["error"]["items"]
        assert [(item["index"], item["code"]) for item in items] == [(1, want)], answer.text
        message = items[0]["message"]
    else:
        assert_refused(answer, 422, want)
        message = answer.json()["error"]["message"]
    if who != "boss":  # the operator is told what is configured (a name he mistyped)
        assert not others_named(message, name), message


#: (who, code): an internal address, the one allow_private exists for. carol is granted
#: hooksinternal: she passes the grant and the target check (allow_private) and meets point 1
#: (no signing key: this module runs after test_p1_secrets.py deleted hers), the control that
#: the others are stopped by the grant
INTERNAL = [("alice", DENIED), ("bob", DENIED), ("ops", DENIED), ("alice_vendor", DENIED),
            ("boss_vendor", DENIED), ("carol", NO_KEY)]  # fmt: skip


@pytest.mark.parametrize(("who", "code"), INTERNAL, ids=[i[0] for i in INTERNAL])
def test_hooksinternal_is_refused_to_everyone_not_granted_it(
    deployment: Deployment, client: httpx.Client, who: str, code: str
) -> None:
    body = {**body_for("hooksinternal"), "to": "http://10.0.0.1/in"}
    with deployment.unchanged():
        answer = deployment.ask(client, "POST", "/v1/notifications", who=who, json=body)
    assert_refused(answer, 422, code)
    assert not others_named(answer.json()["error"]["message"], "hooksinternal")


@pytest.mark.parametrize(("who", "status"), [("alice_vendor", 201), ("boss_vendor", 201)])
def test_a_narrowed_token_still_uses_the_channels_default(
    deployment: Deployment, client: httpx.Client, who: str, status: int
) -> None:
    """Narrowing is of names: a notification that names none goes through the default chain
    (``sandbox``, which does not reach private addresses)."""
    answer = deployment.ask(
        client,
        "POST",
        "/v1/notifications",
        who=who,
        json={"type": "sms", "to": PHONE, "text": "x", "delay": 3600},
    )
    assert answer.status_code == status, answer.text
    revoke(deployment, client, who, answer.json()["id"])


#: every route that takes a token (``test_tokens.py``'s), the signing-key routes, and a post
#: naming a provider
EXPIRED_ROUTES = [r[1:] for r in TOKEN_ROUTES] + [
    ("POST", "/v1/signing-keys", {}),
    ("GET", "/v1/signing-keys", {}),
    ("DELETE", "/v1/signing-keys/sk_0", {}),
    ("POST", "/v1/notifications", {"json": body_for("vendor")}),
]
EXPIRED_IDS = [r[0] for r in TOKEN_ROUTES] + ["post-key", "list-keys", "delete-key", "post-naming-vendor"]


@pytest.mark.parametrize(("method", "path", "kwargs"), EXPIRED_ROUTES, ids=EXPIRED_IDS)
def test_an_expired_token_is_401_expired_on_every_route(
    deployment: Deployment, client: httpx.Client, method: str, path: str, kwargs: dict[str, Any]
) -> None:
    with deployment.unchanged():
        answer = deployment.ask(client, method, path, who="expired", **kwargs)
    assert_refused(answer, 401, "e.noti.auth.expired")
    assert "expired" in answer.json()["error"]["message"]


#: (id, who, the notification, code): a name on a channel it cannot send
WRONG_CHANNEL = [
    (
        "carol-hooks-on-sms",
        "carol",
        {"type": "sms", "to": PHONE, "text": "x", "provider": "hooks"},
        NO_PROVIDER,
    ),
    # the SMS default is not the webhook channel's: not hers to name there
    ("alice-sandbox-on-webhook", "alice", {**body_for("hooks"), "provider": "sandbox"}, DENIED),
    ("boss-ali-on-webhook", "boss", {**body_for("hooks"), "provider": "ali"}, NO_PROVIDER),
    ("boss-tw-on-webhook", "boss", {**body_for("hooks"), "provider": "tw"}, NO_PROVIDER),
]


@pytest.mark.parametrize(
    ("who", "body", "code"), [w[1:] for w in WRONG_CHANNEL], ids=[w[0] for w in WRONG_CHANNEL]
)
def test_a_name_on_a_channel_it_cannot_send_names_no_other_provider(
    deployment: Deployment, client: httpx.Client, who: str, body: dict[str, Any], code: str
) -> None:
    with deployment.unchanged():
        answer = deployment.ask(client, "POST", "/v1/notifications", who=who, json={**body, "delay": 3600})
    assert_refused(answer, 422, code)
    message = answer.json()["error"]["message"]
    assert not others_named(message, body["provider"]), message
