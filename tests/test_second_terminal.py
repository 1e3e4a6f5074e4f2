"""A second terminal on a running noti: the ``noti`` command finds its settings file without
exported variables, tells its version, says when it waits on standard input, sums up ``send``,
and takes the options the docs promise (``-keep`` with a unit, single-dash forms everywhere).
Each runs ``noti`` as a subprocess, as a person would."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import click
import pytest
import redis

from noti.cli import cli
from noti.config import config_file
from tests.conftest import ADMIN

pytestmark = pytest.mark.slow  # noti in a fresh process, each

MAIN = "from noti.cli import main; main()"


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without any NOTI_* variable (a fresh terminal), plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOTI_")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    env.update(extra)
    return env


def noti(
    cwd: Path, env: dict[str, str], *args: str, stdin: object = subprocess.DEVNULL
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", MAIN, *args],
        cwd=cwd,
        env=env,
        stdin=stdin,
        capture_output=True,
        text=True,
        timeout=60,  # type: ignore[arg-type]
    )


@pytest.fixture
def project(tmp_path: Path, redis_url: str) -> Path:
    """A project directory with a ``noti.toml`` (as ``make run`` writes), the test Redis flushed."""
    redis.Redis.from_url(redis_url).flushdb()
    (tmp_path / "noti.toml").write_text(
        f'redis_url = "{redis_url}"\nuser = "{ADMIN}"\nroot_admins = ["{ADMIN}"]\n'
        '[channels.sms]\nprovider = "sandbox"\n'
        "[providers.sandbox]\n"
        '[providers.broken]\nkind = "sandbox"\nfail = "always"\n'
    )
    return tmp_path


def test_the_settings_file_is_found_in_the_working_directory_or_a_parent(project: Path) -> None:
    below = project / "src" / "app"
    below.mkdir(parents=True)
    added = noti(below, clean_env(), "add", "sms", "-to", "+8613912345678", "-text", "hi")
    assert added.returncode == 0, added.stderr
    record_id = added.stdout.strip()
    shown = noti(project, clean_env(), "get", record_id, "-json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["noti_c"] == ADMIN  # the user of the file, not the OS user


def test_noti_config_names_the_file_or_none(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    below = project / "deeper"
    below.mkdir()
    monkeypatch.delenv("NOTI_CONFIG")
    assert config_file(below) == str(project / "noti.toml")
    monkeypatch.setenv("NOTI_CONFIG", "/etc/elsewhere.toml")
    assert config_file(below) == "/etc/elsewhere.toml"
    monkeypatch.setenv("NOTI_CONFIG", "")
    assert config_file(below) is None


def test_version(tmp_path: Path) -> None:
    for flag in ("--version", "-version"):
        done = noti(tmp_path, clean_env(NOTI_CONFIG=""), flag)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == f"noti {version('noti')}"


def test_add_at_a_terminal_says_it_reads_standard_input(project: Path) -> None:
    primary, secondary = pty.openpty()
    try:
        process = subprocess.Popen(
            [sys.executable, "-c", MAIN, "add", "sms", "-to", "+8613912345678"],
            cwd=project,
            env=clean_env(),
            stdin=secondary,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        os.close(secondary)
        os.write(primary, b"typed at the terminal\n\x04")  # a line, then Ctrl-D
        out, err = process.communicate(timeout=60)
    finally:
        os.close(primary)
    assert process.returncode == 0, err
    assert "reading the message from standard input" in err
    shown = noti(project, clean_env(), "get", out.strip(), "-json")
    assert json.loads(shown.stdout)["noti_sms_text"] == "typed at the terminal"


def test_add_from_a_pipe_reads_quietly(project: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", MAIN, "add", "sms", "-to", "+8613912345678"],
        cwd=project,
        env=clean_env(),
        input="piped",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""


def test_send_prints_a_summary_line(project: Path) -> None:
    env = clean_env()
    for provider in ("sandbox", "broken"):
        added = noti(project, env, "add", "sms", "-to", "+8613912345678", "-text", "x", "-provider", provider)
        assert added.returncode == 0, added.stderr
    done = noti(project, env, "send")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()  # the OK/KO lines, for scripts
    assert sorted(line[:2] for line in lines) == ["KO", "OK"]
    assert done.stderr == "1 sent, 1 not sent\n"  # the summary, for a person
    again = noti(project, env, "send", "-json")
    assert json.loads(again.stdout) == [] and again.stderr == ""  # JSON: no summary
    nothing = noti(project, env, "send")
    assert (nothing.stdout, nothing.stderr) == ("", "0 sent, 0 not sent\n")


@pytest.mark.parametrize("keep", ["3", "3.5", " 7 ", "-1", "3weeks", ""])
def test_clean_refuses_a_keep_without_a_unit(project: Path, keep: str) -> None:
    env = clean_env()
    added = noti(project, env, "add", "sms", "-to", "+8613912345678", "-text", "x")
    assert noti(project, env, "send").returncode == 0
    done = noti(project, env, "clean", "-keep", keep)
    assert done.returncode == 1
    assert done.stderr.startswith("e.cmd.noti.clean.badkeep: "), done.stderr
    assert noti(project, env, "get", added.stdout.strip()).returncode == 0  # nothing removed


@pytest.mark.parametrize("keep", ["0", "3day", "24h", "30m", "90s", "2d"])
def test_clean_takes_a_keep_with_a_unit(project: Path, keep: str) -> None:
    done = noti(project, clean_env(), "clean", "-keep", keep)
    assert done.returncode == 0, done.stderr


def test_webman_list_takes_the_single_dash_json(project: Path) -> None:
    for flag in ("-json", "--json"):
        done = noti(project, clean_env(), "webman", "list", flag)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == []


def _commands(group: click.Group, ctx: click.Context) -> list[tuple[str, click.Command]]:
    found = []
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None
        found.append((ctx.command_path + " " + name, command))
        if isinstance(command, click.Group):
            found += _commands(command, click.Context(command, info_name=name, parent=ctx))
    return found


def test_every_long_option_has_a_single_dash_form() -> None:
    """The docs promise single-dash options (``-json``, ``-keep``) with ``--long`` forms too."""
    ctx = click.Context(cli, info_name="noti")
    missing = []
    for path, command in [("noti", cli), *_commands(cli, ctx)]:
        for param in command.params:
            if not isinstance(param, click.Option):
                continue
            names = [*param.opts, *param.secondary_opts]
            if any(n.startswith("--") for n in names) and not any(
                n.startswith("-") and not n.startswith("--") for n in names
            ):
                if names != ["--help"]:
                    missing.append(f"{path} {names}")
    assert not missing
