"""An ntfy channel for noti: a message published to an ntfy topic (https://ntfy.sh or a
self-hosted server). What a channel is: its name, its fields and how they are stored, how a
target and the fields are checked. Its provider is :mod:`noti_ntfy.provider`."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar

from noti.core.channel import ChannelSpec, bad_target
from noti.core.record import text_field
from noti.errors import InvalidInput

__all__ = ["NtfyChannel"]

#: An ntfy topic: letters, digits, ``_`` and ``-``, at most 64 characters.
_TOPIC = re.compile(r"[A-Za-z0-9_-]{1,64}")
#: ntfy's priorities, 1 (min) to 5 (max).
PRIORITIES = ("1", "2", "3", "4", "5")


class NtfyChannel(ChannelSpec):
    """ntfy: the target is a topic; ``message`` (required, at most 4,096 characters),
    ``title`` (one line), ``priority`` 1-5 (noti's level decides it when not given)."""

    name = "ntfy"
    title = "ntfy"
    # a third-party channel's hash fields are noti_<name>_…: no other channel can take them
    fields: ClassVar[Mapping[str, str]] = {
        "message": "noti_ntfy_message",
        "title": "noti_ntfy_title",
        "priority": "noti_ntfy_priority",
    }
    required = ("message",)
    target_help = "An ntfy topic"
    field_help: ClassVar[Mapping[str, str]] = {
        "message": "ntfy message",
        "title": "ntfy title",
        "priority": "ntfy priority, 1-5",
    }
    stdin_field = "message"
    docs = "https://docs.ntfy.sh/publish/"

    def check_target(self, target: str) -> str:
        if not _TOPIC.fullmatch(target):
            raise bad_target("an ntfy topic is 1-64 letters, digits, _ or -")
        return target

    def check_fields(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, value in fields.items():
            if name == "message":
                out[name] = text_field("ntfy message", value, 4096)
            elif name == "title":
                out[name] = text_field("ntfy title", value, 256, one_line=True)
            elif str(value) not in PRIORITIES:
                raise InvalidInput("ntfy priority is 1 to 5", code="e.cmd.noti.add.badfield")
            else:
                out[name] = str(value)
        return out
