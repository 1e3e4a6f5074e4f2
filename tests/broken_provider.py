"""Providers that fail as told, to check what each kind of failure does to a record (an
unexpected exception makes it invalid), and one that holds its sends until a test opens a gate."""

from __future__ import annotations

import threading
from collections.abc import Callable

from noti.core.record import Channel
from noti.errors import RateLimited, RecipientOptedOut, StoreUnavailable
from noti.providers.base import Message, Provider, Receipt


class FailingProvider(Provider):
    """Every channel; every send raises what :attr:`failure` makes of the provider's name."""

    channels = frozenset(Channel)
    failure: Callable[[str], BaseException]

    def send(self, message: Message) -> Receipt:
        raise self.failure(self.name)


class BuggyProvider(FailingProvider):
    """A provider with a bug."""

    kind = "buggy"
    failure = staticmethod(lambda name: ZeroDivisionError("division by zero in a provider"))


class RedisDownProvider(FailingProvider):
    """Fails as a provider whose Redis (token cache, sender pool) went away."""

    kind = "redisdown"
    failure = staticmethod(
        lambda name: StoreUnavailable("cannot reach Redis at redis://10.0.0.9:6379/0: Connection refused")
    )


class ThrottledProvider(FailingProvider):
    """Always answers with a flow limit that has already passed."""

    kind = "throttled"
    failure = staticmethod(lambda name: RateLimited("slow down", retry_after_s=0, provider=name))


class OptedOutProvider(FailingProvider):
    """Answers that the recipient unsubscribed."""

    kind = "optedout"
    failure = staticmethod(
        lambda name: RecipientOptedOut("the recipient replied STOP", provider=name, vendor_code="21610")
    )


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
