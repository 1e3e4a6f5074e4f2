"""A record as JSON shows it (``noti list -json``, ``noti get``, the HTTP API): the seed's field
names, numbers as numbers, null when unset. Moved from :mod:`noti.core.record` (issue 34) to
keep that module under 500 lines.
"""

from __future__ import annotations

from typing import Any

from noti.core.record import Notification, msgid_field, provider_field, to_hash

__all__ = ["to_json_dict"]


def to_json_dict(record: Notification) -> dict[str, Any]:
    """The record as the seed shows it: seed field names, numbers as numbers, null when unset."""
    data = to_hash(record)
    out: dict[str, Any] = {}
    for key in (
        "id",
        "tp",
        "ct",
        "lm",
        "noti_c",
        "noti_lv",
        "noti_st",
        "noti_errmsg",
        "noti_timeout_at",
        "noti_type",
        "noti_retry",
        "noti_retry_max",
        "noti_target",
    ):
        out[key] = data[key]
    for key in ("ct", "lm", "noti_lv", "noti_st", "noti_timeout_at", "noti_retry", "noti_retry_max"):
        out[key] = int(out[key])
    out["noti_errmsg"] = record.errmsg or None
    out[provider_field(record.channel)] = record.provider
    for name, key in record.channel.spec.fields.items():
        out[key] = record.fields.get(name)
    out[msgid_field(record.channel)] = record.msgid
    out["noti_sent_by"] = record.sent_by
    out["noti_retry_policy"] = record.retry_policy
    out["noti_ident"] = record.identifier
    out["noti_revoked_at"] = record.revoked_ms
    out["expi"] = record.expires_ms
    out["noti_dlv"] = record.delivery
    out["noti_dlv_at"] = record.delivery_ms
    out["noti_dlv_code"] = record.delivery_code
    out["noti_dlv_text"] = record.delivery_text
    out["noti_dlv_times"] = dict(record.delivery_times) or None
    out["noti_fallback"] = record.fallback
    out["noti_fallback_of"] = record.fallback_of
    out["noti_status_cb"] = record.status_callback
    out["noti_status_of"] = record.status_of
    out["noti_parent"] = record.parent
    out["noti_rcpt"] = record.recipient
    out["noti_cat"] = record.category
    return out
