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
it as is, in its usual envelope): 10 µs per notification, the measured reason for writing
them here (``python -m bench.profile_bench`` prints both paths' cost, 2026-11-28: 20.5 and
10.8 µs).
Celery's receivers (Flower, ``celery events``) read a list body of a ``task.multi`` message
as the events it holds, exactly as they read the dispatcher's own. The rare ``task-revoked``
goes through the dispatcher's ``send`` (:mod:`noti.celery.report`).

The events wait at most :data:`PUBLISH_INTERVAL_S` (the batch worker's timer publishes them,
and so does the consumer when it stops); :data:`PUBLISH_AT` waiting publish at once, and no
message carries more. When publishing fails they are kept if the dispatcher buffers while
offline (Celery's default), up to :data:`KEEP_AT_MOST`, and only the timer tries again
until a publish succeeds. A value no JSON can hold (a foreign producer's header) is written
as its ``repr``: writing an event never fails a batch. Events are sent only while the dispatcher is
enabled and its groups include ``task`` (``celery control enable_events`` /
``disable_events`` are honoured at once), and only for a task that sends events.
"""

from __future__ import annotations

import json
import logging
import math
from typing import Any

from celery.utils.time import utcoffset
from kombu.utils.json import dumps as kombu_dumps

__all__ = ["KEEP_AT_MOST", "PUBLISH_AT", "PUBLISH_INTERVAL_S", "TaskEvents"]

log = logging.getLogger(__name__)

#: How often the waiting events are published (Flower's view lags by at most this).
PUBLISH_INTERVAL_S = 0.1
#: Events waiting that are published at once, before the interval.
PUBLISH_AT = 2000
#: Events kept while they cannot be published; older ones are dropped beyond this.
KEEP_AT_MOST = 100_000
#: JSON of a str, as ``json.dumps`` writes it (the C encoder's function).
_string = json.encoder.encode_basestring_ascii


def _value(value: Any) -> str:
    """JSON of one event field value, as ``json.dumps`` writes it for the types task events
    carry; any other value (a foreign producer's header) as kombu's JSON writes it, else as
    its ``repr``: writing an event never fails."""
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
    try:
        return str(kombu_dumps(value))  # type: ignore[no-untyped-call]  # NaN, lists, dates: as kombu
    except Exception:  # noqa: BLE001 - not JSON at all: its text
        return _string(repr(value))


class TaskEvents:
    """The task events of this worker process, as JSON text waiting to be published. One per
    process: a restarted consumer's batcher rebinds it (:meth:`rebind`) to the new dispatcher, and
    the sends still in flight of the batcher before it report through it as well."""

    def __init__(self, dispatcher: Any, task: Any) -> None:
        self.dispatcher = dispatcher
        #: Whether ``task`` sends events at all (its ``send_events``).
        self._task_sends = bool(getattr(task, "send_events", True))
        #: Events written and not published yet, oldest first.
        self._waiting: list[str] = []
        #: The last publish failed: until one succeeds, only the timer tries again.
        self._failing = False
        self._head = ""
        self._refresh_head()

    def rebind(self, dispatcher: Any) -> None:
        """Publish through ``dispatcher`` from now on (a restarted consumer's), the events
        waiting included."""
        self.dispatcher = dispatcher
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
        head, task = self._head, _value(uuid)
        self._waiting.append(
            f'{head}"clock":{clock()},"uuid":{task},"name":{_value(name)},"args":{_value(args)},'
            f'"kwargs":{_value(kwargs)},"root_id":{_value(root_id)},"parent_id":{_value(parent_id)},'
            f'"retries":{_value(retries)},"eta":null,"expires":null,"timestamp":{_value(now)},'
            f'"type":"task-received"}}'
        )
        self._waiting.append(
            f'{head}"clock":{clock()},"uuid":{task},"timestamp":{_value(now)},"type":"task-started"}}'
        )
        self._publish_if_many()

    def succeeded(self, now: float, uuid: str, result: str, runtime: float) -> None:
        """``task-succeeded`` with ``result`` (its JSON, as Celery's ``repr``-ed result is
        text) and ``runtime`` (seconds). The caller checked :attr:`on`."""
        self._waiting.append(
            f'{self._head}"clock":{self.dispatcher.clock.forward()},"uuid":{_value(uuid)},'
            f'"result":{_value(result)},"runtime":{_value(runtime)},"timestamp":{_value(now)},'
            f'"type":"task-succeeded"}}'
        )
        self._publish_if_many()

    def add(self, kind: str, now: float, fields: tuple[tuple[str, Any], ...]) -> None:
        """Any other event of type ``kind`` at ``now`` with ``fields`` (name, value), in the
        order Celery's ``send`` gives them. The caller checked :attr:`on`."""
        body = ",".join([f"{_string(name)}:{_value(value)}" for name, value in fields])
        self._waiting.append(
            f'{self._head}"clock":{self.dispatcher.clock.forward()},{body},'
            f'"timestamp":{_value(now)},"type":{_string(kind)}}}'
        )
        self._publish_if_many()

    def _publish_if_many(self) -> None:
        if len(self._waiting) >= PUBLISH_AT and not self._failing:
            self.publish()

    def flush(self) -> None:
        """Publish the waiting events, then what the dispatcher buffered for the tasks that
        take Celery's own path (the timer's call, and the consumer's when it stops)."""
        self.publish()
        self.dispatcher.flush()

    def publish(self) -> None:
        """Publish the waiting events, :data:`PUBLISH_AT` at most per ``task.multi`` message
        (the timer's call). What cannot be published now waits for the next call."""
        d = self.dispatcher
        with d.mutex:
            while self._waiting:
                producer = d.producer
                if producer is None:  # disabled or closed: kept for when it is enabled again
                    self._bound()
                    break
                chunk = self._waiting[:PUBLISH_AT]
                try:
                    producer.publish(
                        f"[{','.join(chunk)}]",
                        routing_key="task.multi",
                        exchange=d.exchange.name,
                        declare=[d.exchange],
                        content_type="application/json",
                        content_encoding="utf-8",
                        headers=d.headers,
                        delivery_mode=d.delivery_mode,
                    )
                except Exception as exc:  # noqa: BLE001 - the broker is away
                    if not d.buffer_while_offline:  # as Celery's dispatcher: not kept
                        del self._waiting[: len(chunk)]
                        log.warning("could not publish %d task event(s): %s", len(chunk), exc)
                        continue
                    self._failing = True  # kept, as Celery's dispatcher keeps them
                    self._bound()
                    break
                del self._waiting[: len(chunk)]
            else:
                self._failing = False
        self._refresh_head()

    def _bound(self) -> None:
        excess = len(self._waiting) - KEEP_AT_MOST
        if excess > 0:
            del self._waiting[:excess]
            log.warning("dropped %d task event(s) that could not be published", excess)
