"""The suppression list, visible and manageable (issue 33, point 4): who sees which entries and
who lifts them (noti.sending.suppressions), through the Python API, ``noti suppress`` and
``/v1/suppressions`` on a real ``noti serve``: cross-user listings, hostile paths, queries
and bodies refused with their codes and nothing changed (the hostile-HTTP suite's digest)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest
import redis

from noti.cli import main
from noti.core.suppression import Suppressed
from noti.errors import InvalidInput, NotFound, PermissionDenied
from noti.sending.suppressions import Suppressions
from tests.clirunner import cli_runner
from tests.conftest import ADMIN, ALICE, BOB, MEMBER
from tests.hostile_http.harness import changes, digest
from tests.servers import ApiProcess

HOOK = "https://hooks.example.com/in/a?b=1"
BADREQ, NOAUTH, BADTYPE = "e.noti.http.badrequest", "e.noti.auth.missing", "e.cmd.noti.suppress.badtype"


def seed(rt: Any) -> None:
    """alice's bounce, bob's complaint, an old entry without why, and a webhook of bob's."""
    rt.store.suppress("email", "gone@example.org", why=Suppressed("", "", "bounce", "Permanent/General",
                      "smtp; 550", "01JALICE", ALICE, "ses", 3000))  # fmt: skip
    rt.store.suppress("email", "angry@example.org", why=Suppressed("", "", "complaint", "complaint/abuse",
                      "abuse", "01JBOB", BOB, "ses", 2000))  # fmt: skip
    rt.redis.sadd(rt.keys.suppressed("sms"), "+8613912345678")  # suppressed before whys were kept
    rt.store.suppress("webhook", HOOK, why=Suppressed("", "", "optout", "e.noti.delivery.optedout", "410",
                      "01JHOOK", BOB, "hooks", 1000))  # fmt: skip


def targets(entries: list[Suppressed]) -> list[str]:
    return [e.target for e in entries]


# --- the Python API ------------------------------------------------------------------------------


