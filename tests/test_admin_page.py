"""The admin page (``/admin``) through a real ``noti serve`` on loopback, on the test Redis: its
session (an API token in an HttpOnly, SameSite=Strict cookie, authenticated per request as a
bearer token is), who sees what (a user their own, root members everyone's; another user's
record answered as a missing one), its forms (refused without the session's CSRF token or from
another origin, nothing changed), hostile input (answered 4xx, nothing changed) and escaping.
The browser's view, JavaScript on and off, is tests/test_admin_browser.py.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
import redis

import noti
from noti.core.attempt import Outcome
from noti.core.deadletter import DeadLetter
from noti.core.record import Status, new_id, now_ms
from noti.core.suppression import Suppressed
from tests.conftest import ADMIN, ALICE, BOB, MEMBER
from tests.servers import ApiProcess
from tests.test_http_api import stored

pytestmark = pytest.mark.bounds  # FastAPI, Jinja2, uvicorn: run on the lowest versions too

PHONE = "+8613912345678"
XSS = '<script>alert("x")</script><img src=x onerror=alert(1)>'
_CSRF = re.compile(r'name="csrf" value="([0-9a-f]{64})"')
_CODE = re.compile(r'<code id="code">([^<]*)</code>')


@pytest.fixture
def token(rt: Any) -> Callable[..., str]:
    """``token(user)``: a new API token (made by the root administrator)."""

    def make(user: str, **options: Any) -> str:
        plain, _ = rt.tokens.add(user, acting=ADMIN, **options)
        return str(plain)

    return make


@pytest.fixture
def raw(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture
def browser(api: ApiProcess, rt: Any) -> Callable[[], httpx.Client]:
    """``browser()``: a new client of the server with a cookie jar of its own, as a browser is."""
    made: list[httpx.Client] = []

    def new() -> httpx.Client:
        client = httpx.Client(base_url=api.url, timeout=10.0)
        made.append(client)
        return client

    yield new  # type: ignore[misc]
    for client in made:
        client.close()


def log_in(client: httpx.Client, plain: str) -> str:
    """Log ``client`` in with the token ``plain``; the CSRF token its forms carry."""
    answer = client.post("/admin/login", data={"token": plain, "after": "/admin/"})
    assert answer.status_code == 303, answer.text
    page = client.get("/admin/")
    assert page.status_code == 200, page.text
    found = _CSRF.search(page.text)
    assert found, page.text
    return found.group(1)


def code_of(answer: httpx.Response) -> tuple[int, str]:
    """The status and the error code an error page shows."""
    found = _CODE.search(answer.text)
    return answer.status_code, found.group(1) if found else ""


def failed_record(rt: Any, user: str, *, text: str = "your code is 4321", target: str = PHONE) -> str:
    """A record of ``user``'s that failed, with its dead letter (as a worker leaves it)."""
    record = noti.api.notifier().build("sms", target, text=text, user=user)
    rt.store.create(record)
    rt.store.claim(record.id, owner="w", lease_ms=1000)
    errmsg = "e.cmd.noti.send.reachMaxRetry: " + text
    letter = DeadLetter(record.id, "sms", target, 3, "exhausted", errmsg, now_ms())
    outcome = Outcome(Status.FAILED, errmsg, 3, error_class="exhausted")
    rt.store.finish(record.id, owner="w", outcome=outcome, letter=letter)
    return str(record.id)


# --- the session ----------------------------------------------------------------------------------


