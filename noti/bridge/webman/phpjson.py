"""PHP's JSON and scalar rules, as far as the webman wire format depends on them.

* :func:`encode` gives the bytes of PHP 8 ``json_encode($value)`` with default flags
  (layout.md §4.2): ASCII only with lowercase ``\\uXXXX`` escapes, ``\\/`` for ``/``, floats in
  the shortest round-trip form without ``.0``, and an empty array as ``[]``.
* :func:`decode` is ``json_decode($text, true)``: strict RFC 8259 (no NaN, no lone
  surrogates, depth at most 512), integers beyond 64 bits become floats.
* :func:`to_int` and :func:`to_str` are PHP's coercive typing of a value passed to an ``int``
  or ``string`` parameter, which is how the plugin's typed ``QueueMessage`` constructor reads
  a decoded message; :func:`loose_equals` is PHP 8's ``==`` against a string.

PHP arrays are Python lists (keys ``0..n-1``) and dicts; a dict whose keys are ``"0"``,
``"1"`` … in order is what PHP holds as a list, so :func:`encode` writes it as one.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

__all__ = [
    "INT_MAX",
    "INT_MIN",
    "big_int_as_float",
    "PhpJsonError",
    "PhpTypeError",
    "decode",
    "encode",
    "float_repr",
    "is_list_like",
    "loose_equals",
    "numeric_prefix",
    "to_int",
    "to_str",
]

INT_MAX = 2**63 - 1
INT_MIN = -(2**63)
#: ``json_decode``'s default depth: arrays and objects nested deeper are an error.
MAX_DEPTH = 512

_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")
#: ``\u007f`` preceded by an even number of backslashes: an escaped DEL, which PHP writes raw.
_ESCAPED_DEL = re.compile(r"(?<!\\)((?:\\\\)*)\\u007f")
_WS = " \t\n\r\v\f"
_NUMERIC = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


class PhpJsonError(ValueError):
    """``json_encode`` / ``json_decode`` would fail on this value or text."""


class PhpTypeError(TypeError):
    """PHP's coercive typing would throw a ``TypeError`` for this value."""


# --- encoding ---------------------------------------------------------------------------------


def encode(value: Any) -> str:
    """``json_encode($value)`` as PHP 8 writes it.

    Raises:
        PhpJsonError: a value PHP cannot encode (INF/NaN, a lone surrogate, an unsupported type).
    """
    if _plain(value, 0):  # what Python's C encoder writes as PHP does, but for "/"
        text = _C_ENCODE(value).replace("/", "\\/")  # "/" only occurs inside strings
        if "\\u" not in text or not _UNSAFE_ESCAPE.search(text):
            return text
    parts: list[str] = []
    _encode_into(value, parts, 0)
    return "".join(parts)


#: How deep :func:`_plain` looks (three Python frames a level: far below the recursion limit).
_PLAIN_DEPTH = 64
_C_ENCODE = json.JSONEncoder(ensure_ascii=True, separators=(",", ":"), check_circular=False).encode
#: Escapes the C encoder writes where PHP differs or fails: DEL (PHP writes it raw) and
#: surrogates (PHP fails on a lone one); text holding them takes the slow path.
_UNSAFE_ESCAPE = re.compile(r"\\u(?:d[89a-f]|007f)")


def _plain(value: Any, depth: int) -> bool:
    """Whether ``value`` holds only what the C encoder writes exactly as PHP: strings,
    None, booleans, 64-bit ints, lists, and non-empty dicts with string keys that PHP does
    not hold as a list (no floats: PHP prints them its own way)."""
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return True
    if kind is int:
        return bool(INT_MIN <= value <= INT_MAX)
    if depth >= _PLAIN_DEPTH:  # deep values take the slow path (it handles PHP's 512 limit)
        return False
    if kind is list or kind is tuple:
        return all(_plain(item, depth + 1) for item in value)
    if kind is dict:
        if not value or next(iter(value)) in ("0", 0):  # [] or perhaps list-like: the slow path
            return False
        return all(type(key) is str and _plain(item, depth + 1) for key, item in value.items())
    return False


