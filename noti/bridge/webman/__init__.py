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

from noti.bridge.webman.codec import QueueMessage, Reason, encode_message, parse_entry
from noti.bridge.webman.consumer import Consumer, ConsumerMessage, DeadLetterKind, PendingStrategy
from noti.bridge.webman.layout import QueueKeys, QueueNames
from noti.bridge.webman.mover import DelayedMover
from noti.bridge.webman.producer import Delayed, Producer
from noti.bridge.webman.settings import DEFAULT_PREFIX, WebmanSettings

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