def test_logging_in_sets_an_httponly_strict_cookie_and_a_bad_token_sets_none(
    browser: Callable[[], httpx.Client], token: Callable[..., str]
) -> None:
    client = browser()
    # a wrong token: the login form again, 401, its message, no cookie
    wrong = client.post("/admin/login", data={"token": "noti_" + "x" * 43, "after": "/admin/"})
    assert wrong.status_code == 401 and "unknown API token" in wrong.text
    assert "set-cookie" not in wrong.headers and not client.cookies
    # a good one: sent on to where the form says, the cookie holding the token
    plain = token(ALICE)
    answer = client.post("/admin/login", data={"token": plain, "after": "/admin/held?limit=5"})
    assert answer.status_code == 303 and answer.headers["location"] == "/admin/held?limit=5"
    cookie = answer.headers["set-cookie"]
    assert cookie.startswith(f"noti_admin={plain};")
    attributes = {part.strip().lower() for part in cookie.split(";")[1:]}
    assert {"httponly", "path=/admin", "samesite=strict"} <= attributes
    assert "secure" not in attributes and not any(a.startswith(("max-age", "expires")) for a in attributes)
    assert client.get("/admin/held?limit=5").status_code == 200
    # behind a proxy that says the page is https, the cookie is Secure too
    proxied = browser().post(
        "/admin/login", data={"token": plain, "after": "/admin/"}, headers={"X-Forwarded-Proto": "https"}
    )
    assert "secure" in {part.strip().lower() for part in proxied.headers["set-cookie"].split(";")}
    # the login form sends the browser nowhere but the admin page
    for elsewhere in ("https://evil.example/", "//evil.example/admin/", "/v1/notifications", "/admin\\x"):
        gone = browser().post("/admin/login", data={"token": plain, "after": elsewhere})
        assert gone.status_code == 303 and gone.headers["location"] == "/admin/", elsewhere


def test_without_a_valid_session_every_page_is_the_login_form(
    browser: Callable[[], httpx.Client], token: Callable[..., str], rt: Any
) -> None:
    for path in ("/admin/", "/admin/notifications?status=failed", "/admin/dead", "/admin/tokens"):
        answer = browser().get(path)
        assert answer.status_code == 401, path
        assert (
            'name="token"' in answer.text
            and f'name="after" value="{path.replace("&", "&amp;")}"' in answer.text
        )
    # a cookie that is no token of ours: refused, and cleared
    client = browser()
    client.cookies.set("noti_admin", "noti_forged" + "x" * 37, path="/admin")
    answer = client.get("/admin/")
    assert answer.status_code == 401 and "unknown API token" in answer.text
    assert (
        answer.headers["set-cookie"].startswith('noti_admin=""')
        or "max-age=0" in answer.headers["set-cookie"].lower()
    )
    # a revoked token logs the page out at its next request; an expired one too
    plain = token(ALICE)
    client = browser()
    log_in(client, plain)
    rt.tokens.revoke(plain, acting=ADMIN)
    answer = client.get("/admin/notifications")
    assert answer.status_code == 401 and "revoked" in answer.text
    short = browser()
    log_in(short, token(ALICE, expires="1s"))
    time.sleep(1.1)
    answer = short.get("/admin/notifications")
    assert answer.status_code == 401 and "expired" in answer.text
    # the API takes no cookie and the page no bearer header: each its own credential
    other = browser()
    live = token(ALICE)
    log_in(other, live)
    assert other.get("/v1/notifications").status_code == 401
    assert browser().get("/admin/", headers={"Authorization": f"Bearer {live}"}).status_code == 401


def test_the_session_spends_the_tokens_rate_like_any_request(
    browser: Callable[[], httpx.Client], token: Callable[..., str]
) -> None:
    client = browser()
    # logging in is one request of the token's; so is each page
    assert client.post("/admin/login", data={"token": token(ALICE, rate_per_s=1)}).status_code == 303
    answers = [client.get("/admin/notifications") for _ in range(3)]
    refused = [a for a in answers if a.status_code == 429]
    assert refused and code_of(refused[0]) == (429, "e.noti.auth.rate")
    assert int(refused[0].headers["retry-after"]) >= 1


def test_every_answer_forbids_framing_caching_and_foreign_scripts(
    browser: Callable[[], httpx.Client], token: Callable[..., str]
) -> None:
    client = browser()
    log_in(client, token(ADMIN))
    for path in ("/admin/", "/admin/login", "/admin/nope", "/admin/static/admin.css"):
        headers = client.get(path).headers
        policy = headers["content-security-policy"]
        assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy, path
        assert headers["x-frame-options"] == "DENY" and headers["cache-control"] == "no-store"
    page = client.get("/admin/").text
    # everything it loads is its own: no CDN, no other host
    for url in re.findall(r'(?:src|href)="([^"]*)"', page):
        assert url.startswith("/admin/"), url
    assert client.get("/admin/static/admin.js").headers["content-type"].startswith("text/javascript")
    assert client.get("/admin/static/../../noti.toml").status_code == 404


