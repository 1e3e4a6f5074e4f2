"""The documentation site: generated references match the code, hand-written tables name only
what exists, the README stays a front door. ``make docs`` (and CI) builds the site itself with
``mkdocs build --strict``; these tests check what the pages say, without MkDocs."""

from __future__ import annotations

import re
import typing
from pathlib import Path

import click
import pytest
from pydantic import BaseModel

from docsgen.reference import GENERATORS, MARKER, page, pages, source_codes
from tests.test_hostile_input import documented_codes

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def test_every_marker_names_a_generator_and_every_generator_is_used() -> None:
    used = {m for text in (p.read_text() for p in DOCS.rglob("*.md")) for m in MARKER.findall(text)}
    assert used == set(GENERATORS)
    for text in pages().values():
        assert "<!-- generate:" not in text


def test_the_settings_reference_lists_every_setting_with_its_default() -> None:
    from noti.config import ChannelSettings, Settings

    shown = page("reference/settings.md")

    def names(model: type[BaseModel], env: str) -> list[str]:
        out = []
        for name, field in model.model_fields.items():
            if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
                out += names(field.annotation, f"{env}{name.upper()}__")
            elif typing.get_origin(field.annotation) is not dict or env:
                out.append(f"{env}{name.upper()}")
        return out

    for variable in names(Settings, "NOTI_"):
        if variable in ("NOTI_CHANNELS", "NOTI_PROVIDERS"):
            continue
        assert f"| `{variable}` |" in shown, variable
    row = next(line for line in shown.splitlines() if line.startswith("| `NOTI_RETRY_MAX` |"))
    assert f"`{Settings.model_fields['retry_max'].default}`" in row
    for key in ChannelSettings.model_fields:
        assert f"| `{key}` |" in shown


def test_the_cli_reference_has_every_command() -> None:
    from noti.cli import cli

    shown = page("reference/cli.md")
    ctx = click.Context(cli)
    for name in cli.list_commands(ctx):
        command = cli.get_command(ctx, name)
        assert command is not None
        assert f"# noti {name}\n" in shown, name
        if isinstance(command, click.Group):
            for sub in command.list_commands(click.Context(command, parent=ctx)):
                assert f"# noti {name} {sub}\n" in shown, (name, sub)
    assert "Usage: noti add" in shown


def test_the_error_reference_names_only_codes_that_exist() -> None:
    """The hand-written table of when each code is raised names no code the source lost."""
    in_source = set(source_codes())
    patterns = [
        re.compile(
            re.escape(c)
            .replace(re.escape("<"), "<")
            .replace("<verb>", r"\w+")
            .replace("<event>", r"\w+")
            .replace("<code>", r"\w+")
        )
        for c in in_source
        if "<" in c
    ]
    text = (DOCS / "reference/errors.md").read_text()
    hand_written = text[text.index("## When each code is raised") : text.index("## Every code in the source")]
    stale = sorted(
        c
        for c in documented_codes(hand_written)
        if c not in in_source and not any(p.fullmatch(c) for p in patterns)
    )
    assert not stale, f"codes the error reference names that the source no longer has: {stale}"
    shown = page("reference/errors.md")
    assert "`e.noti.store.unavailable`" in shown and "`InvalidInput`" in shown


def test_the_keys_reference_shows_the_keys_the_code_builds() -> None:
    from noti.core.keys import Keys

    shown = page("reference/keys.md")
    keys = Keys()
    assert f"`{keys.record('<record_id>')}`" in shown
    assert f"`{keys.delayed}`" in shown
    assert f"`{keys.dead_letters}`" in shown


@pytest.mark.parametrize("path", [*sorted(pages()), "../README.md"])
def test_no_in_house_words_and_no_files_outside_the_repository(path: str) -> None:
    """Pages as built (generated parts included) and the README."""
    text = (ROOT / "README.md").read_text() if path == "../README.md" else pages()[path]
    for word in ("the seed", "seed's", "performance issue", "shared/", "(seed 00"):
        assert word not in text, (path, word)


def test_the_readme_is_a_front_door() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    assert "make run" in text and "make test" in text and "make docs" in text
    assert text.count("```") % 2 == 0
    assert max(len(line) for line in text.splitlines()) <= 200
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
        if not target.startswith("http"):
            assert (ROOT / target).exists(), target
