"""Every bad token form on every route that takes a token: 401 with its code and the Bearer
challenge, and nothing changes (alice's waiting record is not revoked by a DELETE that
carries no valid token, no notification or event is stored).

A token is taken from the ``Authorization`` header only: one in the query string
(``?access_token=``, ``?token=``) authenticates nothing, and stays out of the access log (the
leak scan at the end of the package reads it).
"""

from __future__ import annotations

import base64
import secrets as random
from collections.abc import Callable

import httpx
import pytest

from tests.hostile_http.conftest import PHONE, Deployment
from tests.hostile_http.harness import assert_refused

Headers = Callable[[dict[str, str]], dict[str, str | bytes]]

MISSING, UNKNOWN, REVOKED = "e.noti.auth.missing", "e.noti.auth.unknown", "e.noti.auth.revoked"


def _swapcase_tail(token: str) -> str:
    return token[:5] + token[5:].swapcase()


#: (id, the request's headers given the tokens, code)
FORMS: list[tuple[str, Headers, str]] = [
    ("no-header", lambda t: {}, MISSING),
    ("empty-header", lambda t: {"Authorization": ""}, MISSING),
    ("scheme-alone", lambda t: {"Authorization": "Bearer"}, MISSING),
    (
        "basic-scheme",
        lambda t: {"Authorization": "Basic " + base64.b64encode(f"alice:{t['alice']}".encode()).decode()},
        MISSING,
    ),
    ("token-scheme", lambda t: {"Authorization": f"Token {t['alice']}"}, MISSING),
    ("no-scheme", lambda t: {"Authorization": t["alice"]}, MISSING),
    ("in-a-cookie", lambda t: {"Cookie": f"token={t['alice']}"}, MISSING),
    ("x-api-key", lambda t: {"X-API-Key": t["alice"]}, MISSING),
    ("not-noti", lambda t: {"Authorization": "Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSJ9."}, UNKNOWN),
    ("prefix-upper", lambda t: {"Authorization": "Bearer NOTI_" + t["alice"][5:]}, UNKNOWN),
    ("random-noti", lambda t: {"Authorization": "Bearer noti_" + random.token_urlsafe(32)}, UNKNOWN),
    ("prefix-alone", lambda t: {"Authorization": "Bearer noti_"}, UNKNOWN),
    ("too-long-5000", lambda t: {"Authorization": "Bearer noti_" + "x" * 5000}, UNKNOWN),
    ("too-long-own", lambda t: {"Authorization": f"Bearer {t['alice'] * 5}"}, UNKNOWN),
    ("one-char-more", lambda t: {"Authorization": f"Bearer {t['alice']}A"}, UNKNOWN),
    ("one-char-less", lambda t: {"Authorization": f"Bearer {t['alice'][:-1]}"}, UNKNOWN),
    ("case-flipped", lambda t: {"Authorization": f"Bearer {_swapcase_tail(t['alice'])}"}, UNKNOWN),
    ("two-tokens", lambda t: {"Authorization": f"Bearer {t['bob']}, Bearer {t['alice']}"}, UNKNOWN),
    ("latin-1", lambda t: {"Authorization": b"Bearer noti_\xe9\xe9\xe9"}, UNKNOWN),
    ("revoked", lambda t: {"Authorization": f"Bearer {t['revoked']}"}, REVOKED),
]

#: (id, query parameter): a good token where no token is read
QUERY_TOKENS = [("access_token", "access_token"), ("token", "token"), ("key", "key")]


@pytest.mark.parametrize("param", [q[1] for q in QUERY_TOKENS], ids=[q[0] for q in QUERY_TOKENS])
def test_a_token_in_the_query_authenticates_nothing(
    deployment: Deployment, client: httpx.Client, param: str
) -> None:
    with deployment.unchanged():
        answer = deployment.ask(
            client, "GET", "/v1/notifications", who=None, params={param: deployment.tokens["alice"]}
        )
    assert_refused(answer, 401, MISSING)


SMS = {"type": "sms", "to": PHONE, "text": "hello"}
#: Every route that takes a token, with a body it would take from a good one.
ROUTES: list[tuple[str, str, str, dict[str, object]]] = [
    ("post-notification", "POST", "/v1/notifications", {"json": SMS}),
    ("post-batch", "POST", "/v1/notifications", {"json": [SMS, SMS]}),
    ("list", "GET", "/v1/notifications", {}),
    ("get-record", "GET", "/v1/notifications/{alice_record}", {}),
    ("delete-record", "DELETE", "/v1/notifications/{alice_record}", {}),
    ("post-event", "POST", "/v1/events", {"json": {"name": "order.paid", "payload": {"id": 1}}}),
    ("get-event", "GET", "/v1/events/{alice_event}", {}),
]


@pytest.mark.parametrize(("headers", "code"), [f[1:] for f in FORMS], ids=[f[0] for f in FORMS])
@pytest.mark.parametrize(("method", "path", "kwargs"), [r[1:] for r in ROUTES], ids=[r[0] for r in ROUTES])
def test_a_bad_token_is_401_with_its_code_and_changes_nothing(
    deployment: Deployment,
    client: httpx.Client,
    method: str,
    path: str,
    kwargs: dict[str, object],
    headers: Headers,
    code: str,
) -> None:
    with deployment.unchanged():
        answer = deployment.ask(client, method, path, who=None, headers=headers(deployment.tokens), **kwargs)
    assert_refused(answer, 401, code)


READING = [r for r in ROUTES if r[1] == "GET"]


@pytest.mark.parametrize(("method", "path"), [r[1:3] for r in READING], ids=[r[0] for r in READING])
def test_the_same_route_answers_a_good_token(
    deployment: Deployment, client: httpx.Client, method: str, path: str
) -> None:
    """The control: the reading routes above answer alice's own token (the others were called
    with good tokens by the seeding; calling them here would change what the cases compare)."""
    answer = deployment.ask(client, method, path, who="alice")
    assert answer.status_code == 200, answer.text
