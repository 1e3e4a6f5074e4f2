"""WeChat delivery receipts: the ``TEMPLATESENDJOBFINISH`` event pushed to the Official
Account's server URL (shared/providers.md §1.4). WeChat has no API to ask for a template
message's delivery, so nothing is polled.

The server URL configured in the account's console (基本配置 › 服务器配置) is
``<public_url>/v1/receipts/<provider name>``, with the console's Token = the provider's
``callback_token`` and message encryption in **plain mode** (明文模式): safe mode (AES) is not
supported and its events are refused with a message saying so.

* Every request carries ``signature``, ``timestamp`` and ``nonce`` in its query:
  ``signature`` = hex SHA-1 of the sorted, concatenated ``[token, timestamp, nonce]``,
  compared in constant time. A ``timestamp`` more than ``callback_window_s`` from noti's
  clock is refused too (a captured request cannot be replayed later).
* ``GET`` with ``echostr`` is the console's URL check: answered with ``echostr``.
* ``POST`` is an XML event: ``TEMPLATESENDJOBFINISH`` gives one report (``MsgID`` = the
  ``msgid`` the send returned; ``Status`` ``success`` → delivered, ``failed:user block`` or
  ``failed: system failed`` (the space is WeChat's) or any other ``failed…`` → undelivered).
  Any other event or message is not noti's business and gives no report. Either way the
  answer is ``success``, at once (WeChat waits 5 s, then pushes again, three times in all).

The XML is read with expat, refusing any document type declaration (so no entity of any
kind: no external entity, no "billion laughs") and any structure but ``<xml>`` with one level
of fields.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from typing import Any, NoReturn
from xml.parsers import expat

from noti.delivery.state import Delivery, DeliveryReport, ReceiptBatch, ReceiptReply, ReceiptRequest
from noti.providers._receipts import forged, malformed

__all__ = ["EVENT", "STATES", "parse_xml", "read_push", "signature"]

EVENT = "TEMPLATESENDJOBFINISH"
#: ``Status`` values and the report they give (other ``failed…`` values: undelivered too).
STATES: dict[str, Delivery] = {
    "success": Delivery.DELIVERED,
    "failed:user block": Delivery.UNDELIVERED,
    "failed: system failed": Delivery.UNDELIVERED,
}
SUCCESS = ReceiptReply(200, b"success")
#: Fields read from an event, and the longest value of each kept.
_MAX_FIELD = 4096
#: Elements nested deeper than this are refused: WeChat's messages nest two or three levels.
_MAX_DEPTH = 16
#: ``MsgID`` and ``CreateTime``: ASCII digits (``str.isdigit`` would take ``²``).
_DIGITS = re.compile(r"^[0-9]{1,32}$")


def signature(token: str, timestamp: str, nonce: str) -> str:
    """WeChat's ``signature`` query parameter for ``token``, ``timestamp`` and ``nonce``."""
    return hashlib.sha1("".join(sorted([token, timestamp, nonce])).encode()).hexdigest()


class _Refused(Exception):
    """Raised by the expat handlers to stop on a construct that is never accepted."""


def parse_xml(body: bytes, provider: str) -> dict[str, str]:
    """The fields of a WeChat ``<xml>`` message (``{"Event": "TEMPLATESENDJOBFINISH", …}``).

    Nested elements (some events carry them) are skipped; text and CDATA are joined.
    Elements nested deeper than :data:`_MAX_DEPTH` are refused.

    Raises:
        ReceiptRejected: ``e.noti.receipt.malformed``: not well-formed XML, a document type
            declaration or entity (refused whatever it declares), a root that is not ``xml``,
            a field given twice, or elements nested too deep.
    """
    parser = expat.ParserCreate(encoding=None)
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    fields: dict[str, str] = {}
    path: list[str] = []
    text: list[str] = []

    def refuse(*_: Any) -> NoReturn:
        raise _Refused("the XML declares a document type or entities, which WeChat never sends")

    def start(name: str, _attrs: Any) -> None:
        if not path and name != "xml":
            raise _Refused(f"the root element is <{name[:40]}>, not <xml>")
        if len(path) >= _MAX_DEPTH:
            raise _Refused(f"elements nested more than {_MAX_DEPTH} deep")
        path.append(name)
        text.clear()

    def end(name: str) -> None:
        if len(path) == 2:
            if name in fields:
                raise _Refused(f"<{name[:40]}> is given twice")
            fields[name] = "".join(text)[:_MAX_FIELD]
        path.pop()
        text.clear()

    def data(chunk: str) -> None:
        if len(path) == 2 and sum(map(len, text)) < _MAX_FIELD:
            text.append(chunk)

    parser.StartDoctypeDeclHandler = refuse
    parser.EntityDeclHandler = refuse
    parser.UnparsedEntityDeclHandler = refuse
    parser.ExternalEntityRefHandler = refuse
    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = data
    try:
        parser.Parse(body, True)
    except _Refused as exc:
        raise malformed(provider, f"refused XML: {exc}") from None
    except expat.ExpatError as exc:
        raise malformed(
            provider, f"the body is not well-formed XML ({expat.ErrorString(exc.code)})"
        ) from None
    return fields


