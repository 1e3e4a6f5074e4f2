"""Delivery hooks used by tests/test_handlers.py (NOTI_HANDLERS names these classes)."""

from __future__ import annotations

from typing import Any

import noti
from noti.core.deadletter import DeadLetter
from noti.core.record import Channel, Notification
from noti.errors import NotiError
from noti.sending.handlers import STOP, NotificationHandler

#: What the hooks saw, in order (the in-process test worker shares this module).
CALLS: list[tuple[Any, ...]] = []
#: Where each phone's owner reads e-mail (an application's own look-up).
EMAILS = {"+8613912345678": "li.lei@example.com"}


class EmailWhenSmsDeadLetters(NotificationHandler):
    """The example of the README: an SMS that dead-letters is sent again by e-mail."""

    def on_success(self, record: Notification, provider: str, msgid: str | None) -> None:
        CALLS.append(("success", record.id, provider, msgid))

    def on_retry(self, record: Notification, error: NotiError, next_attempt_ms: int) -> None:
        CALLS.append(("retry", record.id, type(error).__name__, next_attempt_ms))

    def on_failure(self, record: Notification, error: NotiError) -> None:
        CALLS.append(("failure", record.id, type(error).__name__, error.code))

    def on_dead_letter(self, letter: DeadLetter, record: Notification) -> None:
        CALLS.append(("dead_letter", record.id, letter.error_class))
        if record.channel is Channel.SMS:
            noti.notify_email(
                EMAILS[record.target],
                subject="A message for you",
                text=record.fields["text"],
                user=record.creator,
            )


class RetryQuicklyThenStop(NotificationHandler):
    """Retries after 0.05 s (the policy would wait a minute), and stops at the second failure."""

    def decide_retry(self, record: Notification, error: NotiError, attempt: int) -> float | object:
        CALLS.append(("decide", record.id, attempt))
        return 0.05 if attempt < 2 else STOP


class Broken(NotificationHandler):
    """Every hook raises: deliveries must go on regardless."""

    def decide_retry(self, record: Notification, error: NotiError, attempt: int) -> float | object:
        raise RuntimeError("decide_retry is broken")

    def on_success(self, record: Notification, provider: str, msgid: str | None) -> None:
        raise RuntimeError("on_success is broken")

    def on_dead_letter(self, letter: DeadLetter, record: Notification) -> None:
        raise RuntimeError("on_dead_letter is broken")


class NotAHandler:
    pass
