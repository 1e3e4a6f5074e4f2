"""The plugin's console commands as a Python API, with noti's roles (``noti webman …`` uses it).

A webman queue belongs to no noti user: PHP and consumers of every user share it. So:

=========================================  ===========  ====================================
what                                       who          refused with
=========================================  ===========  ====================================
:meth:`WebmanConsole.consumers` (counts)   anyone       (like ``noti event status``)
:meth:`~WebmanConsole.history` (messages)  root         ``e.noti.bridge.history.nopvg``
:meth:`~WebmanConsole.delete_history`      root         ``e.noti.bridge.history.nopvg``
:meth:`~WebmanConsole.clean`               root         ``e.noti.bridge.clean.nopvg``
=========================================  ===========  ====================================

"root" is a member or an administrator of the ``root`` group, as for ``noti clean`` and
dead letters. ``make-consumer`` and ``remove-consumer`` without ``--purge-data`` write only
the local TOML and class files, so the file system's permissions govern them;
``--purge-data`` is a :meth:`~WebmanConsole.clean`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import redis

from noti.access.users import User, resolve_user
from noti.bridge.webman.admin import HistoryEntry, QueueStats, clean, delete_entries, history, queue_stats
from noti.bridge.webman.connection import connect
from noti.bridge.webman.layout import QueueKeys, QueueNames
from noti.bridge.webman.registry import read_consumers
from noti.bridge.webman.runner import build_consumer, extend_import_path, resolve_specs, spec_of
from noti.bridge.webman.settings import ConsumerEntry
from noti.config import Settings
from noti.errors import BridgeError, InvalidInput
from noti.inputs import check_name

__all__ = ["ConsumerRow", "WebmanConsole", "WebmanQueue"]

#: What each root-only verb does, for the refusal's message.
_VERBS = {"history": "read webman queue messages", "clean": "delete webman queue data"}


@dataclass(frozen=True, slots=True)
class WebmanQueue:
    """One queue's Redis client and keys."""

    client: redis.Redis
    keys: QueueKeys


@dataclass(frozen=True, slots=True)
class ConsumerRow:
    """A registered consumer and its queue's numbers (a row of ``noti webman list``)."""

    name: str
    entry: ConsumerEntry
    keys: QueueKeys
    stats: QueueStats


class WebmanConsole:
    """The webman queues of one noti configuration, for an acting user (``user=`` per call,
    default ``NOTI_USER``, as everywhere in noti's API)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    @classmethod
    def from_runtime(cls) -> WebmanConsole:
        """The console of this process's runtime."""
        from noti.sending.runtime import get_runtime  # the edge: the runtime's settings

        return cls(get_runtime().settings)

    def require(self, verb: Literal["history", "clean"], *, user: str | None = None) -> User:
        """The acting user, if they may ``verb`` (callers that ask for a confirmation check first).

        Raises:
            PermissionDenied: ``e.noti.bridge.<verb>.nopvg``: not a root member or administrator.
        """
        acting = resolve_user(self.settings, user)
        acting.require_root(f"e.noti.bridge.{verb}.nopvg", _VERBS[verb])
        return acting

    # --- finding queues -------------------------------------------------------------------------

    def queue(self, queue: str) -> WebmanQueue:
        """The queue of a registered consumer name, a ``module:Class`` path, or a PHP class name
        (``app\\queue\\SendEmail``, on the ``default`` connection).

        Raises:
            InvalidConfig: a consumer class that cannot be loaded.
            BridgeError: ``e.noti.bridge.badname``: not a name (a lone surrogate, a control
                character: nothing that can be part of a Redis key).
        """
        try:
            check_name(queue, what="QUEUE (a PHP class or a registered consumer)", code="", max_len=500)
        except InvalidInput as exc:  # a surrogate cannot even be part of a Redis key
            raise BridgeError(exc.message, code="e.noti.bridge.badname") from None
        webman = self.settings.webman
        if queue in webman.consumers or ":" in queue:
            spec = resolve_specs(webman, [queue])[0]
            consumer = build_consumer(spec, webman, self.settings.redis_url, connect)
            return WebmanQueue(consumer.redis, consumer.keys)
        conn = webman.connection("default", noti_redis_url=self.settings.redis_url)
        return WebmanQueue(
            connect(conn.url), QueueKeys(QueueNames.from_class(queue.lstrip("\\")), conn.prefix)
        )

    def registered_queue(self, name: str, config: Path) -> WebmanQueue:
        """The queue of consumer ``name`` as registered in the TOML file ``config``.

        Raises:
            BridgeError: ``e.noti.bridge.unknown``: no such consumer in that file.
        """
        entry = read_consumers(config).get(name)
        if entry is None:
            raise BridgeError(f"no webman consumer named {name!r} in {config}", code="e.noti.bridge.unknown")
        extend_import_path(self.settings.webman)
        spec = spec_of(name, ConsumerEntry.model_validate(entry))
        consumer = build_consumer(spec, self.settings.webman, self.settings.redis_url, connect)
        return WebmanQueue(consumer.redis, consumer.keys)

    def _resolve(self, queue: str | WebmanQueue) -> WebmanQueue:
        return queue if isinstance(queue, WebmanQueue) else self.queue(queue)

    # --- the commands ---------------------------------------------------------------------------

    def consumers(self) -> list[ConsumerRow]:
        """Each registered consumer with its queue's numbers (anyone may: counts only)."""
        rows = []
        for name, entry in self.settings.webman.consumers.items():
            found = self.queue(name)
            rows.append(ConsumerRow(name, entry, found.keys, queue_stats(found.client, found.keys)))
        return rows

    def clean(self, queue: str | WebmanQueue, *, user: str | None = None) -> int:
        """Delete the queue's stream, delayed set and delayed data; how many keys existed.

        Raises:
            PermissionDenied: ``e.noti.bridge.clean.nopvg``; nothing deleted.
        """
        self.require("clean", user=user)
        found = self._resolve(queue)
        return clean(found.client, found.keys)

    def history(
        self,
        queue: str | WebmanQueue,
        *,
        older_than_s: int,
        now_s: int | None = None,
        limit: int | None = None,
        user: str | None = None,
    ) -> list[HistoryEntry]:
        """Processed entries still in the stream whose message is older than ``older_than_s``.

        Raises:
            PermissionDenied: ``e.noti.bridge.history.nopvg``.
        """
        self.require("history", user=user)
        found = self._resolve(queue)
        now = int(time.time()) if now_s is None else now_s
        return history(found.client, found.keys, older_than_s=older_than_s, now_s=now, limit=limit)

    def delete_history(
        self, queue: str | WebmanQueue, entry_ids: list[str], *, user: str | None = None
    ) -> int:
        """Delete stream entries :meth:`history` listed; how many were deleted.

        Raises:
            PermissionDenied: ``e.noti.bridge.history.nopvg``; nothing deleted.
        """
        self.require("history", user=user)
        found = self._resolve(queue)
        return delete_entries(found.client, found.keys, entry_ids)
