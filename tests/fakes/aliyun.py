"""A local Aliyun dysmsapi (2017-05-25) for tests: ``SendSms`` and ``QuerySendDetails``.

It behaves as shared/providers.md §2.8 says the real one does:

- RPC signature V1, checked with its own code (not the client's): unknown AccessKeyId → 404
  ``InvalidAccessKeyId.NotFound``; bad signature → 400 ``SignatureDoesNotMatch``; timestamp
  unreadable / more than 15 minutes off its clock → 400 ``InvalidTimeStamp.Format`` /
  ``.Expired``; a nonce seen in the last 15 minutes → 400 ``SignatureNonceUsed``. Gateway
  errors carry ``RequestId, HostId, Code, Message, Recommend``. Without ``Format=JSON`` it
  answers XML.
- ``SendSms``: approved signs and templates (``isv.SMS_SIGNATURE_ILLEGAL`` /
  ``isv.SMS_TEMPLATE_ILLEGAL``); ``TemplateParam`` a JSON string of string values with every
  template variable (``isv.INVALID_JSON_PARAM`` / ``isv.TEMPLATE_MISSING_PARAMETERS``), no
  URL (``isv.PARAM_NOT_SUPPORT_URL``), optional length limit and blacklisted keywords; up to
  1,000 numbers, mainland as ``+86``/``0086``/``86``/bare 11 digits, international as
  country code + number without ``+``; a mainland number on an international template →
  ``isv.DOMESTIC_NUMBER_NOT_SUPPORTED``.
- Per-number flow control on :attr:`AliyunFake.clock`: verification templates 1/min, 5/hour,
  10/day per (sign, number) and 40/day per number; others 50/day per (sign, template,
  number) → HTTP 200 ``isv.BUSINESS_LIMIT_CONTROL`` with the window's Chinese message.
- A balance counter (``isv.AMOUNT_NOT_ENOUGH``); ``BizId`` + ``RequestId`` on success.
- No deduplication: the same request twice sends twice (:attr:`AliyunFake.sent`).
  :meth:`AliyunFake.accept_then_hang` records the next send and answers too late.
- ``QuerySendDetails`` (signed like any call): ``PhoneNumber``, ``SendDate`` (``yyyyMMdd``,
  Beijing time), ``PageSize`` (1-50) and ``CurrentPage`` required (``MissingParameter`` /
  ``isv.INVALID_PARAMETERS``); rows of that number and day, paged, each with its ``OutId``
  and no ``BizId`` (as Aliyun's). :attr:`AliyunFake.lookup_down` answers it with 503
  ``ServiceUnavailable`` (the send still works).
- Delivery (:mod:`tests.fakes._receipts`): each accepted number settles (by default at once)
  as delivered (``DELIVERED``), or failed with what
  :meth:`~tests.fakes._receipts.ReceiptControls.fail_delivery_to` says (default ``MK:0005``;
  the number as sent or as ``+86…``). ``QuerySendDetails`` shows ``SendStatus`` 1 (waiting
  for the receipt) before, 3 (delivered) or 2 (failed, with ``ErrCode``) after. With
  :attr:`~tests.fakes._receipts.ReceiptControls.receipt_url` set (the SmsReport URL, ``?key=``
  included) the reports settled together are POSTed there as one JSON array, and pushed again
  after ``fake.pusher.retry_after_s`` (shortened from 1, 5, 10 minutes) unless the answer is
  HTTP 200 with a numeric ``code`` (``bad_signature``: a wrong ``key=``: Aliyun signs nothing).
"""

from __future__ import annotations

import base64
import calendar
import hashlib
import hmac
import json
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import parse_qs, quote_plus
from xml.sax.saxutils import escape

from tests.fakes._receipts import Push, ReceiptControls, ReceiptPusher
from tests.fakes._server import FakeServer, Received, Reply

__all__ = ["AliyunFake", "AliyunTemplate", "SentSms"]

NONCE_TTL_S = 900
MAX_SKEW_S = 900
_MAINLAND = re.compile(r"^(?:\+86|0086|86)?(1[3-9][0-9]{9})$")
_INTERNATIONAL = re.compile(r"^[1-9][0-9]{6,15}$")
_URL = re.compile(r"https?://|www\.", re.IGNORECASE)
#: The parameters every signed RPC call carries.
_SIGNED = (
    "AccessKeyId",
    "Action",
    "Signature",
    "SignatureMethod",
    "SignatureNonce",
    "SignatureVersion",
    "Timestamp",
    "Version",
)


