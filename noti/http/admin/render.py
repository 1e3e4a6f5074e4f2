"""The admin page's HTML: one Jinja2 environment over ``templates/``, autoescaped, and the
filters its templates share (times, statuses).

Every value a template shows is escaped (``autoescape=True``; no template marks anything
``|safe``): a target, a text or an error message written by anyone renders as text. An
undefined name is an error, not an empty string (``StrictUndefined``), so a misspelt field
fails the tests instead of showing nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, PackageLoader, StrictUndefined

from noti.access.tokens import Caller
from noti.core.record import Status

__all__ = ["STATUS_NAMES", "Pages", "when"]

STATUS_NAMES = {
    Status.INVALID: "invalid",
    Status.FAILED: "failed",
    Status.WAITING: "waiting",
    Status.DONE: "sent",
}


def when(ms: int | None) -> str:
    """Epoch ms as ``2026-01-31 12:00:00.123`` (UTC); "" for none or 0."""
    if not ms:
        return ""
    try:
        moment = datetime.fromtimestamp(ms / 1000, UTC)
    except (OverflowError, ValueError, OSError):
        return str(ms)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{moment.microsecond // 1000:03d}"


def _status(value: int | Status) -> str:
    try:
        return STATUS_NAMES[Status(int(value))]
    except ValueError:
        return str(value)


class Pages:
    """Renders the admin page's templates into responses."""

    def __init__(self) -> None:
        self.env = Environment(
            loader=PackageLoader("noti.http.admin", "templates"),
            autoescape=True,
            undefined=StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.filters["when"] = when
        self.env.filters["status"] = _status

    def render(
        self,
        request: Request,
        template: str,
        *,
        who: Caller | None = None,
        role: str = "",
        csrf: str = "",
        status_code: int = 200,
        headers: Mapping[str, str] | None = None,
        **context: Any,
    ) -> HTMLResponse:
        """``template`` rendered for ``request`` (its base path, the caller shown in the header)."""
        html = self.env.get_template(template).render(
            base=base_path(request), who=who, role=role, csrf=csrf, **context
        )
        return HTMLResponse(html, status_code=status_code, headers=dict(headers or {}))


def base_path(request: Request) -> str:
    """Where the admin page is mounted (``/admin``, under the server's own root path)."""
    return str(request.scope.get("root_path", "")).rstrip("/")
