"""The batch worker's task events, written as JSON when they happen.

Flower reads a worker's task events from the ``celeryev`` fan-out: Celery's
``EventDispatcher.send`` builds each one as a dict (``celery.events.Event``: the worker's
hostname, UTC offset and pid, the next value of the worker's logical clock, the time), keeps
the task group's in a buffer, and its flush has kombu JSON-encode the buffer and publish it as
one ``task.multi`` message. A batch worker sends three events per notification, and that path
cost **20 µs of worker CPU per notification** here (9 µs in the three sends, 11 in the flush,
most of it encoding; ``python -m bench.profile_bench`` put task events at 29 µs of the
worker's 166): the largest part of what Celery's tools cost a batch worker.

:class:`TaskEvents` makes the same events (same fields and values, Celery's clock, which it
shares with the dispatcher's other events) as JSON text at once, with the fields that are the
same for every event of the worker encoded once per publish, and publishes them through the
dispatcher's own producer as one ``task.multi`` message of already-encoded JSON (kombu sends
it as is, in its usual envelope): 10 µs per notification (:data:`EVENT_COST_NOTE`).
Celery's receivers (Flower, ``celery events``) read a list body of a ``task.multi`` message
as the events it holds, exactly as they read the dispatcher's own. The rare ``task-revoked``
goes through the dispatcher's ``send`` (:mod:`noti.celery.report`).

The events wait at most :data:`PUBLISH_INTERVAL_S` (the batch worker's timer publishes them,
and so does the consumer when it stops); :data:`PUBLISH_AT` waiting publish at once. When
publishing fails they are kept for the next try if the dispatcher buffers while offline
(Celery's default), up to :data:`KEEP_AT_MOST`. Events are sent only while the dispatcher is
enabled and its groups include ``task`` (``celery control enable_events`` /
``disable_events`` are honoured at once), and only for a task that sends events.
"""

from __future__ import annotations

import json
import logging
import math
from typing import Any

from celery.utils.time import utcoffset

__all__ = ["EVENT_COST_NOTE", "KEEP_AT_MOST", "PUBLISH_AT", "PUBLISH_INTERVAL_S", "TaskEvents"]

log = logging.getLogger(__name__)

#: How often the waiting events are published (Flower's view lags by at most this).
PUBLISH_INTERVAL_S = 0.1
#: Events waiting that are published at once, before the interval.
PUBLISH_AT = 2000
#: Events kept while they cannot be published; older ones are dropped beyond this.
KEEP_AT_MOST = 100_000
#: The measured reason for writing the events' JSON here rather than through
#: ``EventDispatcher.send`` (kept next to the code, as the house rules ask).
EVENT_COST_NOTE = (
    "python -m bench.profile_bench, 2026-11-28, this 2-core VM: a notification's three task "
    "events and their publishing cost 20.3 µs of worker CPU through Celery's EventDispatcher "
    "(send x3, flush), 10.0 µs through TaskEvents"
)

#: JSON of a str, as ``json.dumps`` writes it (the C encoder's function).
_string = json.encoder.encode_basestring_ascii


def _value(value: Any) -> str:
    """JSON of one event field value (the types task events carry), as ``json.dumps``."""
    kind = type(value)
    if kind is str:
        return _string(value)
    if value is None:
        return "null"
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        return int.__repr__(value)
    if kind is float and math.isfinite(value):
        return float.__repr__(value)
    return json.dumps(value)  # NaN, infinities, anything else: json's own way


