"""Hostile query strings on ``GET /v1/notifications`` (the list route), and query strings and
path ids on the routes of one record or event: each refused with its status and code,
nothing changed. A misspelt or unknown parameter is refused, never ignored (a filter dropped
silently would list everything)."""

from __future__ import annotations

import httpx

from tests.hostile_http.conftest import Deployment
from tests.tables import by_id

BAD = "e.noti.http.badrequest"

#: (id, raw query string after ``?``, status, code)
LIST_QUERIES: list[tuple[str, str, int, str]] = [
    ("st-7", "st=7", 422, "e.cmd.noti.list.badst"),
    ("st-word", "st=x", 422, BAD),
    ("st-float", "st=1.5", 422, BAD),
    ("st-empty", "st=", 422, BAD),
    ("st-huge", "st=" + "9" * 400, 422, "e.cmd.noti.list.badst"),
    ("st-nan", "st=nan", 422, BAD),
    ("st-twice-one-bad", "st=1&st=x", 422, BAD),
    ("type-fax", "type=fax", 422, "e.cmd.noti.add.badtype"),
    ("type-empty", "type=", 422, "e.cmd.noti.add.badtype"),
    ("type-nul", "type=sms%00", 422, "e.cmd.noti.add.badtype"),
    ("type-10k", "type=" + "s" * 10_000, 422, "e.cmd.noti.add.badtype"),
    ("limit-0", "limit=0", 422, BAD),
    ("limit-negative", "limit=-1", 422, BAD),
    ("limit-1001", "limit=1001", 422, BAD),
    ("limit-huge", "limit=99999999999999999999999", 422, BAD),
    ("limit-float", "limit=1.5", 422, BAD),
    ("limit-exponent", "limit=1e3", 422, BAD),
    ("limit-word", "limit=all", 422, BAD),
    ("limit-empty", "limit=", 422, BAD),
    ("delivery-lost", "delivery=lost", 422, "e.cmd.noti.list.baddelivery"),
    ("delivery-empty", "delivery=", 422, "e.cmd.noti.list.baddelivery"),
    ("user-colon", "user=a:b", 422, "e.cmd.noti.baduser"),
    ("user-empty", "user=", 422, "e.cmd.noti.baduser"),
    ("user-lf", "user=alice%0A", 422, "e.cmd.noti.baduser"),
    ("user-nul", "user=alice%00", 422, "e.cmd.noti.baduser"),
    ("user-other", "user=bob", 403, "e.cmd.noti.list.nopvg"),
    ("user-root", "user=boss", 403, "e.cmd.noti.list.nopvg"),
    ("misspelt-filter", "stat=1", 422, BAD),
    ("unknown-param", "creator=bob", 422, BAD),
    ("array-syntax", "st[]=1", 422, BAD),
    ("param-with-nul", "st%00=1", 422, BAD),
    ("many-unknown", "&".join(f"p{n}=1" for n in range(200)), 422, BAD),
    ("invalid-utf8-value", "type=%ff%fe", 422, "e.cmd.noti.add.badtype"),
]


@by_id("query, status, code", LIST_QUERIES)
def test_a_hostile_list_query_is_refused(
    deployment: Deployment, client: httpx.Client, query: str, status: int, code: str
) -> None:
    deployment.refuses(status, code, client, "GET", f"/v1/notifications?{query}")


#: Ids that name nothing, tried on each route of one item (below).
MISSING_IDS = {"unknown": "01m8ewcqpf43ecf26k9wqs6cww", "glob": "*", "4k": "0" * 4000}
#: (the cases' id prefix, method, the route up to the id, the code of an item not found)
ITEM_ROUTES = [
    ("record", "GET", "/v1/notifications/", "e.cmd.noti.not_found"),
    ("delete", "DELETE", "/v1/notifications/", "e.cmd.noti.revoke.not_found"),
    ("event", "GET", "/v1/events/", "e.noti.event.not_found"),
]
#: (id, method, path with query, status, code): the routes of one record or event
ONE: list[tuple[str, str, str, int, str]] = [
    ("get-record-user-param", "GET", "/v1/notifications/{alice_record}?user=bob", 422, BAD),
    ("delete-record-force-param", "DELETE", "/v1/notifications/{alice_record}?force=1", 422, BAD),
    ("get-event-user-param", "GET", "/v1/events/{alice_event}?user=bob", 422, BAD),
    ("post-notification-user-param", "POST", "/v1/notifications?user=boss", 422, BAD),
    ("post-event-user-param", "POST", "/v1/events?user=boss", 422, BAD),
    *(
        (f"{name}-id-{what}", method, route + missing, 404, code)
        for name, method, route, code in ITEM_ROUTES
        for what, missing in MISSING_IDS.items()
    ),
    ("record-id-word", "GET", "/v1/notifications/nope", 404, "e.cmd.noti.not_found"),
    ("record-id-nul", "GET", "/v1/notifications/01m8ewcqpf43ecf26k9wqs6c%00", 404, "e.cmd.noti.not_found"),
    ("record-id-unicode", "GET", "/v1/notifications/%E2%80%AE01m8", 404, "e.cmd.noti.not_found"),
    ("record-id-slashes", "GET", "/v1/notifications/..%2F..%2Ftoken", 404, "e.noti.http.noroute"),
    ("record-id-upper", "GET", "/v1/notifications/{alice_record_upper}", 404, "e.cmd.noti.not_found"),
    ("no-such-route", "GET", "/v2/notifications", 404, "e.noti.http.noroute"),
    ("put-notifications", "PUT", "/v1/notifications", 405, "e.noti.http.method"),
    ("patch-record", "PATCH", "/v1/notifications/{alice_record}", 405, "e.noti.http.method"),
    ("delete-list", "DELETE", "/v1/notifications", 405, "e.noti.http.method"),
    ("delete-event", "DELETE", "/v1/events/{alice_event}", 405, "e.noti.http.method"),
]


@by_id("method, path, status, code", ONE)
def test_a_hostile_path_or_query_on_one_item_is_refused(
    deployment: Deployment, client: httpx.Client, method: str, path: str, status: int, code: str
) -> None:
    if "{alice_record_upper}" in path:
        path = path.replace("{alice_record_upper}", deployment.ids["alice_record"].upper())
    deployment.refuses(status, code, client, method, path)
