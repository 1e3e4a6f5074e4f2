"""Erasing a recipient ("the right to be forgotten"), and moving their unsent records to
another recipient when two are merged (split from :mod:`noti.recipients.store`).

Erasure: the profile hash and the recipient's log go (in one MULTI); waiting records made for
the recipient are revoked (never sent); every record kept afterwards has its target masked
(``+86139****5678``), its content fields removed, the address taken out of its error text,
and ``noti_erased`` (when); the dead-letter entries of those records are written again with
the target masked and the address taken out of their error text; the recipient's open digest
windows go with their events. What is *not* erased, on
purpose: an address on a channel's suppression list stays there (an opt-out or a hard bounce
must outlive the profile), and the notices keep the recipient id (the owner's own
pseudonymous key).

Records are found through the recipient's log, which keeps ``NOTI_NOTICE_KEEP_S`` of notices
and their records; records older than that (a failed or invalid one an operator has not
cleaned, or any record when ``NOTI_KEEP_DONE_S`` is longer) are found by reading the owner's
records older than the log keeps, a page at a time (their ``noti_rcpt``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import redis

from noti.core.keys import Keys
from noti.core.privacy import mask_target
from noti.core.record import Channel, now_ms
from noti.core.search import AddressIndex
from noti.errors import NotFound, NotiError
from noti.inputs import shown
from noti.redis.conn import load_script
from noti.redis.outage import translate_errors

__all__ = ["ERASE_BATCH", "NOTICE_MARK", "Erasure", "erase", "repoint"]

#: Records masked (or re-pointed), old records read, dead letters read, per round trip.
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
    #: Dead-letter entries of their records written again, masked.
    dead_letters: int = 0


def erase(
    client: redis.Redis,
    keys: Keys,
    owner: str,
    rid: str,
    *,
    revoke: Callable[[list[str]], Sequence[bool]],
    log_keep_ms: int,
) -> Erasure:
    """Forget recipient ``rid`` of ``owner`` (see the module); ``revoke(ids)`` revokes their
    waiting records and says which it revoked; ``log_keep_ms``: how far back the recipient's
    log reaches (``NOTI_NOTICE_KEEP_S``): older records are looked for in the owner's index.

    Raises:
        NotFound: ``e.cmd.noti.rcpt.not_found``.
    """
    key, log = keys.recipient(owner, rid), keys.recipient_log(owner, rid)
    started = now_ms()
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
    # the log drops entries older than it keeps (a minute of margin: it trims as notices come)
    known = set(records)
    records += [
        i for i in _older_records(client, keys, owner, rid, started - log_keep_ms + 60_000) if i not in known
    ]
    revoked = sum(1 for done in revoke(records) if done) if records else 0
    targets: dict[str, str] = {}
    for start in range(0, len(records), ERASE_BATCH):
        targets.update(_mask(client, keys, records[start : start + ERASE_BATCH]))
    dead = _mask_dead_letters(client, keys, targets) if targets else 0
    _drop_windows(client, keys, owner, rid)
    with translate_errors(client):
        client.delete(log)
    return Erasure(rid, revoked, len(targets), notices, dead)


def _drop_windows(client: redis.Redis, keys: Keys, owner: str, rid: str) -> None:
    """The recipient's open digest windows go, with the events they hold (their data is the
    recipient's too; a window closed meanwhile makes no notice: its recipient is gone)."""
    prefix = keys.digest(owner, rid, "")
    with translate_errors(client):
        mine = [str(k) for k in client.zrange(keys.digests_of(owner), 0, -1) if str(k).startswith(prefix)]
        if not mine:
            return
        pipe = client.pipeline(transaction=False)
        for digest_key in mine:
            pipe.hget(digest_key, "w")
        windows = pipe.execute()
        pipe = client.pipeline(transaction=True)
        for digest_key, window in zip(mine, windows, strict=True):
            pipe.delete(digest_key)
            if window is not None:
                pipe.delete(keys.digest_events(str(window)))
        pipe.zrem(keys.digests_due, *mine)
        pipe.zrem(keys.digests_of(owner), *mine)
        pipe.execute()


