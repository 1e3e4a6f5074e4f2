"""The layers of ``noti/`` as imports show them (docs/reference/layout.md): every import
counts, at module level or inside a function, since a lazy import is still a dependency."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "noti"

#: The layers of the package, lowest first (docs/reference/layout.md). A module belongs to the
#: layer of the longest prefix naming it; it may import its own layer and the ones below, never
#: one above: every import counts, lazy ones and ``TYPE_CHECKING`` ones included.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    # settings, errors, input checks, loading by name, and the Redis plumbing; the bridge's
    # settings are a table of the settings kept beside the bridge they configure (they import
    # only the ground); tracing (OpenTelemetry, optional) is used from the sending path and
    # the providers up to the HTTP app, so it stands below them all and imports nothing of noti
    (
        "ground",
        (
            "noti.errors",
            "noti.inputs",
            "noti.imports",
            "noti.config",
            "noti.tracing",
            "noti.fastjson",
            "noti.lua",
            "noti.redis",
            "noti.bridge.webman.settings",
        ),
    ),
    ("core", ("noti.core",)),
    ("access", ("noti.access",)),
    ("delivery", ("noti.delivery",)),
    ("number pools", ("noti.numpool",)),
    ("providers", ("noti.providers",)),
    ("channels", ("noti.channels",)),
    ("sending path", ("noti.sending",)),
    ("Celery app", ("noti.celery",)),
    # they publish through the Celery app; the workers below run them
    ("features", ("noti.events", "noti.bridge", "noti.observe", "noti.recipients")),
    (
        "Celery workers",
        ("noti.celery.worker", "noti.celery.steps", "noti.celery.observe", "noti.celery.tasks"),
    ),
    ("front door", ("noti", "noti.api", "noti.tasks")),
    ("commands and HTTP", ("noti.cli", "noti.http", "noti.__main__")),
]
#: The one import that runs up, and why: ``NumberPool(name, user=…)``, the number pools' API for
#: applications and ``noti numpool``, defaults its client and keys to the process's runtime, as
#: every API call does. noti's own providers pass both (``NumberPool.trusted``) and never take it.
UPWARD = {("noti.numpool.pool", "noti.sending.runtime")}
#: The modules at the top of noti/: the front door and the ground (everything else has a folder).
FLAT = {
    "__init__",
    "__main__",
    "api",
    "tasks",
    "config",
    "errors",
    "inputs",
    "imports",
    "tracing",
    "fastjson",
}
#: What the core (noti/core/) may import from noti besides itself: the ground it stands on.
CORE_GROUND = ("noti.errors", "noti.inputs", "noti.redis", "noti.imports", "noti.config", "noti.fastjson")
#: The only modules that may import the Python API: the package's front door and the API
#: itself; and the CLI (``noti.cli`` and below).
API_USERS = ("noti", "noti.api")


def _parse(path: Path) -> ast.Module:
    """``path``'s syntax tree. CPython 3.11 before 3.11.8 can fail a parse with a spurious
    ``SystemError: AST constructor recursion depth mismatch`` while another thread parses too
    (python/cpython#106905; 3.11's traceback printing parses the failing line, and the suite's
    fake servers print tracebacks from their threads): such a parse is made again."""
    for attempt in range(3):
        try:
            return ast.parse(path.read_text(), str(path))
        except SystemError:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    path = PACKAGE.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _imports(path: Path) -> Iterator[str]:
    """Every module ``path`` imports (``from noti import x`` counts as ``noti.x``)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(_parse(path)):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # ``from package import submodule`` takes the submodule, not the package's own names
            if not all(_is_module(f"{base}.{alias.name}") for alias in node.names):
                yield base
            for alias in node.names:
                yield f"{base}.{alias.name}"


def _graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {name: {i for i in _imports(path) if i in modules} for name, path in modules.items()}


