"""The recipients layer over HTTP through a real ``noti serve`` (uvicorn) on the test Redis:
``/v1/recipients`` (profiles, merge, erasure, import, preferences, history),
``/v1/categories``, ``/v1/templates``, ``/v1/notices`` and the one-click unsubscribe links.

Every route answers its own user's things only: another user's recipient, template or notice
is answered exactly as a missing one (404, the same body but the id asked for); naming
another user with ``?owner=`` is for root members (403); categories are written by root
members only (403). Every bad input is answered 4xx with a code and stores nothing.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import redis

from noti.core.record import new_id
from tests.conftest import ADMIN, ALICE, API_BODY_MAX, BOB, MEMBER
from tests.servers import ApiProcess
from tests.test_hostile_input import snapshot

pytestmark = pytest.mark.bounds

PHONE, EMAIL = "+8613912345678", "ada@example.com"
PROFILE = {
    "addresses": {"sms": [PHONE], "email": [EMAIL]},
    "locale": "zh-Hant-TW",
    "attributes": {"name": "Ada"},
}
#: One document for every test (the server caches compiled versions by name and number, and
#: the database is flushed between tests).
TEMPLATE = {
    "default_locale": "en",
    "channels": {
        "sms": {"en": {"text": "Order {{ order }} shipped"}, "zh": {"text": "订单 {{ order }} 已发货"}},
        "email": {"en": {"subject": "Order {{ order }}", "text": "Hello {{ recipient.attributes.name }}."}},
    },
}
MERGE_PATCH = "application/merge-patch+json"


#: The secret unsubscribe links are signed with, the same in every test: noti makes one on
#: first use and each process keeps it for its life, so the server (one for the module) would
#: go on with the first test's after the database is flushed for the next.
UNSUB_SECRET = "5e" * 32


@pytest.fixture
def client(api: ApiProcess, rt: Any) -> Iterator[httpx.Client]:
    """A client of the server, on a flushed test database (``rt``: the same settings here)."""
    rt.redis.set(rt.keys.unsubscribe_secret, UNSUB_SECRET)
    with httpx.Client(base_url=api.url, timeout=10.0) as made:
        yield made


@pytest.fixture
def token(rt: Any) -> Callable[..., str]:
    """``token(user, cap=None, providers=None)``: a new API token."""

    def make(user: str, cap: int | None = None, providers: list[str] | None = None) -> str:
        plain, _ = rt.tokens.add(user, acting=ADMIN, level_cap=cap, providers=providers)
        return str(plain)

    return make


@pytest.fixture
def raw(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


class As:
    """Requests of one token: ``alice.get(path)``, ``alice.put(path, json=…)``."""

    def __init__(self, client: httpx.Client, plain: str) -> None:
        self.client, self.headers = client, {"Authorization": f"Bearer {plain}"}

    def call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        headers = {**self.headers, **kwargs.pop("headers", {})}
        return self.client.request(method, path, headers=headers, **kwargs)

    def get(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.call("GET", path, **kwargs)

    def put(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.call("PUT", path, **kwargs)

    def patch(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.call("PATCH", path, **kwargs)

    def post(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.call("POST", path, **kwargs)

    def delete(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.call("DELETE", path, **kwargs)


@pytest.fixture
def alice(client: httpx.Client, token: Callable[..., str]) -> As:
    return As(client, token(ALICE))


@pytest.fixture
def bob(client: httpx.Client, token: Callable[..., str]) -> As:
    return As(client, token(BOB))


@pytest.fixture
def ops(client: httpx.Client, token: Callable[..., str]) -> As:
    """A root member."""
    return As(client, token(MEMBER))


def stored(raw: redis.Redis) -> dict[str, str]:
    """Every key but the tokens' hashes (which note when a token was last used)."""
    return snapshot(raw, leave_out=lambda key: key.startswith("noti:token:"))


def error_of(response: httpx.Response) -> tuple[int, str]:
    body = response.json()
    assert set(body) == {"error"} and body["error"]["message"], body
    return response.status_code, str(body["error"]["code"])


def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


#: A notice of alice's recipient 42 from her template (the tests add what they vary).
ORDER = {"recipient": "42", "template": "order_shipped", "data": {"order": 7}, "category": "orders"}
PREFS = "/v1/recipients/42/preferences"
NOT_FOUND, NO_CATEGORY, BAD_PREF = (
    "e.cmd.noti.rcpt.not_found",
    "e.cmd.noti.cat.not_found",
    "e.cmd.noti.pref.bad",
)


def setup_orders(alice: As, ops: As) -> None:
    """alice's recipient 42, her template, and the orders category (declared by a root member)."""
    ok(ops.put("/v1/categories/orders", json={"channels": {"sms": True, "email": True}}))
    ok(alice.put("/v1/recipients/42", json=PROFILE), 201)
    ok(alice.put("/v1/templates/order_shipped", json=TEMPLATE), 201)


# --- recipients ---------------------------------------------------------------------------------


