"""API tokens (noti.access.tokens) and ``noti token add | list | revoke``: only root administrators
manage them, Redis never holds a token (only its SHA-256), a revoked one authenticates nothing,
and every bad argument is refused with its code, nothing stored."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

import pytest

from noti.access.tokens import PREFIX, digest_of
from noti.errors import InvalidInput, NotFound, PermissionDenied, RateLimitExceeded, Unauthenticated
from tests.conftest import ADMIN, ALICE, BOB, MEMBER
from tests.noti_cli import invoke

pytestmark = pytest.mark.bounds  # click and pydantic: run on the lowest versions too


def everything_in(rt: Any) -> str:
    """Every key and value of the test database, as one text."""
    parts = []
    for key in rt.redis.scan_iter(count=1000):
        kind = rt.redis.type(key)
        parts.append(key)
        if kind == "hash":
            parts += [f"{k}={v}" for k, v in rt.redis.hgetall(key).items()]
        elif kind == "zset":
            parts += [str(m) for m in rt.redis.zrange(key, 0, -1)]
        elif kind == "string":
            parts.append(str(rt.redis.get(key)))
    return "\n".join(parts)


def run(*args: str, user: str = ADMIN) -> Any:
    """``noti -as USER ARGS…`` in this process, through the console entry's error handling."""
    return invoke("-as", user, *args)


def test_the_cli_adds_lists_and_revokes_and_redis_holds_only_the_hash(rt: Any) -> None:
    # given a token made with the CLI
    made = run("token", "add", "-user", ALICE, "-cap", "5", "-rate", "20", "-note", "shop backend", "-json")
    assert made.exit_code == 0, made.output
    shown = json.loads(made.stdout)
    plain = shown["token"]
    assert plain.startswith(PREFIX) and len(plain) == len(PREFIX) + 43
    assert (shown["user"], shown["level_cap"], shown["rate_per_s"]) == (ALICE, 5, 20.0)
    # then Redis has its digest, never the token or any part of its secret
    stored = everything_in(rt)
    assert digest_of(plain) in stored
    assert plain not in stored and plain[len(PREFIX) : len(PREFIX) + 12] not in stored
    # and it authenticates as its user, with its cap
    caller = rt.tokens.authenticate(plain)
    assert (caller.user, caller.level_cap, caller.token_id) == (ALICE, 5, shown["id"])
    # list shows it by id, never the token
    listed = run("token", "list")
    assert listed.exit_code == 0 and shown["id"] in listed.stdout and plain not in listed.stdout
    assert "shop backend" in listed.stdout and "20/s" in listed.stdout
    as_json = json.loads(run("token", "list", "-json").stdout)
    assert [t["id"] for t in as_json] == [shown["id"]] and as_json[0]["used_ms"] is not None
    # when it is revoked by a prefix of its id
    revoked = run("token", "revoke", shown["id"][:8])
    assert revoked.exit_code == 0 and f"revoked {shown['id']}" in revoked.stdout
    # then it authenticates nothing, and stays listed as revoked
    with pytest.raises(Unauthenticated) as refused:
        rt.tokens.authenticate(plain)
    assert refused.value.code == "e.noti.auth.revoked"
    assert json.loads(run("token", "list", "-json").stdout)[0]["revoked_ms"] is not None
    # revoking again changes nothing (the first revocation's time stays)
    first = rt.tokens.revoke(plain, acting=ADMIN).revoked_ms
    assert rt.tokens.revoke(shown["id"], acting=ADMIN).revoked_ms == first


def test_the_plain_add_prints_the_token_alone_on_stdout(rt: Any) -> None:
    made = run("token", "add", "-user", ALICE)
    assert made.exit_code == 0
    plain = made.stdout.strip()
    assert plain.startswith(PREFIX) and "\n" not in plain  # TOKEN=$(noti token add ...) works
    assert "not shown again" in made.stderr
    assert rt.tokens.authenticate(plain).user == ALICE


@pytest.mark.parametrize("user", [ALICE, MEMBER])
def test_only_root_administrators_manage_tokens(rt: Any, user: str) -> None:
    plain, info = rt.tokens.add(ALICE, acting=ADMIN)
    before = everything_in(rt)
    for args in (("token", "add", "-user", user), ("token", "list"), ("token", "revoke", info.id)):
        refused = run(*args, user=user)
        assert refused.exit_code == 1 and refused.stderr.startswith("e.noti.token.nopvg:"), args
    assert everything_in(rt) == before
    with pytest.raises(PermissionDenied):
        rt.tokens.add(user, acting=user)


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        ({"user": "a:b"}, "e.cmd.noti.baduser"),
        ({"user": ""}, "e.cmd.noti.baduser"),
        ({"user": ALICE, "level_cap": 0}, "e.noti.token.badcap"),
        ({"user": ALICE, "level_cap": 1001}, "e.noti.token.badcap"),
        ({"user": ALICE, "level_cap": True}, "e.noti.token.badcap"),
        ({"user": ALICE, "rate_per_s": 0}, "e.noti.token.badrate"),
        ({"user": ALICE, "rate_per_s": -1.0}, "e.noti.token.badrate"),
        ({"user": ALICE, "rate_per_s": float("nan")}, "e.noti.token.badrate"),
        ({"user": ALICE, "rate_per_s": 1e7}, "e.noti.token.badrate"),
        ({"user": ALICE, "note": "a\nb"}, "e.noti.token.badnote"),
        ({"user": ALICE, "note": "n" * 201}, "e.noti.token.badnote"),
    ],
)
def test_bad_arguments_store_nothing(rt: Any, kwargs: dict[str, Any], code: str) -> None:
    user = kwargs.pop("user")
    with pytest.raises(InvalidInput) as refused:
        rt.tokens.add(user, acting=ADMIN, **kwargs)
    assert refused.value.code == code
    assert list(rt.redis.scan_iter()) == []


