"""What the e-mail providers that post each message to a vendor's HTTP API (Amazon SES,
SendGrid) share: their address options, the ASCII-only check at ``add`` (neither vendor takes
an internationalised address), and reading the vendor's answer once it is known to be a
refusal or an acceptance (:class:`ApiEmailProvider`). Each vendor's module keeps its request,
its signing and its table of errors."""

from __future__ import annotations

import logging
from email.utils import parseaddr
from typing import Annotated, ClassVar

import httpx
from pydantic import AfterValidator

from noti.core.privacy import mask_target
from noti.core.record import Channel
from noti.errors import AmbiguousOutcome, DeliveryError, InvalidInput
from noti.providers.base import Message, Provider, Receipt

__all__ = ["HTTP_URL", "ApiEmailProvider", "EmailAddress"]

#: A vendor endpoint option: http(s), a host, no white space.
HTTP_URL = r"^https?://[^\s/?#]+[^\s]*$"


def _address(value: str) -> str:
    if "@" not in parseaddr(value)[1]:
        raise ValueError(f"{value!r} is not an e-mail address")
    return value


#: An address option (``from_addr``, ``reply_to``): ``a@b.c`` or ``Name <a@b.c>``.
EmailAddress = Annotated[str, AfterValidator(_address)]


class ApiEmailProvider(Provider):
    """Base of the e-mail providers that post to a vendor's API."""

    channels = frozenset({Channel.EMAIL})
    #: The vendor's name in messages ("SES").
    vendor: ClassVar[str] = ""

    def check(self, message: Message) -> None:
        """Raises InvalidInput: a non-ASCII address (the vendor has no SMTPUTF8)."""
        if not message.target.isascii():
            raise InvalidInput(
                f"{message.target!r}: {self.vendor} sends to ASCII addresses only",
                code="e.cmd.noti.add.badtarget",
            )

    def refused(self, message: Message, error: DeliveryError) -> DeliveryError:
        """Log the vendor's refusal (the address masked) and return it to raise."""
        logging.getLogger(type(self).__module__).info(
            "%s %s: record %s to %s refused: %s",
            self.kind,
            self.name,
            message.id,
            mask_target(message.target),
            error.vendor_code,
        )
        return error

    def receipt(self, message: Message, response: httpx.Response, message_id: object, what: str) -> Receipt:
        """The receipt of an accepted send whose answer named ``message_id`` (``what`` the
        vendor calls it).

        Raises:
            AmbiguousOutcome: the answer names none: the message may have been taken.
        """
        if not isinstance(message_id, str) or not message_id:
            raise AmbiguousOutcome(
                f"{self.name}: HTTP {response.status_code} without {what}",
                provider=self.name,
                vendor_code=f"http.{response.status_code}",
            )
        logging.getLogger(type(self).__module__).debug(
            "%s %s: record %s accepted as %s", self.kind, self.name, message.id, message_id
        )
        return Receipt(provider=self.name, msgid=message_id, raw=f"HTTP {response.status_code}")
