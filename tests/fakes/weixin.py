"""A fake WeChat Official Account API: ``stable_token`` and template message sends (§1.7).

- ``POST /cgi-bin/stable_token`` checks ``grant_type``, ``appid`` and ``secret`` exactly as
  WeChat does (missing → 41002 / 41004, unknown appid → 40013, wrong secret → 40125) and, in
  normal mode, returns the account's current token until it expires or is revoked; with
  ``force_refresh`` it issues a new one (at most 20 a day, 30 s apart, else 45009; within 30 s
  it returns the current one). The token endpoint is answered by :meth:`verify`, so replies
  scripted with ``script()`` are for sends only; ``token_script()`` scripts the token endpoint.
- ``POST /cgi-bin/message/template/send`` checks the ``access_token`` query parameter (missing
  → 41001, unknown or revoked → 40001, expired → 42001), the JSON (→ 47001), ``touser``
  (→ 40003; unfollowed → 43004), ``template_id`` (missing → 40036, unknown → 40037) and
  ``data`` (each value an object with a non-empty ``value``, else 47003 naming it). It dedups
  ``(touser, client_msg_id)`` for 10 minutes (same msgid, nothing new sent) and returns a
  monotonic ``msgid``.

Every answer is HTTP 200 and every ``errmsg`` ends with `` rid: <hex>``. The clock is injectable.

Delivery (:mod:`tests.fakes._receipts`): each new message settles (by default at once) as
``success``, or as :meth:`~tests.fakes._receipts.ReceiptControls.fail_delivery_to` says for
its openid (default ``failed:user block``; WeChat also sends ``failed: system failed``).
With :attr:`~tests.fakes._receipts.ReceiptControls.receipt_url` (the account's server URL)
and :attr:`WeixinFake.callback_token` (its Token) set, it POSTs the ``TEMPLATESENDJOBFINISH``
XML event there, one message per request, with ``signature``, ``timestamp`` (the fake's
clock) and ``nonce`` in the query, and pushes again twice (three times in all, as WeChat)
when the answer is not HTTP 200 within ``fake.pusher.timeout_s`` (WeChat: 5 s).
:meth:`WeixinFake.check_server_url` makes the console's URL check (``GET`` with ``echostr``).
"""

from __future__ import annotations

import hashlib
import json
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import httpx

from tests.fakes._receipts import ReceiptControls, ReceiptPusher
from tests.fakes._server import FakeServer, Received, Reply

__all__ = ["WeixinFake", "error"]

TOKEN_PATH = "/cgi-bin/stable_token"
SEND_PATH = "/cgi-bin/message/template/send"
DEDUP_S = 600.0
FORCE_REFRESH_PER_DAY = 20
FORCE_REFRESH_SPACING_S = 30.0

ERRMSG = {
    -1: "system error",
    40001: "invalid credential, access_token is invalid or not latest",
    40002: "invalid grant_type",
    40003: "invalid openid",
    40013: "invalid appid",
    40014: "invalid access_token",
    40036: "invalid template_id size",
    40037: "invalid template_id",
    40125: "invalid appsecret",
    40164: "invalid ip, not in whitelist",
    41001: "access_token missing",
    41002: "appid missing",
    41004: "appsecret missing",
    42001: "access_token expired",
    43004: "require subscribe",
    43101: "user refuse to accept the msg",
    43116: "this template has been banned",
    43117: "send msg to this user too frequently",
    45009: "reach max api daily quota limit",
    45065: "clientmsgid exist",
    40241: "The message is duplicate in 60 seconds",
    47001: "data format error",
    47003: "argument invalid!",
    48001: "api unauthorized",
}


def error(code: int, errmsg: str | None = None, **extra: Any) -> Reply:
    """WeChat's error answer: HTTP 200, ``errcode``, ``errmsg`` with a `` rid: …`` suffix."""
    text = errmsg if errmsg is not None else ERRMSG.get(code, "error")
    rid = f"{secrets.token_hex(4)}-{secrets.token_hex(4)}-{secrets.token_hex(4)}"
    return Reply(200, {"errcode": code, "errmsg": f"{text} rid: {rid}", **extra})


@dataclass(slots=True)
class _Token:
    appid: str
    expires_at: float
    revoked: bool = False


def weixin_signature(token: str, timestamp: str, nonce: str) -> str:
    """WeChat's ``signature`` (the fake's own code, not noti's)."""
    return hashlib.sha1("".join(sorted([token, timestamp, nonce])).encode()).hexdigest()