def _under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _reach(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module ``start`` imports, directly or through others (not through ``noti``, the
    front door: no module of the package imports anything through it, as a test checks)."""
    seen: set[str] = set()
    stack = [m for m in graph[start] if m != "noti"]
    while stack:
        name = stack.pop()
        if name not in seen:
            seen.add(name)
            stack.extend(m for m in graph.get(name, ()) if m != "noti")
    return seen


def test_only_the_front_door_and_the_cli_import_the_python_api() -> None:
    offenders = {
        name
        for name, imported in _graph().items()
        if "noti.api" in imported and name not in API_USERS and not _under(name, ("noti.cli",))
    }
    assert offenders == set()


def test_no_module_of_the_package_imports_through_its_front_door() -> None:
    # ``from noti import notify`` inside the package would reach the API through
    # noti/__init__'s lazy attributes, which the graph cannot see: only submodules that way
    offenders = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(_parse(path)):
            if isinstance(node, ast.ImportFrom) and node.module == "noti" and not node.level:
                lazy = [
                    a.name
                    for a in node.names
                    if not (PACKAGE / a.name).is_dir() and not (PACKAGE / f"{a.name}.py").exists()
                ]
                if lazy:
                    offenders[_module_name(path)] = lazy
    assert offenders == {}


def test_the_core_stands_on_its_ground_only() -> None:
    offenders = {}
    for name, imported in _graph().items():
        if _under(name, ("noti.core",)):
            above = {i for i in imported if not _under(i, ("noti.core", "noti.lua", *CORE_GROUND))}
            above.discard("noti")
            if above:
                offenders[name] = sorted(above)
    assert offenders == {}


@pytest.mark.parametrize(
    "lower",
    [
        "noti.core",
        "noti.sending",
        "noti.providers",
        "noti.channels",
        "noti.delivery",
    ],
)
def test_lower_layers_reach_nothing_of_the_celery_layer(lower: str) -> None:
    graph = _graph()
    offenders = {}
    for name in graph:
        if _under(name, (lower,)):
            celery = sorted(i for i in _reach(graph, name) if _under(i, ("noti.celery",)))
            if celery:
                offenders[name] = celery
    assert offenders == {}


def test_providers_take_nothing_from_the_sender() -> None:
    offenders = {
        name
        for name, imported in _graph().items()
        if _under(name, ("noti.providers",)) and "noti.sending.sender" in imported
    }
    assert offenders == set()


def test_a_channel_imports_nothing_of_another_channel() -> None:
    # each channel is a package of its own (noti/channels/<name>/), as a third-party one is
    graph = _graph()
    offenders = {}
    for name, imported in graph.items():
        if _under(name, ("noti.channels",)) and name != "noti.channels":
            own = ".".join(name.split(".")[:3])
            others = sorted(
                i
                for i in imported
                if _under(i, ("noti.channels",)) and not _under(i, (own,)) and i != "noti.channels"
            )
            if others:
                offenders[name] = others
    assert offenders == {}


def test_the_core_and_the_providers_name_the_channels_only_by_their_import_paths() -> None:
    # the registry loads a channel (or a provider kind) when it is used, by its "module:Class"
    # path: nothing below the channels imports one, so a channel is added without editing them
    offenders = {
        name: sorted(i for i in imported if _under(i, ("noti.channels",)))
        for name, imported in _graph().items()
        if _under(name, ("noti.core", "noti.providers", "noti.delivery"))
    }
    assert {name: via for name, via in offenders.items() if via} == {}


def test_the_python_api_is_in_no_import_circle() -> None:
    assert "noti.api" not in _reach(_graph(), "noti.api")


def test_no_module_of_the_package_is_in_an_import_circle() -> None:
    # every module's imports, lazy ones included, form layers: none reaches itself (the Celery
    # app names its worker's bootsteps as strings, as Celery names its own, so the steps
    # above it can import it)
    graph = _graph()
    circles = {name: sorted(m for m in graph[name] if name in _reach(graph, m)) for name in graph}
    assert {name: via for name, via in circles.items() if name != "noti" and via} == {}


def _layer(name: str) -> int:
    matches = [
        (len(p), rank) for rank, (_, prefixes) in enumerate(LAYERS) for p in prefixes if _under(name, (p,))
    ]
    assert matches, f"{name} is in no layer: add it to LAYERS (and to docs/reference/layout.md)"
    return max(matches)[1]


def test_every_module_is_in_a_layer() -> None:
    for name in _graph():
        _layer(name)


def test_no_import_runs_up_the_layers() -> None:
    up = {
        (name, f"{i} ({LAYERS[_layer(i)][0]} above {LAYERS[_layer(name)][0]})")
        for name, imported in _graph().items()
        for i in imported
        if _layer(i) > _layer(name) and (name, i) not in UPWARD
    }
    assert up == set()


def test_the_one_upward_import_is_still_there() -> None:
    # an exception nobody needs any more goes from the list
    graph = _graph()
    assert {(a, b) for a, b in UPWARD if b in graph.get(a, ())} == UPWARD


def test_the_top_of_the_package_holds_only_the_front_door_and_the_ground() -> None:
    assert {p.stem for p in PACKAGE.glob("*.py")} == FLAT


def test_no_module_is_over_500_lines_without_saying_why() -> None:
    # a long module says in its docstring why it stays whole ("Kept whole: …")
    long = {}
    for path in PACKAGE.rglob("*.py"):
        lines = path.read_text().count("\n")
        if lines > 500 and "Kept whole:" not in (ast.get_docstring(_parse(path)) or ""):
            long[str(path.relative_to(PACKAGE))] = lines
    assert long == {}
