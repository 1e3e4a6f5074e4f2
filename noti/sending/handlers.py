"""Application hooks run by the worker around each notification's delivery.

Set ``NOTI_HANDLERS = "myapp.notifications:Handlers"``, a :class:`NotificationHandler`
subclass; each worker process makes one instance. It may override any of:

- :meth:`~NotificationHandler.decide_retry`: after a failed attempt that the retry policy
  would retry, return the seconds to wait before the next one, :data:`STOP` to give up now
  (the record fails and is dead-lettered as if its attempts were used up), or None to leave
  it to the policy;
- :meth:`~NotificationHandler.on_success`, :meth:`~NotificationHandler.on_retry`,
  :meth:`~NotificationHandler.on_failure` (the record failed or went invalid) and
  :meth:`~NotificationHandler.on_dead_letter`, called once the outcome is recorded.

Typical use: when an SMS dead-letters, send the same text by e-mail::

    class Handlers(NotificationHandler):
        def on_dead_letter(self, letter, record):
            if record.channel is Channel.SMS:
                noti.notify_email(email_of(record.target), subject="Message",
                                  text=record.fields["text"], user=record.creator)

Hooks run in the worker, on the thread that recorded the outcome: keep them short (queue
further work rather than doing it there). A hook that raises is logged and skipped; the
notification's outcome is already stored, so nothing is lost or sent twice because of it.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from noti.core.deadletter import DeadLetter
from noti.core.record import Notification
from noti.errors import InvalidConfig, NotiError
from noti.imports import load_object

__all__ = ["STOP", "NotificationHandler", "load_handler"]

log = logging.getLogger(__name__)


class _Stop:
    """The type of :data:`STOP`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "noti.sending.handlers.STOP"


#: Returned by :meth:`NotificationHandler.decide_retry`: no more attempts.
STOP: Final = _Stop()


class NotificationHandler:
    """Hooks around each notification's delivery (see the module); every method is optional."""

    def decide_retry(self, record: Notification, error: NotiError, attempt: int) -> float | _Stop | None:
        """After attempt number ``attempt`` (1 = the first) failed with ``error`` and the
        retry policy would try again: the seconds to wait, :data:`STOP`, or None (the policy
        decides)."""
        return None

    def on_success(self, record: Notification, provider: str, msgid: str | None) -> None:
        """``record`` was delivered by ``provider`` (with the provider's message id)."""

    def on_retry(self, record: Notification, error: NotiError, next_attempt_ms: int) -> None:
        """An attempt failed with ``error``; the next one is due at ``next_attempt_ms``."""

    def on_failure(self, record: Notification, error: NotiError) -> None:
        """``record`` will not be sent: it failed (0) or went invalid (-1) with ``error``."""

    def on_dead_letter(self, letter: DeadLetter, record: Notification) -> None:
        """``record`` was dead-lettered as ``letter`` (after :meth:`on_failure`)."""


def load_handler(path: str | None) -> NotificationHandler | None:
    """An instance of the :class:`NotificationHandler` subclass ``path`` names, or None.

    Raises:
        InvalidConfig: it cannot be imported, is not such a class, or cannot be built.
    """
    if not path:
        return None
    cls = load_object(path, what="NOTI_HANDLERS")
    if not (isinstance(cls, type) and issubclass(cls, NotificationHandler)):
        raise InvalidConfig(f"NOTI_HANDLERS {path!r} is not a subclass of noti.NotificationHandler")
    try:
        return cls()
    except Exception as exc:
        raise InvalidConfig(f"NOTI_HANDLERS {path!r} cannot be built: {exc!r}") from exc


def call_hook(handler: NotificationHandler, name: str, record_id: str, *args: Any) -> Any:
    """Call ``handler.<name>(*args)``; its failure is logged with the record id, never raised."""
    try:
        return getattr(handler, name)(*args)
    except Exception:
        log.exception("handler %s.%s failed for %s", type(handler).__name__, name, record_id)
        return None
