"""noti's configuration file in a test: a TOML text written to a file NOTI_CONFIG names."""

from __future__ import annotations

from pathlib import Path

import pytest


def use_config(monkeypatch: pytest.MonkeyPatch, path: Path, toml: str) -> Path:
    """Write ``toml`` to ``path`` and make it the configuration file (NOTI_CONFIG, undone with
    ``monkeypatch``): the next ``load_settings()`` reads it. Returns ``path``."""
    path.write_text(toml)
    monkeypatch.setenv("NOTI_CONFIG", str(path))
    return path