def test_a_profile_is_created_read_patched_merged_listed_and_erased(alice: As, raw: redis.Redis) -> None:
    # created (201, Location), then replaced (200; the body's own id may repeat the path's)
    made = alice.put("/v1/recipients/42", json=PROFILE)
    assert made.status_code == 201 and made.headers["Location"] == "/v1/recipients/42"
    assert made.json()["addresses"] == {"sms": [PHONE], "email": [EMAIL]}
    assert made.json()["locale"] == "zh-Hant-TW" and made.json()["quiet_hours"] == "default"
    again = ok(alice.put("/v1/recipients/42", json={"id": "42", **PROFILE, "timezone": "Asia/Taipei"}))
    assert again["timezone"] == "Asia/Taipei" and again["created_ms"] == made.json()["created_ms"]
    assert ok(alice.get("/v1/recipients/42")) == again
    # a merge patch: as application/merge-patch+json and as application/json; null removes
    patched = ok(
        alice.patch(
            "/v1/recipients/42",
            content=json.dumps({"locale": "fr", "attributes": {"plan": "pro"}}),
            headers={"Content-Type": MERGE_PATCH},
        )
    )
    assert patched["locale"] == "fr" and patched["attributes"] == {"name": "Ada", "plan": "pro"}
    patched = ok(alice.patch("/v1/recipients/42", json={"timezone": None, "attributes": {"name": None}}))
    assert patched["timezone"] is None and patched["attributes"] == {"plan": "pro"}
    # a second id of the same person merged in: addresses joined, the other one gone
    ok(alice.put("/v1/recipients/ada-old", json={"addresses": {"sms": ["+8613900000000"]}}), 201)
    merged = ok(alice.post("/v1/recipients/42/merge", json={"from": "ada-old"}))
    assert merged["addresses"]["sms"] == [PHONE, "+8613900000000"]
    assert error_of(alice.get("/v1/recipients/ada-old")) == (404, "e.cmd.noti.rcpt.not_found")
    # listed a page at a time
    for n in range(5):
        ok(alice.put(f"/v1/recipients/u{n}", json={}), 201)
    first = ok(alice.get("/v1/recipients?limit=4"))
    assert [r["id"] for r in first["recipients"]] == ["42", "u0", "u1", "u2"] and first["next"] == "u2"
    rest = ok(alice.get(f"/v1/recipients?limit=4&after={first['next']}"))
    assert [r["id"] for r in rest["recipients"]] == ["u3", "u4"] and rest["next"] is None
    # erased: the counts, then nothing of it is left
    erased = ok(alice.delete("/v1/recipients/42"))
    assert erased == {"recipient": "42", "revoked": 0, "masked": 0, "notices": 0, "dead_letters": 0}
    assert error_of(alice.get("/v1/recipients/42")) == (404, "e.cmd.noti.rcpt.not_found")
    assert error_of(alice.delete("/v1/recipients/42")) == (404, "e.cmd.noti.rcpt.not_found")
    assert not [k for k in raw.scan_iter("noti:rcpt:*:42")]


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "code"),
    [
        ("PUT", "/v1/recipients/42", {"addresses": {"sms": ["not a phone"]}}, 422, "e.cmd.noti.rcpt.badaddr"),
        ("PUT", "/v1/recipients/42", {"addresses": {"fax": ["1"]}}, 422, "e.cmd.noti.rcpt.badaddr"),
        ("PUT", "/v1/recipients/42", {"locale": "not a locale!"}, 422, "e.cmd.noti.rcpt.badlocale"),
        ("PUT", "/v1/recipients/42", {"timezone": "Mars/Olympus"}, 422, "e.cmd.noti.rcpt.badtz"),
        ("PUT", "/v1/recipients/42", {"timezone": "../../etc/passwd"}, 422, "e.cmd.noti.rcpt.badtz"),
        ("PUT", "/v1/recipients/42", {"quiet_hours": "25:00-07:00"}, 422, "e.cmd.noti.rcpt.badquiet"),
        ("PUT", "/v1/recipients/42", {"attributes": [1]}, 422, "e.cmd.noti.rcpt.badattrs"),
        ("PUT", "/v1/recipients/42", {"id": "43"}, 422, "e.cmd.noti.rcpt.badid"),
        ("PUT", "/v1/recipients/42", {"nickname": "x"}, 422, "e.cmd.noti.rcpt.baddoc"),
        ("PUT", "/v1/recipients/42", [PROFILE], 422, "e.noti.http.badrequest"),
        ("PUT", "/v1/recipients/42", "a string", 422, "e.noti.http.badrequest"),
        ("PUT", "/v1/recipients/42", None, 422, "e.noti.http.badrequest"),
        ("PUT", "/v1/recipients/a%20b", {}, 422, "e.cmd.noti.rcpt.badid"),
        ("PUT", "/v1/recipients/%E2%80%AE42", {}, 422, "e.cmd.noti.rcpt.badid"),
        ("PUT", "/v1/recipients/4%002", {}, 422, "e.cmd.noti.rcpt.badid"),
        ("PUT", "/v1/recipients/" + "x" * 129, {}, 422, "e.cmd.noti.rcpt.badid"),
        ("PUT", "/v1/recipients/..%2F..%2Fnoti:cats", {}, 404, "e.noti.http.noroute"),
        ("PUT", "/v1/recipients/%2E%2E", {}, 422, "e.cmd.noti.rcpt.badid"),
        ("PATCH", "/v1/recipients/42", [1], 422, "e.noti.http.badrequest"),
        ("PATCH", "/v1/recipients/nobody", {"locale": "fr"}, 404, "e.cmd.noti.rcpt.not_found"),
        ("POST", "/v1/recipients/42/merge", {"from": "42"}, 422, "e.cmd.noti.rcpt.badmerge"),
        ("POST", "/v1/recipients/42/merge", {"from": "nobody"}, 404, "e.cmd.noti.rcpt.not_found"),
        ("POST", "/v1/recipients/42/merge", {"from": 7}, 422, "e.noti.http.badrequest"),
        ("POST", "/v1/recipients/42/merge", {"into": "7"}, 422, "e.noti.http.badrequest"),
        ("GET", "/v1/recipients?limit=0", None, 422, "e.noti.http.badrequest"),
        ("GET", "/v1/recipients?limit=1001", None, 422, "e.noti.http.badrequest"),
        ("GET", "/v1/recipients?after=%00", None, 422, "e.cmd.noti.rcpt.badid"),
        ("GET", "/v1/recipients?stat=1", None, 422, "e.noti.http.badrequest"),
        ("GET", "/v1/recipients/42/history?limit=0", None, 422, "e.noti.http.badrequest"),
        ("PUT", PREFS, {"marketing": {"sms": False}}, 404, NO_CATEGORY),
        ("PUT", PREFS, {"orders": {"fax": False}}, 422, BAD_PREF),
        ("PUT", PREFS, {"orders": {"sms": "no"}}, 422, BAD_PREF),
        ("PUT", PREFS, {"orders": []}, 422, BAD_PREF),
        ("PUT", PREFS, {}, 422, BAD_PREF),
        ("PUT", PREFS, [{"orders": {}}], 422, "e.noti.http.badrequest"),
        ("PUT", PREFS, {"security": {"sms": False}}, 422, "e.cmd.noti.pref.locked"),
        ("PUT", "/v1/recipients/nobody/preferences", {"orders": {"sms": False}}, 404, NOT_FOUND),
    ],
)  # fmt: skip
def test_a_bad_profile_request_is_refused_with_its_code_and_stores_nothing(
    alice: As, ops: As, raw: redis.Redis, method: str, path: str, body: Any, status: int, code: str
) -> None:
    ok(ops.put("/v1/categories/orders", json={}))
    ok(ops.put("/v1/categories/security", json={"critical": True}))
    ok(alice.put("/v1/recipients/42", json=PROFILE), 201)
    before = stored(raw)
    content = None if body is None and method == "GET" else json.dumps(body)
    answer = alice.call(
        method, path, content=content, headers={"Content-Type": "application/json"} if content else {}
    )
    assert error_of(answer) == (status, code), answer.text
    assert stored(raw) == before


