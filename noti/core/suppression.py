"""The suppression list: the targets no notification of a channel goes to any more, and why.

Two keys per channel (:mod:`noti.core.keys`):

* ``noti:suppressed:<channel>`` (SET): the targets. The claim script reads it
  (``claim_record.lua``: a claimed record to a target in it is refused with
  ``e.noti.delivery.optedout``), so its layout does not change.
* ``noti:suppressed-why:<channel>`` (HASH): target -> why, a JSON object
  ``{"reason", "code", "text", "record", "user", "provider", "at_ms"}``: what suppressed it
  (``optout``: the vendor said the recipient opted out or is gone, a dead push token
  included; ``bounce``: a hard bounce; ``complaint``: a spam complaint; ``unsubscribe``), the
  vendor's code and words, the record whose send or receipt did it and that record's creator,
  the provider, and when. The first why is kept: a later bounce of the same address does not
  replace it. A target suppressed before this hash existed has no why (``reason`` "").

Both are written in one MULTI, and removed in one.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, replace

import redis

from noti.core.keys import Keys
from noti.redis.outage import translate_errors

__all__ = ["REASONS", "Suppressed", "SuppressionList"]

#: What can suppress a target.
REASONS = ("optout", "bounce", "complaint", "unsubscribe")
#: Characters of a vendor's code and words kept.
CODE_MAX, TEXT_MAX = 100, 500


@dataclass(frozen=True, slots=True)
class Suppressed:
    """One suppressed target and why (``reason`` "" when it was suppressed before whys were kept)."""

    channel: str
    target: str
    reason: str = ""
    code: str = ""
    text: str = ""
    record: str = ""
    user: str = ""
    provider: str = ""
    at_ms: int = 0

    def why_json(self) -> str:
        why = asdict(self)
        del why["channel"], why["target"]
        return json.dumps(why, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def of(cls, channel: str, target: str, why: bytes | str | None) -> Suppressed:
        """The entry of ``target`` with its stored why (anything unreadable is left out)."""
        try:
            data = json.loads(why) if why else {}
        except ValueError:
            data = {}
        if not isinstance(data, dict):
            data = {}

        def text(name: str) -> str:
            value = data.get(name)
            return str(value) if isinstance(value, (str, int)) and not isinstance(value, bool) else ""

        at = data.get("at_ms")
        return cls(
            channel,
            target,
            reason=text("reason"),
            code=text("code"),
            text=text("text"),
            record=text("record"),
            user=text("user"),
            provider=text("provider"),
            at_ms=at if isinstance(at, int) and not isinstance(at, bool) else 0,
        )


class SuppressionList:
    """The suppressed targets of every channel in one Redis database."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.redis = client
        self.keys = keys

    def add(self, entry: Suppressed) -> bool:
        """Suppress ``entry.target`` for ``entry.channel``, keeping its first why; whether it
        was not suppressed before.

        Raises:
            StoreUnavailable: Redis cannot be reached.
        """
        return self.add_many([entry])[0]

    def add_many(self, entries: Sequence[Suppressed]) -> list[bool]:
        """:meth:`add` each of ``entries`` in one round trip (one MULTI); per entry, whether
        its target was not suppressed before."""
        if not entries:
            return []
        with translate_errors(self.redis):
            pipe = self.redis.pipeline(transaction=True)
            for entry in entries:
                entry = replace(entry, code=entry.code[:CODE_MAX], text=entry.text[:TEXT_MAX])
                pipe.sadd(self.keys.suppressed(entry.channel), entry.target)
                pipe.hsetnx(self.keys.suppressed_why(entry.channel), entry.target, entry.why_json())
            answers = pipe.execute()
        return [bool(added) for added in answers[::2]]

    def remove(self, channel: str, target: str) -> bool:
        """Lift the suppression of ``target``; whether it was suppressed.

        Raises:
            StoreUnavailable: Redis cannot be reached.
        """
        with translate_errors(self.redis):
            pipe = self.redis.pipeline(transaction=True)
            pipe.srem(self.keys.suppressed(channel), target)
            pipe.hdel(self.keys.suppressed_why(channel), target)
            removed, _ = pipe.execute()
        return bool(removed)

    def contains(self, channel: str, target: str) -> bool:
        with translate_errors(self.redis):
            return bool(self.redis.sismember(self.keys.suppressed(channel), target))

    def get(self, channel: str, target: str) -> Suppressed | None:
        """The entry of ``target``, or None when it is not suppressed."""
        with translate_errors(self.redis):
            pipe = self.redis.pipeline(transaction=False)
            pipe.sismember(self.keys.suppressed(channel), target)
            pipe.hget(self.keys.suppressed_why(channel), target)
            member, why = pipe.execute()
        return Suppressed.of(channel, target, why) if member else None

    def entries(self, channel: str, *, page: int = 500) -> Iterator[Suppressed]:
        """Every suppressed target of ``channel``, with its why (SSCAN: no order, each once
        while the set does not change).

        Raises:
            StoreUnavailable: Redis cannot be reached.
        """
        key, why_key = self.keys.suppressed(channel), self.keys.suppressed_why(channel)
        cursor = 0
        while True:
            with translate_errors(self.redis):
                cursor, found = self.redis.sscan(key, cursor, count=page)
                targets = [_text(t) for t in found]
                whys = self.redis.hmget(why_key, targets) if targets else []
            for target, why in zip(targets, whys, strict=True):
                yield Suppressed.of(channel, target, why)
            if cursor == 0:
                return


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value
