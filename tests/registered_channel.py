"""A channel a project registers in its own module, named in ``NOTI_IMPORTS``
(tests/test_channel_registry.py: a worker process consumes its queue and delivers it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from noti.core.channel import ChannelSpec, register

__all__ = ["Siren"]


class Siren(ChannelSpec):
    """A siren: the target names it, ``text`` is what it says."""

    name = "siren"
    title = "siren"
    fields: ClassVar[Mapping[str, str]] = {"text": "noti_siren_text"}
    required = ("text",)


register("siren", f"{__name__}:Siren")
