"""The bridge's settings: the ``[webman]`` table of the noti settings (``NOTI_WEBMAN__…``).

::

    [webman]
    enabled = true                        # run the consumers inside `celery worker`
    redis_url = "redis://127.0.0.1:6379/0"  # default: NOTI_REDIS_URL
    prefix = "webman_redis_queue_"        # the PHP connection's `prefix` option

    [webman.connections.orders]           # more PHP connections (a consumer's `connection`)
    url = "redis://10.0.0.5:6379/2"
    prefix = "shop_"

    [webman.consumers.SendCode]           # what `noti webman make-consumer` writes
    class = "app.queue.send_code:SendCode"
    processes = 2

Only :mod:`noti.config` reads the environment; this module only declares the shape.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from noti.errors import InvalidConfig
from noti.inputs import USER_NAME

__all__ = ["DEFAULT_PREFIX", "ConnectionSettings", "ConsumerEntry", "ResolvedConnection", "WebmanSettings"]

#: The ``prefix`` option of the plugin's shipped ``redis.php``.
DEFAULT_PREFIX = "webman_redis_queue_"

_CLASS_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*\Z")


class ConnectionSettings(BaseModel):
    """One named PHP connection (``redis.php``): where it points and the key prefix it adds."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    #: Redis URL (database and password included); None = the bridge's ``redis_url``.
    url: str | None = None
    #: phpredis ``OPT_PREFIX`` of that connection, added to every key.
    prefix: str = DEFAULT_PREFIX


class ConsumerEntry(BaseModel):
    """A registered consumer (``[webman.consumers.<name>]``), like one entry of PHP's ``process.php``."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, allow_inf_nan=False)

    #: The Python consumer class, ``"package.module:Class"``.
    class_path: str = Field(alias="class")
    #: Consumer threads started for it (PHP's process ``count``).
    processes: int = Field(default=1, ge=1, le=64)
    #: Overrides of the class's own settings, by attribute name (``php_class``, ``queue_name``,
    #: ``max_attempts``, ``pending_strategy`` …); checked when the consumer is built.
    options: dict[str, Any] = Field(default_factory=dict)

    @field_validator("class_path")
    @classmethod
    def _class_shape(cls, value: str) -> str:
        if not _CLASS_PATH.match(value):
            raise ValueError(f"must look like 'package.module:Class', got {value!r}")
        return value


@dataclass(frozen=True, slots=True)
class ResolvedConnection:
    """A connection name turned into what a client needs."""

    name: str
    url: str
    prefix: str


class WebmanSettings(BaseModel):
    """Settings of the webman-redis-queue bridge."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    #: Start the registered consumers (and their delayed-task movers) in every ``celery worker``.
    enabled: bool = False
    #: Redis of the ``default`` connection; None = noti's ``redis_url``.
    redis_url: str | None = None
    #: Key prefix of the ``default`` connection (the PHP connection option ``prefix``).
    prefix: str = DEFAULT_PREFIX
    #: Other named connections, for consumers whose ``connection`` is not ``default``.
    connections: dict[str, ConnectionSettings] = Field(default_factory=dict)
    #: Registered consumers, by name (PHP's ``process.php`` keys).
    consumers: dict[str, ConsumerEntry] = Field(default_factory=dict)
    #: Directories (relative to the working directory) appended to ``sys.path`` before consumer
    #: classes are imported: ``"."`` finds the classes ``make-consumer`` writes, as ``python -m``.
    import_paths: list[str] = Field(default_factory=lambda: ["."])
    #: Acting user of the notifications :class:`~noti.bridge.webman.notifications.NotificationConsumer`
    #: creates; None = ``NOTI_USER``.
    notify_user: str | None = None

    @field_validator("notify_user")
    @classmethod
    def _user_name(cls, value: str | None) -> str | None:
        if value is not None and not USER_NAME.fullmatch(value):
            raise ValueError(f"{value!r} is not a user name (1-64 letters, digits or _ . @ + -)")
        return value

    def connection(self, name: str, *, noti_redis_url: str) -> ResolvedConnection:
        """The URL and prefix of connection ``name`` (``default`` is always there).

        Raises:
            InvalidConfig: no ``[webman.connections.<name>]`` table.
        """
        if name == "default" and "default" not in self.connections:
            return ResolvedConnection(name, self.redis_url or noti_redis_url, self.prefix)
        entry = self.connections.get(name)
        if entry is None:
            known = ", ".join(["default", *sorted(self.connections)])
            raise InvalidConfig(f"webman connection {name!r} is not configured (known: {known})")
        return ResolvedConnection(name, entry.url or self.redis_url or noti_redis_url, entry.prefix)
