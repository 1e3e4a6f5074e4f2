"""A fake Slack: incoming webhooks (``POST /services/T…/B…/…``) and ``POST /api/chat.postMessage``.

Incoming webhooks, checked as Slack does: the path names a webhook (else 404 ``no_service``);
the body is JSON with ``text`` or ``blocks`` (else 400 ``no_text`` / ``invalid_payload``);
a webhook whose channel was archived answers 410 ``channel_is_archived``, deleted 404
``channel_not_found``, one an admin restricted 403 ``action_prohibited``
(:attr:`SlackFake.hook_state`). Success is 200 with the text ``ok``.

``chat.postMessage``: ``Authorization: Bearer xoxb-…`` must be the bot's token (none:
``not_authed``; another: ``invalid_auth``; a revoked one: ``token_revoked``); the body is
JSON (``application/json; charset=utf-8``) with ``channel`` and ``text`` or ``blocks``; a
channel the fake does not know is ``channel_not_found``, one the bot is not in
``not_in_channel``, an archived one ``is_archived``; ``text`` over 40,000 characters is
``msg_too_long``, a ``markdown`` block over 12,000 ``invalid_blocks``. Errors are HTTP 200
``{"ok": false, "error": …}``; success is ``{"ok": true, "channel": …, "ts": …}``.

Both take about one message a second per channel or webhook: over it, HTTP 429 with
``Retry-After`` (``{"ok": false, "error": "ratelimited"}`` for the Web API, the text
``rate_limited`` for webhooks).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

from tests.fakes._chat import ChatFake
from tests.fakes._server import Received, Reply

__all__ = ["BOT_TOKEN", "SlackFake", "api_error", "hook_error"]

BOT_TOKEN = "xoxb-1234567890-1234567890123-" + "A" * 24

#: Each webhook answer's HTTP status (Slack's "Handling errors" of incoming webhooks).
HOOK_STATUSES: dict[str, int] = {
    "invalid_payload": 400,
    "no_text": 400,
    "user_not_found": 400,
    "channel_not_found": 404,
    "no_service": 404,
    "channel_is_archived": 410,
    "action_prohibited": 403,
    "posting_to_general_channel_denied": 403,
    "invalid_token": 403,
    "rate_limited": 429,
}

_HOOK = re.compile(r"^/services/(?P<path>T[A-Z0-9]+/B[A-Z0-9]+/[A-Za-z0-9]+)$")


def hook_error(error: str, *, retry_after: int = 1) -> Reply:
    """Slack's webhook answer ``error`` with its status (429 with ``Retry-After``)."""
    status = HOOK_STATUSES.get(error, 400)
    headers = {"retry-after": str(retry_after)} if status == 429 else {}
    return Reply(status, error, {"content-type": "text/html", **headers})


def api_error(error: str, *, retry_after: int = 1) -> Reply:
    """Slack's Web API answer ``{"ok": false, "error": error}`` (429 for ``ratelimited``)."""
    if error == "ratelimited":
        return Reply(429, {"ok": False, "error": error}, {"retry-after": str(retry_after)})
    return Reply(200, {"ok": False, "error": error})


