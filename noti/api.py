"""The Python API applications call (Django, Flask, scripts) and the CLI is built on.

Every call takes the acting ``user`` (default: ``NOTI_USER``, else the OS user) and enforces
the rules of :mod:`noti.users`; the CLI adds nothing to them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from noti.errors import InvalidInput, NotFound, PermissionDenied
from noti.providers import Message
from noti.queues import Publisher
from noti.record import (
    Notification,
    Status,
    new_id,
    now_ms,
    parse_channel,
    parse_level,
    validate_fields,
    validate_target,
)
from noti.runtime import Runtime, get_runtime
from noti.sender import Sender, SendResult
from noti.store import ClaimState
from noti.users import User, resolve_user

__all__ = [
    "Notifier",
    "clean",
    "clean_done",
    "delete",
    "get",
    "list_notifications",
    "notify",
    "notify_email",
    "notify_sms",
    "notify_webhook",
    "notify_weixin",
    "send",
]

SEND_TIMEOUT_DEFAULT_S = 10.0
SEND_TIMEOUT_MAX_S = 600.0
_SEND_PAGE = 200


class Notifier:
    """The operations of noti over one runtime and one Celery publisher."""

    def __init__(self, runtime: Runtime, publisher: Publisher) -> None:
        self.runtime = runtime
        self.publisher = publisher

    def user(self, name: str | None) -> User:
        return resolve_user(self.runtime.settings, name)

    # --- adding -------------------------------------------------------------------------------

    def build(
        self,
        type: str,  # noqa: A002 - the seed's word
        target: str,
        *,
        lv: object = 1,
        user: str | None = None,
        provider: str | None = None,
        retry_max: int | None = None,
        **fields: Any,
    ) -> Notification:
        """A validated, not yet stored record.

        Raises:
            InvalidInput: any field is missing or malformed (nothing is stored).
            InvalidConfig: a named provider exists but its options are invalid.
        """
        acting = self.user(user)
        channel = parse_channel(type)
        clean_target = validate_target(channel, target)
        clean_fields = validate_fields(channel, fields)
        level = acting.cap_level(parse_level(lv))
        settings = self.runtime.settings
        if retry_max is None:
            retry_max = settings.channel(channel.value).retry_max or settings.retry_max
        elif isinstance(retry_max, bool) or not isinstance(retry_max, int) or not 1 <= retry_max <= 100:
            raise InvalidInput(
                f"retry_max must be an integer from 1 to 100, got {retry_max!r}",
                code="e.cmd.noti.add.badretry",
            )
        if provider is not None and (not isinstance(provider, str) or not provider.strip()):
            raise InvalidInput("provider must be a non-empty name", code="e.cmd.noti.add.noprovider")
        created = now_ms()
        record = Notification(
            id=new_id(created),
            channel=channel,
            target=clean_target,
            creator=acting.name,
            level=level,
            retry_max=retry_max,
            created_ms=created,
            modified_ms=created,
            fields=clean_fields,
            provider=provider.strip() if provider else None,
        )
        message = Message.from_record(record)
        for chosen in self.runtime.providers.chain(channel, record.provider):
            chosen.check(message)
        return record

    def add(
        self,
        type: str,  # noqa: A002
        target: str,
        *,
        idempotency_key: str | None = None,
        **kwargs: Any,
    ) -> Notification:
        """Validate, store and queue one notification; the stored record.

        With ``idempotency_key``, a second call with the same key (within
        ``NOTI_IDEMPOTENCY_TTL_S``) stores nothing and returns the first call's record.

        Raises:
            InvalidInput: bad input; nothing is stored.
            StoreUnavailable: Redis cannot be reached.
        """
        record = self.build(type, target, **kwargs)
        store = self.runtime.store
        if idempotency_key is not None:
            if not isinstance(idempotency_key, str) or not idempotency_key or len(idempotency_key) > 200:
                raise InvalidInput(
                    "idempotency_key must be a non-empty string of at most 200 characters",
                    code="e.cmd.noti.add.badkey",
                )
            created, record_id = store.create_once(
                record, idempotency_key, ttl_s=self.runtime.settings.idempotency_ttl_s
            )
            if not created:
                existing = store.find(record_id)
                if existing is not None:
                    return existing
                raise NotFound(
                    f"idempotency key {idempotency_key!r} names record {record_id}, which was deleted",
                    code="e.cmd.noti.add.keyused",
                )
        else:
            store.create(record)
        self.publisher.publish([(record.id, record.channel, record.level)])
        return record

    def notify(self, type: str, target: str, **kwargs: Any) -> str:  # noqa: A002
        """:meth:`add`, returning only the id."""
        return self.add(type, target, **kwargs).id

    # --- reading ------------------------------------------------------------------------------

    def get(self, record_id: str, *, user: str | None = None) -> Notification:
        """One record the acting user may see.

        Raises:
            NotFound, PermissionDenied (``e.cmd.noti.get.nopvg``).
        """
        record = self.runtime.store.get(record_id)
        acting = self.user(user)
        if not acting.can_touch(record.creator):
            raise PermissionDenied(
                f"{acting.name} may not read notifications of {record.creator}", code="e.cmd.noti.get.nopvg"
            )
        return record

    def select(
        self,
        *,
        user: str | None = None,
        creator: str | None = None,
        status: Status | int | None = None,
        limit: int | None = None,
    ) -> list[Notification]:
        """Records newest first; a non-root user sees only their own.

        Raises:
            PermissionDenied: ``e.cmd.noti.list.nopvg`` when a non-root user names another creator.
            InvalidInput: an unknown status or a negative limit.
        """
        acting = self.user(user)
        if creator is not None and not acting.can_touch(creator):
            raise PermissionDenied(
                f"only root members list other users' notifications ({acting.name} asked for {creator})",
                code="e.cmd.noti.list.nopvg",
            )
        if creator is None and not acting.is_root:
            creator = acting.name
        st = _status(status)
        if limit is not None and limit <= 0:
            limit = None
        return self.runtime.store.select(creator=creator, status=st, limit=limit)

    # --- removing -----------------------------------------------------------------------------

    def delete(self, record_id: str, *, user: str | None = None) -> Notification:
        """Delete one record: its creator or a root member may.

        Raises:
            NotFound: ``e.cmd.noti.del.not_a_msg``.
            PermissionDenied: ``e.cmd.noti.del.nopvg``.
        """
        store = self.runtime.store
        record = store.find(record_id)
        if record is None:
            raise NotFound(f"{record_id!r} is not a notification", code="e.cmd.noti.del.not_a_msg")
        acting = self.user(user)
        if not acting.can_touch(record.creator):
            raise PermissionDenied(
                f"{acting.name} may not delete notifications of {record.creator}", code="e.cmd.noti.del.nopvg"
            )
        removed = store.delete(record_id)
        if removed is None:
            raise NotFound(f"{record_id!r} is not a notification", code="e.cmd.noti.del.not_a_msg")
        return removed

    def clean(
        self, *, user: str | None = None, keep_s: float | None = None, limit: int | None = None
    ) -> list[Notification]:
        """Remove done records older than ``keep_s`` (default: the keep window); root only.

        Raises:
            PermissionDenied: ``e.cmd.noti.clean.nopvg``.
        """
        self.user(user).require_root("e.cmd.noti.clean.nopvg", "clean notifications")
        return self.clean_done(keep_s=keep_s, limit=limit)

    def clean_done(self, *, keep_s: float | None = None, limit: int | None = None) -> list[Notification]:
        """:meth:`clean` without the permission check, for the beat job."""
        if keep_s is None:
            keep_s = self.runtime.settings.keep_done_s
        if keep_s < 0:
            raise InvalidInput("keep must not be negative", code="e.cmd.noti.clean.badkeep")
        store = self.runtime.store
        cutoff = now_ms() - int(keep_s * 1000)
        removed: list[Notification] = []
        ids = store.done_before(cutoff, limit if limit and limit > 0 else None)
        for record_id in ids:
            record = store.delete(record_id)
            if record is not None:
                removed.append(record)
        return removed

    # --- sending in this process --------------------------------------------------------------

    def send(
        self,
        record_id: str | None = None,
        *,
        user: str | None = None,
        creator: str | None = None,
        limit: int | None = None,
        timeout_s: float = SEND_TIMEOUT_DEFAULT_S,
    ) -> Iterator[SendResult]:
        """Send waiting records now, in this process, highest level first, oldest first.

        Each record is claimed for ``timeout_s`` (at most 600 s) first, so a worker or another
        ``send`` never sends it too. A non-root user only picks their own records.

        Raises:
            PermissionDenied: ``e.cmd.noti.send.nopvg``.
            InvalidInput: a timeout that is not positive.
            NotFound: ``record_id`` names no record.
        """
        acting = self.user(user)
        if not timeout_s > 0:
            raise InvalidInput(
                f"timeout must be a positive number of seconds, got {timeout_s!r}",
                code="e.cmd.noti.send.badtimeout",
            )
        lease_ms = int(min(timeout_s, SEND_TIMEOUT_MAX_S) * 1000)
        sender = Sender(self.runtime, owner=f"cli:{acting.name}")
        if record_id is not None:
            record = self.runtime.store.get(record_id)
            if not acting.can_touch(record.creator):
                raise PermissionDenied(
                    f"{acting.name} may not send notifications of {record.creator}",
                    code="e.cmd.noti.send.nopvg",
                )
            yield _with_record(sender.deliver(record_id, lease_ms=lease_ms), record)
            return
        if creator is not None and not acting.can_touch(creator):
            raise PermissionDenied(
                f"only root members send other users' notifications ({acting.name} asked for {creator})",
                code="e.cmd.noti.send.nopvg",
            )
        if creator is None and not acting.is_root:
            creator = acting.name
        sent = 0
        stuck: set[str] = set()  # ids still in the waiting index after we looked at them
        store = self.runtime.store
        while limit is None or limit <= 0 or sent < limit:
            with_stuck = store.waiting_head(len(stuck) + _SEND_PAGE)
            fresh = [i for i in with_stuck if i not in stuck]
            if not fresh:
                return
            for candidate in fresh:
                result = sender.deliver(candidate, lease_ms=lease_ms, creator=creator)
                if result.claim is not ClaimState.CLAIMED:
                    stuck.add(candidate)
                    continue
                if result.status is Status.WAITING:
                    stuck.add(candidate)
                sent += 1
                yield result
                if limit is not None and 0 < limit <= sent:
                    return


def _with_record(result: SendResult, record: Notification) -> SendResult:
    if result.channel is not None:
        return result
    return SendResult(
        result.record_id,
        result.mark,
        result.claim,
        record.channel,
        record.target,
        record.status,
        result.errmsg,
    )


def _status(value: Status | int | None) -> Status | None:
    if value is None:
        return None
    try:
        return Status(int(value))
    except (TypeError, ValueError):
        known = ", ".join(str(int(s)) for s in Status)
        raise InvalidInput(
            f"unknown status {value!r} (known: {known})", code="e.cmd.noti.list.badst"
        ) from None


# --- module-level API ------------------------------------------------------------------------


def notifier() -> Notifier:
    """The :class:`Notifier` of this process's runtime and the noti Celery app."""
    from noti.app import app

    return Notifier(get_runtime(), Publisher(app))


