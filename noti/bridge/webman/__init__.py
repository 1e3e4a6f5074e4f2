"""The webman-redis-queue bridge: noti reads and writes the Redis layout of the PHP plugin
``solarseahorse/webman-redis-queue`` (``shared/compat/webman/layout.md``).

=====================  ============================================================
module                 owns
=====================  ============================================================
``layout``             names and keys from the PHP class name and the prefix
``phpjson``            PHP's ``json_encode`` / ``json_decode`` and scalar coercions
``codec``              the ``message`` JSON: :class:`QueueMessage`, encode, parse
``producer``           :class:`Producer`: push, push_many, schedule, remove, has
``mover``              :class:`DelayedMover`: the plugin's own Lua mover
``consumer``           :class:`Consumer` and :class:`ConsumerMessage`
``worker``             the read loop, the pending check, reconnects, housekeeping
``runner``             threads for ``celery worker`` (bootstep) and ``noti webman run``
``notifications``      :class:`~noti.bridge.webman.notifications.NotificationConsumer`
``admin``              what the CLI shows and deletes (list, clean, history)
``console``            :class:`WebmanConsole`: those commands as an API, with noti's roles
``registry``           registering consumers in the TOML settings file
``settings``           :class:`WebmanSettings` (``[webman]``)
=====================  ============================================================

``runner``, ``notifications`` and ``console`` are not imported here: they need noti's
runtime or its users, whose settings import this package.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # at run time the names below are imported on first use (__getattr__):
    # noti.config imports this package for ``settings``, and a CLI command reading records
    # needs none of the rest
    from noti.bridge.webman.codec import QueueMessage, Reason, encode_message, parse_entry
    from noti.bridge.webman.consumer import Consumer, ConsumerMessage, DeadLetterKind, PendingStrategy
    from noti.bridge.webman.layout import QueueKeys, QueueNames
    from noti.bridge.webman.mover import DelayedMover
    from noti.bridge.webman.producer import Delayed, Producer
    from noti.bridge.webman.settings import DEFAULT_PREFIX, WebmanSettings

#: Public name -> its submodule.
_SOURCES = {
    **dict.fromkeys(("QueueMessage", "Reason", "encode_message", "parse_entry"), "codec"),
    **dict.fromkeys(("Consumer", "ConsumerMessage", "DeadLetterKind", "PendingStrategy"), "consumer"),
    **dict.fromkeys(("QueueKeys", "QueueNames"), "layout"),
    "DelayedMover": "mover",
    **dict.fromkeys(("Delayed", "Producer"), "producer"),
    **dict.fromkeys(("DEFAULT_PREFIX", "WebmanSettings"), "settings"),
}

__all__ = [
    "DEFAULT_PREFIX",
    "Consumer",
    "ConsumerMessage",
    "DeadLetterKind",
    "Delayed",
    "DelayedMover",
    "PendingStrategy",
    "Producer",
    "QueueKeys",
    "QueueMessage",
    "QueueNames",
    "Reason",
    "WebmanSettings",
    "encode_message",
    "parse_entry",
]


def __getattr__(name: str) -> Any:
    source = _SOURCES.get(name)
    if source is None:  # a submodule is imported by the import system
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{source}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
