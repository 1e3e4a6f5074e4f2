"""Status callbacks: each status change of a notification that asked for them
(``status_callback="https://…"``) is posted to that URL as a signed webhook.

The change is written to the status-change stream (``noti:dlv:changes``) by the script that
makes it (``finish.lua``: sent, failed, invalid; ``delivery.lua``: accepted, delivered,
undelivered, unknown), so no change is lost between the two. :meth:`StatusCallbacks.run`
(beat, ``noti.delivery.tick``) turns each entry into a webhook notification of the record's
creator, idempotent on the entry's id (a run that dies after creating it and before removing
the entry creates nothing the second time), then removes the entry. The webhook channel's
provider signs it (Standard Webhooks, :mod:`noti.channels.webhook.provider`) with the creator's
signing key (:mod:`noti.access.signing`, never an operator's provider secret) and
``webhook-id: cb_<its record id>``: the id is signed and no webhook a user posts carries that
prefix, so a receiver that checks it knows the body is noti's own account of a status
change. It is retried with back-off and dead-lettered like any delivery.

The body::

    {"type": "notification.delivered", "timestamp": "2026-11-27T16:00:00.123Z",
     "data": {"id": "<record id>", "channel": "sms", "status": "sent", "delivery": "delivered",
              "code": "DELIVRD", "text": "…", "at": 1795800000123}}

``type`` is ``notification.<delivery>`` for a delivery change, else ``notification.<status>``
(``sent``, ``failed``, ``invalid``).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, cast

from noti.core.record import now_ms
from noti.core.timeline import step_text
from noti.errors import NotiError
from noti.redis.outage import translate_errors

if TYPE_CHECKING:
    from noti.sending.notifier import Notifier

__all__ = ["StatusCallbacks", "callback_body"]

log = logging.getLogger(__name__)

#: Entries taken per round.
BATCH = 500


def callback_body(entry: dict[str, str], channel: str) -> dict[str, Any]:
    """The JSON body posted for one status-change entry."""
    at = int(entry.get("at") or 0)
    delivery = entry.get("delivery") or None
    status = entry.get("status", "")
    data: dict[str, Any] = {
        "id": entry.get("id"),
        "channel": channel,
        "status": status,
        "delivery": delivery,
        "at": at,
    }
    for name in ("code", "text"):
        if entry.get(name):
            data[name] = entry[name]
    moment = datetime.fromtimestamp(at / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return {"type": f"notification.{delivery or status}", "timestamp": moment, "data": data}


class StatusCallbacks:
    """Turns status-change entries into webhook notifications."""

    def __init__(self, notifier: Notifier) -> None:
        self.notifier = notifier
        self.redis = notifier.runtime.redis
        self.keys = notifier.runtime.keys

    def run(self, *, limit: int = BATCH) -> int:
        """Send the waiting entries (at most ``limit``); how many webhooks were made.

        Raises:
            StoreUnavailable: Redis cannot be reached (the entries stay for the next run).
        """
        stream = self.keys.status_changes
        with translate_errors(self.redis):
            entries = cast("list[tuple[str, dict[str, str]]]", self.redis.xrange(stream, count=limit))
        made, done = 0, []
        records = self.notifier.runtime.store.find_many([fields.get("id", "") for _, fields in entries])
        for (entry_id, fields), record in zip(entries, records, strict=True):
            if record is None or not record.status_callback:
                done.append(entry_id)  # deleted since, or never asked: nothing to post
                continue
            try:
                callback = self.notifier.build(
                    "webhook",
                    record.status_callback,
                    user=record.creator,
                    content=callback_body(fields, record.channel.value),
                    lv=record.level,
                )
                # marked as a status callback by noti alone (no input sets it): signed as one
                callback = replace(callback, status_of=record.id)
                made_id = self.notifier.store_one(callback, idempotency_key=f"status-callback:{entry_id}").id
                made += 1
                self.notifier.runtime.store.note_steps(
                    record.id,
                    [
                        step_text(
                            now_ms(),
                            "callback",
                            {"status": fields.get("delivery") or fields.get("status"), "record": made_id},
                        )
                    ],
                )
            except NotiError as exc:  # e.g. the creator lost its role: logged, not retried forever
                log.warning("status callback of %s (%s) not made: %s", record.id, entry_id, exc)
            done.append(entry_id)
        if done:
            with translate_errors(self.redis):
                self.redis.xdel(stream, *done)
        return made
