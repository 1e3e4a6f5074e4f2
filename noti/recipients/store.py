"""Recipients in Redis: profiles, preferences, categories, bulk import and erasure.

The client is noti's (``decode_responses``: replies are text). One hash per recipient
(``noti:rcpt:<owner>:<id>``, :mod:`noti.core.keys`) holds the profile
(``doc``, JSON), ``ct`` / ``lm``, ``v`` (bumped by every profile write: what
:mod:`noti.recipients.snapshot` checks a kept profile against; it starts at a random number
when the hash is made, :func:`first_version`, so a profile erased and made again under the
same id never repeats a version a process may have kept the erased one under) and the
preferences as fields
``p:<category>:<channel>`` -> ``1`` / ``0`` (``*`` for every category or channel), so the one
script that decides a send (``notify.lua``) and the claim before it (``preference.lua``) read
a recipient's whole say in one ``HMGET``. A zset per owner lists the ids; a zset per
recipient logs the notices and records made for them (what erasure masks).

Erasure (:meth:`RecipientStore.erase`, "the right to be forgotten") is
:mod:`noti.recipients.erasure`'s.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, cast

import redis

from noti.core.keys import Keys
from noti.core.record import now_ms, parse_channel
from noti.errors import InvalidInput, NotFound, NotiError
from noti.inputs import shown
from noti.recipients.categories import GENERAL, Category, category_name, parse_category
from noti.recipients.erasure import NOTICE_MARK, Erasure, erase, repoint
from noti.recipients.profile import Recipient, merge_patch, parse_recipient, recipient_id
from noti.redis.outage import translate_errors

__all__ = ["NOTICE_MARK", "Erasure", "ImportResult", "RecipientStore"]

#: Profiles written per round trip by :meth:`RecipientStore.import_many`.
IMPORT_BATCH = 1000


@dataclass(slots=True)
class ImportResult:
    """What a bulk import did: profiles created, replaced, and the rows refused (their number,
    from 1, the error code and message); nothing of a refused row is stored."""

    created: int = 0
    updated: int = 0
    refused: list[tuple[int, str, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "created": self.created,
            "updated": self.updated,
            "refused": [{"row": n, "code": c, "message": m} for n, c, m in self.refused],
        }


def first_version() -> int:
    """Where a new profile hash's ``v`` starts (then bumped to it + 1 by the write): a random
    number below 2**52 (Lua and JSON read it exactly), multiple of 2**20 so bumps never reach
    the next one. Starting at 0 made a profile erased and put again under its id (a sign-up
    after an erasure, an import after a flush) version 1 again: a process that kept the erased
    profile at version 1 found it fresh and sent to the erased person's addresses."""
    return secrets.randbits(32) << 20


def _pref_field(category: str, channel: str) -> str:
    return f"p:{category}:{channel}"