class SlackFake(ChatFake):
    """A Slack workspace with incoming webhooks ``hooks`` and a bot in ``channels``."""

    WINDOWS = ((1, 1.0),)

    def __init__(
        self,
        *,
        hooks: tuple[str, ...] = (),
        channels: tuple[str, ...] = (),
        outside: tuple[str, ...] = (),
        archived: tuple[str, ...] = (),
        bot_token: str = BOT_TOKEN,
    ) -> None:
        super().__init__()
        #: Webhook paths ("T…/B…/secret") -> "" (working) or the error it answers.
        self.hook_state: dict[str, str] = dict.fromkeys(hooks, "")
        self.channels = set(channels)
        self.outside = set(outside)
        self.archived = set(archived)
        self.bot_token = bot_token
        self.revoked = False
        self._ts = 0

    def reset(self) -> None:
        super().reset()
        self.hook_state = dict.fromkeys(self.hook_state, "")
        self.revoked = False

    def verify(self, received: Received) -> Reply | None:
        if received.method != "POST":
            return Reply(405, "")
        hook = _HOOK.match(received.path)
        if hook is not None:
            return self._verify_hook(hook["path"], received)
        if received.path == "/api/chat.postMessage":
            return self._verify_api(received)
        return Reply(404, "")

    def _verify_hook(self, path: str, received: Received) -> Reply | None:
        state = self.hook_state.get(path)
        if state is None:
            return self._refused(hook_error, "no_service")
        if state:
            return self._refused(hook_error, state)
        body = received.json_object()
        if body is None:
            return self._refused(hook_error, "invalid_payload")
        if not body.get("text") and not body.get("blocks"):
            return self._refused(hook_error, "no_text")
        return _blocks_refusal(body, hook_error)

    def _verify_api(self, received: Received) -> Reply | None:
        auth = received.headers.get("authorization", "")
        if not auth.startswith("Bearer "):
            return self._refused(api_error, "not_authed")
        if auth.removeprefix("Bearer ") != self.bot_token:
            return self._refused(api_error, "invalid_auth")
        if self.revoked:
            return self._refused(api_error, "token_revoked")
        if not received.headers.get("content-type", "").startswith("application/json"):
            return self._refused(api_error, "invalid_arguments")
        body = received.json_object()
        if body is None:
            return self._refused(api_error, "invalid_json")
        channel = body.get("channel")
        if channel in self.archived:
            return self._refused(api_error, "is_archived")
        if channel in self.outside:
            return self._refused(api_error, "not_in_channel")
        if channel not in self.channels:
            return self._refused(api_error, "channel_not_found")
        text = body.get("text")
        if not text and not body.get("blocks"):
            return self._refused(api_error, "no_text")
        if isinstance(text, str) and len(text) > 40_000:
            return self._refused(api_error, "msg_too_long")
        return _blocks_refusal(body, api_error)

    def _refused(self, answer: Callable[[str], Reply], error: str) -> Reply:
        """Slack's ``answer`` (a webhook's or the Web API's) of ``error``, noted."""
        return self.refuse(answer(error), error)

    def conversation(self, received: Received) -> str:
        hook = _HOOK.match(received.path)
        return hook["path"] if hook is not None else str(received.json()["channel"])

    def too_fast(self, wait_s: float) -> Reply:
        # the request in hand decides the shape; both carry Retry-After in whole seconds
        return Reply(429, {"ok": False, "error": "ratelimited"}, {"retry-after": str(max(1, round(wait_s)))})

    def succeed(self, received: Received) -> Reply:
        reply = super().succeed(received)
        if _HOOK.match(received.path) is not None:
            if reply.status == 429:
                return hook_error("rate_limited", retry_after=int(reply.headers["retry-after"]))
            return Reply(200, "ok", {"content-type": "text/html"})
        return reply

    def new_msgid(self, conversation: str) -> str:
        with self._lock:
            self._ts += 1
            return f"{int(time.time())}.{self._ts:06d}"

    def accepted(self, conversation: str, body: dict[str, Any], msgid: str) -> Reply:
        message = {"type": "message", "text": body.get("text", ""), "ts": msgid, "bot_id": "B0FAKE"}
        return Reply(200, {"ok": True, "channel": conversation, "ts": msgid, "message": message})

    def text_of(self, body: dict[str, Any]) -> str:
        blocks = [b.get("text", "") for b in body.get("blocks", []) if b.get("type") == "markdown"]
        return "\n".join(str(b) for b in blocks) if blocks else str(body.get("text", ""))


def _blocks_refusal(body: dict[str, Any], answer: Any) -> Reply | None:
    """``invalid_blocks`` for blocks Slack would refuse (a markdown block over 12,000)."""
    blocks = body.get("blocks", [])
    if not isinstance(blocks, list):
        return answer("invalid_blocks")
    for block in blocks:
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            return answer("invalid_blocks")
        if block["type"] == "markdown" and not 0 < len(str(block.get("text", ""))) <= 12_000:
            return answer("invalid_blocks")
    return None
