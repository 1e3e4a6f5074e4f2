"""A fake Twilio Messages API (shared/providers.md §4.1, §4.4).

Checks what Twilio checks, in its order: the path (404/20404), HTTP basic auth with the
account SID and auth token (401/20003 and ``WWW-Authenticate``), then the form-encoded
parameters: ``To`` (21604 missing, 21211 not E.164, 21610 opted out, 21614 landline),
``From`` or ``MessagingServiceSid`` (21603 neither, 21606 a number not ours, 21701 bad
service sid), ``Body`` (21602 missing, 21617 over 1,600 characters), ``StatusCallback``
(21609). A body that is not form encoded has no parameters, so it is refused as Twilio
refuses it (21604). An accepted message is stored and answered with 201 and the Message
JSON (``status`` ``queued``, or ``accepted`` through a Messaging Service); ``GET
…/Messages/{sid}.json`` fetches it. Scripted replies (e.g. :func:`error_reply`) never
create a message, as Twilio's 429 does not; ``delay_s`` creates it and answers late, and
:meth:`TwilioFake.accept_then_hang` does so for the next message only.

``GET …/Messages.json`` lists the messages, newest first, filtered by ``To``, ``From`` and
``DateSent`` (``DateSent``, ``DateSent<``, ``DateSent>``: a GMT ``YYYY-MM-DD``; a queued
message has no ``date_sent`` and never matches it), paged by ``PageSize`` (default 50, at most
1000) and ``Page`` with ``next_page_uri``. :attr:`TwilioFake.list_down` answers the list with
503/20500; :attr:`TwilioFake.send_refusal` answers every create with that reply (e.g. the
account limit 60728) without creating a message.

Delivery (:mod:`tests.fakes._receipts`): each created message settles (by default at once)
as ``delivered``, or as ``undelivered`` with ``ErrorCode`` 30003 (or what
:meth:`~tests.fakes._receipts.ReceiptControls.fail_delivery_to` says) for a failing number;
``GET …/Messages/{sid}.json`` shows ``queued`` before and the final status after. A message
sent with a ``StatusCallback`` then gets the callbacks Twilio posts: ``sent``, then the final
status, form encoded and signed with ``X-Twilio-Signature`` over the callback URL exactly as
the send gave it (``bad_signature``: with another token; ``out_of_order``: the final status
first; ``duplicate_receipts``: each twice).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import uuid
from datetime import UTC, datetime
from email.utils import format_datetime, parsedate_to_datetime
from typing import Any
from urllib.parse import parse_qs, urlencode

from tests.fakes._receipts import ReceiptControls
from tests.fakes._server import FakeServer, Received, Reply

__all__ = [
    "ACCOUNT_SID",
    "AUTH_TOKEN",
    "FROM_NUMBER",
    "SERVICE_SID",
    "TwilioFake",
    "error_reply",
    "twilio_options",
]

ACCOUNT_SID = "AC" + "0123456789abcdef" * 2
AUTH_TOKEN = "f00dfeedf00dfeedf00dfeedf00dfeed"
FROM_NUMBER = "+15005550006"
SERVICE_SID = "MG" + "fedcba9876543210" * 2

#: Twilio's own wording of the errors the fake produces.
MESSAGES: dict[int, str] = {
    20003: "Authenticate",
    20404: "The requested resource was not found",
    20429: "Too Many Requests",
    21211: "The 'To' number is not a valid phone number.",
    21408: "Permission to send an SMS has not been enabled for the region indicated by the 'To' number",
    21602: "Message body is required.",
    21603: "A 'From' phone number is required.",
    21604: "A 'To' phone number is required.",
    21606: "The 'From' phone number provided is not a valid message-capable Twilio phone number.",
    21608: "The number is unverified. Trial accounts may only send messages to verified numbers.",
    21609: "Invalid StatusCallback url",
    21610: "Attempt to send to unsubscribed recipient",
    21612: "The 'To' phone number is not currently reachable using the 'From' phone number via SMS.",
    21614: "'To' number is not a valid mobile number",
    21617: "The concatenated message body exceeds the 1600 character limit.",
    21701: "The Messaging Service Sid is invalid",
}
STATUSES: dict[int, int] = {20003: 401, 20404: 404, 20429: 429}

_PATH = re.compile(r"^/2010-04-01/Accounts/(?P<account>[^/]+)/Messages(?:/(?P<sid>[^/]+))?\.json$")
_E164 = re.compile(r"^\+[1-9][0-9]{6,14}$")
_SERVICE = re.compile(r"^MG[0-9a-fA-F]{32}$")


def error_reply(code: int, *, status: int | None = None, headers: dict[str, str] | None = None) -> Reply:
    """Twilio's error answer for ``code`` (HTTP status as Twilio sends it unless given)."""
    status = status or STATUSES.get(code, 400)
    body = {
        "code": code,
        "message": MESSAGES.get(code, "Error"),
        "more_info": f"https://www.twilio.com/docs/errors/{code}",
        "status": status,
    }
    return Reply(status, body, headers or {})