def test_hostile_bodies_are_refused_with_a_code_and_store_nothing(alice: As, raw: redis.Redis) -> None:
    ok(alice.put("/v1/recipients/42", json=PROFILE), 201)
    before = stored(raw)
    deep = "[" * 100_000 + "]" * 100_000  # over the body limit
    nested = '{"attributes": ' + '{"a": ' * 500 + "1" + "}" * 500 + "}"
    for path, content, content_type, expected in (
        ("/v1/recipients/43", b"{not json", "application/json", (422, "e.noti.http.badrequest")),
        ("/v1/recipients/43", b'{"locale": "fr"}', "text/plain", (422, "e.noti.http.badrequest")),
        ("/v1/recipients/43", b"\xff\xfe{}", "application/json", (422, "e.noti.http.badrequest")),
        ("/v1/recipients/43", b'{"attributes": {"x": NaN}}', "application/json",
         (422, "e.cmd.noti.rcpt.badattrs")),
        ("/v1/recipients/43", deep.encode(), "application/json", (413, "e.noti.http.toolarge")),
        ("/v1/recipients/43", b"[" * 5000 + b"]" * 5000, "application/json", (422, "e.noti.http.badrequest")),
        ("/v1/recipients/43", nested.encode(), "application/json", (422, "e.cmd.noti.rcpt.badattrs")),
        ("/v1/recipients/43", json.dumps({"attributes": {"x": "y" * 20_000}}).encode(), "application/json",
         (422, "e.cmd.noti.rcpt.badattrs")),
        ("/v1/recipients/43", json.dumps({"addresses": {"sms": [PHONE] * 9}}).encode(), "application/json",
         (422, "e.cmd.noti.rcpt.badaddr")),
        ("/v1/recipients/43", json.dumps({"locale": "en\u202e"}).encode(), "application/json",
         (422, "e.cmd.noti.rcpt.badlocale")),
        ("/v1/recipients/43", json.dumps({"addresses": {"email": ["a@b.c\r\nBcc: x@y.z"]}}).encode(),
         "application/json", (422, "e.cmd.noti.rcpt.badaddr")),
    ):  # fmt: skip
        answer = alice.put(path, content=content, headers={"Content-Type": content_type})
        assert error_of(answer) == expected, (content[:60], answer.text[:300])
    for content in (b"[1]", b'"x"', b"{bad"):
        answer = alice.patch("/v1/recipients/42", content=content, headers={"Content-Type": MERGE_PATCH})
        assert error_of(answer) == (422, "e.noti.http.badrequest"), content
    assert stored(raw) == before


# --- import ---------------------------------------------------------------------------------------


def test_an_import_takes_csv_json_lines_and_a_json_array_and_refuses_bad_rows_alone(
    alice: As, raw: redis.Redis
) -> None:
    csv_text = (
        "id,sms,email,locale,attr.plan\n"
        f"1,{PHONE},a@example.com,en,pro\n"
        "2,not a phone,,en,\n"
        f"3,{PHONE};+8613900000000,,zh-CN,\n"
    )
    done = ok(alice.post("/v1/recipients/import", content=csv_text, headers={"Content-Type": "text/csv"}))
    assert (done["created"], done["updated"]) == (2, 0)
    assert [(r["row"], r["code"]) for r in done["refused"]] == [(2, "e.cmd.noti.rcpt.badaddr")]
    assert ok(alice.get("/v1/recipients/3"))["addresses"]["sms"] == [PHONE, "+8613900000000"]
    assert ok(alice.get("/v1/recipients/1"))["attributes"] == {"plan": "pro"}
    lines = "\n".join([json.dumps({"id": "1", "locale": "fr"}), "{bad", json.dumps({"id": "4"}), ""])
    done = ok(
        alice.post("/v1/recipients:import", content=lines, headers={"Content-Type": "application/x-ndjson"})
    )
    assert (done["created"], done["updated"]) == (1, 1)
    assert [(r["row"], r["code"]) for r in done["refused"]] == [(2, "e.cmd.noti.rcpt.baddoc")]
    assert ok(alice.get("/v1/recipients/1"))["locale"] == "fr"
    done = ok(alice.post("/v1/recipients/import", json=[{"id": "5"}, {"id": "6", "timezone": "UTC"}]))
    assert (done["created"], done["updated"], done["refused"]) == (2, 0, [])
    assert [r["id"] for r in ok(alice.get("/v1/recipients"))["recipients"]] == ["1", "3", "4", "5", "6"]


