"""Fallbacks: "if this notification is not delivered within N seconds, send that one".

A notification asking for a fallback (``fallback={"type": "email", "to": …, "subject": …,
"text": …, "after_s": 120}`` of :func:`noti.notify`) is stored together with its fallback,
a record of its own that waits in the delayed set until the deadline (``after_s``, else the
channel's ``fallback_after_s``). So the fallback is sent by the ordinary machinery (once,
retried, dead-lettered) and:

* a ``delivered`` receipt of the first record before the deadline cancels it (status -1,
  ``e.noti.fallback.unneeded``), in the script that applies the receipt;
* an ``undelivered`` receipt makes it due at once;
* no receipt (or only ``accepted`` / ``unknown``) lets it fire at the deadline.

A fallback a sender already holds when the receipt comes is not cancelled (a send in
progress cannot be undone): the receipt and the deadline crossed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from noti.errors import InvalidInput
from noti.inputs import finite_number, shown

__all__ = ["FallbackSpec", "parse_fallback"]

#: The keys of a fallback besides its channel fields.
_OWN_KEYS = frozenset({"type", "to", "after_s", "lv", "provider"})
#: The longest wait for a receipt before a fallback (30 days).
AFTER_MAX_S = 30 * 86400


@dataclass(frozen=True, slots=True)
class FallbackSpec:
    """What to send instead, and when."""

    type: str
    target: str
    fields: Mapping[str, Any]
    after_s: float | None = None
    lv: object = None
    provider: str | None = None


def _bad(message: str) -> InvalidInput:
    return InvalidInput(message, code="e.cmd.noti.add.badfallback")


def parse_fallback(value: object) -> FallbackSpec:
    """A fallback as a caller gives it (a mapping), checked for shape; its channel fields are
    checked when the record is built.

    Raises:
        InvalidInput: ``e.cmd.noti.add.badfallback``.
    """
    if isinstance(value, FallbackSpec):
        return value
    if not isinstance(value, Mapping):
        raise _bad(f"a fallback is an object with type, to and its fields, got {shown(value)}")
    if "fallback" in value:
        raise _bad("a fallback cannot have a fallback of its own")
    kind, target = value.get("type"), value.get("to")
    if not isinstance(kind, str) or not isinstance(target, str):
        raise _bad("a fallback needs a type and a to")
    after = value.get("after_s")
    if after is not None:
        after = finite_number(
            after, what="fallback after_s", code="e.cmd.noti.add.badfallback", above=0, maximum=AFTER_MAX_S
        )
    provider = value.get("provider")
    if provider is not None and not isinstance(provider, str):
        raise _bad("a fallback's provider is a name")
    fields = {k: v for k, v in value.items() if k not in _OWN_KEYS}
    return FallbackSpec(kind, target, fields, after, value.get("lv"), provider)
