"""The Python API applications call (Django, Flask, scripts) and the CLI is built on.

Every call takes the acting ``user`` (default: ``NOTI_USER``, else the OS user) and enforces
the rules of :mod:`noti.access.users`; the CLI adds nothing to them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from noti.core.record import Notification
from noti.errors import InvalidInput
from noti.sending.notifier import Notifier, Revocation
from noti.tracing import span

if TYPE_CHECKING:
    from noti.core.timeline import Timeline
    from noti.recipients.notices import Notice
    from noti.sending.bulk import BulkResult
    from noti.sending.redrive import Redrive
    from noti.sending.sender import SendResult

# noti.sending.bulk, noti.core.delay and noti.sending.redrive are imported by the calls that use them: reading
# records (``noti list``, ``noti get``) needs none of them (tests/test_fast_cli.py)

__all__ = [
    "Notifier",
    "Redrive",
    "cancel",
    "clean",
    "clean_done",
    "delete",
    "get",
    "get_notice",
    "list_notifications",
    "notifier",
    "notify",
    "notify_chat",
    "notify_email",
    "notify_many",
    "notify_push",
    "notify_sms",
    "notify_webhook",
    "notify_weixin",
    "redrive",
    "revoke",
    "schedule_many",
    "send",
]

# --- module-level API ------------------------------------------------------------------------


def notifier() -> Notifier:
    """The :class:`Notifier` of this process's runtime and the noti Celery app's broker (the
    app itself is built only if messages go through ``send_task``: not on a Redis broker)."""
    from noti.celery.process import process_notifier

    return process_notifier()


def redrive() -> Redrive:
    """Dead-letter operations over this process's runtime."""
    from noti.sending.redrive import Redrive

    current = notifier()
    return Redrive(current.runtime, current.publisher)


def notify(
    type: str | None = None,  # noqa: A002
    target: str | None = None,
    *,
    lv: object = 1,
    user: str | None = None,
    recipient: object = None,
    template: object = None,
    **fields: Any,
) -> str:
    """Queue a notification of ``type`` (sms, weixin, email, webhook, push, chat or an
    installed channel: ``noti channels``) to ``target``; its id.

    ``fields`` are the channel's: ``text`` (sms); ``tmpl``, ``pnb``, ``content``, ``url``
    (weixin); ``subject``, ``text``, ``html`` (email); ``content`` (webhook); ``body``,
    ``title``, ``data``, ``collapse`` (push); ``text``, ``title``, ``format`` (chat); and for
    every type ``provider`` and ``retry_max``.

    Or notify a person: ``notify(recipient="42", template="order_shipped", data={...},
    category="orders")`` (with ``channels=[…]`` or ``chain=["push", "sms"]``, ``after_s``,
    ``locale``, ``idempotency_key``, ``delay`` / ``eta``): the recipient's profile,
    preferences, quiet hours and locale decide (:mod:`noti.recipients.notices`); the notice's
    id (``n…``; :func:`get_notice`).

    Raises:
        InvalidInput: bad input, nothing stored. StoreUnavailable: Redis is down.
        NotFound: (a recipient notice) no such recipient, template or category.
    """
    with span("noti.notify", kind="producer", attributes={"messaging.system": "celery"}) as current:
        made = _notify(type, target, lv=lv, user=user, recipient=recipient, template=template, fields=fields)
        if current is not None:  # a record's id, or a recipient notice's
            current.set_attribute("noti.record_id" if recipient is None else "noti.notice_id", made)
            if type is not None:
                current.set_attribute("noti.channel", str(type))
        return made


def _notify(
    type: str | None,  # noqa: A002
    target: str | None,
    *,
    lv: object,
    user: str | None,
    recipient: object,
    template: object,
    fields: dict[str, Any],
) -> str:
    if recipient is not None:
        if type is not None or target is not None:
            raise InvalidInput(
                "notify a recipient with a template, or a type and a target, not both",
                code="e.cmd.noti.notify.both",
            )
        from noti.recipients.api import recipients

        return recipients().notify_id(recipient=recipient, template=template, lv=lv, user=user, **fields)
    if type is None or target is None:
        raise InvalidInput(
            "notify needs a type and a target (or a recipient and a template)", code="e.cmd.noti.add.badtype"
        )
    if template is not None:  # a channel's own field (an SMS's vendor template codes)
        fields["template"] = template
    return notifier().notify(type, target, lv=lv, user=user, **fields)


