"""The notification record: its fields, statuses, validation and Redis/JSON forms.

A record is stored as one Redis hash whose fields carry the seed's names (``noti_st``,
``noti_lv``, …), so ``noti list -json`` reads like the original system. Inside Python it is a
:class:`Notification`; the seed names appear only in :func:`to_hash` / :func:`from_hash`.

Which channels exist, and what each one's targets and fields are, is the channel registry's
(:mod:`noti.core.channel`; each channel's rules are in its package, ``noti/channels/<name>/``,
and on its documentation page). What every record shares is checked here (refused with
:class:`~noti.errors.InvalidInput`, nothing stored): a target is 1-2,048 characters without
control characters; no field a channel does not take, none it requires missing; a level is an
integer >= 1 (at most 64 bits), lowered to the user's cap.

Every text must be valid UTF-8 (no lone surrogate) without NUL or other control characters
(tab and line breaks allowed in message bodies; none in a target, a subject, an account or a
template id); JSON content must be plain (no NaN or Infinity, string keys, at most 64 levels
deep): see :mod:`noti.inputs`.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from noti.core.channel import Channel, ChannelSpec
from noti.core.channel import generation as channel_generation
from noti.errors import InvalidConfig, InvalidInput
from noti.inputs import bad_character, check_text, integer, plain_json, shown
from noti.redis.entropy import hex64

__all__ = [
    "Channel",
    "ChannelSpec",
    "Notification",
    "Status",
    "from_hash",
    "new_id",
    "now_ms",
    "parse_level",
    "to_hash",
    "validate_fields",
]

RECORD_TYPE = "wn_noti"
LEVEL_MIN, LEVEL_MAX = 1, 1000
#: The longest target (and URL field) of any channel.
URL_MAX = 2048


class Status(IntEnum):
    """``noti_st``: what happened to a record."""

    INVALID = -1  #: malformed or permanently refused; never processed again
    FAILED = 0  #: every attempt failed
    WAITING = 1  #: to be sent (possibly after ``noti_timeout_at``)
    DONE = 10  #: delivered; ``noti_errmsg`` is "ok" and ``expi`` is set


def provider_field(channel: Channel) -> str:
    """Hash field naming the provider(s) of a record: ``noti_sms_provider`` etc."""
    return f"noti_{channel.value}_provider"


def msgid_field(channel: Channel) -> str:
    """Hash field for the provider's message id (``noti_wx_tmpl_msgid`` for WeChat)."""
    return channel.spec.msgid_field or f"noti_{channel.value}_msgid"


_msgid_fields: tuple[int, tuple[str, ...]] = (-1, ())


def msgid_fields() -> tuple[str, ...]:
    """Every registered channel's message-id field, once each (a channel whose package cannot
    be loaded is left out: it can have no record to read)."""
    global _msgid_fields
    seen, found = _msgid_fields
    now = channel_generation()
    if seen != now:
        names = []
        for channel in Channel:
            try:
                names.append(msgid_field(channel))
            except InvalidConfig:
                continue
        found = tuple(dict.fromkeys(names))
        _msgid_fields = (now, found)
    return found


# --- ids -------------------------------------------------------------------------------------

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford base32, lower case
#: A random byte -> one base32 digit (its low five bits: every digit from 8 bytes each).
_DIGIT_OF_BYTE = bytes(ord(_ALPHABET[b & 31]) for b in range(256))
#: The latest millisecond an id of this process was made in, and its ten digits (ids never
#: go back in time).
_last_ms = 0
_last_prefix = ""


def now_ms() -> int:
    """Wall-clock epoch milliseconds (the seed's time unit)."""
    return time.time_ns() // 1_000_000


#: Every pair of base32 digits, so an id is built ten bits at a time.
_PAIRS = [a + b for a in _ALPHABET for b in _ALPHABET]


def _b32(value: int, width: int) -> str:
    """``value`` as ``width`` base32 digits (``width`` even)."""
    return "".join([_PAIRS[(value >> shift) & 1023] for shift in range(5 * width - 10, -1, -10)])


