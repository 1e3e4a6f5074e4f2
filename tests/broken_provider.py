"""A provider with a bug, to check that an unexpected exception makes a record invalid."""

from __future__ import annotations

import threading

from noti.core.record import Channel
from noti.errors import RateLimited, RecipientOptedOut, StoreUnavailable
from noti.providers.base import Message, Provider, Receipt


class BuggyProvider(Provider):
    kind = "buggy"
    channels = frozenset(Channel)

    def send(self, message: Message) -> Receipt:
        raise ZeroDivisionError("division by zero in a provider")


class ThrottledProvider(Provider):
    """Always answers with a flow limit that has already passed."""

    kind = "throttled"
    channels = frozenset(Channel)

    def send(self, message: Message) -> Receipt:
        raise RateLimited("slow down", retry_after_s=0, provider=self.name)


class RedisDownProvider(Provider):
    """Fails as a provider whose Redis (token cache, sender pool) went away."""

    kind = "redisdown"
    channels = frozenset(Channel)

    def send(self, message: Message) -> Receipt:
        raise StoreUnavailable("cannot reach Redis at redis://10.0.0.9:6379/0: Connection refused")


class OptedOutProvider(Provider):
    """Answers that the recipient unsubscribed."""

    kind = "optedout"
    channels = frozenset(Channel)

    def send(self, message: Message) -> Receipt:
        raise RecipientOptedOut("the recipient replied STOP", provider=self.name, vendor_code="21610")


#: Opened by a test: until then :class:`GatedProvider` holds its sends to targets ending in 9.
GATE = threading.Event()


class GatedProvider(Provider):
    """A blocking vendor: answers at once, except to targets ending in 9, whose sends hold
    their thread until :data:`GATE` opens (at most 30 s)."""

    kind = "gated"
    channels = frozenset(Channel)

    def send(self, message: Message) -> Receipt:
        if message.target.endswith("9"):
            GATE.wait(30)
        return Receipt(self.name, f"gated-{message.id}")
