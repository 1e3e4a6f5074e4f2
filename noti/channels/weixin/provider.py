"""The WeChat Official Account provider: template messages (shared/providers.md §1).

Options (``[providers.<name>]`` with ``kind = "weixin"``):

=====================  =============================  ===========================================
option                 default                        meaning
=====================  =============================  ===========================================
``base_url``           ``https://api.weixin.qq.com``  the API root (tests point it at a fake)
``accounts``           (required)                     ``{<pnb> = {appid, secret}}``: a record's
                                                      ``noti_wx_pnb`` names the account it uses
``refresh_grace_s``    60                             a token is cached for ``expires_in`` less
                                                      this (half its life when that is shorter)
``refresh_wait_s``     15                             how long a send waits for the token another
                                                      worker is fetching
``flow_limit_wait_s``  60                             the wait after 43117 / 45011 (no window is
                                                      documented)
``timeout_s``          10                             each HTTP request
``callback_token``     (none: no receipts)            the Token of the account's server URL
                                                      (secret): WeChat signs its pushes with it
``callback_window_s``  300                            a push whose ``timestamp`` is further from
                                                      noti's clock is refused (replays)
=====================  =============================  ===========================================

Delivery receipts (``TEMPLATESENDJOBFINISH`` events pushed to
``<public_url>/v1/receipts/<name>``) are read by :mod:`noti.channels.weixin.receipts`.

Sending is ``POST {base_url}/cgi-bin/message/template/send?access_token=…`` with ``touser``,
``template_id``, ``url``, ``data`` and ``client_msg_id`` = the record id (WeChat sends one
message per openid and ``client_msg_id`` for 10 minutes, so a retry after an ambiguous timeout
is not sent twice). The receipt's msgid is WeChat's ``msgid`` (``noti_wx_tmpl_msgid``).

Access token: from ``POST /cgi-bin/stable_token`` in normal mode (it returns the same token
until WeChat rotates it, so it never revokes a token another worker holds), cached in Redis
(:meth:`noti.core.keys.Keys.weixin_token`) for all workers. One worker at a time fetches it, under
the lock ``noti:lock:weixin:<appid>``; the others poll the cache for up to ``refresh_wait_s``
instead of calling the endpoint too (the one wait a send does; it never retries a send), and
past that the record waits a few seconds as a rate limit (nothing was sent: not an attempt).
On 40001 / 40014 / 42001 the cached token is dropped (only if it is still the one refused)
and :class:`StaleCredential` makes the sender try again at once with a new one; when that
attempt is refused too, the sender takes the credential problem as ours (:class:`ProviderMisconfigured`).

Classification (match ``errcode``, never ``errmsg``; HTTP is always 200):

======================================================  =======================================
errcode                                                 raised
======================================================  =======================================
0; 45065 (client_msg_id exists); 40241 (duplicate in    none: a :class:`Receipt` ("already
60 s)                                                   sent"; never resent)
-1 system busy; unknown codes                           TemporaryFailure
40001, 40014, 42001 token refused / expired             StaleCredential, then ProviderMisconfigured
40003 bad openid, 40036 / 41001 / 47001 / 47003 bad     PermanentFailure
request
43004 not following, 43101 user refused                RecipientOptedOut
43117 too often to this openid, 45011 minute quota      RateLimited (``flow_limit_wait_s``)
45009 daily quota                                       ProviderOutage
40013, 40037, 40125, 40164, 40243, 41002, 41004,        ProviderMisconfigured
43116, 48001
======================================================  =======================================

HTTP 429 is RateLimited, 5xx on a send AmbiguousOutcome (it may have been processed) and on the
token endpoint ProviderOutage, any other non-200 ProviderMisconfigured (a wrong ``base_url``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import httpx
import redis
from pydantic import BaseModel, ConfigDict, Field, SecretStr

from noti.channels.weixin import receipts as weixin_receipts
from noti.core.keys import Keys
from noti.core.privacy import mask_target
from noti.core.record import Channel
from noti.delivery.state import ReceiptBatch, ReceiptRequest
from noti.errors import (
    AmbiguousOutcome,
    DeliveryError,
    InvalidInput,
    PermanentFailure,
    ProviderMisconfigured,
    ProviderOutage,
    RateLimited,
    RecipientOptedOut,
    StaleCredential,
    TemporaryFailure,
)
from noti.providers._http import client, json_object, map_transport_errors, retry_after_s
from noti.providers._receipts import not_configured
from noti.providers.base import Message, Provider, ProviderOptions, Receipt
from noti.redis.outage import translate_errors

__all__ = ["ALREADY_SENT", "ERRORS", "WeixinAccount", "WeixinOptions", "WeixinProvider"]

log = logging.getLogger(__name__)

#: errcode -> outcome class (shared/providers.md §1.1, §1.3 and its corrections).
ERRORS: dict[str, type[DeliveryError]] = {
    "-1": TemporaryFailure,
    "40001": StaleCredential,
    "40014": StaleCredential,
    "42001": StaleCredential,
    "40003": PermanentFailure,
    "40036": PermanentFailure,
    "41001": PermanentFailure,
    "47001": PermanentFailure,
    "47003": PermanentFailure,
    "43004": RecipientOptedOut,
    "43101": RecipientOptedOut,
    "43117": RateLimited,
    "45011": RateLimited,
    "45009": ProviderOutage,
    "40013": ProviderMisconfigured,
    "40037": ProviderMisconfigured,
    "40125": ProviderMisconfigured,
    "40164": ProviderMisconfigured,
    "40243": ProviderMisconfigured,
    "41002": ProviderMisconfigured,
    "41004": ProviderMisconfigured,
    "43116": ProviderMisconfigured,
    "48001": ProviderMisconfigured,
}
#: errcodes meaning "this message was (or must be taken as) sent already": never resent.
ALREADY_SENT = frozenset({"45065", "40241"})
#: How often a send waiting for another worker's token looks at the cache again.
TOKEN_POLL_S = 0.05
#: When the token is still not there after ``refresh_wait_s``, the record waits this long.
TOKEN_WAIT_RETRY_S = 5.0


class WeixinAccount(BaseModel):
    """One Official Account: its AppID and AppSecret."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    appid: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_-]+$")
    secret: SecretStr