def new_id(at_ms: int | None = None) -> str:
    """A new record id: 26 characters, unique, and sorting by creation time to the millisecond.

    Ten characters of epoch milliseconds then sixteen (80 bits) drawn afresh from the
    operating system's random source for every id, as ULID does. Ids of different
    milliseconds sort by time; ids of one millisecond sort in no particular order, and none
    tells anything of another: they once took the next value of the one before, so one id
    gave its neighbours away (issue 32: 31 of 180 ids found with 720 guesses). An id is
    never dated before the latest one this process made, so ids do not go back when the
    clock does (threads racing at a millisecond's turn may date one a millisecond apart:
    the random part keeps them unique). An id dated ahead of this clock (``at_ms``
    in the future) is dated so and moves nothing: it must not date every later id of the process.
    """
    global _last_ms, _last_prefix
    now = now_ms()
    ms = now if at_ms is None else at_ms
    if ms > _last_ms:
        prefix = _b32(ms, 10)
        if ms <= now:  # an id dated ahead of the clock (a caller's choice) moves nothing
            _last_ms, _last_prefix = ms, prefix
    else:  # this millisecond again, or an earlier one (the clock went back): the latest one's
        prefix = _last_prefix or _b32(max(ms, 0), 10)
    # 16 random bytes, each giving its low five bits: 80 bits, a new draw for every id
    return prefix + bytes.fromhex(hex64()[:32]).translate(_DIGIT_OF_BYTE).decode()


# --- the record --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Notification:
    """One notification, as stored."""

    id: str
    channel: Channel
    target: str
    creator: str
    level: int = 1
    status: Status = Status.WAITING
    errmsg: str = ""
    lease_until_ms: int = 0
    retry: int = 0
    retry_max: int = 3
    created_ms: int = 0
    modified_ms: int = 0
    expires_ms: int | None = None
    #: Channel fields by their Python names (``text``, ``tmpl``, ``content``, …).
    fields: Mapping[str, Any] = field(default_factory=dict)
    #: Provider name(s) asked for, comma-separated in failover order; None = channel default.
    provider: str | None = None
    #: Provider that delivered it and the id it returned.
    sent_by: str | None = None
    msgid: str | None = None
    #: Retry policy of this record (``"linear:60"``, ``"exponential:5:600"``); None = channel's.
    retry_policy: str | None = None
    #: Debounce identifier it was scheduled under (see :mod:`noti.core.delay`).
    identifier: str | None = None
    #: When Celery's ``revoke`` of its task id made it invalid (-1) before any send; None = never.
    revoked_ms: int | None = None
    #: Delivery status after the send (:mod:`noti.delivery`): ``accepted``, ``delivered``,
    #: ``undelivered``, ``unknown``; None before it is sent. ``delivery_ms`` is when it entered
    #: it, ``delivery_times`` when it entered each; code and text are the vendor's words.
    delivery: str | None = None
    delivery_ms: int | None = None
    delivery_code: str | None = None
    delivery_text: str | None = None
    delivery_times: Mapping[str, int] = field(default_factory=dict)
    #: The record sent instead if this one is not delivered in time, and the one this
    #: record stands in for (:mod:`noti.delivery.fallback`).
    fallback: str | None = None
    fallback_of: str | None = None
    #: URL each status change of this record is posted to (a signed webhook).
    status_callback: str | None = None
    #: On a status callback (a webhook noti made, :mod:`noti.sending.callbacks`): the record
    #: whose status it reports. Set by noti only, never from input: it makes the webhook
    #: provider sign it as a status callback (:data:`noti.access.signing.CALLBACK_ID_PREFIX`).
    status_of: str | None = None
    #: On a record made by ``notify(recipient=…)`` (:mod:`noti.recipients`): the notice (the
    #: call) it belongs to, the recipient's id (of the record's creator) and the message
    #: category; ``preference`` is what the claim checks again before a send (the recipient's
    #: hash key, the category, the channel and the default: ``"<key> <category> <channel>
    #: <0|1>"``), set only where a recipient may opt out.
    parent: str | None = None
    recipient: str | None = None
    category: str | None = None
    preference: str | None = None
    #: Through which door it came in (:data:`noti.core.door.DOORS`: ``api``, ``task``,
    #: ``cli``, ``http``, ``webman``, ``events``); None on records made before it was kept.
    door: str | None = None
    #: The W3C trace context it was made in (:mod:`noti.tracing`), kept while tracing is on.
    trace: str | None = None


def _integer(value: str | None, default: int = 0) -> int:
    if value is None or value == "":
        return default
    return int(value)


