"""A pool's model: a number's states (:class:`NumberState`), the events that move it
(:class:`Event`), what an accepted event did (:class:`Transition`) and what a read of the
pool returns (:class:`PoolSnapshot`, :class:`PoolStats`). The state table itself is
``numpool.lua``'s, called by :mod:`noti.numpool.script`.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

__all__ = ["Event", "NumberState", "PoolSnapshot", "PoolStats", "Transition"]


class NumberState(enum.StrEnum):
    """Where a number is: its call state (idle/busy) and registration state (up/down)."""

    NODATA = "nodata"  #: not in the pool
    IDLE_UP = "idle+up"  #: free: ``call`` may take it
    IDLE_DOWN = "idle+down"  #: added or unregistered, not in a call
    BUSY_UP = "busy+up"  #: in a call
    BUSY_DOWN = "busy+down"  #: in a call, unregistered meanwhile

    @property
    def busy(self) -> bool:
        return self in (NumberState.BUSY_UP, NumberState.BUSY_DOWN)

    @property
    def up(self) -> bool:
        return self in (NumberState.IDLE_UP, NumberState.BUSY_UP)


class Event(enum.StrEnum):
    """What happens to a number (the pool's six events)."""

    ADD = "add"
    DEL = "del"
    REG = "reg"
    UNREG = "unreg"
    CALL = "call"
    HANGUP = "hangup"


@dataclass(frozen=True, slots=True)
class Transition:
    """An event the table accepted: the number's state before and after it."""

    pool: str
    number: str
    event: Event
    before: NumberState
    state: NumberState

    @property
    def changed(self) -> bool:
        return self.before is not self.state

    def line(self) -> str:
        """One readable line: ``1001  reg  idle+down -> idle+up``."""
        change = f"{self.before} -> {self.state}" if self.changed else f"{self.state} (unchanged)"
        return f"{self.number}  {self.event}  {change}"


@dataclass(frozen=True, slots=True)
class PoolStats:
    """How many numbers are in each state (``nodata`` is never counted)."""

    counts: Mapping[NumberState, int] = field(default_factory=dict)

    @classmethod
    def of(cls, states: Iterable[NumberState]) -> PoolStats:
        """The counts of ``states`` (one entry per number)."""
        counts: dict[NumberState, int] = {}
        for state in states:
            counts[state] = counts.get(state, 0) + 1
        return cls(counts)

    def __getitem__(self, state: NumberState) -> int:
        return self.counts.get(state, 0)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def free(self) -> int:
        """Numbers ``call`` may take now (idle and up)."""
        return self[NumberState.IDLE_UP]

    def as_dict(self) -> dict[str, int]:
        return {str(s): self[s] for s in NumberState if s is not NumberState.NODATA}


@dataclass(frozen=True, slots=True)
class PoolSnapshot:
    """A pool as one script call read it: its owner, every number's state, the free numbers."""

    #: The user who created the pool; None for a pool made before pools had owners, or one
    #: nobody has made yet.
    owner: str | None
    #: Every number and its state, sorted by number.
    numbers: Mapping[str, NumberState]
    #: The free numbers (idle and up), in the order ``call`` takes them.
    free: list[str]

    @property
    def stats(self) -> PoolStats:
        return PoolStats.of(self.numbers.values())