def test_a_bad_import_is_refused_whole_and_stores_nothing(alice: As, raw: redis.Redis) -> None:
    before = stored(raw)
    big = "id\n" + "\n".join(f"r{n:07d}" for n in range(API_BODY_MAX // 8))
    for content, content_type, expected in (
        (b"id,fax\n1,2\n", "text/csv", (422, "e.cmd.noti.rcpt.badcsv")),
        (b"name\nada\n", "text/csv", (422, "e.cmd.noti.rcpt.badcsv")),
        (b"", "text/csv", (422, "e.cmd.noti.rcpt.badcsv")),
        (b"id\n\xff\xfe\n", "text/csv", (422, "e.cmd.noti.rcpt.badformat")),
        (b"id\n1\n", "application/xml", (422, "e.cmd.noti.rcpt.badformat")),
        (b"id\n1\n", "", (422, "e.cmd.noti.rcpt.badformat")),
        (b'{"id": "1"}', "application/json", (422, "e.cmd.noti.rcpt.badformat")),
        (b"[" * 3000 + b"]" * 3000, "application/json", (422, "e.cmd.noti.rcpt.badformat")),
        (b"{bad\n[1]\n", "application/x-ndjson", (422, "e.cmd.noti.rcpt.import")),
        (b"id\nbad id!\n", "text/csv", (422, "e.cmd.noti.rcpt.import")),
        (big.encode(), "text/csv", (413, "e.noti.http.toolarge")),
    ):
        answer = alice.post("/v1/recipients/import", content=content, headers={"Content-Type": content_type})
        assert error_of(answer) == expected, (content[:40], answer.text[:300])
    every_row = alice.post(
        "/v1/recipients/import", content=b"{bad\n[1]\n", headers={"Content-Type": "application/x-ndjson"}
    )
    assert [i["row"] for i in every_row.json()["error"]["items"]] == [1, 2]
    assert stored(raw) == before


# --- preferences, history, categories --------------------------------------------------------------


def test_preferences_are_set_and_read_and_history_lists_the_notices(alice: As, ops: As) -> None:
    setup_orders(alice, ops)
    ok(ops.put("/v1/categories/marketing", json={"channels": {"sms": False}}))
    assert ok(alice.get("/v1/recipients/42/preferences")) == {}
    prefs = ok(
        alice.put("/v1/recipients/42/preferences", json={"marketing": {"*": False}, "orders": {"sms": True}})
    )
    assert prefs == {"marketing": {"*": False}, "orders": {"sms": True}}
    prefs = ok(alice.put("/v1/recipients/42/preferences", json={"orders": {"sms": None}}))
    assert prefs == {"marketing": {"*": False}}
    assert ok(alice.get("/v1/recipients/42/preferences")) == prefs
    assert ok(alice.get("/v1/recipients/42/history")) == {"recipient": "42", "history": []}
    notice = ok(alice.post("/v1/notices", json=ORDER), 201)
    history = ok(alice.get("/v1/recipients/42/history"))["history"]
    assert notice["id"] in history and set(ok(alice.get(f"/v1/notices/{notice['id']}")).keys()) >= {
        "channels"
    }
    assert set(history) == {notice["id"], *(c["record"] for c in notice["channels"] if c["record"])}
    assert ok(alice.get("/v1/recipients/42/history?limit=1"))["history"] == history[:1]
    assert error_of(alice.get("/v1/recipients/nobody/history")) == (404, "e.cmd.noti.rcpt.not_found")


def test_categories_are_read_by_everyone_and_written_by_root_members_only(
    alice: As, ops: As, raw: redis.Redis
) -> None:
    assert [c["name"] for c in ok(alice.get("/v1/categories"))["categories"]] == ["general"]
    before = stored(raw)
    for answer in (
        alice.put("/v1/categories/orders", json={"channels": {"sms": False}}),
        alice.delete("/v1/categories/general"),
    ):
        assert error_of(answer) == (403, "e.cmd.noti.cat.nopvg")
    for name, body, code in (
        ("Orders", {}, "e.cmd.noti.cat.badname"),
        ("a%2Fb", {}, "e.noti.http.noroute"),
        ("x" * 65, {}, "e.cmd.noti.cat.badname"),
        ("orders", {"critical": True, "opt_out": True}, "e.cmd.noti.cat.bad"),
        ("orders", {"channels": {"fax": True}}, "e.cmd.noti.cat.bad"),
        ("orders", {"channels": {"sms": "no"}}, "e.cmd.noti.cat.bad"),
        ("orders", {"colour": "red"}, "e.cmd.noti.cat.bad"),
        ("orders", {"description": "a\u0000b"}, "e.cmd.noti.cat.bad"),
        ("orders", {"throttle": {"limit": 0, "period": 60}}, "e.cmd.noti.cat.bad"),
        ("orders", {"throttle": {"limit": 3, "period": "forever"}}, "e.cmd.noti.cat.bad"),
        ("orders", {"throttle": {"limit": 3, "period": 60, "over": "digest"}}, "e.cmd.noti.cat.bad"),
        ("orders", {"throttle": "3/h"}, "e.cmd.noti.cat.bad"),
        ("orders", {"critical": True, "throttle": {"limit": 3, "period": 60}}, "e.cmd.noti.cat.bad"),
    ):
        answer = ops.put(f"/v1/categories/{name}", json=body)
        assert error_of(answer)[1] == code, (name, body, answer.text)
    assert error_of(ops.put("/v1/categories/orders", json=["x"])) == (422, "e.noti.http.badrequest")
    assert stored(raw) == before
    made = ok(ops.put("/v1/categories/orders", json={"channels": {"sms": False}, "description": "Orders"}))
    assert made == {"name": "orders", "channels": {"sms": False}, "opt_out": True, "critical": False,
                    "description": "Orders", "throttle": None}  # fmt: skip
    throttled = {"throttle": {"limit": 5, "period": "1h", "over": "delay"}}
    assert ok(ops.put("/v1/categories/social", json=throttled))["throttle"] == {
        "limit": 5, "period": 3600.0, "over": "delay", "template": None}  # fmt: skip
    assert ok(ops.delete("/v1/categories/social")) == {"name": "social", "deleted": True}
    assert ok(alice.get("/v1/categories/orders")) == made
    assert [c["name"] for c in ok(alice.get("/v1/categories"))["categories"]] == ["general", "orders"]
    assert ok(ops.delete("/v1/categories/orders")) == {"name": "orders", "deleted": True}
    assert error_of(ops.delete("/v1/categories/orders")) == (404, "e.cmd.noti.cat.not_found")
    assert error_of(alice.get("/v1/categories/orders")) == (404, "e.cmd.noti.cat.not_found")


# --- templates ----------------------------------------------------------------------------------------


def test_templates_are_versioned_read_listed_and_removed(alice: As, raw: redis.Redis) -> None:
    name = "tmpl-" + new_id()[-8:]  # a name no earlier test's server-side cache has seen
    assert ok(alice.put(f"/v1/templates/{name}", json=TEMPLATE), 201) == {"name": name, "version": 1}
    second = {**TEMPLATE, "description": "v2"}
    assert ok(alice.put(f"/v1/templates/{name}", json=second), 201) == {"name": name, "version": 2}
    current = ok(alice.get(f"/v1/templates/{name}"))
    assert current["version"] == 2 and current["document"]["description"] == "v2"
    assert current["channels"] == ["sms", "email"] and current["default_locale"] == "en"
    first = ok(alice.get(f"/v1/templates/{name}?version=1"))
    assert first["version"] == 1 and first["document"]["channels"] == TEMPLATE["channels"]
    assert error_of(alice.get(f"/v1/templates/{name}?version=3")) == (404, "e.cmd.noti.tmpl.not_found")
    listed = ok(alice.get("/v1/templates"))["templates"]
    assert [(t["name"], t["version"], t["channels"]) for t in listed] == [(name, 2, ["sms", "email"])]
    assert listed[0]["locales"] == ["en", "zh"]
    before = stored(raw)
    for body, code in (
        ({"default_locale": "en", "channels": {"fax": {"en": {"text": "x"}}}}, "e.cmd.noti.tmpl."),
        ({"default_locale": "en", "channels": {"sms": {"en": {"text": "{{ order"}}}},
         "e.cmd.noti.tmpl.badsyntax"),
        ({"default_locale": "en", "channels": {"sms": {"en": {"text": "{{ ''.__class__.__mro__ }}"}}}},
         "e.cmd.noti.tmpl.unsafe"),
        ({"default_locale": "en", "channels": {"sms": {"en": {"txt": "x"}}}}, "e.cmd.noti.tmpl."),
        ({"default_locale": "xx-!!", "channels": {"sms": {"en": {"text": "x"}}}}, "e.cmd.noti."),
    ):  # fmt: skip
        code_got = error_of(alice.put(f"/v1/templates/{name}", json=body))
        assert code_got[0] == 422 and code_got[1].startswith(code), (body, code_got)
    assert error_of(alice.put(f"/v1/templates/{name}", json=[TEMPLATE])) == (422, "e.noti.http.badrequest")
    assert error_of(alice.put("/v1/templates/bad%20name", json=TEMPLATE)) == (422, "e.cmd.noti.tmpl.badname")
    assert error_of(alice.put("/v1/templates/..%2Fx", json=TEMPLATE)) == (404, "e.noti.http.noroute")
    assert error_of(alice.get(f"/v1/templates/{name}?version=0"))[0] == 422
    assert stored(raw) == before
    assert ok(alice.delete(f"/v1/templates/{name}")) == {"name": name, "deleted": True}
    assert error_of(alice.get(f"/v1/templates/{name}")) == (404, "e.cmd.noti.tmpl.not_found")
    assert error_of(alice.delete(f"/v1/templates/{name}")) == (404, "e.cmd.noti.tmpl.not_found")
    assert ok(alice.get("/v1/templates")) == {"templates": []}


# --- notices -----------------------------------------------------------------------------------


def test_a_notice_is_made_read_and_repeated_by_its_idempotency_key(
    alice: As, ops: As, raw: redis.Redis
) -> None:
    setup_orders(alice, ops)
    body = {"recipient": "42", "template": "order_shipped", "data": {"order": 7}, "category": "orders",
            "channels": ["sms", "email"]}  # fmt: skip
    made = alice.post("/v1/notices", json=body, headers={"Idempotency-Key": "order-7"})
    notice = ok(made, 201)
    assert made.headers["Location"] == f"/v1/notices/{notice['id']}" and notice["id"].startswith("n")
    assert (notice["recipient"], notice["template"], notice["version"], notice["category"]) == (
        "42", "order_shipped", 1, "orders")  # fmt: skip
    states = {c["channel"]: (c["state"], c["locale"]) for c in notice["channels"]}
    assert states == {"sms": ("queued", "zh"), "email": ("queued", "en")}, notice
    sms = next(c["record"] for c in notice["channels"] if c["channel"] == "sms")
    record = ok(alice.get(f"/v1/notifications/{sms}"))
    assert (
        record["noti_target"] == PHONE
        and record["noti_sms_text"] == "订单 7 已发货"
        and record["noti_c"] == ALICE
    )
    shown = ok(alice.get(f"/v1/notices/{notice['id']}"))
    assert shown == {**notice, "repeated": False}
    # the same key again: the first notice, nothing new
    before = stored(raw)
    again = ok(alice.post("/v1/notices", json=body, headers={"Idempotency-Key": "order-7"}), 201)
    assert again["id"] == notice["id"] and again["repeated"] is True
    assert stored(raw) == before
    # an eta, as POST /v1/notifications takes it; a bad one refused, nothing stored
    in_a_month = (datetime.now(UTC) + timedelta(days=30)).isoformat()
    at = ok(alice.post("/v1/notices", json={**body, "channels": ["sms"], "eta": in_a_month}), 201)
    assert [c["state"] for c in at["channels"]] == ["scheduled"]
    before = stored(raw)
    bad = alice.post("/v1/notices", json={**body, "eta": "tomorrow"})
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "e.cmd.noti.add.baddelay"
    assert stored(raw) == before
    # a chain: the first channel allowed, the next one standing by
    chained = ok(alice.post("/v1/notices", json={**body, "channels": None, "chain": "sms,email",
                                                 "after_s": 60}), 201)  # fmt: skip
    assert [(c["channel"], c["state"]) for c in chained["channels"]] == [
        ("sms", "queued"),
        ("email", "fallback"),
    ]


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"recipient": "nobody", "template": "order_shipped"}, 404, "e.cmd.noti.rcpt.not_found"),
        ({"recipient": "42", "template": "nothing"}, 404, "e.cmd.noti.tmpl.not_found"),
        ({"recipient": "42", "template": "order_shipped@9"}, 404, "e.cmd.noti.tmpl.not_found"),
        ({"recipient": "42", "template": "order_shipped@x"}, 422, "e.cmd.noti.notify.badtemplate"),
        ({"recipient": "42", "template": "order_shipped", "category": "nothing"}, 404, NO_CATEGORY),
        ({"recipient": "42", "template": "order_shipped", "data": {}}, 422, "e.cmd.noti.tmpl.missingvar"),
        ({"recipient": "42", "template": "order_shipped", "data": [1]}, 422, "e.noti.http.badrequest"),
        ({"recipient": "42", "template": "order_shipped", "data": {"order": 1}, "channels": ["fax"]}, 422,
         "e.cmd.noti.notify.badchannels"),
        ({"recipient": "42", "template": "order_shipped", "data": {"order": 1}, "channels": ["sms"],
          "chain": ["sms"]}, 422, "e.cmd.noti.notify.badchannels"),
        ({"recipient": "42", "template": "order_shipped", "data": {"order": 1}, "chain": ["sms", "email"],
          "after_s": -1}, 422, "e.cmd.noti.notify.badafter"),
        ({"recipient": "42", "template": "order_shipped", "data": {"order": 1}, "locale": "!!"}, 422,
         "e.cmd.noti.rcpt.badlocale"),
        ({"recipient": "42", "template": "order_shipped", "data": {"order": 1}, "lv": "high"}, 422,
         "e.noti.http.badrequest"),
        ({"recipient": "42", "template": "order_shipped", "data": {"order": 1}, "channels": ["weixin"]}, 422,
         "e.cmd.noti.notify.nochannel"),
        ({"recipient": "42", "template": "order_shipped", "to": PHONE}, 422, "e.noti.http.badrequest"),
        ({"recipient": "4 2", "template": "order_shipped"}, 422, "e.cmd.noti.rcpt.badid"),
        ({"template": "order_shipped"}, 422, "e.noti.http.badrequest"),
        ({"recipient": "42", "template": "order_shipped", "data": {"order": "{{ 7*7 }}"}}, 201, ""),
        ({**ORDER, "digest": "Orders", "window": 60}, 422, "e.cmd.noti.notify.baddigest"),
        ({**ORDER, "digest": "orders"}, 422, "e.cmd.noti.notify.baddigest"),
        ({**ORDER, "digest": "orders", "window": "forever"}, 422, "e.cmd.noti.notify.baddigest"),
        ({**ORDER, "digest": "orders", "window": [60]}, 422, "e.noti.http.badrequest"),
        ({**ORDER, "digest": "orders", "window": 60, "digest_max": 0}, 422, "e.cmd.noti.notify.baddigest"),
        ({**ORDER, "digest": "orders", "window": 60, "backoff": "yes"}, 422, "e.noti.http.badrequest"),
        ({**ORDER, "digest": "orders", "window": 60, "delay": 5}, 422, "e.cmd.noti.notify.baddigest"),
        ({**ORDER, "digest": ["orders"], "window": 60}, 422, "e.noti.http.badrequest"),
        ({**ORDER, "dedupe": 5}, 422, "e.noti.http.badrequest"),
        ({**ORDER, "dedupe": "k", "dedupe_window": "8d"}, 422, "e.cmd.noti.notify.baddedupe"),
        ({**ORDER, "dedupe": ""}, 422, "e.cmd.noti.notify.baddedupe"),
    ],
)  # fmt: skip
def test_a_bad_notice_is_refused_with_its_code_and_stores_nothing(
    alice: As, ops: As, raw: redis.Redis, body: dict[str, Any], status: int, code: str
) -> None:
    setup_orders(alice, ops)
    before = stored(raw)
    answer = alice.post("/v1/notices", json=body)
    if status == 201:  # data is never a template itself: rendered as text
        notice = ok(answer, 201)
        sms = next(c["record"] for c in notice["channels"] if c["channel"] == "sms")
        assert ok(alice.get(f"/v1/notifications/{sms}"))["noti_sms_text"] == "订单 {{ 7*7 }} 已发货"
        return
    assert error_of(answer) == (status, code), answer.text
    assert stored(raw) == before