def to_hash(record: Notification) -> dict[str, str]:
    """The Redis hash of a record (string values only; None fields left out)."""
    out: dict[str, str] = {
        "id": record.id,
        "tp": RECORD_TYPE,
        "ct": str(record.created_ms),
        "lm": str(record.modified_ms),
        "noti_c": record.creator,
        "noti_lv": str(record.level),
        "noti_st": str(int(record.status)),
        "noti_errmsg": record.errmsg,
        "noti_timeout_at": str(record.lease_until_ms),
        "noti_type": record.channel.value,
        "noti_retry": str(record.retry),
        "noti_retry_max": str(record.retry_max),
        "noti_target": record.target,
    }
    if record.expires_ms is not None:
        out["expi"] = str(record.expires_ms)
    if record.provider:
        out[provider_field(record.channel)] = record.provider
    if record.sent_by:
        out["noti_sent_by"] = record.sent_by
    if record.msgid:
        out[msgid_field(record.channel)] = record.msgid
    if record.retry_policy:
        out["noti_retry_policy"] = record.retry_policy
    if record.identifier:
        out["noti_ident"] = record.identifier
    if record.revoked_ms is not None:
        out["noti_revoked_at"] = str(record.revoked_ms)
    for key, value in (
        ("noti_dlv", record.delivery),
        ("noti_dlv_at", record.delivery_ms),
        ("noti_dlv_code", record.delivery_code),
        ("noti_dlv_text", record.delivery_text),
        ("noti_fallback", record.fallback),
        ("noti_fallback_of", record.fallback_of),
        ("noti_status_cb", record.status_callback),
        ("noti_status_of", record.status_of),
        ("noti_parent", record.parent),
        ("noti_rcpt", record.recipient),
        ("noti_cat", record.category),
        ("noti_pref", record.preference),
        ("noti_door", record.door),
        ("noti_trace", record.trace),
    ):
        if value is not None:
            out[key] = str(value)
    for state, at in record.delivery_times.items():
        out[f"noti_dlv_{state}_at"] = str(at)
    spec = record.channel.spec
    names, json_fields = spec.fields, spec.json_fields
    for name, value in record.fields.items():
        if value is None:
            continue
        out[names[name]] = json.dumps(value, ensure_ascii=False) if name in json_fields else str(value)
    return out


def from_hash(data: Mapping[str, str]) -> Notification:
    """Rebuild a record from its Redis hash."""
    channel = Channel(data["noti_type"])
    spec = channel.spec
    json_fields = spec.json_fields
    fields: dict[str, Any] = {}
    for name, key in spec.fields.items():
        if key in data:
            fields[name] = json.loads(data[key]) if name in json_fields else data[key]
    expi = data.get("expi")
    revoked = data.get("noti_revoked_at")
    return Notification(
        id=data["id"],
        channel=channel,
        target=data["noti_target"],
        creator=data["noti_c"],
        level=_integer(data.get("noti_lv"), 1),
        status=Status(_integer(data.get("noti_st"), 1)),
        errmsg=data.get("noti_errmsg", ""),
        lease_until_ms=_integer(data.get("noti_timeout_at")),
        retry=_integer(data.get("noti_retry")),
        retry_max=_integer(data.get("noti_retry_max"), 3),
        created_ms=_integer(data.get("ct")),
        modified_ms=_integer(data.get("lm")),
        expires_ms=int(expi) if expi else None,
        fields=fields,
        provider=data.get(provider_field(channel)) or None,
        sent_by=data.get("noti_sent_by") or None,
        msgid=data.get(msgid_field(channel)) or None,
        retry_policy=data.get("noti_retry_policy") or None,
        identifier=data.get("noti_ident") or None,
        revoked_ms=int(revoked) if revoked else None,
        delivery=data.get("noti_dlv") or None,
        delivery_ms=_integer(data.get("noti_dlv_at")) or None,
        delivery_code=data.get("noti_dlv_code") or None,
        delivery_text=data.get("noti_dlv_text") or None,
        delivery_times={
            state: int(data[key]) for state in DELIVERY_STATES if (key := f"noti_dlv_{state}_at") in data
        },
        fallback=data.get("noti_fallback") or None,
        fallback_of=data.get("noti_fallback_of") or None,
        status_callback=data.get("noti_status_cb") or None,
        status_of=data.get("noti_status_of") or None,
        parent=data.get("noti_parent") or None,
        recipient=data.get("noti_rcpt") or None,
        category=data.get("noti_cat") or None,
        preference=data.get("noti_pref") or None,
        door=data.get("noti_door") or None,
        trace=data.get("noti_trace") or None,
    )


#: The delivery statuses a record's hash may hold a time for (:class:`noti.delivery.Delivery`).
DELIVERY_STATES = ("accepted", "delivered", "undelivered", "unknown")


# --- validation --------------------------------------------------------------------------------


def parse_channel(value: str) -> Channel:
    """The channel named by ``value``.

    Raises:
        InvalidInput: ``e.cmd.noti.add.badtype`` for an unknown type.
    """
    try:
        return Channel(value)
    except (ValueError, TypeError):
        known = ", ".join(c.value for c in Channel)
        raise InvalidInput(
            f"unknown notification type {shown(value)} (known: {known})", code="e.cmd.noti.add.badtype"
        ) from None


#: The largest level a caller may ask for: 64-bit signed, like every number in a record
#: (it is lowered to the caller's cap, at most :data:`LEVEL_MAX`, before it is stored).
LEVEL_ASKED_MAX = 2**63 - 1


