"""The ``noti`` command line: seed-compatible commands over the Python API.

A :class:`~noti.errors.NotiError` prints ``code: message`` on stderr and exits 1; usage
errors exit 2. Worker, beat and Flower stay ``celery -A noti worker|beat|flower``.
"""

from __future__ import annotations

import logging
import sys

import click

from noti.cli._options import CliContext
from noti.cli.dead import dead
from noti.cli.delayed import delayed
from noti.cli.events import event, listener
from noti.cli.metrics import metrics
from noti.cli.notify import add, clean, delete, get, list_, revoke, send
from noti.cli.numpool import pool
from noti.cli.providers import providers
from noti.cli.status import status
from noti.cli.webman import webman
from noti.errors import NotiError

__all__ = ["cli", "main"]

log = logging.getLogger("noti.cli")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--as", "acting_user", metavar="USER", help="Act as USER (default: NOTI_USER or the OS user).")
@click.pass_context
def cli(ctx: click.Context, acting_user: str | None) -> None:
    """Notifications delivered by Celery workers from Redis."""
    ctx.obj = CliContext(user=acting_user)


for command in (
    add,
    get,
    send,
    list_,
    delete,
    revoke,
    clean,
    delayed,
    dead,
    providers,
    pool,
    event,
    listener,
    webman,
    status,
    metrics,
):
    cli.add_command(command)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    try:
        cli.main(args=argv, prog_name="noti", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(1)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except NotiError as exc:
        click.echo(f"{exc.code}: {exc.message}", err=True)
        sys.exit(1)
    except Exception as exc:  # a bug: one line for the user, the traceback in the log
        log.debug("unexpected error", exc_info=True)
        click.echo(f"e.noti.internal: {type(exc).__name__}: {exc}", err=True)
        sys.exit(1)
