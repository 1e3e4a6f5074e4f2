"""What both push providers take besides their vendor's credentials: how a record's level
becomes the push's priority, how long an undelivered push is kept by the vendor, and the
waits after a refusal with no ``Retry-After``."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import Field

from noti.errors import InvalidInput
from noti.providers.base import ProviderOptions

__all__ = ["PushOptions", "push_text"]


class PushOptions(ProviderOptions):
    #: Records of this level and above are sent at high priority (FCM ``HIGH``, APNs 10: shown
    #: at once, waking the device); below it at normal priority (FCM ``NORMAL``, APNs 5: the
    #: device may hold it to save power). Default 2: the default level 1 is normal.
    high_level: int = Field(default=2, ge=1)
    #: Seconds the vendor keeps a push for a device that is offline, counted from each send
    #: attempt (FCM ``android.ttl``, APNs ``apns-expiration``); 0: deliver now or never.
    ttl_s: int = Field(default=86400, ge=0, le=2_419_200)
    #: The wait after a rate-limit refusal that names no ``Retry-After``.
    rate_limit_wait_s: float = Field(default=60.0, gt=0, le=3600)
    #: How long a send waits for the credential another worker is making.
    credential_wait_s: float = Field(default=15.0, ge=0, le=60)

    def high(self, level: int) -> bool:
        return level >= self.high_level


def push_text(fields: Mapping[str, Any]) -> tuple[str | None, str, dict[str, Any], str | None]:
    """A push record's ``title``, ``body``, ``data`` (an object; {} when absent, decoded when
    stored as JSON text) and ``collapse``."""
    data = fields.get("data") or {}
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except ValueError:
            data = None
    if not isinstance(data, dict):
        raise InvalidInput("push data must be a JSON object", code="e.cmd.noti.add.badcontent")
    title = fields.get("title")
    collapse = fields.get("collapse")
    return (
        str(title) if title else None,
        str(fields.get("body", "")),
        data,
        str(collapse) if collapse else None,
    )
