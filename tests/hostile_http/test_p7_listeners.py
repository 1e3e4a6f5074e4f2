"""Point 7 of issue 32, over HTTP: a plain user's event no longer drives a root member's
listener (finding 5: it sent an SMS as the member, at level 100, to the number and with the
text from the plain user's payload).

``ops`` (a root member) listens to ``order.shipped`` with a template taking the phone and the
text from the payload; alice and bob post that event with the real worker's event processor
running. Their events are done and nothing is made; the member's own event makes its SMS (the
door works). The listener is removed at the end.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import ADMIN, MEMBER, wait_until
from tests.hostile_http.conftest import DB, PHONE, Deployment

EVENT = "order.shipped"
TEMPLATE = {"type": "sms", "target": "{{ phone }}", "text": "{{ text }}", "lv": 100}


@pytest.fixture(scope="module")
def listener(deployment: Deployment, redis_server: str) -> Iterator[Any]:
    from noti.config import Settings
    from noti.events import Events
    from noti.sending.runtime import Runtime

    runtime = Runtime(Settings(redis_url=f"{redis_server}/{DB}", root_admins=[ADMIN], root_members=[MEMBER]))
    events = Events(runtime)
    made = events.add_listener(EVENT, TEMPLATE, name="ops-shipping", user=MEMBER)
    try:
        yield made
    finally:
        events.remove_listener("ops-shipping", user=MEMBER)
        runtime.close()


def _members_records(deployment: Deployment, client: httpx.Client) -> list[dict[str, Any]]:
    answer = deployment.ask(client, "GET", "/v1/notifications", who="boss", params={"user": MEMBER})
    assert answer.status_code == 200, answer.text
    return list(answer.json()["notifications"])


def _dispatched(deployment: Deployment, client: httpx.Client, who: str, text: str) -> None:
    payload = {"phone": PHONE, "text": text}
    answer = deployment.ask(client, "POST", "/v1/events", who=who, json={"name": EVENT, "payload": payload})
    assert answer.status_code == 202, answer.text
    event_id = answer.json()["id"]

    def done() -> bool:
        found = deployment.ask(client, "GET", f"/v1/events/{event_id}", who=who).json()
        return bool(found.get("status") == "done")

    wait_until(done, timeout=30)


@pytest.mark.parametrize("who", ["alice", "bob"])
def test_a_plain_users_event_does_not_drive_a_root_members_listener(
    deployment: Deployment, client: httpx.Client, listener: Any, who: str
) -> None:
    before = _members_records(deployment, client)
    _dispatched(deployment, client, who, f"sent as ops by {who}")
    assert _members_records(deployment, client) == before


def test_the_members_own_event_still_drives_it(
    deployment: Deployment, client: httpx.Client, listener: Any
) -> None:
    before = {r["id"] for r in _members_records(deployment, client)}
    _dispatched(deployment, client, "ops", "ops's own")
    made = [r for r in _members_records(deployment, client) if r["id"] not in before]
    assert [(r["noti_sms_text"], r["noti_lv"]) for r in made] == [("ops's own", 100)]
