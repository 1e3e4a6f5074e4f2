"""Loading what the settings name: objects by ``"package.module:name"``, and the modules of
``NOTI_IMPORTS``."""

from __future__ import annotations

import importlib
from collections.abc import Sequence

from noti.errors import InvalidConfig

__all__ = ["IMPORTS_CODE", "import_modules", "load_object"]

#: The error code of a ``NOTI_IMPORTS`` module that cannot be imported.
IMPORTS_CODE = "e.noti.config.imports"


def load_object(path: str, *, what: str) -> object:
    """The object ``path`` names: ``"package.module:name"`` (``"package.module.name"`` also works).

    Raises:
        InvalidConfig: malformed, or it cannot be imported (the message names ``what`` it was for).
    """
    module_name, sep, attr = path.partition(":")
    if not sep:
        module_name, _, attr = path.rpartition(".")
    if not module_name or not attr:
        raise InvalidConfig(f"{what} {path!r} must look like 'package.module:name'")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise InvalidConfig(f"{what} {path!r} cannot be loaded: {exc}") from exc


def import_modules(modules: Sequence[str]) -> None:
    """Import each of ``modules`` (``NOTI_IMPORTS``: the user's task modules).

    Raises:
        InvalidConfig: ``e.noti.config.imports``, naming the module that cannot be imported
        and why (its own import errors included).
    """
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - any failure of the user's module is reported
            raise InvalidConfig(
                f"NOTI_IMPORTS names the module {name!r}, which cannot be imported:"
                f" {type(exc).__name__}: {exc}",
                code=IMPORTS_CODE,
            ) from exc
