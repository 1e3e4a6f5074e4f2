"""A ``notify(recipient=…)`` call's arguments, checked before anything is read or written:
:func:`parse_request` makes the :class:`NoticeRequest` :mod:`noti.recipients.notices` works
from (split from it to keep both short)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from noti.core.delay import iso_time, validate_idempotency_key
from noti.core.record import parse_channel, parse_level
from noti.errors import InvalidInput, NotiError
from noti.inputs import duration_ms, integer, plain_object, shown
from noti.recipients.categories import GENERAL, category_name
from noti.recipients.locales import parse_locale
from noti.recipients.profile import recipient_id
from noti.recipients.templates import TEMPLATE_NAME

if TYPE_CHECKING:
    from noti.core.keys import Keys
    from noti.sending.notifier import Notifier

__all__ = [
    "CHAIN_MAX",
    "DATA_MAX_BYTES",
    "DIGEST_MAX",
    "NoticeRequest",
    "parse_digest",
    "parse_request",
    "refused",
]

#: Largest ``data`` a notice takes (its JSON, UTF-8).
DATA_MAX_BYTES = 64 * 1024
#: Longest chain or channel list.
CHAIN_MAX = 8


def refused(code: str, message: str) -> InvalidInput:
    """The refusal ``e.cmd.noti.notify.`` + ``code``: ``e.cmd.noti.notify.badtemplate``,
    ``e.cmd.noti.notify.badchannels`` here, ``e.cmd.noti.notify.baddigest`` here and in
    :mod:`noti.recipients.digests`, ``e.cmd.noti.notify.nochannel`` in
    :mod:`noti.recipients.notices`, ``e.cmd.noti.notify.baditem`` in
    :mod:`noti.recipients.bulk` (written out so the error reference lists them)."""
    return InvalidInput(message, code=f"e.cmd.noti.notify.{code}")


#: Template references already checked (a process names few templates; kept to 1,024).
_REFS: dict[str, tuple[str, int | None]] = {}


def _template_ref(value: object) -> tuple[str, int | None]:
    """``name`` or ``name@version``: the name a template name (checked before it names a key:
    a lone surrogate cannot even be sent to Redis), the version ASCII digits, 1 to 10**9."""
    if type(value) is str:
        known = _REFS.get(value)
        if known is not None:
            return known
    ref = _checked_ref(value)
    if len(_REFS) >= 1024:
        _REFS.clear()
    _REFS[value] = ref  # type: ignore[index]
    return ref


def _checked_ref(value: object) -> tuple[str, int | None]:
    if not isinstance(value, str) or not value:
        raise refused(
            "badtemplate", f"template is a template name (name or name@version), got {shown(value)}"
        )
    name, at, version = value.partition("@")
    if not TEMPLATE_NAME.fullmatch(name):
        raise refused(
            "badtemplate",
            f"{shown(value)}: a template name is a letter or digit then up to 127 of A-Z a-z 0-9 _ . -",
        )
    if not at:
        return name, None
    if not (version.isascii() and version.isdigit() and len(version) <= 10) or not 1 <= int(version) <= 10**9:
        raise refused("badtemplate", f"{shown(value)}: a version is a whole number from 1")
    return name, int(version)


def _channel_list(value: object, what: str) -> list[str]:
    if isinstance(value, str):
        value = [v for v in value.replace(",", " ").split() if v]
    if not isinstance(value, Sequence) or not value or len(value) > CHAIN_MAX:
        raise refused("badchannels", f"{what} is a list of 1-{CHAIN_MAX} channels, got {shown(value)}")
    out: list[str] = []
    for item in value:
        if not isinstance(item, str):
            raise refused("badchannels", f"{what}: {shown(item)} is not a channel")
        try:
            name = parse_channel(item).value
        except NotiError:
            raise refused(
                "badchannels", f"{what}: {shown(item)} is not a channel (see `noti channels`)"
            ) from None
        if name in out:
            raise refused("badchannels", f"{what} names {name} twice")
        out.append(name)
    return out


#: Events a digest window keeps in full unless the call says (``digest_max``), and the most it
#: may say; the shortest and the longest window (seconds) (:mod:`noti.recipients.digests`).
DIGEST_MAX, DIGEST_MAX_LIMIT = 50, 1000
_DIGEST_KEY = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")
_DAILY = re.compile(r"daily\s+(?:at\s+)?([0-9]{1,2}):([0-9]{2})")


def parse_digest(digest: object, window: object, digest_max: object) -> tuple[str, int, int, str | None]:
    """``(key, window ms, events kept, time of day)`` of a digest event's arguments: a key (1-64
    lower-case letters, digits or ``_ . -``), a window (seconds, or text such as ``"90s"``,
    ``"10m"``, ``"2h"``, ``"1d"``; 1 s to 7 days; or ``"daily 09:00"``: due at that time in the
    recipient's timezone, window ms 0), ``digest_max`` (1 to 1,000; default 50).

    Raises:
        InvalidInput: ``e.cmd.noti.notify.baddigest``.
    """
    if not isinstance(digest, str) or not _DIGEST_KEY.fullmatch(digest):
        raise refused(
            "baddigest",
            f"digest {shown(digest)} is a key of 1-64 lower-case letters, digits or _ . - "
            "starting with a letter or digit (given with a window)",
        )
    daily = _DAILY.fullmatch(window.strip()) if isinstance(window, str) else None
    if daily is not None:
        hour, minute = int(daily.group(1)), int(daily.group(2))
        if hour > 23 or minute > 59:
            raise refused("baddigest", f"a daily window is at HH:MM on a 24-hour clock, got {shown(window)}")
        window_ms, at = 0, f"{hour:02d}:{minute:02d}"
    else:
        window_ms, at = duration_ms(window, what="window", code="e.cmd.noti.notify.baddigest"), None
    kept = DIGEST_MAX
    if digest_max is not None:
        kept = integer(
            digest_max,
            what="digest_max",
            code="e.cmd.noti.notify.baddigest",
            minimum=1,
            maximum=DIGEST_MAX_LIMIT,
            digits=True,
        )
    return digest, window_ms, kept, at


def _dedupe_key(
    dedupe: object,
    template: str,
    version: int | None,
    category: str,
    values: dict[str, Any],
    wanted: list[str] | None,
    chain: bool,
) -> str:
    """The deduplication key of a call: the caller's (an idempotency key's rules), or with
    ``dedupe=True`` ``c:`` and a digest of what the call would send (template, category,
    channels, data)."""
    if dedupe is True:
        content = json.dumps(
            [template, version, category, wanted, chain, values], sort_keys=True, separators=(",", ":")
        )
        return "c:" + hashlib.sha256(content.encode()).hexdigest()[:32]
    if not isinstance(dedupe, str) or isinstance(dedupe, bool):
        raise refused("baddedupe", f"dedupe is a key or true (the content's own), got {shown(dedupe)}")
    try:
        return "k:" + validate_idempotency_key(dedupe)
    except InvalidInput as exc:
        raise refused("baddedupe", f"dedupe: {exc.message}") from None


@dataclass(frozen=True, slots=True)
class NoticeRequest:
    """A notify call's inputs, checked (no I/O yet)."""

    owner: str
    rid: str
    template: str
    version: int | None
    category: str
    values: dict[str, Any]
    wanted: list[str] | None
    chain: bool
    after_ms: int
    locale: str | None
    lv: object
    user: str | None
    delay: float | None
    eta: datetime | None
    idempotency_key: str | None
    task_id: str | None
    level_cap: int | None
    providers_allowed: frozenset[str] | None
    #: A digest event (:mod:`noti.recipients.digests`): the digest's key, its window (ms)
    #: and how many events a window keeps in full.
    digest: str | None = None
    window_ms: int = 0
    digest_max: int = 0
    #: A window due at this time of day in the recipient's timezone ("HH:MM"; ``window_ms`` 0),
    #: and whether the window's first event goes at once (a back-off window).
    digest_at: str | None = None
    backoff: bool = False
    #: Deduplication: the key (the caller's, or ``c:`` and a digest of the content) and how
    #: long a call with it answers the first one's id (ms).
    dedupe: str | None = None
    dedupe_ms: int = 0
    #: Set by noti only (a digest window's notice): the notice's id, and the Redis key that
    #: makes it once.
    notice_id: str | None = None
    made_key: str | None = None

    def window_doc(
        self,
        *,
        user: str,
        opened: int,
        digest: str | None = None,
        template: str | None = None,
        channel: str | None = None,
        level: int | None = None,
    ) -> dict[str, Any]:
        """What a digest window's notice is made with (JSON-ready): this call's template,
        channels or chain, locale, level and limits, as ``user``; or, for the digest a
        category's throttle puts what is over it into, ``digest``, ``template`` and ``level``
        on ``channel`` alone."""
        chain = self.wanted if self.chain and channel is None else None
        tmpl = self.template if self.version is None else f"{self.template}@{self.version}"
        return {
            "digest": digest or self.digest,
            "owner": self.owner,
            "rcpt": self.rid,
            "tmpl": template or tmpl,
            "cat": self.category,
            "channels": [channel] if channel is not None else None if self.chain else self.wanted,
            "chain": chain,
            "after_ms": self.after_ms if chain else 0,
            "locale": self.locale,
            "lv": level if level is not None else parse_level(self.lv),
            "user": user,
            "level_cap": self.level_cap,
            "providers": sorted(self.providers_allowed) if self.providers_allowed is not None else None,
            "opened": opened,
        }

    def once_key(self, keys: Keys, idempotency_ttl_ms: int) -> tuple[str | None, int]:
        """The Redis key under which this call is made once, and its time-to-live in ms
        (``(None, 0)``: none): a digest window's own key, else the deduplication key (per
        recipient), else the Celery task's id, else the idempotency key (per owner)."""
        if self.made_key is not None:
            return self.made_key, idempotency_ttl_ms
        if self.dedupe is not None:
            return keys.dedupe(self.owner, self.rid, self.dedupe), self.dedupe_ms
        if self.task_id is not None:
            return keys.task(self.task_id), idempotency_ttl_ms
        if self.idempotency_key is not None:
            return keys.notice_idempotency(self.owner, self.idempotency_key), idempotency_ttl_ms
        return None, 0


