"""Loading objects named in the settings by ``"package.module:name"``."""

from __future__ import annotations

import importlib

from noti.errors import InvalidConfig

__all__ = ["load_object"]


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
