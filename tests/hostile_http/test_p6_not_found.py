"""Point 6 of issue 32, "not found means not found": another user's record or event answers
exactly as a missing one (404, the same body but for the id), so a token cannot tell which
ids exist; and another user's DELETE changes nothing, lists show only one's own records, and
the owner's other tokens and root members read them.
"""

from __future__ import annotations

import httpx
import pytest

from noti.core.record import new_id
from tests.hostile_http.conftest import Deployment
from tests.hostile_http.harness import id_free

#: (reader, owner): each plain user against the other's data
PAIRS = [("bob", "alice"), ("alice", "bob")]
#: (id, method, path of one item with ``{id}``, the seeded item's kind)
ROUTES = [
    ("get-record", "GET", "/v1/notifications/{id}", "record"),
    ("delete-record", "DELETE", "/v1/notifications/{id}", "record"),
    ("get-event", "GET", "/v1/events/{id}", "event"),
]


def _answer(
    deployment: Deployment, client: httpx.Client, who: str, method: str, path: str, item: str
) -> tuple[int, str]:
    answer = client.request(method, path.replace("{id}", item), headers=deployment.as_(who))
    return answer.status_code, id_free(answer.text, item)


@pytest.mark.parametrize(("method", "path", "kind"), [r[1:] for r in ROUTES], ids=[r[0] for r in ROUTES])
@pytest.mark.parametrize(("reader", "owner"), PAIRS, ids=[f"{r}-on-{o}s" for r, o in PAIRS])
def test_another_users_item_answers_as_a_missing_one(
    deployment: Deployment, client: httpx.Client, reader: str, owner: str, method: str, path: str, kind: str
) -> None:
    theirs = deployment.ids[f"{owner}_{kind}"]
    with deployment.unchanged():
        got = _answer(deployment, client, reader, method, path, theirs)
    missing = _answer(deployment, client, reader, method, path, new_id())
    assert missing[0] == 404, missing
    assert got == missing


@pytest.mark.parametrize(("reader", "owner"), PAIRS, ids=[f"{r}-on-{o}s" for r, o in PAIRS])
def test_another_users_delete_changes_nothing(
    deployment: Deployment, client: httpx.Client, reader: str, owner: str
) -> None:
    with deployment.unchanged():
        answer = deployment.ask(client, "DELETE", f"/v1/notifications/{{{owner}_record}}", who=reader)
    assert answer.status_code in (403, 404), answer.text


@pytest.mark.parametrize(("reader", "owner"), PAIRS, ids=[f"{r}-on-{o}s" for r, o in PAIRS])
def test_a_list_shows_only_ones_own_records(
    deployment: Deployment, client: httpx.Client, reader: str, owner: str
) -> None:
    listed = deployment.ask(client, "GET", "/v1/notifications?limit=1000", who=reader)
    assert listed.status_code == 200, listed.text
    ids = {r["id"] for r in listed.json()["notifications"]}
    assert deployment.ids[f"{reader}_record"] in ids  # the control: one's own is listed
    assert deployment.ids[f"{owner}_record"] not in ids
    assert {r["noti_c"] for r in listed.json()["notifications"]} == {reader}


#: (id, who, path): who may read alice's record and event
MAY_READ = [
    ("her-other-token-record", "alice2", "/v1/notifications/{alice_record}"),
    ("her-other-token-event", "alice2", "/v1/events/{alice_event}"),
    ("root-member-record", "ops", "/v1/notifications/{alice_record}"),
    ("root-member-event", "ops", "/v1/events/{alice_event}"),
    ("root-admin-record", "boss", "/v1/notifications/{alice_record}"),
]


@pytest.mark.parametrize(("who", "path"), [m[1:] for m in MAY_READ], ids=[m[0] for m in MAY_READ])
def test_the_owner_and_root_read_it(
    deployment: Deployment, client: httpx.Client, who: str, path: str
) -> None:
    answer = deployment.ask(client, "GET", path, who=who)
    assert answer.status_code == 200, answer.text
    assert answer.json()["id"] == path.format(**deployment.ids).rsplit("/", 1)[1]
