"""Registering consumers: the class file and the ``[webman.consumers.<name>]`` table.

``noti webman make-consumer`` does what ``solar:make:consumer`` does, in Python: the queue name
``send-code`` gives the class ``SendCode`` (the plugin's rule), the directory ``app/queue``
gives the module ``app.queue.send_code`` and the PHP class ``app\\queue\\SendCode`` (the one
``solar:make:consumer`` would create with the same answers, so PHP and noti share its keys).

The TOML file is edited as text, so comments and layout survive: a new table is appended, a
removed one is cut out (with its sub-tables). Each edit is checked by parsing the result; an
edit that would change anything else is refused and the file is left alone.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import tomli_w

from noti.bridge.webman.layout import class_name_for_queue, namespace_for_path
from noti.errors import BridgeError

__all__ = ["ConsumerScaffold", "read_consumers", "register", "scaffold", "unregister"]

_HEADER = re.compile(r"^\s*\[\[?\s*([^\[\]]+?)\s*\]\]?\s*(#.*)?$")

_TEMPLATE = '''"""Consumer of the webman queue of the PHP class {php_class_repr}."""

from __future__ import annotations

from noti.bridge.webman import Consumer, ConsumerMessage


class {class_name}(Consumer):
    # The PHP class that owns the queue: its keys and the `source` of its messages.
    php_class = {php_class_literal}
    # Connection name ([webman.connections.<name>]; "default" is [webman] redis_url).
    connection = "default"

    def consume(self, message: ConsumerMessage) -> None:
        # message.id: the stream id; message.data: the payload; raise to retry it.
        print(message.id, message.data)
'''


class ConsumerScaffold:
    """What ``make-consumer`` creates for one queue name and directory."""

    def __init__(self, queue: str, directory: str) -> None:
        """Raises: BridgeError: a queue name that is not letters and ``-``, or a bad directory."""
        try:
            self.class_name = class_name_for_queue(queue)
        except ValueError as exc:
            raise BridgeError(str(exc), code="e.noti.bridge.badname") from None
        parts = [p for p in re.split(r"[\\/]+", directory.strip()) if p and p != "."]
        if not parts or not all(p.isidentifier() for p in parts):
            raise BridgeError(
                f"directory {directory!r} must be a relative path of Python identifiers (app/queue)",
                code="e.noti.bridge.badpath",
            )
        self.directory = Path(*parts)
        self.module_file = self.directory / f"{_snake(self.class_name)}.py"
        self.module = ".".join([*parts, _snake(self.class_name)])
        self.php_class = f"{namespace_for_path('/'.join(parts))}\\{self.class_name}"

    @property
    def class_path(self) -> str:
        return f"{self.module}:{self.class_name}"

    def source(self) -> str:
        literal = '"' + self.php_class.replace("\\", "\\\\") + '"'
        return _TEMPLATE.format(
            php_class_repr=self.php_class.replace("\\", "\\\\"),
            class_name=self.class_name,
            php_class_literal=literal,
        )


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def scaffold(root: Path, made: ConsumerScaffold, *, overwrite: bool = False) -> Path:
    """Write the consumer module (and missing ``__init__.py`` files) under ``root``; its path.

    Raises:
        BridgeError: the module exists and ``overwrite`` is false.
    """
    target = root / made.module_file
    if target.exists() and not overwrite:
        raise BridgeError(f"{target} exists already", code="e.noti.bridge.exists")
    target.parent.mkdir(parents=True, exist_ok=True)
    folder = root
    for part in made.directory.parts:
        folder = folder / part
        init = folder / "__init__.py"
        if not init.exists():
            init.write_text("")
    target.write_text(made.source())
    return target


def _load(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise BridgeError(f"{path} is not valid TOML: {exc}", code="e.noti.bridge.config") from None


def read_consumers(path: Path) -> dict[str, Any]:
    """The ``[webman.consumers]`` tables of a TOML file (empty when it has none)."""
    webman = _load(path).get("webman", {})
    consumers = webman.get("consumers", {}) if isinstance(webman, dict) else {}
    return consumers if isinstance(consumers, dict) else {}


def register(path: Path, name: str, entry: dict[str, Any]) -> None:
    """Append ``[webman.consumers.<name>]`` to the TOML file (created if missing).

    Raises:
        BridgeError: the name is taken, or the file cannot be edited safely.
    """
    before = _load(path)
    if name in read_consumers(path):
        raise BridgeError(
            f"a webman consumer named {name!r} is registered already", code="e.noti.bridge.exists"
        )
    text = path.read_text() if path.exists() else ""
    table = tomli_w.dumps({"webman": {"consumers": {name: entry}}})
    updated = (
        text + ("" if not text or text.endswith("\n\n") else "\n" if text.endswith("\n") else "\n\n") + table
    )
    expected = _with_consumer(before, name, entry)
    _write_checked(path, updated, expected)


def unregister(path: Path, name: str) -> dict[str, Any]:
    """Cut ``[webman.consumers.<name>]`` (and its sub-tables) out of the TOML file; the entry.

    Raises:
        BridgeError: no such consumer, or it is not written as its own table.
    """
    before = _load(path)
    entry = read_consumers(path).get(name)
    if entry is None:
        raise BridgeError(f"no webman consumer named {name!r} in {path}", code="e.noti.bridge.unknown")
    kept: list[str] = []
    skipping = False
    for line in path.read_text().splitlines(keepends=True):
        header = _HEADER.match(line)
        if header:
            skipping = _table_path(header.group(1))[:3] == ["webman", "consumers", name]
        if not skipping:
            kept.append(line)
    expected = _with_consumer(before, name, None)
    _write_checked(path, "".join(kept).rstrip("\n") + "\n", expected)
    return dict(entry)


def _table_path(header: str) -> list[str]:
    try:
        parsed = tomllib.loads(f"[{header}]\n")
    except tomllib.TOMLDecodeError:
        return []
    keys: list[str] = []
    node: Any = parsed
    while isinstance(node, dict) and len(node) == 1:
        key = next(iter(node))
        keys.append(key)
        node = node[key]
    return keys


def _with_consumer(data: dict[str, Any], name: str, entry: dict[str, Any] | None) -> dict[str, Any]:
    copy = tomllib.loads(tomli_w.dumps(data)) if data else {}
    consumers = copy.setdefault("webman", {}).setdefault("consumers", {})
    if entry is None:
        consumers.pop(name, None)
    else:
        consumers[name] = entry
    return copy


def _pruned(value: Any) -> Any:
    """``value`` without empty tables (an emptied ``[webman.consumers]`` is no change)."""
    if not isinstance(value, dict):
        return value
    pruned = {k: _pruned(v) for k, v in value.items()}
    return {k: v for k, v in pruned.items() if v != {}}


def _write_checked(path: Path, text: str, expected: dict[str, Any]) -> None:
    try:
        result = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        result = None
    if result is None or _pruned(result) != _pruned(expected):
        raise BridgeError(
            f"cannot edit {path} safely (is [webman.consumers] written inline?); edit it by hand",
            code="e.noti.bridge.config",
        )
    path.write_text(text)