def parse_request(
    notifier: Notifier,
    *,
    recipient: object = None,
    template: object = None,
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
    eta: datetime | str | None = None,
    idempotency_key: str | None = None,
    task_id: str | None = None,
    level_cap: int | None = None,
    providers_allowed: frozenset[str] | None = None,
    digest: object = None,
    window: object = None,
    digest_max: object = None,
    backoff: object = None,
    dedupe: object = None,
    dedupe_window: object = None,
    **unknown: object,
) -> NoticeRequest:
    """A notify call's arguments checked, before anything is read or written (see
    :meth:`noti.recipients.notices.Notices.notify`).

    Raises:
        InvalidInput: ``e.cmd.noti.notify.*``, a bad recipient id, locale, category name,
        data, idempotency key; ``e.cmd.noti.notify.badfield``: an argument notify does not
        take (a channel's field such as ``text`` or ``provider``: the template gives those).
        PermissionDenied: ``owner`` names another user.
    """
    if unknown:
        raise InvalidInput(
            f"notify(recipient=…) does not take {', '.join(shown(k) for k in sorted(unknown)[:5])} "
            "(the template gives the channels' fields)",
            code="e.cmd.noti.notify.badfield",
        )
    acting = notifier.user(user)
    scoped = acting.scope(owner, code="e.cmd.noti.rcpt.nopvg", action="notify recipients")
    name, version = _template_ref(template)
    values: dict[str, Any] = {}
    if data is not None:
        values = plain_object(data, what="data", code="e.cmd.noti.notify.baddata", max_bytes=DATA_MAX_BYTES)
    if channels is not None and chain is not None:
        raise refused("badchannels", "give channels or a chain, not both")
    wanted = None
    if chain is not None:
        wanted = _channel_list(chain, "chain")
    elif channels is not None:
        wanted = _channel_list(channels, "channels")
    after_ms = 0
    if after_s is not None:
        from noti.delivery.fallback import AFTER_MAX_S
        from noti.inputs import finite_number

        seconds = finite_number(
            after_s, what="after_s", code="e.cmd.noti.notify.badafter", above=0, maximum=AFTER_MAX_S
        )
        after_ms = int(seconds * 1000)
    digest_key, window_ms, kept, daily = None, 0, 0, None
    if digest is not None or window is not None or digest_max is not None or backoff is not None:
        digest_key, window_ms, kept, daily = parse_digest(digest, window, digest_max)
        if backoff is not None and not isinstance(backoff, bool):
            raise refused("baddigest", f"backoff is true or false, got {shown(backoff)}")
        if delay is not None or eta is not None:
            raise refused("baddigest", "a digest event goes into its window now: give no delay or eta")
    dedupe_key, dedupe_ms = None, 0
    if dedupe is not None or dedupe_window is not None:
        if idempotency_key is not None:
            raise refused("baddedupe", "give an idempotency_key or dedupe, not both")
        cat = GENERAL if category is None else category_name(category)
        dedupe_key = _dedupe_key(dedupe, name, version, cat, values, wanted, chain is not None)
        dedupe_ms = duration_ms(
            "1h" if dedupe_window is None else dedupe_window,
            what="dedupe_window",
            code="e.cmd.noti.notify.baddedupe",
        )
    return NoticeRequest(
        owner=scoped or acting.name,
        rid=recipient_id(recipient),
        template=name,
        version=version,
        category=GENERAL if category is None else category_name(category),
        values=values,
        wanted=wanted,
        chain=chain is not None,
        after_ms=after_ms,
        locale=parse_locale(locale) if locale is not None else None,
        lv=lv,
        user=user,
        delay=delay,
        eta=iso_time(eta) if isinstance(eta, str) else eta,
        idempotency_key=validate_idempotency_key(idempotency_key) if idempotency_key is not None else None,
        task_id=validate_idempotency_key(task_id) if task_id is not None else None,
        level_cap=level_cap,
        providers_allowed=providers_allowed,
        digest=digest_key,
        window_ms=window_ms,
        digest_max=kept,
        digest_at=daily,
        backoff=backoff is True,
        dedupe=dedupe_key,
        dedupe_ms=dedupe_ms,
    )
