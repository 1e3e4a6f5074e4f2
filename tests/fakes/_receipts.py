"""Delivery receipts from the vendor fakes: what they share to push them, and a local server
to receive them.

Every SMS / WeChat fake (Twilio, WeChat, Tencent, Aliyun) decides at each accepted send how
the message will end (delivered, or the failure set by :meth:`ReceiptControls.fail_delivery_to`)
and *settles* it: after :attr:`~ReceiptControls.receipt_delay_s` on its own
(:attr:`~ReceiptControls.auto_receipts`), or when the test calls ``fake.settle()``. A settled
message shows its final status in the fake's status API (Twilio ``Messages/{sid}.json``,
Aliyun ``QuerySendDetails``, Tencent ``PullSmsSendStatus``) and, when the fake has somewhere
to push (Twilio: the send's ``StatusCallback``; the others: :attr:`~ReceiptControls.receipt_url`),
is pushed there, signed as the vendor signs it. Faults, each off by default:

==========================  ========================================================================
``bad_signature``           sign with the wrong secret (Tencent/Aliyun: a wrong ``key=``)
``duplicate_receipts``      push every request twice
``out_of_order``            push in reverse order (Twilio: ``delivered`` before ``sent``; Tencent
                            and Aliyun: the reports of a request reversed)
==========================  ========================================================================

An end-to-end test points a fake where the vendor's console would point, e.g. ::

    aliyun.receipt_url = f"{public_url}/v1/receipts/ali?key={receipt_key}"
    aliyun.fail_delivery_to("13912345600")          # its receipts say undelivered (MK:0005)
    aliyun.receipt_delay_s = 0.5                    # as a carrier would take
    ...                                             # noti sends
    aliyun.pusher.idle()                            # every push made, with noti's answers

(Twilio needs nothing: it posts to each send's ``StatusCallback``, i.e. the provider's
``status_callback`` option.)

``fake.settle()`` with no arguments settles every message not settled yet, so Tencent and
Aliyun push them all in **one** request (several reports per request): set
``auto_receipts = False``, send, then ``settle()``.

Pushes go out on background threads through :class:`ReceiptPusher`, only to loopback hosts
(a test never reaches the internet); each attempt and its answer is in ``fake.pusher.pushes``
(:meth:`ReceiptPusher.wait` waits for them). A vendor that pushes again after a bad answer
(WeChat three times in all, Aliyun after 1, 5 and 10 minutes) does so after
``fake.pusher.retry_after_s`` (shortened). :class:`ReceiptSink` is a local HTTP server a test
points :attr:`~ReceiptControls.receipt_url` at: it hands each request, as a
:class:`~noti.delivery.state.ReceiptRequest`, to a handler (e.g. ``provider.read_receipt``)
and answers what the handler says.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpx

from noti.delivery.state import ReceiptReply, ReceiptRequest
from noti.errors import ReceiptRejected

__all__ = ["Push", "ReceiptControls", "ReceiptPusher", "ReceiptSink", "answer_with"]

_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


@dataclass
class Push:
    """One attempt to push a request to a receipt URL, and how it was answered."""

    url: str
    headers: dict[str, str]
    body: bytes
    attempt: int = 1
    #: The answer's HTTP status; None when there was none (refused, timed out, not loopback).
    status: int | None = None
    answer: bytes = b""
    error: str = ""
    accepted: bool = False


@dataclass
class _Outcome:
    """How a message ends, decided at its send."""

    delivered: bool
    code: str
    text: str


class ReceiptPusher:
    """Posts requests to receipt URLs on background threads, one thread per sequence (so the
    requests of one sequence go in order), pushing again after a bad answer."""

    def __init__(self, accepted: Callable[[Push], bool] | None = None) -> None:
        #: What counts as taken: by default any 2xx (each vendor narrows it).
        self.accepted = accepted or (lambda push: push.status is not None and 200 <= push.status < 300)
        #: Seconds an attempt may take (WeChat: 5 s).
        self.timeout_s = 5.0
        #: Waits before each push again after an attempt that was not taken ((): none).
        self.retry_after_s: tuple[float, ...] = ()
        #: Every attempt, in the order they were made.
        self.pushes: list[Push] = []
        self._lock = threading.Condition()
        self._running = 0

    def push(self, requests: list[tuple[str, dict[str, str], bytes]], *, delay_s: float = 0.0) -> None:
        """Post ``requests`` (url, headers, body) in order on a thread, after ``delay_s``."""
        if not requests:
            return
        with self._lock:
            self._running += 1
        threading.Thread(target=self._run, args=(requests, delay_s), daemon=True, name="receipt-push").start()

    def _run(self, requests: list[tuple[str, dict[str, str], bytes]], delay_s: float) -> None:
        try:
            if delay_s:
                time.sleep(delay_s)
            for url, headers, body in requests:
                self._deliver(url, headers, body)
        finally:
            with self._lock:
                self._running -= 1
                self._lock.notify_all()

    def _deliver(self, url: str, headers: dict[str, str], body: bytes) -> None:
        waits = (*self.retry_after_s, None)
        for attempt, wait in enumerate(waits, 1):
            push = Push(url, dict(headers), body, attempt)
            if urlsplit(url).hostname not in _LOOPBACK:
                push.error = "not a loopback URL: a fake never pushes beyond this machine"
            else:
                try:
                    answer = httpx.post(url, content=body, headers=headers, timeout=self.timeout_s)
                    push.status, push.answer = answer.status_code, answer.content
                except httpx.HTTPError as exc:
                    push.error = f"{type(exc).__name__}: {exc}"
            push.accepted = self.accepted(push)
            with self._lock:
                self.pushes.append(push)
                self._lock.notify_all()
            if push.accepted or wait is None or push.error.startswith("not a loopback"):
                return
            time.sleep(wait)

    def wait(self, count: int, timeout_s: float = 10.0) -> list[Push]:
        """The attempts made, once there are at least ``count`` (AssertionError after ``timeout_s``)."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            while len(self.pushes) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{len(self.pushes)} receipt push(es) made, expected {count}")
                self._lock.wait(left)
            return list(self.pushes)

    def idle(self, timeout_s: float = 10.0) -> list[Push]:
        """Every attempt, once no push is in progress (AssertionError after ``timeout_s``)."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            while self._running:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{self._running} receipt push sequence(s) still running")
                self._lock.wait(left)
            return list(self.pushes)

    def clear(self) -> None:
        with self._lock:
            self.pushes.clear()


class ReceiptControls:
    """The receipt knobs every SMS / WeChat fake has (see the module docstring). A fake calls
    :meth:`_plan` at each accepted send, and implements :meth:`settle`."""

    def _new_pusher(self) -> ReceiptPusher:
        """The pusher with this vendor's rules (what answer it takes, when it pushes again)."""
        return ReceiptPusher()

    def _init_receipts(self) -> None:
        #: Where receipts are pushed (not Twilio: each send names its own ``StatusCallback``).
        self.receipt_url: str | None = None
        #: Seconds from an accepted send to its settling (and push).
        self.receipt_delay_s = 0.0
        #: Settle each message on its own; False: only when the test calls ``settle()``.
        self.auto_receipts = True
        self.bad_signature = False
        self.duplicate_receipts = False
        self.out_of_order = False
        self.pusher = self._new_pusher()
        self._failing: dict[str, _Outcome] = {}
        self._timers: list[threading.Timer] = []

    def fail_delivery_to(self, target: str, code: str | None = None, text: str | None = None) -> None:
        """Messages to ``target`` from now on end undelivered, with the vendor's ``code`` and
        ``text`` (each fake has a default)."""
        default_code, default_text = self._default_failure()
        self._failing[target] = _Outcome(False, code or default_code, text or default_text)

    def deliver_to(self, target: str) -> None:
        """Undo :meth:`fail_delivery_to`."""
        self._failing.pop(target, None)

    def _default_failure(self) -> tuple[str, str]:
        raise NotImplementedError

    def _default_success(self) -> tuple[str, str]:
        raise NotImplementedError

    def _outcome(self, target: str, *aliases: str) -> _Outcome:
        """How a message to ``target`` (also known as ``aliases``: another form of the number) ends."""
        for name in (target, *aliases):
            failing = self._failing.get(name)
            if failing is not None:
                return failing
        code, text = self._default_success()
        return _Outcome(True, code, text)

    def _schedule(self, *ids: str) -> None:
        """After an accepted send: settle ``ids`` now, later, or not (see ``auto_receipts``)."""
        if not self.auto_receipts:
            return
        if self.receipt_delay_s <= 0:
            self.settle(*ids)
            return
        timer = threading.Timer(self.receipt_delay_s, self.settle, args=ids)
        timer.daemon = True
        self._timers.append(timer)
        timer.start()

    def settle(self, *ids: str) -> None:
        """Give these messages (all unsettled ones when none are named) their final status and
        push their receipts."""
        raise NotImplementedError

    def _keyed_url(self) -> str | None:
        """:attr:`receipt_url`, its ``key=`` made wrong under ``bad_signature`` (the vendors
        that sign nothing: Tencent, Aliyun)."""
        url = self.receipt_url
        if url is None or not self.bad_signature:
            return url
        parts = urlsplit(url)
        query = [(k, "not-the-receipt-key" if k == "key" else v) for k, v in parse_qsl(parts.query)]
        if not any(k == "key" for k, _ in query):
            query.append(("key", "not-the-receipt-key"))
        return urlunsplit(parts._replace(query=urlencode(query)))

    def _push_keyed(self, reports: list[dict[str, Any]]) -> None:
        """POST ``reports`` (settled together) to :attr:`receipt_url` as one JSON array, the way
        the vendors that sign nothing push (Tencent, Aliyun): the faults applied."""
        url = self._keyed_url()
        if url is None or not reports:
            return
        if self.out_of_order:
            reports = reports[::-1]
        body = json.dumps(reports, ensure_ascii=False).encode()
        request = (url, {"content-type": "application/json"}, body)
        self.pusher.push([request, request] if self.duplicate_receipts else [request])

    def _reset_receipts(self) -> None:
        for timer in self._timers:
            timer.cancel()
        self._init_receipts()