def notify(type: str, target: str, *, lv: object = 1, user: str | None = None, **fields: Any) -> str:  # noqa: A002
    """Queue a notification of ``type`` (sms, weixin, email, webhook) to ``target``; its id.

    ``fields`` are the channel's: ``text`` (sms); ``tmpl``, ``pnb``, ``content``, ``url``
    (weixin); ``subject``, ``text``, ``html`` (email); ``content`` (webhook); and for every
    type ``provider`` and ``retry_max``.

    Raises:
        InvalidInput: bad input, nothing stored. StoreUnavailable: Redis is down.
    """
    return notifier().notify(type, target, lv=lv, user=user, **fields)


def notify_sms(
    target: str,
    text: str,
    *,
    provider: str | None = None,
    lv: object = 1,
    user: str | None = None,
    **kwargs: Any,
) -> str:
    """Queue an SMS; its id (see :func:`notify`)."""
    return notify("sms", target, text=text, provider=provider, lv=lv, user=user, **kwargs)


def notify_weixin(
    target: str,
    *,
    tmpl: str,
    pnb: str,
    content: dict[str, Any] | str,
    url: str | None = None,
    lv: object = 1,
    user: str | None = None,
    **kwargs: Any,
) -> str:
    """Queue a WeChat template message to an openid; its id (see :func:`notify`)."""
    return notify("weixin", target, tmpl=tmpl, pnb=pnb, content=content, url=url, lv=lv, user=user, **kwargs)


