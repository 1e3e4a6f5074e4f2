"""Defaults written in the documentation are the code's: every "`option` (default N)" in
README.md and docs/**/*.md that names an option of a provider's options model, of the settings
or of a channel's settings gives that option's default as N (issue 20: the docs said
refresh_wait_s defaults to 5 while the code used 15). The provider pages must keep writing
their defaults that way, so that the check has something to check."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from noti.config import ChannelSettings, Settings
from noti.providers import BUILTIN, load_kind

ROOT = Path(__file__).resolve().parent.parent
#: "`name` (default value)" as the documentation writes a default.
DEFAULT = re.compile(r"`([a-z_][a-z0-9_]*)` \(default ([^)]+)\)")


def documented_defaults() -> dict[str, list[Any]]:
    """Each option name and the defaults it has in the code (a name may be several kinds')."""
    models: list[type[BaseModel]] = [Settings, ChannelSettings]
    models += [load_kind(kind).Options for kind in BUILTIN]
    found: dict[str, list[Any]] = {}
    for model in models:
        for name, info in model.model_fields.items():
            if info.default is not PydanticUndefined:
                found.setdefault(name, []).append(info.default)
            elif info.default_factory is not None:
                found.setdefault(name, []).append(info.default_factory())  # type: ignore[call-arg]
    return found


def same(written: str, default: Any) -> bool:
    text = written.strip().strip("`\"'")
    if isinstance(default, bool):
        return text.lower() == str(default).lower()
    if isinstance(default, int | float):
        try:
            return float(text.split()[0].rstrip("s")) == float(default)
        except ValueError:
            return False
    return text == str(default)


PROVIDER_PAGES = ROOT / "docs" / "channels"


def pages() -> list[Any]:
    docs = sorted((ROOT / "docs").glob("**/*.md"))
    return [pytest.param(p, id=str(p.relative_to(ROOT))) for p in [ROOT / "README.md", *docs]]


@pytest.mark.parametrize("page", pages())
def test_documented_defaults_are_the_codes(page: Path) -> None:
    code = documented_defaults()
    wrong = []
    for n, line in enumerate(page.read_text().splitlines(), 1):
        for name, written in DEFAULT.findall(line):
            if name in code and not any(same(written, d) for d in code[name]):
                wrong.append(f"{page.name}:{n}: `{name}` (default {written}); the code: {code[name]}")
    assert wrong == []


def test_the_provider_pages_write_their_defaults_so_they_are_checked() -> None:
    written = {
        name
        for page in PROVIDER_PAGES.glob("*.md")
        for line in page.read_text().splitlines()
        for name, _ in DEFAULT.findall(line)
    }
    expected = {"refresh_wait_s", "refresh_grace_s", "flow_limit_wait_s", "timeout_s", "region", "base_url"}
    assert expected <= written, sorted(expected - written)


def test_the_checker_sees_a_wrong_default() -> None:
    code = documented_defaults()
    assert code["refresh_wait_s"] == [15.0] and not same("5", 15.0) and same("15", 15.0)
    assert DEFAULT.findall("others wait up to `refresh_wait_s` (default 5) for it") == [
        ("refresh_wait_s", "5")
    ]
    assert any(same("cn-hangzhou", d) for d in code["region"])