def big_int_as_float(value: int) -> float:
    """An integer beyond 64 bits as PHP holds it: the float ``json_decode`` reads it as.

    Raises:
        PhpJsonError: too large even for a float (PHP reads INF, which ``json_encode`` refuses).
    """
    try:
        return float(value)
    except OverflowError:
        bits = value.bit_length()
        raise PhpJsonError(f"an integer of {bits} bits is beyond a float (PHP reads INF)") from None


def _encode_float(value: float) -> str:
    if not math.isfinite(value):
        raise PhpJsonError(f"{value} cannot be encoded (json_encode fails on INF and NAN)")
    return float_repr(value)


def _encode_into(value: Any, out: list[str], depth: int) -> None:
    if depth > MAX_DEPTH:
        raise PhpJsonError(f"nesting deeper than {MAX_DEPTH}")
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        if INT_MIN <= value <= INT_MAX:
            out.append(str(value))
        else:  # PHP holds no such int: its json_decode made it a float, and writes it as one
            out.append(_encode_float(big_int_as_float(value)))
    elif isinstance(value, float):
        out.append(_encode_float(value))
    elif isinstance(value, str):
        out.append(_encode_str(value))
    elif isinstance(value, list | tuple):
        if not value:
            out.append("[]")
            return
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _encode_into(item, out, depth + 1)
        out.append("]")
    elif isinstance(value, dict):
        if is_list_like(value):
            _encode_into(list(value.values()), out, depth)
            return
        out.append("{")
        for i, (key, item) in enumerate(value.items()):
            if i:
                out.append(",")
            if isinstance(key, bool) or not isinstance(key, str | int):
                raise PhpJsonError(f"object key {key!r} is not a string or an integer")
            out.append(_encode_str(str(key)))
            out.append(":")
            _encode_into(item, out, depth + 1)
        out.append("}")
    else:
        raise PhpJsonError(f"{type(value).__name__} cannot be encoded as JSON")


def _encode_str(text: str) -> str:
    if _LONE_SURROGATE.search(text):
        raise PhpJsonError("a string holds a lone surrogate, which is not valid UTF-8")
    escaped = json.dumps(text, ensure_ascii=True).replace("/", "\\/")
    return _ESCAPED_DEL.sub(lambda m: m.group(1) + "\x7f", escaped) if "\x7f" in text else escaped


def is_list_like(value: dict[Any, Any]) -> bool:
    """Whether PHP holds ``value`` as a list: empty, or keys ``0, 1, … n-1`` in this order."""
    for expected, key in enumerate(value):
        if isinstance(key, bool):
            return False
        if isinstance(key, int):
            if key != expected:
                return False
        elif not (isinstance(key, str) and key == str(expected)):
            return False
    return True


def float_repr(value: float, *, precision: int = 0) -> str:
    """A float as PHP prints it: ``json_encode`` (``precision=0``: shortest round trip, exponent
    ``e``) or string conversion (``precision=14``, PHP's ``precision`` ini default, exponent ``E``).
    """
    if math.isnan(value):
        return "NAN"
    if math.isinf(value):
        return "INF" if value > 0 else "-INF"
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    digits, decpt = _digits(abs(value), precision)
    ndigit = precision or 17
    exp_char = "E" if precision else "e"
    if digits == "0":
        return sign + "0"
    if decpt < -3 or decpt > ndigit:  # zend_gcvt: exponential form, always with a fraction
        exponent = decpt - 1
        mantissa = digits[0] + "." + (digits[1:] or "0")
        return f"{sign}{mantissa}{exp_char}{'-' if exponent < 0 else '+'}{abs(exponent)}"
    if decpt <= 0:
        return f"{sign}0.{'0' * -decpt}{digits}"
    whole = digits[:decpt].ljust(decpt, "0")
    fraction = digits[decpt:]
    return f"{sign}{whole}.{fraction}" if fraction else sign + whole


def _digits(value: float, precision: int) -> tuple[str, int]:
    """Significant digits (no trailing zeros) and the decimal point position: ``0.DIGITS × 10^decpt``."""
    if value == 0:
        return "0", 1
    text = f"{value:.{precision - 1}e}" if precision else repr(value)
    mantissa, _, exp = text.partition("e")
    whole, _, fraction = mantissa.partition(".")
    raw = whole + fraction
    stripped = raw.lstrip("0")
    decpt = len(whole) - (len(raw) - len(stripped)) + (int(exp) if exp else 0)
    return stripped.rstrip("0") or "0", decpt


