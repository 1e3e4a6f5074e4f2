"""``noti metrics``: serve noti's Prometheus metrics (:mod:`noti.observe.prometheus`).

The numbers are read from Redis at each scrape and are cluster-wide (the counters live in
Redis), so one ``noti metrics`` beside the workers serves the whole deployment; a worker can
serve the same itself with ``NOTI_METRICS_PORT``.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType

import click

from noti.errors import InvalidInput, NotiError

__all__ = ["DEFAULT_PORT", "metrics"]

#: The port ``noti metrics`` listens on when given none.
DEFAULT_PORT = 9840


@click.command("metrics")
@click.option(
    "-port",
    "--port",
    "port",
    default=str(DEFAULT_PORT),
    help=f"Port (default {DEFAULT_PORT}; 0: any free one).",
)
@click.option(
    "-bind", "--bind", "bind", default=None, help="Address to listen on (default NOTI_METRICS_BIND)."
)
def metrics(port: str, bind: str | None) -> None:
    """Serve the Prometheus metrics at http://BIND:PORT/metrics until stopped (Ctrl-C, SIGTERM)."""
    from noti.observe.prometheus import NotiCollector, check_port, serve
    from noti.observe.snapshot import Observer
    from noti.sending.runtime import get_runtime

    number = check_port(port)
    runtime = get_runtime()
    address = runtime.settings.metrics_bind if bind is None else bind
    if not address.strip() or any(c.isspace() for c in address):
        raise InvalidInput(f"bind address {address!r} is not an address", code="e.cmd.noti.metrics.badbind")
    observer = Observer(runtime)
    server = serve(NotiCollector(observer.snapshot), port=number, bind=address)
    try:
        observer.snapshot()
    except NotiError as exc:  # served anyway: scrapes say noti_store_up 0 until Redis answers
        click.echo(f"{exc.code}: {exc.message} (serving noti_store_up 0 until it answers)", err=True)
    stopping = threading.Event()

    def _stop(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    host, actual = server.address
    click.echo(f"serving http://{host}:{actual}/metrics")
    try:
        while not stopping.wait(1.0):
            pass
    finally:
        server.stop()
        observer.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
