"""What the chat-robot fakes share (tests/fakes/dingtalk.py, feishu.py, wecom.py, slack.py,
telegram.py): the messages each accepted, why it refused the others, the robots a vendor knows
by token, and the vendor's own flow limit per conversation.

A vendor limits how many messages one conversation (a robot's group, a chat) takes in a time
window (DingTalk and WeCom: 20 a minute per robot; Feishu: 5 a second and 100 a minute;
Slack: about one a second; Telegram: 20 a minute per group). Each fake enforces its vendor's
windows (:attr:`ChatFake.windows`, which a test may change) on every request that passed
verification and was not answered by a script: one over the limit gets the vendor's
rate-limit answer and is counted in :attr:`ChatFake.throttled`, so a test can say "noti never
went over the vendor's limit" without timing anything.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, ClassVar

from tests.fakes._server import FakeServer, Received, Reply

__all__ = ["ChatFake", "Posted", "Robot"]


@dataclass(frozen=True, slots=True)
class Posted:
    """One message a fake accepted: the conversation it went to (a robot's token or key, a
    chat or channel id) and the JSON body it was sent as."""

    conversation: str
    body: dict[str, Any]
    #: The vendor's message id, for vendors that return one.
    msgid: str = ""


@dataclass(frozen=True, slots=True)
class Robot:
    """One robot (a custom bot) a fake knows: the token that names it (DingTalk's access
    token, Feishu's hook id), its signing secret, and the keywords a message must hold."""

    token: str
    secret: str | None = None
    keywords: tuple[str, ...] = ()


class ChatFake(FakeServer):
    """Base of the chat-robot fakes: accepted messages, and per-conversation windows."""

    #: The vendor's windows per conversation: (most messages, seconds).
    WINDOWS: ClassVar[tuple[tuple[int, float], ...]] = ()
    #: The vendor's answers to a message over its flow limit and to an accepted one, for a
    #: vendor whose answers are always the same (else :meth:`too_fast`, :meth:`accepted`).
    TOO_FAST: ClassVar[Reply]
    ACCEPTED: ClassVar[Reply]

    def __init__(self, *robots: Robot) -> None:
        super().__init__()
        #: The robots the vendor knows, by the token that names each.
        self.robots = {robot.token: robot for robot in robots}
        #: Messages accepted, in arrival order.
        self.posted: list[Posted] = []
        #: The flow limits enforced per conversation (the vendor's unless a test changes them).
        self.windows: list[tuple[int, float]] = list(self.WINDOWS)
        #: Requests refused by the fake's own flow limit (not by a script).
        self.throttled = 0
        #: Why each request the vendor's checks refused was refused (the vendor's words).
        self.refusals: list[str] = []
        self._seen: dict[str, deque[float]] = {}
        self._window_lock = threading.Lock()

    def reset(self) -> None:
        """Forget requests, messages, refusals, windows' history, the script and the delay."""
        super().reset()
        with self._lock:
            self.posted.clear()
            self.refusals.clear()
        with self._window_lock:
            self._seen.clear()
            self.windows = list(self.WINDOWS)
            self.throttled = 0

    def refuse(self, reply: Reply, why: str) -> Reply:
        """``reply``, the vendor's refusal, noted with ``why`` in :attr:`refusals`."""
        with self._lock:
            self.refusals.append(why)
        return reply

    def texts(self, conversation: str | None = None) -> list[str]:
        """The visible text of each accepted message (to ``conversation`` when given)."""
        return [self.text_of(p.body) for p in self.posted if conversation in (None, p.conversation)]

    def admit(self, conversation: str) -> float | None:
        """None when ``conversation`` may take one more message now (it is counted), else
        the seconds until it may."""
        now = time.monotonic()
        with self._window_lock:
            seen = self._seen.setdefault(conversation, deque())
            longest = max((seconds for _, seconds in self.windows), default=0.0)
            while seen and now - seen[0] >= longest:
                seen.popleft()
            for limit, seconds in self.windows:
                inside = [t for t in seen if now - t < seconds]
                if len(inside) >= limit:
                    self.throttled += 1
                    return max(0.001, seconds - (now - inside[-limit]))
            seen.append(now)
            return None

    def succeed(self, received: Received) -> Reply:
        conversation = self.conversation(received)
        wait_s = self.admit(conversation)
        if wait_s is not None:
            return self.too_fast(wait_s)
        body = received.json()
        msgid = self.new_msgid(conversation)
        with self._lock:
            self.posted.append(Posted(conversation, body, msgid))
        return self.accepted(conversation, body, msgid)

    # --- what each vendor fake says -----------------------------------------------------------

    def conversation(self, received: Received) -> str:
        """The conversation a verified request posts to."""
        raise NotImplementedError

    def too_fast(self, wait_s: float) -> Reply:
        """The vendor's answer to a message over its flow limit, ``wait_s`` before it may."""
        return self.TOO_FAST

    def accepted(self, conversation: str, body: dict[str, Any], msgid: str) -> Reply:
        """The vendor's answer to an accepted message."""
        return self.ACCEPTED

    def new_msgid(self, conversation: str) -> str:
        """The vendor's id of a new message ("" when it returns none)."""
        return ""

    def text_of(self, body: dict[str, Any]) -> str:
        """The text of an accepted body, as the group would read it."""
        raise NotImplementedError