def test_root_sees_every_entry_newest_first_and_a_user_only_her_records(rt: Any) -> None:
    seed(rt)
    api = Suppressions(rt)
    everything = ["gone@example.org", "angry@example.org", HOOK, "+8613912345678"]
    assert targets(api.entries(user=MEMBER)) == targets(api.entries(user=ADMIN)) == everything
    assert targets(api.entries(user=ALICE)) == ["gone@example.org"]
    assert targets(api.entries(user=BOB)) == ["angry@example.org", HOOK]
    assert targets(api.entries(user="carol")) == []
    assert targets(api.entries(user=MEMBER, channel="email", limit=1)) == ["gone@example.org"]
    [old] = api.entries(user=MEMBER, channel="sms")
    assert (old.reason, old.user, old.at_ms) == ("", "", 0)


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        ({"channel": "fax"}, BADTYPE),
        ({"channel": "x" * 5000}, BADTYPE),
        ({"limit": 0}, "e.cmd.noti.suppress.badlimit"),
        ({"limit": True}, "e.cmd.noti.suppress.badlimit"),
        ({"user": "no body"}, "e.cmd.noti.baduser"),
    ],
)
def test_a_bad_listing_is_refused(rt: Any, kwargs: dict[str, Any], code: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        Suppressions(rt).entries(**{"user": ALICE, **kwargs})
    assert refused.value.code == code


def test_only_root_lifts_and_a_plain_user_learns_nothing_by_asking(rt: Any) -> None:
    seed(rt)
    api = Suppressions(rt)
    raw = redis.Redis.from_url(rt.settings.redis_url)
    before = digest(raw)
    for target in ("gone@example.org", "nobody@example.org", "not an address"):
        with pytest.raises(PermissionDenied) as refused:
            api.lift("email", target, user=ALICE)
        assert refused.value.code == "e.cmd.noti.suppress.nopvg"
    assert digest(raw) == before
    lifted = api.lift("email", "gone@example.org", user=MEMBER)
    assert (lifted.reason, lifted.record) == ("bounce", "01JALICE")
    assert not rt.store.is_suppressed("email", "gone@example.org")
    assert not rt.redis.hexists(rt.keys.suppressed_why("email"), "gone@example.org")
    with pytest.raises(NotFound) as missing:
        api.lift("email", "gone@example.org", user=ADMIN)
    assert missing.value.code == "e.cmd.noti.suppress.not_found"
    for channel, target, code in (("fax", "x", "badtype"), ("email", "not an address", "badtarget")):
        with pytest.raises(InvalidInput) as bad:
            api.lift(channel, target, user=ADMIN)
        assert bad.value.code == f"e.cmd.noti.suppress.{code}"


def test_the_first_why_is_kept(rt: Any) -> None:
    rt.store.suppress("email", "a@example.org", why=Suppressed("", "", reason="bounce", record="01JFIRST"))
    rt.store.suppress("email", "a@example.org", why=Suppressed("", "", reason="complaint", record="01JLATER"))
    entry = rt.store.suppressions.get("email", "a@example.org")
    assert (entry.reason, entry.record) == ("bounce", "01JFIRST")


# --- the CLI ---------------------------------------------------------------------------------------


def run(*args: str, user: str = ALICE) -> Any:
    import click

    @click.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
    @click.pass_context
    def entry(ctx: click.Context) -> None:
        main(list(ctx.args))

    return cli_runner().invoke(entry, ["--as", user, *args], catch_exceptions=False)


def test_noti_suppress_list_and_del(rt: Any) -> None:
    import json

    seed(rt)
    shown = run("suppress", "list", "email", "-json", user=MEMBER)
    assert shown.exit_code == 0, shown.output
    assert [e["target"] for e in json.loads(shown.stdout)] == ["gone@example.org", "angry@example.org"]
    table = run("suppress", "list", user=ALICE)
    assert "gone@example.org" in table.stdout and "angry@example.org" not in table.stdout
    refused = run("suppress", "del", "email", "gone@example.org", user=ALICE)
    assert refused.exit_code == 1 and refused.stderr.startswith("e.cmd.noti.suppress.nopvg:")
    lifted = run("suppress", "del", "email", "gone@example.org", user=MEMBER)
    assert lifted.exit_code == 0 and "lifted (bounce)" in lifted.stdout
    again = run("suppress", "del", "email", "gone@example.org", user=MEMBER)
    assert again.exit_code == 1 and again.stderr.startswith("e.cmd.noti.suppress.not_found:")
    # the old spelling still lifts one, and its why with it
    old = run("dead", "unsuppress", "email", "angry@example.org", user=MEMBER)
    assert old.exit_code == 0 and "opt-out lifted" in old.stdout
    assert not rt.redis.hexists(rt.keys.suppressed_why("email"), "angry@example.org")


# --- over HTTP -------------------------------------------------------------------------------------


@pytest.fixture
def client(api: ApiProcess, rt: Any) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=api.url, timeout=10.0) as made:
        yield made


@pytest.fixture
def as_(rt: Any) -> Callable[[str], dict[str, str]]:
    made: dict[str, str] = {}

    def headers(user: str) -> dict[str, str]:
        if user not in made:
            made[user] = rt.tokens.add(user, acting=ADMIN)[0]
        return {"Authorization": f"Bearer {made[user]}"}

    return headers


def error_of(answer: httpx.Response) -> tuple[int, str]:
    return answer.status_code, answer.json()["error"]["code"]


def test_each_user_lists_what_she_may_see(client: httpx.Client, rt: Any, as_: Any) -> None:
    seed(rt)

    def listed(user: str, query: str = "") -> list[str]:
        answer = client.get(f"/v1/suppressions{query}", headers=as_(user))
        assert answer.status_code == 200, answer.text
        return [e["target"] for e in answer.json()["suppressions"]]

    assert (
        listed(MEMBER) == listed(ADMIN) == ["gone@example.org", "angry@example.org", HOOK, "+8613912345678"]
    )
    assert listed(ALICE) == ["gone@example.org"]
    assert listed(BOB, "?channel=webhook") == [HOOK]
    assert listed(ALICE, "?channel=webhook") == []
    [entry] = client.get("/v1/suppressions?limit=1", headers=as_(MEMBER)).json()["suppressions"]
    assert entry == {
        "channel": "email",
        "target": "gone@example.org",
        "reason": "bounce",
        "code": "Permanent/General",
        "text": "smtp; 550",
        "record": "01JALICE",
        "user": ALICE,
        "provider": "ses",
        "at_ms": 3000,
    }