def parse_level(value: object) -> int:
    """An integer level >= 1, or a string of its digits (capping to the user's maximum is
    :mod:`noti.access.users`' job).

    Raises:
        InvalidInput: ``e.cmd.noti.add.badlv`` for anything else (a bool, a float, NaN, a
        number written with thousands of digits or beyond 64 bits).
    """
    if type(value) is int and LEVEL_MIN <= value <= LEVEL_MAX:
        return value
    try:
        return integer(
            repr(value) if isinstance(value, bool) else value,
            what="level",
            code="e.cmd.noti.add.badlv",
            minimum=LEVEL_MIN,
            maximum=LEVEL_ASKED_MAX,
            digits=True,
        )
    except InvalidInput:
        raise InvalidInput(
            f"level must be an integer from {LEVEL_MIN} to {LEVEL_MAX} (a higher one is lowered to"
            f" your role's cap), got {shown(value)}",
            code="e.cmd.noti.add.badlv",
        ) from None


def _bad(code: str, message: str) -> InvalidInput:
    return InvalidInput(message, code=f"e.cmd.noti.add.{code}")


def validate_target(channel: Channel, target: object) -> str:
    """The target, checked for its channel: what every channel asks (a non-empty string of at
    most :data:`URL_MAX` characters, no control character), then the channel's own rule
    (:meth:`ChannelSpec.check_target`).

    Raises:
        InvalidInput: ``e.cmd.noti.add.badtarget``.
    """
    if not isinstance(target, str) or not target.strip():
        raise _bad("badtarget", f"a {channel.value} notification needs a target (-to)")
    target = target.strip()
    if len(target) > URL_MAX:
        raise _bad(
            "badtarget", f"a {channel.value} target is {len(target)} characters long; the limit is {URL_MAX}"
        )
    problem = bad_character(target, name=True)
    if problem is not None:
        raise _bad("badtarget", f"a {channel.value} target must not contain {problem}")
    return channel.spec.check_target(target)


def check_field_names(channel: Channel, given: Mapping[str, Any]) -> None:
    """Refuse a field the channel does not take, or a required one missing from ``given``
    (the fields given, or an event listener's notification template's).

    Raises:
        InvalidInput: ``e.cmd.noti.add.badfield`` or ``e.cmd.noti.add.missing``.
    """
    spec = channel.spec
    if not given.keys() <= spec.fields.keys():
        unknown = sorted(set(given) - set(spec.fields))
        raise _bad(
            "badfield",
            f"{channel.value} notifications take {', '.join(sorted(spec.fields))}; "
            f"unexpected: {', '.join(unknown)}",
        )
    missing = [name for name in spec.required if name not in given]
    if missing:
        raise _bad("missing", f"a {channel.value} notification needs {', '.join(missing)}")


def validate_fields(channel: Channel, fields: Mapping[str, Any]) -> dict[str, Any]:
    """The channel fields, checked and normalised (JSON strings decoded to objects): unknown
    and missing ones refused here, each given one by the channel
    (:meth:`ChannelSpec.check_fields`).

    Raises:
        InvalidInput: an unknown or missing field, or a value outside its limits.
    """
    spec: ChannelSpec = channel.spec
    given = {k: v for k, v in fields.items() if v is not None}
    check_field_names(channel, given)
    return spec.check_fields(given)


# --- what channels share -----------------------------------------------------------------------

#: An http(s) URL (a webhook's target, a WeChat template's link).
HTTP_URL = re.compile(r"^https?://[^\s/?#]+[^\s]*$")


def text_field(name: str, value: object, limit: int, *, one_line: bool = False) -> str:
    """A text field of at most ``limit`` characters (``e.cmd.noti.add.badtext``)."""
    return check_text(value, what=name, code="e.cmd.noti.add.badtext", max_len=limit, one_line=one_line)


def json_object_field(name: str, value: object, limit: int) -> dict[str, Any]:
    """A JSON object (or its text) of at most ``limit`` bytes encoded (``e.cmd.noti.add.badcontent``)."""
    return plain_json(value, what=name, code="e.cmd.noti.add.badcontent", max_bytes=limit)[0]


def url_field(name: str, value: object) -> str:
    """An http(s) URL field (``e.cmd.noti.add.badfield``)."""
    if (
        not isinstance(value, str)
        or len(value) > URL_MAX
        or not HTTP_URL.fullmatch(value)
        or bad_character(value, name=True)
    ):
        raise _bad("badfield", f"{name} {shown(value)} is not an http(s) URL")
    return value


def name_field(label: str, value: object, limit: int = 128) -> str:
    """A one-line name without spaces (an account, a template id; ``e.cmd.noti.add.badfield``
    for a space, ``badtext`` for the rest)."""
    text = text_field(label, value, limit, one_line=True)
    if any(c.isspace() for c in text):
        raise _bad("badfield", f"{label} must not contain spaces")
    return text
