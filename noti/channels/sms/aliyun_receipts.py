"""Aliyun SMS delivery receipts: the SmsReport push and ``QuerySendDetails`` rows
(shared/providers.md §2.7).

**Push** (enabled in the SMS console: 通用设置 › 订阅回执消息 › HTTP 批量推送, type SmsReport):
the URL is ``<public_url>/v1/receipts/<provider name>/<receipt_key>``. Aliyun does not sign
the push, so the key in the URL's path is the authentication
(:func:`noti.providers._receipts.check_key`). A push is a JSON array, several reports per
request::

    [{"phone_number": "13900000000", "send_time": "2017-01-01 11:12:13",
      "report_time": "2017-01-01 11:12:14", "success": true, "err_code": "DELIVERED",
      "err_msg": "用户接收成功", "sms_size": "1", "biz_id": "12345", "out_id": "<record id>"}]

``success`` true → delivered, false → undelivered (code ``err_code``, text ``err_msg``);
the report names the record by ``out_id`` (noti sends the record id as ``OutId``) and the
message by ``biz_id``. The answer is ``{"code": 0, "msg": "接收成功"}``; Aliyun pushes again
after 1, 5 and 10 minutes when it gets another answer, and pushes are not idempotent.

**Poll** (:meth:`noti.channels.sms.aliyun.AliyunSmsProvider.poll_receipts`, by default when
no ``receipt_key`` is set): ``QuerySendDetails`` rows, ``SendStatus`` 3 → delivered, 2 →
undelivered (``ErrCode``), 1 → nothing yet (:func:`report_of_detail`).
"""

from __future__ import annotations

from typing import Any

from noti.delivery.state import Delivery, DeliveryReport, PendingDelivery, ReceiptBatch, ReceiptRequest
from noti.providers._receipts import beijing_ms, json_array, json_reply, malformed, string_field

__all__ = ["SEND_STATUS", "read_report", "report_of_detail"]

#: ``QuerySendDetails``' ``SendStatus``: 1 waiting for the carrier's receipt, 2 failed, 3 delivered.
SEND_STATUS: dict[str, Delivery] = {"3": Delivery.DELIVERED, "2": Delivery.UNDELIVERED}
_MAX_ID = 256


def read_report(provider: str, request: ReceiptRequest) -> ReceiptBatch:
    """The reports of one SmsReport push (the key already checked by the provider).

    Raises:
        ReceiptRejected: ``e.noti.receipt.malformed``: not a JSON array of objects, or a
            report without ``biz_id`` or a boolean ``success``.
    """
    reports = []
    for index, entry in enumerate(json_array(request, provider)):
        biz_id = string_field(entry, "biz_id", index, provider)
        out_id = string_field(entry, "out_id", index, provider, required=False)
        success = entry.get("success")
        if not isinstance(success, bool):
            raise malformed(provider, f"report {index}: 'success' is not true or false")
        if len(biz_id) > _MAX_ID or len(out_id) > _MAX_ID:
            raise malformed(provider, f"report {index}: biz_id or out_id is longer than {_MAX_ID} characters")
        reports.append(
            DeliveryReport(
                provider=provider,
                state=Delivery.DELIVERED if success else Delivery.UNDELIVERED,
                record_id=out_id or None,
                vendor_id=biz_id,
                code=string_field(entry, "err_code", index, provider, required=False),
                text=string_field(entry, "err_msg", index, provider, required=False),
                at_ms=beijing_ms(entry.get("report_time")),
            )
        )
    return ReceiptBatch(reports, json_reply({"code": 0, "msg": "接收成功"}))


def report_of_detail(provider: str, pending: PendingDelivery, row: dict[str, Any]) -> DeliveryReport | None:
    """The report of a ``QuerySendDetails`` row of ``pending``: None while it waits (1)."""
    state = SEND_STATUS.get(str(row.get("SendStatus")))
    if state is None:
        return None
    code = row.get("ErrCode")
    return DeliveryReport(
        provider=provider,
        state=state,
        record_id=pending.record_id,
        vendor_id=pending.vendor_id,
        code=code if isinstance(code, str) else "",
        text="",
        at_ms=beijing_ms(row.get("ReceiveDate")),
    )
