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

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from noti.core.delay import due_ms
from noti.core.record import Notification, new_id, now_ms, parse_level
from noti.errors import InvalidConfig, NotFound, NotiError, StoreUnavailable
from noti.inputs import shown
from noti.recipients.notice import Notice, NoticeEntry, is_notice_id
from noti.recipients.notify_call import NotifyCalls, _Prepared
from noti.recipients.quiet import QuietPolicy
from noti.recipients.request import NoticeRequest, parse_request, refused
from noti.recipients.snapshot import Snapshot, Snapshots
from noti.recipients.store import NOTICE_MARK, RecipientStore
from noti.recipients.templates import TemplateStore
from noti.recipients.unsubscribe import unsubscribe_url
from noti.redis.conn import load_script
from noti.redis.counters import field
from noti.redis.outage import translate_errors
from noti.redis.pipelines import HeldConnection

if TYPE_CHECKING:
    from noti.sending.notifier import Notifier

__all__ = ["Notice", "NoticeEntry", "Notices"]


#: ``notify.lua``'s answer when what a notice was made from changed; and how often a notice
#: is made again from the fresh values before the call gives up.
STALE, STALE_TRIES = -2, 5
#: What became of a channel that got no record: no address in the profile, no variant in
#: the template (neither a suppression: nothing was asked of the recipient).
NO_ADDRESS, NO_TEMPLATE = "noaddress", "notemplate"


class DigestSink(Protocol):
    """Where a digest event goes (:class:`noti.recipients.digests.Digests`, which registers
    itself on the notices it makes its windows' notices through)."""

    def add(self, request: NoticeRequest, snapshot: Snapshot) -> Notice: ...


