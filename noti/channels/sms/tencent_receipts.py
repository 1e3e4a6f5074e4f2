"""Tencent Cloud SMS delivery receipts: the status callback (pushed) and ``PullSmsSendStatus``
(polled) (shared/providers.md §3.5).

**Push.** The status-report callback URL configured in the SMS console (应用管理 › 回调配置 ›
短信下发状态) is ``<public_url>/v1/receipts/<provider name>/<receipt_key>``. Tencent does not
sign its callbacks, so the key in the URL's path is the authentication
(:func:`noti.providers._receipts.check_key`). A callback is a JSON array, one object per
message, several per request::

    [{"user_receive_time": "2015-10-17 08:03:04", "nationcode": "86", "mobile": "13xxxxxxxxx",
      "report_status": "SUCCESS", "errmsg": "DELIVRD", "description": "用户短信送达成功",
      "sid": "<SerialNo>"}]

``report_status`` ``SUCCESS`` → delivered, ``FAIL`` → undelivered (code ``errmsg``, text
``description``); the report names the message by ``sid`` (the ``SerialNo`` the send
returned; the callback does not carry ``SessionContext``). The answer is
``{"result": 0, "errmsg": "OK"}``.

**Poll** (``receipt_poll``; by default when no ``receipt_key`` is set): ``PullSmsSendStatus``
(TC3-signed like ``SendSms``; Tencent enables it on request) returns the reports not pulled
before, for every number of the application: each is reported (by ``SerialNo`` and
``SessionContext``, the record id; code ``Description``, e.g. ``DELIVRD``), whether or not it
is among the pending records, since a pulled report is never pulled again. A round pulls
until a pull returns less than a full page, at most :data:`MAX_PULLS` pulls.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from noti.delivery.state import Delivery, DeliveryReport, ReceiptBatch, ReceiptRequest
from noti.errors import DeliveryError
from noti.providers._receipts import beijing_ms, json_array, json_reply, malformed, string_field

__all__ = [
    "MAX_PULLS",
    "PULL_ACTION",
    "PULL_LIMIT",
    "STATES",
    "pull_reports",
    "read_callback",
    "reports_of_pull",
]

log = logging.getLogger(__name__)

#: ``report_status`` / ``ReportStatus`` and the report it gives.
STATES: dict[str, Delivery] = {"SUCCESS": Delivery.DELIVERED, "FAIL": Delivery.UNDELIVERED}
PULL_ACTION = "PullSmsSendStatus"
#: Reports per pull (Tencent's maximum) and pulls per poll round.
PULL_LIMIT = 100
MAX_PULLS = 10
_MAX_ID = 256


def read_callback(provider: str, request: ReceiptRequest) -> ReceiptBatch:
    """The reports of one status callback (the key already checked by the provider).

    Raises:
        ReceiptRejected: ``e.noti.receipt.malformed``: not a JSON array of objects, or a
            report without ``sid`` or with a ``report_status`` other than SUCCESS / FAIL.
    """
    reports = []
    for index, entry in enumerate(json_array(request, provider)):
        sid = string_field(entry, "sid", index, provider)
        status = string_field(entry, "report_status", index, provider)
        state = STATES.get(status)
        if state is None:
            raise malformed(provider, f"report {index}: report_status {status[:40]!r} is not SUCCESS or FAIL")
        if len(sid) > _MAX_ID:
            raise malformed(provider, f"report {index}: sid is longer than {_MAX_ID} characters")
        reports.append(
            DeliveryReport(
                provider=provider,
                state=state,
                vendor_id=sid,
                code=string_field(entry, "errmsg", index, provider, required=False),
                text=string_field(entry, "description", index, provider, required=False),
                at_ms=beijing_ms(entry.get("user_receive_time")),
            )
        )
    return ReceiptBatch(reports, json_reply({"result": 0, "errmsg": "OK"}))


def pull_reports(provider: str, pull: Callable[[], dict[str, Any]]) -> list[DeliveryReport]:
    """The reports of successive pulls (``pull`` makes one ``PullSmsSendStatus`` call and
    returns its ``Response``), until one is not full or :data:`MAX_PULLS` were made.

    Raises:
        DeliveryError: the first pull failed (a later failure keeps what was pulled: those
            reports are gone from Tencent).
    """
    reports: list[DeliveryReport] = []
    for _ in range(MAX_PULLS):
        try:
            answer = pull()
        except DeliveryError as exc:
            if not reports:
                raise
            log.warning("%s: PullSmsSendStatus failed after %d report(s): %s", provider, len(reports), exc)
            break
        rows = answer.get("PullSmsSendStatusSet")
        reports += reports_of_pull(provider, rows)
        if not isinstance(rows, list) or len(rows) < PULL_LIMIT:
            break
    return reports


def reports_of_pull(provider: str, rows: object) -> list[DeliveryReport]:
    """The reports of a ``PullSmsSendStatusSet``; rows naming no message or no known status
    are skipped (and logged)."""
    reports = []
    for row in rows if isinstance(rows, list) else []:
        if not isinstance(row, dict):
            continue
        report = _report_of_row(provider, row)
        if report is None:
            log.warning("%s: a pulled status report that cannot be read was skipped: %.200r", provider, row)
            continue
        reports.append(report)
    return reports


def _report_of_row(provider: str, row: dict[str, Any]) -> DeliveryReport | None:
    serial, context, status = row.get("SerialNo"), row.get("SessionContext"), row.get("ReportStatus")
    state = STATES.get(status) if isinstance(status, str) else None
    vendor_id = serial if isinstance(serial, str) and 0 < len(serial) <= _MAX_ID else None
    record_id = context if isinstance(context, str) and 0 < len(context) <= _MAX_ID else None
    if state is None or (vendor_id is None and record_id is None):
        return None
    received = row.get("UserReceiveTime")
    at_ms = received * 1000 if type(received) is int and 0 < received < 10**11 else 0
    return DeliveryReport(
        provider=provider,
        state=state,
        record_id=record_id,
        vendor_id=vendor_id,
        # Tencent's example answer gives the carrier's status code here ("DELIVRD")
        code=str(row.get("Description") or ""),
        text=str(status),
        at_ms=at_ms,
    )
