"""Events and subscriptions (seed 002): say "an order was paid" once, and every listener of
that event is told, without the application knowing who they are.

::

    from noti import events

    events.add_listener("order.paid", {"type": "sms", "target": "{{ customer.phone }}",
                                       "text": "Order {{ id }} paid"})
    events.add_listener("order.*", "shop.tasks.audit")          # a @shared_task, called with the event
    event_id = events.dispatch("order.paid", {"id": 42, "customer": {"phone": "+8613912345678"}})
    events.get_event(event_id).status                            # new → activated → done

How it works: ``dispatch`` stores the event (``new``) at the end of one ordered Redis list
and, in the same round trip, learns whether a processor is alive (it holds a Redis lock it
renews); if none is, it queues ``noti.events.process`` on the ``noti.events`` queue. The
processor takes events strictly in arrival order, marks each ``activated``, runs its
listeners, and marks it ``done`` with their return data or errors. See
:mod:`noti.events.processor` for limits, hand-over and resuming after a crash.

=============================  ============================================================
module                         owns
=============================  ============================================================
:mod:`~noti.events.event`      the event: statuses, names and patterns, payload rules, forms
:mod:`~noti.events.templates`  listeners' templates: checked when added, then rendered
:mod:`~noti.events.sandbox`    the Jinja2 sandbox they run in
:mod:`~noti.events.limits`     what a template may build, checked before it is built
:mod:`~noti.events.actions`    what a listener does: notify from templates, or call a task
:mod:`~noti.events.listeners`  listeners in Redis, and the processor's cache of them
:mod:`~noti.events.store`      events in Redis (``*.lua`` beside it: each step atomic)
:mod:`~noti.events.reads`      reading them: by id, selections, counts
:mod:`~noti.events.liveness`   the processor's liveness lock
:mod:`~noti.events.processor`  the processor loop, limits and hand-over
:mod:`~noti.events.api`        the API below, with permissions
=============================  ============================================================
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from noti.events.actions import NotifyAction, TaskAction
    from noti.events.api import Events, ProcessorStatus, events
    from noti.events.event import Event, EventStatus, Outcome
    from noti.events.listeners import Listener
    from noti.events.processor import RunReport, StopReason

#: Where each public name lives, imported on first use: a process that needs one piece of the
#: package (the lock keeper's helper process: :mod:`noti.events.keeper`) loads only that.
_LAZY = {
    "NotifyAction": "noti.events.actions",
    "TaskAction": "noti.events.actions",
    "Events": "noti.events.api",
    "ProcessorStatus": "noti.events.api",
    "events": "noti.events.api",
    "Event": "noti.events.event",
    "EventStatus": "noti.events.event",
    "Outcome": "noti.events.event",
    "Listener": "noti.events.listeners",
    "RunReport": "noti.events.processor",
    "StopReason": "noti.events.processor",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'noti.events' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "Event",
    "EventStatus",
    "Events",
    "Listener",
    "NotifyAction",
    "Outcome",
    "ProcessorStatus",
    "RunReport",
    "StopReason",
    "TaskAction",
    "add_listener",
    "dispatch",
    "events",
    "get_event",
    "list_events",
    "list_listeners",
    "processor_status",
    "remove_listener",
    "retry_event",
]


def dispatch(
    name: str,
    payload: Mapping[str, Any] | None = None,
    *,
    user: str | None = None,
    idempotency_key: str | None = None,
) -> str:
    """Store the event ``name`` with its ``payload`` (a JSON object) and make sure a processor
    is alive; the event id. With ``idempotency_key``, dispatching again with the same key
    returns the first event's id and stores nothing (see :meth:`Events.dispatch`)."""
    return _events().dispatch(name, payload, user=user, idempotency_key=idempotency_key)


def add_listener(
    event: str,
    action: object,
    *,
    name: str | None = None,
    filter: str | None = None,  # noqa: A002 - the issue's word
    **kwargs: Any,
) -> Listener:
    """Register a listener (see :meth:`Events.add_listener`)."""
    return _events().add_listener(event, action, name=name, filter=filter, **kwargs)


def remove_listener(name: str, *, user: str | None = None) -> Listener:
    """Remove a listener: its owner or a root member may (see :meth:`Events.remove_listener`)."""
    return _events().remove_listener(name, user=user)


def list_listeners(*, user: str | None = None, event: str | None = None) -> list[Listener]:
    """Listeners in the order they run (see :meth:`Events.list_listeners`)."""
    return _events().list_listeners(user=user, event=event)


def get_event(event_id: str, *, user: str | None = None) -> Event:
    """One event (see :meth:`Events.get`)."""
    return _events().get(event_id, user=user)


def list_events(**kwargs: Any) -> list[Event]:
    """Events, newest first (see :meth:`Events.select`)."""
    return _events().select(**kwargs)


def processor_status() -> ProcessorStatus:
    """Is a processor alive, where, since when, and the backlog (see :meth:`Events.status`)."""
    return _events().status()


def retry_event(event_id: str, *, listener: str | None = None, user: str | None = None) -> Event:
    """Re-run the failed listeners of a done event in a new step (see :meth:`Events.retry`)."""
    return _events().retry(event_id, listener=listener, user=user)


def _events() -> Events:
    from noti.events.api import events

    return events()
