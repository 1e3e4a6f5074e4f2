"""The admin page (``/admin``) through a real ``noti serve`` on loopback, on the test Redis,
reading: its session (an API token in an HttpOnly, SameSite=Strict cookie, authenticated per
request as a bearer token is) and who sees what (a user their own, root members everyone's;
another user's record answered as a missing one), the search and a record's timeline, held
records and digests. Its forms and hostile input: tests/test_admin_forms.py; the browser's
view, JavaScript on and off: tests/test_admin_browser.py.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import redis

import noti
from noti.core.record import Status, new_id
from noti.core.suppression import Suppressed
from tests import admin_client
from tests.admin_client import PHONE, code_of, failed_record, log_in
from tests.conftest import ADMIN, ALICE, BOB, MEMBER
from tests.test_http_api import stored

pytestmark = pytest.mark.bounds  # FastAPI, Jinja2, uvicorn: run on the lowest versions too

token = pytest.fixture(admin_client.tokens)
raw = pytest.fixture(admin_client.raw_client)
browser = pytest.fixture(admin_client.clients)


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
        ({"to": PHONE, "delivery": "lost"}, "e.cmd.noti.list.baddelivery"),
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


def test_a_user_sees_and_retries_the_dead_letters_of_their_own_records_only(
    browser: Callable[[], httpx.Client], token: Callable[..., str], rt: Any, raw: redis.Redis
) -> None:
    # given a dead letter of bob's record
    record_id = failed_record(rt, BOB)
    alice, bob = browser(), browser()
    csrf = log_in(alice, token(ALICE))
    log_in(bob, token(BOB))
    before = stored(raw)
    # then alice does not see it, and may not retry it or purge it: answered as missing
    listed = alice.get("/admin/dead")
    assert listed.status_code == 200 and record_id not in listed.text and 'id="none"' in listed.text
    retry = alice.post(f"/admin/dead/{record_id}/retry", data={"csrf": csrf})
    assert code_of(retry) == (404, "e.cmd.noti.dead.not_found")
    purge = alice.post("/admin/dead/purge", data={"csrf": csrf, "confirm": "yes"})
    assert purge.status_code == 303 and "purged=0" in purge.headers["location"]
    assert code_of(alice.get(f"/admin/notifications/{record_id}")) == (404, "e.cmd.noti.not_found")
    assert stored(raw) == before
    assert rt.store.get(record_id).status is Status.FAILED
    # and bob, whose record it is, sees it on the list and on the record's page
    assert record_id in bob.get("/admin/dead").text
    assert 'id="retry"' in bob.get(f"/admin/notifications/{record_id}").text


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
    # each with why it waits, from its timeline
    assert re.findall(r'<td class="why">([^<]*)</td>', page) == ["scheduled", "quiet hours"]
    assert held.id in page  # the held one's notice
    digests = page[page.index('id="digests"') :]
    assert window in digests and "<td>42</td>" in digests and "<td>1</td>" in digests
    # bob sees none of it; a root member sees the records, and alice's window when naming her
    page = bob.get("/admin/held").text
    assert 'id="none-waiting"' in page and 'id="none-digests"' in page
    assert later in ops.get("/admin/held").text and window not in ops.get("/admin/held").text
    assert window in ops.get(f"/admin/held?owner={ALICE}").text
    assert stored(raw) == before
