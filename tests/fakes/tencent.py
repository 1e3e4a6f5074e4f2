"""A local Tencent Cloud SMS (API 3.0, ``SendSms`` 2021-01-11) for tests.

It behaves as shared/providers.md §3.6 says the real one does:

- HTTP 200 with ``Content-Type: application/json`` exactly, for everything; request-level
  errors in ``Response.Error``.
- TC3-HMAC-SHA256 checked with its own code: the ``", "`` separators of ``Authorization``,
  a credential scope of the *UTC* date of ``X-TC-Timestamp`` and service ``sms``, whatever
  ``SignedHeaders`` lists (``content-type`` and ``host`` required; values lower-cased);
  unknown SecretId → ``AuthFailure.SecretIdNotFound``, bad signature →
  ``AuthFailure.SignatureFailure``, more than 5 minutes off :attr:`TencentFake.clock` →
  ``AuthFailure.SignatureExpire``; ``X-TC-Action/Version/Region`` required.
- Request checks: ``SmsSdkAppId``, approved template and (mainland) sign, parameter count,
  verification parameters 0–6 digits, ≤ 12 characters unless ``enterprise``, no URLs, ≤ 200
  numbers, no mixing mainland and international, template region vs numbers, marketing
  templates only 08:00–22:00 Beijing time.
- Per-number outcomes in ``SendStatusSet`` (so one answer can mix ``Ok`` and failures): bad
  number, blacklist, app daily cap, balance, and the frequency policy on the clock (same
  content once per 30 s, ``hour_limit``/hour, ``day_limit``/day).
- ``SerialNo`` per accepted number, ``SessionContext`` echoed; no deduplication
  (:attr:`TencentFake.sent`); :meth:`TencentFake.accept_then_hang` records the next send
  and answers too late.
- ``PullSmsSendStatusByPhoneNumber`` (signed the same way, its own ``X-TC-Action``):
  ``BeginTime``, ``Offset``, ``Limit`` (1-100), ``PhoneNumber``, ``SmsSdkAppId`` required,
  ``EndTime`` optional; the delivery reports of that number sent in the window, paged, each
  with ``SerialNo`` and ``SessionContext``. :attr:`TencentFake.lookup_down` answers it with
  ``InternalError.Timeout`` (the send still works).
- Delivery (:mod:`tests.fakes._receipts`): each accepted number settles (by default at once)
  as ``SUCCESS`` / ``DELIVRD``, or ``FAIL`` with what
  :meth:`~tests.fakes._receipts.ReceiptControls.fail_delivery_to` says (default ``MK:0001``).
  A settled report is pulled once by ``PullSmsSendStatus`` (``Limit`` 1-100 and
  ``SmsSdkAppId`` required; :attr:`TencentFake.pull_down` answers ``InternalError.Timeout``)
  and, with :attr:`~tests.fakes._receipts.ReceiptControls.receipt_url` set (the callback URL,
  ``?key=`` included), is POSTed there as a JSON array: the reports settled together go in one
  request (``bad_signature``: a wrong ``key=``, as Tencent signs nothing). The delivery
  reports ``PullSmsSendStatusByPhoneNumber`` lists carry the same status.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from tests.fakes._receipts import ReceiptControls
from tests.fakes._server import FakeServer, Received, Reply

__all__ = ["SentSms", "TencentFake", "TencentTemplate"]

MAX_SKEW_S = 300
_AUTH = re.compile(
    r"^TC3-HMAC-SHA256 Credential=(?P<id>[^/]+)/(?P<date>[0-9]{4}-[0-9]{2}-[0-9]{2})/(?P<service>[a-z]+)"
    r"/tc3_request, SignedHeaders=(?P<headers>[a-z0-9;-]+), Signature=(?P<sig>[0-9a-f]{64})$"
)
_MAINLAND = re.compile(r"^(?:\+86|0086|86)?(1[3-9][0-9]{9})$")
_E164 = re.compile(r"^\+([1-9][0-9]{6,14})$")
_URL = re.compile(r"https?://|www\.", re.IGNORECASE)
_ISO = {"86": "CN", "852": "HK", "853": "MO", "886": "TW", "1": "US", "44": "GB", "65": "SG"}


@dataclass(frozen=True)
class TencentTemplate:
    param_count: int = 1
    kind: Literal["verification", "notice", "marketing"] = "verification"
    scope: Literal["mainland", "international"] = "mainland"


@dataclass(frozen=True)
class SentSms:
    serial_no: str
    phone: str
    template_id: str
    params: tuple[str, ...]
    session_context: str
    at_s: float


class TencentFake(ReceiptControls, FakeServer):
    """The fake; configure the account in the constructor."""

    def __init__(
        self,
        *,
        secrets: dict[str, str] | None = None,
        sdk_app_id: str = "1400006666",
        signs: set[str] | None = None,
        templates: dict[str, TencentTemplate] | None = None,
        enterprise: bool = False,
        balance: int | None = None,
        app_daily_limit: int | None = None,
        hour_limit: int = 5,
        day_limit: int = 10,
        blacklist: set[str] | None = None,
    ) -> None:
        super().__init__()
        self.secrets = secrets if secrets is not None else {"AKIDtestsecretid": "testsecretkey"}
        self.sdk_app_id = sdk_app_id
        self.signs = signs if signs is not None else {"noti测试"}
        self.templates = templates if templates is not None else {"1001": TencentTemplate()}
        self.enterprise = enterprise
        self.balance = balance
        self.app_daily_limit = app_daily_limit
        self.hour_limit = hour_limit
        self.day_limit = day_limit
        self.blacklist = blacklist if blacklist is not None else set()
        self.clock = time.time
        self.sent: list[SentSms] = []
        self._history: dict[str, list[tuple[float, str]]] = {}
        self._seq = 0
        self._hang_s = 0.0
        #: PullSmsSendStatusByPhoneNumber answers InternalError.Timeout.
        self.lookup_down = False
        #: PullSmsSendStatusByPhoneNumber calls received (signature checked).
        self.lookups = 0
        self._state = threading.Lock()
        #: PullSmsSendStatus answers InternalError.Timeout.
        self.pull_down = False
        #: PullSmsSendStatus calls received (signature checked).
        self.pulls = 0
        #: Called at each PullSmsSendStatus before it is answered (a test stops Redis there).
        self.on_pull: Callable[[], None] | None = None
        self._init_receipts()
        self._fates: dict[str, Any] = {}
        self._unsettled: dict[str, SentSms] = {}
        self._pullable: list[dict[str, Any]] = []

    # -- receipts ---------------------------------------------------------------------------------

    def _default_success(self) -> tuple[str, str]:
        return "DELIVRD", "用户短信送达成功"

    def _default_failure(self) -> tuple[str, str]:
        return "MK:0001", "用户短信未送达"

    def settle(self, *ids: str) -> None:
        """Settle these messages (by ``SerialNo``; all unsettled ones when none are named):
        pullable from now on, and pushed together in one callback request."""
        with self._state:
            serials = list(ids) if ids else list(self._unsettled)
            settled = [self._unsettled.pop(s) for s in serials if s in self._unsettled]
            entries = []
            for sms in settled:
                fate = self._fates[sms.serial_no]
                status = "SUCCESS" if fate.delivered else "FAIL"
                received = self.clock()
                self._pullable.append(
                    {
                        "UserReceiveTime": int(received),
                        "CountryCode": "86" if sms.phone.startswith("+86") else "",
                        "SubscriberNumber": sms.phone[3:] if sms.phone.startswith("+86") else sms.phone,
                        "PhoneNumber": sms.phone,
                        "SerialNo": sms.serial_no,
                        "ReportStatus": status,
                        "Description": fate.code,
                        "SessionContext": sms.session_context,
                    }
                )
                entries.append(
                    {
                        "user_receive_time": time.strftime(
                            "%Y-%m-%d %H:%M:%S", time.gmtime(received + 8 * 3600)
                        ),
                        "nationcode": "86" if sms.phone.startswith("+86") else "",
                        "mobile": sms.phone[3:] if sms.phone.startswith("+86") else sms.phone,
                        "report_status": status,
                        "errmsg": fate.code,
                        "description": fate.text,
                        "sid": sms.serial_no,
                    }
                )
        self._push_keyed(entries)

    def _pull_status(self, body: dict[str, Any]) -> Reply:
        self.pulls += 1
        if self.on_pull is not None:
            self.on_pull()
        if self.pull_down:
            return self.error("InternalError.Timeout", "接口超时。")
        for name in ("Limit", "SmsSdkAppId"):
            if name not in body:
                return self.error(
                    "MissingParameter", f"The request is missing a required parameter `{name}`."
                )
        if body["SmsSdkAppId"] != self.sdk_app_id:
            return self.error("InvalidParameterValue.SdkAppIdNotExist", "SdkAppId 不存在。")
        limit = body["Limit"]
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 100:
            return self.error("InvalidParameter", "Limit is an integer from 1 to 100.")
        rows, self._pullable = self._pullable[:limit], self._pullable[limit:]
        return Reply(200, {"Response": {"PullSmsSendStatusSet": rows, "RequestId": str(uuid.uuid4())}})

    def accept_then_hang(self, seconds: float) -> None:
        """Accept (and record) the next send, then answer only after ``seconds``."""
        self._hang_s = seconds

    @staticmethod
    def error(code: str, message: str) -> Reply:
        return Reply(
            200, {"Response": {"Error": {"Code": code, "Message": message}, "RequestId": str(uuid.uuid4())}}
        )

    @staticmethod
    def statuses(*entries: dict[str, Any]) -> Reply:
        """A scripted per-number answer."""
        return Reply(200, {"Response": {"SendStatusSet": list(entries), "RequestId": str(uuid.uuid4())}})

    # -- authentication -------------------------------------------------------------------------

    def verify(self, received: Received) -> Reply | None:
        h = received.headers
        if received.method != "POST":
            return self.error("InvalidParameter", "only POST with a JSON body is supported here")
        if h.get("x-tc-action") not in ("SendSms", "PullSmsSendStatusByPhoneNumber", "PullSmsSendStatus"):
            return self.error("InvalidAction", f"The action `{h.get('x-tc-action')}` is not found.")
        if h.get("x-tc-version") != "2021-01-11":
            return self.error("NoSuchVersion", f"The version `{h.get('x-tc-version')}` is not supported.")
        if not h.get("x-tc-region"):
            return self.error("MissingParameter", "The request is missing a required parameter `Region`.")
        try:
            stamp = int(h.get("x-tc-timestamp", ""))
        except ValueError:
            return self.error("MissingParameter", "The request is missing a required parameter `Timestamp`.")
        match = _AUTH.match(h.get("authorization", ""))
        if match is None:
            return self.error(
                "AuthFailure.SignatureFailure", "The provided credentials could not be validated."
            )
        key = self.secrets.get(match["id"])
        if key is None:
            return self.error(
                "AuthFailure.SecretIdNotFound", "The SecretId is not found, please ensure it exists."
            )
        if abs(stamp - self.clock()) > MAX_SKEW_S:
            return self.error(
                "AuthFailure.SignatureExpire",
                "Signature expire. Timestamp of the request must be within 5 minutes of the server time.",
            )
        names = match["headers"].split(";")
        if "content-type" not in names or "host" not in names or names != sorted(names):
            return self.error(
                "AuthFailure.SignatureFailure", "SignedHeaders must list content-type and host, sorted."
            )
        date = time.strftime("%Y-%m-%d", time.gmtime(stamp))
        if match["date"] != date or match["service"] != "sms":
            return self.error(
                "AuthFailure.SignatureFailure", "The credential scope does not match the request."
            )
        canonical = (
            "POST\n/\n\n"
            + "".join(f"{n}:{h.get(n, '').strip().lower()}\n" for n in names)
            + "\n"
            + match["headers"]
            + "\n"
            + hashlib.sha256(received.body).hexdigest()
        )
        to_sign = "\n".join(
            [
                "TC3-HMAC-SHA256",
                str(stamp),
                f"{date}/sms/tc3_request",
                hashlib.sha256(canonical.encode()).hexdigest(),
            ]
        )
        secret_date = hmac.new(("TC3" + key).encode(), date.encode(), hashlib.sha256).digest()
        secret_service = hmac.new(secret_date, b"sms", hashlib.sha256).digest()
        secret_signing = hmac.new(secret_service, b"tc3_request", hashlib.sha256).digest()
        expected = hmac.new(secret_signing, to_sign.encode(), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected, match["sig"]):
            return self.error(
                "AuthFailure.SignatureFailure", "The provided credentials could not be validated."
            )
        return None

    # -- SendSms ----------------------------------------------------------------------------------

    def succeed(self, received: Received) -> Reply:
        try:
            body = json.loads(received.body)
        except ValueError:
            return self.error("FailedOperation.JsonParseFail", "解析请求包体时候失败。")
        if not isinstance(body, dict):
            return self.error("FailedOperation.JsonParseFail", "解析请求包体时候失败。")
        with self._state:
            if received.headers.get("x-tc-action") == "PullSmsSendStatusByPhoneNumber":
                return self._pull(body)
            if received.headers.get("x-tc-action") == "PullSmsSendStatus":
                return self._pull_status(body)
            reply = self._send(body)
            accepted = [
                s["SerialNo"]
                for s in reply.body["Response"].get("SendStatusSet", [])
                if s.get("Code") == "Ok"
            ]
            if self._hang_s and accepted:
                reply = Reply(reply.status, reply.body, reply.headers, hang_s=self._hang_s)
                self._hang_s = 0.0
        self._schedule(*accepted)
        return reply

    def _pull(self, body: dict[str, Any]) -> Reply:
        self.lookups += 1
        if self.lookup_down:
            return self.error("InternalError.Timeout", "接口超时。")
        for name in ("BeginTime", "Offset", "Limit", "PhoneNumber", "SmsSdkAppId"):
            if name not in body:
                return self.error(
                    "MissingParameter", f"The request is missing a required parameter `{name}`."
                )
        if body["SmsSdkAppId"] != self.sdk_app_id:
            return self.error("InvalidParameterValue.SdkAppIdNotExist", "SdkAppId 不存在。")
        begin, offset, limit = body["BeginTime"], body["Offset"], body["Limit"]
        end = body.get("EndTime", int(self.clock()))
        if (
            not all(isinstance(v, int) and v >= 0 for v in (begin, offset, limit, end))
            or not 1 <= limit <= 100
        ):
            return self.error(
                "InvalidParameter", "BeginTime, EndTime, Offset and Limit (1-100) are integers."
            )
        number = _e164(str(body["PhoneNumber"]))
        rows = [
            {
                "UserReceiveTime": int(s.at_s),
                "CountryCode": "86" if s.phone.startswith("+86") else "",
                "SubscriberNumber": s.phone[3:] if s.phone.startswith("+86") else s.phone,
                "PhoneNumber": s.phone,
                "SerialNo": s.serial_no,
                "ReportStatus": "SUCCESS" if self._fates[s.serial_no].delivered else "FAIL",
                "Description": self._fates[s.serial_no].code,
                "SessionContext": s.session_context,
            }
            for s in self.sent
            if s.phone == number and begin <= s.at_s <= end
        ]
        return Reply(
            200,
            {
                "Response": {
                    "PullSmsSendStatusSet": rows[offset : offset + limit],
                    "RequestId": str(uuid.uuid4()),
                }
            },
        )

    def _request_error(self, body: dict[str, Any]) -> Reply | None:
        if body.get("SmsSdkAppId") != self.sdk_app_id:
            return self.error("InvalidParameterValue.SdkAppIdNotExist", "SdkAppId 不存在。")
        template = self.templates.get(str(body.get("TemplateId")))
        if template is None:
            return self.error("FailedOperation.TemplateIncorrectOrUnapproved", "模板未审批或内容不匹配。")
        if template.scope == "mainland" and body.get("SignName") not in self.signs:
            return self.error("FailedOperation.SignatureIncorrectOrUnapproved", "签名未审批或格式错误。")
        numbers = body.get("PhoneNumberSet")
        if not isinstance(numbers, list) or not numbers:
            return self.error("MissingParameter.EmptyPhoneNumberSet", "传入的号码列表为空。")
        if len(numbers) > 200:
            return self.error("LimitExceeded.PhoneNumberCountLimit", "单次提交的手机号个数超过200个。")
        kinds = {
            "mainland" if _MAINLAND.match(str(n)) else "international" for n in numbers if _valid(str(n))
        }
        if len(kinds) > 1:
            return self.error(
                "UnsupportedOperation.ContainDomesticAndInternationalPhoneNumber",
                "群发请求里既有国内手机号也有国际手机号。",
            )
        if kinds == {"international"} and template.scope == "mainland":
            return self.error(
                "UnsupportedOperation.ChineseMainlandTemplateToGlobalPhone", "国内模板不能发送国际号码。"
            )
        if kinds == {"mainland"} and template.scope == "international":
            return self.error(
                "UnsupportedOperation.GlobalTemplateToChineseMainlandPhone", "国际模板不能发送国内号码。"
            )
        params = body.get("TemplateParamSet", [])
        if not isinstance(params, list) or not all(isinstance(p, str) for p in params):
            return self.error("InvalidParameter", "TemplateParamSet must be an array of strings.")
        if len(params) != template.param_count:
            return self.error(
                "FailedOperation.TemplateParamSetNotMatchApprovedTemplate",
                "请求内容与审核通过的模板内容不匹配。",
            )
        for value in params:
            if template.kind == "verification" and not re.fullmatch(r"[0-9]{0,6}", value):
                return self.error(
                    "InvalidParameterValue.TemplateParameterFormatError",
                    "验证码模板参数格式错误，只能传入0-6位纯数字。",
                )
            if not self.enterprise and len(value) > 12:
                return self.error(
                    "InvalidParameterValue.TemplateParameterLengthLimit", "单个模板变量字符数超过12个。"
                )
            if _URL.search(value):
                return self.error(
                    "InvalidParameterValue.ProhibitedUseUrlInTemplateParameter", "禁止在模板变量中使用 URL。"
                )
        if template.kind == "marketing":
            hour = time.gmtime(self.clock() + 8 * 3600).tm_hour
            if not 8 <= hour < 22:
                return self.error(
                    "FailedOperation.MarketingSendTimeConstraint", "营销短信只允许在8点到22点发送。"
                )
        if len(str(body.get("SessionContext", "")).encode()) >= 512:
            return self.error("InvalidParameter", "SessionContext must be shorter than 512 bytes.")
        return None

    def _send(self, body: dict[str, Any]) -> Reply:
        refused = self._request_error(body)
        if refused is not None:
            return refused
        now = self.clock()
        params = tuple(body.get("TemplateParamSet", []))
        content = json.dumps([body["TemplateId"], params])
        context = str(body.get("SessionContext", ""))
        entries = []
        for raw in body["PhoneNumberSet"]:
            number = _e164(str(raw))
            code, message = self._number_outcome(number, content, now)
            entry: dict[str, Any] = {
                "SerialNo": "",
                "PhoneNumber": number or str(raw),
                "Fee": 0,
                "SessionContext": context,
                "Code": code,
                "Message": message,
                "IsoCode": _iso(number),
            }
            if code == "Ok" and number is not None:
                self._seq += 1
                entry["SerialNo"] = f"2645:{1045710669157053657849499619 + self._seq}"
                entry["Fee"] = 1
                self._history.setdefault(number, []).append((now, content))
                sms = SentSms(entry["SerialNo"], number, str(body["TemplateId"]), params, context, now)
                self.sent.append(sms)
                self._fates[sms.serial_no] = self._outcome(number)
                self._unsettled[sms.serial_no] = sms
                if self.balance is not None:
                    self.balance -= 1
            entries.append(entry)
        return self.statuses(*entries)

    def _number_outcome(self, number: str | None, content: str, now: float) -> tuple[str, str]:
        if number is None:
            return "InvalidParameterValue.IncorrectPhoneNumber", "手机号格式错误。"
        if number in self.blacklist:
            return (
                "FailedOperation.PhoneNumberInBlacklist",
                "手机号在黑名单库中，通常是用户退订或者命中运营商黑名单导致的。",
            )
        if (
            self.app_daily_limit is not None
            and sum(1 for s in self.sent if s.at_s > now - 86400) >= self.app_daily_limit
        ):
            return "LimitExceeded.AppDailyLimit", "业务短信日下发条数超过设定的上限。"
        history = self._history.get(number, [])
        if any(t > now - 30 and c == content for t, c in history):
            return (
                "LimitExceeded.PhoneNumberThirtySecondLimit",
                "单个手机号30秒内下发短信条数超过设定的上限。",
            )
        if sum(1 for t, _ in history if t > now - 3600) >= self.hour_limit:
            return "LimitExceeded.PhoneNumberOneHourLimit", "单个手机号1小时内下发短信条数超过设定的上限。"
        if sum(1 for t, _ in history if t > now - 86400) >= self.day_limit:
            return "LimitExceeded.PhoneNumberDailyLimit", "单个手机号日下发短信条数超过设定的上限。"
        if self.balance is not None and self.balance <= 0:
            return "FailedOperation.InsufficientBalanceInSmsPackage", "套餐包余量不足。"
        return "Ok", "send success"


def _valid(number: str) -> bool:
    return _e164(number) is not None


def _e164(number: str) -> str | None:
    mainland = _MAINLAND.match(number)
    if mainland:
        return f"+86{mainland.group(1)}"
    return number if _E164.match(number) else None


def _iso(number: str | None) -> str:
    if number is None:
        return "DEF"
    digits = number[1:]
    for length in (3, 2, 1):
        if digits[:length] in _ISO:
            return _ISO[digits[:length]]
    return "DEF"
