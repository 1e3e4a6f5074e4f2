"""Moving due delayed tasks into the stream, with the plugin's own Lua script.

``move_due.lua`` is byte-identical to the script PHP's ``DelayedQueue::moveDueTasksToStream``
sends (SHA1 ``3fdc0ac5de8c8b5720f96c13a86ad7fe2f25fb1f``), with the same KEYS (ZSET, HASH,
stream) and ARGV (``now`` in whole seconds, the batch limit). It runs atomically, so it is safe
next to a PHP mover: a task is taken by exactly one of them. Its semantics are PHP's: scores
``0..now`` inclusive, lowest first; the HASH value copied verbatim into the ``message`` field;
every selected id removed from both keys, even one without a payload (that task is lost, as in
PHP); negative scores never move.

The script unpacks the selected ids into one command, which Lua refuses at about 8000 values
after the XADDs already ran (duplicates on every tick, layout.md §6.2), so the batch is capped
at :data:`MAX_BATCH`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import cast

import redis

from noti.bridge.webman.layout import QueueKeys
from noti.errors import BridgeError
from noti.redis.conn import load_script
from noti.redis.outage import translate_errors

__all__ = ["MAX_BATCH", "DelayedMover"]

#: Largest batch the script handles safely (its ``unpack`` fails at about 8000).
MAX_BATCH = 4000


class DelayedMover:
    """Moves the due tasks of one queue into its stream."""

    def __init__(
        self,
        client: redis.Redis,
        keys: QueueKeys,
        *,
        batch: int = 128,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not 1 <= batch <= MAX_BATCH:
            raise BridgeError(
                f"the delayed batch size must be 1 to {MAX_BATCH}, got {batch}", code="e.noti.bridge.badbatch"
            )
        self.redis = client
        self.keys = keys
        self.batch = batch
        self._clock = clock
        self._script = load_script(client, "move_due", package="noti.bridge.webman")

    def move_due(self, *, now_s: int | None = None, limit: int | None = None) -> list[str]:
        """One pass: publish up to ``limit`` tasks due at ``now_s``; the new stream ids.

        Raises:
            StoreUnavailable: Redis cannot be reached.
        """
        now = int(self._clock()) if now_s is None else now_s
        with translate_errors(self.redis):
            ids = self._script(
                keys=[self.keys.delayed_set, self.keys.delayed_hash, self.keys.stream],
                args=[now, self.batch if limit is None else limit],
            )
        return cast(list[str], ids)

    def drain(self, *, now_s: int | None = None, max_passes: int = 100) -> int:
        """Move everything due (in batches, at most ``max_passes``); how many tasks moved."""
        moved = 0
        for _ in range(max_passes):
            ids = self.move_due(now_s=now_s)
            moved += len(ids)
            if len(ids) < self.batch:
                break
        return moved
