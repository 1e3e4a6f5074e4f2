"""docker-compose.yml is deployable as written, checked without Docker: every command, option,
module, queue and variable it uses exists; secrets come from the uncommitted .env (whose
template, .env.example, names each one); images are pinned; Redis is not published; every
long-running service has a healthcheck and a restart policy."""

from __future__ import annotations

import ast
import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

import click
import pytest

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[1]
COMPOSE: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]
NOTI_SERVICES = {name: s for name, s in SERVICES.items() if str(s.get("image", "")).startswith("noti:")}
WORKERS = {name: s for name, s in NOTI_SERVICES.items() if s["command"][3] == "worker"}
EXAMPLE = dict(
    line.split("=", 1)
    for line in (ROOT / ".env.example").read_text().splitlines()
    if line.strip() and not line.startswith("#")
)
VARIABLE = re.compile(r"(?<!\$)\$\{([A-Z_][A-Z0-9_]*)(:?[-?][^}]*)?\}")


def _setting_variables() -> set[str]:
    from noti.config import Settings

    return {f"NOTI_{name.upper()}" for name in Settings.model_fields}


def _check_click(command: click.Command, args: list[str], where: str) -> None:
    """Each option of ``args`` is one ``command`` takes (its value skipped), recursing into groups."""
    ctx = click.Context(command)
    options = {opt: param for param in command.params if isinstance(param, click.Option)
               for opt in (*param.opts, *param.secondary_opts)}  # fmt: skip
    i = 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("-"):
            name = arg.split("=", 1)[0]
            assert name in options, f"{where}: {command.name} has no option {name}"
            if "=" not in arg and not options[name].is_flag:
                i += 1
        elif isinstance(command, click.Group):
            sub = command.get_command(ctx, arg)
            assert sub is not None, f"{where}: {command.name} has no command {arg}"
            if arg == "flower":  # Flower hands its arguments to tornado's options
                from flower.options import default_options

                for option in args[i + 1 :]:
                    assert option.startswith("--") and "=" in option, f"{where}: {option}: --name=value"
                    assert option[2:].split("=")[0].replace("-", "_") in default_options, f"{where}: {option}"
                return
            _check_click(sub, args[i + 1 :], where)
            return
        i += 1


def _check_command(argv: list[str], where: str) -> None:
    if argv[0] == "celery":
        from celery.bin.celery import celery

        assert argv[1:3] == ["-A", "noti"], where
        _check_click(celery, argv[1:], where)
    elif argv[0] == "noti":
        from noti.cli import cli

        _check_click(cli, argv[1:], where)
    elif argv[0] == "python":
        assert argv[1] == "-c", where
        tree = ast.parse(argv[2])  # it compiles; and every module it imports exists
        modules = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        modules += [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module]
        for module in modules:
            __import__(module)
    else:
        assert argv[0] in ("redis-server", "redis-cli", "sh"), f"{where}: unknown program {argv[0]}"


def _argv(command: Any) -> list[str]:
    if isinstance(command, str):
        return shlex.split(command)
    if command[0] == "CMD-SHELL":
        return shlex.split(command[1])
    return list(command[1:] if command[0] == "CMD" else command)


@pytest.mark.parametrize("name", sorted(NOTI_SERVICES))
def test_every_command_and_healthcheck_is_one_noti_and_celery_know(name: str) -> None:
    service = NOTI_SERVICES[name]
    _check_command(_argv(service["command"]), f"{name}.command")
    _check_command(_argv(service["healthcheck"]["test"]), f"{name}.healthcheck")


@pytest.mark.parametrize("name", sorted(WORKERS))
def test_a_worker_pings_its_own_node(name: str) -> None:
    command, check = WORKERS[name]["command"], _argv(WORKERS[name]["healthcheck"]["test"])
    node = command[command.index("-n") + 1]
    assert check[:5] == ["celery", "-A", "noti", "inspect", "ping"]
    assert check[check.index("-d") + 1].replace("$${HOSTNAME}", "%h") == node