def notify_email(
    target: str,
    *,
    subject: str,
    text: str,
    html: str | None = None,
    lv: object = 1,
    user: str | None = None,
    **kwargs: Any,
) -> str:
    """Queue an e-mail; its id (see :func:`notify`)."""
    return notify("email", target, subject=subject, text=text, html=html, lv=lv, user=user, **kwargs)


def notify_webhook(
    target: str, *, content: dict[str, Any] | str, lv: object = 1, user: str | None = None, **kwargs: Any
) -> str:
    """Queue a webhook POST of ``content`` to the URL ``target``; its id (see :func:`notify`)."""
    return notify("webhook", target, content=content, lv=lv, user=user, **kwargs)


def get(record_id: str, *, user: str | None = None) -> Notification:
    """One record (see :meth:`Notifier.get`)."""
    return notifier().get(record_id, user=user)


def list_notifications(**kwargs: Any) -> list[Notification]:
    """Records, newest first (see :meth:`Notifier.select`)."""
    return notifier().select(**kwargs)


def delete(record_id: str, *, user: str | None = None) -> Notification:
    """Delete one record (see :meth:`Notifier.delete`)."""
    return notifier().delete(record_id, user=user)


def clean(**kwargs: Any) -> list[Notification]:
    """Remove old done records; root only (see :meth:`Notifier.clean`)."""
    return notifier().clean(**kwargs)


def clean_done(**kwargs: Any) -> list[Notification]:
    """Remove old done records without a permission check (the beat job)."""
    return notifier().clean_done(**kwargs)


def send(record_id: str | None = None, **kwargs: Any) -> list[SendResult]:
    """Send waiting records in this process (see :meth:`Notifier.send`)."""
    return list(notifier().send(record_id, **kwargs))
