"""A notice: one ``notify(recipient=…)`` call and what became of it per channel, as
``noti:notice:<id>`` keeps it (:mod:`noti.recipients.notices` makes them)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from noti.inputs import could_be_id
from noti.recipients.store import NOTICE_MARK

__all__ = ["Notice", "NoticeEntry", "is_notice_id"]


@dataclass(frozen=True, slots=True)
class NoticeEntry:
    """One channel of a notice: ``queued``, ``held`` (due at the end of quiet hours),
    ``scheduled`` (due at the call's delay or eta), ``throttled`` (due when the category's
    throttle lets it through), ``digested`` (over the throttle, into its digest: ``record`` is
    the digest window, the notice it will make), ``fallback``, ``suppressed`` (``reason``:
    ``optout``, ``suppressed`` or ``throttled``), ``off`` (the category is off on it for them),
    ``unused`` (a chain had two already), ``noaddress``, ``notemplate``; the record made, if
    any."""

    channel: str
    state: str
    record: str | None = None
    reason: str = ""
    locale: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "channel": self.channel,
            "state": self.state,
            "record": self.record,
            "reason": self.reason or None,
            "locale": self.locale,
        }


@dataclass(frozen=True, slots=True)
class Notice:
    """One ``notify(recipient=…)`` call and what became of it."""

    id: str
    owner: str
    recipient: str
    template: str
    version: int
    category: str
    mode: str
    created_ms: int
    #: When quiet hours end, if they held the notice (0: not held).
    held_until_ms: int = 0
    entries: tuple[NoticeEntry, ...] = ()
    #: True when an idempotency key named this notice already (nothing new was made).
    repeated: bool = False

    @property
    def records(self) -> list[str]:
        """The records made (not the digest windows of ``digested`` channels)."""
        return [e.record for e in self.entries if e.record and e.state != "digested"]

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "owner": self.owner,
            "recipient": self.recipient,
            "template": self.template,
            "version": self.version,
            "category": self.category,
            "mode": self.mode,
            "created_ms": self.created_ms,
            "held_until_ms": self.held_until_ms or None,
            "channels": [e.to_dict() for e in self.entries],
            "repeated": self.repeated,
        }

    @classmethod
    def from_hash(cls, notice_id: str, data: Mapping[str, str], *, repeated: bool = False) -> Notice:
        """A notice from its hash: ``doc`` (what the call was: JSON) and ``ch:<channel>`` (what
        ``notify.lua`` made of each channel: ``<state> <record id>``)."""
        doc = json.loads(data.get("doc", "{}"))
        skipped = doc.get("skipped", {})
        locales = doc.get("locales", {})
        entries = []
        for channel in doc.get("order", []):
            if channel in skipped:
                entries.append(NoticeEntry(channel, skipped[channel]))
                continue
            state, _, record = data.get(f"ch:{channel}", "").partition(" ")
            reason = ""
            if state.startswith("suppressed:"):
                state, reason = "suppressed", state.split(":", 1)[1]
            entries.append(NoticeEntry(channel, state, record or None, reason, locales.get(channel)))
        return cls(
            id=notice_id,
            owner=doc.get("owner", ""),
            recipient=doc.get("rcpt", ""),
            template=doc.get("tmpl", ""),
            version=int(doc.get("ver", 0)),
            category=doc.get("cat", ""),
            mode=doc.get("mode", ""),
            created_ms=int(doc.get("ct", 0)),
            held_until_ms=int(doc.get("held", 0)),
            entries=tuple(entries),
            repeated=repeated,
        )


def is_notice_id(value: object) -> bool:
    """Whether ``value`` could be a notice id (asked before Redis is: a lone surrogate cannot
    even be sent to it)."""
    return could_be_id(value, 40) and isinstance(value, str) and len(value) >= 2 and value[0] == NOTICE_MARK
