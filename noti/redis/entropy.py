"""Random hex digits for message ids, drawn from ``os.urandom`` a block at a time.

Every delivery message needs 32 random bytes (its task id and delivery tag, both UUID4s),
and bulk sends make tens of thousands a second: one ``getrandom`` call per 128 messages
instead of one each. Blocks are per thread, and a forked child starts afresh, so no
digits are ever handed out twice.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator

__all__ = ["hex64", "owner_token"]

_BLOCK_BYTES = 4096
_local = threading.local()


def _forked() -> None:
    global _local
    _local = threading.local()  # the child's threads must not reuse the parent's blocks


os.register_at_fork(after_in_child=_forked)


def _slices() -> Iterator[str]:
    while True:
        block = os.urandom(_BLOCK_BYTES).hex()
        for at in range(0, len(block), 64):
            yield block[at : at + 64]


def hex64() -> str:
    """64 hex digits (32 bytes) from the operating system's random source."""
    try:
        return next(_local.slices)  # type: ignore[no-any-return]
    except AttributeError:
        _local.slices = _slices()
        return next(_local.slices)  # type: ignore[no-any-return]


def owner_token(prefix: str) -> str:
    """A claim's owner token: ``prefix`` (the sender: host and pid, or a worker's name), ``:``
    and 12 random hex digits. A record's lease is kept and finished only by this token."""
    return f"{prefix}:{hex64()[:12]}"