# --- decoding ---------------------------------------------------------------------------------


def decode(text: str) -> Any:
    """``json_decode($text, true)``: objects become dicts, big integers floats.

    Raises:
        PhpJsonError: PHP's decoder returns null with an error for this text.
    """
    try:
        value = json.loads(text, parse_int=_parse_int, parse_constant=_reject_constant)
    except RecursionError:
        raise PhpJsonError(f"nesting deeper than {MAX_DEPTH}") from None
    except json.JSONDecodeError as exc:
        raise PhpJsonError(f"syntax error: {exc}") from None
    _check_decoded(value)
    return value


def _parse_int(text: str) -> int | float:
    number = int(text)
    return number if INT_MIN <= number <= INT_MAX else float(text)


def _reject_constant(name: str) -> Any:
    raise PhpJsonError(f"{name} is not JSON")


def _check_decoded(value: Any) -> None:
    """Depth at most 512 and no lone surrogate from a ``\\uXXXX`` escape, as PHP checks."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if _LONE_SURROGATE.search(item):
                raise PhpJsonError("single unpaired UTF-16 surrogate")
        elif isinstance(item, dict | list):
            if depth + 1 > MAX_DEPTH:
                raise PhpJsonError(f"nesting deeper than {MAX_DEPTH}")
            children = list(item.items()) if isinstance(item, dict) else [(None, v) for v in item]
            for key, child in children:
                if key is not None:
                    stack.append((key, depth + 1))
                stack.append((child, depth + 1))


# --- coercive typing --------------------------------------------------------------------------


def numeric_prefix(text: str) -> tuple[int | float, bool] | None:
    """PHP's numeric-string reading: the number and whether non-blank text followed it.

    Leading and trailing white space is allowed; ``"12abc"`` gives ``(12, True)`` (accepted with
    a warning), ``"abc"`` gives None. An integer that overflows 64 bits is read as a float.
    """
    match = _NUMERIC.match(text.lstrip(_WS))
    if match is None:
        return None
    literal = match.group()
    rest = text.lstrip(_WS)[match.end() :]
    trailing = bool(rest.strip(_WS))
    if any(c in literal for c in ".eE"):
        return float(literal), trailing
    number = int(literal)
    return (number if INT_MIN <= number <= INT_MAX else float(literal)), trailing


def _float_to_int(value: float) -> int:
    if math.isnan(value) or not (-(2.0**63) <= value < 2.0**63):
        raise PhpTypeError(f"float {float_repr(value)} does not fit an int")
    return int(value)  # truncation toward zero, with PHP's deprecation for a fraction


def to_int(value: Any) -> int:
    """``value`` passed to a PHP ``int`` parameter in coercive mode.

    Raises:
        PhpTypeError: PHP throws a TypeError (array, non-numeric string, float out of range).
    """
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return _float_to_int(value)
    if isinstance(value, str):
        parsed = numeric_prefix(value)
        if parsed is None:
            raise PhpTypeError(f"string {value[:40]!r} is not numeric")
        number = parsed[0]
        return number if isinstance(number, int) else _float_to_int(number)
    raise PhpTypeError(f"{_php_type(value)} given where an int is required")


def to_str(value: Any) -> str:
    """``value`` passed to a PHP ``string`` parameter in coercive mode.

    Raises:
        PhpTypeError: an array (PHP never converts arrays to strings there).
    """
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "1" if value else ""
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return float_repr(value, precision=14)
    raise PhpTypeError(f"{_php_type(value)} given where a string is required")


def loose_equals(value: Any, text: str) -> bool:
    """PHP 8 ``$value == $text`` for a JSON-decoded ``value`` and a string."""
    if isinstance(value, bool):
        return value == (text not in ("", "0"))
    if isinstance(value, str):
        left, right = numeric_prefix(value), numeric_prefix(text)
        if left is not None and right is not None and not left[1] and not right[1]:
            return left[0] == right[0]
        return value == text
    if isinstance(value, int | float):
        parsed = numeric_prefix(text)
        if parsed is not None and not parsed[1]:
            return value == parsed[0]
        return to_str(value) == text
    return False  # null is never isset; an array never equals a string


def _php_type(value: Any) -> str:
    if isinstance(value, dict | list):
        return "array"
    if value is None:
        return "null"
    return type(value).__name__