def answer_with(handler: Callable[[ReceiptRequest], Any]) -> Callable[[ReceiptRequest], ReceiptReply]:
    """A :class:`ReceiptSink` handler that answers what ``handler(request).reply`` is (a
    provider's ``read_receipt``), and a refusal as noti's HTTP API maps it (403 bad
    signature, 400 malformed, 404 no such provider)."""
    statuses = {"e.noti.receipt.signature": 403, "e.noti.receipt.malformed": 400}

    def answer(request: ReceiptRequest) -> ReceiptReply:
        try:
            return handler(request).reply  # type: ignore[no-any-return]
        except ReceiptRejected as exc:
            return ReceiptReply(statuses.get(exc.code, 404), str(exc).encode())

    return answer


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a vendor that gave up waiting closed the connection: nothing to report


@dataclass
class _Taken:
    request: ReceiptRequest
    reply: ReceiptReply = field(default_factory=ReceiptReply)


class ReceiptSink:
    """A local HTTP server that receives pushed receipts: each request, as a
    :class:`ReceiptRequest` (its URL as the vendor called it), goes to ``handler`` and is
    answered with the :class:`ReceiptReply` it returns (default: 200, empty). What came in is
    in :attr:`taken`, with the answers."""

    def __init__(self, handler: Callable[[ReceiptRequest], ReceiptReply] | None = None) -> None:
        self.handler = handler or (lambda request: ReceiptReply())
        self.taken: list[_Taken] = []
        #: Seconds to wait before answering (past the vendor's timeout: it pushes again).
        self.delay_s = 0.0
        sink = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                host = self.headers.get("host", "")
                request = ReceiptRequest(
                    method=self.command,
                    url=f"http://{host}{self.path}",
                    headers={k.lower(): v for k, v in self.headers.items()},
                    body=body,
                )
                reply = sink.handler(request)
                sink.taken.append(_Taken(request, reply))
                if sink.delay_s:
                    time.sleep(sink.delay_s)
                self.send_response(reply.status)
                self.send_header("content-type", reply.content_type)
                self.send_header("content-length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)

            do_GET = do_POST = _handle

        self._httpd = _QuietServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True, name="receipt-sink"
        )

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> ReceiptSink:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    @property
    def requests(self) -> list[ReceiptRequest]:
        return [t.request for t in self.taken]

    @property
    def replies(self) -> list[ReceiptReply]:
        return [t.reply for t in self.taken]