def test_digest_events_and_deduplicated_notices_over_http(
    alice: As, ops: As, bob: As, raw: redis.Redis
) -> None:
    setup_orders(alice, ops)
    ok(alice.put("/v1/templates/orders_today", json={"default_locale": "en", "channels": {
        "sms": {"en": {"text": "{{ count }} orders"}}}}), 201)  # fmt: skip
    event = {**ORDER, "template": "orders_today", "digest": "orders", "window": "10m", "digest_max": 20}
    # a digest event: accepted (202), the id of the notice its window makes
    first = alice.post("/v1/notices", json=event)
    window = ok(first, 202)
    assert window["mode"] == "digest" and window["channels"] == [] and window["id"].startswith("n")
    assert ok(alice.post("/v1/notices", json={**event, "data": {"order": 8}}), 202)["id"] == window["id"]
    assert error_of(alice.get(f"/v1/notices/{window['id']}")) == (404, "e.cmd.noti.notice.not_found")
    # bob's recipient 42 is not alice's: nothing of his goes into her window
    before = stored(raw)
    assert error_of(bob.post("/v1/notices", json=event)) == (404, "e.cmd.noti.rcpt.not_found")
    assert stored(raw) == before
    # deduplicated: the second call answers the first notice
    made = ok(alice.post("/v1/notices", json={**ORDER, "dedupe": "order-7"}), 201)
    again = ok(alice.post("/v1/notices", json={**ORDER, "data": {"order": 9}, "dedupe": "order-7"}), 201)
    assert again["id"] == made["id"] and again["repeated"] is True


