"""Locale tags (noti.recipients.locales): the BCP 47 subset, its canonical case, the refusals
and the fallback chain templates are looked up by."""

from __future__ import annotations

import pytest

from noti.errors import InvalidInput
from noti.recipients.locales import LOCALE_MAX, fallback_chain, parse_locale

#: a valid tag of exactly LOCALE_MAX characters, and one longer than that
LONGEST = "yue-Hant-419-abcdefgh-12345678-2abc"
TOO_LONG = "yue-Hant-419-abcdefgh-12345678-2abcd"


@pytest.mark.parametrize(
    ("given", "canonical"),
    [
        ("en", "en"),
        ("EN", "en"),
        ("en-us", "en-US"),
        ("en_US", "en-US"),
        ("zh-hant-tw", "zh-Hant-TW"),
        ("ZH_HANT_TW", "zh-Hant-TW"),
        ("zh-Hans", "zh-Hans"),
        ("sr-latn-rs", "sr-Latn-RS"),
        ("es-419", "es-419"),
        ("de-DE-1996", "de-DE-1996"),
        ("sl-ROZAJ", "sl-rozaj"),
        ("de-1996", "de-1996"),
        ("yue", "yue"),
        ("fil-PH", "fil-PH"),
        (LONGEST, LONGEST),
    ],
)
def test_a_tag_takes_its_canonical_case(given: str, canonical: str) -> None:
    assert parse_locale(given) == canonical


@pytest.mark.parametrize(
    "given",
    [
        None,
        5,
        b"en",
        ["en"],
        "",
        "e",
        "english",  # a language is 2-3 letters
        "en-",
        "-en",
        "en--US",
        "en US",
        " en",
        "en\n",
        "en\x00",
        "zh-yue",  # extended language subtags are not in the subset
        "en-u-ca-gregory",  # nor extensions
        "x-klingon",  # nor private use
        "en-Latn-Latn",
        "en-US-US",
        "en-1996-1996",  # a variant twice
        "ｅｎ",  # full-width letters
        "en-١٢٣",  # Arabic-Indic digits as a region
        "en-US-1abcdefgh",
        TOO_LONG,
        "en-" + "a" * 10_000,
    ],
)
def test_what_is_not_a_tag_of_the_subset_is_refused(given: object) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_locale(given)
    assert caught.value.code == "e.cmd.noti.rcpt.badlocale"


def test_the_longest_tags_are_at_the_limit() -> None:
    assert len(LONGEST) == LOCALE_MAX and len(TOO_LONG) == LOCALE_MAX + 1


@pytest.mark.parametrize(
    ("locale", "chain"),
    [
        ("zh-Hant-TW", ("zh-Hant-TW", "zh-Hant", "zh")),
        ("zh_hant_tw", ("zh-Hant-TW", "zh-Hant", "zh")),
        ("en-US", ("en-US", "en")),
        ("en", ("en",)),
        ("sr-Latn-RS", ("sr-Latn-RS", "sr-Latn", "sr")),
        ("de-DE-1996", ("de-DE-1996", "de-DE", "de")),
        ("es-419", ("es-419", "es")),
    ],
)
def test_the_fallback_chain_drops_one_subtag_at_a_time(locale: str, chain: tuple[str, ...]) -> None:
    assert fallback_chain(locale) == chain


def test_the_fallback_chain_of_what_is_not_a_tag_is_refused() -> None:
    with pytest.raises(InvalidInput) as caught:
        fallback_chain("zh-yue")
    assert caught.value.code == "e.cmd.noti.rcpt.badlocale"