def _check_signature(
    provider: str, request: ReceiptRequest, token: str, *, now_s: float, window_s: float
) -> None:
    query = request.query
    given, timestamp, nonce = query.get("signature"), query.get("timestamp"), query.get("nonce")
    if not given or not timestamp or nonce is None:
        raise forged(provider, "the URL lacks WeChat's signature, timestamp or nonce")
    if not hmac.compare_digest(signature(token, timestamp, nonce).encode(), given.lower().encode()):
        raise forged(provider, "the signature does not match (is callback_token the console's Token?)")
    try:
        stamp = int(timestamp)
    except ValueError:
        raise forged(provider, "timestamp is not a number of seconds") from None
    if abs(now_s - stamp) > window_s:
        raise forged(
            provider,
            f"timestamp {stamp} is {abs(now_s - stamp):.0f} s from noti's clock "
            f"(more than callback_window_s, {window_s:.0f} s): a replay, or a clock that is off",
        )


def read_push(
    provider: str, request: ReceiptRequest, token: str, *, now_s: float, window_s: float
) -> ReceiptBatch:
    """The reports of one request WeChat made to the server URL, and the answer it expects.

    Raises:
        ReceiptRejected: ``e.noti.receipt.signature`` (signature, or timestamp outside the
            window), ``e.noti.receipt.malformed`` (hostile or unreadable XML, safe mode, a
            ``TEMPLATESENDJOBFINISH`` without ``MsgID`` or with an unknown ``Status``).
    """
    _check_signature(provider, request, token, now_s=now_s, window_s=window_s)
    method = request.method.upper()
    if method == "GET":
        echostr = request.query.get("echostr")
        if echostr is None:
            raise malformed(provider, "a GET from WeChat is the URL check and carries echostr")
        return ReceiptBatch([], ReceiptReply(200, echostr.encode()))
    if method != "POST":
        raise malformed(provider, f"WeChat pushes with POST, not {request.method}")
    if request.query.get("encrypt_type", "raw") != "raw":
        raise malformed(
            provider,
            "the account's messages are encrypted (safe mode, AES): noti reads plain mode only; "
            "set 消息加解密方式 to 明文模式 in the console",
        )
    fields = parse_xml(request.body, provider)
    if "Encrypt" in fields:
        raise malformed(provider, "an encrypted (safe mode) message: noti reads plain mode only")
    if fields.get("MsgType") != "event" or fields.get("Event") != EVENT:
        return ReceiptBatch([], SUCCESS)  # another event or a user's message: not noti's
    msgid = fields.get("MsgID", "").strip()
    if not _DIGITS.match(msgid):
        raise malformed(provider, f"{EVENT} without a numeric MsgID")
    status = fields.get("Status", "")
    state = STATES.get(status)
    if state is None and status.startswith("failed"):
        state = Delivery.UNDELIVERED
    if state is None:
        raise malformed(provider, f"{EVENT} with Status {status[:60]!r}")
    created = fields.get("CreateTime", "").strip()
    report = DeliveryReport(
        provider=provider,
        state=state,
        vendor_id=msgid,
        code=status if state is Delivery.UNDELIVERED else "",
        text=status,
        at_ms=int(created) * 1000 if _DIGITS.match(created) and len(created) <= 12 else 0,
    )
    return ReceiptBatch([report], SUCCESS)