def get_notice(notice_id: str, *, user: str | None = None) -> Notice:
    """One notice (a ``notify(recipient=…)`` call) and what became of it per channel.

    Raises:
        NotFound: ``e.cmd.noti.notice.not_found`` (also another user's notice).
    """
    from noti.recipients.api import recipients

    return recipients().notice(notice_id, user=user)


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


def notify_push(
    target: str,
    *,
    body: str,
    title: str | None = None,
    data: dict[str, Any] | str | None = None,
    collapse: str | None = None,
    lv: object = 1,
    user: str | None = None,
    **kwargs: Any,
) -> str:
    """Queue a mobile push to a device token; its id (see :func:`notify`)."""
    return notify(
        "push", target, body=body, title=title, data=data, collapse=collapse, lv=lv, user=user, **kwargs
    )


def notify_chat(
    target: str,
    *,
    text: str,
    title: str | None = None,
    format: str | None = None,  # noqa: A002 - the channel's field
    lv: object = 1,
    user: str | None = None,
    **kwargs: Any,
) -> str:
    """Queue a chat message to a robot, channel or chat; its id (see :func:`notify`)."""
    return notify("chat", target, text=text, title=title, format=format, lv=lv, user=user, **kwargs)


def notify_many(items: Iterable[object], *, user: str | None = None) -> BulkResult:
    """Validate and store many notifications (see :mod:`noti.sending.bulk`)."""
    from noti.sending.bulk import add_many

    return add_many(notifier(), items, user=user)


def schedule_many(
    items: Iterable[object],
    *,
    delay: float | None = None,
    eta: datetime | None = None,
    user: str | None = None,
) -> BulkResult:
    """:func:`notify_many` with a ``delay`` or ``eta`` for every item that names none.

    Raises:
        InvalidInput: ``e.cmd.noti.add.baddelay``: a bad ``delay`` or ``eta`` (every item
            would be refused for it; nothing is stored).
    """
    from noti.core.delay import due_ms
    from noti.core.record import now_ms
    from noti.sending.bulk import add_many

    due_ms(delay=delay, eta=eta, now_ms=now_ms())
    defaults: dict[str, Any] = {}
    if delay is not None:
        defaults["delay"] = delay
    if eta is not None:
        defaults["eta"] = eta
    return add_many(notifier(), items, user=user, defaults=defaults)


def cancel(ident: str, *, user: str | None = None) -> Notification:
    """Cancel a scheduled notification by id or identifier (see :meth:`Notifier.cancel`)."""
    return notifier().cancel(ident, user=user)


def revoke(record_ids: Sequence[str] = (), **kwargs: Any) -> Revocation:
    """Revoke waiting notifications by id, or in bulk (see :meth:`Notifier.revoke`)."""
    return notifier().revoke(record_ids, **kwargs)


def get(record_id: str, *, user: str | None = None) -> Notification:
    """One record (see :meth:`Notifier.get`)."""
    return notifier().get(record_id, user=user)


def list_notifications(**kwargs: Any) -> list[Notification]:
    """Records, newest first (see :meth:`Notifier.select`)."""
    return notifier().select(**kwargs)


def timeline(record_id: str, *, user: str | None = None) -> Timeline:
    """What happened to a notification, step by step (see :meth:`Notifier.timeline`)."""
    return notifier().timeline(record_id, user=user)


def search(**kwargs: Any) -> list[Notification]:
    """Records by address, recipient, status, provider, vendor id, time (see :meth:`Notifier.search`)."""
    return notifier().search(**kwargs)


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


def __getattr__(name: str) -> Any:
    """``Redrive``, named in ``__all__``, imported from :mod:`noti.sending.redrive` on first use."""
    if name == "Redrive":
        from noti.sending.redrive import Redrive

        return Redrive
    raise AttributeError(f"module 'noti.api' has no attribute {name!r}")
