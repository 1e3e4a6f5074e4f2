"""Locale tags: a subset of BCP 47 (RFC 5646) that names languages as people and vendors
write them, and the fallback chain a template's variants are looked up in.

A tag is ``language[-Script][-REGION][-variant]*``: a language of 2-3 letters (``zh``,
``yue``), an optional script of 4 letters (``Hant``, ``Latn``), an optional region of 2
letters or 3 digits (``TW``, ``419``) and variants of 5-8 letters and digits, or a digit and
3 letters and digits (``1996``, ``rozaj``); at most 35 characters. ``_`` is read as ``-``
(``zh_Hant_TW``, as POSIX locales and Java write it), and each part takes its canonical case
(``zh-Hant-TW``, ``en-US``, ``sr-Latn-RS``, ``de-DE-1996``), so two spellings of one tag are
one key. Extended languages, extensions and private use (``zh-yue``, ``en-u-ca-gregory``,
``x-klingon``) are refused: no template or profile needs them, and each refused form is one
less way to spell a key twice.
"""

from __future__ import annotations

import functools
import re

from noti.errors import InvalidInput
from noti.inputs import shown

__all__ = ["LOCALE_MAX", "fallback_chain", "parse_locale"]

#: The longest tag accepted (RFC 5646 asks every implementation to take at least 35).
LOCALE_MAX = 35
_CODE = "e.cmd.noti.rcpt.badlocale"
_TAG = re.compile(
    r"(?P<language>[A-Za-z]{2,3})"
    r"(?:-(?P<script>[A-Za-z]{4}))?"
    r"(?:-(?P<region>[A-Za-z]{2}|[0-9]{3}))?"
    r"(?P<variants>(?:-(?:[A-Za-z0-9]{5,8}|[0-9][A-Za-z0-9]{3}))*)",
    re.ASCII,
)


def parse_locale(value: object) -> str:
    """``value`` as a canonical locale tag (see the module docstring): ``"zh_hant_tw"`` ->
    ``"zh-Hant-TW"``.

    Raises:
        InvalidInput: ``e.cmd.noti.rcpt.badlocale``: not a string, longer than
        :data:`LOCALE_MAX`, or not of the accepted form (a variant given twice included).
    """
    if not isinstance(value, str) or not 2 <= len(value) <= LOCALE_MAX:
        raise InvalidInput(
            f"a locale is a language tag of 2-{LOCALE_MAX} characters (en, zh-Hant-TW), got {shown(value)}",
            code=_CODE,
        )
    return _canonical(value)


@functools.lru_cache(maxsize=1024)
def _canonical(value: str) -> str:
    found = _TAG.fullmatch(value.replace("_", "-"))
    if found is None:
        raise InvalidInput(
            f"{shown(value)} is not a locale: write language[-Script][-REGION][-variant] "
            "(en, en-US, zh-Hant-TW, sr-Latn-RS)",
            code=_CODE,
        )
    parts = [found["language"].lower()]
    if found["script"]:
        parts.append(found["script"].title())
    if found["region"]:
        parts.append(found["region"].upper())
    variants = [v.lower() for v in found["variants"].split("-")[1:]]
    if len(set(variants)) != len(variants):
        raise InvalidInput(f"{shown(value)} is not a locale: it repeats a variant", code=_CODE)
    return "-".join([*parts, *variants])


@functools.lru_cache(maxsize=1024)
def fallback_chain(locale: str) -> tuple[str, ...]:
    """The tags to look ``locale`` up by, most specific first, each dropping the last subtag
    of the one before: ``zh-Hant-TW`` -> ``(zh-Hant-TW, zh-Hant, zh)``. ``locale`` is read as
    :func:`parse_locale` reads it.

    Raises:
        InvalidInput: ``e.cmd.noti.rcpt.badlocale``, as :func:`parse_locale`.
    """
    parts = parse_locale(locale).split("-")
    return tuple("-".join(parts[:n]) for n in range(len(parts), 0, -1))
