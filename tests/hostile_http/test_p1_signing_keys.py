"""Point 1 of issue 32: ``/v1/signing-keys``, a user's webhook signing secrets over HTTP.

A token acts for its own user only: it makes, lists and deletes that user's keys; another
user's key id answers exactly as a missing one; every refusal has its code and changes
nothing; a secret is shown once, in the answer that made it, and never again (the package's
leak scan looks for it in every later answer and log). The module leaves no key behind.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.hostile_http.conftest import Deployment
from tests.hostile_http.harness import assert_refused, id_free

ROUTES = [("POST", "/v1/signing-keys"), ("GET", "/v1/signing-keys"), ("DELETE", "/v1/signing-keys/sk_0")]


def shown_once(deployment: Deployment, answer: httpx.Response) -> None:
    """The secret ``answer`` made is a secret of the run from now on: the answer that showed
    it (the only one that may) is taken out of the leak scan's record; every other answer and
    log is searched for it."""
    secret = answer.json()["secret"]
    deployment.answers.answers[:] = [
        (a, seen) for a, seen in deployment.answers.answers if secret not in seen
    ]
    deployment.secrets.add("signing key of bob", secret)


@pytest.fixture(scope="module")
def bobs_key(deployment: Deployment, client: httpx.Client) -> Iterator[str]:
    """A key of bob's (its secret registered as a secret of the run), deleted at the end."""
    made = client.post("/v1/signing-keys", headers=deployment.as_("bob"))
    assert made.status_code == 201, made.text
    body = made.json()
    shown_once(deployment, made)
    assert body["user"] == "bob" and body["secret"].startswith("whsec_") and body["id"].startswith("sk_")
    yield body["id"]
    client.delete(f"/v1/signing-keys/{body['id']}", headers=deployment.as_("bob"))


@pytest.mark.parametrize(("method", "path"), ROUTES)
@pytest.mark.parametrize("who", [None, "revoked"])
def test_every_route_needs_a_valid_token(
    deployment: Deployment, client: httpx.Client, method: str, path: str, who: str | None
) -> None:
    with deployment.unchanged():
        answer = deployment.ask(client, method, path, who=who)
    assert_refused(answer, 401, "e.noti.auth.missing" if who is None else "e.noti.auth.revoked")


@pytest.mark.parametrize("who", ["alice", "ops", "boss"])
def test_another_users_key_is_not_found_exactly_as_a_missing_one(
    deployment: Deployment, client: httpx.Client, bobs_key: str, who: str
) -> None:
    # a root member and a root administrator too: over HTTP a token acts for its own user
    missing = "sk_" + "0" * 16
    with deployment.unchanged():
        theirs = deployment.ask(client, "DELETE", f"/v1/signing-keys/{bobs_key}", who=who)
        nobodys = deployment.ask(client, "DELETE", f"/v1/signing-keys/{missing}", who=who)
    assert_refused(theirs, 404, "e.noti.sigkey.not_found")
    assert (theirs.status_code, id_free(theirs.text, bobs_key)) == (
        nobodys.status_code,
        id_free(nobodys.text, missing),
    )
    listed = deployment.ask(client, "GET", "/v1/signing-keys", who=who).json()["signing_keys"]
    assert bobs_key not in {key["id"] for key in listed}


@pytest.mark.parametrize(
    "key_id",
    ["x", "sk_", "sk_" + "f" * 200, "..%2F..%2Fnotifications", "%00", "sk_%E2%98%83", "SK_0000000000000000"],
)
def test_hostile_key_ids_are_not_found(deployment: Deployment, client: httpx.Client, key_id: str) -> None:
    with deployment.unchanged():
        answer = deployment.ask(client, "DELETE", f"/v1/signing-keys/{key_id}", who="bob")
    assert answer.status_code == 404 and "Traceback" not in answer.text


@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_a_query_parameter_the_route_does_not_take_is_refused(
    deployment: Deployment, client: httpx.Client, method: str, path: str
) -> None:
    with deployment.unchanged():
        answer = deployment.ask(client, method, path, who="bob", params={"user": "alice"})
    assert_refused(answer, 422, "e.noti.http.badrequest")


def test_bobs_list_holds_his_key_never_a_secret_and_nothing_of_others(
    deployment: Deployment, client: httpx.Client, bobs_key: str
) -> None:
    answer = deployment.ask(client, "GET", "/v1/signing-keys", who="bob")
    assert answer.status_code == 200
    [key] = answer.json()["signing_keys"]
    assert key["id"] == bobs_key and key["user"] == "bob" and set(key) == {"id", "user", "created_ms"}
    assert deployment.ask(client, "GET", "/v1/signing-keys", who="alice").json() == {"signing_keys": []}


def test_a_fourth_key_is_refused_and_a_body_is_never_read_as_a_user(
    deployment: Deployment, client: httpx.Client, bobs_key: str
) -> None:
    made = []
    for _ in range(2):  # bob has 1: 3 in all
        answer = client.post("/v1/signing-keys", headers=deployment.as_("bob"), json={"user": "alice"})
        assert answer.status_code == 201 and answer.json()["user"] == "bob"
        shown_once(deployment, answer)
        made.append(answer.json()["id"])
    try:
        with deployment.unchanged():
            full = deployment.ask(client, "POST", "/v1/signing-keys", who="bob")
        assert_refused(full, 422, "e.noti.sigkey.full")
    finally:
        for key_id in made:
            assert (
                deployment.ask(client, "DELETE", f"/v1/signing-keys/{key_id}", who="bob").status_code == 200
            )