def test_revoke_by_id_needs_enough_digits_and_one_match(rt: Any) -> None:
    _, info = rt.tokens.add(ALICE, acting=ADMIN)
    for ident, error, code in (
        ("abc", InvalidInput, "e.noti.token.badid"),  # too short
        ("zzzzzzzz", InvalidInput, "e.noti.token.badid"),  # not hex
        ("", InvalidInput, "e.noti.token.badid"),
        ("0" * 12 if not info.id.startswith("0") else "1" * 12, NotFound, "e.noti.token.not_found"),
        (PREFIX + "unknown", NotFound, "e.noti.token.not_found"),
    ):
        with pytest.raises(error) as refused:
            rt.tokens.revoke(ident, acting=ADMIN)
        assert refused.value.code == code, ident
    assert rt.tokens.entries(acting=ADMIN)[0].revoked_ms is None
    assert rt.tokens.revoke(info.id, acting=ADMIN).id == info.id


def test_the_rate_limit_lets_a_burst_in_then_one_per_period(rt: Any) -> None:
    plain, _ = rt.tokens.add(ALICE, acting=ADMIN, rate_per_s=3)
    for _ in range(3):  # a burst of ceil(3) requests
        rt.tokens.authenticate(plain)
    with pytest.raises(RateLimitExceeded) as limited:
        rt.tokens.authenticate(plain)
    assert limited.value.code == "e.noti.auth.rate" and 0 < limited.value.retry_after_s <= 0.34


def test_a_token_without_limits_never_writes_more_than_its_last_use(rt: Any) -> None:
    plain, info = rt.tokens.add(ALICE, acting=ADMIN)
    for _ in range(50):
        rt.tokens.authenticate(plain)
    stored = rt.redis.hgetall(rt.keys.token(digest_of(plain)))
    assert set(stored) == {"user", "cap", "rate", "note", "created_ms", "used_ms"}
    assert info.used_ms is None and int(stored["used_ms"]) >= info.created_ms


# --- expiry and providers -------------------------------------------------------------------------


def test_an_expired_token_is_401_expired_and_takes_nothing_from_its_bucket(rt: Any) -> None:
    # given a token that expires in an hour, with a rate limit
    plain, info = rt.tokens.add(ALICE, acting=ADMIN, expires="1h", rate_per_s=5)
    assert info.expires_ms == info.created_ms + 3_600_000
    assert rt.tokens.authenticate(plain).user == ALICE  # not expired yet
    key = rt.keys.token(digest_of(plain))
    # when its hour has passed (by the Redis server's clock, which decides)
    seconds, micros = rt.redis.time()
    now = seconds * 1000 + micros // 1000
    rt.redis.hset(key, "expires_ms", str(now - 1))
    before = rt.redis.hgetall(key)
    # then it authenticates nothing, with its own code, and its hash is left as it was
    for _ in range(3):
        with pytest.raises(Unauthenticated) as refused:
            rt.tokens.authenticate(plain)
        assert refused.value.code == "e.noti.auth.expired"
        assert "expired at" in refused.value.message
    assert rt.redis.hgetall(key) == before
    # and it stays listed, marked expired
    [listed] = rt.tokens.entries(acting=ADMIN)
    assert listed.expires_ms == now - 1 and listed.expired() and not listed.revoked
    table = run("token", "list")
    assert "(expired)" in table.stdout
    # a revoked token says revoked, whether or not it expired too
    rt.tokens.revoke(plain, acting=ADMIN)
    with pytest.raises(Unauthenticated) as revoked:
        rt.tokens.authenticate(plain)
    assert revoked.value.code == "e.noti.auth.revoked"


