"""noti's HTTP/1.1 client for the send loop (noti/providers/_http11.py), against raw local
servers that answer exactly the bytes a test scripts (framing, keep-alive, TLS, failures).
The webhook provider's own tests run every receiver case through it as well."""

from __future__ import annotations

import asyncio
import base64
import gzip
import socket
import socketserver
import ssl
import struct
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from noti.errors import AmbiguousOutcome, ProviderMisconfigured, ProviderOutage
from noti.providers import _http11, _http11_answer
from noti.providers._http11 import CannotConnect, NoCompleteAnswer, Unencodable, post
from tests.fakes.smtp import make_certificates

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


class RawServer:
    """A loopback server: reads each request (head and Content-Length body), records it, and
    answers the next scripted bytes (``None``: close without answering; a float: wait that
    long, then OK; a tuple: its parts one after the other). ``close_after`` closes each
    connection after its answer."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.answers: list[Any] = []
        self.requests: list[bytes] = []
        self.connections = 0
        self.close_after = False
        self.tls = tls
        outer = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                outer.connections += 1
                sock = self.request
                if outer.tls is not None:
                    try:
                        sock = outer.tls.wrap_socket(sock, server_side=True)
                    except (ssl.SSLError, OSError):
                        return
                buffer = b""
                while True:
                    while b"\r\n\r\n" not in buffer:
                        data = sock.recv(65536)
                        if not data:
                            return
                        buffer += data
                    head, _, buffer = buffer.partition(b"\r\n\r\n")
                    length = 0
                    for line in head.split(b"\r\n")[1:]:
                        name, _, value = line.partition(b":")
                        if name.strip().lower() == b"content-length":
                            length = int(value)
                    while len(buffer) < length:
                        buffer += sock.recv(65536)
                    outer.requests.append(head + b"\r\n\r\n" + buffer[:length])
                    buffer = buffer[length:]
                    answer = outer.answers.pop(0) if outer.answers else OK
                    if isinstance(answer, float):
                        threading.Event().wait(answer)
                        answer = OK
                    if answer is None:
                        return
                    for part in answer if isinstance(answer, tuple) else (answer,):
                        sock.sendall(part)  # a tuple: its parts 0.05 s apart
                        if isinstance(answer, tuple):
                            threading.Event().wait(0.05)
                    if outer.close_after:
                        return

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]

    def url(self, path: str = "/hook") -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}{path}"

    def __enter__(self) -> RawServer:
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(autouse=True, params=["asyncio", "uvloop"])
def event_loop_kind(request: pytest.FixtureRequest) -> Iterator[str]:
    """Every test on asyncio's loop and on uvloop's, which the send loop runs when it is
    installed (noti.sending.loop.new_loop)."""
    if request.param == "asyncio":
        yield "asyncio"
        return
    uvloop = pytest.importorskip("uvloop")
    policy = asyncio.get_event_loop_policy()
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    try:
        yield "uvloop"
    finally:
        asyncio.set_event_loop_policy(policy)


@pytest.fixture
def server() -> Iterator[RawServer]:
    with RawServer() as running:
        yield running


def run(coro: Any) -> Any:
    """Run on a fresh loop (its own connection pool), closing its connections after."""

    async def main() -> Any:
        try:
            return await coro
        finally:
            await _http11.close_pool()

    return asyncio.run(main())


def send(url: str, body: bytes = b"{}", headers: dict[str, str] | None = None, **kw: Any) -> Any:
    return run(
        post(
            url, body, headers or {"content-type": "application/json"}, timeout_s=kw.pop("timeout_s", 5), **kw
        )
    )


# --- the request -------------------------------------------------------------------------


def test_the_request_is_framed_with_host_length_and_agent(server: RawServer) -> None:
    response = send(server.url("/in?x=1&y=%20"), b'{"a":1}', {"webhook-id": "r1"})
    assert response.status == 200 and response.body == b"ok" and response.text() == "ok"
    head, body = server.requests[0].split(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST /in?x=1&y=%20 HTTP/1.1"
    assert f"Host: 127.0.0.1:{server.port}".encode() in lines
    assert {b"webhook-id: r1", b"User-Agent: noti", b"Content-Length: 7"} <= set(lines)
    assert body == b'{"a":1}'


def test_a_given_host_is_sent_instead_of_the_urls(server: RawServer) -> None:
    # the webhook pins the checked address in the URL and keeps the name in Host
    send(server.url(), headers={"host": "hooks.example.com", "User-Agent": "custom"})
    lines = server.requests[0].split(b"\r\n")
    assert b"host: hooks.example.com" in lines and not any(x.startswith(b"Host:") for x in lines)
    assert b"User-Agent: custom" in lines and b"User-Agent: noti" not in lines


@pytest.mark.parametrize(
    "headers",
    [{"x-evil": "a\r\nx-injected: 1"}, {"x-evil": "a\nb"}, {"bad name": "v"}, {"x": "é"}, {"": "v"}],
)
def test_a_header_that_cannot_be_sent_is_refused_before_connecting(
    server: RawServer, headers: dict[str, str]
) -> None:
    with pytest.raises(Unencodable):
        send(server.url(), headers=headers)
    assert server.connections == 0


@pytest.mark.parametrize(
    "url", ["ftp://127.0.0.1/x", "http:///nohost", "http://[::1/", "http://a:99999/", "not a url"]
)
def test_a_url_that_cannot_be_requested_is_refused(url: str) -> None:
    with pytest.raises(Unencodable):
        send(url)


def test_framing_headers_of_the_caller_are_not_sent_twice(server: RawServer) -> None:
    send(
        server.url(), b"abc", {"Content-Length": "99", "Connection": "close", "Transfer-Encoding": "chunked"}
    )
    lines = server.requests[0].split(b"\r\n")
    assert [x for x in lines if x.lower().startswith((b"content-length", b"connection", b"transfer"))] == [
        b"Content-Length: 3"
    ]


# --- the answer ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "status", "body"),
    [
        (b"HTTP/1.1 201 Created\r\nContent-Length: 5\r\n\r\nhello", 201, b"hello"),
        (b"HTTP/1.1 200\r\ncontent-length: 0\r\n\r\n", 200, b""),  # no reason phrase
        (b"HTTP/1.1 204 No Content\r\n\r\n", 204, b""),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nx-t: 1\r\n\r\n",
            200,
            b"hello world",
        ),
        (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n" + OK, 200, b"ok"),
        (b"HTTP/1.1 503 Busy\r\nRetry-After: 7\r\nContent-Length: 4\r\n\r\nbusy", 503, b"busy"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nok", 200, b"ok"),  # repeated, equal
    ],
)
def test_answers_are_read_by_their_framing(
    server: RawServer, answer: bytes, status: int, body: bytes
) -> None:
    server.answers = [answer, OK]
    response = send(server.url())
    assert (response.status, response.body) == (status, body)
    # and the connection carries the next request
    assert run(_two_posts(server.url()))[1].body == b"ok"


async def _two_posts(url: str) -> list[Any]:
    return [await post(url, b"1", {}, timeout_s=5), await post(url, b"2", {}, timeout_s=5)]


def test_headers_are_lower_case_repeated_ones_joined_folded_ones_unfolded(server: RawServer) -> None:
    server.answers = [
        b"HTTP/1.1 429 Slow\r\nRetry-After: 3\r\nX-Multi: a\r\nx-multi: b\r\nX-Fold: one\r\n two\r\n"
        b"Content-Type: text/plain; charset=gbk\r\nContent-Length: 4\r\n\r\n\xc4\xe3\xba\xc3"
    ]
    response = send(server.url())
    assert response.headers["retry-after"] == "3" and response.headers["x-multi"] == "a, b"
    assert response.headers["x-fold"] == "one two"
    assert response.text() == "你好"  # decoded by its charset


def test_a_body_framed_by_the_connections_end_is_read_and_the_connection_not_kept(server: RawServer) -> None:
    server.answers = [b"HTTP/1.1 200 OK\r\n\r\nuntil the end"]
    server.close_after = True
    assert send(server.url()).body == b"until the end"


def test_keep_alive_connections_are_reused_and_closed_ones_are_not(server: RawServer) -> None:
    async def four() -> None:
        for _ in range(3):
            await post(server.url(), b"x", {}, timeout_s=5)
        server.answers = [b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"]
        await post(server.url(), b"x", {}, timeout_s=5)
        await post(server.url(), b"x", {}, timeout_s=5)

    run(four())
    assert len(server.requests) == 5 and server.connections == 2


def test_a_connection_the_server_closed_while_idle_is_not_reused(server: RawServer) -> None:
    server.close_after = True  # answers with a length, then drops the connection

    async def twice() -> list[int]:
        first = await post(server.url(), b"x", {}, timeout_s=5)
        await asyncio.sleep(0.2)  # the end of the connection reaches the client
        second = await post(server.url(), b"x", {}, timeout_s=5)
        return [first.status, second.status]

    assert run(twice()) == [200, 200] and server.connections == 2


def test_concurrent_requests_each_get_their_own_answer(server: RawServer) -> None:
    async def many() -> list[Any]:
        return await asyncio.gather(*(post(server.url(f"/{i}"), b"x", {}, timeout_s=5) for i in range(20)))

    assert [r.status for r in run(many())] == [200] * 20
    assert sorted(r.split(b" ")[1] for r in server.requests) == sorted(f"/{i}".encode() for i in range(20))


def test_a_long_body_is_cut_and_its_connection_dropped(
    server: RawServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_http11_answer, "MAX_BODY", 10)
    server.answers = [
        b"HTTP/1.1 500 Err\r\nContent-Length: 30\r\n\r\n" + b"e" * 30,
        b"HTTP/1.1 500 Err\r\nTransfer-Encoding: chunked\r\n\r\n8\r\n"
        + b"c" * 8
        + b"\r\n8\r\n"
        + b"d" * 8
        + b"\r\n0\r\n\r\n",
    ]
    assert send(server.url()).body == b"e" * 10
    assert send(server.url()).body == b"c" * 8 + b"dd"


def test_a_gzip_body_is_inflated(server: RawServer) -> None:
    packed = gzip.compress(b'{"error":"bad signature"}')
    server.answers = [
        b"HTTP/1.1 400 Bad\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(packed) + packed
    ]
    assert send(server.url()).text() == '{"error":"bad signature"}'


# --- failures ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        b"SSH-2.0-OpenSSH_9.0\r\n\r\n",
        b"HTTP/2 200\r\n\r\n",
        b"HTTP/1.1 2000 OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 2, 3\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",  # then the connection ends
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nokXX0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n",  # the head never ends
        None,  # closed without a byte
    ],
)
def test_an_incomplete_or_foreign_answer_is_no_complete_answer(
    server: RawServer, answer: bytes | None
) -> None:
    server.answers = [answer]
    server.close_after = True
    with pytest.raises(NoCompleteAnswer):
        send(server.url())


def test_a_head_longer_than_the_limit_is_no_complete_answer(server: RawServer) -> None:
    server.answers = [b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * (_http11_answer.MAX_HEAD + 10) + b"\r\n\r\n"]
    with pytest.raises(NoCompleteAnswer):
        send(server.url())


def test_no_answer_within_the_timeout_is_no_complete_answer(server: RawServer) -> None:
    server.answers = [1.0]
    with pytest.raises(NoCompleteAnswer, match="within 0.3 s"):
        send(server.url(), timeout_s=0.3)
    assert len(server.requests) == 1  # it was sent


def test_a_refused_or_unresolvable_destination_is_cannot_connect() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nobody listens on it
    with pytest.raises(CannotConnect):
        send(f"http://127.0.0.1:{port}/")
    with pytest.raises(CannotConnect):
        send("http://no-such-host.invalid/")


def test_a_connection_reset_before_the_request_is_written_is_cannot_connect(
    monkeypatch: pytest.MonkeyPatch, event_loop_kind: str
) -> None:
    # given a server that resets every connection it accepts, and a client that resumes
    # only once the reset has arrived (as when the loop was busy between connect and write)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()

    def reset_each() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Event().wait(0.02)  # once the client's connect has completed
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()  # RST

    threading.Thread(target=reset_each, daemon=True).start()
    connect = _http11._connect

    async def connect_then_wait(*args: Any) -> Any:
        opened = await connect(*args)
        await asyncio.sleep(0.2)
        return opened

    monkeypatch.setattr(_http11, "_connect", connect_then_wait)
    try:
        # then nothing was written, on either loop: retried as a send that never left
        with pytest.raises(CannotConnect, match="before the request was written"):
            send(f"http://127.0.0.1:{listener.getsockname()[1]}/")
    finally:
        listener.close()


def test_failures_map_to_the_outcome_classes() -> None:
    for exc, outcome in (
        (CannotConnect("x"), ProviderOutage),
        (NoCompleteAnswer("x"), AmbiguousOutcome),
        (Unencodable("x"), ProviderMisconfigured),
    ):
        with pytest.raises(outcome), _http11.map_errors("hook"):
            raise exc


# --- TLS -----------------------------------------------------------------------------------


@pytest.fixture
def tls_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RawServer]:
    certs = make_certificates(tmp_path)  # for 127.0.0.1 and localhost
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certs.cert_file, certs.key_file)
    monkeypatch.setenv("SSL_CERT_FILE", certs.ca_file)  # the system trust store, as this test's CA
    monkeypatch.setattr(_http11, "_tls_context", None)
    with RawServer(tls=context) as running:
        yield running


def test_tls_to_a_trusted_certificate_is_verified_by_name(tls_server: RawServer) -> None:
    # the URL's address, checked against the certificate's IP entry
    assert send(tls_server.url()).status == 200
    # the address in the URL, the name for SNI and the host-name check (a pinned webhook)
    assert send(tls_server.url(), server_hostname="localhost").status == 200


def test_tls_to_a_certificate_of_another_name_cannot_connect(tls_server: RawServer) -> None:
    with pytest.raises(CannotConnect):
        send(tls_server.url(), server_hostname="other.test")
    assert tls_server.requests == []


def test_tls_to_an_untrusted_certificate_cannot_connect(
    tls_server: RawServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SSL_CERT_FILE")
    monkeypatch.setattr(_http11, "_tls_context", None)
    with pytest.raises(CannotConnect):
        send(tls_server.url())
    assert tls_server.requests == []


def test_requests_beyond_the_connection_limit_wait_for_a_free_one(
    server: RawServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_http11, "MAX_CONNECTIONS", 2)
    server.answers = [0.1] * 6  # each answer comes after 0.1 s

    async def six() -> list[Any]:
        return await asyncio.gather(*(post(server.url(), b"x", {}, timeout_s=5) for _ in range(6)))

    assert [r.status for r in run(six())] == [200] * 6
    assert len(server.requests) == 6 and server.connections == 2  # never more than two at once


@pytest.mark.parametrize(
    "answer",
    [
        # a 200, then a 408-style answer nobody asked for before the server closes
        OK + b"HTTP/1.1 400 Bad\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
        # a body longer than it announced
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA",
    ],
    ids=["unsolicited answer", "longer body"],
)
def test_a_connection_with_bytes_nobody_asked_for_is_not_reused(server: RawServer, answer: bytes) -> None:
    server.answers = [answer]

    async def twice() -> list[int]:
        first = await post(server.url(), b"x", {}, timeout_s=5)
        await asyncio.sleep(0.1)  # the extra bytes reach the client
        second = await post(server.url(), b"x", {}, timeout_s=5)
        return [first.status, second.status]

    assert run(twice()) == [200, 200] and server.connections == 2


def test_credentials_in_the_url_are_sent_as_basic_auth(server: RawServer) -> None:
    send(server.url().replace("http://", "http://us%40er:p%3Ass@"))
    assert b"Authorization: Basic " + base64.b64encode(b"us@er:p:ss") in server.requests[0].split(b"\r\n")
    # a given Authorization wins
    send(server.url().replace("http://", "http://u:p@"), headers={"Authorization": "Bearer t"})
    lines = server.requests[1].split(b"\r\n")
    assert b"Authorization: Bearer t" in lines and not any(
        x.startswith(b"Authorization: Basic") for x in lines
    )


def test_idle_connections_past_their_time_are_closed_for_every_destination(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_http11, "IDLE_S", 0.2)
    with RawServer() as a, RawServer() as b, RawServer() as c:

        async def main() -> list[int]:
            for server in (a, b, c):
                await post(server.url(), b"x", {}, timeout_s=5)
            await asyncio.sleep(0.3)
            await post(a.url(), b"x", {}, timeout_s=5)  # the others were swept meanwhile
            pool = _http11._pools[asyncio.get_running_loop()]
            return sorted(port for _, _, port, _ in pool.idle)

        assert run(main()) == [a.port]


def test_a_quiet_client_closes_its_idle_connections_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_http11, "IDLE_S", 0.2)
    with RawServer() as a:

        async def main() -> tuple[int, int]:
            await post(a.url(), b"x", {}, timeout_s=5)
            pool = _http11._pools[asyncio.get_running_loop()]
            kept = len(pool.idle)
            await asyncio.sleep(0.5)  # no further request
            return kept, len(pool.idle)

        assert run(main()) == (1, 0)


def test_no_time_left_after_waiting_for_a_connection_sends_nothing(
    server: RawServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_http11, "MAX_CONNECTIONS", 1)
    server.answers = [0.6]

    async def two() -> list[Any]:
        return await asyncio.gather(
            post(server.url(), b"first", {}, timeout_s=0.4),
            post(server.url(), b"second", {}, timeout_s=0.4),
            return_exceptions=True,
        )

    first, second = run(two())
    assert isinstance(first, NoCompleteAnswer) and isinstance(second, CannotConnect)
    assert [r.rsplit(b"\r\n\r\n", 1)[1] for r in server.requests] == [b"first"]


def test_a_body_framed_by_the_end_of_a_coded_transfer_is_read_whole(server: RawServer) -> None:
    server.answers = [(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: identity\r\n\r\npart1-", b"part2")]
    server.close_after = True
    assert send(server.url()).body == b"part1-part2"


def test_a_connection_coming_back_after_the_pool_closed_is_closed(server: RawServer) -> None:
    server.answers = [0.2]

    async def main() -> Any:
        pool = _http11._pool()
        request = asyncio.create_task(post(server.url(), b"x", {}, timeout_s=5))
        await asyncio.sleep(0.05)
        await _http11.close_pool()  # the send loop stopping while a request runs
        await request
        return pool

    pool = asyncio.run(main())
    assert pool.closed and pool.idle == {}
