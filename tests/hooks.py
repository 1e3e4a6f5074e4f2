"""A dead-letter hook for tests: remembers what it was called with."""

from __future__ import annotations

from noti.core.deadletter import DeadLetter

CALLS: list[DeadLetter] = []


def collect(letter: DeadLetter) -> None:
    CALLS.append(letter)
