"""The sandbox provider: "sends" by appending the message to a Redis list.

Used by the demo (``make run``) and the tests. Options (``[providers.<name>]`` with
``kind = "sandbox"``, or the table ``[providers.sandbox]``):

=============  ==========  ===================================================================
option         default     meaning
=============  ==========  ===================================================================
``fail``       ``never``   ``always``: every attempt fails
``fail_first`` 0           the first N attempts of each record fail (then it succeeds)
``error``      temporary   the kind of failure: ``temporary`` (retried) or ``permanent``
``delay_ms``   0           time each send takes, as a slow vendor would
=============  ==========  ===================================================================

What was sent is in ``noti:sandbox:<name>`` (:meth:`SandboxProvider.outbox`), one JSON
object per delivery, oldest first.
"""

from __future__ import annotations

import json
import time
from typing import Any, Literal

from noti.errors import PermanentFailure, TemporaryFailure
from noti.providers.base import Message, Provider, ProviderOptions, Receipt
from noti.record import Channel, now_ms
from noti.redisconn import translate_errors

__all__ = ["SandboxProvider"]


class SandboxOptions(ProviderOptions):
    fail: Literal["never", "always"] = "never"
    fail_first: int = 0
    error: Literal["temporary", "permanent"] = "temporary"
    delay_ms: int = 0


class SandboxProvider(Provider):
    """Delivers every channel into a Redis list, failing on request."""

    kind = "sandbox"
    channels = frozenset(Channel)
    Options = SandboxOptions
    options: SandboxOptions

    def send(self, message: Message) -> Receipt:
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
        }
        with translate_errors(self.redis):
            self.redis.rpush(self.keys.sandbox_outbox(self.name), json.dumps(entry, ensure_ascii=False))
        return Receipt(provider=self.name, msgid=f"sandbox-{message.id}", raw="ok")

    def outbox(self) -> list[dict[str, Any]]:
        """Everything this sandbox has delivered, oldest first."""
        with translate_errors(self.redis):
            rows = self.redis.lrange(self.keys.sandbox_outbox(self.name), 0, -1)
        return [json.loads(row) for row in rows]
