"""Publishing ``noti.deliver`` messages: one per record, carrying only its id.

On a Redis broker (the default: the broker is the record store's Redis), noti writes
kombu's wire format itself: the same JSON envelope Celery's ``send_task`` produces for
``noti.deliver`` with the anonymous exchange, LPUSHed onto the channel queue's priority
list. That lets a record and its message go to Redis in one MULTI round trip (``notify``)
and lets bulk sends pipeline thousands of messages, where Celery builds and sends each
message on its own (~1 ms apiece). ``tests/test_publish.py`` pins the envelope against
Celery's own. The task id of each message is its record id. Celery's
``before_task_publish`` (with the message's headers, which a receiver may change: tracing
context goes there) and ``after_task_publish`` fire per message as Celery fires them, but
only while a receiver is connected: with none, messages are built from a template. A message
built for a record that is then not stored (its idempotency key named another record) had
its ``before_task_publish`` but gets no ``after_task_publish``. What is
skipped: the ``task-sent`` event (Flower sees each task from its ``task-received``).

When noti traces (:mod:`noti.tracing`), each message carries the W3C trace context it was
published in (``traceparent``, and ``tracestate`` if any) in its headers, where Celery's
workers show custom headers as the task request's attributes: the current span's for a
record queued by ``notify()``, the record's own (``noti_trace``) for one the pump publishes
later (``traces`` of :meth:`Publisher.publish`). The template then has one more placeholder.

On any other broker (RabbitMQ), messages go through ``send_task``.

The Redis path imports nothing of Celery or kombu (the CLI and applications that only add
notifications start without them): the signals are looked at only if ``celery.signals`` has
been imported (no receiver can be connected before), the ``origin`` header is computed as
Celery's ``anon_nodename`` computes it, and :meth:`Publisher.for_settings` takes the broker
from noti's settings, calling for noti's Celery app only on the ``send_task`` path.
"""

from __future__ import annotations

import base64
import functools
import importlib.metadata
import json
import os
import re
import socket
import sys
import uuid
from collections.abc import Callable, Iterable, Mapping
from functools import cached_property
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

import redis

from noti.celery.queues import (
    DELIVER_TASK,
    PRIORITY_STEPS,
    priority_for_level,
    queue_key,
    transport_options,
)
from noti.core.delay import PublishItem
from noti.core.record import Channel
from noti.errors import StoreUnavailable
from noti.redis.conn import connect
from noti.redis.entropy import hex64
from noti.redis.outage import translate_errors
from noti.redis.pipelines import run_batches
from noti.redis.urls import SENTINEL_SCHEME, masked_url
from noti.tracing import carrier

if TYPE_CHECKING:
    from celery import Celery

    from noti.config import Settings

__all__ = ["Publisher", "queue_key"]

#: kombu's retry policy for the send_task path: fail fast, the caller reports it.
_PUBLISH_RETRY = {"max_retries": 2, "interval_start": 0.1, "interval_step": 0.2, "interval_max": 0.5}
#: LPUSHes per pipelined batch in :meth:`Publisher.publish`.
_PUBLISH_BATCH = 1000
_EMBED = {"callbacks": None, "errbacks": None, "chain": None, "chord": None}


# Placeholders of the per-queue templates (no JSON escaping needed for any of them).
#: The RFC 4122 variant: the high bits of the 17th hex digit are 10.
_VARIANT = {c: "89ab"[int(c, 16) & 3] for c in "0123456789abcdef"}

_TASK_ID, _TAG, _RECORD_ID, _BODY = "@@TASKID@@", "@@TAG@@", "@@RECORD@@", "@@BODY@@"
_PARENT, _TRACE = "@@PARENT@@", "@@TRACE@@"
_SAFE_ID = re.compile(r"^[0-9A-Za-z_-]{1,64}$")
#: A ``traceparent`` the template may take as it is (W3C Trace Context, version 00).
_SAFE_TRACE = re.compile(r"^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$")
_BODY_PREFIX, _BODY_SUFFIX = (part.encode() for part in json.dumps([["@"], {}, _EMBED]).split("@"))

_FORMAT_NAMES = {
    _TASK_ID: "task",
    _TAG: "tag",
    _RECORD_ID: "record",
    _BODY: "body",
    _PARENT: "parent",
    _TRACE: "trace",
}

Item = PublishItem