def test_open_digests_and_throttles_are_read_by_their_owner(
    alice: As, ops: As, bob: As, raw: redis.Redis
) -> None:
    setup_orders(alice, ops)
    ok(alice.put("/v1/templates/orders_today", json={"default_locale": "en", "channels": {
        "sms": {"en": {"text": "{{ count }} orders"}}}}), 201)  # fmt: skip
    event = {**ORDER, "template": "orders_today", "digest": "orders", "window": "10m"}
    window = ok(alice.post("/v1/notices", json=event), 202)["id"]
    ok(alice.post("/v1/notices", json={**event, "data": {"order": 8}}), 202)
    listed = ok(alice.get("/v1/digests"))["digests"]
    assert [(w["window"], w["recipient"], w["digest"], w["events"]) for w in listed] == [
        (window, "42", "orders", 2)]  # fmt: skip
    assert ok(alice.get("/v1/digests?recipient=42"))["digests"] == listed
    assert ok(alice.get("/v1/digests?recipient=43"))["digests"] == []
    # bob sees none of alice's; a root member may ask for hers
    assert ok(bob.get("/v1/digests"))["digests"] == []
    assert error_of(bob.get("/v1/digests?owner=alice")) == (403, "e.cmd.noti.rcpt.nopvg")
    assert ok(ops.get("/v1/digests?owner=alice"))["digests"] == listed
    for query, code in (("limit=0", "e.noti.http.badrequest"), ("limit=x", "e.noti.http.badrequest"),
                        ("recipient=4%202", "e.cmd.noti.rcpt.badid")):  # fmt: skip
        assert error_of(alice.get(f"/v1/digests?{query}"))[1] == code, query
    # throttles: the category's, as they stand for 42; bob's 42 is not alice's
    ok(ops.put("/v1/categories/orders", json={"channels": {"sms": True, "email": True},
                                              "throttle": {"limit": 2, "period": "1h"}}))  # fmt: skip
    ok(alice.post("/v1/notices", json={**ORDER, "channels": ["sms"]}), 201)
    states = ok(alice.get("/v1/recipients/42/throttles"))
    sms = next(t for t in states["throttles"] if t["channel"] == "sms")
    assert (sms["category"], sms["sent"], sms["limit"], sms["period"], sms["over"]) == (
        "orders",
        1,
        2,
        3600.0,
        "drop",
    )
    before = stored(raw)
    assert error_of(bob.get("/v1/recipients/42/throttles")) == (404, "e.cmd.noti.rcpt.not_found")
    assert stored(raw) == before


def test_a_notice_keeps_the_tokens_level_cap(client: httpx.Client, token: Callable[..., str]) -> None:
    boss_capped = As(client, token(ADMIN, cap=5))
    ok(boss_capped.put("/v1/recipients/7", json={"addresses": {"sms": [PHONE]}}), 201)
    ok(boss_capped.put("/v1/templates/order_shipped", json=TEMPLATE), 201)
    notice = ok(boss_capped.post("/v1/notices", json={"recipient": "7", "template": "order_shipped",
                                                      "data": {"order": 1}, "lv": 900}), 201)  # fmt: skip
    record = ok(boss_capped.get(f"/v1/notifications/{notice['channels'][0]['record']}"))
    assert record["noti_lv"] == 5


#: A deployment whose webhook channel goes through a provider that reaches private addresses:
#: only users granted it by name may use it, and only tokens that name it.
_PRIVATE_CONFIG = """
[channels.sms]
provider = "sandbox"
[channels.webhook]
provider = "internal"
[providers.internal]
kind = "webhook"
secret = "whsec_c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0MTI="
allow_private = true
[provider_grants]
alice = ["internal"]
"""


