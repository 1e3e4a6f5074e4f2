"""The sandbox provider: "sends" by appending the message to a Redis list.

Used by the demo (``make run``) and the tests. Options (``[providers.<name>]`` with
``kind = "sandbox"``, or the table ``[providers.sandbox]``):

==================  =========  ==============================================================
option              default    meaning
==================  =========  ==============================================================
``fail``            ``never``  ``always``: every attempt fails
``fail_first``      0          the first N attempts of each record fail (then it succeeds)
``error``           temporary  the kind of failure: ``temporary`` (retried) or ``permanent``
``delay_ms``        0          time each send takes, as a slow vendor would
``receipt_secret``  none       set: a send is only ``accepted``; its delivery comes as a
                               receipt pushed to ``/v1/receipts/<name>`` (below). Unset:
                               delivered at once
==================  =========  ==============================================================

A receipt for the sandbox is a JSON array of ``{"msgid": "sandbox-<record id>", "state":
"delivered" | "undelivered", "code": "…", "text": "…"}`` posted with the header
``X-Sandbox-Signature: sha256=<hex HMAC-SHA256 of the body with receipt_secret>``
(:func:`sign_receipt`): what a vendor's push looks like, for the demo and the tests.

``sender_pool = "NAME"`` (default none) takes a sender number from that number pool for
each send, as every SMS provider does (:mod:`noti.providers._sender`: ``sender_wait_s``,
``sender_sticky_s``, ``sender_lease_s``), and records it as ``"sender"`` in the outbox entry.

What was sent is in ``noti:sandbox:<name>`` (:meth:`SandboxProvider.outbox`), one JSON
object per delivery, oldest first; ``at`` is when it was sent (ms) and ``t`` the same in
seconds with microseconds (benchmarks measure latency with it).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import SecretStr
from redis import Redis

from noti.core.channel import EveryChannel
from noti.core.keys import Keys
from noti.core.record import now_ms
from noti.delivery.state import Delivery, DeliveryReport, ReceiptBatch, ReceiptReply, ReceiptRequest
from noti.errors import PermanentFailure, ReceiptRejected, TemporaryFailure
from noti.fastjson import dumps
from noti.providers._sender import SenderPoolOptions, pooled_send
from noti.providers.base import Message, Provider, Receipt
from noti.redis.outage import translate_errors

__all__ = ["SandboxProvider", "read_outbox", "sign_receipt"]

SIGNATURE_HEADER = "x-sandbox-signature"
#: Receipts one request may carry at most.
RECEIPTS_MAX = 1000


class SandboxOptions(SenderPoolOptions):
    fail: Literal["never", "always"] = "never"
    fail_first: int = 0
    error: Literal["temporary", "permanent"] = "temporary"
    delay_ms: int = 0
    receipt_secret: SecretStr | None = None


def sign_receipt(secret: str, body: bytes) -> str:
    """The ``X-Sandbox-Signature`` of a receipt ``body``."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