@functools.cache
def send_task_ignore_result() -> bool | None:
    """The ``ignore_result`` header Celery's ``send_task`` writes when not given one (Celery 5.5
    and 5.6: False; 5.7: None), so the envelope is Celery's own. Read from the installed
    distribution's metadata: publishing on Redis imports no Celery (the fast CLI)."""
    major, minor = (int(part) for part in importlib.metadata.version("celery").split(".")[:2])
    return None if (major, minor) >= (5, 7) else False


def _celery_signals() -> ModuleType | None:
    """``celery.signals`` if something imported it: a receiver can only be connected to one of
    its signals after that, so with the module absent there is none (and no Celery to import)."""
    return sys.modules.get("celery.signals")


class Publisher:
    """Sends delivery messages for ``(record id, channel, level)`` items.

    ``app`` is the Celery app whose broker receives them, or a function returning it (called
    only when the app is needed: to read its configuration when ``broker_url`` is not given,
    and to ``send_task`` through a broker other than Redis).
    """

    def __init__(
        self,
        app: Celery | Callable[[], Celery],
        *,
        store_url: str | None = None,
        store_redis: redis.Redis | None = None,
        broker_url: str | None = None,
        broker_transport_options: Mapping[str, object] | None = None,
    ) -> None:
        self._app_source = app
        self._store_url = store_url
        self._store_redis = store_redis
        self._broker_url = broker_url
        self._broker_transport_options = broker_transport_options

    @classmethod
    def for_settings(
        cls,
        settings: Settings,
        app: Celery | Callable[[], Celery],
        *,
        store_redis: redis.Redis | None = None,
    ) -> Publisher:
        """The publisher of noti's own Celery app (``app``, or a function returning it), its
        broker read from ``settings`` as that app reads it
        (:func:`noti.celery.app.celery_config`), without building the app: ``app`` is called
        only for the ``send_task`` path."""
        return cls(
            app,
            store_url=settings.redis_url,
            store_redis=store_redis,
            broker_url=settings.broker,
            broker_transport_options=transport_options(
                visibility_timeout_s=settings.visibility_timeout_s,
                restore_interval_s=settings.unacked_restore_interval_s,
            ),
        )

    @cached_property
    def _app(self) -> Celery:
        source = self._app_source
        if hasattr(source, "conf"):  # an app
            return cast("Celery", source)
        return cast("Callable[[], Celery]", source)()

    @cached_property
    def broker_url(self) -> str:
        if self._broker_url is not None:
            return self._broker_url
        return str(self._app.conf.broker_url)

    @cached_property
    def _transport_options(self) -> Mapping[str, object]:
        if self._broker_url is not None:
            return self._broker_transport_options or {}
        return self._app.conf.broker_transport_options or {}

    @cached_property
    def writes_wire_format(self) -> bool:
        """True when the broker is Redis and noti writes kombu's messages itself."""
        scheme = self.broker_url.split("://", 1)[0]
        return scheme in ("redis", "rediss", SENTINEL_SCHEME) and not self._transport_options.get(
            "global_keyprefix"
        )

    @property
    def shares_store(self) -> bool:
        """True when messages may go in the same MULTI as record writes."""
        return self.writes_wire_format and self._store_url == self.broker_url

    @cached_property
    def broker_redis(self) -> redis.Redis:
        """A client of the broker's Redis (the store's own client when they are the same)."""
        if self.shares_store and self._store_redis is not None:
            return self._store_redis
        return connect(self.broker_url)

    def empty_channels(self) -> set[Channel]:
        """The channels whose Celery queue holds no message at any priority step (one
        pipelined round trip); none when the broker is not one noti writes itself (its
        lengths are not known here, so the lost-message sweep sweeps nothing)."""
        if not self.writes_wire_format:
            return set()
        client = self.broker_redis
        with translate_errors(client):
            pipe = client.pipeline(transaction=False)
            for channel in Channel:
                for step in PRIORITY_STEPS:
                    pipe.llen(queue_key(channel.queue, step))
            lengths = cast(list[int], pipe.execute())
        steps = len(PRIORITY_STEPS)
        return {c for i, c in enumerate(Channel) if sum(lengths[i * steps : (i + 1) * steps]) == 0}

    @cached_property
    def _origin(self) -> str:
        """The ``origin`` header: Celery's ``anon_nodename()`` (``gen<pid>@<host name>``),
        computed as it computes it (``tests/test_publish.py`` compares the two)."""
        return f"gen{os.getpid()}@{socket.gethostname()}"

    def message(
        self,
        record_id: str,
        channel: Channel,
        level: int,
        parent: str | None = None,
        trace: Mapping[str, str] | None = None,
    ) -> tuple[str, str]:
        """The Redis list and the JSON envelope of one delivery message (``before_task_publish``
        has fired for it when a receiver is connected). ``parent``: the notice a record of
        ``notify(recipient=…)`` belongs to, written as the message's ``parent_id`` and
        ``root_id`` (Flower shows them on the task's page and searches by them). ``trace``:
        the trace context its headers carry (default: the current span's, when traced)."""
        if trace is None:
            trace = carrier()
        signals = _celery_signals()
        if signals is not None and signals.before_task_publish.receivers:
            return self._signalled(signals, record_id, channel, level, parent, trace)
        with_parent = parent is not None
        traceparent = trace.get("traceparent") if trace else None
        with_trace = traceparent is not None
        shape = self._shapes.get((channel, level, with_parent, with_trace))
        if shape is None:
            shape = self._shape(channel, level, with_parent, with_trace)
        if (
            not _SAFE_ID.match(record_id)
            or (with_parent and not _SAFE_ID.match(parent or ""))
            or (trace and (len(trace) > 1 or not _SAFE_TRACE.match(traceparent or "")))
        ):
            # ids noti makes always match, and so do traceparents; anything else the slow way
            priority = priority_for_level(level)
            return shape[0], self._envelope(
                record_id, channel, priority, task_id=record_id, parent=parent, trace=trace
            )
        h = hex64()  # the delivery tag
        return shape[0], shape[1] % {
            "task": record_id,
            "tag": f"{h[32:40]}-{h[40:44]}-4{h[45:48]}-{_VARIANT[h[48]]}{h[49:52]}-{h[52:]}",
            "record": record_id,
            "body": base64.b64encode(_BODY_PREFIX + record_id.encode() + _BODY_SUFFIX).decode(),
            "parent": parent,
            "trace": traceparent,
        }

    def _signalled(
        self,
        signals: ModuleType,
        record_id: str,
        channel: Channel,
        level: int,
        parent: str | None = None,
        trace: Mapping[str, str] | None = None,
    ) -> tuple[str, str]:
        """The message built field by field, with ``before_task_publish`` sent for it as
        Celery sends it (its receivers may change the headers before they are written)."""
        priority = priority_for_level(level)
        envelope = json.loads(
            self._envelope(record_id, channel, priority, task_id=record_id, parent=parent, trace=trace)
        )
        signals.before_task_publish.send(
            sender=DELIVER_TASK,
            body=([record_id], {}, _EMBED),
            exchange="",
            routing_key=channel.queue,
            headers=envelope["headers"],
            properties=envelope["properties"],
            declare=[],
            retry_policy=None,
        )
        return queue_key(channel.queue, priority), json.dumps(envelope)

    def published(self, messages: Iterable[tuple[str, str]]) -> None:
        """Send ``after_task_publish`` for messages now in Redis (``(queue list, envelope)``
        pairs), if a receiver is connected."""
        signals = _celery_signals()
        if signals is None or not signals.after_task_publish.receivers:
            return
        for _, payload in messages:
            envelope = json.loads(payload)
            headers, delivery = envelope["headers"], envelope["properties"]["delivery_info"]
            signals.after_task_publish.send(
                sender=DELIVER_TASK,
                body=tuple(json.loads(base64.b64decode(envelope["body"]))),
                headers=headers,
                exchange=delivery["exchange"],
                routing_key=delivery["routing_key"],
            )

    @cached_property
    def _shapes(self) -> dict[tuple[Channel, int, bool, bool], tuple[str, str]]:
        """Per channel, level, whether it names a parent and whether it carries a
        ``traceparent``: the queue list and the envelope as a %-format."""
        return {}

    def _shape(
        self, channel: Channel, level: int, with_parent: bool = False, with_trace: bool = False
    ) -> tuple[str, str]:
        """The queue list and the envelope as a %-format, rendered once per queue and
        priority step with placeholders for the ids, the body (the parent notice, the
        ``traceparent``)."""
        priority = priority_for_level(level)
        parent = _PARENT if with_parent else None
        trace = {"traceparent": _TRACE} if with_trace else None
        text = self._envelope(
            _RECORD_ID, channel, priority, task_id=_TASK_ID, tag=_TAG, parent=parent, trace=trace
        )
        body_start = text.index('"body": "') + len('"body": "')
        body_end = text.index('"', body_start)
        text = (text[:body_start] + _BODY + text[body_end:]).replace("%", "%%")
        for placeholder, name in _FORMAT_NAMES.items():
            text = text.replace(placeholder, f"%({name})s")
        shape = (queue_key(channel.queue, priority), text)
        if len(self._shapes) < 4096:  # levels are few; an unbounded range must not grow this
            self._shapes[(channel, level, with_parent, with_trace)] = shape
        return shape

    def _envelope(
        self,
        record_id: str,
        channel: Channel,
        priority: int,
        *,
        task_id: str = "",
        tag: str = "",
        parent: str | None = None,
        trace: Mapping[str, str] | None = None,
    ) -> str:
        """The envelope built field by field (the reference the template is made from);
        ``trace``: trace context headers it carries."""
        task_id = task_id or str(uuid.uuid4())
        body = json.dumps([[record_id], {}, _EMBED])
        envelope: dict[str, Any] = {
            "body": base64.b64encode(body.encode()).decode(),
            "content-encoding": "utf-8",
            "content-type": "application/json",
            "headers": {
                "lang": "py",
                "task": DELIVER_TASK,
                "id": task_id,
                "shadow": None,
                "eta": None,
                "expires": None,
                "group": None,
                "group_index": None,
                "retries": 0,
                "timelimit": [None, None],
                "root_id": parent or task_id,
                "parent_id": parent,
                "argsrepr": repr([record_id]),
                "kwargsrepr": "{}",
                "origin": self._origin,
                "ignore_result": send_task_ignore_result(),
                "replaced_task_nesting": 0,
                "stamped_headers": None,
                "stamps": {},
            },
            "properties": {
                "correlation_id": task_id,
                "reply_to": "",
                "delivery_mode": 2,
                "delivery_info": {"exchange": "", "routing_key": channel.queue},
                "priority": priority,
                "body_encoding": "base64",
                "delivery_tag": tag or str(uuid.uuid4()),
            },
        }
        if trace:
            envelope["headers"].update(trace)
        return json.dumps(envelope)

    def publish(self, items: Iterable[Item], *, traces: Mapping[str, Mapping[str, str]] | None = None) -> int:
        """Send a delivery message per item; how many were sent. ``traces``: by record id,
        the trace context its message carries (the pump's: each record's own); by default
        the current span's, when traced.

        Raises:
            StoreUnavailable: the broker cannot be reached.
        """
        if self.writes_wire_format:
            client = self.broker_redis
            if traces is None:
                pushes = [("LPUSH", *self.message(*item)) for item in items]
            else:
                pushes = [
                    ("LPUSH", *self.message(*_with_parent(item), trace=traces.get(item[0], {})))
                    for item in items
                ]
            batches = (
                pushes[start : start + _PUBLISH_BATCH] for start in range(0, len(pushes), _PUBLISH_BATCH)
            )
            with translate_errors(client):
                for _ in run_batches(client, batches):
                    pass
            self.published((queue, payload) for _, queue, payload in pushes)
            return len(pushes)
        return self._send_tasks(items, traces)

    def _send_tasks(self, items: Iterable[Item], traces: Mapping[str, Mapping[str, str]] | None) -> int:
        from kombu.exceptions import OperationalError  # the send_task path only: kombu is there

        count = 0
        try:
            with self._app.producer_or_acquire() as producer:
                for item in items:
                    record_id, channel, level = item[0], item[1], item[2]
                    parent = item[3] if len(item) > 3 else None
                    trace = carrier() if traces is None else traces.get(record_id)
                    self._app.send_task(
                        DELIVER_TASK,
                        args=[record_id],
                        task_id=record_id,
                        parent_id=parent,
                        root_id=parent,
                        queue=channel.queue,
                        routing_key=channel.queue,
                        priority=priority_for_level(level),
                        producer=producer,
                        retry_policy=_PUBLISH_RETRY,
                        headers=dict(trace) if trace else None,
                    )
                    count += 1
        except OperationalError as exc:
            raise StoreUnavailable(
                f"cannot reach the broker at {masked_url(self.broker_url)}: {exc}"
            ) from exc
        return count


def _with_parent(item: Item) -> tuple[str, Channel, int, str | None]:
    """An item with its parent notice, None when it names none."""
    return (item[0], item[1], item[2], item[3] if len(item) > 3 else None)