# --- who sees what --------------------------------------------------------------------------------


def test_a_user_sees_their_own_records_and_another_users_record_is_a_missing_one(
    browser: Callable[[], httpx.Client], token: Callable[..., str], rt: Any, raw: redis.Redis
) -> None:
    # given a record of alice's
    theirs = noti.api.notifier().add("sms", PHONE, text="alice's code 1234", user=ALICE).id
    alice, bob, ops = browser(), browser(), browser()
    log_in(alice, token(ALICE))
    log_in(bob, token(BOB))
    log_in(ops, token(MEMBER))
    # then alice and root members see it, listed and on its page; bob does not
    assert theirs in alice.get("/admin/notifications").text
    assert theirs in ops.get("/admin/notifications").text
    assert "alice&#39;s code 1234" in alice.get(f"/admin/notifications/{theirs}").text
    assert theirs not in bob.get("/admin/notifications").text
    before = stored(raw)
    mine = bob.get(f"/admin/notifications/{theirs}")
    ghost_id = new_id()
    ghost = bob.get(f"/admin/notifications/{ghost_id}")
    assert code_of(mine) == code_of(ghost) == (404, "e.cmd.noti.not_found")
    assert mine.text == ghost.text.replace(ghost_id, theirs)
    assert "alice" not in mine.text.replace(theirs, "")
    # naming another user is a root member's right
    assert code_of(bob.get(f"/admin/notifications?user={ALICE}")) == (403, "e.cmd.noti.list.nopvg")
    assert code_of(bob.get(f"/admin/held?owner={ALICE}")) == (403, "e.cmd.noti.rcpt.nopvg")
    assert theirs in ops.get(f"/admin/notifications?user={ALICE}").text
    assert stored(raw) == before


def test_the_search_finds_a_users_own_records_by_address_and_the_timeline_shows_their_steps(
    browser: Callable[[], httpx.Client], token: Callable[..., str], rt: Any, raw: redis.Redis
) -> None:
    # given two records of alice's to one number, one to another number, one of bob's to it
    notifier = noti.api.notifier()
    mine = [notifier.add("sms", PHONE, text=f"code {i}", user=ALICE).id for i in range(2)]
    other = notifier.add("sms", "+8613800000000", text="elsewhere", user=ALICE).id
    bobs = notifier.add("sms", PHONE, text="bob's", user=BOB).id
    failed = failed_record(rt, ALICE, target="+8613811112222")
    alice, bob, ops = browser(), browser(), browser()
    log_in(alice, token(ALICE))
    log_in(bob, token(BOB))
    log_in(ops, token(MEMBER))
    before = stored(raw)

    def found(client: httpx.Client, **query: str) -> list[str]:
        answer = client.get("/admin/notifications", params=query)
        assert answer.status_code == 200, answer.text
        return re.findall(r'<a href="/admin/notifications/([0-9a-z]+)">', answer.text)

    # then the number finds the records sent to it that the user may see, newest first
    assert found(alice, to=PHONE) == mine[::-1]
    assert found(alice, to=PHONE, channel="sms") == mine[::-1]
    assert found(bob, to=PHONE) == [bobs]
    assert found(ops, to=PHONE) == [bobs, *mine[::-1]]
    assert found(ops, to=PHONE, user=ALICE) == mine[::-1]
    assert found(alice, to="+8613800000000") == [other]
    assert found(alice, to="+8613811112222", status="failed") == [failed]
    assert found(alice, to=PHONE, status="failed") == []
    assert found(alice, to=PHONE, since="2000-01-01T00:00", until="2999-01-01T00:00") == mine[::-1]
    assert found(alice, to=PHONE, until="2000-01-01T00:00") == []
    # and refuses what is no search, changing nothing
    for query, code in (
        ({"to": "not an address"}, "e.cmd.noti.search.bad"),
        ({"to": PHONE, "channel": "email"}, "e.cmd.noti.search.bad"),
        ({"to": PHONE, "delivery": "delivered"}, "e.cmd.noti.search.bad"),
        ({"since": "yesterday"}, "e.cmd.noti.search.bad"),
        ({"until": "2026-13-45T99:99"}, "e.cmd.noti.search.bad"),
        ({"msgid": "a\x01b"}, "e.cmd.noti.search.bad"),
        ({"to": PHONE, "user": ALICE}, "e.cmd.noti.list.nopvg"),
    ):
        answer = bob.get("/admin/notifications", params=query)
        assert code_of(answer)[1] == code, (query, answer.text[-400:])
    # the record's page shows its timeline: created, then the failure and its dead letter
    page = alice.get(f"/admin/notifications/{failed}").text
    events = re.findall(r'<tr class="ev-([a-z_]+)">', page)
    assert events[0] == "created" and events[-2:] == ["failed", "dead_letter"], events
    assert "reachMaxRetry" in page
    assert stored(raw) == before


