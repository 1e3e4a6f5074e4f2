"""Reference pages generated from the code: settings, CLI, error codes, Redis keys, metrics.

Each generator returns Markdown. A page asks for one with a line ``<!-- generate: NAME -->``
(NAME one of :data:`GENERATORS`); :func:`render` replaces those lines. The tests
(``tests/test_docs.py``) render the pages the same way, so what they check is what the site
shows.
"""

from __future__ import annotations

import ast
import inspect
import io
import re
import tokenize
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
NOTI = ROOT / "noti"
MARKER = re.compile(r"^<!-- generate: ([a-z-]+) -->$", re.M)


# --- settings ---------------------------------------------------------------------------------


def _parse(source: str) -> ast.Module:
    """``source``'s syntax tree. CPython 3.11 before 3.11.8 can fail a parse with a spurious
    ``SystemError: AST constructor recursion depth mismatch`` while another thread parses too
    (python/cpython#106905; seen in CI rendering the settings page beside the test suite's
    threads): such a parse is made again."""
    for attempt in range(3):
        try:
            return ast.parse(source)
        except SystemError:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def _field_comments(cls: type) -> dict[str, str]:
    """The ``#:`` comment lines just above each field of ``cls``, joined (its meaning)."""
    source = inspect.getsource(cls)
    comments: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT and tok.string.startswith("#:"):
            comments[tok.start[0]] = tok.string[2:].strip()
    meanings: dict[str, str] = {}
    body = _parse(source).body[0]
    assert isinstance(body, ast.ClassDef)
    for node in body.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            lines: list[str] = []
            line = node.lineno - 1
            while line in comments:
                lines.insert(0, comments[line])
                line -= 1
            meanings[node.target.id] = " ".join(lines)
    return meanings


def _type_name(annotation: Any) -> str:
    text = (
        repr(annotation)
        if typing.get_origin(annotation)
        else getattr(annotation, "__name__", repr(annotation))
    )
    text = text.replace("typing.", "").replace("NoneType", "None")
    text = re.sub(r"\b[a-z_.]+\.([A-Z]\w+)", r"\1", text)  # module paths of classes
    text = re.sub(r"Annotated\[(.*?), NoDecode\]", r"\1", text)
    return text.replace(" | ", " or ")  # a pipe would end the table cell


def _default(field: Any) -> str:
    if field.default_factory is not None:
        if getattr(field.default_factory, "__name__", "") == "_os_user":
            return "the OS user"
        made = field.default_factory()
        return "(table)" if isinstance(made, BaseModel) else repr(made)
    if field.default is PydanticUndefined:
        return "required"
    return repr(field.default)


def _settings_rows(model: type[BaseModel], env: str, toml: str) -> Iterator[tuple[str, str, str, str, str]]:
    meanings = _field_comments(model)
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield from _settings_rows(annotation, f"{env}{name.upper()}__", f"{toml}{name}.")
            continue
        meaning = meanings.get(name, "")
        if not meaning:
            raise ValueError(f"{model.__name__}.{name} has no #: comment (its meaning in the reference)")
        default = _default(field)
        yield f"{env}{name.upper()}", f"{toml}{name}", _type_name(annotation), default, meaning


def settings() -> str:
    """Every setting: its variable, TOML key, type, default and meaning (from :mod:`noti.config`)."""
    from noti.config import ChannelSettings, Settings

    out = [
        "| variable | TOML key | type | default | meaning |",
        "| --- | --- | --- | --- | --- |",
    ]
    for env, key, kind, default, meaning in _settings_rows(Settings, "NOTI_", ""):
        if key in ("channels", "providers"):
            continue  # tables of named tables: below
        out.append(f"| `{env}` | `{key}` | `{kind}` | `{default}` | {_cell(meaning)} |")
    out += [
        "",
        "`[channels.<type>]` (`NOTI_CHANNELS__<TYPE>__<KEY>`), one table per channel:",
        "",
        "| key | type | default | meaning |",
        "| --- | --- | --- | --- |",
    ]
    for _env, key, kind, default, meaning in _settings_rows(ChannelSettings, "", ""):
        out.append(f"| `{key}` | `{kind}` | `{default}` | {_cell(meaning)} |")
    meaning = _field_comments(Settings)["providers"]
    out += ["", f"`[providers.<name>]`: {_cell(meaning)} The options of each kind: the provider pages."]
    return "\n".join(out)


def _cell(text: str) -> str:
    text = re.sub(r":(?:mod|class|func|data|meth):`~?([^`]+)`", r"`\1`", text)
    return text.replace("``", "`").replace("|", "\\|")


# --- the command line -------------------------------------------------------------------------


def _commands(
    group: click.Group, ctx: click.Context, path: list[str]
) -> Iterator[tuple[list[str], click.Command, click.Context]]:
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is None or command.hidden:
            continue
        sub = click.Context(command, info_name=name, parent=ctx)
        yield [*path, name], command, sub
        if isinstance(command, click.Group):
            yield from _commands(command, sub, [*path, name])


