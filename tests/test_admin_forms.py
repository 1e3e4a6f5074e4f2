"""The admin page's forms through a real ``noti serve``: retry, purge, lift and revoke change
what they say; without the session's CSRF token, or from another origin, they are refused and
nothing changes; garbage queries and paths are answered 4xx, changing nothing; markup anyone
wrote is shown as text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
import redis

from noti.core.record import Status
from noti.core.suppression import Suppressed
from tests import admin_client
from tests.admin_client import XSS, code_of, failed_record, log_in
from tests.conftest import ADMIN, ALICE, BOB, MEMBER
from tests.test_http_api import stored

pytestmark = pytest.mark.bounds  # FastAPI, Jinja2, uvicorn: run on the lowest versions too

token = pytest.fixture(admin_client.tokens)
raw = pytest.fixture(admin_client.raw_client)
browser = pytest.fixture(admin_client.clients)


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
