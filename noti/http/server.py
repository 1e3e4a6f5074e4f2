"""``noti serve``: the HTTP API app built from the settings, run by uvicorn.

:func:`default_app` is the factory uvicorn imports in each worker process: this process's
runtime (:func:`noti.sending.runtime.get_runtime`) and the Celery publisher its settings name, as
:func:`noti.celery.process.process_notifier` builds them.
"""

from __future__ import annotations

import gc
import logging
from typing import TYPE_CHECKING

from noti.access.redact import install as install_redaction
from noti.errors import InvalidInput, NotiError

if TYPE_CHECKING:
    from fastapi import FastAPI

    from noti.sending.runtime import Runtime

log = logging.getLogger(__name__)

__all__ = ["WORKERS_MAX", "default_app", "serve"]

#: The most worker processes ``noti serve -workers`` starts.
WORKERS_MAX = 64


def default_app() -> FastAPI:
    """The HTTP API over this process's runtime (uvicorn's app factory)."""
    from noti.celery.process import noti_app
    from noti.celery.publish import Publisher
    from noti.http.app import create_app
    from noti.sending.notifier import Notifier
    from noti.sending.runtime import get_runtime

    install_redaction()  # a spawned worker process (-workers 2 and more) starts without it
    runtime = get_runtime()
    publisher = Publisher.for_settings(runtime.settings, noti_app, store_redis=runtime.redis)
    app = create_app(Notifier(runtime, publisher))
    _warm(runtime)
    return app


def _warm(runtime: Runtime) -> None:
    """Before the first request: import what adding needs and build the providers (a first
    request would pay for both), then move every object made so far out of the cycle
    collector's way (:func:`gc.freeze`): a full collection over the ~100,000 objects of
    FastAPI, pydantic, Celery and noti would otherwise stall a request now and then."""
    import noti.sending.bulk  # noqa: F401 - imported now, used by POST /v1/notifications
    from noti.core.record import Channel

    for channel in Channel:
        try:
            runtime.providers.chain(channel, None)
        except NotiError as exc:  # none configured, or wrong settings: its requests will say so
            log.debug("no providers for %s yet: %s", channel.value, exc)
    gc.collect()
    gc.freeze()


def serve(*, bind: str, port: int, workers: int = 1, access_log: bool = True, backlog: int = 2048) -> None:
    """Serve the HTTP API on ``bind``:``port`` with ``workers`` processes until stopped
    (SIGINT, SIGTERM: uvicorn finishes the requests in flight first).

    Each process runs :class:`noti.http.protocol.GuardedProtocol` (header, body and idle
    timeouts, a header size limit, caps on requests and connections, from the settings) and
    redacts credentials from every log record it makes (:mod:`noti.access.redact`): the access log
    writes ``?key=***`` and ``/v1/receipts/<provider>/***``. ``backlog``: the listen queue.

    Raises:
        InvalidInput: ``e.cmd.noti.serve.badworkers``: not 1 to 64 workers.
    """
    import uvicorn

    if not 1 <= workers <= WORKERS_MAX:
        raise InvalidInput(
            f"workers must be 1 to {WORKERS_MAX}, got {workers}", code="e.cmd.noti.serve.badworkers"
        )
    from noti.http.protocol import GuardedProtocol, limits

    install_redaction()
    uvicorn.run(
        "noti.http.server:default_app",
        factory=True,
        host=bind,
        port=port,
        workers=workers,
        access_log=access_log,
        server_header=False,
        log_level="info",
        # the class itself: uvicorn < 0.32 takes a string only from its own protocol table
        http=GuardedProtocol,
        timeout_keep_alive=limits().idle_timeout_s,  # type: ignore[arg-type]
        backlog=backlog,
        # bounds the h11 protocol too, should it be named instead
        h11_max_incomplete_event_size=limits().header_max_bytes,
    )