def test_dead_letters_are_root_members_and_a_user_can_neither_read_nor_retry_them(
    browser: Callable[[], httpx.Client], token: Callable[..., str], rt: Any, raw: redis.Redis
) -> None:
    # given a dead letter of bob's record
    record_id = failed_record(rt, BOB)
    alice, bob = browser(), browser()
    csrf = log_in(alice, token(ALICE))
    log_in(bob, token(BOB))
    before = stored(raw)
    # then alice may not list it, retry it or purge it; nor may bob, whose record it is
    assert code_of(alice.get("/admin/dead")) == (403, "e.cmd.noti.dead.nopvg")
    assert code_of(bob.get("/admin/dead")) == (403, "e.cmd.noti.dead.nopvg")
    assert 'id="retry"' not in bob.get(f"/admin/notifications/{record_id}").text
    retry = alice.post(f"/admin/dead/{record_id}/retry", data={"csrf": csrf})
    assert code_of(retry) == (403, "e.cmd.noti.dead.nopvg")
    purge = alice.post("/admin/dead/purge", data={"csrf": csrf, "confirm": "yes"})
    assert code_of(purge) == (403, "e.cmd.noti.dead.nopvg")
    assert code_of(alice.get(f"/admin/notifications/{record_id}")) == (404, "e.cmd.noti.not_found")
    assert stored(raw) == before
    assert rt.store.get(record_id).status is Status.FAILED


def test_suppressions_and_tokens_show_what_the_user_may_see(
    browser: Callable[[], httpx.Client], token: Callable[..., str], rt: Any
) -> None:
    rt.store.suppress(
        "email", "gone@example.org", why=Suppressed("", "", "bounce", "550", "gone", "01JA", ALICE)
    )
    rt.store.suppress(
        "email", "angry@example.org", why=Suppressed("", "", "complaint", "abuse", "", "01JB", BOB)
    )
    alice, boss = browser(), browser()
    alice_token = token(ALICE, note="alice's laptop")
    log_in(alice, alice_token)
    log_in(boss, token(ADMIN))
    page = alice.get("/admin/suppressions").text
    assert "gone@example.org" in page and "angry@example.org" not in page and "Lift" not in page
    page = boss.get("/admin/suppressions").text
    assert "gone@example.org" in page and "angry@example.org" in page and "Lift" in page
    # tokens: the administrator lists every token (never the token itself); a user sees their own
    listed = boss.get("/admin/tokens").text
    assert "alice&#39;s laptop" in listed and alice_token not in listed
    own = alice.get("/admin/tokens").text
    assert 'id="own-token"' in own and 'id="tokens"' not in own


# --- the forms ------------------------------------------------------------------------------------


