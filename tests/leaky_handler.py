"""A delivery hook that logs what it should not (NOTI_HANDLERS of tests/test_http_limits.py):
the worker's log redaction must hide it."""

from __future__ import annotations

import logging

from noti.core.record import Notification
from noti.sending.handlers import NotificationHandler

log = logging.getLogger("tests.leaky_handler")


class LogsSecrets(NotificationHandler):
    """Logs the SMS text as a callback URL's token, and as a bearer token, on each success."""

    def on_success(self, record: Notification, provider: str, msgid: str | None) -> None:
        secret = record.fields.get("text", "")
        log.warning(
            "called https://hooks.example.com/done?access_token=%s with Authorization: Bearer %s",
            secret,
            secret,
        )
