"""A fake webhook receiver that checks Standard Webhooks signatures (shared/providers.md §6.4).

Every request is verified with the ``standardwebhooks`` library against the raw body bytes:
the three ``webhook-*`` headers, the ``v1`` HMAC-SHA256 signature under the receiver's
``whsec_`` secret and the ±5-minute timestamp window. A request that fails is answered 400
``{"error": …}`` (as the library's documentation does) and its reason is kept in
:attr:`WebhookReceiver.refusals`. A verified one has its ``webhook-id`` appended to
:attr:`WebhookReceiver.ids` (so retries can be checked to reuse it) and gets the next
scripted reply (2xx/3xx/410/429 with ``Retry-After``/5xx, ``hang_s``, ``close``), else 200.
"""

from __future__ import annotations

import base64
import binascii
import json

from standardwebhooks import Webhook, WebhookVerificationError

from tests.fakes._server import FakeServer, Received, Reply

__all__ = ["SECRET", "WebhookReceiver", "hook_options"]

#: A receiver secret as Svix shows one: ``whsec_`` + base64 of 24 random bytes.
SECRET = "whsec_" + base64.b64encode(bytes(range(1, 25))).decode()


class WebhookReceiver(FakeServer):
    """An endpoint that accepts signed JSON POSTs under ``secret``."""

    def __init__(self, secret: str = SECRET) -> None:
        super().__init__()
        self._webhook = Webhook(secret)
        #: ``webhook-id`` of every request that passed verification, in arrival order.
        self.ids: list[str] = []
        #: Why each refused request was refused.
        self.refusals: list[str] = []

    def reset(self) -> None:
        """Forget requests, ids, refusals, the script and the delay (to reuse one server)."""
        super().reset()
        with self._lock:
            self.ids.clear()
            self.refusals.clear()

    def verify(self, received: Received) -> Reply | None:
        if received.method != "POST":
            return self._refuse(f"method {received.method}", status=405)
        try:
            self._webhook.verify(received.body, received.headers, json_parse=False)
        except (WebhookVerificationError, ValueError, binascii.Error) as exc:
            return self._refuse(f"{type(exc).__name__}: {exc}")
        try:
            json.loads(received.body)
        except ValueError:
            return self._refuse("the body is not JSON")
        with self._lock:
            self.ids.append(received.headers["webhook-id"])
        return None

    def _refuse(self, reason: str, *, status: int = 400) -> Reply:
        with self._lock:
            self.refusals.append(reason)
        return Reply(status, {"error": reason})

    def succeed(self, received: Received) -> Reply:
        return Reply(200, {"ok": True})


def hook_options(*receivers: WebhookReceiver, **extra: object) -> dict[str, object]:
    """A webhook provider's options whose operator-configured receivers (``destinations``,
    signed with :data:`SECRET`) are ``receivers``, on loopback (``allow_private``)."""
    return {
        "kind": "webhook",
        "secret": SECRET,
        "allow_private": True,
        "destinations": [receiver.url + "/" for receiver in receivers],
        **extra,
    }
