"""Checks shared by every way text, numbers and JSON come into noti from outside.

The Python API, the CLI, the ``noti.notify`` task, the webman bridge, events and listeners
all take values from callers noti does not control. Each door names its own error code;
these functions apply the same rules behind every door, so a value refused by one is
refused by all, with :class:`~noti.errors.InvalidInput` and nothing stored:

* **text** is stored in Redis as UTF-8: a lone surrogate (what Python makes of invalid
  UTF-8 bytes in ``argv`` or a file read with ``surrogateescape``) cannot be, and is
  refused. NUL and the other control characters are refused, except tab and line breaks
  in multi-line text; a one-line value (an e-mail subject, a name) also refuses line breaks
  of every kind (``\\n``, ``\\r``, U+0085, U+2028, U+2029, form feed, vertical tab).
* **numbers** must be finite and within their range: NaN, infinities, booleans and numbers
  written with thousands of digits are refused before any arithmetic.
* **JSON** must be plain: an object with string keys, no NaN or Infinity, no integer of
  more than 4,300 digits, at most :data:`JSON_DEPTH_MAX` levels deep, and encodable as UTF-8.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from noti.errors import InvalidInput

__all__ = [
    "JSON_DEPTH_MAX",
    "bad_character",
    "check_json_shape",
    "could_be_id",
    "check_line",
    "check_name",
    "check_text",
    "duration_ms",
    "finite_number",
    "integer",
    "load_json",
    "plain_json",
    "plain_object",
    "shown",
    "USER_NAME",
    "user_name",
]

#: Deepest nesting a JSON value may have (objects and arrays); deeper is refused, as
#: decoding or encoding it again (in a worker, in a provider) could exceed Python's stack.
JSON_DEPTH_MAX = 64

#: Characters refused in multi-line text: control characters but tab, LF and CR; surrogates.
_TEXT_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")
#: … in one-line text: also every line break (LF, CR, VT, FF, NEL, U+2028, U+2029).
_LINE_BAD = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
#: … in names, ids and keys: every control character, line or paragraph separator, surrogate.
_NAME_BAD = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def bad_character(text: str, *, one_line: bool = False, name: bool = False) -> str | None:
    """A description of the first character ``text`` may not hold (None when it has none)."""
    if text.isprintable():  # the common case, in C: no control, separator or surrogate
        return None
    pattern = _NAME_BAD if name else _LINE_BAD if one_line else _TEXT_BAD
    found = pattern.search(text)
    if found is None:
        return None
    char = found.group()
    where = f"at position {found.start()}"
    if "\ud800" <= char <= "\udfff":
        return f"a lone surrogate {char!r} {where} (not valid UTF-8)"
    if char == "\x00":
        return f"a NUL character {where}"
    if char in "\n\r\x0b\x0c\x85\u2028\u2029":
        return f"a line break {char!r} {where}"
    return f"the control character {char!r} {where}"


def check_text(value: object, *, what: str, code: str, max_len: int, one_line: bool = False) -> str:
    """``value`` when it is non-blank text of at most ``max_len`` characters that
    :func:`bad_character` accepts.

    Raises:
        InvalidInput: with ``code``, naming ``what``.
    """
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"{what} must be non-empty text", code=code)
    if len(value) > max_len:
        raise InvalidInput(f"{what} is {len(value)} characters long; the limit is {max_len}", code=code)
    problem = bad_character(value, one_line=one_line)
    if problem is not None:
        raise InvalidInput(f"{what} must not contain {problem}", code=code)
    return value


def check_line(value: object, *, what: str, code: str, max_len: int) -> str:
    """:func:`check_text` for a one-line value."""
    return check_text(value, what=what, code=code, max_len=max_len, one_line=True)


def check_name(value: object, *, what: str, code: str, max_len: int, spaces: bool = True) -> str:
    """``value`` when it is a string of 1 to ``max_len`` characters with no control
    character, line break or surrogate (and, unless ``spaces``, no white space at all).

    Raises:
        InvalidInput: with ``code``, naming ``what``.
    """
    if not isinstance(value, str) or not value:
        raise InvalidInput(f"{what} must be a non-empty string, got {shown(value)}", code=code)
    if len(value) > max_len:
        raise InvalidInput(f"{what} is {len(value)} characters long; the limit is {max_len}", code=code)
    problem = bad_character(value, name=True)
    if problem is None and not spaces and any(c.isspace() for c in value):
        problem = "white space"
    if problem is not None:
        raise InvalidInput(f"{what} must not contain {problem}", code=code)
    return value


def shown(value: object) -> str:
    """``repr(value)``, cut to 80 characters (for error messages)."""
    try:
        text = repr(value)
    except ValueError:  # an integer of more than 4,300 digits
        return f"an integer of {value.bit_length()} bits" if isinstance(value, int) else "a value"
    except RecursionError:
        return f"a {type(value).__name__} nested too deeply to show"
    return text if len(text) <= 80 else text[:77] + "..."


def finite_number(
    value: object,
    *,
    what: str,
    code: str,
    minimum: float | None = None,
    maximum: float | None = None,
    above: float | None = None,
) -> float:
    """``value`` as a float when it is an int or float (not a bool), finite, and within
    ``minimum`` <= value <= ``maximum`` (and > ``above`` when given).

    Raises:
        InvalidInput: with ``code``, naming ``what``.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInput(f"{what} must be a number, got {shown(value)}", code=code)
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if (
        not math.isfinite(number)
        or (minimum is not None and number < minimum)
        or (maximum is not None and number > maximum)
        or (above is not None and number <= above)
    ):
        low = f"above {above}" if above is not None else f"from {minimum}" if minimum is not None else ""
        high = f" to {maximum}" if maximum is not None else ""
        raise InvalidInput(f"{what} must be a finite number {low}{high}, got {shown(value)}", code=code)
    return number