def _older_records(client: redis.Redis, keys: Keys, owner: str, rid: str, before_ms: int) -> list[str]:
    """The ids of ``owner``'s records made for ``rid`` before ``before_ms`` (read a page at a
    time from the owner's index, oldest first, by score: records removed meanwhile move no
    page)."""
    index, found = keys.user_index(owner), cast(list[str], [])
    low: float | str = "-inf"
    seen: set[str] = set()  # the members read at the score ``low`` (a page may end inside it)
    while True:
        with translate_errors(client):
            page: Any = client.zrangebyscore(
                index, low, f"({before_ms}", start=0, num=ERASE_BATCH + len(seen), withscores=True
            )
        fresh = [(str(m), score) for m, score in page if str(m) not in seen]
        if not fresh:
            return found
        with translate_errors(client):
            pipe = client.pipeline(transaction=False)
            for member, _ in fresh:
                pipe.hget(keys.record(member), "noti_rcpt")
            owners_of = pipe.execute()
        found += [m for (m, _), r in zip(fresh, owners_of, strict=True) if r is not None and str(r) == rid]
        last = fresh[-1][1]
        at_last = {m for m, score in fresh if score == last}
        seen = seen | at_last if last == low else at_last
        low = last


def _mask(client: redis.Redis, keys: Keys, record_ids: list[str]) -> dict[str, str]:
    """Mask the target, remove the content and take the address out of the error text and the
    timeline's steps (a vendor's text may quote it) of each record still kept, and out of the
    address index (:mod:`noti.core.search`: the record is no longer found by it); their
    original targets by id."""
    addresses = AddressIndex(client, keys)
    with translate_errors(client):
        # marked erased, with what masking needs read in the same step (erase_mark.lua): a send
        # finishing from now on writes no words, one that finished before is in the text read
        now = now_ms()
        mark = load_script(client, "erase_mark")
        rows = mark(keys=[keys.record(i) for i in record_ids], args=[now]) if record_ids else []
        live = [i for i, row in enumerate(rows) if row]  # (gone, or marked before: left out)
        pipe = client.pipeline(transaction=False)
        masked: dict[str, str] = {}
        timelines: list[str] = []
        forms_of: list[Any] = []
        for i in live:
            record_id, (kind, target, errmsg) = record_ids[i], rows[i]
            try:
                content = list(Channel(str(kind)).spec.fields.values())
            except (ValueError, NotiError):
                content = []
            key = keys.record(record_id)
            target = str(target or "")
            hidden = mask_target(target)
            changes: dict[Any, Any] = {"noti_target": hidden, "noti_erased": now}
            if errmsg and target and target in str(errmsg):
                changes["noti_errmsg"] = str(errmsg).replace(target, hidden)
            pipe.hset(key, mapping=changes)
            if content:
                pipe.hdel(key, *content)
            if target:
                pipe.zrem(addresses.key(str(kind), target), record_id)
                quoted = json.dumps(target, ensure_ascii=False)[1:-1]  # as a step's JSON holds it
                forms = dict.fromkeys((target, quoted, quoted.replace("/", "\\/")), hidden)
                timelines.append(keys.timeline(record_id))
                forms_of += [len(forms), *(text for pair in forms.items() for text in pair)]
            masked[record_id] = target
        if timelines:  # in one script: a step written meanwhile cannot shift the rewritten ones
            load_script(client, "timeline_mask")(keys=timelines, args=forms_of, client=pipe)
        if masked:
            pipe.execute()
    return masked


def _mask_dead_letters(client: redis.Redis, keys: Keys, targets: dict[str, str]) -> int:
    """Write again, masked, each dead-letter entry of a record in ``targets`` (id -> its
    original target): the entry removed and a copy with the target masked and the address
    taken out of the error text added, in one MULTI (a stream entry cannot be changed in
    place; the copy keeps ``at_ms``, its place in the stream is the newest). How many."""
    stream, changed, after = keys.dead_letters, 0, "-"
    with translate_errors(client):
        newest: Any = client.xrevrange(stream, count=1)
    if not newest:
        return 0
    end = str(newest[0][0])  # the copies go after it: never read again
    while True:
        with translate_errors(client):
            rows: Any = client.xrange(stream, min=after, max=end, count=ERASE_BATCH)
        if not rows:
            return changed
        after = "(" + str(rows[-1][0])
        pipe = client.pipeline(transaction=True)
        for entry_id, fields in rows:
            target = targets.get(str(fields.get("record_id", "")))
            if target is None or fields.get("source", "noti") != "noti":
                continue
            hidden = mask_target(target)
            copy: dict[Any, Any] = {str(k): str(v) for k, v in fields.items()}
            copy["target"] = hidden
            if target:
                copy["errmsg"] = copy.get("errmsg", "").replace(target, hidden)
            pipe.xdel(stream, entry_id)
            pipe.xadd(stream, copy)
            changed += 1
        with translate_errors(client):
            pipe.execute()


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
