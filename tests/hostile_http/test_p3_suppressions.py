"""``/v1/suppressions`` on the package's real ``noti serve``, beyond what
``tests/test_suppressions.py`` tries (its no-token, unknown-query, limit-0 and limit-text,
unknown-channel, ``%2F`` traversal, NUL and 5,000-character paths, a plain user lifting her
own, another's or a missing entry, a body naming a user): every token's view (revoked,
expired, narrowed, a user with no entry), the query's bounds and spellings, and the path's
tricks (encoded dots and slashes, look-alike Unicode, case, ``;`` parameters, lengths up to
the header limit) answered as root, where a trick that named another entry would lift it.
Each refusal has its status and code, and the database is unchanged; the answers and logs
are scanned for secrets with the package's.

The entries are seeded in the deployment's database with their whys (as a bounce, a
complaint or an opt-out would write them), for alice and bob and one older than whys.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from noti.core.suppression import Suppressed
from tests.conftest import ALICE, BOB
from tests.hostile_http.conftest import DB, Deployment
from tests.tables import by_id

BAD, NOPVG, NOT_FOUND = "e.noti.http.badrequest", "e.cmd.noti.suppress.nopvg", "e.cmd.noti.suppress.not_found"
BADTYPE, BADTARGET = "e.cmd.noti.suppress.badtype", "e.cmd.noti.suppress.badtarget"
NOROUTE, METHOD, HEADERS = "e.noti.http.noroute", "e.noti.http.method", "e.noti.http.headers"
HOOK = "https://hooks.example.com/in/a?b=1"
#: (channel, target, the user whose record caused it, why); "" user: suppressed before whys
SEEDED = [
    ("email", "gone@example.org", ALICE, "bounce"),
    ("email", "lift-me@example.org", ALICE, "bounce"),
    ("email", "angry@example.org", BOB, "complaint"),
    ("webhook", HOOK, BOB, "optout"),
    ("sms", "+8613900000001", "", ""),
]


@pytest.fixture(scope="module")
def seeded(deployment: Deployment, redis_server: str) -> Iterator[None]:
    """The entries of :data:`SEEDED`, written as noti writes them (the deployment settled)."""
    from noti.config import Settings
    from noti.sending.runtime import Runtime

    runtime = Runtime(Settings(redis_url=f"{redis_server}/{DB}"))
    try:
        for n, (channel, target, user, reason) in enumerate(SEEDED):
            if user:
                why = Suppressed(
                    channel, target, reason, f"{reason}/x", "why", f"01JSEED{n}", user, "ses", 1000 + n
                )
                runtime.store.suppressions.add(why)
            else:
                runtime.redis.sadd(runtime.keys.suppressed(channel), target)
    finally:
        runtime.close()
    yield


def listing(deployment: Deployment, client: httpx.Client, who: str, query: str = "") -> list[dict[str, Any]]:
    answer = deployment.ask(client, "GET", f"/v1/suppressions{query}", who=who)
    assert answer.status_code == 200, answer.text
    entries: list[dict[str, Any]] = answer.json()["suppressions"]
    return entries


#: (token, the user it acts as; None: root, who sees every entry)
VIEWS = [("alice", ALICE), ("alice2", ALICE), ("alice_vendor", ALICE), ("bob", BOB), ("carol", "carol"),
         ("ops", None), ("boss", None), ("boss_vendor", None)]  # fmt: skip


@pytest.mark.parametrize("query", ["", "?channel=email", "?channel=webhook", "?channel=sms", "?limit=1"])
@pytest.mark.parametrize(("who", "user"), VIEWS, ids=[v[0] for v in VIEWS])
def test_each_token_sees_only_what_its_user_may(
    deployment: Deployment, client: httpx.Client, seeded: None, who: str, user: str | None, query: str
) -> None:
    with deployment.unchanged():
        shown = listing(deployment, client, who, query)
    channel = query.removeprefix("?channel=") if "channel" in query else None
    expected = {(c, t) for c, t, u, _ in SEEDED if (user is None or u == user) and channel in (None, c)}
    got = {(e["channel"], e["target"]) for e in shown}
    if user is not None:  # never another user's entry, nor one that names no user
        assert {e["user"] for e in shown} <= {user}, shown
    if query == "?limit=1":
        assert len(shown) == (1 if expected else 0), shown
    else:
        assert expected <= got, (expected, got)


#: (id, method, the path (and query) after /v1/suppressions, token, status, code)
CASES: list[tuple[str, str, str, str | None, int, str]] = [
    # tokens that are no more
    ("revoked-token", "GET", "", "revoked", 401, "e.noti.auth.revoked"),
    ("expired-token", "GET", "", "expired", 401, "e.noti.auth.expired"),
    ("expired-token-delete", "DELETE", "/email/gone@example.org", "expired", 401, "e.noti.auth.expired"),
    # the query's bounds and spellings
    ("limit-10001", "GET", "?limit=10001", "ops", 422, BAD),
    ("limit-negative", "GET", "?limit=-1", "ops", 422, BAD),
    ("limit-float", "GET", "?limit=1.5", "ops", 422, BAD),
    ("limit-exponent", "GET", "?limit=1e3", "ops", 422, BAD),
    ("limit-huge", "GET", "?limit=" + "9" * 30, "ops", 422, BAD),
    ("limit-empty", "GET", "?limit=", "ops", 422, BAD),
    ("limit-twice-one-bad", "GET", "?limit=1&limit=x", "ops", 422, BAD),
    ("limit-unicode-digits", "GET", "?limit=%D9%A1", "ops", 422, BAD),
    ("channel-upper-case", "GET", "?channel=EMAIL", "alice", 422, BADTYPE),
    ("channel-empty", "GET", "?channel=", "alice", 422, BADTYPE),
    ("channel-nul", "GET", "?channel=email%00", "alice", 422, BADTYPE),
    ("channel-fullwidth", "GET", "?channel=%EF%BD%85mail", "alice", 422, BADTYPE),
    ("channel-64", "GET", "?channel=" + "e" * 64, "alice", 422, BADTYPE),
    ("channel-65", "GET", "?channel=" + "e" * 65, "alice", 422, BAD),
    ("array-syntax", "GET", "?channel[]=email", "alice", 422, BAD),
    ("as-someone", "GET", "?as=ops", "alice", 422, BAD),
    ("many-unknown", "GET", "?" + "&".join(f"p{n}=1" for n in range(200)), "alice", 422, BAD),
    # a plain user: refused before the path is looked at, whatever it names
    ("bob-lifts-alices-encoded", "DELETE", "/email/gone%40example.org", "bob", 403, NOPVG),
    ("bob-lifts-his-webhook", "DELETE", f"/webhook/{quote(HOOK, safe='')}", "bob", 403, NOPVG),
    ("alice-lifts-with-dots", "DELETE", "/%2e%2e/email/gone@example.org", "alice", 403, NOPVG),
    ("alice-narrowed-token", "DELETE", "/email/gone@example.org", "alice_vendor", 403, NOPVG),
    # root: each trick names nothing suppressed, or nothing at all (nothing lifted)
    ("encoded-dots-channel", "DELETE", "/%2e%2e/email/gone@example.org", "ops", 422, BADTYPE),
    ("encoded-slash-to-webhook", "DELETE", "/email%2F..%2Fwebhook/x", "ops", 422, BADTARGET),
    ("double-encoded-slash", "DELETE", "/email/x%252F..%252Fgone@example.org", "ops", 404, NOT_FOUND),
    ("semicolon-parameter", "DELETE", "/email;v=1/gone@example.org", "ops", 422, BADTYPE),
    ("channel-upper-case-delete", "DELETE", "/EMAIL/gone@example.org", "boss", 422, BADTYPE),
    ("cyrillic-o", "DELETE", "/email/g%D0%BEne@example.org", "boss", 404, NOT_FOUND),
    ("fullwidth-g", "DELETE", "/email/%EF%BD%87one@example.org", "boss", 404, NOT_FOUND),
    ("zero-width-space", "DELETE", "/email/go%E2%80%8Bne@example.org", "boss", 404, NOT_FOUND),
    ("idn-domain", "DELETE", "/email/gone@ex%C3%A4mple.org", "boss", 422, BADTARGET),
    ("trailing-dot", "DELETE", "/email/gone@example.org.", "boss", 422, BADTARGET),
    ("trailing-slash", "DELETE", "/email/gone@example.org/", "boss", 422, BADTARGET),
    # crlf: the route takes no line break
    ("crlf", "DELETE", "/email/gone@example.org%0D%0AX:%20y", "boss", 404, NOROUTE),
    ("empty-target", "DELETE", "/email/", "boss", 422, BADTARGET),
    ("no-target", "DELETE", "/email", "boss", 404, NOROUTE),
    ("no-channel", "DELETE", "", "boss", 405, METHOD),
    ("target-255", "DELETE", "/email/" + "a" * 243 + "@example.org", "boss", 422, BADTARGET),
    ("channel-300", "DELETE", "/" + "e" * 300 + "/gone@example.org", "boss", 422, BADTYPE),
    ("path-over-the-header-limit", "DELETE", "/email/" + "a" * 20_000 + "@e.org", "boss", 431, HEADERS),
    ("phone-in-email", "DELETE", "/email/+8613900000001", "boss", 422, BADTARGET),
    ("webhook-half-encoded", "DELETE", "/webhook/https:%2F%2Fhooks.example.com%2Fin%2Fb", "boss", 404,
     NOT_FOUND),
    # no other method
    ("post", "POST", "", "boss", 405, METHOD),
    ("put", "PUT", "/email/gone@example.org", "boss", 405, METHOD),
    ("patch", "PATCH", "/email/gone@example.org", "boss", 405, METHOD),
]  # fmt: skip


@by_id("method, path, who, status, code", CASES)
def test_a_hostile_suppressions_request_is_refused_and_changes_nothing(
    deployment: Deployment,
    client: httpx.Client,
    seeded: None,
    method: str,
    path: str,
    who: str | None,
    status: int,
    code: str,
) -> None:
    deployment.refuses(status, code, client, method, f"/v1/suppressions{path}", who=who)


def test_root_lifts_one_entry_and_only_it(deployment: Deployment, client: httpx.Client, seeded: None) -> None:
    # given alice's entry, which she cannot lift herself
    before = {(e["channel"], e["target"]) for e in listing(deployment, client, "boss")}
    deployment.refuses(
        403, NOPVG, client, "DELETE", "/v1/suppressions/email/lift-me@example.org", who="alice"
    )
    # when a root member lifts it (the address percent-encoded, as a client may send it)
    answer = deployment.ask(client, "DELETE", "/v1/suppressions/email/lift-me%40example.org", who="ops")
    assert answer.status_code == 200, answer.text
    assert (answer.json()["target"], answer.json()["user"], answer.json()["reason"]) == (
        "lift-me@example.org", ALICE, "bounce",
    )  # fmt: skip
    # then it is gone for everyone, and nothing else is
    after = {(e["channel"], e["target"]) for e in listing(deployment, client, "boss")}
    assert before - after == {("email", "lift-me@example.org")} and after <= before
    assert "lift-me@example.org" not in {e["target"] for e in listing(deployment, client, "alice")}
    deployment.refuses(
        404, NOT_FOUND, client, "DELETE", "/v1/suppressions/email/lift-me@example.org", who="boss"
    )
