"""Celery queues and priority steps (publishing is :mod:`noti.celery.publish`).

One queue per channel (``noti.sms``, ``noti.weixin``, ``noti.email``, ``noti.webhook``), plus
``noti.intake`` (the ``noti.notify`` task of applications that only know task names) and
``noti.maintenance`` (beat jobs). A delivery message carries only the record id.

Priorities. kombu emulates priorities on Redis with one list per step; step 0 is served
first. noti uses ten steps (0-9) and maps ``noti_lv`` (1-1000) onto them on a 1-2-5 scale, so
the role caps (1, 100, 1000) and a future paid cap (10) each start a step of their own:

=========  =====  =====  =====  =====  =====  =====  =====  =====  =====  =====
noti_lv    1000+  500+   200+   100+   50+    20+    10+    5+     2+     1
step       0      1      2      3      4      5      6      7      8      9
=========  =====  =====  =====  =====  =====  =====  =====  =====  =====  =====

The mapping is monotonic: a higher level never gets a later step. Every producer, worker,
beat and Flower process must use the same steps and separator; they all read them from
:func:`transport_options`, through ``celery -A noti``. Queue names never contain the
separator ``:``.

Foreign producers. A Celery app of another project that sends to noti's queues
(``send_task("noti.notify", queue="noti.intake", priority=9)``) writes the lists of *its*
transport options: with kombu's defaults (steps ``[0, 3, 6, 9]``, separator ``"\\x06\\x16"``)
priority 9 goes to ``noti.intake\\x06\\x169``, a list no noti worker reads. The workers'
delayed-set pump adopts such messages every :data:`ADOPT_INTERVAL_S`
(:class:`ForeignPriorities`, ``noti/lua/adopt.lua``): each moves, atomically, to noti's list
for its Celery priority (``properties.priority``: priority p is step p, 0 served first).
The separators looked at are kombu's default and any other that a producer's queue
declaration wrote into kombu's binding set of a noti queue (Celery declares the queue on
every ``send_task``). Priorities a producer's own steps put on a queue's base list (0-2 with
kombu's default steps; kombu sends a task without a priority as 0) are served at step 0, as
any Celery worker serves them.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, cast

import redis
from redis.client import NEVER_DECODE

from noti.core.record import Channel
from noti.redis.conn import load_script
from noti.redis.outage import translate_errors

if TYPE_CHECKING:
    from kombu import Queue  # type: ignore[attr-defined]

__all__ = [
    "ADOPT_INTERVAL_S",
    "EVENTS_QUEUE",
    "INTAKE_QUEUE",
    "KOMBU_DEFAULT_SEPARATOR",
    "MAINTENANCE_QUEUE",
    "PRIORITY_STEPS",
    "ForeignPriorities",
    "all_queues",
    "level_for_priority",
    "priority_for_level",
    "queue_key",
    "queue_names",
]

log = logging.getLogger(__name__)

INTAKE_QUEUE = "noti.intake"
MAINTENANCE_QUEUE = "noti.maintenance"
#: The event processor (one long task at a time), the event sweep and the event clean.
EVENTS_QUEUE = "noti.events"
PRIORITY_STEPS = list(range(10))
PRIORITY_SEPARATOR = ":"
DELIVER_TASK = "noti.deliver"

#: Lower bounds of the level bands, ascending; band i (from the top) is step i.
_BAND_FLOORS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000]


def priority_for_level(level: int) -> int:
    """The kombu priority step (0 = served first) for a ``noti_lv``."""
    band = bisect.bisect_right(_BAND_FLOORS, max(1, level)) - 1
    return PRIORITY_STEPS[-1] - band


def level_for_priority(priority: int) -> int:
    """The lowest ``noti_lv`` of Celery priority step ``priority`` (0-9, 0 served first): the
    level whose notifications :func:`priority_for_level` puts at that step (9 → 1, 0 → 1000).

    Raises:
        ValueError: ``priority`` is not a step (callers check what they were given first).
    """
    if priority not in PRIORITY_STEPS:
        raise ValueError(f"priority {priority!r} is not one of the steps 0-{PRIORITY_STEPS[-1]}")
    return _BAND_FLOORS[PRIORITY_STEPS[-1] - priority]


def queue_key(queue: str, priority: int) -> str:
    """The Redis list kombu keeps ``queue``'s messages of one priority step in."""
    return f"{queue}{PRIORITY_SEPARATOR}{priority}" if priority else queue


def queue_names() -> list[str]:
    """The name of every queue noti declares."""
    return [c.queue for c in Channel] + [INTAKE_QUEUE, MAINTENANCE_QUEUE, EVENTS_QUEUE]


def all_queues() -> list[Queue]:
    """Every queue a default worker consumes."""
    from kombu import Queue  # type: ignore[attr-defined]  # here: publishers need no kombu

    return [Queue(name, routing_key=name) for name in queue_names()]