class TaskEvents:
    """Task events of one worker's dispatcher, as JSON text waiting to be published."""

    def __init__(self, dispatcher: Any, task: Any, previous: TaskEvents | None = None) -> None:
        self.dispatcher = dispatcher
        #: Whether ``task`` sends events at all (its ``send_events``).
        self._task_sends = bool(getattr(task, "send_events", True))
        #: Events written and not published yet (carried over from a consumer restart).
        self._waiting: list[str] = previous._waiting if previous is not None else []
        self._head = ""
        self._refresh_head()

    def _refresh_head(self) -> None:
        """The fields every event of this worker starts with (Celery's order)."""
        d = self.dispatcher
        self._head = f'{{"hostname":{_string(str(d.hostname))},"utcoffset":{utcoffset()},"pid":{int(d.pid)},'

    @property
    def on(self) -> bool:
        """Whether task events are sent now (read per batch: remote control changes it)."""
        d = self.dispatcher
        groups = d.groups
        return bool(self._task_sends and d.enabled and (not groups or "task" in groups))

    def started(
        self,
        now: float,
        uuid: str,
        name: str,
        args: str,
        kwargs: str,
        root_id: str,
        parent_id: str | None,
        retries: int,
    ) -> None:
        """``task-received`` then ``task-started`` of one task at ``now`` (``time.time()``),
        with the fields Celery's ``Request`` sends them with (a batch worker starts what it
        receives at once). The caller checked :attr:`on`."""
        clock = self.dispatcher.clock.forward
        head, task = self._head, _string(uuid)
        self._waiting.append(
            f'{head}"clock":{clock()},"uuid":{task},"name":{_string(name)},"args":{_string(args)},'
            f'"kwargs":{_string(kwargs)},"root_id":{_string(root_id)},"parent_id":{_value(parent_id)},'
            f'"retries":{int.__repr__(retries)},"eta":null,"expires":null,"timestamp":{_value(now)},'
            f'"type":"task-received"}}'
        )
        self._waiting.append(
            f'{head}"clock":{clock()},"uuid":{task},"timestamp":{_value(now)},"type":"task-started"}}'
        )
        if len(self._waiting) >= PUBLISH_AT:
            self.publish()

    def succeeded(self, now: float, uuid: str, result: str, runtime: float) -> None:
        """``task-succeeded`` with ``result`` (its JSON, as Celery's ``repr``-ed result is
        text) and ``runtime`` (seconds). The caller checked :attr:`on`."""
        self._waiting.append(
            f'{self._head}"clock":{self.dispatcher.clock.forward()},"uuid":{_string(uuid)},'
            f'"result":{_string(result)},"runtime":{_value(runtime)},"timestamp":{_value(now)},'
            f'"type":"task-succeeded"}}'
        )
        if len(self._waiting) >= PUBLISH_AT:
            self.publish()

    def add(self, kind: str, now: float, fields: tuple[tuple[str, Any], ...]) -> None:
        """Any other event of type ``kind`` at ``now`` with ``fields`` (name, value), in the
        order Celery's ``send`` gives them. The caller checked :attr:`on`."""
        body = ",".join([f"{_string(name)}:{_value(value)}" for name, value in fields])
        self._waiting.append(
            f'{self._head}"clock":{self.dispatcher.clock.forward()},{body},'
            f'"timestamp":{_value(now)},"type":{_string(kind)}}}'
        )
        if len(self._waiting) >= PUBLISH_AT:
            self.publish()

    def publish(self) -> None:
        """Publish the waiting events as one ``task.multi`` message (the timer's call)."""
        if not self._waiting:
            self._refresh_head()
            return
        d = self.dispatcher
        with d.mutex:
            producer = d.producer
            if producer is None:  # disabled or closed: kept for when it is enabled again
                self._bound()
                return
            waiting, self._waiting = self._waiting, []
            try:
                producer.publish(
                    f"[{','.join(waiting)}]",
                    routing_key="task.multi",
                    exchange=d.exchange.name,
                    declare=[d.exchange],
                    content_type="application/json",
                    content_encoding="utf-8",
                    headers=d.headers,
                    delivery_mode=d.delivery_mode,
                )
            except Exception as exc:  # the broker is away: keep them, as Celery's dispatcher does
                if not d.buffer_while_offline:
                    log.warning("could not publish %d task event(s): %s", len(waiting), exc)
                    return
                self._waiting[:0] = waiting
                self._bound()
        self._refresh_head()

    def _bound(self) -> None:
        excess = len(self._waiting) - KEEP_AT_MOST
        if excess > 0:
            del self._waiting[:excess]
            log.warning("dropped %d task event(s) that could not be published", excess)