@dataclass(frozen=True)
class AliyunTemplate:
    variables: tuple[str, ...] = ("code",)
    kind: Literal["verification", "notice", "promotion"] = "verification"
    scope: Literal["mainland", "international"] = "mainland"


@dataclass(frozen=True)
class SentSms:
    biz_id: str
    phone: str
    sign_name: str
    template_code: str
    params: dict[str, str]
    out_id: str
    at_s: float


@dataclass
class _Flow:
    """Send times per flow-control key."""

    times: dict[tuple[str, ...], list[float]] = field(default_factory=dict)

    def count(self, key: tuple[str, ...], since: float) -> int:
        return sum(1 for t in self.times.get(key, ()) if t > since)

    def add(self, key: tuple[str, ...], at: float) -> None:
        self.times.setdefault(key, []).append(at)


def _encode(value: str) -> str:
    # Aliyun's documented recipe: form-encode, then patch + * %7E (a different route from
    # the client's RFC 3986 quote, on purpose).
    return quote_plus(value, safe="").replace("+", "%20").replace("*", "%2A").replace("%7E", "~")


def _taken(push: Push) -> bool:
    """Aliyun's test of the answer to a push: HTTP 200 and a numeric ``code``."""
    if push.status != 200:
        return False
    try:
        answer = json.loads(push.answer)
    except ValueError:
        return False
    return isinstance(answer, dict) and type(answer.get("code")) in (int, float)


