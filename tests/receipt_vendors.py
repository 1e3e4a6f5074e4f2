"""Every kind of provider that takes pushed delivery receipts, as the tests that push receipts
of every kind meet them (tests/test_receipts.py, tests/test_receipts_provenance.py,
tests/test_receipt_flows.py): the options of a provider of each kind that takes them, and a
request that passes its authentication, whatever its body. Aliyun and Tencent sign nothing
(the URL carries noti's receipt key); Twilio signs the URL and form with its auth token,
WeChat the query with its callback token, the sandbox the body with its secret."""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import urlencode

from noti.channels.sms import twilio_receipts
from noti.channels.weixin import receipts as weixin_receipts
from noti.delivery.state import ReceiptRequest
from noti.providers.sandbox import sign_receipt
from tests.fakes.twilio import AUTH_TOKEN
from tests.sms_vendors import ALIYUN, RECEIPT_KEY, TENCENT, TWILIO

__all__ = [
    "KINDS",
    "RECEIPT_KEY",
    "SANDBOX_SECRET",
    "WX_APPID",
    "WX_SECRET",
    "WX_TOKEN",
    "authenticated",
    "receiving",
]

WX_APPID, WX_SECRET, WX_TOKEN = "wx0123456789abcdef", "wx-secret", "noti-callback-token"
SANDBOX_SECRET = "sb-secret"
#: The kinds that take pushed receipts.
KINDS = ("aliyun", "sandbox", "tencent", "twilio", "weixin")


def receiving(kind: str, **changes: Any) -> dict[str, Any]:
    """``[providers.<name>]`` of a provider of ``kind`` that takes pushed receipts (reaching no
    vendor unless ``changes`` say where)."""
    base = {
        "aliyun": {**ALIYUN.base, "receipt_key": RECEIPT_KEY},
        "tencent": {**TENCENT.base, "receipt_key": RECEIPT_KEY},
        "twilio": {**TWILIO.base, "status_callback": "https://noti.example.com/v1/receipts/tw"},
        "weixin": {
            "accounts": {"shop": {"appid": WX_APPID, "secret": WX_SECRET}},
            "callback_token": WX_TOKEN,
        },
        "sandbox": {"receipt_secret": SANDBOX_SECRET},
    }[kind]
    return {"kind": kind, **base, **changes}


def authenticated(
    kind: str,
    url: str,
    body: bytes = b"",
    *,
    method: str = "POST",
    secret: str = SANDBOX_SECRET,
    **query: str,
) -> ReceiptRequest:
    """``body`` sent to ``url`` as a vendor of ``kind`` sends it, authenticated for a provider
    with :func:`receiving`'s options (the sandbox's with ``secret``); ``query`` goes into
    WeChat's signed query (``echostr``, …)."""
    if kind == "twilio":
        signed = twilio_receipts.signature(AUTH_TOKEN, url, ReceiptRequest(method, url, body=body).form())
        headers = {"x-twilio-signature": signed, "content-type": "application/x-www-form-urlencoded"}
        return ReceiptRequest(method, url, headers, body)
    if kind == "weixin":
        stamp = str(int(time.time()))
        signature = weixin_receipts.signature(WX_TOKEN, stamp, "7")
        signed_query = urlencode({"signature": signature, "timestamp": stamp, "nonce": "7", **query})
        return ReceiptRequest(method, f"{url}?{signed_query}", {}, body)
    if kind == "sandbox":
        return ReceiptRequest(method, url, {"x-sandbox-signature": sign_receipt(secret, body)}, body)
    return ReceiptRequest(method, f"{url}?key={RECEIPT_KEY}", {}, body)
