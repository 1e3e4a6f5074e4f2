"""A provider with a bug, to check that an unexpected exception makes a record invalid."""

from __future__ import annotations

from noti.providers.base import Message, Provider, Receipt
from noti.record import Channel


class BuggyProvider(Provider):
    kind = "buggy"
    channels = frozenset(Channel)

    def send(self, message: Message) -> Receipt:
        raise ZeroDivisionError("division by zero in a provider")