def integer(
    value: object,
    *,
    what: str,
    code: str,
    minimum: int | None = None,
    maximum: int | None = None,
    digits: bool = False,
) -> int:
    """``value`` when it is an int (not a bool) within ``minimum`` … ``maximum``; with
    ``digits``, a string of at most 20 decimal digits (and a sign) is read as one too.

    Raises:
        InvalidInput: with ``code``, naming ``what``.
    """
    number: object = value
    if digits and isinstance(value, str):
        # ASCII blanks only: re's \s also takes control characters (\x1c-\x1f) that int()
        # refuses, which raised a ValueError instead of the input error
        text = value.strip(" \t\r\n")
        if re.fullmatch(r"[+-]?[0-9]{1,20}", text):
            number = int(text)
    if (
        isinstance(number, bool)
        or not isinstance(number, int)
        or (minimum is not None and number < minimum)
        or (maximum is not None and number > maximum)
    ):
        low = f" from {minimum}" if minimum is not None else ""
        high = f" to {maximum}" if maximum is not None else ""
        raise InvalidInput(f"{what} must be an integer{low}{high}, got {shown(value)}", code=code)
    return number


#: ``json.dumps(value, ensure_ascii=False, allow_nan=False)``, without building an encoder
#: per call (that is half the cost of checking a small object).
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def load_json(text: str | bytes, *, what: str, code: str) -> Any:
    """The value of the JSON document ``text``, refusing what :func:`plain_json` refuses.

    Raises:
        InvalidInput: with ``code``: not JSON, not UTF-8, NaN or Infinity, too deep.
    """
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        raise InvalidInput(f"{what} is nested more than {JSON_DEPTH_MAX} levels deep", code=code) from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, a 5,000-digit integer
        raise InvalidInput(f"{what} is not valid JSON: {exc}", code=code) from None