class AliyunFake(ReceiptControls, FakeServer):
    """The fake; configure accounts, signs, templates and limits in the constructor."""

    def __init__(
        self,
        *,
        access_keys: dict[str, str] | None = None,
        signs: set[str] | None = None,
        templates: dict[str, AliyunTemplate] | None = None,
        balance: int | None = None,
        param_max_chars: int | None = None,
        black_keywords: tuple[str, ...] = (),
    ) -> None:
        super().__init__()
        self.access_keys = access_keys if access_keys is not None else {"LTAItestkey": "testsecret"}
        self.signs = signs if signs is not None else {"noti测试"}
        self.templates = templates if templates is not None else {"SMS_100001": AliyunTemplate()}
        self.balance = balance
        self.param_max_chars = param_max_chars
        self.black_keywords = black_keywords
        #: verification templates: (window s, permits, message word); per (sign, number)
        self.verification_limits = [(60, 1, "分钟级"), (3600, 5, "小时级"), (86400, 10, "天级")]
        self.number_daily_limit = 40
        self.notice_daily_limit = 50
        self.clock = time.time
        self.sent: list[SentSms] = []
        self._nonces: dict[str, float] = {}
        self._flow = _Flow()
        self._seq = 0
        self._hang_s = 0.0
        #: QuerySendDetails answers 503 ServiceUnavailable.
        self.lookup_down = False
        #: QuerySendDetails calls received (signature checked).
        self.lookups = 0
        self._state = threading.Lock()
        self._init_receipts()
        #: (BizId, number) -> how it ends; when it was settled (None: not yet).
        self._fates: dict[tuple[str, str], Any] = {}
        self._settled_at: dict[tuple[str, str], float | None] = {}
        #: BizId -> its messages not settled yet.
        self._unsettled: dict[str, list[SentSms]] = {}

    # -- receipts -------------------------------------------------------------------------------

    def _new_pusher(self) -> ReceiptPusher:
        pusher = ReceiptPusher(_taken)
        pusher.retry_after_s = (0.2, 0.5, 1.0)  # Aliyun: 1, 5 and 10 minutes
        return pusher

    def _default_success(self) -> tuple[str, str]:
        return "DELIVERED", "用户接收成功"

    def _default_failure(self) -> tuple[str, str]:
        return "MK:0005", "用户接收失败"

    def settle(self, *ids: str) -> None:
        """Settle the messages of these sends (by ``BizId``; all unsettled ones when none are
        named) and push their SmsReports in one request."""
        reports = []
        with self._state:
            now = self.clock()
            settling = [
                sms for biz_id in (ids or list(self._unsettled)) for sms in self._unsettled.pop(biz_id, [])
            ]
            for sms in settling:
                key = (sms.biz_id, sms.phone)
                self._settled_at[key] = now
                fate = self._fates[key]
                reports.append(
                    {
                        "phone_number": sms.phone,
                        "send_time": _beijing(sms.at_s),
                        "report_time": _beijing(now),
                        "success": fate.delivered,
                        "err_code": fate.code,
                        "err_msg": fate.text,
                        "sms_size": "1",
                        "biz_id": sms.biz_id,
                        "out_id": sms.out_id,
                    }
                )
        self._push_keyed(reports)

    # -- helpers ------------------------------------------------------------------------------

    def accept_then_hang(self, seconds: float) -> None:
        """Accept (and record) the next send, then answer only after ``seconds``."""
        self._hang_s = seconds

    @staticmethod
    def params(received: Received) -> dict[str, str]:
        merged = {k: v[0] for k, v in received.query.items()}
        if received.body and "form-urlencoded" in received.headers.get("content-type", ""):
            form = parse_qs(received.body.decode(), keep_blank_values=True)
            merged.update({k: v[0] for k, v in form.items()})
        return merged

    def expected_signature(self, method: str, params: dict[str, str], secret: str) -> tuple[str, str]:
        pairs = sorted((k, v) for k, v in params.items() if k != "Signature")
        canonical = "&".join(f"{_encode(k)}={_encode(v)}" for k, v in pairs)
        string_to_sign = method + "&" + _encode("/") + "&" + _encode(canonical)
        key = (secret + "&").encode()
        digest = hmac.new(key, string_to_sign.encode(), hashlib.sha1).digest()
        return base64.b64encode(digest).decode(), string_to_sign

    @staticmethod
    def _xml(root: str, data: dict[str, Any]) -> str:
        inner = "".join(f"<{k}>{escape(str(v))}</{k}>" for k, v in data.items() if not isinstance(v, dict))
        return f"<?xml version='1.0' encoding='UTF-8'?><{root}>{inner}</{root}>"

    def _answer(self, params: dict[str, str], status: int, data: dict[str, Any], root: str) -> Reply:
        if params.get("Format", "XML").upper() == "JSON":
            return Reply(status, data)
        return Reply(status, self._xml(root, data), headers={"content-type": "text/xml;charset=utf-8"})

    def _gateway(self, params: dict[str, str], status: int, code: str, message: str) -> Reply:
        data = {
            "RequestId": str(uuid.uuid4()).upper(),
            "HostId": "dysmsapi.aliyuncs.com",
            "Code": code,
            "Message": message,
            "Recommend": f"https://api.aliyun.com/troubleshoot?q={code}",
        }
        return self._answer(params, status, data, "Error")

    def _missing(self, params: dict[str, str], names: tuple[str, ...], purpose: str = "") -> Reply | None:
        """The gateway's ``MissingParameter`` for the first of ``names`` not given, or None."""
        for name in names:
            if not params.get(name):
                message = f'The input parameter "{name}" that is mandatory{purpose} is not supplied.'
                return self._gateway(params, 400, "MissingParameter", message)
        return None

    def _business(self, params: dict[str, str], code: str, message: str, **extra: Any) -> Reply:
        data = {"RequestId": str(uuid.uuid4()).upper(), "Code": code, "Message": message, **extra}
        root = f"{params.get('Action', 'SendSms')}Response"
        return self._answer(params, 200, data, root)

    # -- the gateway --------------------------------------------------------------------------

    def verify(self, received: Received) -> Reply | None:
        params = self.params(received)
        missing = self._missing(params, _SIGNED, " for processing this request")
        if missing is not None:
            return missing
        secret = self.access_keys.get(params["AccessKeyId"])
        if secret is None:
            return self._gateway(
                params, 404, "InvalidAccessKeyId.NotFound", "Specified access key is not found."
            )
        if params["SignatureMethod"] != "HMAC-SHA1" or params["SignatureVersion"] != "1.0":
            return self._gateway(
                params, 400, "InvalidParameter", "Specified signature method or version is not supported."
            )
        stamp = params["Timestamp"]
        try:
            parsed = time.strptime(re.sub(r"\.[0-9]+Z$", "Z", stamp), "%Y-%m-%dT%H:%M:%SZ")
        except ValueError:
            return self._gateway(
                params,
                400,
                "InvalidTimeStamp.Format",
                f"Specified time stamp or date value is not well formatted: {stamp}",
            )
        if abs(calendar.timegm(parsed) - self.clock()) > MAX_SKEW_S:
            return self._gateway(
                params, 400, "InvalidTimeStamp.Expired", "Specified time stamp or date value is expired."
            )
        expected, string_to_sign = self.expected_signature(received.method, params, secret)
        if not hmac.compare_digest(expected, params["Signature"]):
            return self._gateway(
                params,
                400,
                "SignatureDoesNotMatch",
                "Specified signature is not matched with our calculation. server string to sign is:"
                + string_to_sign,
            )
        now = self.clock()
        with self._state:
            self._nonces = {n: t for n, t in self._nonces.items() if now - t < NONCE_TTL_S}
            if params["SignatureNonce"] in self._nonces:
                return self._gateway(
                    params, 400, "SignatureNonceUsed", "Specified signature nonce was used already."
                )
            self._nonces[params["SignatureNonce"]] = now
        if params["Version"] != "2017-05-25":
            return self._gateway(params, 400, "InvalidVersion", "Specified parameter Version is not valid.")
        if params["Action"] not in ("SendSms", "QuerySendDetails"):
            return self._gateway(
                params,
                404,
                "InvalidAction.NotFound",
                "Specified api is not found, please check your url and method.",
            )
        return None

    # -- the API ------------------------------------------------------------------------------

    def succeed(self, received: Received) -> Reply:
        params = self.params(received)
        with self._state:
            if params["Action"] == "QuerySendDetails":
                return self._query(params)
            reply = self._send(params)
            accepted = (isinstance(reply.body, dict) and reply.body.get("Code") == "OK") or (
                isinstance(reply.body, str) and "<Code>OK</Code>" in reply.body
            )
            if self._hang_s and accepted:
                reply = Reply(reply.status, reply.body, reply.headers, hang_s=self._hang_s)
                self._hang_s = 0.0
            biz_id = self.sent[-1].biz_id if accepted else None
        if biz_id is not None:
            self._schedule(biz_id)
        return reply

    def _numbers(self, params: dict[str, str], template: AliyunTemplate) -> list[str] | Reply:
        raw = [n.strip() for n in params.get("PhoneNumbers", "").split(",") if n.strip()]
        if len(raw) > 1000:
            return self._business(params, "isv.MOBILE_COUNT_OVER_LIMIT", "手机号码数量超过限制")
        numbers = []
        for number in raw:
            mainland = _MAINLAND.match(number)
            if mainland:
                if template.scope == "international":
                    return self._business(
                        params, "isv.DOMESTIC_NUMBER_NOT_SUPPORTED", "国际/港澳台消息模板不支持发送境内号码"
                    )
                numbers.append(mainland.group(1))
            elif _INTERNATIONAL.match(number) and template.scope == "international":
                numbers.append(number)
            else:
                return self._business(params, "isv.MOBILE_NUMBER_ILLEGAL", "非法手机号")
        return numbers

    def _template_params(self, params: dict[str, str], template: AliyunTemplate) -> dict[str, str] | Reply:
        if not template.variables:
            return {}
        text = params.get("TemplateParam")
        if text is None:
            return self._business(params, "isv.TEMPLATE_MISSING_PARAMETERS", "模板缺少变量")
        try:
            values = json.loads(text)
        except ValueError:
            values = None
        if not isinstance(values, dict) or not all(isinstance(v, str) for v in values.values()):
            return self._business(params, "isv.INVALID_JSON_PARAM", "JSON参数不合法，只接受字符串值")
        if any(name not in values for name in template.variables):
            return self._business(params, "isv.TEMPLATE_MISSING_PARAMETERS", "模板缺少变量")
        for value in values.values():
            if _URL.search(value):
                return self._business(params, "isv.PARAM_NOT_SUPPORT_URL", "不支持URL")
            if self.param_max_chars is not None and len(value) > self.param_max_chars:
                return self._business(params, "isv.PARAM_LENGTH_LIMIT", "参数超出长度限制")
            if any(word in value for word in self.black_keywords):
                return self._business(params, "isv.BLACK_KEY_CONTROL_LIMIT", "黑名单管控")
        return values

    def _limited(
        self, params: dict[str, str], template: AliyunTemplate, numbers: list[str], now: float
    ) -> Reply | None:
        sign, code = params["SignName"], params["TemplateCode"]
        for number in numbers:
            if template.kind == "verification":
                for window, permits, word in self.verification_limits:
                    if self._flow.count(("code", sign, number), now - window) >= permits:
                        return self._business(
                            params, "isv.BUSINESS_LIMIT_CONTROL", f"触发{word}流控Permits:{permits}"
                        )
                if self._flow.count(("number", number), now - 86400) >= self.number_daily_limit:
                    return self._business(
                        params,
                        "isv.BUSINESS_LIMIT_CONTROL",
                        f"触发号码天级流控Permits:{self.number_daily_limit}",
                    )
            elif self._flow.count(("notice", sign, code, number), now - 86400) >= self.notice_daily_limit:
                return self._business(
                    params, "isv.BUSINESS_LIMIT_CONTROL", f"触发天级流控Permits:{self.notice_daily_limit}"
                )
        return None

    def _send(self, params: dict[str, str]) -> Reply:
        missing = self._missing(params, ("PhoneNumbers", "SignName", "TemplateCode"))
        if missing is not None:
            return missing
        if params["SignName"] not in self.signs:
            return self._business(params, "isv.SMS_SIGNATURE_ILLEGAL", "该账号下找不到对应签名")
        template = self.templates.get(params["TemplateCode"])
        if template is None:
            return self._business(params, "isv.SMS_TEMPLATE_ILLEGAL", "该账号下找不到对应模板")
        numbers = self._numbers(params, template)
        if isinstance(numbers, Reply):
            return numbers
        values = self._template_params(params, template)
        if isinstance(values, Reply):
            return values
        now = self.clock()
        limited = self._limited(params, template, numbers, now)
        if limited is not None:
            return limited
        if self.balance is not None and self.balance < len(numbers):
            return self._business(params, "isv.AMOUNT_NOT_ENOUGH", "账户余额不足")
        self._seq += 1
        biz_id = f"{900619746936498440 + self._seq}^0"
        for number in numbers:
            self._flow.add(("code", params["SignName"], number), now)
            self._flow.add(("number", number), now)
            self._flow.add(("notice", params["SignName"], params["TemplateCode"], number), now)
            self.sent.append(
                SentSms(
                    biz_id,
                    number,
                    params["SignName"],
                    params["TemplateCode"],
                    values,
                    params.get("OutId", ""),
                    now,
                )
            )
            self._fates[(biz_id, number)] = self._outcome(number, f"+86{number}")
            self._settled_at[(biz_id, number)] = None
            self._unsettled.setdefault(biz_id, []).append(self.sent[-1])
        if self.balance is not None:
            self.balance -= len(numbers)
        return self._business(params, "OK", "OK", BizId=biz_id)

    def _detail(self, sms: SentSms) -> dict[str, Any]:
        """A ``QuerySendDetails`` row: SendStatus 1 until it is settled, then 3 or 2."""
        settled = self._settled_at.get((sms.biz_id, sms.phone))
        fate = self._fates[(sms.biz_id, sms.phone)]
        return {
            "PhoneNum": sms.phone,
            "SendStatus": 1 if settled is None else 3 if fate.delivered else 2,
            "ErrCode": "" if settled is None else fate.code,
            "TemplateCode": sms.template_code,
            "Content": f"【{sms.sign_name}】{json.dumps(sms.params, ensure_ascii=False)}",
            "SendDate": _beijing(sms.at_s),
            "ReceiveDate": "" if settled is None else _beijing(settled),
            "OutId": sms.out_id,
        }

    def _query(self, params: dict[str, str]) -> Reply:
        self.lookups += 1
        if self.lookup_down:
            return self._gateway(
                params, 503, "ServiceUnavailable", "The request has failed due to a temporary failure."
            )
        missing = self._missing(params, ("PhoneNumber", "SendDate", "PageSize", "CurrentPage"))
        if missing is not None:
            return missing
        try:
            size, page = int(params["PageSize"]), int(params["CurrentPage"])
        except ValueError:
            size = page = 0
        if not (1 <= size <= 50 and page >= 1 and re.fullmatch(r"[0-9]{8}", params["SendDate"])):
            return self._business(params, "isv.INVALID_PARAMETERS", "参数异常")
        phone = params.get("PhoneNumber", "")
        day = params.get("SendDate", "")
        rows = [
            s
            for s in self.sent
            if s.phone == phone
            and time.strftime("%Y%m%d", time.gmtime(s.at_s + 8 * 3600)) == day
            and (not params.get("BizId") or s.biz_id == params["BizId"])
        ]
        details = [self._detail(s) for s in rows]
        shown = details[(page - 1) * size : page * size]
        return self._business(
            params, "OK", "OK", TotalCount=len(details), SmsSendDetailDTOs={"SmsSendDetailDTO": shown}
        )


def _beijing(at_s: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at_s + 8 * 3600))
