"""Twilio Programmable Messaging: SMS through the Messages API (shared/providers.md §4).

One ``POST {base_url}/2010-04-01/Accounts/{account_sid}/Messages.json`` per attempt, form
encoded, with HTTP basic auth ``account_sid:auth_token``. The receipt's msgid is the message
sid (``SM…``). An 11-digit mainland mobile target is sent as ``+86…`` (Twilio wants E.164).

A message in doubt (an earlier attempt may have been sent: :mod:`noti.providers._lookup`) is
first looked up in the Messages list of its ``To`` (:meth:`TwilioProvider.look_up`): one
outbound message with the record's body since the record was made means it was sent (the
receipt names its sid); none, it is sent; several, or a failed list, is an
``UnconfirmedOutcome``.

Options (``[providers.<name>]`` with ``kind = "twilio"``):

=========================  ==========================  ==========================================
option                     default                     meaning
=========================  ==========================  ==========================================
``account_sid``            (required)                  ``AC`` + 32 hex digits
``auth_token``             (required, secret)          the account's auth token
``from`` (or ``from_``)    –                           sending number, E.164; or …
``messaging_service_sid``  –                           … ``MG…`` service; or …
``sender_pool``            –                           … a number pool ``From`` is taken from
                                                       (:mod:`noti.providers._sender`): one
                                                       of the three
``status_callback``        –                           http(s) URL Twilio posts status changes to:
                                                       ``<public_url>/v1/receipts/<name>``;
                                                       each send adds ``noti_id=<record id>``
``receipt_poll``           –                           poll Messages/{sid}.json for receipts:
                                                       unset, when there is no status_callback
``base_url``               ``https://api.twilio.com``  API root (tests point it at a fake)
``timeout_s``              10                          seconds per request
=========================  ==========================  ==========================================

Classification: the ``code`` of Twilio's error body through :data:`ERRORS`, else the HTTP
status. Message create has no idempotency key and only 429 (code 20429) is guaranteed not
processed, so a timeout after sending or an unreadable answer is ``AmbiguousOutcome``:

==========================================  ========================  ===========================
answer                                      raised                    why
==========================================  ========================  ===========================
2xx with a ``sid``                          (Receipt)                 queued / accepted
429, or code 20429                          RateLimited               ``Retry-After`` (>= 1 s)
21610                                       RecipientOptedOut         the recipient replied STOP
21211 21612 21614 21617 3000[4-7]           PermanentFailure          bad or unreachable ``To``
20003 20404 21212 21408 21603 21606 21608   ProviderMisconfigured     auth, region, ``From``
30001 30003 30008                           TemporaryFailure          ``Retry-After`` honoured
5xx                                         AmbiguousOutcome          may have been queued: no
                                                                      failover (``Retry-After``)
30002 60728 63038                           ProviderOutage            account cannot send now
30410                                       AmbiguousOutcome          may have been delivered
other 401/403/404, 3xx                      ProviderMisconfigured     credentials or base_url
other 4xx                                   TemporaryFailure          an unknown refusal: retried
==========================================  ========================  ===========================

(30xxx codes arrive in status callbacks, not on create; they are listed so that the same
table classifies them when they do.)

Delivery receipts (status callbacks, or a poll of each message) are read by
:mod:`noti.channels.sms.twilio_receipts`.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlencode

import httpx
from pydantic import ConfigDict, Field, SecretStr, field_validator, model_validator

from noti.channels.sms import E164_PHONE, phone_e164, twilio_receipts
from noti.core.privacy import mask_target
from noti.core.record import Channel
from noti.delivery.state import DeliveryReport, PendingDelivery, ReceiptBatch, ReceiptRequest
from noti.errors import (
    AmbiguousOutcome,
    DeliveryError,
    InvalidInput,
    PermanentFailure,
    ProviderMisconfigured,
    ProviderOutage,
    RateLimited,
    RecipientOptedOut,
    TemporaryFailure,
)
from noti.providers import _http
from noti.providers._lookup import LookupProvider, unconfirmed
from noti.providers._receipts import ReceiptPollOption, poll_each
from noti.providers._sender import SenderPoolOptions, pooled_send
from noti.providers.base import Message, Receipt

__all__ = ["ERRORS", "TwilioOptions", "TwilioProvider"]

log = logging.getLogger(__name__)

API_VERSION = "2010-04-01"
#: Wait after a 429 that names no ``Retry-After``.
DEFAULT_RETRY_AFTER_S = 1.0
#: Shortest wait after a 429: a rate-limit wait is not an attempt, so ``Retry-After: 0``
#: would otherwise have the record sent again at once, without end.
MIN_RATE_LIMIT_WAIT_S = 1.0
#: Twilio's limit on ``Body``.
BODY_MAX = 1600
#: Look-up: clock slack before the record's creation, messages per page, pages read at most.
LOOKUP_SLACK_S = 60
LOOKUP_PAGE_SIZE = 50
LOOKUP_MAX_PAGES = 5

#: Twilio error code -> outcome class (shared/providers.md §4.3).
ERRORS: dict[str, type[DeliveryError]] = {
    "20003": ProviderMisconfigured,  # authentication failed
    "20404": ProviderMisconfigured,  # account / service not found: our settings
    "20429": RateLimited,  # too many concurrent requests; not processed
    "21211": PermanentFailure,  # invalid To number
    "21212": ProviderMisconfigured,  # invalid From number
    "21408": ProviderMisconfigured,  # sending to this region not enabled
    "21603": ProviderMisconfigured,  # From (or MessagingServiceSid) missing
    "21606": ProviderMisconfigured,  # From not SMS-capable or not ours
    "21608": ProviderMisconfigured,  # unverified To on a trial account
    "21610": RecipientOptedOut,  # recipient replied STOP
    "21612": PermanentFailure,  # To unroutable from this From
    "21614": PermanentFailure,  # To is not SMS-capable (landline)
    "21617": PermanentFailure,  # Body longer than 1,600 characters
    "30001": TemporaryFailure,  # queue overflow at Twilio
    "30002": ProviderOutage,  # account suspended
    "30003": TemporaryFailure,  # handset unreachable for now
    "30004": PermanentFailure,  # blocked by recipient or carrier (not only the recipient's choice)
    "30005": PermanentFailure,  # unknown handset
    "30006": PermanentFailure,  # landline or unreachable carrier
    "30007": PermanentFailure,  # carrier filtering
    "30008": TemporaryFailure,  # unknown error
    "30410": AmbiguousOutcome,  # provider timeout: may have been delivered
    "60728": ProviderOutage,  # account hourly limit: another provider may send now
    "63038": ProviderOutage,  # account daily limit
}

_SID = re.compile(r"^AC[0-9a-fA-F]{32}$")
_SERVICE_SID = re.compile(r"^MG[0-9a-fA-F]{32}$")
_HTTP_URL = re.compile(r"^https?://[^\s/?#]+[^\s]*$")


class TwilioOptions(SenderPoolOptions, ReceiptPollOption):
    model_config = ConfigDict(populate_by_name=True)

    account_sid: str = Field(pattern=_SID.pattern)
    auth_token: SecretStr = Field(min_length=1)
    from_: str | None = Field(default=None, alias="from", pattern=E164_PHONE.pattern)
    messaging_service_sid: str | None = Field(default=None, pattern=_SERVICE_SID.pattern)
    status_callback: str | None = Field(default=None, pattern=_HTTP_URL.pattern)
    base_url: str = Field(default="https://api.twilio.com", pattern=_HTTP_URL.pattern)

    @field_validator("base_url")
    @classmethod
    def _strip_slash(cls, value: str) -> str:
        return value.rstrip("/")

    @model_validator(mode="after")
    def _one_sender(self) -> TwilioOptions:
        if [self.from_, self.messaging_service_sid, self.sender_pool].count(None) != 2:
            raise ValueError("set exactly one of 'from', 'messaging_service_sid' and 'sender_pool'")
        return self


def e164(target: str) -> str | None:
    """``target`` as Twilio's ``To``: E.164 as is, a mainland mobile with ``+86``; else None."""
    return phone_e164(target)


