"""Replaying the vectors' PHP calls through the bridge, and the Redis state in the vectors' shape."""

from __future__ import annotations

import dataclasses
from typing import Any

import redis

from noti.bridge.webman import Consumer, ConsumerMessage, Delayed, PendingStrategy, QueueMessage, QueueNames
from noti.bridge.webman.admin import clean, queue_stats
from noti.bridge.webman.mover import DelayedMover
from noti.bridge.webman.worker import QueueWorker
from noti.errors import MalformedMessage
from tests.webman_fixtures.vectors import Normaliser, php_value

#: PHP property → bridge attribute.
PROPERTIES = {
    "autoAck": "auto_ack",
    "autoDel": "auto_delete",
    "pendingTimout": "pending_timeout_s",
    "maxAttempts": "max_attempts",
    "prefetchCount": "prefetch_count",
    "pendingProcessingStrategy": "pending_strategy",
    "queueName": "queue_name",
    "streamKey": "stream_key",
    "delayedDataHashKey": "delayed_data_hash_key",
    "delayedTaskSetKey": "delayed_task_set_key",
}


class Recorder(Consumer):
    """The harness's consumer: ``mode`` ok, fail, noack or ack-then-fail."""

    mode = "ok"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.consumed: list[dict[str, Any]] = []

    def consume(self, message: ConsumerMessage) -> None:
        self.consumed.append({"messageId": message.id, "message": message.queue_message.to_array()})
        if self.mode == "ack-then-fail":
            message.ack()
        if self.mode in ("fail", "ack-then-fail"):
            raise RuntimeError("harness: forced consume failure")


class Replay:
    """Replays one scenario's PHP calls through the bridge."""

    def __init__(self, data: dict[str, Any], client: redis.Redis, dead_letters: Any) -> None:
        self.data = data
        self.client = client
        self.now = int(data["final_time"])
        self.consumers: dict[str, Recorder] = {}
        self.workers: dict[tuple[str, str], QueueWorker] = {}
        self.message: QueueMessage | None = None
        for spec in data["consumers"]:
            overridden = spec["settings_overridden"] or {}
            options = {PROPERTIES[k]: v for k, v in overridden.items() if k in PROPERTIES}
            if "pending_strategy" in options:
                options["pending_strategy"] = PendingStrategy(options["pending_strategy"])
            recorder = Recorder(
                client=client,
                dead_letters=dead_letters,
                clock=lambda: self.now,
                options={"php_class": spec["class"], **options},
            )
            recorder.mode = spec["consume_mode"]
            self.consumers[spec["class"]] = recorder
            assert recorder.keys.stream == spec["names"]["redis_keys"]["stream"]
        self.first = next(iter(self.consumers.values()))

    def worker(self, consumer: Recorder, tag: str = "0") -> QueueWorker:
        key = (consumer.names.php_class, tag)
        if key not in self.workers:
            copy = Recorder(
                client=self.client,
                dead_letters=consumer.dead_letters,
                clock=consumer.clock,
                tag=tag,
                options={name: getattr(consumer, name) for name in Consumer.SETTINGS},
            )
            copy.mode = consumer.mode
            copy.consumed = consumer.consumed
            self.workers[key] = QueueWorker(copy)
        return self.workers[key]

    def owner(self, step: dict[str, Any]) -> Recorder:
        """The consumer whose keys the step's captured commands touch (else the first)."""
        keys = {a for rc in step.get("redis_commands", []) for a in rc["args"][1:3]}
        for consumer in self.consumers.values():
            if {consumer.keys.stream, consumer.keys.delayed_set} & keys:
                return consumer
        return self.first

    def by_timer(self, timer: str) -> tuple[Recorder, str, bool]:
        name = timer.removeprefix("timer:")
        pending = name.endswith("_handle_pending_messages")
        name = name.removesuffix("_handle_pending_messages")
        group, _, tag = name.rpartition("-")
        consumer = next(c for c in self.consumers.values() if c.names.group == group)
        return consumer, tag, pending

    def placeholder(self, text: str, producer_of: Recorder) -> QueueMessage:
        producer = producer_of.producer
        if text in ("<QueueMessage above>", "<same QueueMessage>"):
            assert self.message is not None
            return self.message
        if text == '<QueueMessage data={"job":2} failCount=5>':
            return producer.message({"job": 2}, fail_count=5)
        if text == '<QueueMessage data="x">':  # setDelay(60), setIdentifier(qm)
            return dataclasses.replace(producer.message("x"), delay_until=self.now + 60)
        if text == '<QueueMessage data="obj" setDelay(45) setIdentifier("qm-id")>':
            return dataclasses.replace(producer.message("obj"), delay_until=self.now + 45)
        raise AssertionError(f"unknown placeholder {text}")

    def call(self, step: dict[str, Any]) -> Any:
        """Run one PHP call the bridge's way; its result (or the exception it raised)."""
        method, args = step["method"], php_value(step.get("args") or [])
        consumer = self.owner(step)
        producer = consumer.producer
        try:
            return self._call(method, args, step, consumer, producer)
        except MalformedMessage as exc:
            return exc

    def _call(
        self, method: str, args: list[Any], step: dict[str, Any], consumer: Recorder, producer: Any
    ) -> Any:
        if method == "pushMessage":
            value = self.placeholder(args[0], consumer) if str(args[0]).startswith("<") else args[0]
            return producer.push(value)
        if method == "pushMessages":
            return producer.push_many(args[0])
        if method == "createQueueMessage":
            built = step["result"]["$QueueMessage"]
            self.message = QueueMessage(
                type=built["type"],
                data=built["data"],
                timestamp=built["timestamp"],
                source=built["source"],
                fail_count=built["failCount"],
            )
            return self.message
        if method == "scheduleDelayedMessage":
            if str(args[0]).startswith("<"):
                self.message = self.placeholder(args[0], consumer)
                return producer.schedule(self.message, *args[1:2], identifier="qm")
            return producer.schedule(*args)
        if method == "scheduleDelayedMessages":
            tasks = []
            for item in args[0]:
                if isinstance(item, str):
                    tasks.append(Delayed(self.placeholder(item, consumer), identifier="qm-id"))
                    continue
                if item.get("data") is None or item.get("delay") is None:
                    raise MalformedMessage("PHP: Invalid message data format.")
                # PHP's quirks, spelled out: the whole item is the payload, delay 0 means now.
                wrapped = dataclasses.replace(
                    producer.message(item), delay_until=self.now + int(item["delay"])
                )
                tasks.append(Delayed(wrapped, identifier=str(item.get("identifier") or "") or None))
            return producer.schedule_many(tasks)
        if method == "removeDelayedMessage":
            return producer.remove_delayed(args[0])
        if method == "removeDelayedMessages":
            return producer.remove_delayed_many(args[0])
        if method == "hasDelayedMessageExists":
            return producer.has_delayed(args[0])
        if method == "hasDelayedMessagesExist":
            return [producer.due_at(i) for i in args[0]]
        if method in ("DelayedQueue::moveDueTasksToStream", "QueueConsumer::handleDueTasks"):
            mover = DelayedMover(self.client, consumer.keys, clock=consumer.clock)
            if method.startswith("DelayedQueue"):
                return mover.move_due(now_s=args[1], limit=args[2])
            return mover.move_due(now_s=args[0] if args else None)
        if method == "ConsumerProcess::onWorkerStart":
            tag = args[1].removeprefix("worker_id=")
            for rc in step["redis_commands"]:
                owner = next(c for c in self.consumers.values() if c.keys.stream == rc["args"][2])
                self.worker(owner, tag).ensure_group()
            return None
        if method.startswith("timer:"):
            owner, tag, pending = self.by_timer(method)
            worker = self.worker(owner, tag)
            return worker.check_pending() if pending else worker.read_once()
        if method == "ConsumerListCommand::execute":
            return [queue_stats(self.client, c.keys) for c in self.consumers.values()]
        if method == "CommandUtils::cleanQueueRedisData":
            return clean(self.client, consumer.keys)
        if method == "QueueUtility::generate*":
            return [QueueNames.from_class(name) for name in args[0]]
        raise AssertionError(f"no replay for {method}")