class WeixinOptions(ProviderOptions):
    base_url: str = Field(default="https://api.weixin.qq.com", pattern=r"^https?://[^\s?#]+$")
    accounts: dict[str, WeixinAccount] = Field(min_length=1)
    refresh_grace_s: float = Field(default=60.0, ge=0)
    refresh_wait_s: float = Field(default=15.0, ge=0, le=60)
    flow_limit_wait_s: float = Field(default=60.0, gt=0)
    #: The Token of the server URL in the account's console; unset: pushes are refused.
    callback_token: SecretStr | None = None
    #: Seconds a push's ``timestamp`` may be from noti's clock.
    callback_window_s: float = Field(default=300.0, gt=0, le=86400)


class WeixinProvider(Provider):
    """Sends WeChat template messages for one or more Official Accounts."""

    kind = "weixin"
    channels = frozenset({Channel.WEIXIN})
    Options = WeixinOptions
    options: WeixinOptions

    #: Wall clock the ``timestamp`` of a push is checked against (tests move it).
    clock: Callable[[], float] = staticmethod(time.time)

    def __init__(self, name: str, options: Mapping[str, Any], *, redis: redis.Redis, keys: Keys) -> None:
        super().__init__(name, options, redis=redis, keys=keys)
        self._base = self.options.base_url.rstrip("/")

    def read_receipt(self, request: ReceiptRequest) -> ReceiptBatch:
        """A request WeChat made to the account's server URL: the URL check, or an event
        (:mod:`noti.channels.weixin.receipts`).

        Raises:
            ReceiptRejected: no ``callback_token`` configured (``e.noti.receipt.provider``),
                a bad signature or stale timestamp, or a body that cannot be read.
        """
        token = self.options.callback_token
        if token is None:
            raise not_configured(self.name, "callback_token")
        return weixin_receipts.read_push(
            self.name,
            request,
            token.get_secret_value(),
            now_s=self.clock(),
            window_s=self.options.callback_window_s,
        )

    def check(self, message: Message) -> None:
        """Refuse an unknown account (``pnb``) or ``content`` that is not WeChat's ``data`` shape."""
        pnb = message.fields.get("pnb")
        if pnb not in self.options.accounts:
            known = ", ".join(sorted(self.options.accounts))
            raise InvalidInput(
                f"weixin provider {self.name!r} has no account {pnb!r} (configured: {known})",
                code="e.cmd.noti.add.badfield",
            )
        content = message.fields.get("content")
        entries = list(content.items()) if isinstance(content, Mapping) else [("content", content)]
        for key, value in entries or [("content", None)]:
            if not isinstance(value, Mapping) or "value" not in value:
                raise InvalidInput(
                    f'WeChat content {key!r} must be an object like {{"value": "…"}}',
                    code="e.cmd.noti.add.badcontent",
                )

    def send(self, message: Message) -> Receipt:
        """Send the template message; see the module docstring for the outcome classes."""
        account = self.options.accounts.get(str(message.fields.get("pnb")))
        if account is None:  # the settings changed after the record was added
            raise ProviderMisconfigured(
                f"weixin {self.name}: no account {message.fields.get('pnb')!r}", provider=self.name
            )
        token = self._token(account)
        body: dict[str, Any] = {
            "touser": message.target,
            "template_id": message.fields.get("tmpl"),
            "data": message.fields.get("content"),
            "client_msg_id": message.id,
        }
        if message.fields.get("url"):
            body["url"] = message.fields["url"]
        with map_transport_errors(self.name):
            response = client().post(
                f"{self._base}/cgi-bin/message/template/send",
                params={"access_token": token},
                json=body,
                timeout=self.options.timeout_s,
            )
        self._check_status(response, token_endpoint=False)
        data = json_object(response, self.name)
        errcode = self._errcode(data, response)
        code = str(errcode)
        msgid = data.get("msgid")
        if errcode == 0 or code in ALREADY_SENT:
            note = "ok" if errcode == 0 else f"already sent (errcode {errcode})"
            log.info("weixin %s: %s to %s: %s", message.id, self.name, mask_target(message.target), note)
            return Receipt(provider=self.name, msgid=None if msgid is None else str(msgid), raw=note)
        errmsg = str(data.get("errmsg", ""))[:200]
        log.info("weixin %s: %s to %s: errcode %s", message.id, self.name, mask_target(message.target), code)
        if ERRORS.get(code) is StaleCredential:
            self._drop_token(account.appid, token)
        raise self._failure(code, errmsg)

    # --- access token ------------------------------------------------------------------------

    def _token(self, account: WeixinAccount) -> str:
        """The account's access token: cached, or fetched by this worker or another."""
        key = self.keys.weixin_token(account.appid)
        deadline = time.monotonic() + self.options.refresh_wait_s
        lock = self.redis.lock(
            self.keys.lock(f"weixin:{account.appid}"),
            timeout=self.options.timeout_s + 5,
            blocking=False,
            thread_local=False,
        )
        while True:
            with translate_errors(self.redis):
                cached = self.redis.get(key)
                if cached:
                    return str(cached)
                acquired = lock.acquire(blocking=False)
            if acquired:
                try:
                    with translate_errors(self.redis):
                        cached = self.redis.get(key)  # fetched while we waited for the lock
                    if cached:
                        return str(cached)
                    token, expires_in = self._fetch_token(account)
                    with translate_errors(self.redis):
                        self.redis.set(key, token, ex=self._ttl_s(expires_in))
                    return token
                finally:
                    try:
                        lock.release()
                    except redis.exceptions.RedisError:  # expired meanwhile: nothing to free
                        pass
            if time.monotonic() >= deadline:  # nothing was sent: wait, without counting an attempt
                raise RateLimited(
                    f"weixin {self.name}: another worker is still fetching the access token",
                    retry_after_s=TOKEN_WAIT_RETRY_S,
                    provider=self.name,
                )
            time.sleep(TOKEN_POLL_S)

    def _ttl_s(self, expires_in: int) -> int:
        grace = self.options.refresh_grace_s
        ttl = expires_in - grace if expires_in > 2 * grace else expires_in / 2
        return max(1, int(ttl))

    def _fetch_token(self, account: WeixinAccount) -> tuple[str, int]:
        """Ask ``stable_token`` (normal mode) for the account's token and its life in seconds."""
        payload = {
            "grant_type": "client_credential",
            "appid": account.appid,
            "secret": account.secret.get_secret_value(),
            "force_refresh": False,
        }
        try:
            with map_transport_errors(self.name):
                response = client().post(
                    f"{self._base}/cgi-bin/stable_token", json=payload, timeout=self.options.timeout_s
                )
            self._check_status(response, token_endpoint=True)
            data = json_object(response, self.name)
        except AmbiguousOutcome as exc:  # nothing was sent to anyone: the token service failed
            raise ProviderOutage(
                f"weixin {self.name}: stable_token: {exc.message}",
                provider=self.name,
                vendor_code=exc.vendor_code,
            ) from exc
        token, expires_in = data.get("access_token"), data.get("expires_in")
        if isinstance(token, str) and token and isinstance(expires_in, int) and expires_in > 0:
            log.info("weixin: %s fetched an access token for %s (%d s)", self.name, account.appid, expires_in)
            return token, expires_in
        code = str(data.get("errcode", "none"))
        errmsg = str(data.get("errmsg", ""))[:200]
        error = ERRORS.get(code, TemporaryFailure)
        if error is StaleCredential or error is PermanentFailure:  # refusals of our credentials
            error = ProviderMisconfigured
        raise self._failure(code, f"stable_token: {errmsg}", error=error)

    def _drop_token(self, appid: str, token: str) -> None:
        """Delete the cached token if it is still ``token`` (another worker may have replaced it)."""
        key = self.keys.weixin_token(appid)
        with translate_errors(self.redis), self.redis.pipeline() as pipe:
            try:
                pipe.watch(key)  # type: ignore[no-untyped-call]
                if pipe.get(key) == token:
                    pipe.multi()
                    pipe.delete(key)
                    pipe.execute()
                else:
                    pipe.unwatch()
            except redis.exceptions.WatchError:  # replaced meanwhile: keep the new one
                pass

    # --- answers -----------------------------------------------------------------------------

    def _check_status(self, response: httpx.Response, *, token_endpoint: bool) -> None:
        status = response.status_code
        if status == 200:
            return
        text = f"weixin {self.name}: HTTP {status}"
        vendor_code = f"http.{status}"
        if status == 429:
            wait_s = retry_after_s(response, self.options.flow_limit_wait_s)
            raise RateLimited(text, retry_after_s=wait_s, provider=self.name, vendor_code=vendor_code)
        if status >= 500:
            error = ProviderOutage if token_endpoint else AmbiguousOutcome
            raise error(text, provider=self.name, vendor_code=vendor_code)
        raise ProviderMisconfigured(
            f"{text} (is base_url right?)", provider=self.name, vendor_code=vendor_code
        )

    def _errcode(self, data: Mapping[str, Any], response: httpx.Response) -> int:
        errcode = data.get("errcode", 0)
        if isinstance(errcode, bool) or not isinstance(errcode, int):
            raise AmbiguousOutcome(
                f"weixin {self.name}: unreadable errcode in {response.text[:200]!r}", provider=self.name
            )
        return errcode

    def _failure(self, code: str, errmsg: str, *, error: type[DeliveryError] | None = None) -> DeliveryError:
        cls = error or ERRORS.get(code, TemporaryFailure)
        text = f"weixin {self.name}: errcode {code}: {errmsg}"
        if issubclass(cls, RateLimited):
            return cls(
                text, retry_after_s=self.options.flow_limit_wait_s, provider=self.name, vendor_code=code
            )
        return cls(text, provider=self.name, vendor_code=code)
