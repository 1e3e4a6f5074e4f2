"""``noti serve``: the HTTP API (:mod:`noti.http`) under uvicorn."""

from __future__ import annotations

import click

from noti.errors import InvalidInput

__all__ = ["serve"]


@click.command("serve")
@click.option("-bind", "--bind", "bind", default=None, help="Address to listen on (default NOTI_HTTP_BIND).")
@click.option("-port", "--port", "port", type=int, default=None, help="Port (default NOTI_HTTP_PORT).")
@click.option(
    "-workers", "--workers", "workers", type=int, default=1, help="Worker processes (about one per core)."
)
@click.option(
    "-access-log/-no-access-log",
    "--access-log/--no-access-log",
    "access_log",
    default=True,
    help="Log every request (default: on).",
)
def serve(bind: str | None, port: int | None, workers: int, access_log: bool) -> None:
    """Serve the HTTP API (POST /v1/notifications, …; OpenAPI at /openapi.json) until stopped.

    Its limits (NOTI_HTTP_HEADER_TIMEOUT_S, NOTI_HTTP_REQUESTS_MAX, …) come from the settings;
    its logs never show a credential (receipt keys, tokens: written as ***)."""
    try:
        from noti.http.server import serve as run
    except ImportError as exc:
        raise InvalidInput(
            f"noti serve needs the http extra: pip install 'noti[http]' ({exc})",
            code="e.cmd.noti.serve.noextra",
        ) from None
    from noti.config import get_settings

    settings = get_settings()
    number = settings.http_port if port is None else port
    if not 1 <= number <= 65535:
        raise InvalidInput(f"port {number} is not 1-65535", code="e.cmd.noti.serve.badport")
    run(
        bind=settings.http_bind if bind is None else bind,
        port=number,
        workers=workers,
        access_log=access_log,
        backlog=settings.http_backlog,
    )