def test_a_token_expires_at_its_millisecond(rt: Any) -> None:
    # a real short expiry, without writing the stored field: one second
    plain, info = rt.tokens.add(ALICE, acting=ADMIN, expires="1s")
    assert rt.tokens.authenticate(plain).user == ALICE
    seconds, micros = rt.redis.time()
    wait_s = (info.expires_ms - (seconds * 1000 + micros // 1000)) / 1000 + 0.05
    assert 0 < wait_s < 1.2
    time.sleep(wait_s)
    with pytest.raises(Unauthenticated) as refused:
        rt.tokens.authenticate(plain)
    assert refused.value.code == "e.noti.auth.expired"


def test_the_cli_takes_lifetimes_and_dates_and_lists_them(rt: Any) -> None:
    made = json.loads(run("token", "add", "-user", ALICE, "-expires", "30d", "-json").stdout)
    assert made["expires_ms"] == made["created_ms"] + 30 * 86_400_000
    year = datetime.now(UTC).year + 2
    midnight = int(datetime(year, 1, 31, tzinfo=UTC).timestamp()) * 1000
    dated = json.loads(run("token", "add", "-user", ALICE, "-expires", f"{year}-01-31", "-json").stdout)
    assert dated["expires_ms"] == midnight  # a date without a zone: its midnight UTC
    zoned = run("token", "add", "-user", ALICE, "-expires", f"{year}-01-31T12:00:00+08:00", "-json")
    assert json.loads(zoned.stdout)["expires_ms"] == midnight + 4 * 3_600_000
    plain = run("token", "add", "-user", ALICE, "-expires", "12h")
    assert plain.exit_code == 0 and "expires " in plain.stderr
    listed = {t["id"]: t for t in json.loads(run("token", "list", "-json").stdout)}
    assert listed[made["id"]]["expires_ms"] == made["expires_ms"]
    table = run("token", "list").stdout
    assert "EXPIRES (UTC)" in table and f"{year}-01-31 00:00:00" in table and "(expired)" not in table
    # a token made without -expires never expires
    forever = json.loads(run("token", "add", "-user", ALICE, "-json").stdout)
    assert forever["expires_ms"] is None
    assert "expires_ms" not in rt.redis.hgetall(rt.keys.token(digest_of(forever["token"])))


@pytest.mark.parametrize(
    "expires",
    [
        "0d",
        "-5d",
        "30x",
        "1.5h",
        "1e3s",
        "30 d",
        "",
        "yesterday",
        "2020-01-01",
        "2029-13-01",
        "3651d",
        "2999-01-01",
    ],
)
def test_nonsense_expiry_is_refused_and_stores_nothing(rt: Any, expires: str) -> None:
    refused = run("token", "add", "-user", ALICE, "-expires", expires)
    assert refused.exit_code == 1 and refused.stderr.startswith("e.noti.token.badexpiry: "), refused.output
    assert list(rt.redis.scan_iter()) == []
    with pytest.raises(InvalidInput) as api:
        rt.tokens.add(ALICE, acting=ADMIN, expires=expires)
    assert api.value.code == "e.noti.token.badexpiry"
    assert list(rt.redis.scan_iter()) == []


def test_the_providers_of_a_token_round_trip(rt: Any) -> None:
    # given a token limited to two providers, made with the CLI, and one without a limit
    made = json.loads(run("token", "add", "-user", ALICE, "-providers", "hook, aliyun", "-json").stdout)
    assert made["providers"] == ["aliyun", "hook"]
    free, _ = rt.tokens.add(ALICE, acting=ADMIN)
    # then authenticating returns them, and None for the token that names none
    assert rt.tokens.authenticate(made["token"]).providers == frozenset({"hook", "aliyun"})
    assert rt.tokens.authenticate(free).providers is None
    # and the list shows them
    listed = {t["id"]: t for t in json.loads(run("token", "list", "-json").stdout)}
    assert listed[made["id"]]["providers"] == ["aliyun", "hook"]
    assert [t["providers"] for t in listed.values() if t["id"] != made["id"]] == [None]
    assert "aliyun,hook" in run("token", "list").stdout
    # the Python API takes a list too
    plain, info = rt.tokens.add(BOB, acting=ADMIN, providers=["twilio"])
    assert info.providers == frozenset({"twilio"}) == rt.tokens.authenticate(plain).providers


@pytest.mark.parametrize("providers", ["", ",", "a b", "a,,b", "x" * 65, "a\tb"])
def test_bad_provider_lists_are_refused_and_store_nothing(rt: Any, providers: str) -> None:
    refused = run("token", "add", "-user", ALICE, "-providers", providers)
    assert refused.exit_code == 1 and refused.stderr.startswith("e.noti.token.badproviders: "), refused.output
    assert list(rt.redis.scan_iter()) == []


def test_a_non_administrator_learns_nothing_of_which_token_ids_exist(rt: Any) -> None:
    # tokens belong to no plain user: every verb on them is an administrator's, so a plain
    # user or a root member gets the same refusal for a token id that exists and one that does not
    _, info = rt.tokens.add(ALICE, acting=ADMIN)
    for user in (ALICE, MEMBER):
        real = run("token", "revoke", info.id, user=user)
        ghost = run("token", "revoke", "0123456789ab", user=user)
        assert (real.exit_code, real.stderr) == (ghost.exit_code, ghost.stderr) == (1, real.stderr)
        assert real.stderr.startswith("e.noti.token.nopvg: ")