def _cdata(value: str) -> str:
    return "<![CDATA[" + value.replace("]]>", "]]]]><![CDATA[>") + "]]>"


class WeixinFake(ReceiptControls, FakeServer):
    """WeChat's token and template-send endpoints for the accounts given (appid → secret)."""

    def __init__(
        self,
        accounts: dict[str, str],
        *,
        expires_in: int = 7200,
        templates: Iterable[str] | None = None,
        unfollowed: Iterable[str] = (),
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__()
        self.accounts = dict(accounts)
        self.expires_in = expires_in
        self.templates = None if templates is None else set(templates)
        self.unfollowed = set(unfollowed)
        self.clock = clock
        #: Messages WeChat accepted (one per msgid; dedup hits are not added).
        self.sent: list[dict[str, Any]] = []
        self._tokens: dict[str, _Token] = {}
        self._current: dict[str, str] = {}
        self._forced: dict[str, list[float]] = {}
        self._dedup: dict[tuple[str, str], tuple[int, float]] = {}
        self._msgid = 2_002_283_320_000
        self._token_script: deque[Reply] = deque()
        self._state = threading.Lock()
        #: The Token of the account's server URL: what the pushed events are signed with.
        self.callback_token: str | None = None
        self._init_receipts()
        self._unsettled: dict[int, dict[str, Any]] = {}

    # --- receipts ----------------------------------------------------------------------------

    def _new_pusher(self) -> ReceiptPusher:
        pusher = ReceiptPusher(lambda push: push.status == 200)
        pusher.retry_after_s = (0.0, 0.0)  # three deliveries in all
        return pusher

    def _default_success(self) -> tuple[str, str]:
        return "success", ""

    def _default_failure(self) -> tuple[str, str]:
        return "failed:user block", ""

    def _signed_url(self, extra: dict[str, str] | None = None) -> str:
        assert self.receipt_url is not None and self.callback_token is not None
        timestamp, nonce = str(int(self.clock())), str(secrets.randbelow(10**9))
        token = self.callback_token + "x" if self.bad_signature else self.callback_token
        params = {
            "signature": weixin_signature(token, timestamp, nonce),
            "timestamp": timestamp,
            "nonce": nonce,
        }
        query = "&".join(f"{k}={v}" for k, v in {**params, **(extra or {})}.items())
        return f"{self.receipt_url}{'&' if '?' in self.receipt_url else '?'}{query}"

    def check_server_url(self, echostr: str = "5839281039182736410") -> bool:
        """The console's check of the server URL: True when it echoes ``echostr``."""
        answer = httpx.get(self._signed_url({"echostr": echostr}), timeout=self.pusher.timeout_s)
        return answer.status_code == 200 and answer.text == echostr

    def settle(self, *ids: str) -> None:
        """Finish these messages (by msgid; all unsettled ones when none are named) and push
        their ``TEMPLATESENDJOBFINISH`` events."""
        with self._state:
            msgids = [int(i) for i in ids] if ids else list(self._unsettled)
            settled = [(m, self._unsettled.pop(m)) for m in msgids if m in self._unsettled]
        if self.out_of_order:
            settled.reverse()
        if self.receipt_url is None or self.callback_token is None:
            return
        requests = []
        for msgid, sent in settled:
            fate = self._outcome(sent["touser"])
            xml = (
                f"<xml><ToUserName>{_cdata(sent['account'])}</ToUserName>"
                f"<FromUserName>{_cdata(sent['touser'])}</FromUserName>"
                f"<CreateTime>{int(self.clock())}</CreateTime>"
                f"<MsgType>{_cdata('event')}</MsgType><Event>{_cdata('TEMPLATESENDJOBFINISH')}</Event>"
                f"<MsgID>{msgid}</MsgID><Status>{_cdata(fate.code)}</Status></xml>"
            )
            request = (self._signed_url(), {"content-type": "text/xml"}, xml.encode())
            requests += [request, request] if self.duplicate_receipts else [request]
        for request in requests:  # one event per request, each pushed (and pushed again) alone
            self.pusher.push([request])

    # --- what tests look at and change ----------------------------------------------------------

    @property
    def token_calls(self) -> int:
        """How many times ``stable_token`` was called."""
        return sum(1 for r in self.requests if r.path == TOKEN_PATH)

    @property
    def send_calls(self) -> list[Received]:
        return [r for r in self.requests if r.path == SEND_PATH]

    def current_token(self, appid: str) -> str | None:
        with self._state:
            return self._current.get(appid)

    def revoke(self, appid: str) -> None:
        """Invalidate the account's current token: sends with it get 40001."""
        with self._state:
            token = self._current.pop(appid, None)
            if token is not None:
                self._tokens[token].revoked = True

    def token_script(self, *replies: Reply) -> None:
        """Answer the next valid ``stable_token`` calls with these replies."""
        with self._state:
            self._token_script.extend(replies)

    # --- the vendor ---------------------------------------------------------------------------

    def verify(self, received: Received) -> Reply | None:
        if received.path == TOKEN_PATH:
            return self._stable_token(received)
        if received.path != SEND_PATH:
            return Reply(404, "not found")
        token = (received.query.get("access_token") or [""])[0]
        if not token:
            return error(41001)
        with self._state:
            known = self._tokens.get(token)
            if known is None or known.revoked:
                return error(40001)
            if known.expires_at <= self.clock():
                return error(42001)
        body = received.json_object()
        if body is None:
            return error(47001)
        touser, template_id, data = body.get("touser"), body.get("template_id"), body.get("data")
        if not isinstance(touser, str) or not touser:
            return error(40003)
        if not isinstance(template_id, str) or not template_id:
            return error(40036)
        if self.templates is not None and template_id not in self.templates:
            return error(40037)
        if touser in self.unfollowed:
            return error(43004)
        if not isinstance(data, dict):
            return error(47001)
        for key, value in data.items():
            if not isinstance(value, dict) or value.get("value") in (None, ""):
                return error(47003, f"argument invalid! data.{key}.value is empty")
        return None

    def succeed(self, received: Received) -> Reply:
        body = json.loads(received.body)
        now = self.clock()
        with self._state:
            client_msg_id = body.get("client_msg_id")
            key = (body["touser"], str(client_msg_id))
            seen = self._dedup.get(key) if client_msg_id else None
            if seen is not None and now - seen[1] < DEDUP_S:
                return Reply(200, {"errcode": 0, "errmsg": "ok", "msgid": seen[0]})
            self._msgid += 1
            msgid = self._msgid
            if client_msg_id:
                self._dedup[key] = (msgid, now)
            self.sent.append({**body, "msgid": msgid})
            token = (received.query.get("access_token") or [""])[0]
            appid = self._tokens[token].appid
            account = "gh_" + hashlib.sha1(appid.encode()).hexdigest()[:12]
            self._unsettled[msgid] = {"touser": body["touser"], "account": account}
        self._schedule(str(msgid))
        return Reply(200, {"errcode": 0, "errmsg": "ok", "msgid": msgid})

    def _stable_token(self, received: Received) -> Reply:
        body = received.json_object()
        if body is None:
            return error(47001)
        if body.get("grant_type") != "client_credential":
            return error(40002)
        appid, secret = body.get("appid"), body.get("secret")
        if not appid:
            return error(41002)
        if not secret:
            return error(41004)
        if appid not in self.accounts:
            return error(40013)
        if secret != self.accounts[appid]:
            return error(40125)
        now = self.clock()
        with self._state:
            if self._token_script:
                return self._token_script.popleft()
            token = self._tokens.get(self._current.get(appid, ""))
            fresh = token is not None and not token.revoked and token.expires_at - now > 0
            if body.get("force_refresh") is True:
                forced = [t for t in self._forced.get(appid, []) if now - t < 86400]
                if forced and now - forced[-1] < FORCE_REFRESH_SPACING_S and fresh:
                    return self._token_reply(appid, now)
                if len(forced) >= FORCE_REFRESH_PER_DAY:
                    return error(45009)
                self._forced[appid] = [*forced, now]
                fresh = False
            if not fresh:
                old = self._current.get(appid)
                if old is not None:
                    self._tokens[old].revoked = True
                new = secrets.token_urlsafe(96)
                self._tokens[new] = _Token(appid, now + self.expires_in)
                self._current[appid] = new
            return self._token_reply(appid, now)

    def _token_reply(self, appid: str, now: float) -> Reply:
        token = self._current[appid]
        expires_in = max(1, int(self._tokens[token].expires_at - now))
        return Reply(200, {"access_token": token, "expires_in": expires_in})
