"""The ``noti`` command line: seed-compatible commands over the Python API.

A :class:`~noti.errors.NotiError` prints ``code: message`` on stderr and exits 1; usage
errors exit 2. Worker, beat and Flower stay ``celery -A noti worker|beat|flower``.

Commands are listed in :data:`COMMANDS` and each one's module is imported only when that
command runs (or ``noti --help`` lists it): ``noti list`` never imports what ``noti event``
or ``noti webman`` need (Jinja, Celery, the bridge), so it starts about as fast as Python
and redis-py do.
"""

from __future__ import annotations

import gc
import logging
import sys
from importlib import import_module

import click

from noti.cli._options import CliContext
from noti.core.door import through
from noti.errors import NotiError

__all__ = ["COMMANDS", "cli", "console_main", "main"]

log = logging.getLogger("noti.cli")

#: True once :func:`console_main` runs: this process ends when its command does.
_one_shot = False

#: Every top-level command: its name -> ``"module:attribute"`` of its click command.
#: A new command is one line here (its module is imported only when it is used).
COMMANDS: dict[str, str] = {
    "add": "noti.cli.notify:add",
    "get": "noti.cli.notify:get",
    "send": "noti.cli.notify:send",
    "list": "noti.cli.notify:list_",
    "search": "noti.cli.history:search",
    "del": "noti.cli.notify:delete",
    "revoke": "noti.cli.notify:revoke",
    "clean": "noti.cli.notify:clean",
    "delayed": "noti.cli.delayed:delayed",
    "dead": "noti.cli.dead:dead",
    "suppress": "noti.cli.suppress:suppress",
    "providers": "noti.cli.providers:providers",
    "channels": "noti.cli.providers:channels",
    "pool": "noti.cli.numpool:pool",
    "event": "noti.cli.events:event",
    "listener": "noti.cli.events:listener",
    "webman": "noti.cli.webman:webman",
    "status": "noti.cli.status:status",
    "metrics": "noti.cli.metrics:metrics",
    "token": "noti.cli.tokens:token",
    "signing-key": "noti.cli.signing:signing_key",
    "serve": "noti.cli.serve:serve",
    "recipient": "noti.cli.recipients:recipient",
    "category": "noti.cli.templates:category",
    "template": "noti.cli.templates:template",
    "notify": "noti.cli.templates:notify",
    "digest": "noti.cli.templates:digest",
}


class LazyGroup(click.Group):
    """A group whose commands are named in a table of import paths (:data:`COMMANDS`) and
    imported on first use: when invoked, or when help lists them."""

    def __init__(self, *args: object, lazy_commands: dict[str, str], **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.lazy_commands = lazy_commands

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        found = self.commands.get(cmd_name)
        if found is None and cmd_name in self.lazy_commands:
            found = self.load(cmd_name)
        return found

    def load(self, name: str) -> click.Command:
        """Import the command ``name`` and keep it in the group."""
        module_name, _, attribute = self.lazy_commands[name].partition(":")
        command = getattr(import_module(module_name), attribute)
        if not isinstance(command, click.Command) or command.name != name:
            raise TypeError(f"{self.lazy_commands[name]} is not the click command {name!r}")
        self.add_command(command)
        return command


@click.group(
    cls=LazyGroup,
    lazy_commands=COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.option(
    "-as", "--as", "acting_user", metavar="USER", help="Act as USER (default: NOTI_USER or the OS user)."
)
@click.version_option(None, "--version", "-version", package_name="noti", message="%(prog)s %(version)s")
@click.pass_context
def cli(ctx: click.Context, acting_user: str | None) -> None:
    """Notifications delivered by Celery workers from Redis."""
    ctx.obj = CliContext(user=acting_user, one_shot=_one_shot)
    ctx.with_resource(through("cli"))


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


def console_main(argv: list[str] | None = None) -> None:
    """Entry point of the ``noti`` script and of ``python -m noti``: :func:`main` in a process
    of its own, which ends when the command does.

    Before the process exits, every object it holds is handed to :func:`gc.freeze`. When
    CPython exits, it tears the modules down and runs its cycle collector over every object
    still tracked, several times: with the ~45,000 objects that importing redis-py, pydantic
    and click leaves, that took 35-45 ms, a seventh of ``noti list`` (measured on the 2-core
    bench machine, 15 interleaved runs each: ``python -c "import noti.api"`` 264 ms, 218 ms
    with ``gc.freeze()`` at its end; ``make bench`` scenario 10 times the commands). Frozen
    objects are left out of those collections. Nothing else changes: the output is flushed
    and the ``atexit`` handlers run as before, and what is still allocated is released with
    the process (Python never promised to finalize it at exit).

    Only this entry point freezes, and only here is the collector paused while the API is
    built (:class:`~noti.cli._options.CliContext`): :func:`main` called inside a
    longer-lived process (tests, an application) leaves the collector alone.
    """
    global _one_shot
    _one_shot = True
    try:
        main(argv)
    finally:
        gc.freeze()
