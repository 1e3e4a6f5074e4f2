"""What the admin page's HTTP tests share: clients with a cookie jar each (as browsers are),
logging in, reading an error page, a failed record with its dead letter. The fixtures are
plain functions here; a test module makes them fixtures (``browser = pytest.fixture(clients)``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import redis

import noti
from noti.core.attempt import Outcome
from noti.core.deadletter import DeadLetter
from noti.core.record import Status, now_ms
from tests.conftest import ADMIN
from tests.servers import ApiProcess

__all__ = ["PHONE", "XSS", "clients", "code_of", "failed_record", "log_in", "raw_client", "tokens"]

PHONE = "+8613912345678"
XSS = '<script>alert("x")</script><img src=x onerror=alert(1)>'
CSRF = re.compile(r'name="csrf" value="([0-9a-f]{64})"')
_CODE = re.compile(r'<code id="code">([^<]*)</code>')


def tokens(rt: Any) -> Callable[..., str]:
    """``token(user)``: a new API token (made by the root administrator)."""

    def make(user: str, **options: Any) -> str:
        plain, _ = rt.tokens.add(user, acting=ADMIN, **options)
        return str(plain)

    return make


def raw_client(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


def clients(api: ApiProcess, rt: Any) -> Iterator[Callable[[], httpx.Client]]:
    """``browser()``: a new client of the server with a cookie jar of its own, as a browser is."""
    made: list[httpx.Client] = []

    def new() -> httpx.Client:
        client = httpx.Client(base_url=api.url, timeout=10.0)
        made.append(client)
        return client

    yield new
    for client in made:
        client.close()


def log_in(client: httpx.Client, plain: str) -> str:
    """Log ``client`` in with the token ``plain``; the CSRF token its forms carry."""
    answer = client.post("/admin/login", data={"token": plain, "after": "/admin/"})
    assert answer.status_code == 303, answer.text
    page = client.get("/admin/")
    assert page.status_code == 200, page.text
    found = CSRF.search(page.text)
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
