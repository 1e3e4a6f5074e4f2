"""noti's command line in a test: in this process (:func:`invoke`), or in a process of its own
as a user starts it from a terminal (:func:`start_noti`)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import click
from click.testing import Result

from noti.cli import main
from tests.clirunner import cli_runner
from tests.conftest import ROOT


@click.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.pass_context
def _entry(ctx: click.Context) -> None:
    main(list(ctx.args))


def invoke(*args: str, stdin: str | None = None) -> Result:
    """``noti ARGS`` in this process, through the console entry's error handling (one-line
    errors, exit codes), with ``stdin`` as its input: its exit code, stdout and stderr apart."""
    return cli_runner().invoke(_entry, list(args), input=stdin, catch_exceptions=False)


def start_noti(env: dict[str, str], *args: str, **options: Any) -> subprocess.Popen[str]:
    """``noti ARGS`` with ``env``, from the repository, its standard output and error read as
    text through pipes (``options`` are Popen's and override these, e.g. ``stderr=STDOUT``)."""
    streams: dict[str, Any] = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, **options}
    return subprocess.Popen([sys.executable, "-m", "noti", *args], env=env, cwd=ROOT, text=True, **streams)
