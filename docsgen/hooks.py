"""MkDocs hook (mkdocs.yml ``hooks:``): expand ``<!-- generate: NAME -->`` lines at build time."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # MkDocs loads this file by path, not as part of a package
    sys.path.insert(0, str(ROOT))

from docsgen.reference import render  # noqa: E402


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Replace every generator marker of the page by the generated Markdown."""
    return render(markdown)
