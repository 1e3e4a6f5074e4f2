"""One call, the right channels: ``notify(recipient="42", template="order_shipped",
data={...}, category="orders")``.

A *notice* is one such call. It resolves the recipient's profile, the template (its current
version, or ``name@3``) and the category, works out when the recipient may be woken (quiet
hours, :mod:`noti.recipients.quiet`), renders the template per channel in the recipient's
locale (with fallback, :mod:`noti.recipients.locales`), builds one record per channel as
``notify_<channel>`` would (the same checks, caps and grants), and hands them to
``notify.lua``, which applies the recipient's preferences and the channels' suppression lists
and writes the records, their delivery messages and the notice in one atomic step.

Two modes:

* every channel (the default, or the ``channels`` named): one record per channel the
  recipient has an address for, the template has a variant for, and their preferences allow;
* a chain (``chain=["push", "sms"]``): the first channel allowed is sent; the next one allowed
  stands by as its fallback (:mod:`noti.delivery.fallback`): sent if no delivery receipt of the
  first comes within ``after_s`` (else the channel's ``fallback_after_s``), cancelled by a
  ``delivered`` one, sent at once on an ``undelivered`` one. A chain is two deep: channels
  after the second allowed are reported ``unused``.

Every record carries the notice id (``noti_parent``), the recipient id and the category; the
notice (:class:`Notice`, ``noti get <notice id>``) says per channel what became of it. A
suppressed channel is a record too (invalid, ``e.noti.pref.optout`` or
``e.noti.pref.suppressed``, counted in ``suppressed|<category>|<channel>|<why>``), never a
silent drop. A held one is a waiting record due when the quiet hours end (counted in
``held|<category>|<channel>``).

Notice ids are ``n`` + a record-style id (record ids start with a time digit, never ``n``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from noti.core.record import Notification, new_id, now_ms, parse_channel, to_hash
from noti.errors import InvalidConfig, InvalidInput, NotFound, NotiError
from noti.inputs import plain_json, shown
from noti.recipients.categories import GENERAL, Category, category_name
from noti.recipients.profile import QUIET_DEFAULT, QUIET_OFF, Recipient, recipient_id
from noti.recipients.quiet import held_until_ms, parse_quiet, parse_timezone
from noti.recipients.store import NOTICE_MARK, RecipientStore
from noti.recipients.templates import Template, TemplateStore
from noti.recipients.unsubscribe import unsubscribe_url
from noti.redis.conn import load_script
from noti.redis.counters import added_field
from noti.redis.outage import translate_errors

if TYPE_CHECKING:
    from noti.sending.notifier import Notifier

__all__ = ["DATA_MAX_BYTES", "CHAIN_MAX", "Notice", "NoticeEntry", "Notices"]

#: Largest ``data`` a notice takes (its JSON, UTF-8).
DATA_MAX_BYTES = 64 * 1024
#: Longest chain or channel list.
CHAIN_MAX = 8
#: What became of a channel that got no record: no address in the profile, no variant in
#: the template (neither a suppression: nothing was asked of the recipient).
NO_ADDRESS, NO_TEMPLATE = "noaddress", "notemplate"


def _bad(code: str, message: str) -> InvalidInput:
    return InvalidInput(message, code=f"e.cmd.noti.notify.{code}")


@dataclass(frozen=True, slots=True)
class NoticeEntry:
    """One channel of a notice: ``queued``, ``held`` (due at the end of quiet hours),
    ``fallback``, ``suppressed`` (``reason``: ``optout`` or ``suppressed``), ``off`` (the
    category is off on it for them), ``unused`` (a chain had two already), ``noaddress``,
    ``notemplate``; the record made, if any."""

    channel: str
    state: str
    record: str | None = None
    reason: str = ""
    locale: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "channel": self.channel,
            "state": self.state,
            "record": self.record,
            "reason": self.reason or None,
            "locale": self.locale,
        }


@dataclass(frozen=True, slots=True)
class Notice:
    """One ``notify(recipient=…)`` call and what became of it."""

    id: str
    owner: str
    recipient: str
    template: str
    version: int
    category: str
    mode: str
    created_ms: int
    #: When quiet hours end, if they held the notice (0: not held).
    held_until_ms: int = 0
    entries: tuple[NoticeEntry, ...] = ()
    #: True when an idempotency key named this notice already (nothing new was made).
    repeated: bool = False

    @property
    def records(self) -> list[str]:
        return [e.record for e in self.entries if e.record]

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "owner": self.owner,
            "recipient": self.recipient,
            "template": self.template,
            "version": self.version,
            "category": self.category,
            "mode": self.mode,
            "created_ms": self.created_ms,
            "held_until_ms": self.held_until_ms or None,
            "channels": [e.to_dict() for e in self.entries],
            "repeated": self.repeated,
        }

    @classmethod
    def from_hash(cls, notice_id: str, data: Mapping[str, str], *, repeated: bool = False) -> Notice:
        entries = []
        order = json.loads(data.get("order", "[]"))
        locales = json.loads(data.get("locales", "{}"))
        for channel in order:
            value = data.get(f"ch:{channel}", "")
            state, _, record = value.partition(" ")
            reason = ""
            if state.startswith("suppressed:"):
                state, reason = "suppressed", state.split(":", 1)[1]
            entries.append(NoticeEntry(channel, state, record or None, reason, locales.get(channel)))
        return cls(
            id=notice_id,
            owner=data.get("owner", ""),
            recipient=data.get("rcpt", ""),
            template=data.get("tmpl", ""),
            version=int(data.get("ver", 0)),
            category=data.get("cat", ""),
            mode=data.get("mode", ""),
            created_ms=int(data.get("ct", 0)),
            held_until_ms=int(data.get("held", 0)),
            entries=tuple(entries),
            repeated=repeated,
        )


def is_notice_id(value: object) -> bool:
    return isinstance(value, str) and value.startswith(NOTICE_MARK) and 2 <= len(value) <= 40


def _template_ref(value: object) -> tuple[str, int | None]:
    """``name`` or ``name@version``."""
    if not isinstance(value, str) or not value:
        raise _bad("badtemplate", f"template is a template name (name or name@version), got {shown(value)}")
    name, at, version = value.partition("@")
    if not at:
        return name, None
    if not version.isdigit() or not 1 <= int(version) <= 10**9:
        raise _bad("badtemplate", f"{shown(value)}: a version is a whole number from 1")
    return name, int(version)


def _channel_list(value: object, what: str) -> list[str]:
    if isinstance(value, str):
        value = [v for v in value.replace(",", " ").split() if v]
    if not isinstance(value, Sequence) or not value or len(value) > CHAIN_MAX:
        raise _bad("badchannels", f"{what} is a list of 1-{CHAIN_MAX} channels, got {shown(value)}")
    out: list[str] = []
    for item in value:
        if not isinstance(item, str):
            raise _bad("badchannels", f"{what}: {shown(item)} is not a channel")
        try:
            name = parse_channel(item).value
        except NotiError:
            raise _bad("badchannels", f"{what}: {shown(item)} is not a channel (see `noti channels`)") from None
        if name in out:
            raise _bad("badchannels", f"{what} names {name} twice")
        out.append(name)
    return out


class Notices:
    """Notify recipients through one notifier (its runtime, builder and publisher)."""

    def __init__(self, notifier: Notifier) -> None:
        self.notifier = notifier
        runtime = notifier.runtime
        self.runtime = runtime
        self.keys = runtime.keys
        self.recipients = RecipientStore(runtime.redis, runtime.keys)
        self.templates = TemplateStore(runtime.redis, runtime.keys)
        self._script = load_script(runtime.redis, "notify")

    def _quiet_default(self) -> tuple[Any, str]:
        settings = self.runtime.settings
        try:
            window = parse_quiet(settings.quiet_hours) if settings.quiet_hours else None
            zone = parse_timezone(settings.recipient_timezone)
        except InvalidInput as exc:
            raise InvalidConfig(f"NOTI_QUIET_HOURS / NOTI_RECIPIENT_TIMEZONE: {exc.message}") from None
        return window, zone

    def held_until(self, recipient: Recipient, category: Category, level: int, at_ms: int) -> int:
        """When the recipient's quiet hours end if ``at_ms`` falls inside them and nothing
        lets the notice through (a critical category, a level at or above
        ``NOTI_QUIET_BYPASS_LEVEL``); else 0."""
        if category.critical or level >= self.runtime.settings.quiet_bypass_level:
            return 0
        default_window, default_zone = self._quiet_default()
        if recipient.quiet_hours == QUIET_OFF:
            return 0
        window = default_window if recipient.quiet_hours == QUIET_DEFAULT else parse_quiet(recipient.quiet_hours)
        if window is None:
            return 0
        return held_until_ms(window, recipient.timezone or default_zone, at_ms) or 0

    def notify(
        self,
        *,
        recipient: object,
        template: object,
        data: object = None,
        category: object = None,
        channels: object = None,
        chain: object = None,
        after_s: object = None,
        locale: object = None,
        lv: object = 1,
        user: str | None = None,
        owner: str | None = None,
        delay: float | None = None,
        eta: datetime | None = None,
        idempotency_key: str | None = None,
        task_id: str | None = None,
        level_cap: int | None = None,
        providers_allowed: frozenset[str] | None = None,
    ) -> Notice:
        """Notify one recipient from a template (see the module); the notice.

        Raises:
            InvalidInput: bad input (``e.cmd.noti.notify.*``, the template's
                ``e.cmd.noti.tmpl.missingvar`` …, a channel's own checks); nothing stored.
            NotFound: no such recipient, template or category.
            PermissionDenied: ``owner`` names another user and the acting one is no root member.
            StoreUnavailable: Redis cannot be reached.
        """
        from noti.core.delay import validate_idempotency_key
        from noti.recipients.locales import parse_locale

        acting = self.notifier.user(user)
        owner = acting.scope(owner, code="e.cmd.noti.rcpt.nopvg", action="notify other users' recipients")
        owner = owner or acting.name
        rid = recipient_id(recipient)
        name, version = _template_ref(template)
        cat_name = GENERAL if category is None else category_name(category)
        values: dict[str, Any] = {}
        if data is not None:
            values, _ = plain_json(data, what="data", code="e.cmd.noti.notify.baddata", max_bytes=DATA_MAX_BYTES)
        if channels is not None and chain is not None:
            raise _bad("badchannels", "give channels or a chain, not both")
        wanted = _channel_list(chain if chain is not None else channels, "chain" if chain is not None else "channels") if (
            channels is not None or chain is not None
        ) else None
        wanted_locale = parse_locale(locale) if locale is not None else None
        if idempotency_key is not None:
            validate_idempotency_key(idempotency_key)
        if task_id is not None:
            validate_idempotency_key(task_id)
        after_ms = 0
        if after_s is not None:
            from noti.delivery.fallback import AFTER_MAX_S
            from noti.inputs import finite_number

            after_ms = int(
                finite_number(after_s, what="after_s", code="e.cmd.noti.notify.badafter", above=0, maximum=AFTER_MAX_S)
                * 1000
            )
        # one round trip: the profile, the template's current version, the category
        k = self.keys
        with translate_errors(self.runtime.redis):
            pipe = self.runtime.redis.pipeline(transaction=False)
            pipe.hget(k.recipient(owner, rid), "doc")
            pipe.hget(k.template(owner, name), "current")
            pipe.hget(k.categories, cat_name)
            doc, current, cat_text = pipe.execute()
        if doc is None:
            raise NotFound(f"no recipient {shown(rid)}", code="e.cmd.noti.rcpt.not_found")
        if cat_text is None and cat_name != GENERAL:
            raise NotFound(f"no category {shown(cat_name)}", code="e.cmd.noti.cat.not_found")
        profile = Recipient.from_json(doc)
        cat = Category.from_json(cat_name, cat_text)
        version = version or (int(current) if current else None)
        if version is None:
            raise NotFound(f"no template {shown(name)}", code="e.cmd.noti.tmpl.not_found")
        tmpl = self.templates.cached(owner, name, version) or self.templates.get(owner, name, version)
        return self._make(
            acting_user=user,
            owner=owner,
            profile=profile,
            tmpl=tmpl,
            category=cat,
            values=values,
            wanted=wanted,
            chain=chain is not None,
            after_ms=after_ms,
            wanted_locale=wanted_locale,
            lv=lv,
            delay=delay,
            eta=eta,
            idempotency_key=idempotency_key,
            task_id=task_id,
            level_cap=level_cap,
            providers_allowed=providers_allowed,
        )

    def _make(
        self,
        *,
        acting_user: str | None,
        owner: str,
        profile: Recipient,
        tmpl: Template,
        category: Category,
        values: dict[str, Any],
        wanted: list[str] | None,
        chain: bool,
        after_ms: int,
        wanted_locale: str | None,
        lv: object,
        delay: float | None,
        eta: datetime | None,
        idempotency_key: str | None,
        task_id: str | None,
        level_cap: int | None,
        providers_allowed: frozenset[str] | None,
    ) -> Notice:
        settings = self.runtime.settings
        created = now_ms()
        notice_id = NOTICE_MARK + new_id(created)
        order = wanted if wanted is not None else list(tmpl.channels)
        entries: dict[str, NoticeEntry] = {}
        candidates: list[tuple[Notification, str]] = []  # (record, category default '1'/'0')
        locales: dict[str, str] = {}
        base = {**values, "recipient": profile.template_view()}
        locale_asked = wanted_locale or profile.locale
        enforced = category.enforced
        rkey = self.keys.recipient(owner, profile.id)
        for channel in order:
            address = profile.primary(channel)
            if address is None:
                entries[channel] = NoticeEntry(channel, NO_ADDRESS)
                continue
            loc = tmpl.locale_for(channel, locale_asked)
            if loc is None:
                entries[channel] = NoticeEntry(channel, NO_TEMPLATE)
                continue
            locales[channel] = loc
            view = {**base, "locale": loc}
            url = None
            if enforced and settings.public_url:
                url = unsubscribe_url(self.runtime, owner, profile.id, category.name, channel)
                view["unsubscribe_url"] = url
            fields = tmpl.render(channel, loc, view)
            if channel == "email" and url is not None and "unsubscribe" not in fields:
                fields["unsubscribe"] = url
            record = self.notifier.build(
                channel,
                address,
                lv=lv,
                user=acting_user,
                delay=delay,
                eta=eta,
                level_cap=level_cap,
                providers_allowed=providers_allowed,
                **fields,
            )
            default = "1" if category.on_by_default(channel) else "0"
            record = replace(
                record,
                parent=notice_id,
                recipient=profile.id,
                category=category.name,
                preference=f"{rkey} {category.name} {channel} {default}" if enforced else None,
            )
            candidates.append((record, default))
        if not candidates:
            raise _bad(
                "nochannel",
                f"recipient {profile.id} cannot be reached with template {tmpl.name}: "
                + ", ".join(f"{e.channel}: {e.state}" for e in entries.values()),
            )
        level = candidates[0][0].level
        held = self.held_until(profile, category, level, created)
        if chain and not after_ms:
            first = candidates[0][0].channel.value
            after_ms = int(settings.channel(first).fallback_after_s * 1000)
        records = []
        for record, default in candidates:
            due = max(record.lease_until_ms, held)
            records.append((replace(record, lease_until_ms=due), default))
        return self._store(
            notice_id=notice_id,
            owner=owner,
            profile=profile,
            tmpl=tmpl,
            category=category,
            chain=chain,
            after_ms=after_ms,
            order=order,
            entries=entries,
            locales=locales,
            records=records,
            held=held,
            created=created,
            idempotency_key=idempotency_key,
            task_id=task_id,
        )

    def _store(
        self,
        *,
        notice_id: str,
        owner: str,
        profile: Recipient,
        tmpl: Template,
        category: Category,
        chain: bool,
        after_ms: int,
        order: list[str],
        entries: dict[str, NoticeEntry],
        locales: dict[str, str],
        records: list[tuple[Notification, str]],
        held: int,
        created: int,
        idempotency_key: str | None,
        task_id: str | None,
    ) -> Notice:
        k = self.keys
        publisher = self.notifier.publisher
        shares = publisher.shares_store
        messages: dict[str, tuple[str, str]] = {}
        if shares:
            for record, _ in records:
                if not record.lease_until_ms:
                    messages[record.id] = publisher.message(record.id, record.channel, record.level)
        if task_id is not None:
            idem_key = k.task(task_id)
        elif idempotency_key is not None:
            idem_key = k.notice_idempotency(owner, idempotency_key)
        else:
            idem_key = None
        ttl_ms = int(self.runtime.settings.idempotency_ttl_s * 1000) if idem_key else 0
        header = {
            "owner": owner,
            "rcpt": profile.id,
            "tmpl": tmpl.name,
            "ver": str(tmpl.version),
            "cat": category.name,
            "mode": "chain" if chain else "all",
            "ct": str(created),
            "held": str(held),
            "order": json.dumps(order),
            "locales": json.dumps(locales),
            **{f"ch:{e.channel}": f"{e.state} " for e in entries.values()},
        }
        keys = [
            k.recipient(owner, profile.id),
            k.notice(notice_id),
            k.recipient_log(owner, profile.id),
            idem_key or k.notice(notice_id),
            k.all_index,
            k.user_index(records[0][0].creator),
            k.waiting_index,
            k.delayed,
            k.metrics,
            k.status_index(1),
            k.status_index(-1),
        ]
        args: list[Any] = [
            notice_id,
            created,
            ttl_ms,
            "chain" if chain else "all",
            category.name,
            "1" if category.enforced else "0",
            after_ms,
            int(self.runtime.settings.notice_keep_s * 1000),
            len(header),
            *[x for pair in header.items() for x in pair],
        ]
        for record, default in records:
            message = messages.get(record.id)
            keys += [k.record(record.id), message[0] if message else k.record(record.id), k.suppressed(record.channel.value)]
            fields = to_hash(record)
            args += [
                record.channel.value,
                record.id,
                record.target,
                default,
                record.level,
                record.lease_until_ms,
                message[1] if message else "",
                added_field(record.channel.value, record.provider),
                len(fields),
                *[x for pair in fields.items() for x in pair],
            ]
        with translate_errors(self.runtime.redis):
            answer = self._script(keys=keys, args=args)
        if answer[0] == 0:
            return self.get(str(answer[1]), owner=owner, repeated=True)
        if answer[0] == -1:
            raise NotFound(f"no recipient {shown(profile.id)}", code="e.cmd.noti.rcpt.not_found")
        states = answer[1:]
        queued: list[Notification] = []
        for i, (record, _) in enumerate(records):
            state, made = str(states[2 * i]), str(states[2 * i + 1])
            reason = ""
            if state.startswith("suppressed:"):
                state, reason = "suppressed", state.split(":", 1)[1]
            channel = record.channel.value
            entries[channel] = NoticeEntry(channel, state, made or None, reason, locales.get(channel))
            if state == "queued":
                queued.append(record)
        if shares:
            publisher.published(messages[r.id] for r in queued if r.id in messages)
        elif queued:
            publisher.publish([(r.id, r.channel, r.level) for r in queued])
        return Notice(
            id=notice_id,
            owner=owner,
            recipient=profile.id,
            template=tmpl.name,
            version=tmpl.version,
            category=category.name,
            mode="chain" if chain else "all",
            created_ms=created,
            held_until_ms=held,
            entries=tuple(entries[c] for c in order if c in entries),
        )

    def get(self, notice_id: str, *, owner: str | None = None, user: str | None = None, repeated: bool = False) -> Notice:
        """One notice the acting user may see (another user's is answered as a missing one).

        Raises:
            NotFound: ``e.cmd.noti.notice.not_found``.
        """
        if not is_notice_id(notice_id):
            raise NotFound(f"no notice {shown(notice_id)}", code="e.cmd.noti.notice.not_found")
        with translate_errors(self.runtime.redis):
            data = self.runtime.redis.hgetall(self.keys.notice(notice_id))
        if not data:
            raise NotFound(f"no notice {shown(notice_id)}", code="e.cmd.noti.notice.not_found")
        notice = Notice.from_hash(notice_id, data, repeated=repeated)
        if owner is None:
            if not self.notifier.user(user).can_touch(notice.owner):
                raise NotFound(f"no notice {shown(notice_id)}", code="e.cmd.noti.notice.not_found")
        elif notice.owner != owner:
            raise NotFound(f"no notice {shown(notice_id)}", code="e.cmd.noti.notice.not_found")
        return notice