def dump_state(client: redis.Redis, norm: Normaliser) -> list[dict[str, Any]]:
    """Every key of the bridge database, in the shape of the vectors' states."""
    state = []
    for key in sorted(client.keys("*")):
        kind = client.type(key)
        item: dict[str, Any] = {"key": key, "type": kind}
        if kind == "stream":
            item["entries"] = norm.entries([(i, f) for i, f in client.xrange(key)])
            info = client.xinfo_stream(key)
            item["info"] = {k: norm.value(str(info[k])) for k in _INFO}
            item["groups"] = []
            for group in client.xinfo_groups(key):
                consumers = client.xinfo_consumers(key, group["name"])
                pending = client.xpending_range(key, group["name"], "-", "+", 1000)
                item["groups"].append(
                    {
                        **{k: norm.value(str(group[k])) for k in _GROUP},
                        "consumers_detail": [(norm.value(c["name"]), c["pending"]) for c in consumers],
                        "pending_detail": [
                            (norm.value(p["message_id"]), norm.value(p["consumer"]), p["times_delivered"])
                            for p in pending
                        ],
                    }
                )
        elif kind == "zset":
            raw = client.execute_command("ZRANGE", key, 0, -1, "WITHSCORES")
            item["members"] = sorted(
                ((norm.value(m), s) for m, s in zip(raw[::2], raw[1::2], strict=True)), key=_by_score
            )
        elif kind == "hash":
            item["fields"] = sorted((norm.value(f), v) for f, v in client.hgetall(key).items())
        else:
            item["value"] = client.get(key)
        state.append(item)
    return state


def _by_score(member: tuple[str, str]) -> tuple[float, str]:
    """ZSET order with normalised members (random identifiers sort by their placeholder)."""
    return float(member[1]), member[0]


_INFO = ("length", "last-generated-id", "max-deleted-entry-id", "entries-added", "recorded-first-entry-id")
_GROUP = ("name", "consumers", "pending", "last-delivered-id", "entries-read", "lag")


def captured_state(items: list[dict[str, Any]], norm: Normaliser) -> list[dict[str, Any]]:
    """A state of the vectors, projected like :func:`dump_state`."""
    state = []
    for item in items:
        out: dict[str, Any] = {"key": item["key"], "type": item["type"]}
        if item["type"] == "stream":
            out["entries"] = norm.entries([(e["id"], dict(e["fields"])) for e in item["entries"]])
            out["info"] = {k: norm.value(str(item["xinfo_stream"][k])) for k in _INFO}
            out["groups"] = [
                {
                    **{k: norm.value(str(g[k])) for k in _GROUP},
                    "consumers_detail": [
                        (norm.value(c["name"]), c["pending"]) for c in g["consumers_detail"]
                    ],
                    "pending_detail": [
                        (norm.value(p["id"]), norm.value(p["consumer"]), p["delivery_count"])
                        for p in g["pending_detail"]
                    ],
                }
                for g in item["groups"]
            ]
        elif item["type"] == "zset":
            out["members"] = sorted(
                ((norm.value(m["member"]), m["score"]) for m in item["members"]), key=_by_score
            )
        elif item["type"] == "hash":
            out["fields"] = sorted((norm.value(f["field"]), f["value"]) for f in item["fields"])
        else:
            out["value"] = item["value"]
        state.append(out)
    return state
