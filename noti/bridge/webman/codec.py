"""The ``message`` JSON of a webman stream entry or delayed task, both ways.

:func:`encode_message` writes what PHP's ``json_encode($message->toArray())`` writes, byte for
byte. :func:`parse_entry` reads an entry as a PHP consumer does (``parseRawMessage``,
``isValidMessage``, the type/source check, then the typed ``QueueMessage`` constructor), and
raises :class:`~noti.errors.MalformedMessage` with a :class:`Reason` where PHP would drop the
entry in silence (:attr:`PhpOutcome.DROPPED`) or choke on it (:attr:`PhpOutcome.STUCK`: the
plugin leaves it pending forever and its worker 0 dies on every pending check).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from noti.bridge.webman import phpjson
from noti.errors import MalformedMessage

__all__ = [
    "FIELDS",
    "Data",
    "PhpOutcome",
    "QueueMessage",
    "Reason",
    "check_data",
    "decode_message",
    "encode_message",
    "parse_entry",
]

#: What ``data`` may hold: a string, an int, or a PHP array (list or string-keyed dict).
Data = str | int | list[Any] | dict[str, Any]

#: The seven keys of the message object, in PHP's ``toArray()`` order.
FIELDS = ("type", "data", "timestamp", "source", "failCount", "nextRetry", "delayUntil")

_RAW_INVALID_UTF8 = re.compile(r"[\udc80-\udcff]")  # bytes the client decoded with surrogateescape


class PhpOutcome(StrEnum):
    """What the PHP plugin does with such an entry."""

    #: XACK + XDEL without a trace.
    DROPPED = "dropped"
    #: An exception before the ack: the entry stays pending, worker 0 dies on each pending check.
    STUCK = "stuck"


class Reason(StrEnum):
    """Why an entry is not a message for this queue."""

    NO_MESSAGE_FIELD = "no_message_field"
    EMPTY = "empty"
    INVALID_UTF8 = "invalid_utf8"
    BAD_JSON = "bad_json"
    NOT_AN_OBJECT = "not_an_object"
    MISSING_KEY = "missing_key"
    FOREIGN_TYPE = "foreign_type"
    FOREIGN_SOURCE = "foreign_source"
    BAD_FIELD_TYPE = "bad_field_type"

    @property
    def php_outcome(self) -> PhpOutcome:
        return PhpOutcome.STUCK if self in _STUCK else PhpOutcome.DROPPED


_STUCK = {Reason.BAD_FIELD_TYPE}


def _malformed(reason: Reason, detail: str) -> MalformedMessage:
    return MalformedMessage(f"{reason.value}: {detail}", reason=reason.value)


@dataclass(frozen=True, slots=True)
class QueueMessage:
    """One webman message (PHP ``QueueMessage::toArray()``). Times are Unix seconds."""

    type: str
    data: Data
    timestamp: int
    source: str
    fail_count: int = 0
    next_retry: int = 0
    delay_until: int = 0

    def to_array(self) -> dict[str, Any]:
        """The message object with PHP's keys, in PHP's order."""
        return {
            "type": self.type,
            "data": self.data,
            "timestamp": self.timestamp,
            "source": self.source,
            "failCount": self.fail_count,
            "nextRetry": self.next_retry,
            "delayUntil": self.delay_until,
        }


def check_data(data: Any) -> Data:
    """``data`` if a PHP consumer reads it back unchanged, else a clear error.

    Raises:
        MalformedMessage: None (PHP drops the message), a bool or float at the top (PHP would
            coerce it to an int), or anything :func:`phpjson.encode` refuses. An integer beyond
            64 bits is not refused: it becomes what a PHP producer writes for it (a string at
            the top, a float inside a list or dict).
    """
    if data is None:
        raise _malformed(Reason.MISSING_KEY, "data must not be None: PHP consumers drop such messages")
    if isinstance(data, bool | float):
        raise _malformed(
            Reason.BAD_FIELD_TYPE,
            f"data {data!r} would reach PHP consumers as an int; pass a string, an int, a list or a dict",
        )
    if isinstance(data, int) and not phpjson.INT_MIN <= data <= phpjson.INT_MAX:
        # A PHP producer holds such a number as a float, which its `string|array|int` parameter
        # turns into a string ("1.844674407371E+19"): write what it writes.
        try:
            return phpjson.to_str(phpjson.big_int_as_float(data))
        except phpjson.PhpJsonError as exc:
            raise _malformed(Reason.BAD_FIELD_TYPE, f"data: {exc}") from None
    if not isinstance(data, str | int | list | tuple | dict):
        raise _malformed(Reason.BAD_FIELD_TYPE, f"data of type {type(data).__name__} cannot be sent")
    return list(data) if isinstance(data, tuple) else data


def encode_message(message: QueueMessage) -> str:
    """The ``message`` field value, byte-identical to PHP's ``json_encode``.

    Raises:
        MalformedMessage: ``data`` holds something JSON cannot carry (INF, NaN, a lone surrogate …).
    """
    try:
        return phpjson.encode(message.to_array())
    except phpjson.PhpJsonError as exc:
        raise _malformed(Reason.BAD_FIELD_TYPE, f"cannot encode the message: {exc}") from None


def decode_message(raw: str | None) -> dict[str, Any]:
    """``parseRawMessage``: the decoded object holding all seven keys, non-null.

    Raises:
        MalformedMessage: the reason PHP would drop it (or, for a truthy scalar, choke on it).
    """
    if raw is None:
        raise _malformed(Reason.NO_MESSAGE_FIELD, "the entry has no 'message' field")
    if raw == "":
        raise _malformed(Reason.EMPTY, "empty message (what PHP writes when json_encode fails)")
    if _RAW_INVALID_UTF8.search(raw):
        raise _malformed(Reason.INVALID_UTF8, "the message is not valid UTF-8")
    try:
        value = phpjson.decode(raw)
    except phpjson.PhpJsonError as exc:
        raise _malformed(Reason.BAD_JSON, str(exc)) from None
    if not value or not isinstance(value, dict):
        if value and not isinstance(value, list):  # PHP: TypeError in isValidMessage(array)
            raise _malformed(Reason.BAD_FIELD_TYPE, f"the message is a JSON {type(value).__name__}")
        raise _malformed(Reason.NOT_AN_OBJECT, "the message is not a JSON object")
    missing = [key for key in FIELDS if value.get(key) is None]
    if missing:
        raise _malformed(Reason.MISSING_KEY, f"missing or null: {', '.join(missing)}")
    return value


def _php_array(value: Any) -> Any:
    """A decoded value as PHP holds it: an object with keys ``0..n-1`` (or none) is a list."""
    if isinstance(value, dict):
        items = {k: _php_array(v) for k, v in value.items()}
        return list(items.values()) if phpjson.is_list_like(items) else items
    if isinstance(value, list):
        return [_php_array(v) for v in value]
    return value


def _coerce_data(value: Any) -> Data:
    """The typed ``string|array|int $data`` parameter: int first, then string.

    Arrays come as PHP holds them: ``{}`` and ``{"0": …, "1": …}`` are lists.
    """
    if isinstance(value, dict | list):
        converted: Data = _php_array(value)
        return converted
    if isinstance(value, str):
        return value
    if isinstance(value, float) and not (-(2.0**63) <= value < 2.0**63):
        return phpjson.to_str(value)  # int refuses it, string takes it ("1.0E+20", "INF")
    return phpjson.to_int(value)


def _coerce(decoded: Mapping[str, Any], *, now_s: int) -> QueueMessage:
    try:
        timestamp = phpjson.to_int(decoded["timestamp"])
        return QueueMessage(
            type=phpjson.to_str(decoded["type"]),
            data=_coerce_data(decoded["data"]),
            timestamp=timestamp or now_s,  # the constructor's `!$timestamp ? time()`
            source=phpjson.to_str(decoded["source"]),
            fail_count=phpjson.to_int(decoded["failCount"]),
            next_retry=phpjson.to_int(decoded["nextRetry"]),
            delay_until=phpjson.to_int(decoded["delayUntil"]),
        )
    except phpjson.PhpTypeError as exc:
        raise _malformed(Reason.BAD_FIELD_TYPE, str(exc)) from None


def parse_entry(
    fields: Mapping[str, str], *, queue_name: str, php_class: str, now_s: int
) -> tuple[QueueMessage, str]:
    """A stream entry's message, as the PHP consumer of ``php_class`` would read it, and its raw text.

    Raises:
        MalformedMessage: with the :class:`Reason` (its ``php_outcome`` says what PHP does).
    """
    raw = fields.get("message")
    decoded = decode_message(raw)
    if decoded["type"] != queue_name or not isinstance(decoded["type"], str):
        raise _malformed(Reason.FOREIGN_TYPE, f"type {decoded['type']!r} is not {queue_name!r}")
    if not phpjson.loose_equals(decoded["source"], php_class):
        raise _malformed(Reason.FOREIGN_SOURCE, f"source {decoded['source']!r} is not {php_class!r}")
    assert raw is not None
    return _coerce(decoded, now_s=now_s), raw
