"""Erasing a recipient ("the right to be forgotten"), and moving their unsent records to
another recipient when two are merged (split from :mod:`noti.recipients.store`).

Erasure: the profile hash and the recipient's log go (in one MULTI); waiting records made for
the recipient are revoked (never sent); every record kept afterwards has its target masked
(``+86139****5678``), its content fields removed, and ``noti_erased`` (when). What is *not*
erased, on purpose: an address on a channel's suppression list stays there (an opt-out or a
hard bounce must outlive the profile), and the notices keep the recipient id (the owner's own
pseudonymous key). Records are found through the recipient's log, which keeps
``NOTI_NOTICE_KEEP_S`` of notices.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import redis

from noti.core.keys import Keys
from noti.core.privacy import mask_target
from noti.core.record import Channel, now_ms
from noti.errors import NotFound, NotiError
from noti.inputs import shown
from noti.redis.outage import translate_errors

__all__ = ["ERASE_BATCH", "NOTICE_MARK", "Erasure", "erase", "repoint"]

#: Records masked (or re-pointed) per round trip.
ERASE_BATCH = 500
#: Notice ids in a recipient's log start with this (record ids never do).
NOTICE_MARK = "n"


@dataclass(frozen=True, slots=True)
class Erasure:
    """What erasing a recipient did."""

    recipient: str
    #: Waiting records revoked (never sent).
    revoked: int
    #: Records kept whose target was masked and content removed.
    masked: int
    notices: int


def erase(
    client: redis.Redis, keys: Keys, owner: str, rid: str, *, revoke: Callable[[list[str]], Sequence[bool]]
) -> Erasure:
    """Forget recipient ``rid`` of ``owner`` (see the module); ``revoke(ids)`` revokes their
    waiting records and says which it revoked.

    Raises:
        NotFound: ``e.cmd.noti.rcpt.not_found``.
    """
    key, log = keys.recipient(owner, rid), keys.recipient_log(owner, rid)
    with translate_errors(client):
        pipe = client.pipeline(transaction=True)
        pipe.hexists(key, "doc")
        pipe.zrange(log, 0, -1)
        pipe.delete(key)
        pipe.zrem(keys.recipients(owner), rid)
        exists, logged, _, _ = pipe.execute()
    if not exists:
        raise NotFound(f"no recipient {shown(rid)}", code="e.cmd.noti.rcpt.not_found")
    ids = [str(i) for i in logged]
    records = [i for i in ids if not i.startswith(NOTICE_MARK)]
    notices = len(ids) - len(records)
    revoked = sum(1 for done in revoke(records) if done) if records else 0
    masked = 0
    for start in range(0, len(records), ERASE_BATCH):
        masked += _mask(client, keys, records[start : start + ERASE_BATCH])
    with translate_errors(client):
        client.delete(log)
    return Erasure(rid, revoked, masked, notices)


def _mask(client: redis.Redis, keys: Keys, record_ids: list[str]) -> int:
    """Mask the target and remove the content of each record still kept; how many."""
    with translate_errors(client):
        pipe = client.pipeline(transaction=False)
        for record_id in record_ids:
            pipe.hmget(keys.record(record_id), ["noti_type", "noti_target", "noti_erased"])
        rows = pipe.execute()
        pipe = client.pipeline(transaction=False)
        masked = 0
        now = now_ms()
        for record_id, (kind, target, erased) in zip(record_ids, rows, strict=True):
            if kind is None or erased is not None:
                continue
            try:
                content = list(Channel(str(kind)).spec.fields.values())
            except (ValueError, NotiError):
                content = []
            key = keys.record(record_id)
            pipe.hset(key, mapping={"noti_target": mask_target(str(target or "")), "noti_erased": now})
            if content:
                pipe.hdel(key, *content)
            masked += 1
        if masked:
            pipe.execute()
    return masked


def repoint(client: redis.Redis, keys: Keys, record_ids: list[str], old_key: str, new_key: str) -> None:
    """Records whose preference check names the recipient hash ``old_key`` name ``new_key``
    instead (a merge: the records of the recipient merged away are the other one's now)."""
    for start in range(0, len(record_ids), ERASE_BATCH):
        batch = record_ids[start : start + ERASE_BATCH]
        with translate_errors(client):
            pipe = client.pipeline(transaction=False)
            for record_id in batch:
                pipe.hget(keys.record(record_id), "noti_pref")
            prefs = pipe.execute()
            pipe = client.pipeline(transaction=False)
            for record_id, pref in zip(batch, prefs, strict=True):
                if pref is not None and str(pref).startswith(old_key + " "):
                    pipe.hset(keys.record(record_id), "noti_pref", new_key + str(pref)[len(old_key) :])
            pipe.execute()