def transport_options(*, visibility_timeout_s: float, restore_interval_s: float) -> dict[str, object]:
    """kombu Redis transport options, identical in every process."""
    return {
        "priority_steps": PRIORITY_STEPS,
        "sep": PRIORITY_SEPARATOR,
        "queue_order_strategy": "round_robin",
        "visibility_timeout": visibility_timeout_s,
        "unacked_restore_interval": restore_interval_s,
        "unacked_restore_throttle": 1,
        "socket_timeout": 30,
        "socket_connect_timeout": 5,
        "health_check_interval": 25,
    }


#: kombu's default priority separator: the lists of a Celery app with default transport options.
KOMBU_DEFAULT_SEPARATOR = "\x06\x16"
#: How often the delayed pump's worker adopts messages of foreign producers (seconds).
ADOPT_INTERVAL_S = 1.0
#: Most messages one adopt script call moves (a few ms of Redis time), so a large stranded
#: backlog moves in slices that let other clients' commands through.
ADOPT_BATCH = 1000
#: Most foreign separators looked at: the binding set is written by anyone who can reach Redis.
_MAX_SEPARATORS = 8
#: kombu's binding set of the exchange named like the queue (Celery declares a queue it
#: creates on the fly with an exchange of its name).
_BINDING_KEY = "_kombu.binding.{}"


class ForeignPriorities:
    """Finds the messages foreign Celery producers queued for noti's queues at priority lists
    noti's workers do not read, and moves them to the lists they do (see the module)."""

    def __init__(self, client: redis.Redis, *, queues: Sequence[str] | None = None) -> None:
        self.redis = client
        self.queues = list(queue_names() if queues is None else queues)
        self._adopt = load_script(client, "adopt")
        self._reported: set[str] = set()

    def separators(self) -> list[str]:
        """The separators other producers use for noti's queues: kombu's default first, then
        each one a producer's queue declaration left in kombu's binding set of a noti queue
        (a member ``<queue><sep><sep><queue>``: routing key, empty pattern, queue).

        Raises:
            StoreUnavailable: the broker cannot be reached.
        """
        with translate_errors(self.redis):
            pipe = self.redis.pipeline(transaction=False)
            for queue in self.queues:  # bytes even on a decoding client: anyone may write there
                pipe.execute_command("SMEMBERS", _BINDING_KEY.format(queue), **{NEVER_DECODE: True})
            members = cast(list[set[bytes]], pipe.execute())
        found = [KOMBU_DEFAULT_SEPARATOR]
        for queue, bindings in zip(self.queues, members, strict=True):
            for member in bindings:
                sep = _declared_separator(queue, member)
                if sep is not None and sep != PRIORITY_SEPARATOR and sep not in found:
                    found.append(sep)
        if len(found) > _MAX_SEPARATORS:
            log.warning(
                "foreign producers: %d separators in kombu's binding sets; looking at %d",
                len(found),
                _MAX_SEPARATORS,
            )
        return found[:_MAX_SEPARATORS]

    def lists(self, separators: Iterable[str]) -> list[tuple[str, str, int]]:
        """``(list, queue, step)`` of every list a producer with one of ``separators`` writes
        for a step other than 0 (kombu writes step 0 to the queue's own list, which noti reads)."""
        return [
            (f"{queue}{sep}{step}", queue, step)
            for sep in separators
            for queue in self.queues
            for step in range(1, PRIORITY_STEPS[-1] + 1)
        ]

    def adopt(self) -> int:
        """Move every waiting message of a foreign priority list to noti's list for its
        priority; how many moved.

        Raises:
            StoreUnavailable: the broker cannot be reached.
        """
        lists = self.lists(self.separators())
        keys = [key for key, _, _ in lists]
        args: list[str | int] = [PRIORITY_SEPARATOR, ADOPT_BATCH]
        for _, queue, step in lists:
            args += [queue, step]
        total = 0
        while True:
            with translate_errors(self.redis):
                moved = cast(list[int], self._adopt(keys=keys, args=args))
            total += sum(moved)
            for (key, queue, _), count in zip(lists, moved, strict=True):
                if count:
                    self._report(key, queue, count)
            if sum(moved) < ADOPT_BATCH:
                return total

    def _report(self, key: str, queue: str, count: int) -> None:
        sep = key[len(queue) : -1]
        if sep not in self._reported:
            self._reported.add(sep)
            log.warning(
                "foreign producers: a Celery app queues noti's messages with the priority separator %r, "
                "which noti's workers do not read; noti moves them to its own lists (every %.0f s). "
                "Give that app noti's transport options (priority_steps 0-9, sep %r) to skip the detour.",
                sep,
                ADOPT_INTERVAL_S,
                PRIORITY_SEPARATOR,
            )
        log.info("foreign producers: moved %d message(s) from %r to noti's lists of %s", count, key, queue)


def _declared_separator(queue: str, member: bytes) -> str | None:
    """The separator of a binding-set member ``<queue><sep><sep><queue>``, or None."""
    try:
        text = member.decode()
    except UnicodeDecodeError:  # kombu writes text: not a producer's declaration
        return None
    if len(text) <= 2 * len(queue) or not (text.startswith(queue) and text.endswith(queue)):
        return None
    doubled = text[len(queue) : -len(queue)]
    half = len(doubled) // 2
    if len(doubled) % 2 or doubled[:half] != doubled[half:]:
        return None
    return doubled[:half]