class TwilioProvider(LookupProvider):
    """SMS through one Twilio account."""

    kind = "twilio"
    channels = frozenset({Channel.SMS})
    Options = TwilioOptions
    options: TwilioOptions

    @property
    def endpoint(self) -> str:
        return f"{self.options.base_url}/{API_VERSION}/Accounts/{self.options.account_sid}/Messages.json"

    def check(self, message: Message) -> None:
        """Raises InvalidInput: a target Twilio cannot address, or a body over 1,600 characters."""
        if e164(message.target) is None:
            raise InvalidInput(
                f"{self.name}: Twilio needs an E.164 number, not {mask_target(message.target)!r}",
                code="e.cmd.noti.add.badtarget",
            )
        text = message.fields.get("text")
        if not isinstance(text, str) or not 0 < len(text) <= BODY_MAX:
            raise InvalidInput(
                f"{self.name}: Twilio sends 1 to {BODY_MAX} characters of text",
                code="e.cmd.noti.add.badtext",
            )

    @pooled_send
    def send_new(self, message: Message) -> Receipt:
        opts = self.options
        form = {"To": e164(message.target) or message.target, "Body": str(message.fields.get("text", ""))}
        sender = message.sender or opts.from_  # the pool's number, when it lent one
        if sender is not None:
            form["From"] = sender
        if opts.messaging_service_sid is not None:
            form["MessagingServiceSid"] = opts.messaging_service_sid
        if opts.status_callback is not None:
            form["StatusCallback"] = twilio_receipts.callback_url(opts.status_callback, message.id)
        with _http.map_transport_errors(self.name):
            response = _http.client().post(
                self.endpoint,
                data=form,
                auth=(opts.account_sid, opts.auth_token.get_secret_value()),
                headers={"accept": "application/json"},
                timeout=opts.timeout_s,
            )
        if not response.is_success:
            error = self._error(response)
            log.info(
                "twilio %s: record %s to %s refused: %s",
                self.name,
                message.id,
                mask_target(message.target),
                error.vendor_code,
            )
            raise error
        data = _http.json_object(response, self.name)
        sid = data.get("sid")
        if not isinstance(sid, str) or not sid:
            raise AmbiguousOutcome(
                f"{self.name}: HTTP {response.status_code} without a message sid",
                provider=self.name,
                vendor_code=f"http.{response.status_code}",
            )
        status = str(data.get("status", ""))
        log.debug("twilio %s: record %s accepted as %s (%s)", self.name, message.id, sid, status)
        return Receipt(provider=self.name, msgid=sid, raw=f"HTTP {response.status_code} status={status}")

    def look_up(self, message: Message) -> Receipt | None:
        """The Messages list of the record's ``To`` (newest first, unsent ones included: no
        ``DateSent`` filter, since a queued message has no ``date_sent`` yet), read back to the
        record's creation: the outbound message with the record's body made since then. Twilio
        stores no id of ours on a message (no idempotency key, and the status-callback URL is not
        in the Message resource), so the body is the tag; when several messages match, the
        look-up cannot tell which is this record's (:class:`UnconfirmedOutcome`).

        Raises:
            DeliveryError: the list could not be read, or it matches more than one message.
        """
        to = e164(message.target) or message.target
        body = str(message.fields.get("text", ""))
        since = (message.created_ms / 1000 - LOOKUP_SLACK_S) if message.created_ms else 0.0
        url: str | None = f"{self.endpoint}?{urlencode({'To': to, 'PageSize': LOOKUP_PAGE_SIZE})}"
        found: list[dict[str, Any]] = []
        for _ in range(LOOKUP_MAX_PAGES):
            if url is None:
                break
            with _http.map_transport_errors(self.name):
                response = _http.client().get(
                    url,
                    auth=(self.options.account_sid, self.options.auth_token.get_secret_value()),
                    headers={"accept": "application/json"},
                    timeout=self.options.timeout_s,
                )
            if not response.is_success:
                raise self._error(response)
            data = _http.json_object(response, self.name)
            rows = data.get("messages")
            rows = [m for m in rows if isinstance(m, dict)] if isinstance(rows, list) else []
            older = False
            for row in rows:
                created = _rfc2822_s(row.get("date_created"))
                if created is not None and created < since:
                    older = True
                    continue
                if (
                    row.get("to") == to
                    and row.get("body") == body
                    and str(row.get("direction", "")).startswith("outbound")
                ):
                    found.append(row)
            next_uri = data.get("next_page_uri")
            url = (
                f"{self.options.base_url}{next_uri}"
                if isinstance(next_uri, str) and next_uri and not older
                else None
            )
        if url is not None:  # pages left unread: what they hold is unknown
            raise unconfirmed(
                self.name,
                f"more than {LOOKUP_MAX_PAGES} pages of messages to this number since the record was made",
                vendor_code="noti.lookup.truncated",
            )
        if len(found) > 1:
            raise unconfirmed(
                self.name,
                f"{len(found)} messages with this body went to this number since the record was made",
                vendor_code="noti.lookup.several",
            )
        if not found:
            return None
        sid = str(found[0].get("sid") or "") or None
        return Receipt(provider=self.name, msgid=sid, raw=f"Messages list: status={found[0].get('status')}")

    def read_receipt(self, request: ReceiptRequest) -> ReceiptBatch:
        """A status callback, its ``X-Twilio-Signature`` checked (:mod:`noti.channels.sms.twilio_receipts`).

        Raises:
            ReceiptRejected: a bad signature, or a callback that cannot be read.
        """
        return twilio_receipts.read_callback(
            self.name,
            request,
            self.options.auth_token.get_secret_value(),
            account_sid=self.options.account_sid,
        )

    @property
    def polls_receipts(self) -> bool:
        """Polled when no ``status_callback`` is configured, or when ``receipt_poll`` says so."""
        poll = self.options.receipt_poll
        return self.options.status_callback is None if poll is None else poll

    def poll_receipts(self, pending: Sequence[PendingDelivery]) -> list[DeliveryReport]:
        """``GET …/Messages/{sid}.json`` of each pending record with a message sid: a report
        for each message that reached a final status (see :mod:`noti.channels.sms.twilio_receipts`).

        Raises:
            DeliveryError: the first fetch failed (see :func:`noti.providers._receipts.poll_each`).
        """
        return poll_each(self.name, pending, self._poll_one)

    def _poll_one(self, item: PendingDelivery) -> DeliveryReport | None:
        sid = item.vendor_id
        if sid is None or not twilio_receipts.SID.match(sid):
            return None  # nothing to ask by (a look-up found it without a sid)
        url = f"{self.endpoint.removesuffix('.json')}/{sid}.json"
        with _http.map_transport_errors(self.name):
            response = _http.client().get(
                url,
                auth=(self.options.account_sid, self.options.auth_token.get_secret_value()),
                headers={"accept": "application/json"},
                timeout=self.options.timeout_s,
            )
        if response.status_code == 404:
            log.info("twilio %s: record %s: message %s is unknown to Twilio", self.name, item.record_id, sid)
            return None
        if not response.is_success:
            raise self._error(response)
        return twilio_receipts.report_of_message(
            self.name, item.record_id, _http.json_object(response, self.name)
        )

    def _error(self, response: httpx.Response) -> DeliveryError:
        """The outcome class of a non-2xx answer (see the module's table)."""
        status = response.status_code
        body = _json_or_none(response.content)
        code = str(body.get("code") or "") if body is not None else ""
        text = str(body.get("message") or "") if body is not None else response.text[:200]
        vendor_code = code or f"http.{status}"
        detail = f"{self.name}: HTTP {status} {code or '-'}: {text}"
        kwargs = {"provider": self.name, "vendor_code": vendor_code}
        cls = ERRORS.get(code)
        if status == 429 or cls is RateLimited:
            return RateLimited(
                detail,
                retry_after_s=max(
                    MIN_RATE_LIMIT_WAIT_S, _http.retry_after_s(response, DEFAULT_RETRY_AFTER_S)
                ),
                **kwargs,
            )
        if cls is None:
            if status >= 500:  # only 429 is guaranteed unprocessed (§4.1): it may have been queued
                cls = AmbiguousOutcome
            elif status in (401, 403, 404) or status < 400:
                cls = ProviderMisconfigured
            else:  # an unknown refusal: Twilio did not queue it, so retrying (or failing over) is safe
                cls = TemporaryFailure
        if issubclass(cls, TemporaryFailure):
            retry_after = _http.retry_after_s(response, 0.0) if "retry-after" in response.headers else None
            return cls(detail, retry_after_s=retry_after, **kwargs)
        return cls(detail, **kwargs)


def _rfc2822_s(value: object) -> float | None:
    """Unix seconds of an RFC 2822 date as Twilio writes them (None when it is not one)."""
    if not isinstance(value, str):
        return None
    try:
        return parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError):
        return None


def _json_or_none(content: bytes) -> dict[str, Any] | None:
    try:
        data = json.loads(content)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None