HOSTILE: list[tuple[str, str, str, str, dict[str, Any], int, str]] = [
    ("no-token", "GET", "/v1/suppressions", "", {}, 401, NOAUTH),
    ("unknown-query", "GET", "/v1/suppressions?user=bob", ALICE, {}, 422, BADREQ),
    ("limit-zero", "GET", "/v1/suppressions?limit=0", MEMBER, {}, 422, BADREQ),
    ("limit-text", "GET", "/v1/suppressions?limit=all", MEMBER, {}, 422, BADREQ),
    ("channel-unknown", "GET", "/v1/suppressions?channel=fax", MEMBER, {}, 422, BADTYPE),
    ("channel-huge", "GET", "/v1/suppressions?channel=" + "e" * 5000, MEMBER, {}, 422, BADREQ),
    ("plain-user-lifts-own", "DELETE", "/v1/suppressions/email/gone@example.org", ALICE, {}, 403,
     "e.cmd.noti.suppress.nopvg"),
    ("plain-user-lifts-other", "DELETE", "/v1/suppressions/email/angry@example.org", ALICE, {}, 403,
     "e.cmd.noti.suppress.nopvg"),
    ("plain-user-missing", "DELETE", "/v1/suppressions/email/none@example.org", BOB, {}, 403,
     "e.cmd.noti.suppress.nopvg"),
    ("no-token-delete", "DELETE", "/v1/suppressions/email/gone@example.org", "", {}, 401, NOAUTH),
    ("not-suppressed", "DELETE", "/v1/suppressions/email/none@example.org", MEMBER, {}, 404,
     "e.cmd.noti.suppress.not_found"),
    ("channel-unknown-delete", "DELETE", "/v1/suppressions/fax/x", MEMBER, {}, 422, BADTYPE),
    ("traversal", "DELETE", "/v1/suppressions/email/..%2F..%2Fv1%2Fnotifications", MEMBER, {}, 422,
     "e.cmd.noti.suppress.badtarget"),
    ("nul-in-target", "DELETE", "/v1/suppressions/email/gone%00@example.org", MEMBER, {}, 422,
     "e.cmd.noti.suppress.badtarget"),
    ("huge-target", "DELETE", "/v1/suppressions/email/" + "a" * 5000 + "@example.org", MEMBER, {}, 422,
     "e.cmd.noti.suppress.badtarget"),
    ("body-naming-a-user", "DELETE", "/v1/suppressions/email/gone@example.org", BOB,
     {"json": {"user": MEMBER, "as": MEMBER}}, 403, "e.cmd.noti.suppress.nopvg"),
    ("query-on-delete", "DELETE", "/v1/suppressions/email/gone@example.org?as=ops", BOB, {}, 422,
     BADREQ),
]  # fmt: skip


@pytest.mark.parametrize(
    ("method", "path", "who", "kwargs", "status", "code"),
    [h[1:] for h in HOSTILE],
    ids=[h[0] for h in HOSTILE],
)
def test_a_refused_request_changes_nothing(
    client: httpx.Client,
    rt: Any,
    as_: Any,
    method: str,
    path: str,
    who: str,
    kwargs: dict[str, Any],
    status: int,
    code: str,
) -> None:
    seed(rt)
    headers = as_(who) if who else {}
    raw = redis.Redis.from_url(rt.settings.redis_url)
    before = digest(raw)
    answer = client.request(method, path, headers=headers, **kwargs)
    assert error_of(answer) == (status, code), answer.text
    assert "Traceback" not in answer.text
    after = digest(raw)
    assert after == before, changes(before, after)


def test_root_lifts_one_a_webhook_url_too(client: httpx.Client, rt: Any, as_: Any) -> None:
    seed(rt)
    answer = client.delete(f"/v1/suppressions/webhook/{quote(HOOK, safe='')}", headers=as_(ADMIN))
    assert answer.status_code == 200, answer.text
    assert answer.json()["target"] == HOOK and answer.json()["reason"] == "optout"
    assert not rt.store.is_suppressed("webhook", HOOK)
    answer = client.delete("/v1/suppressions/email/gone@example.org", headers=as_(MEMBER))
    assert answer.status_code == 200 and answer.json()["record"] == "01JALICE"
    assert [e.target for e in Suppressions(rt).entries(user=ADMIN)] == ["angry@example.org", "+8613912345678"]
