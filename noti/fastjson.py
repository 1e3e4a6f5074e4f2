"""JSON on the delivery path, with msgspec where it is installed (the ``fast`` extra) and the
standard library's ``json`` where it is not, giving the same values either way.

Measured reason (issue 38, ``bench.profile_bench``): a batch worker spent about a tenth of
its CPU in ``json`` (each message's kombu envelope and body decoded, each timeline step
encoded). msgspec decodes an envelope in 1.4 µs against 5.1 and encodes a step in 0.5 µs
against 7.7 (same machine; orjson, as fast, reads an integer past 64 bits as a float, so it
would not read the same values).

- :func:`loads` answers what ``json.loads`` answers: where msgspec refuses a text the
  standard library takes (``NaN``, ``Infinity``, a lone surrogate) or that is no JSON at
  all, the standard library decides (and raises its own ``JSONDecodeError``).
- :func:`dumps` writes compact JSON with non-ASCII characters as they are, as
  ``json.dumps(value, separators=(",", ":"), ensure_ascii=False)`` does, for values made of
  JSON's own types (dicts, lists, tuples, strings, numbers, booleans, None: what noti passes
  it); where msgspec refuses one (a ``None`` or boolean key, a lone surrogate, a value that
  contains itself) the standard library writes it or raises its error. Floats may be spelled
  differently (``1e+300`` as ``1e300``, ``1e-05`` as ``0.00001``: the same numbers read back),
  infinities and ``NaN`` are written ``null`` (``json`` writes ``Infinity``, which is no
  JSON), and a few types ``json`` refuses msgspec writes (datetimes, bytes, sets,
  dataclasses, a plain ``Enum`` member): noti writes none of these.

``NOTI_PURE_JSON=1`` uses the standard library even where msgspec is installed (the tests run
both ways; :data:`FAST` says which is in use).
"""

from __future__ import annotations

import json
import os
from typing import Any

__all__ = ["FAST", "dumps", "loads"]

try:
    if os.environ.get("NOTI_PURE_JSON") == "1":
        raise ImportError("NOTI_PURE_JSON=1")
    import msgspec
except ImportError:  # the standard library's json only
    msgspec = None  # type: ignore[assignment]

#: Whether msgspec is in use.
FAST = msgspec is not None

_std_loads = json.loads
_std_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode

if msgspec is not None:
    _decode = msgspec.json.Decoder().decode
    _encode = msgspec.json.Encoder().encode
    _DecodeError = msgspec.DecodeError
    _ENCODE_ERRORS = (msgspec.EncodeError, TypeError, ValueError, RecursionError)

    def loads(text: bytes | str) -> Any:
        """The value of the JSON ``text`` (see the module).

        Raises:
            json.JSONDecodeError: ``text`` is no JSON.
        """
        try:
            return _decode(text)
        except _DecodeError:
            return _std_loads(text)

    def dumps(value: Any) -> str:
        """``value`` as compact JSON text (see the module).

        Raises:
            TypeError: a value JSON cannot hold.
            ValueError: a value that contains itself.
        """
        try:
            return _encode(value).decode()
        except _ENCODE_ERRORS:
            return _std_dumps(value)

else:

    def loads(text: bytes | str) -> Any:
        """The value of the JSON ``text`` (see the module).

        Raises:
            json.JSONDecodeError: ``text`` is no JSON.
        """
        return _std_loads(text)

    def dumps(value: Any) -> str:
        """``value`` as compact JSON text (see the module).

        Raises:
            TypeError: a value JSON cannot hold.
            ValueError: a value that contains itself.
        """
        return _std_dumps(value)