class SandboxProvider(Provider):
    """Delivers every channel into a Redis list, failing on request."""

    kind = "sandbox"
    #: The outbox list is the recipient: delivered once it is written, unless it is set to
    #: take receipts (``receipt_secret``, set per instance).
    delivered_on_send = True
    channels = EveryChannel()
    Options = SandboxOptions
    options: SandboxOptions

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.delivered_on_send = self.options.receipt_secret is None

    def read_receipt(self, request: ReceiptRequest) -> ReceiptBatch:
        """Signed JSON receipts (see the module's text)."""
        secret = self.options.receipt_secret
        if secret is None:
            return super().read_receipt(request)
        given = request.header(SIGNATURE_HEADER) or ""
        if request.method != "POST" or not hmac.compare_digest(
            given.encode(), sign_receipt(secret.get_secret_value(), request.body).encode()
        ):
            raise ReceiptRejected(
                f"sandbox {self.name}: the receipt's {SIGNATURE_HEADER} does not verify",
                code="e.noti.receipt.signature",
            )
        try:
            rows = json.loads(request.body)
        except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth
            rows = None
        if not isinstance(rows, list) or not 1 <= len(rows) <= RECEIPTS_MAX:
            raise ReceiptRejected(
                f"sandbox {self.name}: a receipt is a JSON array of 1 to {RECEIPTS_MAX} objects",
                code="e.noti.receipt.malformed",
            )
        reports = []
        for row in rows:
            state = row.get("state") if isinstance(row, dict) else None
            msgid = row.get("msgid") if isinstance(row, dict) else None
            code, text = (row.get("code", ""), row.get("text", "")) if isinstance(row, dict) else (None, None)
            if (
                state not in ("delivered", "undelivered")
                or not isinstance(msgid, str)
                or not 0 < len(msgid) <= 200
                or not isinstance(code, str)
                or not isinstance(text, str)
            ):
                raise ReceiptRejected(
                    f"sandbox {self.name}: each receipt needs a msgid and a state delivered or "
                    "undelivered (and a code and text, if any, that are strings)",
                    code="e.noti.receipt.malformed",
                )
            reports.append(
                DeliveryReport(self.name, Delivery(state), vendor_id=msgid, code=code[:200], text=text[:500])
            )
        return ReceiptBatch(reports, ReceiptReply(200, b'{"ok":true}', "application/json"))

    @property
    def inline(self) -> bool:
        # one RPUSH: no wait worth a thread, unless it is asked to be slow or to borrow numbers
        return not self.options.delay_ms and self.options.sender_pool is None

    @pooled_send
    def send(self, message: Message) -> Receipt:
        return self._deliver(message, sender=message.sender)

    def send_many(self, messages: Sequence[Message]) -> Sequence[Receipt | Exception]:
        """Deliver many with one round trip (one pipelined RPUSH per message)."""
        if self.options.sender_pool is not None:  # each send borrows a number: one by one
            return super().send_many(messages)
        results: list[Receipt | Exception] = []
        entries: list[str] = []
        for message in messages:
            try:
                entries.append(self._entry(message, sender=None))
                results.append(self._receipt(message))
            except Exception as exc:  # judged per message
                results.append(exc)
        if entries:
            with translate_errors(self.redis):
                self.redis.rpush(self.keys.sandbox_outbox(self.name), *entries)
        return results

    def _deliver(self, message: Message, *, sender: str | None) -> Receipt:
        entry = self._entry(message, sender=sender)
        with translate_errors(self.redis):
            self.redis.rpush(self.keys.sandbox_outbox(self.name), entry)
        return self._receipt(message)

    def _entry(self, message: Message, *, sender: str | None) -> str:
        """The outbox entry of ``message``, or the configured failure (after the delay)."""
        opts = self.options
        if opts.delay_ms:
            time.sleep(opts.delay_ms / 1000)
        if opts.fail == "always" or message.attempt < opts.fail_first:
            error = PermanentFailure if opts.error == "permanent" else TemporaryFailure
            raise error(
                f"sandbox {self.name} refused attempt {message.attempt + 1} as configured",
                provider=self.name,
                vendor_code=f"sandbox.{opts.error}",
            )
        entry = {
            "id": message.id,
            "type": message.channel.value,
            "target": message.target,
            "fields": dict(message.fields),
            "attempt": message.attempt + 1,
            "lv": message.level,
            "at": now_ms(),
            "t": time.time(),
        }
        if sender is not None:
            entry["sender"] = sender
        return dumps(entry)

    def _receipt(self, message: Message) -> Receipt:
        return Receipt(provider=self.name, msgid=f"sandbox-{message.id}", raw="ok")

    def outbox(self) -> list[dict[str, Any]]:
        """Everything this sandbox has delivered, oldest first."""
        return read_outbox(self.redis, self.keys, self.name)


def read_outbox(client: Redis, keys: Keys, name: str = "sandbox") -> list[dict[str, Any]]:
    """What the sandbox provider called ``name`` has delivered, oldest first."""
    with translate_errors(client):
        rows = client.lrange(keys.sandbox_outbox(name), 0, -1)
    return [json.loads(row) for row in rows]
