"""Quiet hours (noti.recipients.quiet): parsing a window and a time zone, and "held until"
on the recipient's clock, across daylight-saving changes (2026 dates). Pure: no Redis.

The transitions used below (checked against the tz database by
``test_the_transitions_the_tables_rely_on``):

- America/New_York: 2026-03-08 02:00 EST -> 03:00 EDT (07:00 UTC); 2026-11-01 02:00 EDT ->
  01:00 EST (06:00 UTC), 01:00-01:59 shown twice.
- Europe/Berlin: 2026-03-29 02:00 CET -> 03:00 CEST (01:00 UTC); 2026-10-25 03:00 CEST ->
  02:00 CET (01:00 UTC), 02:00-02:59 shown twice.
- Australia/Lord_Howe (half-hour DST): 2026-04-05 02:00 +11 -> 01:30 +10:30 (2026-04-04
  15:00 UTC); 2026-10-04 02:00 +10:30 -> 02:30 +11 (2026-10-03 15:30 UTC).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo, available_timezones

import pytest

from noti.errors import InvalidInput
from noti.recipients import quiet as quiet_module
from noti.recipients.quiet import TIMEZONE_MAX_LEN, QuietHours, held_until_ms, parse_quiet, parse_timezone

BAD_QUIET = "e.cmd.noti.rcpt.badquiet"
BAD_TZ = "e.cmd.noti.rcpt.badtz"
NY, BERLIN, SHANGHAI, LORD_HOWE = "America/New_York", "Europe/Berlin", "Asia/Shanghai", "Australia/Lord_Howe"
HAS_LORD_HOWE = LORD_HOWE in available_timezones()
needs_lord_howe = pytest.mark.skipif(
    not HAS_LORD_HOWE, reason="the tz database here has no Australia/Lord_Howe"
)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def ms(text: str) -> int:
    """Epoch ms of an ISO 8601 time written with its offset."""
    moment = datetime.fromisoformat(text)
    assert moment.tzinfo is not None, text
    return (moment - EPOCH) // timedelta(milliseconds=1)


def shown(epoch_ms: int | None, zone: str = "UTC") -> str | None:
    """An epoch ms as a local ISO time with its offset (for readable failures)."""
    if epoch_ms is None:
        return None
    return datetime.fromtimestamp(epoch_ms / 1000, ZoneInfo(zone)).isoformat(timespec="milliseconds")


def case_id(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:30]}...({len(text)} chars)"


# --- parse_quiet ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "start", "end", "stored"),
    [
        ("22:00-07:00", time(22), time(7), "22:00-07:00"),
        ("09:30-17:45", time(9, 30), time(17, 45), "09:30-17:45"),
        ("00:00-23:59", time(0), time(23, 59), "00:00-23:59"),
        ("23:59-00:00", time(23, 59), time(0), "23:59-00:00"),
        ("20:00-00:00", time(20), time(0), "20:00-00:00"),
        ({"start": "22:00", "end": "07:00"}, time(22), time(7), "22:00-07:00"),
        ({"end": "06:05", "start": "01:00"}, time(1), time(6, 5), "01:00-06:05"),
    ],
)
def test_a_window_is_parsed_and_kept_in_its_stored_form(
    value: object, start: time, end: time, stored: str
) -> None:
    quiet = parse_quiet(value)
    assert quiet == QuietHours(start, end)
    assert str(quiet) == stored
    assert parse_quiet(stored) == quiet  # the stored form reads back the same
    assert quiet.spans_midnight is (start > end)


@pytest.mark.parametrize("value", [None, "", "off", "OFF", "Off"])
def test_no_quiet_hours(value: object) -> None:
    assert parse_quiet(value) is None


def test_quiet_hours_pass_through_and_are_values() -> None:
    quiet = QuietHours(time(22), time(7))
    assert parse_quiet(quiet) is quiet
    assert {quiet, QuietHours(time(22), time(7))} == {quiet}
    with pytest.raises(AttributeError):
        quiet.start = time(21)  # type: ignore[misc]


@pytest.mark.parametrize(
    "value",
    [
        "22:00-22:00",  # empty window
        "00:00-00:00",
        {"start": "07:00", "end": "07:00"},
        "24:00-07:00",
        "22:00-24:00",
        "22:60-07:00",
        "22:00-07:60",
        "99:99-00:00",
        "7:00-08:00",
        "22:00-7:00",
        "22:0-07:00",
        "22:00 - 07:00",
        " 22:00-07:00",
        "22:00-07:00 ",
        "22:00-07:00\n",
        "22:00\x00-07:00",
        "22:00\u201307:00",  # en dash
        "\uff12\uff12:00-07:00",  # full-width digits
        "\u0662\u0662:00-07:00",  # Arabic-Indic digits
        "22.00-07.00",
        "2200-0700",
        "22:00",
        "22:00-",
        "-07:00",
        "22:00-07:00-08:00",
        "22:00:60-07:00",
        "22:00:5-07:00",
        "10pm-7am",
        "on",
        "none",
        "offf",
        " off",
        "off\n",
        "o",
        "22:00-07:00" * 1000,
        "\ud800",
        b"22:00-07:00",
        2200,
        22.5,
        True,
        False,
        0,
        ["22:00", "07:00"],
        ("22:00", "07:00"),
        time(22),
        {},
        {"start": "22:00"},
        {"end": "07:00"},
        {"start": "22:00", "end": "07:00", "timezone": "UTC"},
        {"from": "22:00", "to": "07:00"},
        {"start": 22, "end": 7},
        {"start": "22:00", "end": None},
        {"start": "22:00", "end": "7:00"},
        {"start": "25:00", "end": "07:00"},
        {"start": "22:00-07:00", "end": "07:00"},
        {"start": "off", "end": "off"},
        {"start": time(22), "end": time(7)},
        ...,
    ],
    ids=case_id,
)
def test_a_bad_window_is_refused_with_its_code(value: object) -> None:
    with pytest.raises(InvalidInput) as refused:
        parse_quiet(value)
    assert refused.value.code == BAD_QUIET
    assert "quiet hours" in refused.value.message


@pytest.mark.parametrize(
    ("text", "start", "end"),
    [
        ("22:00:30-06:59:59", time(22, 0, 30), time(6, 59, 59)),
        ("22:00:00-07:00:00", time(22), time(7)),
    ],
)
def test_seconds_may_be_given_for_short_windows(text: str, start: time, end: time) -> None:
    quiet = parse_quiet(text)
    assert quiet == QuietHours(start, end)
    assert parse_quiet(str(quiet)) == quiet


def test_a_window_of_seconds_ends_on_the_second() -> None:
    quiet = parse_quiet("12:00:00-12:00:10")
    assert quiet is not None
    noon = datetime(2026, 6, 1, 12, 0, 5, tzinfo=UTC)
    ms = int(noon.timestamp() * 1000)
    assert held_until_ms(quiet, "UTC", ms) == ms + 5000
    assert held_until_ms(quiet, "UTC", ms + 5000) is None


@pytest.mark.parametrize(
    ("start", "end", "says"),
    [
        (time(1), time(1), "same time"),
        (time(1), time(2, 0, 0, 1), "whole seconds"),
        (time(1, tzinfo=UTC), time(2), "local time"),
        ("22:00", time(7), "local time"),
        (None, time(7), "local time"),
    ],
)
def test_quiet_hours_built_directly_are_checked_too(start: Any, end: Any, says: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        QuietHours(start, end)
    assert refused.value.code == BAD_QUIET and says in refused.value.message


# --- parse_timezone ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "key"),
    [
        ("UTC", "UTC"),
        ("utc", "UTC"),
        ("Asia/Shanghai", "Asia/Shanghai"),
        ("asia/shanghai", "Asia/Shanghai"),
        ("AMERICA/NEW_YORK", "America/New_York"),
        ("Etc/GMT+5", "Etc/GMT+5"),
        ("Etc/GMT-14", "Etc/GMT-14"),
        ("America/Argentina/Buenos_Aires", "America/Argentina/Buenos_Aires"),
        ("America/Port-au-Prince", "America/Port-au-Prince"),
        ("US/Eastern", "US/Eastern"),  # an alias is a name of its own
    ],
)
def test_a_time_zone_is_given_its_database_spelling(value: str, key: str) -> None:
    assert parse_timezone(value) == key
    assert ZoneInfo(key).key == key


def test_every_zone_of_the_database_is_accepted_as_it_is_spelt() -> None:
    names = available_timezones() - {"localtime", "posixrules"}
    assert len(names) > 300
    assert {name for name in names if parse_timezone(name) != name} == set()
    assert all(len(name) <= TIMEZONE_MAX_LEN for name in names)


BAD_ZONES: list[object] = [
    None,
    8,
    8.0,
    True,
    b"UTC",
    ["UTC"],
    {"zone": "UTC"},
    ZoneInfo("UTC"),
    "",
    " ",
    "A" * (TIMEZONE_MAX_LEN + 1),
    "America/" + "x" * 60,
    "../etc/passwd",
    "../../../../../../etc/passwd",
    "..",
    ".",
    "./UTC",
    "America/../UTC",
    "America/./New_York",
    "/etc/localtime",
    "/usr/share/zoneinfo/UTC",
    "/UTC",
    "America//New_York",
    "America/New_York/",
    "America\\New_York",
    "C:\\Windows\\zoneinfo",
    "~/UTC",
    "file:UTC",
    "UTC\x00",
    "\x00",
    "UTC\n",
    "Asia/Shang\x07hai",
    "Asia/Shanghai\u2028",
    "\ud800",
    " UTC",
    "UTC ",
    "Asia/ Shanghai",
    "\uff21sia/Shanghai",  # full-width A
    "localtime",
    "posixrules",
    "right/UTC",
    "posix/UTC",
    "zone.tab",
    "tzdata.zi",
    "leapseconds",
    "America",
    "Asia",
    "Mars/Olympus_Mons",
    "Asia/Shanghai2",
    "+08:00",
    "GMT+8",
    "UTC+8",
    "-05",
    "_",
]


@pytest.mark.parametrize("value", BAD_ZONES, ids=case_id)
def test_a_bad_time_zone_is_refused_before_zoneinfo_opens_anything(
    value: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[object] = []
    monkeypatch.setattr(quiet_module, "ZoneInfo", lambda key: opened.append(key))
    with pytest.raises(InvalidInput) as refused:
        parse_timezone(value)
    assert refused.value.code == BAD_TZ
    assert "time zone" in refused.value.message
    assert opened == []


@pytest.mark.parametrize(
    "value", ["../etc/passwd", "/etc/localtime", "UTC\x00", "Etc/" + "A" * 61], ids=case_id
)
def test_a_path_is_refused_even_where_the_database_would_list_it(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the name is checked as text first, whatever the folder zoneinfo reads holds
    monkeypatch.setattr(quiet_module, "_zone_names", lambda: {value.lower(): value})
    monkeypatch.setattr(quiet_module, "ZoneInfo", lambda key: pytest.fail(f"ZoneInfo({key!r}) called"))
    with pytest.raises(InvalidInput) as refused:
        parse_timezone(value)
    assert refused.value.code == BAD_TZ


def test_a_zone_the_database_lists_but_cannot_load_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(key: str) -> ZoneInfo:
        raise ValueError("Invalid TZif file: magic not found")

    monkeypatch.setattr(quiet_module, "ZoneInfo", broken)
    with pytest.raises(InvalidInput) as refused:
        parse_timezone("Asia/Shanghai")
    assert refused.value.code == BAD_TZ and "cannot be loaded" in refused.value.message


def test_without_a_tz_database_the_refusal_names_tzdata(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(quiet_module, "_zone_names", dict)
    with pytest.raises(InvalidInput) as refused:
        parse_timezone("UTC")
    assert refused.value.code == BAD_TZ and "tzdata" in refused.value.message


@pytest.mark.parametrize("value", ["../etc/passwd", "Mars/Olympus_Mons", "", None], ids=case_id)
def test_held_until_refuses_a_bad_time_zone(value: Any) -> None:
    with pytest.raises(InvalidInput) as refused:
        held_until_ms(QuietHours(time(22), time(7)), value, ms("2026-06-01T23:00+00:00"))
    assert refused.value.code == BAD_TZ


# --- held_until_ms: tables -----------------------------------------------------------------------

#: (window, zone, now, held until or None): times with their offsets, so each row reads as the
#: recipient's clock shows it.
HELD: list[Any] = [
    # UTC: inside, outside, spanning midnight, start inclusive, end exclusive
    ("22:00-07:00", "UTC", "2026-06-01T23:00+00:00", "2026-06-02T07:00+00:00"),
    ("22:00-07:00", "UTC", "2026-06-02T03:00+00:00", "2026-06-02T07:00+00:00"),
    ("22:00-07:00", "UTC", "2026-06-02T00:00+00:00", "2026-06-02T07:00+00:00"),
    ("22:00-07:00", "UTC", "2026-06-01T22:00+00:00", "2026-06-02T07:00+00:00"),
    ("22:00-07:00", "UTC", "2026-06-01T21:59:59.999+00:00", None),
    ("22:00-07:00", "UTC", "2026-06-02T06:59:59.999+00:00", "2026-06-02T07:00+00:00"),
    ("22:00-07:00", "UTC", "2026-06-02T07:00+00:00", None),
    ("22:00-07:00", "UTC", "2026-06-01T12:00+00:00", None),
    ("22:00-07:00", "UTC", "2026-12-31T23:30+00:00", "2027-01-01T07:00+00:00"),
    ("22:00-07:00", "UTC", "2028-02-28T23:00+00:00", "2028-02-29T07:00+00:00"),
    ("09:00-17:00", "UTC", "2026-06-01T09:00+00:00", "2026-06-01T17:00+00:00"),
    ("09:00-17:00", "UTC", "2026-06-01T16:59:59.999+00:00", "2026-06-01T17:00+00:00"),
    ("09:00-17:00", "UTC", "2026-06-01T17:00+00:00", None),
    ("09:00-17:00", "UTC", "2026-06-01T08:59:59.999+00:00", None),
    ("09:00-17:00", "UTC", "2026-06-01T23:30+00:00", None),
    ("09:00-17:00", "UTC", "2026-06-01T03:00+00:00", None),
    ("20:00-00:00", "UTC", "2026-06-01T23:59:59.999+00:00", "2026-06-02T00:00+00:00"),
    ("20:00-00:00", "UTC", "2026-06-02T00:00+00:00", None),
    ("00:00-06:00", "UTC", "2026-06-02T00:00+00:00", "2026-06-02T06:00+00:00"),
    ("00:00-06:00", "UTC", "2026-06-01T23:59:59.999+00:00", None),
    # Asia/Shanghai (+08:00, no DST): the recipient's clock, not UTC's
    ("22:00-08:00", SHANGHAI, "2026-06-01T23:30+08:00", "2026-06-02T08:00+08:00"),
    ("22:00-08:00", SHANGHAI, "2026-06-01T15:00+00:00", "2026-06-02T00:00+00:00"),
    ("22:00-08:00", SHANGHAI, "2026-06-01T03:00+00:00", None),  # 11:00 in Shanghai
    ("22:00-08:00", SHANGHAI, "2026-06-02T08:00+08:00", None),
    ("22:00-08:00", SHANGHAI, "2026-06-01T21:59:59.999+08:00", None),
    # New York, spring forward (2026-03-08, 02:00 -> 03:00)
    ("22:00-07:00", NY, "2026-03-07T23:00-05:00", "2026-03-08T07:00-04:00"),
    ("22:00-02:30", NY, "2026-03-07T23:00-05:00", "2026-03-08T07:00+00:00"),  # end in the gap
    ("22:00-02:30", NY, "2026-03-08T01:59:59.999-05:00", "2026-03-08T03:00-04:00"),
    ("22:00-02:30", NY, "2026-03-08T03:00-04:00", None),
    ("22:00-02:00", NY, "2026-03-08T01:30-05:00", "2026-03-08T03:00-04:00"),  # end at the gap's start
    ("22:00-03:00", NY, "2026-03-08T01:30-05:00", "2026-03-08T03:00-04:00"),  # end at the gap's end
    ("02:15-06:00", NY, "2026-03-08T01:59-05:00", None),  # start in the gap: not yet
    ("02:15-06:00", NY, "2026-03-08T03:00-04:00", "2026-03-08T06:00-04:00"),  # starts at 03:00
    ("02:15-06:00", NY, "2026-03-07T02:15-05:00", "2026-03-07T06:00-05:00"),  # the day before
    ("02:10-02:40", NY, "2026-03-08T03:00-04:00", None),  # wholly in the gap: empty that day
    ("02:10-02:40", NY, "2026-03-08T01:59:59.999-05:00", None),
    ("02:10-02:40", NY, "2026-03-07T02:20-05:00", "2026-03-07T02:40-05:00"),
    ("02:30-02:15", NY, "2026-03-07T12:00-05:00", "2026-03-09T02:15-04:00"),  # end and next start in one gap
    ("22:00-07:00", NY, "2026-03-08T23:00-04:00", "2026-03-09T07:00-04:00"),
    # New York, fall back (2026-11-01, 02:00 -> 01:00; 01:00-01:59 twice)
    ("22:00-07:00", NY, "2026-10-31T23:00-04:00", "2026-11-01T07:00-05:00"),
    ("22:00-07:00", NY, "2026-11-01T01:30-05:00", "2026-11-01T07:00-05:00"),
    ("22:00-01:30", NY, "2026-10-31T23:00-04:00", "2026-11-01T01:30-04:00"),  # the first 01:30
    ("22:00-01:30", NY, "2026-11-01T01:29:59.999-04:00", "2026-11-01T01:30-04:00"),
    ("22:00-01:30", NY, "2026-11-01T01:30-04:00", None),
    ("22:00-01:30", NY, "2026-11-01T01:10-05:00", None),  # the repeat does not start it again
    ("22:00-01:30", NY, "2026-11-01T01:30-05:00", None),
    ("01:30-06:00", NY, "2026-11-01T01:29-04:00", None),
    ("01:30-06:00", NY, "2026-11-01T01:30-04:00", "2026-11-01T06:00-05:00"),
    ("01:30-06:00", NY, "2026-11-01T01:10-05:00", "2026-11-01T06:00-05:00"),  # on through the repeat
    ("01:10-01:20", NY, "2026-11-01T01:15-04:00", "2026-11-01T01:20-04:00"),
    ("01:10-01:20", NY, "2026-11-01T01:15-05:00", None),  # held once, not twice
    # Berlin, spring forward (2026-03-29, 02:00 -> 03:00)
    ("22:00-02:30", BERLIN, "2026-03-28T23:00+01:00", "2026-03-29T01:00+00:00"),
    ("22:00-02:30", BERLIN, "2026-03-29T03:00+02:00", None),
    ("23:00-07:00", BERLIN, "2026-03-28T23:30+01:00", "2026-03-29T07:00+02:00"),
    ("02:00-05:00", BERLIN, "2026-03-29T01:59+01:00", None),
    ("02:00-05:00", BERLIN, "2026-03-29T03:00+02:00", "2026-03-29T05:00+02:00"),
    # Berlin, fall back (2026-10-25, 03:00 -> 02:00; 02:00-02:59 twice)
    ("22:00-02:30", BERLIN, "2026-10-24T23:00+02:00", "2026-10-25T02:30+02:00"),
    ("22:00-02:30", BERLIN, "2026-10-25T02:10+01:00", None),
    ("23:00-07:00", BERLIN, "2026-10-25T02:10+01:00", "2026-10-25T07:00+01:00"),
    ("23:00-07:00", BERLIN, "2026-10-24T23:00+02:00", "2026-10-25T06:00+00:00"),
    # Lord Howe Island: half-hour DST
    pytest.param(
        "22:00-02:15", LORD_HOWE, "2026-10-03T23:00+10:30", "2026-10-04T02:30+11:00", marks=needs_lord_howe
    ),
    pytest.param("22:00-02:15", LORD_HOWE, "2026-10-04T02:30+11:00", None, marks=needs_lord_howe),
    pytest.param(
        "22:00-07:00", LORD_HOWE, "2026-10-03T23:00+10:30", "2026-10-04T07:00+11:00", marks=needs_lord_howe
    ),
    pytest.param(
        "22:00-01:45", LORD_HOWE, "2026-04-04T23:00+11:00", "2026-04-05T01:45+11:00", marks=needs_lord_howe
    ),
    pytest.param("22:00-01:45", LORD_HOWE, "2026-04-05T01:40+10:30", None, marks=needs_lord_howe),
    pytest.param(
        "22:00-07:00", LORD_HOWE, "2026-04-05T01:40+10:30", "2026-04-05T07:00+10:30", marks=needs_lord_howe
    ),
]


@pytest.mark.parametrize(("window", "zone", "now", "until"), HELD)
def test_held_until(window: str, zone: str, now: str, until: str | None) -> None:
    quiet = parse_quiet(window)
    assert quiet is not None
    expected = None if until is None else ms(until)
    got = held_until_ms(quiet, zone, ms(now))
    assert got == expected, f"{window} in {zone} at {now}: {shown(got, zone)}, not {until}"


def test_a_night_is_as_long_as_the_clock_says() -> None:
    # 22:00-07:00 is 9 hours of wall clock: 8 real hours the night the clock springs forward,
    # 10 the night it falls back
    quiet = QuietHours(time(22), time(7))
    for zone, start, hours in [
        (NY, "2026-03-07T22:00-05:00", 8),
        (NY, "2026-03-14T22:00-04:00", 9),
        (NY, "2026-10-31T22:00-04:00", 10),
        (BERLIN, "2026-03-28T22:00+01:00", 8),
        (BERLIN, "2026-10-24T22:00+02:00", 10),
        (SHANGHAI, "2026-03-07T22:00+08:00", 9),
    ]:
        assert held_until_ms(quiet, zone, ms(start)) == ms(start) + hours * 3_600_000, (zone, start)


def test_the_transitions_the_tables_rely_on() -> None:
    found = {zone: list(transitions(zone, 2026)) for zone in (NY, BERLIN)}
    assert found[NY] == [ms("2026-03-08T07:00+00:00"), ms("2026-11-01T06:00+00:00")]
    assert found[BERLIN] == [ms("2026-03-29T01:00+00:00"), ms("2026-10-25T01:00+00:00")]
    if HAS_LORD_HOWE:
        assert list(transitions(LORD_HOWE, 2026)) == [
            ms("2026-04-04T15:00+00:00"),
            ms("2026-10-03T15:30+00:00"),
        ]


# --- held_until_ms: properties -------------------------------------------------------------------


def transitions(zone: str, year: int) -> Iterator[int]:
    """Epoch ms of every change of ``zone``'s UTC offset in ``year`` (to the minute), read
    instant by instant from UTC (the direction with one answer), not from the module."""
    tz = ZoneInfo(zone)
    step = 1800
    moment = int(datetime(year, 1, 1, tzinfo=UTC).timestamp())
    last = int(datetime(year + 1, 1, 1, tzinfo=UTC).timestamp())
    offset = datetime.fromtimestamp(moment, tz).utcoffset()
    while moment < last:
        nxt = datetime.fromtimestamp(moment + step, tz).utcoffset()
        if nxt != offset:
            at = moment
            while datetime.fromtimestamp(at, tz).utcoffset() == offset:
                at += 60
            yield at * 1000
            offset = nxt
        moment += step


def wall(seconds: int, tz: ZoneInfo) -> datetime:
    return datetime.fromtimestamp(seconds, tz).replace(tzinfo=None)


class Oracle:
    """The rule written out by brute force: a window starts at the first minute the clock
    reaches its start and ends at the first minute it reaches its end, found by reading the
    clock minute by minute (offsets, transitions and window bounds are whole minutes)."""

    def __init__(self, zone: str) -> None:
        self.tz = ZoneInfo(zone)
        offsets = [
            datetime.fromtimestamp(at, self.tz).utcoffset() or timedelta(0)
            for at in range(int(datetime(2025, 1, 1, tzinfo=UTC).timestamp()), 1_830_000_000, 3600)
        ]
        self.max_offset_s = int(max(offsets).total_seconds())
        self.reached: dict[datetime, int] = {}

    def reach_s(self, target: datetime) -> int:
        if target not in self.reached:
            self.reached[target] = self._walk(target)
        return self.reached[target]

    def _walk(self, target: datetime) -> int:
        # no instant before ``moment`` shows ``target`` or later: there, the clock reads at most
        # the instant plus the largest offset, which is at most ``target`` minus an hour
        moment = int(target.replace(tzinfo=UTC).timestamp()) - self.max_offset_s - 3600
        while wall(moment, self.tz) < target:
            moment += 60
        return moment

    def held_until_ms(self, quiet: QuietHours, now_ms: int) -> int | None:
        today = wall(now_ms // 1000, self.tz).date()
        windows = []
        for k in range(-2, 4):
            day = today + timedelta(days=k)
            end_day = day + timedelta(days=1) if quiet.start > quiet.end else day
            windows.append(
                (
                    self.reach_s(datetime.combine(day, quiet.start)) * 1000,
                    self.reach_s(datetime.combine(end_day, quiet.end)) * 1000,
                )
            )
        for i, (start, end) in enumerate(windows):
            if start <= now_ms < end:
                for next_start, next_end in windows[i + 1 :]:
                    if next_start <= end < next_end:
                        end = next_end
                return end
        return None


def inside_by_the_clock(quiet: QuietHours, at: time) -> bool:
    """The plain wall-clock reading of a window (true on every day without a clock change)."""
    if quiet.start < quiet.end:
        return quiet.start <= at < quiet.end
    return at >= quiet.start or at < quiet.end


def random_minute(rng: random.Random) -> time:
    # half of them between 00:00 and 04:00, where the clocks change
    minute = rng.randrange(240) if rng.random() < 0.5 else rng.randrange(1440)
    return time(minute // 60, minute % 60)


DST_ZONES = [NY, BERLIN, pytest.param(LORD_HOWE, marks=needs_lord_howe)]


@pytest.mark.parametrize("zone", DST_ZONES)
def test_held_until_across_a_year_matches_the_rule(zone: str) -> None:
    rng = random.Random(f"quiet hours {zone}")
    tz = ZoneInfo(zone)
    oracle = Oracle(zone)
    changes = list(transitions(zone, 2026))
    year_start, year_end = ms("2026-01-01T00:00+00:00"), ms("2027-01-01T00:00+00:00")
    held = 0
    for _ in range(120):
        start = random_minute(rng)
        end = random_minute(rng)
        if start == end:
            continue
        quiet = QuietHours(start, end)
        if rng.random() < 0.5:  # half of them within a day and a half of a clock change
            now = rng.choice(changes) + rng.randrange(-36 * 3_600_000, 36 * 3_600_000)
        else:
            now = rng.randrange(year_start, year_end)
        case = f"{quiet} in {zone} at {shown(now, zone)}"

        until = held_until_ms(quiet, zone, now)
        expected = oracle.held_until_ms(quiet, now)
        assert until == expected, f"{case}: {shown(until, zone)}, not {shown(expected, zone)}"
        if until is None:
            continue
        held += 1

        # the end is later, and it is the window's end on the clock, or the first instant
        # after a gap that skipped it
        assert until > now, case
        seconds = until // 1000
        assert until % 1000 == 0, case
        shows = wall(seconds, tz)
        skipped = datetime.combine(shows.date(), quiet.end)
        assert shows.time() == quiet.end or wall(seconds - 1, tz) < skipped < shows, case

        # every minute up to the end is held until the same end, and reads as inside the
        # window on the clock (but in the second pass of a repeated hour, whose readings
        # belong to the window that the first pass began)
        for minute in range(now, until, 60_000):
            assert held_until_ms(quiet, zone, minute) == until, f"{case}, then at {shown(minute, zone)}"
            local = datetime.fromtimestamp(minute // 60_000 * 60, tz)
            assert local.fold == 1 or inside_by_the_clock(quiet, local.time()), f"{case}, then {local}"
        # and the end itself is not held
        assert held_until_ms(quiet, zone, until) is None, case
    assert held > 20  # the samples did reach inside windows


def test_held_until_matches_the_rule_for_every_window_start_on_change_days() -> None:
    # every half hour of start and end around the New York changes, at every 10 minutes of
    # the two nights: the cases a random draw may miss
    oracle = Oracle(NY)
    bounds = [time(h, m) for h in range(0, 5) for m in (0, 30)] + [time(22), time(23, 30)]
    nights = [ms("2026-03-07T20:00-05:00"), ms("2026-10-31T20:00-04:00")]
    checked = 0
    for start in bounds:
        for end in bounds:
            if start == end:
                continue
            quiet = QuietHours(start, end)
            for night in nights:
                for now in range(night, night + 12 * 3_600_000, 40 * 60_000):
                    assert held_until_ms(quiet, NY, now) == oracle.held_until_ms(quiet, now), (
                        f"{quiet} at {shown(now, NY)}"
                    )
                    checked += 1
    assert checked > 3000
