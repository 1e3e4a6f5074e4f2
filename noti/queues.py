"""Celery queues and priority steps (publishing is :mod:`noti.publish`).

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
"""

from __future__ import annotations

import bisect

from kombu import Queue  # type: ignore[attr-defined]

from noti.record import Channel

__all__ = [
    "EVENTS_QUEUE",
    "INTAKE_QUEUE",
    "MAINTENANCE_QUEUE",
    "PRIORITY_STEPS",
    "all_queues",
    "priority_for_level",
]

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


def all_queues() -> list[Queue]:
    """Every queue a default worker consumes."""
    names = [c.queue for c in Channel] + [INTAKE_QUEUE, MAINTENANCE_QUEUE, EVENTS_QUEUE]
    return [Queue(name, routing_key=name) for name in names]


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
