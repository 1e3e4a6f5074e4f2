"""Quiet hours: when a recipient must not be woken, on their own clock.

A profile holds a daily window of local wall-clock time (``"22:00-07:00"``; seconds may be
given, ``"22:00:00-06:59:30"``; stored in that form: ``str(QuietHours)``) and an IANA time
zone (``"Asia/Shanghai"``). A notification due inside the window is held and sent when it
ends: :func:`held_until_ms` says until when.

**The rule.** A window is a span of instants, not a set of clock readings: it begins when the
recipient's clock first reaches ``start`` on a day and ends when it first reaches ``end`` that
day, or the next day when ``start > end`` (a window spanning midnight); start inclusive, end
exclusive. On ordinary days that is ``start <= t < end`` (or ``t >= start or t < end`` across
midnight) for the local time ``t``. Where daylight saving moves the clock:

* a time that does not exist (a spring-forward gap) stands for the first instant after the
  gap: in New York on 2026-03-08 an end of 02:30 is 03:00 EDT (07:00 UTC), and a window
  starting at 02:15 starts at 03:00;
* a time the clock shows twice (a fall-back) stands for its first occurrence: in New York on
  2026-11-01 a window ending at 01:30 ends at 01:30 EDT and does not begin again when the
  clock shows 01:00 EST an hour later; one starting at 01:30 runs on through the repeated hour;
* a window lying wholly inside a gap (02:10-02:40 on a day the clock jumps from 02:00 to
  03:00) is empty that day; a window whose end and next start fall in the same gap is held
  through both (its end is the next one's).

Time zones are names from the tz database zoneinfo finds (the system's, or the ``tzdata``
package's where the system has none, as on Windows). A name is checked as text before any
file is opened: no paths, ``..``, empty parts or control characters, nor ``localtime`` (the
server's zone, not a recipient's).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from noti.errors import InvalidConfig, InvalidInput
from noti.inputs import bad_character, shown

__all__ = [
    "QUIET_DEFAULT",
    "QUIET_OFF",
    "TIMEZONE_MAX_LEN",
    "QuietHours",
    "QuietPolicy",
    "held_until_ms",
    "next_at_ms",
    "parse_quiet",
    "parse_timezone",
]

#: A profile's ``quiet_hours`` that means the operator's (``NOTI_QUIET_HOURS``), or none.
QUIET_DEFAULT, QUIET_OFF = "default", "off"
#: Longest time zone name accepted (the tz database's longest is 32 characters).
TIMEZONE_MAX_LEN = 64

_BAD_QUIET = "e.cmd.noti.rcpt.badquiet"
_BAD_TZ = "e.cmd.noti.rcpt.badtz"
_CLOCK = "([01][0-9]|2[0-3]):([0-5][0-9])(?::([0-5][0-9]))?"
#: ``HH:MM`` or ``HH:MM:SS``, 24-hour clock, ASCII digits only (seconds make a short window:
#: a demo, a test of the hold).
_TIME = re.compile(_CLOCK)
#: ``HH:MM-HH:MM``.
_WINDOW = re.compile(f"{_CLOCK}-{_CLOCK}")
#: What a tz database name looks like: parts of letters, digits, ``_ + -``, each starting with
#: a letter, joined by single slashes; so no absolute path, ``.``/``..``, backslash or space.
_ZONE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_+-]*(?:/[A-Za-z][A-Za-z0-9_+-]*)*")
#: Files some systems keep among the zones that are not a recipient's zone.
_NOT_ZONES = frozenset({"localtime", "posixrules"})
_DAY = timedelta(days=1)


@dataclass(frozen=True, slots=True)
class QuietHours:
    """A daily window of local wall-clock time, in whole minutes; ``start > end`` spans
    midnight. Built by :func:`parse_quiet`; ``str()`` gives the stored form ``"22:00-07:00"``.

    Raises:
        InvalidInput: ``e.cmd.noti.rcpt.badquiet`` when a bound is not a naive time of whole
            minutes, or the window is empty (``start == end``).
    """

    start: time
    end: time

    def __post_init__(self) -> None:
        for name, value in (("start", self.start), ("end", self.end)):
            if not isinstance(value, time) or value.tzinfo is not None or value.microsecond:
                raise InvalidInput(
                    f"quiet hours' {name} must be a local time in whole seconds, got {shown(value)}",
                    code=_BAD_QUIET,
                )
        if self.start == self.end:
            raise InvalidInput(
                f"quiet hours must not start and end at the same time ({self.start:%H:%M})", code=_BAD_QUIET
            )

    @property
    def spans_midnight(self) -> bool:
        """Whether the window ends on the day after it starts."""
        return self.start > self.end

    def __str__(self) -> str:
        shape = "%H:%M:%S" if self.start.second or self.end.second else "%H:%M"
        return f"{self.start.strftime(shape)}-{self.end.strftime(shape)}"


def parse_quiet(value: object) -> QuietHours | None:
    """Quiet hours from a profile: ``"HH:MM-HH:MM"`` (24-hour clock), a mapping
    ``{"start": "HH:MM", "end": "HH:MM"}`` or a :class:`QuietHours`; None for none
    (``None``, ``""``, ``"off"`` in any case).

    Raises:
        InvalidInput: ``e.cmd.noti.rcpt.badquiet``: another form, an hour over 23 or a minute
            over 59, or ``start == end``.
    """
    if isinstance(value, QuietHours):
        return value
    if value is None:
        return None
    if isinstance(value, str):
        if value == "" or (len(value) == 3 and value.lower() == "off"):
            return None
        found = _WINDOW.fullmatch(value)
        if found is None:
            raise InvalidInput(
                f"quiet hours must be HH:MM-HH:MM on a 24-hour clock (e.g. 22:00-07:00) or off, "
                f"got {shown(value)}",
                code=_BAD_QUIET,
            )
        start_h, start_m, start_s, end_h, end_m, end_s = (int(g or 0) for g in found.groups())
        return QuietHours(time(start_h, start_m, start_s), time(end_h, end_m, end_s))
    if isinstance(value, Mapping):
        if set(value) != {"start", "end"}:
            raise InvalidInput(
                f"quiet hours as an object must have exactly the keys start and end, "
                f"got {shown(list(value))}",
                code=_BAD_QUIET,
            )
        return QuietHours(_clock(value["start"], "start"), _clock(value["end"], "end"))
    raise InvalidInput(
        f"quiet hours must be text like 22:00-07:00, an object with start and end, or off; "
        f"got {shown(value)}",
        code=_BAD_QUIET,
    )


def _clock(value: object, name: str) -> time:
    found = _TIME.fullmatch(value) if isinstance(value, str) else None
    if found is None:
        raise InvalidInput(
            f"quiet hours' {name} must be HH:MM on a 24-hour clock, got {shown(value)}", code=_BAD_QUIET
        )
    return time(int(found.group(1)), int(found.group(2)), int(found.group(3) or 0))


def parse_timezone(value: object) -> str:
    """The tz database name ``value`` stands for, spelt as the database spells it
    (``"asia/shanghai"`` → ``"Asia/Shanghai"``; ``"UTC"`` is one). Aliases (``US/Eastern``)
    are names of their own and kept. The name is checked as text, then looked up in the list
    of zones, before zoneinfo opens anything: zoneinfo refuses ``..`` and absolute paths itself
    but opens any other file under its folders (``right/UTC``, ``localtime``), and raises
    errors of its own.

    Raises:
        InvalidInput: ``e.cmd.noti.rcpt.badtz``: not a string, empty, over
            :data:`TIMEZONE_MAX_LEN` characters, a path or control characters, or a name the
            tz database does not have.
    """
    if not isinstance(value, str) or not value:
        raise InvalidInput(
            f"a time zone must be an IANA name such as Asia/Shanghai, got {shown(value)}", code=_BAD_TZ
        )
    if len(value) > TIMEZONE_MAX_LEN:
        raise InvalidInput(
            f"a time zone name is {len(value)} characters long; the limit is {TIMEZONE_MAX_LEN}", code=_BAD_TZ
        )
    problem = bad_character(value, name=True)
    if problem is not None:
        raise InvalidInput(f"a time zone name must not contain {problem}", code=_BAD_TZ)
    if _ZONE_NAME.fullmatch(value) is None:
        raise InvalidInput(
            f"a time zone is an IANA name (letters, digits, _ + - in parts joined by single slashes, "
            f"no path), got {shown(value)}",
            code=_BAD_TZ,
        )
    known = _zone_names()
    key = known.get(value.lower())
    if key is None:
        where = "the tz database" if known else "any tz database (install the tzdata package)"
        raise InvalidInput(f"unknown time zone {value!r}: not in {where}", code=_BAD_TZ)
    try:
        ZoneInfo(key)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise InvalidInput(f"time zone {key!r} cannot be loaded: {exc}", code=_BAD_TZ) from None
    return key


@functools.cache
def _zone_names() -> dict[str, str]:
    """Lower-cased name -> the database's spelling, of every zone zoneinfo can find (read once
    a process: listing the folder takes some 20 ms)."""
    return {name.lower(): name for name in available_timezones() if name not in _NOT_ZONES}


def held_until_ms(quiet: QuietHours, timezone: str, now_ms: int) -> int | None:
    """None when ``now_ms`` (epoch ms) is outside the quiet hours on the recipient's clock in
    ``timezone``, else the epoch ms at which they end (the moment to send).

    The window is the span from the first instant the local clock reaches ``start`` to the
    first instant it reaches ``end``, start inclusive, end exclusive; so an end in a
    spring-forward gap is the first instant after the gap, an end the clock shows twice is its
    first occurrence, and a start in a gap starts the window at the gap's end (the module's
    docstring has the whole rule).

    Raises:
        InvalidInput: ``e.cmd.noti.rcpt.badtz`` when ``timezone`` is not a known zone.
    """
    zone = ZoneInfo(parse_timezone(timezone))
    today = datetime.fromtimestamp(now_ms // 1000, zone).date()
    # the window that holds now started yesterday (spanning midnight), today, or, where the
    # clock falls back across midnight, on a date the clock has already shown: tomorrow
    for day in (today - _DAY, today, today + _DAY):
        start_ms, end_ms = _window(quiet, day, zone)
        if start_ms <= now_ms < end_ms:
            following = _window(quiet, day + _DAY, zone)
            while following[0] <= end_ms < following[1]:  # its end and the next start in one gap
                end_ms = following[1]
                day += _DAY
                following = _window(quiet, day + _DAY, zone)
            return end_ms
    return None


class QuietPolicy:
    """The operator's quiet hours, timezone and bypass level (read once: settings never change
    under a runtime), and whether they hold a notice."""

    def __init__(self, quiet_hours: str | None, timezone: str, bypass_level: int) -> None:
        self._given = (quiet_hours, timezone)
        self.bypass_level = bypass_level
        self._checked: tuple[QuietHours | None, str] | None = None

    def default(self) -> tuple[QuietHours | None, str]:
        """The operator's quiet hours (None: none) and timezone.

        Raises:
            InvalidConfig: ``NOTI_QUIET_HOURS`` or ``NOTI_RECIPIENT_TIMEZONE`` is bad.
        """
        if self._checked is None:
            quiet_hours, timezone = self._given
            try:
                self._checked = (parse_quiet(quiet_hours) if quiet_hours else None, parse_timezone(timezone))
            except InvalidInput as exc:
                raise InvalidConfig(f"NOTI_QUIET_HOURS / NOTI_RECIPIENT_TIMEZONE: {exc.message}") from None
        return self._checked

    def held_until(
        self, quiet_hours: str, timezone: str | None, *, critical: bool, level: int, at_ms: int
    ) -> int:
        """When a recipient's quiet hours (``quiet_hours`` of their profile, in ``timezone``)
        end if ``at_ms`` falls inside them and nothing lets the notice through (a critical
        category, a level at or above the bypass level); else 0."""
        if critical or level >= self.bypass_level or quiet_hours == QUIET_OFF:
            return 0
        default_window, default_zone = self.default()
        window = default_window if quiet_hours == QUIET_DEFAULT else parse_quiet(quiet_hours)
        if window is None:
            return 0
        return held_until_ms(window, timezone or default_zone, at_ms) or 0


def next_at_ms(at: time, timezone: str, now_ms: int) -> int:
    """Epoch ms of the first instant after ``now_ms`` at which the clock in ``timezone`` reads
    ``at`` (a time the clock skips that day: the first instant after the gap; one it reads
    twice: the first reading), for windows due at a time of day (a daily digest)."""
    zone = ZoneInfo(timezone)
    today = datetime.fromtimestamp(now_ms / 1000, zone).date()
    for day in (today - _DAY, today, today + _DAY, today + 2 * _DAY):
        instant = _instant_ms(day, at, zone)
        if instant > now_ms:
            return instant
    raise AssertionError("a time of day comes within two days")


def _window(quiet: QuietHours, day: date, zone: ZoneInfo) -> tuple[int, int]:
    """Epoch ms of the start and the end of the window that starts on ``day`` (local date)."""
    end_day = day + _DAY if quiet.spans_midnight else day
    return _instant_ms(day, quiet.start, zone), _instant_ms(end_day, quiet.end, zone)


def _instant_ms(day: date, at: time, zone: ZoneInfo) -> int:
    """Epoch ms of the first instant the clock in ``zone`` reaches ``at`` on ``day``: the wall
    time's first occurrence, or the first instant after the gap it falls in."""
    wall = datetime(day.year, day.month, day.day, at.hour, at.minute, at.second)
    seconds = int(wall.replace(tzinfo=zone).timestamp())  # fold=0: the first of two readings
    if _wall(seconds, zone) != wall:
        seconds = _after_gap(wall, zone)
    return seconds * 1000


def _wall(seconds: int, zone: ZoneInfo) -> datetime:
    """The naive local wall time at epoch ``seconds`` (comparisons of naive times ignore fold)."""
    return datetime.fromtimestamp(seconds, zone).replace(tzinfo=None)


def _after_gap(wall: datetime, zone: ZoneInfo) -> int:
    """Epoch seconds of the first instant whose wall time is past ``wall``, a time the clock
    skips. zoneinfo reads a skipped time with the offsets from either side of the gap: the
    reading with the later offset is an instant before the gap, the other one after it; the
    transition lies between them (an hour apart, 30 minutes on Lord Howe Island) and is found
    by bisection, offsets being whole seconds."""
    before = int(wall.replace(tzinfo=zone, fold=1).timestamp())
    after = int(wall.replace(tzinfo=zone, fold=0).timestamp())
    before, after = min(before, after), max(before, after)
    while after - before > 1:
        middle = (before + after) // 2
        if _wall(middle, zone) < wall:
            before = middle
        else:
            after = middle
    return after