def cli() -> str:
    """Every ``noti`` command with its ``--help`` text (from the click commands themselves)."""
    from noti.cli import cli as root

    ctx = click.Context(root, info_name="noti", terminal_width=100, max_content_width=100)
    out = ["## noti", "", "```text", root.get_help(ctx), "```"]
    for path, command, sub in _commands(root, ctx, ["noti"]):
        sub.terminal_width = sub.max_content_width = 100
        out += [
            "",
            f"{'#' * min(len(path) + 1, 4)} {' '.join(path)}",
            "",
            "```text",
            command.get_help(sub),
            "```",
        ]
    return "\n".join(out)


# --- error codes ------------------------------------------------------------------------------

CODE = re.compile(r"""(?<![\w.])e\.(?:cmd|noti)\.[A-Za-z0-9_.{}<>]*[A-Za-z0-9_}>]""")


def error_classes() -> str:
    """The error tree: each class of :mod:`noti.errors` with its code and meaning."""
    from noti.errors import NotiError

    out = ["| class | code | meaning |", "| --- | --- | --- |"]

    def walk(cls: type[NotiError], depth: int) -> None:
        doc = (inspect.getdoc(cls) or "").split("\n\n")[0].replace("\n", " ")
        indent = "&nbsp;&nbsp;&nbsp;&nbsp;" * depth
        out.append(f"| {indent}`{cls.__name__}` | `{cls.code}` | {_cell(doc)} |")
        for sub in cls.__subclasses__():
            if sub.__module__ == "noti.errors":
                walk(sub, depth + 1)

    walk(NotiError, 0)
    return "\n".join(out)


def source_codes() -> dict[str, list[str]]:
    """Every error code written in noti's source, with the modules that write it. A code made
    with an f-string shows its variable part as ``<name>`` (``e.noti.pool.<verb>.nopvg``)."""
    found: dict[str, set[str]] = {}
    for path in sorted(NOTI.rglob("*.py")) + sorted(NOTI.rglob("*.lua")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        text = path.read_text()
        for match in CODE.finditer(text):
            if (
                text[match.end() : match.end() + 1] in ("*", ".")
                and text[match.end() : match.end() + 2] != ". "
            ):
                continue  # a family written as e.cmd.noti.*.nopvg, not a code
            code = re.sub(r"\{(\w+)\}", r"<\1>", match.group(0))
            if code.endswith("."):
                continue
            found.setdefault(code, set()).add(module.removesuffix(".__init__"))
    return {code: sorted(modules) for code, modules in sorted(found.items())}


def error_codes() -> str:
    """The table of every code in the source (see :func:`source_codes`)."""
    out = ["| code | written in |", "| --- | --- |"]
    for code, modules in source_codes().items():
        out.append(f"| `{code}` | {', '.join(f'`{m}`' for m in modules)} |")
    return "\n".join(out)


# --- Redis keys -------------------------------------------------------------------------------


def keys() -> str:
    """Every key builder of :class:`noti.core.keys.Keys`, the key it builds and its doc."""
    import noti.core.keys
    from noti.core.keys import Keys

    k = Keys()
    out = ["| `Keys.` | key (default prefix) | note |", "| --- | --- | --- |"]
    for name, member in vars(Keys).items():
        if name.startswith("_") or name == "prefix":
            continue
        if isinstance(member, property):
            value: Any = getattr(k, name)
            doc = inspect.getdoc(member.fget) or ""
            label = name
        elif callable(member):
            params = list(inspect.signature(member).parameters)[1:]
            value = member(k, *[f"<{p}>" for p in params])
            doc = inspect.getdoc(member) or ""
            label = f"{name}({', '.join(params)})"
        else:
            continue
        shown = ", ".join(f"`{v}`" for v in value) if isinstance(value, list) else f"`{value}`"
        out.append(f"| `{label}` | {shown} | {_cell(doc.splitlines()[0] if doc else '')} |")
    layout = noti.core.keys.__doc__ or ""
    return (
        "\n".join(out)
        + "\n\nThe module's own description of each key:\n\n```text\n"
        + layout.strip()
        + "\n```"
    )


# --- metrics ----------------------------------------------------------------------------------


def metrics() -> str:
    """The Prometheus metrics served (:data:`noti.observe.prometheus.METRICS`)."""
    from noti.observe.docs import table

    return table()


GENERATORS: dict[str, Callable[[], str]] = {
    "settings": settings,
    "cli": cli,
    "error-classes": error_classes,
    "error-codes": error_codes,
    "keys": keys,
    "metrics": metrics,
}


def render(markdown: str) -> str:
    """``markdown`` with each ``<!-- generate: NAME -->`` line replaced by its generator's output."""

    def expand(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in GENERATORS:
            raise KeyError(f"no generator {name!r} (known: {', '.join(GENERATORS)})")
        return GENERATORS[name]()

    return MARKER.sub(expand, markdown)


def page(path: str) -> str:
    """A docs page (``docs/<path>``) as the site shows it: generated parts expanded."""
    return render((DOCS / path).read_text())


def pages() -> dict[str, str]:
    """Every docs page, rendered."""
    return {str(p.relative_to(DOCS)): render(p.read_text()) for p in sorted(DOCS.rglob("*.md"))}
