"""``noti serve`` holds against a hostile client (issue 32, points 4 and 5), through a real
server on loopback with small limits.

- The API token is checked before the body is read: a request that declares a body and sends
  none is answered 401 at once, its connection closed.
- A body is capped as it streams in (chunked: 413), and bodies in flight share a budget.
- Request line and headers are capped (431), and must arrive in time (408, closed: slowloris);
  a connection without a request is closed (idle); requests and connections per process are
  capped (503 ``e.noti.http.busy``).
- ``/v1/notifications/`` is a 404, never a redirect built from the ``Host`` header.
- No credential reaches any log: the server's (access log on) and a worker's.

The memory the limits hold a process to is measured by a bench row (bench/hostile_bench.py),
not asserted here.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

import noti
from tests.conftest import ADMIN, ALICE, BASE_ENV
from tests.servers import ApiProcess

# uvicorn's protocol subclassed: run on the lowest versions too; most tests talk to `noti serve`
pytestmark = [pytest.mark.bounds, pytest.mark.slow]

BODY_MAX = 64 * 1024
HEADER_MAX = 4096
LIMITS = {
    "NOTI_HTTP_BODY_MAX_BYTES": str(BODY_MAX),
    "NOTI_HTTP_BODIES_MAX_BYTES": str(3 * BODY_MAX),
    "NOTI_HTTP_HEADER_MAX_BYTES": str(HEADER_MAX),
    "NOTI_HTTP_HEADER_TIMEOUT_S": "1",
    "NOTI_HTTP_BODY_TIMEOUT_S": "2",
    "NOTI_HTTP_IDLE_TIMEOUT_S": "1",
    "NOTI_HTTP_REQUESTS_MAX": "3",
    "NOTI_HTTP_CONNECTIONS_MAX": "12",
}
#: Aliyun does not sign its pushes: the receipt key is the credential, in the URL.
RECEIPT_KEY = "rk_" + "Q7x9" * 6
_CONFIG = (
    '[channels.sms]\nprovider = "sandbox"\n'
    '[providers.vendor]\nkind = "sandbox"\nreceipt_secret = "s3cret"\n'
    '[providers.ali]\nkind = "aliyun"\naccess_key_id = "LTAItestkey"\naccess_key_secret = "testsecret"\n'
    'sign_name = "noti"\ntemplate_code = "SMS_1"\ntext_param = "code"\nendpoint = "http://127.0.0.1:9"\n'
    f'receipt_key = "{RECEIPT_KEY}"\n'
)


def _start(redis_url: str, directory: Path, *args: str, **env: str) -> ApiProcess:
    config = directory / "noti.toml"
    config.write_text(_CONFIG)
    full = {**os.environ, **BASE_ENV, "NOTI_REDIS_URL": redis_url, "NOTI_CONFIG": str(config), **env}
    server = ApiProcess(full, *args)
    server.wait_ready()
    return server


@pytest.fixture(scope="module")
def guarded(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiProcess]:
    """``noti serve`` with the small limits of :data:`LIMITS`, no access log."""
    server = _start(redis_url, tmp_path_factory.mktemp("limits"), "--no-access-log", **LIMITS)
    try:
        yield server
    finally:
        server.stop()


def _connect(server: ApiProcess, timeout: float = 10.0) -> socket.socket:
    made = socket.create_connection(("127.0.0.1", server.port), timeout=timeout)
    made.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return made


def _read_all(conn: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    out = b""
    while True:
        try:
            chunk = conn.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        out += chunk
    return out


def _answer(raw: bytes) -> tuple[int, dict[str, str], dict[str, Any]]:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return status, headers, json.loads(body) if body else {}


def _code(raw: bytes) -> tuple[int, str]:
    status, _, body = _answer(raw)
    return status, body["error"]["code"]


@contextmanager
def _holding(server: ApiProcess, n: int, request: bytes = b"") -> Iterator[None]:
    """``n`` connections held open, each having sent ``request`` (and waiting on the rest of
    it, if it declares more); closed at the end."""
    held: list[socket.socket] = []
    try:
        for _ in range(n):
            held.append(_connect(server))
            held[-1].sendall(request)
        yield
    finally:
        for conn in held:
            conn.close()


def _assert_busy(server: ApiProcess, request: bytes) -> None:
    """``request`` on a connection of its own is refused before it reaches the app: 503, and
    the client is told to come back in a second."""
    with _connect(server) as conn:
        conn.sendall(request)
        status, headers, body = _answer(_read_all(conn))
    assert (status, body["error"]["code"]) == (503, "e.noti.http.busy")
    assert headers["retry-after"] == "1"


def _snapshot(redis_url: str) -> dict[bytes, bytes]:
    client = redis.Redis.from_url(redis_url)
    try:
        return {k: client.dump(k) or b"" for k in client.scan_iter()}
    finally:
        client.close()


def _without_tokens(snapshot: dict[bytes, bytes]) -> dict[bytes, bytes]:
    return {k: v for k, v in snapshot.items() if not k.startswith(b"noti:token")}


# --- the token before the body --------------------------------------------------------------------


def test_a_body_without_a_token_is_401_before_a_byte_of_it_is_read(guarded: ApiProcess) -> None:
    # given a request that declares a body within the limit and sends none of it
    for auth in (b"", b"Authorization: Bearer noti_" + b"x" * 43 + b"\r\n"):
        with _connect(guarded) as conn:
            conn.sendall(
                b"POST /v1/notifications HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                + auth
                + f"Content-Length: {BODY_MAX - 1}\r\n\r\n".encode()
            )
            # then the answer comes without the body (the server would wait 2 s for it) and
            # the connection is closed: the body is never read
            raw = _read_all(conn)
        status, headers, body = _answer(raw)
        assert status == 401 and body["error"]["code"] in ("e.noti.auth.missing", "e.noti.auth.unknown")
        assert headers["connection"] == "close"
        assert "e.noti.http.timeout" not in raw.decode()


def test_a_declared_body_over_the_limit_is_413_unread(guarded: ApiProcess) -> None:
    with _connect(guarded) as conn:
        conn.sendall(b"POST /v1/receipts/vendor HTTP/1.1\r\nHost: t\r\nContent-Length: 999999999\r\n\r\n")
        assert _code(_read_all(conn)) == (413, "e.noti.http.toolarge")


def test_a_chunked_body_over_the_limit_is_413_as_it_streams(
    guarded: ApiProcess, redis_url: str, rt: Any
) -> None:
    plain = str(rt.tokens.add(ALICE, acting=ADMIN)[0])
    before = _snapshot(redis_url)  # (the token's last use changes: left out below)
    chunk = b"%x\r\n" % 8192 + b"[" + b" " * 8190 + b"]" + b"\r\n"
    for path, auth in (
        (b"/v1/notifications", f"Authorization: Bearer {plain}\r\n".encode()),
        (b"/v1/receipts/vendor", b""),
        (f"/v1/receipts/ali/{RECEIPT_KEY}".encode(), b""),
    ):
        with _connect(guarded) as conn:
            conn.sendall(
                b"POST "
                + path
                + b" HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                + auth
                + b"Transfer-Encoding: chunked\r\n\r\n"
            )
            # no more than the limit and one chunk: the server reads all of it before answering
            conn.sendall(chunk * (BODY_MAX // 8192 + 1))
            assert _code(_read_all(conn)) == (413, "e.noti.http.toolarge"), path
    assert _without_tokens(_snapshot(redis_url)) == _without_tokens(before)  # nothing stored
    # a chunked body within the limit still reaches the route (Aliyun's answer to an empty push)
    response = httpx.post(
        f"{guarded.url}/v1/receipts/ali/{RECEIPT_KEY}", content=iter([b"[", b" " * (BODY_MAX // 2), b"]"])
    )
    assert response.status_code == 200 and response.json()["code"] == 0, response.text


def test_bodies_in_flight_share_the_budget(guarded: ApiProcess) -> None:
    push = (
        b"POST /v1/receipts/vendor HTTP/1.1\r\nHost: t\r\n" + f"Content-Length: {BODY_MAX}\r\n\r\n".encode()
    )
    # given three receipt pushes, each declaring most of the limit and sending nothing yet
    with _holding(guarded, 3, push):
        time.sleep(0.3)
        # then a fourth body does not fit in NOTI_HTTP_BODIES_MAX_BYTES (3 bodies): 503
        _assert_busy(guarded, push)


# --- the protocol's limits ------------------------------------------------------------------------


@pytest.mark.parametrize("shape", ["one long header", "many headers", "a long URL"])
def test_headers_over_the_limit_are_431(guarded: ApiProcess, shape: str) -> None:
    if shape == "one long header":
        request = b"GET /v1/health HTTP/1.1\r\nHost: t\r\nX-Big: " + b"a" * (1024 * 1024) + b"\r\n\r\n"
    elif shape == "many headers":
        request = b"GET /v1/health HTTP/1.1\r\nHost: t\r\n" + b"X-N: 0123456789\r\n" * 400 + b"\r\n"
    else:
        request = b"GET /v1/health?" + b"q" * (2 * HEADER_MAX) + b" HTTP/1.1\r\nHost: t\r\n\r\n"
    with _connect(guarded) as conn:
        try:
            conn.sendall(request)
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused before all of it was sent: the answer was written first
        raw = _read_all(conn)
    assert _code(raw) == (431, "e.noti.http.headers")
    assert httpx.get(f"{guarded.url}/v1/health").status_code == 200  # the server is fine


def test_a_slowloris_connection_is_closed_at_the_header_timeout(guarded: ApiProcess) -> None:
    with _connect(guarded) as conn:
        conn.settimeout(0.2)
        started = time.monotonic()
        conn.sendall(b"GET /v1/health HTTP/1.1\r\nHost: t\r\n")
        raw = b""
        while time.monotonic() - started < 10:  # a header byte every 0.2 s, never the end
            try:
                conn.sendall(b"X")
                chunk = conn.recv(65536)
            except TimeoutError:
                continue
            except (BrokenPipeError, ConnectionResetError):
                break
            if not chunk:
                break
            raw += chunk
    assert _code(raw) == (408, "e.noti.http.timeout")
    assert time.monotonic() - started < 10  # closed by the server, not by the test


def test_a_slow_body_is_closed_at_the_body_timeout(guarded: ApiProcess, rt: Any) -> None:
    plain = str(rt.tokens.add(ALICE, acting=ADMIN)[0])
    with _connect(guarded) as conn:
        conn.sendall(
            b"POST /v1/notifications HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
            + f"Authorization: Bearer {plain}\r\nContent-Length: 100\r\n\r\n".encode()
            + b'{"type":'
        )
        assert _code(_read_all(conn)) == (408, "e.noti.http.timeout")


@pytest.mark.parametrize("after_a_request", [False, True])
def test_an_idle_connection_is_closed(guarded: ApiProcess, after_a_request: bool) -> None:
    with _connect(guarded) as conn:
        if after_a_request:
            conn.sendall(b"GET /v1/health HTTP/1.1\r\nHost: t\r\n\r\n")
            answer = conn.recv(65536)
            while not answer.endswith(b"}"):  # its head and body may come in two reads
                answer += conn.recv(65536)
            assert answer.startswith(b"HTTP/1.1 200")
        started = time.monotonic()
        assert conn.recv(65536) == b""  # the server closed it (the socket's timeout is 10 s)
        assert time.monotonic() - started < 9


def test_requests_over_the_limit_are_503_busy(guarded: ApiProcess) -> None:
    # given NOTI_HTTP_REQUESTS_MAX (3) requests in progress: receipts waiting for their bodies
    with _holding(guarded, 3, b"POST /v1/receipts/vendor HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\n"):
        time.sleep(0.3)
        # then the next request is refused with a code, before it reaches the app
        _assert_busy(guarded, b"GET /v1/health HTTP/1.1\r\nHost: t\r\n\r\n")
    # and once they are done, requests are served again
    deadline = time.monotonic() + 5
    while httpx.get(f"{guarded.url}/v1/health").status_code != 200:
        assert time.monotonic() < deadline


def test_connections_over_the_limit_are_503_busy(guarded: ApiProcess) -> None:
    with _holding(guarded, 12), _connect(guarded) as conn:  # NOTI_HTTP_CONNECTIONS_MAX
        conn.sendall(b"GET /v1/health HTTP/1.1\r\nHost: t\r\n\r\n")
        assert _code(_read_all(conn)) == (503, "e.noti.http.busy")


def test_a_trailing_slash_is_404_never_a_redirect_to_the_host_header(guarded: ApiProcess) -> None:
    for path in (b"/v1/notifications/", b"/v1/health/", b"/v1/events/"):
        with _connect(guarded) as conn:
            conn.sendall(b"GET " + path + b" HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n")
            status, headers, body = _answer(_read_all(conn))
        assert (status, body["error"]["code"]) == (404, "e.noti.http.noroute"), path
        assert "location" not in headers and b"evil" not in json.dumps(body).encode()


# --- the receipt key in the path ------------------------------------------------------------------


@pytest.mark.parametrize("where", ["path", "query", "header"])
def test_the_receipt_key_is_taken_from_the_path_the_query_or_a_header(
    guarded: ApiProcess, where: str
) -> None:
    url = f"{guarded.url}/v1/receipts/ali"
    for key, expected in ((RECEIPT_KEY, 200), ("x" + RECEIPT_KEY[1:], 403)):
        if where == "path":
            response = httpx.post(f"{url}/{key}", content=b"[]")
        elif where == "query":
            response = httpx.post(url, params={"key": key}, content=b"[]")
        else:
            response = httpx.post(url, headers={"X-Noti-Receipt-Key": key}, content=b"[]")
        assert response.status_code == expected, response.text
    assert httpx.post(url, content=b"[]").json()["error"]["code"] == "e.noti.receipt.signature"


# --- no credential in any log ---------------------------------------------------------------------


def test_no_credential_reaches_any_log(redis_url: str, tmp_path: Path, rt: Any, spawn_worker: Any) -> None:
    # given a server logging every request and a worker whose delivery hook logs a callback URL
    # with a token (a user's hook, doing what it should not)
    server = _start(redis_url, tmp_path)
    worker = spawn_worker(
        '[channels.sms]\nprovider = "sandbox"\n',
        "-P",
        "threads",
        "-c",
        "2",
        env={"NOTI_HANDLERS": "tests.leaky_handler:LogsSecrets"},
    )
    token = str(rt.tokens.add(ALICE, acting=ADMIN)[0])
    secrets = [RECEIPT_KEY, token, token.removeprefix("noti_"), "sEcReT" * 4]
    try:
        # when requests carry them in every place a client puts one
        with httpx.Client(base_url=server.url) as client:
            assert client.post(f"/v1/receipts/ali/{RECEIPT_KEY}", content=b"[]").status_code == 200
            assert (
                client.post("/v1/receipts/ali", params={"key": RECEIPT_KEY}, content=b"[]").status_code == 200
            )
            client.get("/v1/notifications", params={"access_token": token})
            client.get("/v1/notifications", params={"token": secrets[3]})
            client.get("/v1/health", params={"api_key": secrets[3]})
            client.get("/v1/notifications", headers={"Authorization": f"Bearer {token}"})
            client.get(f"/v1/nowhere/{token}")
        # and a notification whose delivery makes the worker's hook log a secret
        record_id = noti.notify("sms", "+8613912345678", text=secrets[3], user=ALICE)
        deadline = time.monotonic() + 30
        while "called https://hooks.example.com" not in worker.output():
            assert time.monotonic() < deadline, worker.output()
            time.sleep(0.2)
    finally:
        server.stop()
        worker.stop()
    served, worked = server.output(), worker.output()
    # then the logs show each request and the hook's line, and none of the secrets
    assert "/v1/receipts/ali/*** HTTP/1.1" in served and "key=***" in served and "access_token=***" in served
    assert "access_token=*** with Authorization: ***" in worked, worked
    assert record_id
    for text, name in ((served, "noti serve"), (worked, "worker")):
        for secret in secrets:
            assert secret not in text, (name, secret)


@pytest.mark.parametrize(
    ("text", "hidden"),
    [
        (
            "POST /v1/receipts/ali?key=abcdefghijklmnop&x=1 HTTP/1.1",
            "POST /v1/receipts/ali?key=***&x=1 HTTP/1.1",
        ),
        ("GET /v1/receipts/ali/abcdefghijklmnop HTTP/1.1", "GET /v1/receipts/ali/*** HTTP/1.1"),
        ("GET /a?access_token=zzz&token=yyy&api_key=xxx", "GET /a?access_token=***&token=***&api_key=***"),
        ("token noti_abcdefghijklmnop in a message", "token noti_*** in a message"),
        ("{'authorization': 'Basic YWxpY2U6eA=='}", "{'authorization': '***'}"),
        ("sent with Bearer abcdefghijkl", "sent with Bearer ***"),
        ("GET /v1/notifications?st=1 HTTP/1.1", "GET /v1/notifications?st=1 HTTP/1.1"),
    ],
)
def test_redact_hides_each_kind_of_credential(text: str, hidden: str) -> None:
    from noti.access.redact import redact

    assert redact(text) == hidden
