"""The WeChat channel: template messages of an official account to a follower's openid."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from noti.core.channel import ChannelSpec, bad_target
from noti.core.record import json_object_field, name_field, url_field

__all__ = ["WEIXIN_CONTENT_MAX_BYTES", "WeixinChannel"]

#: A template's data: a JSON object of at most this many bytes encoded.
WEIXIN_CONTENT_MAX_BYTES = 16 * 1024


class WeixinChannel(ChannelSpec):
    """WeChat templates: the target is an openid (1-128 characters, no white space); ``pnb``
    (the official account) and ``tmpl`` (the template id) are one-line names without spaces,
    ``content`` a JSON object of at most 16 KiB, ``url`` an optional http(s) link."""

    name = "weixin"
    title = "WeChat template message"
    fields: ClassVar[Mapping[str, str]] = {
        "pnb": "noti_wx_pnb",
        "tmpl": "noti_wx_tmpl_id",
        "url": "noti_wx_tmpl_url",
        "content": "noti_weixin_tmpl_content",
    }
    required = ("pnb", "tmpl", "content")
    json_fields = frozenset({"content"})
    msgid_field = "noti_wx_tmpl_msgid"
    target_help = "A follower's openid"
    field_help: ClassVar[Mapping[str, str]] = {
        "pnb": "WeChat official account",
        "tmpl": "WeChat template id",
        "url": "WeChat template link",
        "content": "WeChat template data (a JSON object)",
    }
    stdin_field = "content"
    docs = "channels/weixin.md"

    def check_target(self, target: str) -> str:
        if len(target) > 128 or any(c.isspace() for c in target):
            raise bad_target("a WeChat openid is 1-128 characters without spaces")
        return target

    def check_fields(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, value in fields.items():
            if name == "content":
                out[name] = json_object_field("WeChat content", value, WEIXIN_CONTENT_MAX_BYTES)
            elif name == "url":
                out[name] = url_field("WeChat url", value)
            else:
                out[name] = name_field(
                    "WeChat account (-pnb)" if name == "pnb" else "template id (-tmpl)", value
                )
        return out