def test_the_workers_consume_every_queue_and_only_noti_queues() -> None:
    from noti.celery.queues import queue_names

    consumed: list[str] = []
    for service in WORKERS.values():
        command = service["command"]
        consumed += command[command.index("-Q") + 1].split(",")
    assert sorted(consumed) == sorted(queue_names())  # each queue by one group, none missing
    assert len(WORKERS) >= 2  # a worker per group of channels: the scaling example


def test_the_beat_healthcheck_looks_at_redbeats_own_lock() -> None:
    from noti.celery.app import celery_config
    from noti.config import load_settings
    from noti.core.keys import Keys

    # the configuration noti gives its app, computed: not the process's app's, which reads it
    # once (reading it here, before the suite's Redis is set, pointed every later test of the
    # process at the default URL)
    conf = celery_config(load_settings())
    assert conf["redbeat_key_prefix"] == Keys().beat_prefix
    assert conf.get("redbeat_lock_key") is None  # RedBeat's default: <prefix>:lock
    assert "Keys().beat_prefix + ':lock'" in " ".join(_argv(SERVICES["beat"]["healthcheck"]["test"]))


def test_healthchecks_and_restart_policies() -> None:
    for name, service in SERVICES.items():
        assert service.get("restart") == "unless-stopped", name
        assert "healthcheck" in service, name


def test_images_are_pinned() -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    for name, service in SERVICES.items():
        image = service["image"]
        repository, _, tag = image.partition(":")
        assert tag and tag != "latest" and re.search(r"\d", tag), f"{name}: {image} is not pinned"
    assert {s["image"] for s in NOTI_SERVICES.values()} == {f"noti:{version}"}
    base = re.search(r"^FROM (\S+)", (ROOT / "Dockerfile").read_text(), re.M).group(1)  # type: ignore[union-attr]
    assert re.search(r":\d+\.\d+\.\d+", base), base


def test_redis_is_not_published_and_secrets_are_not_in_the_file() -> None:
    assert "ports" not in SERVICES["redis"]
    text = (ROOT / "docker-compose.yml").read_text()
    assert "change-me" not in text and "basic-auth" not in text
    assert ".env" in (ROOT / ".gitignore").read_text().splitlines()
    for service in NOTI_SERVICES.values():
        assert service["env_file"] == [".env"]
        assert "${REDIS_PASSWORD" in service["environment"]["NOTI_REDIS_URL"]


def test_the_provider_configuration_is_mounted_not_baked() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "config" not in re.findall(r"^COPY (.*)$", dockerfile, re.M).__str__()
    for service in NOTI_SERVICES.values():
        assert service["environment"]["NOTI_CONFIG"] == "/etc/noti/noti.toml"
        [mount] = service["volumes"]
        source, target, mode = mount.rsplit(":", 2)
        assert (target, mode) == ("/etc/noti/noti.toml", "ro")
        default = re.fullmatch(r"\$\{PROVIDERS_TOML:-(.+)\}", source).group(1)  # type: ignore[union-attr]
        assert (ROOT / default).is_file()
        from noti.config import load_settings

        assert load_settings(config=str(ROOT / default)) is not None


def test_every_variable_is_known() -> None:
    """Each ${VAR} without a default is in .env.example; each variable of .env.example is used
    by the compose file, is a noti setting, or a Flower option; each NOTI_* a container gets is
    a setting (an unknown one would be ignored: a typo would go unnoticed)."""
    from flower.options import default_options

    text = (ROOT / "docker-compose.yml").read_text()
    used = {m.group(1): m.group(2) or "" for m in VARIABLE.finditer(text)}
    settings = _setting_variables()
    for variable, default in used.items():
        assert default.startswith(":-") or variable in EXAMPLE, f"{variable} is not in .env.example"
    for variable in EXAMPLE:
        flower = variable.startswith("FLOWER_") and variable[7:].lower() in default_options
        assert variable in used or variable in settings or flower, f".env.example: {variable} is used nowhere"
    for service in NOTI_SERVICES.values():
        for variable in service["environment"]:
            assert variable in settings, variable
    assert "FLOWER_BASIC_AUTH" in EXAMPLE