@pytest.fixture(scope="module")
def private_api(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiProcess]:

    from tests.conftest import serving_api

    config = tmp_path_factory.mktemp("private") / "noti.toml"
    config.write_text(_PRIVATE_CONFIG)
    with serving_api(redis_url, config) as server:
        yield server


def test_a_notice_goes_only_through_providers_the_token_may_use(
    private_api: ApiProcess, rt: Any, token: Callable[..., str], raw: redis.Redis
) -> None:
    rt.signing_keys.add(ALICE, acting=ALICE)  # a webhook is signed with its creator's key
    hook = {"default_locale": "en", "channels": {"webhook": {"en": {"content": {"order": "{{ order }}"}}}}}
    body = {"recipient": "svc", "template": "hook", "data": {"order": 1}}
    with httpx.Client(base_url=private_api.url, timeout=10.0) as client:
        alice = As(client, token(ALICE))
        ok(alice.put("/v1/recipients/svc", json={"addresses": {"webhook": ["http://127.0.0.1:9/in"]}}), 201)
        ok(alice.put("/v1/templates/hook", json=hook), 201)
        # a token that may name only "vendor" cannot reach the private provider, as with a notification
        narrow = As(client, token(ALICE, providers=["vendor"]))
        before = stored(raw)
        refused = narrow.post("/v1/notices", json=body)
        plain = narrow.post("/v1/notifications", json={"type": "webhook", "to": "http://127.0.0.1:9/in",
                                                       "content": {"order": 1}})  # fmt: skip
        # (a notification's refusal is a batch item's, always 422; a notice's is the error's own)
        assert error_of(refused) == (403, "e.cmd.noti.add.providerdenied"), refused.text
        assert error_of(plain)[1] == "e.cmd.noti.add.providerdenied"
        # nor can bob, who is not granted it, with any token
        bob = As(client, token(BOB))
        ok(bob.put("/v1/recipients/svc", json={"addresses": {"webhook": ["http://127.0.0.1:9/in"]}}), 201)
        ok(bob.put("/v1/templates/hook", json=hook), 201)
        middle = stored(raw)
        assert error_of(bob.post("/v1/notices", json=body)) == (403, "e.cmd.noti.add.providerdenied")
        assert stored(raw) == middle
        # alice's own token may
        notice = ok(alice.post("/v1/notices", json=body), 201)
        assert [(c["channel"], c["state"]) for c in notice["channels"]] == [("webhook", "queued")]
    assert before != stored(raw)


# --- another user's -----------------------------------------------------------------------------------


def test_another_users_recipients_templates_and_notices_answer_as_missing_ones(
    alice: As, bob: As, ops: As, raw: redis.Redis
) -> None:
    setup_orders(alice, ops)
    notice = ok(alice.post("/v1/notices", json=ORDER), 201)
    before = stored(raw)
    ghost_notice = "n" + new_id()
    for method, path, real, ghost, body in (
        ("GET", "/v1/recipients/{}", "42", "43", None),
        ("PATCH", "/v1/recipients/{}", "42", "43", {"locale": "fr"}),
        ("DELETE", "/v1/recipients/{}", "42", "43", None),
        ("GET", "/v1/recipients/{}/preferences", "42", "43", None),
        ("PUT", "/v1/recipients/{}/preferences", "42", "43", {"orders": {"sms": False}}),
        ("GET", "/v1/recipients/{}/history", "42", "43", None),
        ("POST", "/v1/recipients/{}/merge", "42", "43", {"from": "44"}),
        ("GET", "/v1/templates/{}", "order_shipped", "order_shipper", None),
        ("DELETE", "/v1/templates/{}", "order_shipped", "order_shipper", None),
        ("GET", "/v1/notices/{}", notice["id"], ghost_notice, None),
    ):
        theirs = bob.call(method, path.format(real), json=body)
        missing = bob.call(method, path.format(ghost), json=body)
        assert theirs.status_code == missing.status_code == 404, (path, theirs.text)
        assert theirs.content == missing.content.replace(ghost.encode(), real.encode()), path
        assert ALICE.encode() not in theirs.content
    # bob's notice names his own recipient 42: there is none
    answer = bob.post(
        "/v1/notices", json={"recipient": "42", "template": "order_shipped", "data": {"order": 1}}
    )
    assert error_of(answer) == (404, "e.cmd.noti.rcpt.not_found")
    # naming alice is for root members
    for path in ("/v1/recipients/42?owner=alice", "/v1/recipients?owner=alice", "/v1/templates?owner=alice"):
        assert error_of(bob.get(path)) == (403, "e.cmd.noti.rcpt.nopvg"), path
    answer = bob.post("/v1/notices", json={"recipient": "42", "template": "order_shipped", "owner": ALICE})
    assert error_of(answer) == (403, "e.cmd.noti.rcpt.nopvg")
    assert stored(raw) == before
    # bob's own list is empty; a root member reads alice's by naming her
    assert ok(bob.get("/v1/recipients")) == {"recipients": [], "next": None}
    assert ok(bob.get("/v1/templates")) == {"templates": []}
    assert ok(ops.get("/v1/recipients/42?owner=alice"))["id"] == "42"
    assert ok(ops.get(f"/v1/notices/{notice['id']}"))["owner"] == ALICE
    assert error_of(ops.get("/v1/recipients/42")) == (404, "e.cmd.noti.rcpt.not_found")  # ops's own: none


def test_every_route_needs_a_token(client: httpx.Client, raw: redis.Redis) -> None:
    before = stored(raw)
    for method, path in (
        ("PUT", "/v1/recipients/42"), ("GET", "/v1/recipients/42"), ("PATCH", "/v1/recipients/42"),
        ("DELETE", "/v1/recipients/42"), ("GET", "/v1/recipients"), ("POST", "/v1/recipients/42/merge"),
        ("POST", "/v1/recipients/import"), ("POST", "/v1/recipients:import"),
        ("GET", "/v1/recipients/42/preferences"), ("PUT", "/v1/recipients/42/preferences"),
        ("GET", "/v1/recipients/42/history"), ("GET", "/v1/categories"), ("PUT", "/v1/categories/x"),
        ("DELETE", "/v1/categories/x"), ("PUT", "/v1/templates/x"), ("GET", "/v1/templates/x"),
        ("GET", "/v1/templates"), ("DELETE", "/v1/templates/x"), ("POST", "/v1/notices"),
        ("GET", "/v1/notices/n1"),
    ):  # fmt: skip
        answer = client.request(method, path, json={} if method in ("PUT", "PATCH", "POST") else None)
        assert error_of(answer) == (401, "e.noti.auth.missing"), (method, path)
    assert stored(raw) == before


# --- unsubscribe ----------------------------------------------------------------------------------


