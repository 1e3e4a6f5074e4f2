"""``noti providers``: the provider kinds installed and the instances configured; ``noti
channels``: the channels registered (built-in and installed)."""

from __future__ import annotations

from typing import Any

import click
from pydantic import BaseModel, SecretStr

from noti.cli._options import CliContext, Output, json_options, pass_cli
from noti.cli._output import print_table
from noti.core.channel import Channel, defined_at
from noti.errors import NotiError
from noti.providers import available_kinds, load_kind

__all__ = ["channels", "providers"]


def _masked(value: Any) -> Any:
    """An option value fit for JSON and the terminal: secrets masked, nested models (a weixin
    provider's accounts) as objects, anything else JSON does not know as its text."""
    if isinstance(value, SecretStr):
        return "**********" if value.get_secret_value() else ""
    if isinstance(value, BaseModel):
        return {k: _masked(v) for k, v in dict(value).items()}
    if isinstance(value, dict):
        return {str(k): _masked(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_masked(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


@click.command("providers")
@json_options
@pass_cli
def providers(ctx: CliContext, /, out: Output) -> None:
    """List installed provider kinds and configured providers (secrets masked)."""
    runtime = ctx.api.runtime
    settings = runtime.settings
    kinds = []
    for kind, path in sorted(available_kinds().items()):
        try:
            channels = ",".join(sorted(c.value for c in load_kind(kind).channels))
            status = "ok"
        except NotiError as exc:
            channels, status = "", exc.message
        kinds.append({"kind": kind, "module": path, "channels": channels, "status": status})
    configured = []
    names = set(settings.providers)
    channel_names = [c.value for c in Channel]
    for channel in channel_names:
        default = settings.channel(channel).provider
        if default:
            names.update(n.strip() for n in default.split(","))
    for name in sorted(names):
        entry: dict[str, Any] = {"name": name, "kind": settings.providers.get(name, {}).get("kind") or name}
        try:
            provider = runtime.providers.get(name)
            entry["channels"] = ",".join(sorted(c.value for c in provider.channels))
            entry["options"] = _masked(dict(provider.options))
            entry["status"] = "ok"
        except NotiError as exc:
            entry.update(channels="", options={}, status=f"{exc.code}: {exc.message}")
        entry["default_for"] = ",".join(
            c
            for c in channel_names
            if name in [n.strip() for n in (settings.channel(c).provider or "").split(",")]
        )
        configured.append(entry)
    if out.quiet:
        return
    if out.wants_json:
        out.json({"kinds": kinds, "configured": configured})
        return
    print_table(
        ("KIND", "CHANNELS", "MODULE", "STATUS"),
        ((k["kind"], k["channels"], k["module"], k["status"]) for k in kinds),
        "provider kind",
    )
    click.echo()
    print_table(
        ("NAME", "KIND", "CHANNELS", "DEFAULT FOR", "OPTIONS", "STATUS"),
        (
            (
                c["name"],
                c["kind"],
                c["channels"],
                c["default_for"],
                " ".join(f"{k}={v}" for k, v in c["options"].items() if v is not None),
                c["status"],
            )
            for c in configured
        ),
        "configured provider",
    )


@click.command("channels")
@json_options
@pass_cli
def channels(ctx: CliContext, /, out: Output) -> None:
    """List the channels: built-in and installed (the noti.channels entry point), with their
    queue, fields (* required), default providers and where each is defined."""
    settings = ctx.api.runtime.settings
    rows = []
    for channel in Channel:
        row: dict[str, Any] = {
            "name": channel.value,
            "queue": channel.queue,
            "module": defined_at(channel.value),
            "provider": settings.channel(channel.value).provider or "",
        }
        try:
            spec = channel.spec
            row.update(
                title=spec.title,
                target=spec.target_help,
                fields=[f"{n}*" if n in spec.required else n for n in spec.fields],
                docs=spec.docs,
                status="ok",
            )
        except NotiError as exc:
            row.update(title="", target="", fields=[], docs="", status=f"{exc.code}: {exc.message}")
        rows.append(row)
    if out.quiet:
        return
    if out.wants_json:
        out.json({"channels": rows})
        return
    print_table(
        ("NAME", "QUEUE", "FIELDS", "DEFAULT PROVIDER", "TARGET", "STATUS"),
        (
            (r["name"], r["queue"], " ".join(r["fields"]), r["provider"], r["target"], r["status"])
            for r in rows
        ),
        "channel",
    )