def test_retry_purge_lift_and_revoke_change_what_they_say(
    browser: Callable[[], httpx.Client], token: Callable[..., str], rt: Any
) -> None:
    ops, boss = browser(), browser()
    csrf = log_in(ops, token(MEMBER))
    boss_csrf = log_in(boss, token(ADMIN))
    # retry: the record waits again, queued; the browser is sent to its page
    record_id = failed_record(rt, ALICE)
    answer = ops.post(f"/admin/dead/{record_id}/retry", data={"csrf": csrf})
    assert (
        answer.status_code == 303
        and answer.headers["location"] == f"/admin/notifications/{record_id}?retried=1"
    )
    assert rt.store.get(record_id).status is Status.WAITING
    assert 'id="retried"' in ops.get(answer.headers["location"]).text
    # purge: only with the box ticked
    failed_record(rt, ALICE)
    unticked = ops.post("/admin/dead/purge", data={"csrf": csrf})
    assert code_of(unticked) == (422, "e.noti.admin.badform") and len(rt.dead_letters.entries()) == 1
    purged = ops.post("/admin/dead/purge", data={"csrf": csrf, "confirm": "yes"})
    assert purged.headers["location"] == "/admin/dead?purged=1" and rt.dead_letters.entries() == []
    # lift: the target receives again
    rt.store.suppress("webhook", "https://hooks.example.com/a?b=1", why=Suppressed("", "", "optout"))
    lift = {"csrf": csrf, "channel": "webhook", "target": "https://hooks.example.com/a?b=1"}
    assert ops.post("/admin/suppressions/lift", data=lift).status_code == 303
    assert not rt.store.is_suppressed("webhook", "https://hooks.example.com/a?b=1")
    assert code_of(ops.post("/admin/suppressions/lift", data=lift)) == (404, "e.cmd.noti.suppress.not_found")
    # revoke: a root member may not; the administrator may, and that token's session ends
    victim = token(BOB)
    bob = browser()
    log_in(bob, victim)
    info = next(t for t in rt.tokens.entries(acting=ADMIN) if t.user == BOB)
    assert code_of(ops.post(f"/admin/tokens/{info.id}/revoke", data={"csrf": csrf})) == (
        403,
        "e.noti.token.nopvg",
    )
    answer = boss.post(f"/admin/tokens/{info.id}/revoke", data={"csrf": boss_csrf})
    assert answer.headers["location"] == f"/admin/tokens?revoked={info.id}"
    assert bob.get("/admin/").status_code == 401
    # log out: the cookie is cleared
    out = ops.post("/admin/logout", data={"csrf": csrf})
    assert out.status_code == 303 and ops.get("/admin/").status_code == 401


