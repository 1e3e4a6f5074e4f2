"""What the e-mail API fakes share (tests/fakes/ses.py, tests/fakes/sendgrid.py): the messages
an account accepted, how the messages to each address end (:meth:`MailApiFake.fate`), and when
their signed feedback is posted to :attr:`MailApiFake.receipt_url`: as each message is accepted,
or when the test calls ``settle()`` (:attr:`MailApiFake.auto_receipts` off). Each vendor fake
says what its feedback looks like and how it is signed; the faults its signing knows are
``bad_signature`` (another key) and ``unsigned`` (no signature), and a vendor may add its own.
"""

from __future__ import annotations

from typing import Any, ClassVar

from tests.fakes._receipts import ReceiptPusher
from tests.fakes._server import FakeServer

__all__ = ["MailApiFake"]


class MailApiFake(FakeServer):
    """Base of the e-mail API fakes: accepted messages, fates, and the feedback's faults."""

    #: The fates the vendor's feedback tells, the first being a message's unless told otherwise.
    FATES: ClassVar[tuple[str, ...]] = ()

    def reset(self) -> None:
        """Forget the messages, fates, faults and pushes too (a fresh account, same keys)."""
        super().reset()
        #: The vendor's message id -> the request body, as the vendor accepted it.
        self.messages: dict[str, dict[str, Any]] = {}
        self.receipt_url: str | None = None
        self.auto_receipts = True
        self.bad_signature = False
        self.unsigned = False
        self.pusher = ReceiptPusher()
        self._fates: dict[str, str] = {}
        self._settled: set[str] = set()

    def sent_headers(self, message_id: str) -> dict[str, str]:
        """The extra header fields the accepted message ``message_id`` asked the vendor for."""
        return self.headers_of(self.messages[message_id])

    def headers_of(self, body: dict[str, Any]) -> dict[str, str]:
        """The header fields a request body asks for, by name (the vendor's form)."""
        raise NotImplementedError

    def fate(self, address: str, kind: str) -> None:
        """How the messages to ``address`` end (one of :attr:`FATES`)."""
        assert kind in self.FATES, kind
        self._fates[address] = kind

    def fate_of(self, address: str) -> str:
        return self._fates.get(address, self.FATES[0])

    def accept(self, message_id: str, body: dict[str, Any]) -> None:
        """Keep an accepted message, and settle it at once unless :attr:`auto_receipts` is off."""
        with self._lock:
            self.messages[message_id] = body
        if self.auto_receipts:
            self.settle(message_id)

    def to_settle(self, ids: tuple[str, ...]) -> list[tuple[str, dict[str, Any]]]:
        """The messages ``ids`` (every one when none are named) not settled yet, each with its
        body; from now on they are settled."""
        with self._lock:
            todo = [m for m in (ids or list(self.messages)) if m in self.messages and m not in self._settled]
            self._settled.update(todo)
            return [(m, self.messages[m]) for m in todo]

    def settle(self, *ids: str) -> None:
        """Post the feedback of these messages (every one not settled yet when none are named)."""
        raise NotImplementedError
