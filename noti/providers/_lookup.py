"""Providers whose vendor can say whether it accepted a message: asked before any resend of a
message in doubt (:attr:`~noti.providers.base.Message.in_doubt`), so that a timeout after the
vendor accepted, or a worker killed mid-send, never makes a second SMS.

===========================  ===============================================================
the look-up answers          the send
===========================  ===============================================================
found (the record's own id)  not made: the found message's receipt is the record's
not found                    made (:meth:`LookupProvider.send_new`)
cannot tell (any failure)    not made: :class:`~noti.errors.UnconfirmedOutcome`; the sender
                             then holds the record or resends, by the channel's
                             ``lookup_failure`` (:mod:`noti.sending.sender`)
===========================  ===============================================================
"""

from __future__ import annotations

import abc
import logging

from noti.core.privacy import mask_target
from noti.errors import DeliveryError, UnconfirmedOutcome
from noti.providers.base import Message, Provider, Receipt

__all__ = ["LookupProvider", "unconfirmed"]

log = logging.getLogger(__name__)


def unconfirmed(provider: str, why: str, *, vendor_code: str = "") -> UnconfirmedOutcome:
    """The look-up of ``provider`` could not tell whether the message was accepted."""
    return UnconfirmedOutcome(
        f"{provider}: an earlier attempt may have been sent and the look-up cannot tell: {why}",
        provider=provider,
        vendor_code=vendor_code,
    )


class LookupProvider(Provider):
    """A provider that asks its vendor before sending a message in doubt again."""

    def send(self, message: Message) -> Receipt:
        """Deliver ``message`` once: when it is in doubt, only if the vendor has not got it.

        Raises:
            UnconfirmedOutcome: it is in doubt and the vendor could not be asked.
            DeliveryError: the send's own outcome (see :meth:`send_new`).
        """
        if message.in_doubt:
            # the earlier attempt may have gone out through this provider or another one of
            # the chain (this one was down then, the next one timed out): each is asked
            for asked in (self, *message.ask_also):
                if not isinstance(asked, LookupProvider):
                    continue
                found = asked.ask(message)
                if found is not None:
                    log.info(
                        "%s: record %s to %s was accepted by an earlier attempt through %s (%s); "
                        "not sent again",
                        self.name,
                        message.id,
                        mask_target(message.target),
                        asked.name,
                        found.msgid or found.raw,
                    )
                    return found
            log.info("%s: record %s: the look-up found no earlier send; sending", self.name, message.id)
        return self.send_new(message)

    def ask(self, message: Message) -> Receipt | None:
        """:meth:`look_up`, with every failure to ask made an :class:`UnconfirmedOutcome`.

        Raises:
            UnconfirmedOutcome: the vendor could not be asked, or could not tell.
        """
        try:
            return self.look_up(message)
        except UnconfirmedOutcome:
            raise
        except DeliveryError as exc:
            raise unconfirmed(self.name, exc.message, vendor_code=exc.vendor_code) from exc

    @abc.abstractmethod
    def send_new(self, message: Message) -> Receipt:
        """Send ``message`` (no look-up); its receipt, or a :class:`DeliveryError`."""

    @abc.abstractmethod
    def look_up(self, message: Message) -> Receipt | None:
        """Ask the vendor whether it accepted ``message`` (matched by the record's id, sent
        with it): the receipt when it did, None when it did not.

        Raises:
            DeliveryError: the vendor could not be asked (any class: the caller turns it into
                an :class:`UnconfirmedOutcome`).
        """