def test_a_form_without_the_sessions_csrf_token_or_from_another_site_changes_nothing(
    browser: Callable[[], httpx.Client], token: Callable[..., str], rt: Any, raw: redis.Redis
) -> None:
    # given a root member's session and a dead letter
    ops, alice = browser(), browser()
    csrf = log_in(ops, token(MEMBER))
    alice_csrf = log_in(alice, token(ALICE))
    record_id = failed_record(rt, ALICE)
    before = stored(raw)
    refused = [
        # what a cross-site form can send: the cookie (were it not SameSite=Strict), no CSRF token
        ({"confirm": "yes"}, {}, "e.noti.admin.csrf"),
        ({"csrf": "", "confirm": "yes"}, {}, "e.noti.admin.csrf"),
        ({"csrf": "0" * 64, "confirm": "yes"}, {}, "e.noti.admin.csrf"),
        ({"csrf": alice_csrf, "confirm": "yes"}, {}, "e.noti.admin.csrf"),  # another session's
        ({"csrf": csrf, "confirm": "yes"}, {"Origin": "https://evil.example"}, "e.noti.admin.origin"),
        ({"csrf": csrf, "confirm": "yes"}, {"Origin": "null"}, "e.noti.admin.origin"),
        ({"csrf": csrf, "confirm": "yes"}, {"Sec-Fetch-Site": "cross-site"}, "e.noti.admin.origin"),
        ({"csrf": csrf, "confirm": "yes"}, {"Sec-Fetch-Site": "same-site"}, "e.noti.admin.origin"),
    ]
    for form, headers, code in refused:
        for path in ("/admin/dead/purge", f"/admin/dead/{record_id}/retry"):
            answer = ops.post(path, data=form, headers=headers)
            assert code_of(answer) == (403, code), (path, form, headers)
    # a form that is no form, a field given twice, too many fields
    assert code_of(ops.post("/admin/dead/purge", json={"csrf": csrf, "confirm": "yes"})) == (
        422,
        "e.noti.admin.badform",
    )
    twice = f"csrf={csrf}&confirm=yes&confirm=no"
    kind = {"Content-Type": "application/x-www-form-urlencoded"}
    assert code_of(ops.post("/admin/dead/purge", content=twice, headers=kind)) == (
        422,
        "e.noti.admin.badform",
    )
    many = "&".join(f"f{i}=1" for i in range(50)) + f"&csrf={csrf}&confirm=yes"
    assert code_of(ops.post("/admin/dead/purge", content=many, headers=kind)) == (422, "e.noti.admin.badform")
    assert code_of(ops.post("/admin/dead/purge", content=b"\xff\xfe=\xff", headers=kind))[0] in (403, 422)
    # no session at all: refused before the body is read (the API's JSON answer)
    anonymous = browser().post("/admin/dead/purge", data={"csrf": csrf, "confirm": "yes"})
    assert anonymous.status_code == 401 and anonymous.json()["error"]["code"] == "e.noti.auth.missing"
    # a GET never changes anything
    assert browser().get("/admin/dead/purge").status_code in (401, 405)
    assert ops.get("/admin/dead/purge").status_code == 405
    assert stored(raw) == before
    assert rt.store.get(record_id).status is Status.FAILED


# --- hostile input and escaping -------------------------------------------------------------------


def test_garbage_queries_and_paths_are_refused_and_change_nothing(
    browser: Callable[[], httpx.Client], token: Callable[..., str], rt: Any, raw: redis.Redis
) -> None:
    client = browser()
    csrf = log_in(client, token(MEMBER))
    failed_record(rt, ALICE)
    before = stored(raw)
    cases = [
        ("/admin/notifications?status=zz", 422, "e.cmd.noti.list.badst"),
        ("/admin/notifications?status=5", 422, "e.cmd.noti.list.badst"),
        ("/admin/notifications?channel=fax", 422, "e.cmd.noti.add.badtype"),
        ("/admin/notifications?delivery=lost", 422, "e.cmd.noti.list.baddelivery"),
        ("/admin/notifications?user=a%3Ab", 422, "e.cmd.noti.baduser"),
        ("/admin/notifications?user=" + "a" * 5000, 422, "e.noti.http.badrequest"),
        ("/admin/notifications?limit=0", 422, "e.noti.http.badrequest"),
        ("/admin/notifications?limit=abc", 422, "e.noti.http.badrequest"),
        ("/admin/notifications?limit=" + "9" * 40, 422, "e.noti.http.badrequest"),
        ("/admin/notifications?stat=1", 422, "e.noti.http.badrequest"),
        ("/admin/notifications/" + "x" * 5000, 404, "e.cmd.noti.not_found"),
        ("/admin/notifications/%00%0d%0a", 404, "e.noti.http.noroute"),  # no id has a line break
        ("/admin/dead?limit=-1", 422, "e.noti.http.badrequest"),
        ("/admin/suppressions?channel=%3Cscript%3E", 422, "e.cmd.noti.suppress.badtype"),
        ("/admin/held?owner=%00", 422, "e.cmd.noti.baduser"),
        ("/admin/tokens?revoked=" + "f" * 40, 422, "e.noti.http.badrequest"),
        ("/admin/no/such/page", 404, "e.noti.http.noroute"),
    ]
    for path, status, code in cases:
        answer = client.get(path)
        assert code_of(answer) == (status, code), (path[:80], answer.text[-500:])
        assert "<script>" not in answer.text.split("</head>", 1)[1]
    for ident, status in (("x" * 65, 422), ("%2e%2e", 404), ("nope", 404)):
        answer = client.post(f"/admin/dead/{ident}/retry", data={"csrf": csrf})
        assert answer.status_code == status, (ident, answer.text[-300:])
    # a request line and headers over the server's limit never reach the page
    huge = client.get("/admin/notifications?user=" + "a" * 40_000)
    assert huge.status_code in (414, 431)
    assert stored(raw) == before