class RecipientStore:
    """Profiles, preferences and categories under one key prefix."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.redis = client
        self.keys = keys

    # --- profiles ---------------------------------------------------------------------------

    def get(self, owner: str, rid: str) -> Recipient:
        """One recipient of ``owner``.

        Raises:
            NotFound: ``e.cmd.noti.rcpt.not_found``. InvalidInput: a bad id.
        """
        rid = recipient_id(rid)
        with translate_errors(self.redis):
            doc, ct = self.redis.hmget(self.keys.recipient(owner, rid), ["doc", "ct"])
        if doc is None:
            raise NotFound(f"no recipient {shown(rid)}", code="e.cmd.noti.rcpt.not_found")
        return _created(Recipient.from_json(doc), ct)

    def exists(self, owner: str, rid: str) -> bool:
        with translate_errors(self.redis):
            return bool(self.redis.hexists(self.keys.recipient(owner, recipient_id(rid)), "doc"))

    def put(self, owner: str, profile: object, *, rid: str | None = None) -> tuple[Recipient, bool]:
        """Create or replace a profile (its preferences are kept); ``(the profile, created?)``.

        Raises:
            InvalidInput: ``e.cmd.noti.rcpt.*`` (nothing stored).
        """
        now = now_ms()
        recipient = parse_recipient(profile, rid=rid, now_ms=now)
        return self._write(owner, recipient)

    def _write(self, owner: str, recipient: Recipient) -> tuple[Recipient, bool]:
        """Write a profile in one MULTI; its ``created_ms`` is the hash's ``ct`` (the first
        write's: readers take it from there, :func:`_created`)."""
        key = self.keys.recipient(owner, recipient.id)
        now = recipient.updated_ms
        with translate_errors(self.redis):
            pipe = self.redis.pipeline(transaction=True)
            pipe.hsetnx(key, "ct", now)
            pipe.hget(key, "ct")
            pipe.hset(key, mapping={"doc": recipient.to_json(), "lm": now})
            pipe.hsetnx(key, "v", first_version())
            pipe.hincrby(key, "v", 1)
            pipe.zadd(self.keys.recipients(owner), {recipient.id: now}, nx=True)
            created, ct = pipe.execute()[:2]
        return _created(recipient, ct), bool(created)

    def _transaction(self, write: Callable[[Any], Any], *watched: str) -> Any:
        """``write(pipe)`` (reads, then ``pipe.multi()`` and the writes) under WATCH of
        ``watched``, run again when another client wrote one of them meanwhile: redis-py's
        ``Redis.transaction``; what ``write`` returns."""
        with translate_errors(self.redis):
            return self.redis.transaction(write, *watched, value_from_callable=True)

    def update(self, owner: str, rid: str, patch: object) -> Recipient:
        """Apply a JSON merge patch (RFC 7396) to a profile, atomically against other writers
        (optimistic: retried when another write came between the read and the write).

        Raises:
            NotFound: ``e.cmd.noti.rcpt.not_found``. InvalidInput: the patched profile is bad.
        """
        rid = recipient_id(rid)
        key = self.keys.recipient(owner, rid)

        def write(pipe: Any) -> Recipient:
            doc = pipe.hget(key, "doc")
            if doc is None:
                raise NotFound(f"no recipient {shown(rid)}", code="e.cmd.noti.rcpt.not_found")
            updated = merge_patch(Recipient.from_json(doc), patch, now_ms=now_ms())
            pipe.multi()
            pipe.hset(key, mapping={"doc": updated.to_json(), "lm": updated.updated_ms})
            pipe.hincrby(key, "v", 1)
            return updated

        return cast(Recipient, self._transaction(write, key))

    def merge(self, owner: str, into: str, source: str) -> Recipient:
        """Merge recipient ``source`` into ``into`` (one person known under two ids): the
        addresses are joined (``into``'s primaries stay primary), ``into``'s locale, timezone,
        quiet hours and attributes win where set, each preference ``into`` has not set is
        taken from ``source``, ``source``'s history moves over, and ``source`` is removed
        (not erased: its records keep their addresses).

        Raises:
            NotFound: either is missing. InvalidInput: the same id twice, or the joined
            profile is too big (more addresses than a channel keeps).
        """
        into, source = recipient_id(into), recipient_id(source)
        if into == source:
            raise InvalidInput("a recipient cannot be merged into itself", code="e.cmd.noti.rcpt.badmerge")
        k = self.keys
        keep, gone = k.recipient(owner, into), k.recipient(owner, source)

        def write(pipe: Any) -> tuple[Recipient, list[tuple[str, float]]]:
            a, b = pipe.hgetall(keep), pipe.hgetall(gone)
            for rid, data in ((into, a), (source, b)):
                if "doc" not in data:
                    raise NotFound(f"no recipient {shown(rid)}", code="e.cmd.noti.rcpt.not_found")
            left, right = Recipient.from_json(a["doc"]), Recipient.from_json(b["doc"])
            merged = parse_recipient({**_join(left, right), "id": into}, rid=into, now_ms=now_ms())
            merged = replace(merged, created_ms=min(left.created_ms, right.created_ms))
            prefs = {f: v for f, v in b.items() if f.startswith("p:") and f not in a}
            history = pipe.zrange(k.recipient_log(owner, source), 0, -1, withscores=True)
            pipe.multi()
            pipe.hset(keep, mapping={"doc": merged.to_json(), "lm": merged.updated_ms, **prefs})
            pipe.hincrby(keep, "v", 1)
            if history:
                pipe.zadd(k.recipient_log(owner, into), dict(history))
            pipe.delete(gone, k.recipient_log(owner, source))
            pipe.zrem(k.recipients(owner), source)
            return merged, history

        merged, history = cast(
            tuple[Recipient, list[tuple[str, float]]], self._transaction(write, keep, gone)
        )
        # the records made for ``source`` and not sent yet are ``into``'s now: the claim checks
        # their preference against ``into`` (else it would find ``source`` gone: "erased")
        moved = [m for m, _ in history if not m.startswith(NOTICE_MARK)]
        repoint(self.redis, self.keys, moved, gone, keep)
        return merged

    def page(self, owner: str, *, limit: int = 100, after: str | None = None) -> list[Recipient]:
        """``owner``'s recipients, oldest first; ``after`` an id to continue after."""
        k = self.keys
        with translate_errors(self.redis):
            start = 0
            if after is not None:
                rank = self.redis.zrank(k.recipients(owner), recipient_id(after))
                if rank is None:  # starting over would loop a client paging past a deleted id
                    raise NotFound(
                        f"no recipient {shown(after)} to list after (deleted meanwhile?)",
                        code="e.cmd.noti.rcpt.not_found",
                    )
                start = int(rank) + 1  # type: ignore[arg-type]
            ids = [str(i) for i in self.redis.zrange(k.recipients(owner), start, start + limit - 1)]
            pipe = self.redis.pipeline(transaction=False)
            for rid in ids:
                pipe.hmget(k.recipient(owner, rid), ["doc", "ct"])
            rows = pipe.execute() if ids else []
        return [_created(Recipient.from_json(doc), ct) for doc, ct in rows if doc is not None]

    def count(self, owner: str) -> int:
        with translate_errors(self.redis):
            return int(self.redis.zcard(self.keys.recipients(owner)))

    def import_many(self, owner: str, rows: Iterable[object], *, batch: int = IMPORT_BATCH) -> ImportResult:
        """Create or replace many profiles (each as :meth:`put`), ``batch`` per round trip; a
        bad row is refused alone (listed in the result), the others are stored.

        Raises:
            StoreUnavailable: Redis cannot be reached (the batches written before stay).
        """
        result = ImportResult()
        pending: list[Recipient] = []
        now = now_ms()
        for number, row in enumerate(rows, start=1):
            try:
                if isinstance(row, NotiError):
                    raise row
                pending.append(parse_recipient(row, now_ms=now))
            except NotiError as exc:
                result.refused.append((number, exc.code, exc.message))
                continue
            if len(pending) >= batch:
                self._write_many(owner, pending, result)
                pending = []
        if pending:
            self._write_many(owner, pending, result)
        return result

    def _write_many(self, owner: str, profiles: list[Recipient], result: ImportResult) -> None:
        k = self.keys
        with translate_errors(self.redis):
            pipe = self.redis.pipeline(transaction=False)
            for p in profiles:
                key = k.recipient(owner, p.id)
                pipe.hsetnx(key, "ct", p.created_ms)
                pipe.hset(key, mapping={"doc": p.to_json(), "lm": p.updated_ms})
                pipe.hsetnx(key, "v", first_version())
                pipe.hincrby(key, "v", 1)
            pipe.zadd(k.recipients(owner), {p.id: p.created_ms for p in profiles}, nx=True)
            answers = pipe.execute()
        made = sum(1 for flag in answers[0:-1:4] if flag)
        result.created += made
        result.updated += len(profiles) - made

    # --- preferences ------------------------------------------------------------------------

    def preferences(self, owner: str, rid: str) -> dict[str, dict[str, bool]]:
        """The preferences a recipient set: category -> channel -> in (true) / out (false),
        ``*`` standing for every category or channel.

        Raises:
            NotFound: ``e.cmd.noti.rcpt.not_found``.
        """
        rid = recipient_id(rid)
        with translate_errors(self.redis):
            data = self.redis.hgetall(self.keys.recipient(owner, rid))
        if "doc" not in data:
            raise NotFound(f"no recipient {shown(rid)}", code="e.cmd.noti.rcpt.not_found")
        out: dict[str, dict[str, bool]] = {}
        for f, v in data.items():
            name = str(f)
            if name.startswith("p:"):
                _, category, channel = name.split(":", 2)
                out.setdefault(category, {})[channel] = str(v) == "1"
        return out

    def set_preferences(self, owner: str, rid: str, preferences: object) -> dict[str, dict[str, bool]]:
        """Set preferences from ``{category: {channel: true | false | null}}`` (``*`` for every
        category or channel; null removes the preference: the default applies again); the
        preferences after.

        Raises:
            NotFound: the recipient or a category is unknown (``*`` aside).
            InvalidInput: ``e.cmd.noti.pref.bad`` (shape, channel, value),
            ``e.cmd.noti.pref.locked``: an opt-out of a category recipients may not opt out of.
        """
        rid = recipient_id(rid)
        if not isinstance(preferences, Mapping) or not preferences:
            raise InvalidInput(
                "preferences are an object of category -> {channel: true | false | null}",
                code="e.cmd.noti.pref.bad",
            )
        if len(preferences) > 256:
            raise InvalidInput("at most 256 categories at once", code="e.cmd.noti.pref.bad")
        sets: dict[Any, Any] = {}
        removes: list[str] = []
        categories = self.categories_named([c for c in preferences if c != "*"])
        for category, channels in preferences.items():
            if not isinstance(channels, Mapping) or not channels:
                raise InvalidInput(
                    f"the preferences of {shown(category)} are an object of channel -> true | false | null",
                    code="e.cmd.noti.pref.bad",
                )
            for channel, value in channels.items():
                if channel != "*":
                    try:
                        parsed = parse_channel(channel).value if isinstance(channel, str) else None
                    except NotiError:
                        parsed = None
                    if parsed is None:
                        raise InvalidInput(
                            f"{shown(channel)} is not a channel (see `noti channels`)",
                            code="e.cmd.noti.pref.bad",
                        )
                    channel = parsed
                name = _pref_field(category, channel)
                if value is None:
                    removes.append(name)
                elif isinstance(value, bool):
                    known = categories.get(category)
                    if known is not None and not known.enforced and not value:
                        raise InvalidInput(
                            f"recipients cannot opt out of {category}"
                            + (" (it is critical)" if known.critical else ""),
                            code="e.cmd.noti.pref.locked",
                        )
                    sets[name] = "1" if value else "0"
                else:
                    raise InvalidInput(
                        f"a preference is true, false or null, got {shown(value)}", code="e.cmd.noti.pref.bad"
                    )
        key = self.keys.recipient(owner, rid)

        def write(pipe: Any) -> None:
            if not pipe.hexists(key, "doc"):  # never a preference for a recipient erased meanwhile
                raise NotFound(f"no recipient {shown(rid)}", code="e.cmd.noti.rcpt.not_found")
            pipe.multi()
            if sets:
                pipe.hset(key, mapping=sets)
            if removes:
                pipe.hdel(key, *removes)

        self._transaction(write, key)
        return self.preferences(owner, rid)

    # --- categories -------------------------------------------------------------------------

    def category(self, name: str) -> Category:
        """A declared category, or the implicit :data:`GENERAL`.

        Raises:
            NotFound: ``e.cmd.noti.cat.not_found``. InvalidInput: a bad name.
        """
        name = category_name(name)
        with translate_errors(self.redis):
            text = self.redis.hget(self.keys.categories, name)
        if text is None and name != GENERAL:
            raise NotFound(f"no category {shown(name)}", code="e.cmd.noti.cat.not_found")
        return Category.from_json(name, text)

    def categories_named(self, names: Iterable[object]) -> dict[str, Category]:
        """The categories named (each must exist; :data:`GENERAL` always does).

        Raises:
            NotFound: ``e.cmd.noti.cat.not_found``. InvalidInput: a bad name.
        """
        clean = [category_name(n) for n in names]
        if not clean:
            return {}
        with translate_errors(self.redis):
            texts = self.redis.hmget(self.keys.categories, clean)
        out = {}
        for name, text in zip(clean, texts, strict=True):
            if text is None and name != GENERAL:
                raise NotFound(f"no category {shown(name)}", code="e.cmd.noti.cat.not_found")
            out[name] = Category.from_json(name, text)
        return out

    def categories(self) -> list[Category]:
        with translate_errors(self.redis):
            data = self.redis.hgetall(self.keys.categories)
        found = {str(n): Category.from_json(str(n), v) for n, v in data.items()}
        found.setdefault(GENERAL, Category(GENERAL))
        return [found[n] for n in sorted(found)]

    def put_category(self, name: object, declaration: object) -> Category:
        """Declare (or redeclare) a category.

        Raises:
            InvalidInput: ``e.cmd.noti.cat.*``.
        """
        category = parse_category(name, declaration)
        with translate_errors(self.redis):
            self.redis.hset(self.keys.categories, category.name, category.to_json())
        return category

    def delete_category(self, name: object) -> bool:
        """Remove a declared category (preferences for it stay, unused); whether it existed."""
        clean = category_name(name)
        with translate_errors(self.redis):
            return bool(self.redis.hdel(self.keys.categories, clean))

    # --- history and erasure ----------------------------------------------------------------

    def history(self, owner: str, rid: str, *, limit: int = 100) -> list[str]:
        """Notice and record ids made for a recipient, newest first."""
        with translate_errors(self.redis):
            ids = self.redis.zrevrange(self.keys.recipient_log(owner, recipient_id(rid)), 0, limit - 1)
        return [str(i) for i in ids]

    def erase(self, owner: str, rid: str, *, revoke: Any, log_keep_ms: int) -> Erasure:
        """Forget a recipient (see :mod:`noti.recipients.erasure`): ``revoke(ids)`` revokes
        their waiting records (the record store's, passed in so this module stays below the
        sending path); ``log_keep_ms``: how far back the recipient's log reaches.

        Raises:
            NotFound: ``e.cmd.noti.rcpt.not_found``.
        """
        return erase(self.redis, self.keys, owner, recipient_id(rid), revoke=revoke, log_keep_ms=log_keep_ms)


def _created(recipient: Recipient, ct: Any) -> Recipient:
    """``recipient`` with the time it was first written (``ct``: a profile an import replaced
    carries the import's time in its document)."""
    if ct is None or not str(ct).isdigit() or int(ct) == recipient.created_ms:
        return recipient
    return replace(recipient, created_ms=int(ct))


def _join(left: Recipient, right: Recipient) -> dict[str, Any]:
    addresses: dict[str, list[str]] = {c: list(v) for c, v in left.addresses.items()}
    for channel, extra in right.addresses.items():
        have = addresses.setdefault(channel, [])
        have.extend(a for a in extra if a not in have)
    body = {
        "addresses": addresses,
        "locale": left.locale or right.locale,
        "timezone": left.timezone or right.timezone,
        "quiet_hours": left.quiet_hours if left.quiet_hours != "default" else right.quiet_hours,
        "attributes": {**dict(right.attributes), **dict(left.attributes)},
    }
    return body