def twilio_options(fake: TwilioFake, **overrides: Any) -> dict[str, Any]:
    """A ``twilio`` provider's options that reach ``fake``'s account with its own number, its
    timeout short enough for a test of a hanging answer."""
    return {
        "kind": "twilio",
        "account_sid": ACCOUNT_SID,
        "auth_token": AUTH_TOKEN,
        "from": FROM_NUMBER,
        "base_url": fake.url,
        "timeout_s": 0.5,
        **overrides,
    }


def twilio_signature(auth_token: str, url: str, params: dict[str, str]) -> str:
    """``X-Twilio-Signature`` as Twilio computes it (the fake's own code, not noti's)."""
    data = url + "".join(f"{name}{params[name]}" for name in sorted(params))
    return base64.b64encode(hmac.new(auth_token.encode(), data.encode(), hashlib.sha1).digest()).decode()


class TwilioFake(ReceiptControls, FakeServer):
    """One Twilio account that owns ``numbers``; ``opted_out`` replied STOP to it."""

    def __init__(
        self,
        *,
        account_sid: str = ACCOUNT_SID,
        auth_token: str = AUTH_TOKEN,
        numbers: tuple[str, ...] = (FROM_NUMBER,),
        opted_out: tuple[str, ...] = (),
        landlines: tuple[str, ...] = (),
    ) -> None:
        super().__init__()
        self.account_sid = account_sid
        self.auth_token = auth_token
        self.numbers = set(numbers)
        self.opted_out = set(opted_out)
        self.landlines = set(landlines)
        #: Created messages by sid, as Twilio would return them.
        self.messages: dict[str, dict[str, Any]] = {}
        self.list_down = False
        self.send_refusal: Reply | None = None
        #: List requests received (authenticated).
        self.lookups = 0
        self._hang_s = 0.0
        self._init_receipts()
        self._fates: dict[str, Any] = {}
        self._callbacks: dict[str, str] = {}
        self._settled: set[str] = set()

    def _default_failure(self) -> tuple[str, str]:
        return "30003", "Unreachable destination handset"

    def _default_success(self) -> tuple[str, str]:
        return "", ""

    def settle(self, *ids: str) -> None:
        """Give these messages (all unsettled ones when none are named) their final status and
        post their status callbacks."""
        pushes = []
        with self._lock:
            sids = [
                sid for sid in (ids or list(self._fates)) if sid in self._fates and sid not in self._settled
            ]
            for sid in sids:
                self._settled.add(sid)
                fate = self._fates[sid]
                final = "delivered" if fate.delivered else "undelivered"
                now = format_datetime(datetime.now(UTC))
                message = {
                    **self.messages[sid],
                    "status": final,
                    "date_sent": now,
                    "date_updated": now,
                    "error_code": None if fate.delivered else int(fate.code),
                    "error_message": None if fate.delivered else fate.text,
                }
                self.messages[sid] = message
                url = self._callbacks.get(sid)
                if url is not None:
                    pushes.append(self._callback_requests(url, message))
        for requests in pushes:
            self.pusher.push(requests)

    def _callback_requests(
        self, url: str, message: dict[str, Any]
    ) -> list[tuple[str, dict[str, str], bytes]]:
        requests = []
        statuses = ["sent", message["status"]]
        if self.out_of_order:
            statuses.reverse()
        for status in statuses:
            params = {
                "AccountSid": self.account_sid,
                "ApiVersion": "2010-04-01",
                "From": message["from"] or "",
                "MessageSid": message["sid"],
                "MessageStatus": status,
                "SmsSid": message["sid"],
                "SmsStatus": status,
                "To": message["to"],
            }
            if message["messaging_service_sid"]:
                params["MessagingServiceSid"] = message["messaging_service_sid"]
            if status in ("undelivered", "failed"):
                params["ErrorCode"] = str(message["error_code"])
            token = "0" * len(self.auth_token) if self.bad_signature else self.auth_token
            headers = {
                "content-type": "application/x-www-form-urlencoded",
                "x-twilio-signature": twilio_signature(token, url, params),
                "user-agent": "TwilioProxy/1.1",
            }
            request = (url, headers, urlencode(params).encode())
            requests += [request, request] if self.duplicate_receipts else [request]
        return requests

    def accept_then_hang(self, seconds: float) -> None:
        """Create (and keep) the next message, then answer only after ``seconds``."""
        self._hang_s = seconds

    def reset(self) -> None:
        """Forget requests, messages, the script and the delay (to reuse one server across tests)."""
        super().reset()
        with self._lock:
            self.messages.clear()
            self._hang_s = 0.0
            self.list_down = False
            self.send_refusal = None
            self.lookups = 0
            self._fates.clear()
            self._callbacks.clear()
            self._settled.clear()
        self._reset_receipts()

    def verify(self, received: Received) -> Reply | None:
        match = _PATH.match(received.path)
        if match is None:
            return error_reply(20404)
        if not self._authenticated(received.headers.get("authorization", "")):
            reply = error_reply(20003)
            return Reply(reply.status, reply.body, {"www-authenticate": 'Basic realm="Twilio API"'})
        if match["account"] != self.account_sid:
            return error_reply(20404)
        if received.method == "GET":
            if match["sid"] is None:
                self.lookups += 1
                return (
                    Reply(503, {"code": 20500, "message": "Internal Server Error", "status": 503})
                    if (self.list_down)
                    else None
                )
            return None if match["sid"] in self.messages else error_reply(20404)
        if received.method != "POST" or match["sid"] is not None:
            return Reply(405, {"code": 20004, "message": "Method not allowed", "status": 405})
        return self._refusal(_params(received)) or self.send_refusal

    def _authenticated(self, header: str) -> bool:
        scheme, _, encoded = header.partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            user, _, password = base64.b64decode(encoded, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return False
        user_ok = hmac.compare_digest(user.encode(), self.account_sid.encode())
        return hmac.compare_digest(password.encode(), self.auth_token.encode()) and user_ok

    def _refusal(self, params: dict[str, str]) -> Reply | None:
        to, sender, service = params.get("To"), params.get("From"), params.get("MessagingServiceSid")
        body = params.get("Body")
        if not to:
            return error_reply(21604)
        if not sender and not service:
            return error_reply(21603)
        if sender and sender not in self.numbers:
            return error_reply(21606)
        if service and not _SERVICE.match(service):
            return error_reply(21701)
        if not body:
            return error_reply(21602)
        if len(body) > 1600:
            return error_reply(21617)
        callback = params.get("StatusCallback")
        if callback is not None and not callback.startswith(("http://", "https://")):
            return error_reply(21609)
        if not _E164.match(to):
            return error_reply(21211)
        if to in self.opted_out:
            return error_reply(21610)
        if to in self.landlines:
            return error_reply(21614)
        return None

    def succeed(self, received: Received) -> Reply:
        match = _PATH.match(received.path)
        assert match is not None  # verify() refused every other path
        if received.method == "GET":
            if match["sid"] is None:
                return self._list(received)
            return Reply(200, self.messages[match["sid"]])
        params = _params(received)
        sid = "SM" + uuid.uuid4().hex
        now = format_datetime(datetime.now(UTC))
        service = params.get("MessagingServiceSid")
        message = {
            "sid": sid,
            "account_sid": self.account_sid,
            "to": params["To"],
            "from": params.get("From"),
            "messaging_service_sid": service,
            "body": params["Body"],
            "status": "accepted" if service else "queued",
            "num_segments": str(1 + (len(params["Body"]) - 1) // 153),
            "num_media": "0",
            "direction": "outbound-api",
            "api_version": "2010-04-01",
            "date_created": now,
            "date_updated": now,
            "date_sent": None,
            "price": None,
            "price_unit": "USD",
            "error_code": None,
            "error_message": None,
            "uri": f"/2010-04-01/Accounts/{self.account_sid}/Messages/{sid}.json",
            "subresource_uris": {
                "media": f"/2010-04-01/Accounts/{self.account_sid}/Messages/{sid}/Media.json"
            },
        }
        with self._lock:
            self.messages[sid] = message
            hang_s, self._hang_s = self._hang_s, 0.0
            self._fates[sid] = self._outcome(params["To"])
            if params.get("StatusCallback"):
                self._callbacks[sid] = params["StatusCallback"]
        self._schedule(sid)
        return Reply(201, message, hang_s=hang_s)

    def _list(self, received: Received) -> Reply:
        query = {name: values[-1] for name, values in received.query.items()}
        with self._lock:
            rows = list(reversed(self.messages.values()))  # newest first
        if "To" in query:
            rows = [m for m in rows if m["to"] == query["To"]]
        if "From" in query:
            rows = [m for m in rows if m["from"] == query["From"]]
        for key, keep in (
            ("DateSent", lambda day, d: day == d),
            ("DateSent<", lambda day, d: day <= d),
            ("DateSent>", lambda day, d: day >= d),
        ):
            if key in query:
                rows = [m for m in rows if m["date_sent"] and keep(_gmt_day(m["date_sent"]), query[key])]
        try:
            size, page = min(1000, int(query.get("PageSize", 50))), int(query.get("Page", 0))
        except ValueError:
            return Reply(400, {"code": 20001, "message": "Invalid paging parameters", "status": 400})
        shown = rows[page * size : (page + 1) * size]
        base = f"/2010-04-01/Accounts/{self.account_sid}/Messages.json"
        kept = {k: v for k, v in query.items() if k not in ("Page", "PageSize")}

        def uri(n: int) -> str:
            return f"{base}?{urlencode({**kept, 'PageSize': size, 'Page': n})}"

        more = (page + 1) * size < len(rows)
        return Reply(
            200,
            {
                "messages": shown,
                "page": page,
                "page_size": size,
                "start": page * size,
                "end": page * size + max(0, len(shown) - 1),
                "uri": uri(page),
                "first_page_uri": uri(0),
                "next_page_uri": uri(page + 1) if more else None,
                "previous_page_uri": uri(page - 1) if page else None,
            },
        )


def _gmt_day(rfc2822: str) -> str:
    return parsedate_to_datetime(rfc2822).astimezone(UTC).strftime("%Y-%m-%d")


def _params(received: Received) -> dict[str, str]:
    """The form parameters; none unless the body is form encoded, as for Twilio."""
    if not received.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
        return {}
    return {
        name: values[-1] for name, values in parse_qs(received.body.decode(), keep_blank_values=True).items()
    }
