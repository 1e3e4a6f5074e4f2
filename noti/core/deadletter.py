"""Dead letters: what could not be delivered, kept where an operator can see and replay it.

Entries live in one capped Redis stream (``noti:dead``; at most
``NOTI_DEAD_LETTER_MAX_LEN`` entries, trimmed to ``NOTI_DEAD_LETTER_MAX_AGE_S`` by beat).
Each entry is a flat hash of the fields of :class:`DeadLetter`. A record that fails or goes
invalid gets its entry in the same atomic step that changes its status (``finish.lua``
writes the same fields); other sources (the webman bridge) call :meth:`DeadLetters.add`.
The optional hook ``NOTI_DEAD_LETTER_HOOK`` (``"package.module:function"``) is called with
each new :class:`DeadLetter`, e.g. to alert.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, cast

import redis

from noti.core.keys import Keys
from noti.core.record import now_ms
from noti.errors import InvalidConfig
from noti.imports import load_object
from noti.redis.outage import translate_errors

__all__ = ["DeadLetter", "DeadLetters", "load_hook"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """One dead-letter entry."""

    #: The record id (source "noti"), or the source's own message id.
    record_id: str
    #: Channel (``sms`` …) or, for the bridge, the queue name.
    type: str
    target: str
    attempts: int
    #: Outcome class: ``exhausted`` (retries ran out), ``invalid`` (permanent or a bug),
    #: ``config``, ``poison`` (undecodable message) …
    error_class: str
    errmsg: str
    at_ms: int
    #: Who wrote it: ``noti`` for records, ``webman:<queue>`` for the bridge.
    source: str = "noti"
    #: The original payload, when the source has no record to keep it (JSON text).
    payload: str = ""
    #: The stream entry id (set when read back).
    entry_id: str = ""

    def fields(self) -> dict[str, str]:
        """The stream fields of this entry."""
        data = asdict(self)
        data.pop("entry_id")
        return {k: str(v) for k, v in data.items()}

    @classmethod
    def from_fields(cls, entry_id: str, fields: Mapping[str, str]) -> DeadLetter:
        return cls(
            record_id=fields.get("record_id", ""),
            type=fields.get("type", ""),
            target=fields.get("target", ""),
            attempts=int(fields.get("attempts", "0") or 0),
            error_class=fields.get("error_class", ""),
            errmsg=fields.get("errmsg", ""),
            at_ms=int(fields.get("at_ms", "0") or 0),
            source=fields.get("source", "noti"),
            payload=fields.get("payload", ""),
            entry_id=entry_id,
        )


def load_hook(path: str | None) -> Callable[[DeadLetter], Any] | None:
    """The hook function named ``"module:function"`` (or ``"module.function"``), or None.

    Raises:
        InvalidConfig: it cannot be imported or is not callable.
    """
    if not path:
        return None
    hook = load_object(path, what="NOTI_DEAD_LETTER_HOOK")
    if not callable(hook):
        raise InvalidConfig(f"NOTI_DEAD_LETTER_HOOK {path!r} is not callable")
    return cast(Callable[[DeadLetter], Any], hook)


class DeadLetters:
    """The dead-letter stream of one key prefix."""

    def __init__(
        self,
        client: redis.Redis,
        keys: Keys,
        *,
        max_len: int = 10_000,
        max_age_s: float = 7 * 86400,
        hook: Callable[[DeadLetter], Any] | None = None,
    ) -> None:
        self.redis = client
        self.keys = keys
        self.max_len = max_len
        self.max_age_s = max_age_s
        self.hook = hook

    def add(self, letter: DeadLetter) -> str:
        """Append ``letter`` (capped at ``max_len``), call the hook; the stream entry id."""
        fields: dict[Any, Any] = letter.fields()
        with translate_errors(self.redis):
            entry_id = cast(
                str,
                self.redis.xadd(self.keys.dead_letters, fields, maxlen=self.max_len, approximate=True),
            )
        self.notify_hook(letter)
        return entry_id

    def notify_hook(self, letter: DeadLetter) -> None:
        """Call the configured hook; its failures are logged, never raised."""
        if self.hook is None:
            return
        try:
            self.hook(letter)
        except Exception:
            log.exception("dead-letter hook failed for %s", letter.record_id)

    def entries(self, count: int | None = None, *, newest_first: bool = True) -> list[DeadLetter]:
        """Entries, newest first by default."""
        with translate_errors(self.redis):
            if newest_first:
                rows = self.redis.xrevrange(self.keys.dead_letters, count=count)
            else:
                rows = self.redis.xrange(self.keys.dead_letters, count=count)
        return [DeadLetter.from_fields(entry_id, fields) for entry_id, fields in cast(list[Any], rows)]

    def find(self, ident: str) -> DeadLetter | None:
        """The entry with stream id ``ident``, else the newest entry for record id ``ident``."""
        with translate_errors(self.redis):
            if "-" in ident and ident.replace("-", "").isdigit():
                rows = cast(list[Any], self.redis.xrange(self.keys.dead_letters, ident, ident))
                if rows:
                    return DeadLetter.from_fields(rows[0][0], rows[0][1])
        for letter in self.entries():
            if letter.record_id == ident:
                return letter
        return None

    def remove(self, entry_ids: list[str]) -> int:
        if not entry_ids:
            return 0
        with translate_errors(self.redis):
            return int(self.redis.xdel(self.keys.dead_letters, *entry_ids))

    def purge(self) -> int:
        """Remove every entry; how many there were."""
        with translate_errors(self.redis):
            pipe = self.redis.pipeline(transaction=True)
            pipe.xlen(self.keys.dead_letters)
            pipe.delete(self.keys.dead_letters)
            count, _ = pipe.execute()
        return int(count)

    def trim(self, *, at_ms: int | None = None) -> int:
        """Drop entries older than ``max_age_s`` (and beyond ``max_len``); how many went."""
        cutoff = (now_ms() if at_ms is None else at_ms) - int(self.max_age_s * 1000)
        with translate_errors(self.redis):
            by_age = int(self.redis.xtrim(self.keys.dead_letters, minid=f"{max(cutoff, 0)}-0"))
            by_len = int(self.redis.xtrim(self.keys.dead_letters, maxlen=self.max_len, approximate=False))
        return by_age + by_len

    def __len__(self) -> int:
        with translate_errors(self.redis):
            return int(self.redis.xlen(self.keys.dead_letters))