def _shape_problem(value: Any, limit: int) -> str | None:
    """What makes ``value`` unfit to carry as JSON as it is (one walk, no recursion):
    ``"deep"`` (more than ``limit`` levels), ``"keys"`` (a key that is not a string), None."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return "deep"
        if isinstance(item, dict):
            for key, child in item.items():
                if not isinstance(key, str):
                    return "keys"
                if isinstance(child, (dict, list)):
                    stack.append((child, depth + 1))
        else:
            stack.extend((child, depth + 1) for child in item if isinstance(child, (dict, list)))
    return None


def plain_json(value: object, *, what: str, code: str, max_bytes: int) -> tuple[dict[str, Any], str]:
    """``(value, its JSON text)`` when ``value`` (an object, or a JSON text or bytes of one)
    is a plain JSON object of at most ``max_bytes`` bytes as UTF-8 (see the module).

    Raises:
        InvalidInput: with ``code``, naming ``what``.
    """
    if isinstance(value, (str, bytes)):
        value = load_json(value, what=what, code=code)
    if not isinstance(value, dict):
        raise InvalidInput(f"{what} must be a JSON object, got {type(value).__name__}", code=code)
    try:
        text = _ENCODER.encode(value)
        size = len(text.encode())
    except RecursionError:
        raise InvalidInput(f"{what} is nested more than {JSON_DEPTH_MAX} levels deep", code=code) from None
    except (TypeError, ValueError) as exc:  # a set, NaN, a lone surrogate, a 5,000-digit integer
        raise InvalidInput(f"{what} cannot be encoded as JSON: {exc}", code=code) from None
    if size > max_bytes:
        raise InvalidInput(f"{what} is {size} bytes as JSON; the limit is {max_bytes}", code=code)
    check_json_shape(value, what=what, code=code)
    return value, text


_DURATION = re.compile(r"([0-9]{1,7})\s*(s|m|h|d)")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def duration_ms(
    value: object, *, what: str, code: str, minimum_s: float = 1, maximum_s: float = 7 * 86400
) -> int:
    """``value`` as milliseconds: seconds (a number), or text such as ``"90s"``, ``"10m"``,
    ``"2h"``, ``"1d"``; from ``minimum_s`` to ``maximum_s`` (1 s to 7 days unless given).

    Raises:
        InvalidInput: with ``code``, naming ``what``.
    """
    seconds: float
    if isinstance(value, str) and (match := _DURATION.fullmatch(value.strip())):
        seconds = int(match.group(1)) * _UNIT_S[match.group(2)]
    elif isinstance(value, int | float) and not isinstance(value, bool) and value == value:
        seconds = float(value)
    else:
        raise InvalidInput(f"{what} is seconds or text such as 10m, 2h, 1d, got {shown(value)}", code=code)
    if not minimum_s <= seconds <= maximum_s:
        raise InvalidInput(
            f"a {what} is {_span(minimum_s)} to {_span(maximum_s)}, got {shown(value)}", code=code
        )
    return int(seconds * 1000)


def _span(seconds: float) -> str:
    if seconds >= 86400 and seconds % 86400 == 0:
        return f"{int(seconds // 86400)} days" if seconds != 86400 else "1 day"
    return f"{seconds:g} s"


#: Integers the flat-object fast path takes as they are (JSON's safe range).
_FLAT_INT_MAX = 2**53


def _flat_bound(value: dict[Any, Any], max_bytes: int) -> bool:
    """True when ``value`` is a flat object of ASCII strings, small integers, finite floats,
    booleans and None whose JSON text is surely at most ``max_bytes`` bytes (every character
    counted as the six an escape takes): :func:`plain_json` would accept it as it is."""
    if len(value) > max_bytes // 8:
        return False
    bound = 2
    for key, item in value.items():
        if type(key) is not str or not key.isascii():
            return False
        kind = type(item)
        if kind is str:
            if not item.isascii():
                return False
            bound += 6 * (len(key) + len(item)) + 6
        elif item is None or kind is bool or (kind is int and -_FLAT_INT_MAX < item < _FLAT_INT_MAX):
            bound += 6 * len(key) + 24
        elif kind is float and math.isfinite(item):
            bound += 6 * len(key) + 32
        else:
            return False
        if bound > max_bytes:
            return False
    return True


def plain_object(value: object, *, what: str, code: str, max_bytes: int) -> dict[str, Any]:
    """``value`` when :func:`plain_json` would accept it, without its JSON text: a small flat
    object of plain values is known good without encoding it (measured reason: bench
    scenario 19, ``notify(recipient=…, data=…)``, where encoding ``data`` only to weigh it
    was a third of checking a call's arguments); anything else is :func:`plain_json`'s.

    Raises:
        InvalidInput: as :func:`plain_json`.
    """
    if type(value) is dict and _flat_bound(value, max_bytes):
        return value
    return plain_json(value, what=what, code=code, max_bytes=max_bytes)[0]


def check_json_shape(value: Any, *, what: str, code: str) -> None:
    """Refuse a value JSON could encode but not carry as it is: nested more
    than :data:`JSON_DEPTH_MAX` levels, or with keys that are not strings (``{1: 2}``
    would come back as ``{"1": 2}``).

    Raises:
        InvalidInput: with ``code``, naming ``what``.
    """
    problem = _shape_problem(value, JSON_DEPTH_MAX)
    if problem == "deep":
        raise InvalidInput(f"{what} is nested more than {JSON_DEPTH_MAX} levels deep", code=code)
    if problem == "keys":
        raise InvalidInput(
            f"{what} must have string keys only (JSON would turn the others into text)", code=code
        )


#: User names: parts of Redis keys (``noti:idx:user:<name>``), so no ``:``, space or control.
USER_NAME = re.compile(r"[A-Za-z0-9_.@+-]{1,64}")
#: What a sender-number pool's name may be (it goes inside the keys' hash tag: never a brace).
POOL_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
#: What a pool's key base (``numpool_keys``) may be: one hash tag ``{…}``, no space or other brace.
POOL_KEY_BASE = re.compile(r"[^\s{}]{0,100}\{[^\s{}]{1,100}\}[^\s{}]{0,100}")


def user_name(value: object, *, code: str = "e.cmd.noti.baduser") -> str:
    """``value`` when it is a user name: 1-64 letters, digits or ``_ . @ + -`` (nothing
    else, not even a trailing newline).

    Raises:
        InvalidInput: with ``code`` (``e.cmd.noti.baduser``).
    """
    if not isinstance(value, str) or not USER_NAME.fullmatch(value):
        raise InvalidInput(f"user name {shown(value)} must be 1-64 letters, digits or _ . @ + -", code=code)
    return value


def could_be_id(value: object, max_len: int = 200) -> bool:
    """Whether ``value`` could name something noti stored (a record id, an identifier, an
    event id): a string of 1 to ``max_len`` characters with no control character, line
    break or surrogate. Look-ups answer "not found" for anything else without asking Redis
    (a lone surrogate cannot even be sent to it)."""
    return isinstance(value, str) and 0 < len(value) <= max_len and _NAME_BAD.search(value) is None