def unsubscribe_token(rt: Any, owner: str, rid: str, category: str, channel: str) -> str:
    from noti.recipients.unsubscribe import unsubscribe_url

    url = unsubscribe_url(rt, owner, rid, category, channel)
    assert url.startswith(f"{rt.settings.public_url or ''}/v1/unsubscribe/")
    return url.rsplit("/", 1)[1]


def test_one_click_unsubscribes_and_the_page_alone_changes_nothing(
    client: httpx.Client, alice: As, ops: As, rt: Any, raw: redis.Redis
) -> None:
    setup_orders(alice, ops)
    # the link of an e-mail notice (its List-Unsubscribe header), made by the server
    notice = ok(alice.post("/v1/notices", json={**ORDER, "channels": ["email"]}), 201)
    record = ok(alice.get(f"/v1/notifications/{notice['channels'][0]['record']}"))
    link = record["noti_email_unsub"]
    assert link.startswith("https://noti.example.com/base/v1/unsubscribe/"), record
    token = link.rsplit("/", 1)[1]
    assert token == unsubscribe_token(rt, ALICE, "42", "orders", "email")
    before = stored(raw)
    # the page (a link scanner, a preview) shows a button and changes nothing
    page = client.get(f"/v1/unsubscribe/{token}")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert '<form method="post">' in page.text and "orders" in page.text and "email" in page.text
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert page.headers["referrer-policy"] == "no-referrer" and page.headers["cache-control"] == "no-store"
    assert stored(raw) == before
    # RFC 8058's one click: no API token, the form body
    done = client.post(
        f"/v1/unsubscribe/{token}",
        content=b"List-Unsubscribe=One-Click",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert ok(done) == {"unsubscribed": True, "category": "orders", "channel": "email"}
    assert ok(alice.get("/v1/recipients/42/preferences")) == {"orders": {"email": False}}
    # again (a second click, any body or none, a browser asking for a page): the same answer
    assert ok(client.post(f"/v1/unsubscribe/{token}", content=b"whatever")) == ok(done)
    shown = client.post(f"/v1/unsubscribe/{token}", headers={"Accept": "text/html"})
    assert shown.status_code == 200 and "no longer receive" in shown.text
    assert ok(alice.get("/v1/recipients/42/preferences")) == {"orders": {"email": False}}
    # the e-mail notice now goes to SMS only: the e-mail is suppressed, as a record
    notice = ok(alice.post("/v1/notices", json=ORDER), 201)
    states = {c["channel"]: (c["state"], c["reason"]) for c in notice["channels"]}
    assert states == {"sms": ("queued", None), "email": ("suppressed", "optout")}, notice


def test_a_forged_or_stale_unsubscribe_link_is_refused_and_changes_nothing(
    client: httpx.Client, alice: As, ops: As, rt: Any, raw: redis.Redis
) -> None:
    setup_orders(alice, ops)
    # before noti made its signing secret, every token is refused without making it
    raw.delete(rt.keys.unsubscribe_secret)
    before = stored(raw)
    for method in ("GET", "POST"):
        answer = client.request(method, "/v1/unsubscribe/YWxpY2U.AAAAAAAAAAAAAAAAAAAAAA")
        assert answer.status_code == 400, answer.text
    assert error_of(client.post("/v1/unsubscribe/YWxpY2U.AAAA")) == (400, "e.cmd.noti.unsub.badtoken")
    assert stored(raw) == before
    raw.set(rt.keys.unsubscribe_secret, UNSUB_SECRET)
    token = unsubscribe_token(rt, ALICE, "42", "orders", "email")
    body, mac = token.split(".")
    other = unsubscribe_token(rt, ALICE, "42", "orders", "sms")
    ok(alice.put("/v1/recipients/gone", json={"addresses": {"email": [EMAIL]}}), 201)
    gone = unsubscribe_token(rt, ALICE, "gone", "orders", "email")
    ok(alice.delete("/v1/recipients/gone"))
    before = stored(raw)
    bobs = (
        base64.urlsafe_b64encode("\x1f".join((BOB, "42", "orders", "email")).encode()).rstrip(b"=").decode()
    )
    forged = [
        f"{body}.{mac[:-2]}AA",  # altered MAC
        f"{other.split('.')[0]}.{mac}",  # another channel, this MAC
        f"{bobs}.{mac}",  # another owner, this MAC
        f"{body}.{mac}.x",
        f"{body}",
        f"{body}..{mac}",
        "x" * 2000 + "." + mac,
        f"{body}.%00",
        f"{body}.{mac}%0A",
    ]
    for bad in forged:
        for method in ("GET", "POST"):
            answer = client.request(method, f"/v1/unsubscribe/{bad}")
            assert answer.status_code in (400, 404), (bad, answer.text)
            if answer.status_code == 400 and method == "POST":
                assert error_of(answer) == (400, "e.cmd.noti.unsub.badtoken"), bad
            if method == "GET":
                assert "e.cmd.noti.unsub.badtoken" in answer.text or answer.status_code == 404
    assert client.get("/v1/unsubscribe/a/b").status_code == 404
    # a recipient erased since: 404, nothing made for them
    assert error_of(client.post(f"/v1/unsubscribe/{gone}")) == (404, "e.cmd.noti.rcpt.not_found")
    page = client.get(f"/v1/unsubscribe/{gone}")
    assert page.status_code == 404 and "e.cmd.noti.rcpt.not_found" in page.text and "<form" not in page.text
    assert stored(raw) == before
    assert ok(alice.get("/v1/recipients/42/preferences")) == {}


def test_the_html_pages_escape_what_they_show(rt: Any) -> None:
    from noti.errors import InvalidInput
    from noti.http.unsubscribe import _error_page

    page = _error_page(InvalidInput("<script>alert(1)</script>", code="e.x"))
    text = bytes(page.body).decode()
    assert "<script>" not in text and "&lt;script&gt;" in text and page.status_code == 422


def test_the_schema_lists_the_routes(client: httpx.Client) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert {
        "/v1/recipients", "/v1/recipients/{rid}", "/v1/recipients/{rid}/merge", "/v1/recipients/import",
        "/v1/recipients/{rid}/preferences", "/v1/recipients/{rid}/history", "/v1/categories",
        "/v1/categories/{name}", "/v1/templates", "/v1/templates/{name}", "/v1/notices",
        "/v1/notices/{notice_id}", "/v1/unsubscribe/{token}",
    } <= set(paths)  # fmt: skip
    patch = paths["/v1/recipients/{rid}"]["patch"]["requestBody"]["content"]
    assert {"application/merge-patch+json", "application/json"} <= set(patch)
    assert "security" not in paths["/v1/unsubscribe/{token}"]["post"]