class Notices:
    """Notify recipients through one notifier (its runtime, builder and publisher)."""

    def __init__(self, notifier: Notifier) -> None:
        self.notifier = notifier
        runtime = notifier.runtime
        self.runtime = runtime
        self.keys = runtime.keys
        self.recipients = RecipientStore(runtime.redis, runtime.keys)
        self.templates = TemplateStore(runtime.redis, runtime.keys)
        self.snapshots = Snapshots(runtime.keys, self.templates)
        settings = runtime.settings
        self.quiet = QuietPolicy(
            settings.quiet_hours, settings.recipient_timezone, settings.quiet_bypass_level
        )
        self._script = load_script(runtime.redis, "notify")
        # the hot path's one command on a connection kept between calls (as notify() does)
        self._held = HeldConnection(runtime.redis)
        self.calls = NotifyCalls(notifier)
        self.digests: DigestSink | None = None

    # --- the calls --------------------------------------------------------------------------

    def notify(self, **kwargs: Any) -> Notice:
        """Notify one recipient from a template (see the module); the notice.

        Keyword arguments: ``recipient``, ``template`` (``name`` or ``name@version``),
        ``data``, ``category``, ``channels`` or ``chain`` (with ``after_s``), ``locale``,
        ``lv``, ``user``, ``owner`` (root members: another user's recipient), ``delay`` /
        ``eta``, ``idempotency_key``, ``task_id``, ``level_cap``, ``providers_allowed``.

        Raises:
            InvalidInput: bad input (``e.cmd.noti.notify.*``, the template's
                ``e.cmd.noti.tmpl.missingvar`` …, a channel's own checks); nothing stored.
            NotFound: no such recipient, template or category.
            PermissionDenied: ``owner`` names another user and the acting one is no root member.
            StoreUnavailable: Redis cannot be reached.
        """
        return self._notify(kwargs, lean=False)

    def notify_id(self, **kwargs: Any) -> str:
        """:meth:`notify`, answering the notice's id only (``noti.notify``): what became of
        each channel is not read back into a :class:`Notice` (a few µs of a call)."""
        return self._notify(kwargs, lean=True).id

    def _notify(self, kwargs: dict[str, Any], *, lean: bool) -> Notice:
        request = parse_request(self.notifier, **kwargs)
        snapshot = self.snapshots.kept(request) or self._read(request)
        if request.digest is not None:
            return self.digest_sink().add(request, snapshot)
        return self._make(request, snapshot, lean=lean)

    def digest_sink(self) -> DigestSink:
        """The digests these notices' digest events go into.

        Raises:
            InvalidConfig: none registered (a :class:`noti.recipients.digests.Digests` made on
                these notices registers itself).
        """
        if self.digests is None:
            raise InvalidConfig("digest events need noti.recipients.digests.Digests on these notices")
        return self.digests

    def _make(self, request: NoticeRequest, snapshot: Snapshot, *, lean: bool = False) -> Notice:
        """Make the notice from ``snapshot``, again from fresh values while ``notify.lua``
        finds them changed (up to :data:`STALE_TRIES` times).

        Raises:
            StoreUnavailable: they kept changing.
        """
        [made] = self.make_all([(request, snapshot)], tries=STALE_TRIES, lean=lean)
        if isinstance(made, NotiError):
            raise made
        return made

    def make_all(
        self,
        pending: Sequence[tuple[NoticeRequest, Snapshot | None]],
        *,
        tries: int,
        lean: bool,
        per_call: int = 100,
    ) -> list[Notice | NotiError]:
        """Make notices (each from its snapshot, or what this process keeps, or a read),
        ``per_call`` to a ``notify.lua`` call, again from the fresh values those found changed
        answer, ``tries`` times at most (then :meth:`kept_changing`); per notice what it made,
        or the error refusing it (a bulk call's notices are refused alone)."""
        out: list[Notice | NotiError] = [self.kept_changing(r) for r, _ in pending]
        todo = [(i, request, snapshot) for i, (request, snapshot) in enumerate(pending)]
        for _ in range(tries):
            ready: list[tuple[int, NoticeRequest, _Prepared]] = []
            for i, request, snapshot in todo:
                try:
                    snapshot = snapshot or self.snapshots.kept(request) or self._read(request)
                    ready.append((i, request, self._prepare(request, snapshot)))
                except NotiError as exc:
                    out[i] = exc
            todo = []
            for start in range(0, len(ready), per_call):
                chunk = ready[start : start + per_call]
                now = max(p.notice.created_ms for _, _, p in chunk)
                keys, args = self.calls.call_of([p for _, _, p in chunk], now)
                with translate_errors(self.runtime.redis):
                    answers = self._held.call_script(self._script, keys, args)
                for (i, request, prepared), answer in zip(chunk, answers, strict=True):
                    try:
                        if answer[0] == STALE:  # the fresh values are kept: the next round's
                            self._fresh(request, answer)
                            todo.append((i, request, None))
                        else:
                            out[i] = self._finish(prepared, answer, lean=lean)
                    except NotiError as exc:
                        out[i] = exc
            if not todo:
                break
        return out

    @staticmethod
    def kept_changing(request: NoticeRequest) -> StoreUnavailable:
        """The error of a notice whose inputs changed :data:`STALE_TRIES` times while it was made."""
        return StoreUnavailable(
            f"recipient {request.rid}, template {request.template} or category {request.category} "
            f"changed {STALE_TRIES} times while the notice was made: try again"
        )

    def _read(self, request: NoticeRequest) -> Snapshot:
        """The snapshot of a request read from Redis (one round trip)."""
        with translate_errors(self.runtime.redis):
            pipe = self.runtime.redis.pipeline(transaction=False)
            self.snapshots.queue_reads(pipe, request)
            profile, stamp, category = pipe.execute()
        return self.snapshots.from_reads(request, profile, stamp, category)

    def _fresh(self, request: NoticeRequest, answer: Any) -> Snapshot:
        """The snapshot from the fresh values ``notify.lua`` answered with (``-2``)."""
        _, doc, version, current, ct, category = answer
        return self.snapshots.from_reads(request, (doc, version), (current, ct), category)

    # --- the steps --------------------------------------------------------------------------

    def _prepare(self, request: NoticeRequest, snapshot: Snapshot) -> _Prepared:
        """The notice's records built from ``snapshot`` and its ``notify.lua`` call written.

        Raises:
            InvalidInput: rendering or building a record refused.
        """
        profile, category, tmpl = snapshot.profile, snapshot.category, snapshot.template
        owner = request.owner
        settings = self.runtime.settings
        created = now_ms()
        notice_id = request.notice_id or NOTICE_MARK + new_id(created)
        order = request.wanted if request.wanted is not None else list(tmpl.channels)
        entries: dict[str, NoticeEntry] = {}
        built: list[tuple[Notification, str]] = []
        locales: dict[str, str] = {}
        base = {**request.values, "recipient": snapshot.view}
        asked = request.locale or profile.locale
        enforced = category.enforced
        rkey = self.keys.recipient(owner, profile.id)
        level = self.notifier.user(request.user).cap_level(parse_level(request.lv))
        if request.level_cap is not None:
            level = min(level, request.level_cap)
        # quiet hours are read at the time the notice is due (a delay or an eta may land in them)
        due = due_ms(delay=request.delay, eta=request.eta, now_ms=created)
        held = self.quiet.held_until(
            profile.quiet_hours,
            profile.timezone,
            critical=category.critical,
            level=level,
            at_ms=max(due, created),
        )
        for channel in order:
            address = profile.primary(channel)
            if address is None:
                entries[channel] = NoticeEntry(channel, NO_ADDRESS)
                continue
            loc = tmpl.locale_for(channel, asked)
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
            default = "1" if category.on_by_default(channel) else "0"
            record = self.notifier.build(
                channel,
                address,
                lv=request.lv,
                user=request.user,
                delay=request.delay,
                eta=request.eta,
                level_cap=request.level_cap,
                providers_allowed=request.providers_allowed,
                not_before_ms=held,
                record_extra={
                    "parent": notice_id,
                    "recipient": profile.id,
                    "category": category.name,
                    "preference": f"{rkey} {category.name} {channel} {default}" if enforced else None,
                    # a root member notifying another user's recipient: the records are the owner's
                    "creator": owner,
                },
                **fields,
            )
            built.append((record, default))
        if not built:
            raise refused(
                "nochannel",
                f"recipient {profile.id} cannot be reached with template {tmpl.name}: "
                + ", ".join(f"{e.channel}: {e.state}" for e in entries.values()),
            )
        after_ms = request.after_ms
        if request.chain and not after_ms:
            after_ms = int(settings.channel(built[0][0].channel.value).fallback_after_s * 1000)
        records = built
        notice = Notice(
            id=notice_id,
            owner=owner,
            recipient=profile.id,
            template=tmpl.name,
            version=tmpl.version,
            category=category.name,
            mode="chain" if request.chain else "all",
            created_ms=created,
            held_until_ms=held,
        )
        return self.calls.part(notice, request, snapshot, order, entries, locales, records, after_ms)

    def _finish(self, prepared: _Prepared, answer: Any, *, lean: bool = False) -> Notice:
        """The notice ``notify.lua`` answered for; its queued records' messages announced (or
        published, when the broker is not the store's Redis). ``lean``: the notice's id is
        all the caller reads (a bulk call, ``noti.notify``): its entries are not made.

        Raises:
            NotFound: the recipient was erased meanwhile.
        """
        notice = prepared.notice
        if answer[0] == 0:
            if prepared.dedupe_category is not None:
                with translate_errors(self.runtime.redis):
                    self.runtime.redis.hincrby(
                        self.keys.metrics, field("deduplicated", prepared.dedupe_category), 1
                    )
            try:
                return self.get(str(answer[1]), owner=notice.owner, repeated=True)
            except NotFound:  # a digest window that has not closed yet (a deduplication key's)
                return replace(notice, id=str(answer[1]), mode="digest", repeated=True)
        if answer[0] == -1:
            raise NotFound(f"no recipient {shown(notice.recipient)}", code="e.cmd.noti.rcpt.not_found")
        states = answer[1:]
        entries = prepared.entries
        queued: list[Notification] = []
        for i, record in enumerate(prepared.records):
            state = states[2 * i]
            if state == "queued":
                queued.append(record)
            if lean:
                continue
            state, made, reason = str(state), str(states[2 * i + 1]), ""
            if state.startswith("suppressed:"):
                state, reason = "suppressed", state.split(":", 1)[1]
            channel = record.channel.value
            entries[channel] = NoticeEntry(
                channel, state, made or None, reason, prepared.locales.get(channel)
            )
        publisher = self.notifier.publisher
        if publisher.shares_store:
            messages = prepared.messages
            publisher.published(messages[r.id] for r in queued if r.id in messages)
        elif queued:
            publisher.publish([(r.id, r.channel, r.level) for r in queued])
        if lean:
            return notice
        return Notice(  # not dataclasses.replace: it costs a notice ~5 µs more
            notice.id,
            notice.owner,
            notice.recipient,
            notice.template,
            notice.version,
            notice.category,
            notice.mode,
            notice.created_ms,
            notice.held_until_ms,
            tuple(entries[c] for c in prepared.order if c in entries),
        )

    def get(
        self, notice_id: str, *, owner: str | None = None, user: str | None = None, repeated: bool = False
    ) -> Notice:
        """One notice the acting user may see (another user's is answered as a missing one).

        Raises:
            NotFound: ``e.cmd.noti.notice.not_found``.
        """
        missing = NotFound(f"no notice {shown(notice_id)}", code="e.cmd.noti.notice.not_found")
        if not is_notice_id(notice_id):
            raise missing
        with translate_errors(self.runtime.redis):
            data = self.runtime.redis.hgetall(self.keys.notice(notice_id))
        if not data:
            raise missing
        notice = Notice.from_hash(notice_id, {str(k): str(v) for k, v in data.items()}, repeated=repeated)
        if owner is None:
            if not self.notifier.user(user).can_touch(notice.owner):
                raise missing
        elif notice.owner != owner:
            raise missing
        return notice
