"""Running consumers: threads in ``celery worker`` (the :class:`WebmanBridge` bootstep) or in
``noti webman run``.

For each consumer, :class:`BridgeRunner` starts ``processes`` reading threads (each with its
own consumer object and Redis consumer name, like PHP's worker processes) and one
:class:`~noti.bridge.webman.worker.Housekeeper` thread (mover and pending checks). Threads of
one connection share one client; its socket timeout exceeds the longest BLOCK.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import redis
from celery import bootsteps

from noti.bridge.webman.connection import connect
from noti.bridge.webman.consumer import Consumer
from noti.bridge.webman.settings import ConsumerEntry, WebmanSettings
from noti.bridge.webman.worker import Housekeeper, QueueWorker
from noti.core.deadletter import DeadLetters
from noti.errors import InvalidConfig
from noti.imports import load_object
from noti.sending.runtime import Runtime, get_runtime

__all__ = [
    "BridgeRunner",
    "ConsumerSpec",
    "WebmanBridge",
    "build_consumer",
    "extend_import_path",
    "load_consumer_class",
    "resolve_specs",
    "spec_of",
]

log = logging.getLogger(__name__)


def load_consumer_class(path: str) -> type[Consumer]:
    """The :class:`Consumer` subclass named ``"package.module:Class"``.

    Raises:
        InvalidConfig: it cannot be imported or is not a Consumer subclass.
    """
    if ":" not in path:
        raise InvalidConfig(f"consumer class {path!r} must look like 'package.module:Class'")
    found = load_object(path, what="consumer class")
    if not (isinstance(found, type) and issubclass(found, Consumer)):
        raise InvalidConfig(f"{path!r} is not a subclass of noti.bridge.webman.Consumer")
    return found


@dataclass(frozen=True, slots=True)
class ConsumerSpec:
    """One consumer to run: its class, thread count and attribute overrides."""

    name: str
    cls: type[Consumer]
    processes: int = 1
    options: Mapping[str, Any] = field(default_factory=dict)


def extend_import_path(webman: WebmanSettings) -> None:
    """Append ``[webman] import_paths`` to ``sys.path`` (once each)."""
    for folder in webman.import_paths:
        full = os.path.abspath(folder)
        if full not in sys.path:
            sys.path.append(full)


def spec_of(name: str, entry: ConsumerEntry) -> ConsumerSpec:
    """The spec of one ``[webman.consumers.<name>]`` entry (its class loaded)."""
    return ConsumerSpec(name, load_consumer_class(entry.class_path), entry.processes, dict(entry.options))


def resolve_specs(webman: WebmanSettings, names: Iterable[str] | None = None) -> list[ConsumerSpec]:
    """Specs of the registered consumers (all, or those named); a name may also be a class path.

    Raises:
        InvalidConfig: an unknown name or a class that cannot be loaded.
    """
    extend_import_path(webman)
    specs: list[ConsumerSpec] = []
    for name in list(webman.consumers) if names is None else names:
        entry = webman.consumers.get(name)
        if entry is not None:
            specs.append(spec_of(name, entry))
        elif ":" in name:
            specs.append(ConsumerSpec(name, load_consumer_class(name)))
        else:
            known = ", ".join(sorted(webman.consumers)) or "none"
            raise InvalidConfig(f"no webman consumer named {name!r} (registered: {known})")
    return specs


def build_consumer(
    spec: ConsumerSpec,
    webman: WebmanSettings,
    noti_redis_url: str,
    client_for: Callable[[str], redis.Redis],
    *,
    dead_letters: DeadLetters | None = None,
    clock: Callable[[], float] = time.time,
    tag: str = "0",
) -> Consumer:
    """One consumer object of ``spec``, on the client ``client_for(url)`` of its connection.

    Raises:
        InvalidConfig: an unknown connection or a bad option.
    """
    connection_name = str(spec.options.get("connection", spec.cls.connection))
    conn = webman.connection(connection_name, noti_redis_url=noti_redis_url)
    return spec.cls(
        client=client_for(conn.url),
        prefix=conn.prefix,
        dead_letters=dead_letters,
        clock=clock,
        tag=tag,
        options=dict(spec.options),
    )


class BridgeRunner:
    """Runs consumers in threads until :meth:`stop`."""

    def __init__(
        self,
        specs: Iterable[ConsumerSpec],
        *,
        webman: WebmanSettings,
        noti_redis_url: str,
        dead_letters: DeadLetters | None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._clients: dict[str, redis.Redis] = {}
        self.workers: list[QueueWorker] = []
        self.housekeepers: list[Housekeeper] = []
        for spec in specs:
            self._build(spec, webman, noti_redis_url, dead_letters, clock)

    def _build(
        self,
        spec: ConsumerSpec,
        webman: WebmanSettings,
        noti_redis_url: str,
        dead_letters: DeadLetters | None,
        clock: Callable[[], float],
    ) -> None:
        def make(tag: str) -> Consumer:
            return build_consumer(
                spec, webman, noti_redis_url, self._client, dead_letters=dead_letters, clock=clock, tag=tag
            )

        for index in range(spec.processes):
            worker = QueueWorker(make(str(index)))
            self.workers.append(worker)
            self._threads.append(self._thread(f"webman-{spec.name}-{index}", worker.run))
        keeper = Housekeeper(QueueWorker(make("keeper")))
        self.housekeepers.append(keeper)
        self._threads.append(self._thread(f"webman-{spec.name}-keeper", keeper.run))

    def _client(self, url: str) -> redis.Redis:
        client = self._clients.get(url)
        if client is None:
            client = self._clients[url] = connect(url, socket_timeout_s=60.0)
        return client

    def _thread(self, name: str, target: Callable[[threading.Event], None]) -> threading.Thread:
        return threading.Thread(target=target, args=(self._stop,), name=name, daemon=True)

    @classmethod
    def from_runtime(cls, runtime: Runtime, names: Iterable[str] | None = None) -> BridgeRunner:
        """A runner for the registered consumers (or those named) of a noti runtime."""
        settings = runtime.settings
        return cls(
            resolve_specs(settings.webman, names),
            webman=settings.webman,
            noti_redis_url=settings.redis_url,
            dead_letters=runtime.dead_letters,
        )

    def start(self) -> None:
        """Start every thread (once)."""
        for thread in self._threads:
            if not thread.is_alive() and thread.ident is None:
                thread.start()
        log.info("webman bridge: %d consumer thread(s) running", len(self.workers))

    def request_stop(self) -> None:
        """Ask every thread to stop (safe in a signal handler); :meth:`stop` waits for them."""
        self._stop.set()

    def stop(self, timeout_s: float | None = None) -> None:
        """Ask every thread to stop and wait for them (a read blocked in Redis ends first)."""
        self._stop.set()
        limit = (
            timeout_s
            if timeout_s is not None
            else 5 + max((w.consumer.block_time_ms for w in self.workers), default=0) / 1000
        )
        deadline = time.monotonic() + limit
        for thread in self._threads:
            if thread.ident is not None:
                thread.join(max(0.0, deadline - time.monotonic()))
        for client in self._clients.values():
            client.close()

    def wait(self) -> None:
        """Block until :meth:`stop` is called (from another thread or a signal handler)."""
        while not self._stop.wait(1.0):
            pass


class WebmanBridge(bootsteps.StartStopStep):  # type: ignore[misc]
    """Worker bootstep: runs the registered webman consumers when ``[webman] enabled`` is true."""

    label = "webman bridge"

    def include_if(self, worker: Any) -> bool:
        return bool(get_runtime().settings.webman.enabled)

    def create(self, worker: Any) -> BridgeRunner:
        return BridgeRunner.from_runtime(get_runtime())
