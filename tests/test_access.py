"""Issue 32, points 1 and 2: secrets stay with their destination, and who may use which provider.

- A webhook provider's ``secret`` and ``headers`` go only to the ``destinations`` its operator
  configured; any other URL is signed with the creator's own signing key and carries no
  provider header; a status callback is signed with the creator's key too, as ``cb_<id>``.
- Naming a provider needs a grant unless it is in the channel's default chain; a provider that
  reaches private addresses needs a grant even as a default; root administrators may use any;
  an API token narrows all of it (``tests/hostile_http`` holds the same over HTTP).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis

import noti
from noti.access.signing import KEYS_MAX, SigningKeys, secret_key
from noti.core.record import Status
from noti.errors import InvalidConfig, InvalidInput, NotFound, PermissionDenied
from noti.providers._urls import Destination
from tests.conftest import ADMIN, ALICE, BOB, MEMBER
from tests.fakes.webhook import SECRET, WebhookReceiver
from tests.tables import yes_no_rows
from tests.test_hostile_input import snapshot
from tests.test_tokens import run as run_as

CONTENT = {"order": 42}
INTERNAL = {"X-Internal-Key": "operator-only-k3y"}


@pytest.fixture(scope="module")
def operator_receiver() -> Iterator[WebhookReceiver]:
    """The operator's own receiver: verifies the provider's secret."""
    with WebhookReceiver(SECRET) as running:
        yield running


@pytest.fixture
def rt(configure: Any, operator_receiver: WebhookReceiver) -> Any:
    operator_receiver.reset()
    # the operator's webhook provider: signed with its secret, a header only the operator knows,
    # and allowed to reach its private receiver
    hook = {"kind": "webhook", "secret": SECRET, "headers": INTERNAL, "allow_private": True, "timeout_s": 2}
    return configure(
        providers={"hook": {**hook, "destinations": [operator_receiver.url + "/internal/"]}},
        channels={"webhook": {"provider": "hook"}, "sms": {"provider": "sandbox"}},
        provider_grants={"*": ["hook"]},
    )


def stored(rt: Any) -> dict[str, str]:
    """A digest of every key of the test database."""
    raw = redis.Redis(
        connection_pool=redis.ConnectionPool(
            **{**rt.redis.connection_pool.connection_kwargs, "decode_responses": False}
        )
    )
    try:
        return snapshot(raw)
    finally:
        raw.close()


def keys(rt: Any) -> SigningKeys:
    return SigningKeys(rt.redis, rt.keys, rt.settings)


def sent(record_id: str) -> Any:
    [result] = noti.send(record_id)
    return noti.get(record_id)


# --- point 1: whose key signs what ---------------------------------------------------------------


def test_the_operators_destination_gets_the_provider_secret_and_headers(
    rt: Any, operator_receiver: WebhookReceiver
) -> None:
    record = sent(noti.notify_webhook(operator_receiver.url + "/internal/orders", content=CONTENT))
    assert record.status is Status.DONE and operator_receiver.refusals == []
    [request] = operator_receiver.requests
    assert request.headers["x-internal-key"] == INTERNAL["X-Internal-Key"]
    assert request.headers["webhook-id"] == record.id


def test_a_url_the_user_chose_is_signed_with_her_key_and_gets_no_operator_header(
    rt: Any, operator_receiver: WebhookReceiver
) -> None:
    # given alice's own signing key and her receiver (finding 1: she controls the target)
    secret, _ = keys(rt).add()
    with WebhookReceiver(secret) as hers:
        record = sent(noti.notify_webhook(hers.url + "/mine", content=CONTENT, provider="hook"))
        # then it verifies under her key, and the operator's header never reached her
        assert record.status is Status.DONE and hers.refusals == [] and hers.ids == [record.id]
        [request] = hers.requests
        assert "x-internal-key" not in request.headers
        assert INTERNAL["X-Internal-Key"] not in repr(request)
    # and a receiver holding the operator's secret refuses what was signed for her
    with WebhookReceiver(SECRET) as operators_key:
        noti.send(noti.notify_webhook(operators_key.url + "/elsewhere", content=CONTENT))
        assert operators_key.ids == [] and operators_key.refusals


@pytest.mark.parametrize(
    "path",
    [
        "/internal/../public",
        "/internal/%2e%2e/public",
        "/internal/%2E%2e/x",
        "/internalx",
        "/",
    ],
)
def test_a_target_that_leaves_the_destination_is_a_url_of_the_users(
    rt: Any, operator_receiver: WebhookReceiver, path: str
) -> None:
    # given alice without a signing key: only an operator destination could be sent
    with pytest.raises(InvalidInput) as refused:
        noti.notify_webhook(operator_receiver.url + path, content=CONTENT)
    assert refused.value.code == "e.cmd.noti.add.nosigningkey"
    assert rt.store.count() == 0


def test_a_webhook_to_her_url_without_a_signing_key_is_refused_and_nothing_stored(rt: Any) -> None:
    before = stored(rt)
    with pytest.raises(InvalidInput) as refused:
        noti.notify_webhook("http://127.0.0.1:9/hers", content=CONTENT)
    assert refused.value.code == "e.cmd.noti.add.nosigningkey"
    assert "signing-key" in refused.value.message and stored(rt) == before


def test_a_key_deleted_before_the_send_makes_the_webhook_invalid_not_signed_otherwise(
    rt: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    from noti.access import signing

    monkeypatch.setattr(signing, "CACHE_S", 0.2)  # a sender reads the keys again after this
    store = keys(rt)
    secret, made = store.add()
    with WebhookReceiver(secret) as hers:
        record_id = noti.notify_webhook(hers.url + "/mine", content=CONTENT)
        store.delete(made.id)
        time.sleep(0.3)
        record = sent(record_id)
        assert record.status is Status.INVALID and "no signing key" in record.errmsg
        assert hers.requests == []


def test_rotation_signs_with_every_key_newest_first(rt: Any) -> None:
    store = keys(rt)
    old, _ = store.add()
    new, _ = store.add()
    for holder in (old, new):  # a receiver holding either one verifies
        with WebhookReceiver(holder) as hers:
            sent(noti.notify_webhook(hers.url + "/r", content=CONTENT))
            assert hers.refusals == [] and len(hers.ids) == 1
            assert len(hers.requests[0].headers["webhook-signature"].split(" ")) == 2


#: A destination prefix: targets a receiver would read as under it, and targets it would not.
PREFIXES = {
    "https://hooks.example.com/noti/": (
        [
            "https://hooks.example.com/noti/a",
            "https://HOOKS.example.com./noti/a",
            "https://hooks.example.com:443/noti/a",
            "https://user:pw@hooks.example.com/noti/a",
        ],
        [
            "https://hooks.example.com/notix",
            "https://hooks.example.com/",
            "http://hooks.example.com/noti/a",
            "https://hooks.example.com:8443/noti/a",
            "https://hooks.example.com.evil.test/noti/a",
            "https://hooks.example.com@evil.test/noti/a",
            "https://evil.test/noti/a?https://hooks.example.com/noti/",
            "https://hooks.example.com/noti/../admin",
            "https://hooks.example.com/noti/%2e%2e/admin",
            "https://hooks.example.com/noti/..%2fadmin",
        ],
    ),
    "https://hooks.example.com/noti": (["https://hooks.example.com/noti/a/b"], []),
    "https://hooks.example.com/": (["https://hooks.example.com/anything"], []),
}


@pytest.mark.parametrize(("prefix", "target", "covered"), yes_no_rows(PREFIXES))
def test_destination_prefixes_cover_exactly_what_a_receiver_would_read_as_under_them(
    prefix: str, target: str, covered: bool
) -> None:
    assert Destination.parse(prefix).covers(target) is covered


@pytest.mark.parametrize(
    "destination",
    [
        "ftp://hooks.example.com/",
        "hooks.example.com/noti/",
        "https:///noti/",
        "https://u:p@hooks.example.com/",
        "https://hooks.example.com/noti/?q=1",
        "https://hooks.example.com/noti/#f",
        "https://hooks.example.com/a/../b/",
    ],
)
def test_a_bad_destination_is_a_configuration_error(configure: Any, destination: str) -> None:
    rt = configure(providers={"hook": {"kind": "webhook", "secret": SECRET, "destinations": [destination]}})
    with pytest.raises(InvalidConfig) as refused:
        rt.providers.get("hook")
    assert "destination" in refused.value.message


# --- point 1: the signing keys themselves --------------------------------------------------------


def test_a_signing_key_is_shown_once_listed_by_id_and_capped(rt: Any) -> None:
    store = keys(rt)
    made = [store.add() for _ in range(KEYS_MAX)]
    for secret, key in made:
        assert secret.startswith("whsec_") and len(secret_key(secret)) == 32 and key.user == ALICE
    listed = store.entries()
    assert {k.id for k in listed} == {k.id for _, k in made}
    assert all(secret not in repr(listed) for secret, _ in made)
    before = stored(rt)
    with pytest.raises(InvalidInput) as full:
        store.add()
    assert full.value.code == "e.noti.sigkey.full" and stored(rt) == before


def test_only_a_root_administrator_manages_another_users_keys(rt: Any) -> None:
    store = keys(rt)
    _, alices = store.add(ALICE, acting=ALICE)
    for acting in (BOB, MEMBER):
        for call, args in (
            (store.add, (ALICE,)),
            (store.entries, (ALICE,)),
            (store.delete, (alices.id, ALICE)),
        ):
            with pytest.raises(PermissionDenied) as denied:
                call(*args, acting=acting)  # type: ignore[operator]
            assert denied.value.code == "e.noti.sigkey.nopvg"
    assert [k.id for k in store.entries(ALICE, acting=ADMIN)] == [alices.id]
    store.delete(alices.id, ALICE, acting=ADMIN)
    assert store.entries(ALICE, acting=ALICE) == []


@pytest.mark.parametrize("key_id", ["sk_0000000000000000", "nothing", "", "sk_" + "f" * 80])
def test_deleting_a_missing_key_is_not_found(rt: Any, key_id: str) -> None:
    with pytest.raises(NotFound) as missing:
        keys(rt).delete(key_id)
    assert missing.value.code == "e.noti.sigkey.not_found"


def test_another_users_key_id_is_not_found_for_her(rt: Any) -> None:
    _, bobs = keys(rt).add(BOB, acting=BOB)
    with pytest.raises(NotFound) as missing:
        keys(rt).delete(bobs.id, ALICE, acting=ALICE)
    assert missing.value.message == "no such signing key"
    assert [k.id for k in keys(rt).entries(BOB, acting=BOB)] == [bobs.id]


def run(*args: str, user: str = ALICE) -> Any:
    """``noti -as USER ARGS…`` in this process (alice by default)."""
    return run_as(*args, user=user)


def test_the_cli_adds_lists_and_deletes_signing_keys(rt: Any) -> None:
    added = run("signing-key", "add")
    assert added.exit_code == 0, added.output
    secret = added.stdout.strip()
    assert secret.startswith("whsec_") and "not shown again" in added.stderr
    listed = run("signing-key", "list", "-json")
    [entry] = __import__("json").loads(listed.stdout)
    assert entry["user"] == ALICE and secret not in listed.stdout
    refused = run("signing-key", "add", "-user", BOB)
    assert refused.exit_code != 0 and "e.noti.sigkey.nopvg" in refused.output
    deleted = run("signing-key", "del", entry["id"])
    assert deleted.exit_code == 0 and keys(rt).entries() == []
    gone = run("signing-key", "del", entry["id"])
    assert gone.exit_code != 0 and "e.noti.sigkey.not_found" in gone.output


# --- point 2: who may use which provider ---------------------------------------------------------


@pytest.fixture
def granted(configure: Any) -> Any:
    """Two SMS providers besides the default, one granted to alice; a webhook provider that
    reaches private addresses, granted to bob only."""
    return configure(
        providers={
            "cheap": {"kind": "sandbox"},
            "premium": {"kind": "sandbox"},
            "extra": {"kind": "sandbox"},
            "inside": {"kind": "webhook", "secret": SECRET, "allow_private": True},
        },
        channels={"sms": {"provider": "cheap"}, "webhook": {"provider": "inside"}},
        provider_grants={ALICE: ["premium"], BOB: ["inside"], "*": ["extra"]},
    )


@pytest.mark.parametrize(
    ("user", "provider", "allowed"),
    [
        (ALICE, None, True),  # the channel's default
        (ALICE, "cheap", True),  # named, but the default anyway
        (ALICE, "premium", True),  # granted to her
        (ALICE, "extra", True),  # granted to everyone
        (ALICE, "cheap,premium", True),
        (BOB, "premium", False),  # alice's grant, not bob's
        (BOB, "cheap,premium", False),  # one name of the chain is enough to refuse
        (MEMBER, "premium", False),  # a root member is no operator
        (ADMIN, "premium", True),  # a root administrator may name any
        (ALICE, "nonexistent", False),  # answered as a provider she may not name
    ],
)
def test_naming_a_provider_needs_the_default_chain_or_a_grant(
    granted: Any, user: str, provider: str | None, allowed: bool
) -> None:
    before = stored(granted)
    call = lambda: noti.notify_sms("+8613912345678", "hi", provider=provider, user=user)  # noqa: E731
    if allowed:
        assert noti.get(call(), user=ADMIN).creator == user
        return
    with pytest.raises(PermissionDenied) as denied:
        call()
    assert denied.value.code == "e.cmd.noti.add.providerdenied"
    # it names what was asked and nothing of the operator's other providers
    assert "inside" not in denied.value.message and "cheap" not in denied.value.message
    assert stored(granted) == before


@pytest.mark.parametrize(("user", "allowed"), [(ALICE, False), (MEMBER, False), (BOB, True), (ADMIN, True)])
def test_a_provider_that_reaches_private_addresses_needs_a_grant_even_as_the_default(
    granted: Any, user: str, allowed: bool
) -> None:
    SigningKeys(granted.redis, granted.keys, granted.settings).add(user, acting=user)
    call = lambda: noti.notify_webhook("http://10.0.0.7/in", content=CONTENT, user=user)  # noqa: E731
    if allowed:
        assert call()
        return
    with pytest.raises(PermissionDenied) as denied:
        call()
    assert denied.value.code == "e.cmd.noti.add.providerdenied" and "private" in denied.value.message
    assert granted.store.count() == 0


def test_a_tokens_provider_list_narrows_even_an_administrator(granted: Any) -> None:
    notifier = noti.api.notifier()
    for user, provider in ((ALICE, "premium"), (ADMIN, "extra")):
        with pytest.raises(PermissionDenied):
            notifier.build(
                "sms",
                "+8613912345678",
                text="x",
                user=user,
                provider=provider,
                providers_allowed=frozenset({"cheap"}),
            )
    assert notifier.build(
        "sms",
        "+8613912345678",
        text="x",
        user=ALICE,
        provider="cheap",
        providers_allowed=frozenset({"cheap"}),
    )
    # a private-reaching default must be on the token's list too
    SigningKeys(granted.redis, granted.keys, granted.settings).add(ADMIN, acting=ADMIN)
    with pytest.raises(PermissionDenied):
        notifier.build(
            "webhook",
            "http://10.0.0.7/in",
            content=CONTENT,
            user=ADMIN,
            providers_allowed=frozenset({"cheap"}),
        )


def test_bulk_refuses_the_item_naming_a_provider_and_a_fallback_is_checked_too(granted: Any) -> None:
    result = noti.notify_many(
        [
            {"type": "sms", "to": "+8613912345678", "text": "ok"},
            {"type": "sms", "to": "+8613912345678", "text": "no", "provider": "premium"},
        ],
        user=BOB,
    )
    assert result.ids[0] is not None and result.ids[1] is None
    assert [(r.index, r.code) for r in result.refused] == [(1, "e.cmd.noti.add.providerdenied")]
    with pytest.raises(PermissionDenied):
        noti.notify_sms(
            "+8613912345678",
            "x",
            user=BOB,
            fallback={"type": "sms", "to": "+8613912345679", "text": "y", "provider": "premium"},
        )


@pytest.mark.parametrize(
    "grants",
    [{"not a user": ["x"]}, {ALICE: [""]}, {ALICE: ["a,b"]}, {ALICE: [" padded"]}, {"*": ["x" * 65]}],
)
def test_bad_grants_are_a_configuration_error(configure: Any, grants: dict[str, list[str]]) -> None:
    from pydantic import ValidationError

    with pytest.raises((InvalidConfig, ValidationError)):
        configure(provider_grants=grants)


def test_a_status_callback_through_a_private_reaching_default_needs_its_grant(granted: Any) -> None:
    # the callback would go through the webhook channel's default, which reaches private
    # addresses: refused when the notification is added, not left for the callback's turn
    for user in (ALICE, BOB):
        SigningKeys(granted.redis, granted.keys, granted.settings).add(user, acting=user)
    before = stored(granted)
    with pytest.raises(PermissionDenied) as denied:
        noti.notify_sms("+8613912345678", "x", user=ALICE, status_callback="http://10.0.0.7/cb")
    assert denied.value.code == "e.cmd.noti.add.providerdenied" and stored(granted) == before
    assert noti.notify_sms("+8613912345678", "x", user=BOB, status_callback="http://10.0.0.7/cb")
