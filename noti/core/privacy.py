"""Masking personal data (targets, message bodies) before it reaches logs or Celery's views.

Phone numbers and the other targets are personal data: logs, worker events, Flower and
``inspect`` show them masked. Message bodies are shown as their length only. Used by the
sender's logs and by the Celery layer's ``argsrepr`` / ``kwargsrepr``; it imports nothing of
noti, so every layer may use it.
"""

from __future__ import annotations

import re

__all__ = ["UNWORDED", "mask_target", "unworded"]

_PHONE = re.compile(r"^\+?[0-9]{7,15}$")
#: Digits of a phone number always hidden, and those always shown at its end.
_PHONE_HIDDEN_MIN, _PHONE_SHOWN_END = 4, 4
#: Most characters shown at the start of a phone number (``+86139``: country and carrier).
_PHONE_SHOWN_START_MAX = 6


def mask_target(target: str) -> str:
    """A target fit for logs and task views: personal data (phone, openid, address) mostly
    hidden. A phone number keeps its country and carrier prefix and its last four digits
    (``+8613912345678`` → ``+86139****5678``, ``13912345678`` → ``139****5678``); any other
    target keeps three characters at the start and two at the end (one and one when it is
    shorter than ten), and at least three are hidden."""
    if _PHONE.match(target):
        hidden = max(_PHONE_HIDDEN_MIN, len(target) - _PHONE_SHOWN_START_MAX - _PHONE_SHOWN_END)
        start = len(target) - hidden - _PHONE_SHOWN_END
        if start >= 1:
            return target[:start] + "*" * hidden + target[-_PHONE_SHOWN_END:]
    if len(target) <= 4:
        return "*" * len(target)
    start, end = (3, 2) if len(target) >= 10 else (1, 1)
    return target[:start] + "*" * max(3, len(target) - start - end) + target[-end:]


#: What is kept of a text written for a record after its recipient's erasure, in place of the
#: words (a vendor's text may quote the erased address); ``noti/lua/timeline.lua`` writes the same.
UNWORDED = "not kept: the recipient was erased"
#: A noti error code (``e.<family>.<…>``) at the start of a text: a vendor's "<device token>: …"
#: is no code, and keeps nothing.
_CODE = re.compile(r"^(e\.[A-Za-z0-9_-]+\.[A-Za-z0-9._-]+):")


def unworded(text: str) -> str:
    """``text`` without its words: a noti error's code kept (``e.noti.send.invalid: …`` ->
    ``e.noti.send.invalid: not kept: the recipient was erased``), nothing else; "" stays ""."""
    if not text:
        return text
    code = _CODE.match(text)
    return f"{code.group(1)}: {UNWORDED}" if code else UNWORDED
