"""``noti serve``: the HTTP API app built from the settings, run by uvicorn.

:func:`default_app` is the factory uvicorn imports in each worker process: this process's
runtime (:func:`noti.runtime.get_runtime`) and the Celery publisher its settings name, as
:func:`noti.api.notifier` builds them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from noti.errors import InvalidInput

if TYPE_CHECKING:
    from fastapi import FastAPI

__all__ = ["WORKERS_MAX", "default_app", "serve"]

#: The most worker processes ``noti serve -workers`` starts.
WORKERS_MAX = 64


def default_app() -> FastAPI:
    """The HTTP API over this process's runtime (uvicorn's app factory)."""
    from noti.celery.publish import Publisher
    from noti.http.app import create_app
    from noti.notifier import Notifier
    from noti.runtime import get_runtime

    runtime = get_runtime()
    publisher = Publisher.for_settings(runtime.settings, store_redis=runtime.redis)
    return create_app(Notifier(runtime, publisher))


def serve(*, bind: str, port: int, workers: int = 1, access_log: bool = True) -> None:
    """Serve the HTTP API on ``bind``:``port`` with ``workers`` processes until stopped
    (SIGINT, SIGTERM: uvicorn finishes the requests in flight first).

    Raises:
        InvalidInput: ``e.cmd.noti.serve.badworkers``: not 1 to 64 workers.
    """
    import uvicorn

    if not 1 <= workers <= WORKERS_MAX:
        raise InvalidInput(
            f"workers must be 1 to {WORKERS_MAX}, got {workers}", code="e.cmd.noti.serve.badworkers"
        )
    uvicorn.run(
        "noti.http.server:default_app",
        factory=True,
        host=bind,
        port=port,
        workers=workers,
        access_log=access_log,
        server_header=False,
        log_level="info",
    )
