"""The ``notify.lua`` calls of :mod:`noti.recipients.notices`: a notice's keys and arguments
(its records, the delivery messages of those due now, its idempotency or deduplication key,
its category's throttle and the digest a throttle that digests puts what is over it into),
and one call's shared keys and arguments around the notices it writes (split from
:mod:`noti.recipients.notices` to keep both short)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from noti.core.record import Notification, new_id, to_hash
from noti.fastjson import dumps as fast_dumps
from noti.recipients.categories import Category
from noti.recipients.notice import Notice, NoticeEntry
from noti.recipients.request import DIGEST_MAX, NoticeRequest
from noti.recipients.snapshot import Snapshot
from noti.recipients.store import NOTICE_MARK
from noti.redis.counters import added_field

if TYPE_CHECKING:
    from noti.sending.notifier import Notifier

__all__ = ["NotifyCalls"]


def _throttle_args(category: Category, *, made: bool) -> tuple[int, int, str]:
    """``notify.lua``'s throttle arguments of a category: limit (0: none), period ms, over (a
    digest window's own notice is delayed, never digested again)."""
    throttle = category.throttle
    if throttle is None or category.critical:
        return 0, 0, ""
    over = "delay" if made and throttle.over == "digest" else throttle.over
    return throttle.limit, throttle.period_ms, over


def _throttle_digest(category: str, channel: str) -> str:
    """The digest key a category's throttle puts what is over it into, per channel."""
    return f"throttled.{category}.{channel}"


#: A notice's ``doc`` field (one encoder: ``json.dumps`` with options makes one per call).
_DOC = json.JSONEncoder(separators=(",", ":"))


@dataclass(slots=True)
class _Prepared:
    """A notice ready for ``notify.lua``: its call, and what reading the answer needs."""

    notice: Notice
    keys: list[str]
    args: list[Any]
    records: list[Notification]
    entries: dict[str, NoticeEntry]
    locales: dict[str, str]
    messages: dict[str, tuple[str, str]]
    order: list[str]
    #: The category when a deduplication key names the notice (a repeat is counted).
    dedupe_category: str | None = None


class NotifyCalls:
    """Builds the ``notify.lua`` calls of one notifier's notices."""

    def __init__(self, notifier: Notifier) -> None:
        self.notifier = notifier
        self.runtime = notifier.runtime
        self.keys = notifier.runtime.keys
        self._added: dict[tuple[Any, str | None], str] = {}

    def part(
        self,
        notice: Notice,
        request: NoticeRequest,
        snapshot: Snapshot,
        order: list[str],
        entries: dict[str, NoticeEntry],
        locales: dict[str, str],
        records: list[tuple[Notification, str]],
        after_ms: int,
    ) -> _Prepared:
        """A notice's part of a ``notify.lua`` call (see the script for its keys and
        arguments; :meth:`call_of` puts the parts of one call together)."""
        k = self.keys
        publisher = self.notifier.publisher
        messages: dict[str, tuple[str, str]] = {}
        if publisher.shares_store:
            for record, _ in records:
                if not record.lease_until_ms:
                    messages[record.id] = publisher.message(
                        record.id, record.channel, record.level, record.parent
                    )
        idem_key, key_ttl = request.once_key(k, int(self.runtime.settings.idempotency_ttl_s * 1000))
        doc = fast_dumps(  # read back by noti alone (Notice.from_hash): msgspec's where installed
            {
                "owner": notice.owner,
                "rcpt": notice.recipient,
                "tmpl": notice.template,
                "ver": notice.version,
                "cat": notice.category,
                "mode": notice.mode,
                "ct": notice.created_ms,
                "held": notice.held_until_ms,
                "order": order,
                "locales": locales,
                "skipped": {e.channel: e.state for e in entries.values()},
            }
        )
        notice_key = k.notice(notice.id)
        keys = [
            k.recipient(notice.owner, notice.recipient),
            notice_key,
            k.recipient_log(notice.owner, notice.recipient),
            idem_key or notice_key,
            k.user_index(records[0][0].creator),
            k.template(notice.owner, notice.template),
            k.digests_of(notice.owner),
        ]
        limit, period, over = _throttle_args(snapshot.category, made=request.made_key is not None)
        digesting = over == "digest"
        template = snapshot.category.throttle.template if snapshot.category.throttle is not None else None
        args: list[Any] = [
            notice.id,
            key_ttl,
            notice.mode,
            notice.category,
            "1" if snapshot.category.enforced else "0",
            after_ms,
            snapshot.profile_version,
            snapshot.template_stamp,
            snapshot.category_text,
            "1" if notice.held_until_ms else "0",
            len(records),
            limit,
            period,
            over,
            _DOC.encode({"at": notice.created_ms, "data": request.values}) if digesting else "",
            1,
            "doc",
            doc,
        ]
        address = self.runtime.store.addresses.key
        for record, default in records:
            message = messages.get(record.id)
            record_key = k.record(record.id)
            channel = record.channel.value
            keys += [record_key, message[0] if message else record_key, k.suppressed(channel)]
            if limit:  # the throttle's keys (any key when the category has none: never read)
                keys += [
                    k.throttle(notice.owner, notice.recipient, notice.category, channel),
                    k.digest(notice.owner, notice.recipient, _throttle_digest(notice.category, channel)),
                ]
            else:
                keys += [record_key, record_key]
            keys.append(address(record.channel, record.target))
            fields = to_hash(record)
            args += [
                record.channel.value,
                record.id,
                record.target,
                default,
                record.level,
                record.lease_until_ms,
                message[1] if message else "",
                self._added_field(record),
                *(self._throttle_window(notice, request, record, template) if digesting else ("", "")),
                len(fields),
                *[x for pair in fields.items() for x in pair],
            ]
        return _Prepared(
            notice,
            keys,
            args,
            [r for r, _ in records],
            entries,
            locales,
            messages,
            order,
            notice.category if request.dedupe is not None else None,
        )

    def _throttle_window(
        self, notice: Notice, request: NoticeRequest, record: Notification, template: str | None
    ) -> tuple[str, str]:
        """A digest window id and what its notice is made with, for a record a throttle that
        digests may put there: the throttle's ``template``, on the record's channel alone, as
        the call's user."""
        channel = record.channel.value
        doc = request.window_doc(
            user=self.notifier.user(request.user).name,
            opened=notice.created_ms,
            digest=_throttle_digest(notice.category, channel),
            template=template,
            channel=channel,
            level=record.level,
        )
        return NOTICE_MARK + new_id(notice.created_ms), _DOC.encode(doc)

    def _added_field(self, record: Notification) -> str:
        """The ``added`` counter field of ``record`` (kept per channel and provider)."""
        key = (record.channel, record.provider)
        found = self._added.get(key)
        if found is None:
            found = self._added[key] = added_field(record.channel.value, record.provider)
        return found

    def call_of(self, parts: Sequence[_Prepared], now: int) -> tuple[list[str], list[Any]]:
        """The keys and arguments of one ``notify.lua`` call writing ``parts`` at ``now``."""
        k, settings = self.keys, self.runtime.settings
        keys = [k.all_index, k.waiting_index, k.delayed, k.metrics, k.status_index(1), k.status_index(-1)]
        keys += [k.categories, k.digests_due]
        args: list[Any] = [now, int(settings.notice_keep_s * 1000), k.digest_events(""), DIGEST_MAX]
        for part in parts:
            keys += part.keys
            args += part.args
        return keys, args