def test_what_anyone_wrote_is_shown_as_text(
    browser: Callable[[], httpx.Client], token: Callable[..., str], rt: Any
) -> None:
    # given a record, a dead letter, a suppression and a token note carrying markup
    record_id = failed_record(rt, ALICE, text=XSS)
    rt.store.suppress("email", "x@example.org", why=Suppressed("", "", "bounce", XSS, XSS, record_id, ALICE))
    token(ALICE, note="<b>note</b>")
    client = browser()
    log_in(client, token(ADMIN))
    for path in (
        f"/admin/notifications/{record_id}",
        "/admin/dead",
        "/admin/suppressions",
        "/admin/tokens",
        f"/admin/notifications?user={ALICE}",
    ):
        page = client.get(path).text
        body = page.split("</head>", 1)[1]
        assert "<script>alert" not in body and "<img src=x" not in body and "<b>note" not in body, path
    page = client.get(f"/admin/notifications/{record_id}").text
    shown = "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;"
    assert page.count(shown) >= 3  # its text, its error, its timeline's failure
    # an error message quoting the input is escaped as well
    answer = client.get("/admin/notifications?status=%3Cscript%3Ealert(1)%3C/script%3E")
    assert answer.status_code == 422 and "<script>alert(1)" not in answer.text
    assert "&lt;script&gt;" in answer.text


def test_held_records_and_open_digests_show_to_their_owner(
    browser: Callable[[], httpx.Client], token: Callable[..., str], rt: Any, raw: redis.Redis
) -> None:
    from datetime import UTC, datetime, timedelta

    from noti import recipients

    # given alice's recipient inside their quiet hours, a notice held by them, an SMS
    # scheduled for later and an open digest window
    recipients.put_category("orders", {"channels": {"sms": True}}, user=MEMBER)
    recipients.put_template(
        "shipped",
        {"default_locale": "en", "channels": {"sms": {"en": {"text": "{{ count | default(1) }} shipped"}}}},
    )
    now = datetime.now(UTC)
    quiet = f"{now - timedelta(minutes=1):%H:%M}-{now + timedelta(hours=2):%H:%M}"
    recipients.put("42", {"addresses": {"sms": PHONE}, "timezone": "UTC", "quiet_hours": quiet})
    held = noti.get_notice(noti.notify(recipient="42", template="shipped", category="orders"))
    [entry] = held.entries
    assert entry.state == "held"
    later = noti.api.notifier().add("sms", PHONE, text="later", delay=3600, user=ALICE).id
    window = noti.notify(recipient="42", template="shipped", category="orders", digest="orders", window=3600)
    alice, bob, ops = browser(), browser(), browser()
    log_in(alice, token(ALICE))
    log_in(bob, token(BOB))
    log_in(ops, token(MEMBER))
    before = stored(raw)
    # then alice sees both records, soonest first, and her window
    page = alice.get("/admin/held").text
    waiting = re.findall(r'<a href="/admin/notifications/([0-9a-z]+)">', page)
    assert waiting == [later, entry.record]  # due in an hour; then when the quiet hours end
    assert held.id in page  # the held one's notice
    digests = page[page.index('id="digests"') :]
    assert window in digests and "<td>42</td>" in digests and "<td>1</td>" in digests
    # bob sees none of it; a root member sees the records, and alice's window when naming her
    page = bob.get("/admin/held").text
    assert 'id="none-waiting"' in page and 'id="none-digests"' in page
    assert later in ops.get("/admin/held").text and window not in ops.get("/admin/held").text
    assert window in ops.get(f"/admin/held?owner={ALICE}").text
    assert stored(raw) == before
