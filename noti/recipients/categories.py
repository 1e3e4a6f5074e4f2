"""Message categories: the kinds of message an operator declares (``security``, ``orders``,
``marketing``), each with the channels it goes to by default and whether a recipient may opt
out of it.

::

    {"description": "Order updates", "channels": {"push": true, "email": true, "sms": false},
     "opt_out": true, "critical": false}

* ``channels``: channel -> on by default; a channel not named is on. A recipient's own
  preference (:mod:`noti.recipients.store`) overrides the default where ``opt_out`` allows.
* ``opt_out`` (default true): recipients may opt out (and back in). When false, their
  preferences for it are refused when set and never read.
* ``critical``: never suppressed, neither by preferences nor by quiet hours (implies
  ``opt_out`` false): a password reset, a fraud alert.

Categories are global (one list for every noti user) and only root members write them.
:data:`GENERAL` is the category of a notice that names none: on every channel, opt-out
allowed, until an operator declares it otherwise.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from noti.core.record import parse_channel
from noti.errors import InvalidInput, NotiError
from noti.inputs import check_text, duration_ms, integer, load_json, shown
from noti.recipients.templates import TEMPLATE_NAME

__all__ = ["GENERAL", "Category", "category_name", "parse_category"]

#: The category of a notice that names none.
GENERAL = "general"
_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")
_KEYS = frozenset({"channels", "opt_out", "critical", "description", "throttle"})
DESCRIPTION_MAX = 500


def _bad(message: str) -> InvalidInput:
    return InvalidInput(message, code="e.cmd.noti.cat.bad")


def category_name(value: object) -> str:
    """``value`` when it is a category name: 1-64 lower-case letters, digits or ``_ . -``.

    Raises:
        InvalidInput: ``e.cmd.noti.cat.badname``.
    """
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise InvalidInput(
            f"category {shown(value)} is not 1-64 lower-case letters, digits or _ . - "
            "starting with a letter or digit",
            code="e.cmd.noti.cat.badname",
        )
    return value


#: What a throttle does with a notification over its limit.
THROTTLE_OVER = ("drop", "delay", "digest")
#: The largest limit a throttle may set.
THROTTLE_LIMIT_MAX = 10_000


@dataclass(frozen=True, slots=True)
class Throttle:
    """At most ``limit`` notifications per recipient and channel in any ``period_ms``; one over
    it is dropped (an invalid record saying so), delayed to the first moment it fits, or put
    into a digest made through ``template`` when the throttle lets one through."""

    limit: int
    period_ms: int
    over: str
    template: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"limit": self.limit, "period": self.period_ms / 1000, "over": self.over}
        if self.template is not None:
            out["template"] = self.template
        return out


@dataclass(frozen=True, slots=True)
class Category:
    """One category, as declared."""

    name: str
    channels: Mapping[str, bool] = field(default_factory=dict)
    opt_out: bool = True
    critical: bool = False
    description: str = ""
    throttle: Throttle | None = None

    def on_by_default(self, channel: str) -> bool:
        return self.channels.get(channel, True)

    @property
    def enforced(self) -> bool:
        """Do recipients' preferences apply to it?"""
        return self.opt_out and not self.critical

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "channels": dict(self.channels),
            "opt_out": self.opt_out,
            "critical": self.critical,
            "description": self.description,
            "throttle": self.throttle.to_dict() if self.throttle is not None else None,
        }

    def to_json(self) -> str:
        out = self.to_dict()
        del out["name"]
        return json.dumps(out, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, name: str, text: str | bytes | None) -> Category:
        """A stored category, or the implicit :data:`GENERAL` when ``text`` is None."""
        if text is None:
            return cls(name)
        data = json.loads(text)
        return cls(
            name=name,
            channels=data.get("channels") or {},
            opt_out=bool(data.get("opt_out", True)),
            critical=bool(data.get("critical", False)),
            description=data.get("description") or "",
            throttle=_throttle(data.get("throttle")),
        )


def _flag(value: object, what: str) -> bool:
    if not isinstance(value, bool):
        raise _bad(f"{what} is true or false, got {shown(value)}")
    return value


def parse_category(name: object, value: object) -> Category:
    """A category declaration from what an operator gave (a mapping or its JSON text).

    Raises:
        InvalidInput: ``e.cmd.noti.cat.badname``, ``e.cmd.noti.cat.bad``.
    """
    clean_name = category_name(name)
    if isinstance(value, (str, bytes)):
        if len(value) > 16 * 1024:
            raise _bad("a category is at most 16 KiB of JSON")
        value = load_json(value, what="the category", code="e.cmd.noti.cat.bad")
    if value is None:
        value = {}
    if not isinstance(value, Mapping):
        raise _bad(f"a category is an object, got {shown(value)}")
    unknown = sorted(str(k) for k in value if k not in _KEYS)
    if unknown:
        raise _bad(f"unknown category keys: {', '.join(shown(k) for k in unknown[:5])}")
    channels: dict[str, bool] = {}
    given = value.get("channels") or {}
    if not isinstance(given, Mapping):
        raise _bad(f"channels is an object of channel -> true/false, got {shown(given)}")
    for key, on in given.items():
        try:
            channel = parse_channel(key) if isinstance(key, str) else None
        except NotiError:
            channel = None
        if channel is None:
            raise _bad(f"{shown(key)} is not a channel (see `noti channels`)")
        channels[channel.value] = _flag(on, f"channels.{channel.value}")
    critical = _flag(value.get("critical", False), "critical")
    opt_out = _flag(value.get("opt_out", not critical), "opt_out")
    if critical and opt_out:
        raise _bad("a critical category cannot allow opting out (opt_out must be false)")
    description = value.get("description") or ""
    if description:
        description = check_text(
            description, what="the description", code="e.cmd.noti.cat.bad", max_len=DESCRIPTION_MAX
        )
    throttle = _throttle(value.get("throttle"))
    if throttle is not None and critical:
        raise _bad("a critical category is never throttled (give no throttle)")
    return Category(clean_name, channels, opt_out, critical, description, throttle)


def _throttle(value: object) -> Throttle | None:
    """A throttle: ``{"limit": 5, "period": "1h", "over": "drop"}`` (``period`` seconds or
    text, 1 s to 7 days; ``over`` drop or delay), or None.

    Raises:
        InvalidInput: ``e.cmd.noti.cat.bad``.
    """
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise _bad(f"throttle is an object of limit, period and over, got {shown(value)}")
    unknown = sorted(str(k) for k in value if k not in ("limit", "period", "over", "template"))
    if unknown:
        raise _bad(f"unknown throttle keys: {', '.join(shown(k) for k in unknown[:5])}")
    limit = integer(
        value.get("limit"),
        what="throttle.limit",
        code="e.cmd.noti.cat.bad",
        minimum=1,
        maximum=THROTTLE_LIMIT_MAX,
    )
    period = duration_ms(value.get("period"), what="throttle.period", code="e.cmd.noti.cat.bad")
    over = value.get("over", "drop")
    if over not in THROTTLE_OVER:
        raise _bad(f"throttle.over is drop, delay or digest, got {shown(over)}")
    template = value.get("template")
    if (over == "digest") != (template is not None):
        raise _bad("throttle.template names the digest's template: given with over digest, and only then")
    if template is not None and (not isinstance(template, str) or not TEMPLATE_NAME.fullmatch(template)):
        raise _bad(f"throttle.template is a template name, got {shown(template)}")
    return Throttle(limit, period, str(over), template)
