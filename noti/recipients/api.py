"""The recipients API applications, the CLI and the HTTP API call: profiles, preferences,
categories, templates and the one-call notify, with :mod:`noti.access.users`'s rules.

Recipients and templates belong to the noti user who wrote them (their *owner*): a user reads
and writes only their own; a root member may name any ``owner``. Categories are one list for
everyone: anyone reads them, root members write them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from noti.recipients.bulk import NoticeBatch, notify_many
from noti.recipients.categories import Category
from noti.recipients.digests import Digests, OpenWindow
from noti.recipients.notices import Notice, Notices
from noti.recipients.profile import Recipient
from noti.recipients.store import Erasure, ImportResult
from noti.recipients.templates import Template, TemplateInfo

if TYPE_CHECKING:
    from noti.recipients.throttles import ThrottleState
    from noti.sending.notifier import Notifier

__all__ = ["Recipients", "recipients"]


class Recipients:
    """The recipients operations over one notifier."""

    def __init__(self, notifier: Notifier) -> None:
        self.notifier = notifier
        self.notices = Notices(notifier)
        self.digests = Digests(self.notices)
        self.store = self.notices.recipients
        self.templates = self.notices.templates

    def _owner(self, user: str | None, owner: str | None, action: str) -> str:
        acting = self.notifier.user(user)
        scoped = acting.scope(owner, code="e.cmd.noti.rcpt.nopvg", action=action)
        return scoped or acting.name

    # --- profiles ---------------------------------------------------------------------------

    def put(
        self, rid: str | None, profile: object, *, user: str | None = None, owner: str | None = None
    ) -> tuple[Recipient, bool]:
        """Create or replace a profile; ``(profile, created?)`` (see :mod:`noti.recipients.profile`)."""
        return self.store.put(self._owner(user, owner, "write recipients"), profile, rid=rid)

    def get(self, rid: str, *, user: str | None = None, owner: str | None = None) -> Recipient:
        return self.store.get(self._owner(user, owner, "read recipients"), rid)

    def update(
        self, rid: str, patch: object, *, user: str | None = None, owner: str | None = None
    ) -> Recipient:
        """Apply a JSON merge patch to a profile."""
        return self.store.update(self._owner(user, owner, "write recipients"), rid, patch)

    def merge(
        self, into: str, source: str, *, user: str | None = None, owner: str | None = None
    ) -> Recipient:
        """Merge recipient ``source`` into ``into`` (see :meth:`RecipientStore.merge`)."""
        return self.store.merge(self._owner(user, owner, "write recipients"), into, source)

    def delete(self, rid: str, *, user: str | None = None, owner: str | None = None) -> Erasure:
        """Erase a recipient (the right to be forgotten: see :mod:`noti.recipients.store`)."""
        store = self.notifier.runtime.store
        reason = "its recipient was erased"

        def revoke(ids: list[str]) -> list[bool]:
            from noti.core.attempt import Revoked

            return [r is Revoked.REVOKED for r in store.revoke(ids, reason=reason)]

        return self.store.erase(
            self._owner(user, owner, "erase recipients"),
            rid,
            revoke=revoke,
            log_keep_ms=int(self.notifier.runtime.settings.notice_keep_s * 1000),
        )

    def list_recipients(
        self, *, user: str | None = None, owner: str | None = None, limit: int = 100, after: str | None = None
    ) -> list[Recipient]:
        from noti.errors import InvalidInput

        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 1000:
            raise InvalidInput("limit is a whole number from 1 to 1000", code="e.cmd.noti.rcpt.badlimit")
        return self.store.page(self._owner(user, owner, "list recipients"), limit=limit, after=after)

    def import_rows(
        self, rows: Iterable[object], *, user: str | None = None, owner: str | None = None
    ) -> ImportResult:
        """Create or replace many profiles; bad rows are refused one by one.

        Raises:
            InvalidInput: ``e.cmd.noti.rcpt.baddoc``: ``rows`` is not a list or iterable
                of rows (a string, a mapping, a number …); nothing stored.
        """
        from noti.errors import InvalidInput
        from noti.inputs import shown

        if isinstance(rows, str | bytes | Mapping) or not isinstance(rows, Iterable):
            raise InvalidInput(
                f"an import takes a list or iterable of profiles, got {shown(rows)}",
                code="e.cmd.noti.rcpt.baddoc",
            )
        return self.store.import_many(self._owner(user, owner, "write recipients"), rows)

    def history(
        self, rid: str, *, user: str | None = None, owner: str | None = None, limit: int = 100
    ) -> list[str]:
        """Notice and record ids made for a recipient, newest first."""
        owner_name = self._owner(user, owner, "read recipients")
        self.store.get(owner_name, rid)
        return self.store.history(owner_name, rid, limit=limit)

    def throttles(
        self, rid: str, *, user: str | None = None, owner: str | None = None
    ) -> list[ThrottleState]:
        """The recipient's throttles as they stand: per throttled category and channel they
        have an address on, the sends the period holds and when the next fits."""
        from noti.core.record import now_ms
        from noti.recipients.throttles import throttle_states

        owner_name = self._owner(user, owner, "read recipients")
        profile = self.store.get(owner_name, rid)
        runtime = self.notifier.runtime
        return throttle_states(
            runtime.redis,
            runtime.keys,
            owner_name,
            profile.id,
            self.categories(),
            list(profile.addresses),
            now_ms(),
        )

    # --- digests ----------------------------------------------------------------------------

    def open_digests(
        self,
        *,
        user: str | None = None,
        owner: str | None = None,
        recipient: str | None = None,
        limit: int = 100,
    ) -> list[OpenWindow]:
        """The open digest windows (of one recipient), the soonest due first.

        Raises:
            InvalidInput: ``e.cmd.noti.rcpt.badlimit``, a bad recipient id.
        """
        from noti.errors import InvalidInput
        from noti.recipients.profile import recipient_id

        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 1000:
            raise InvalidInput("limit is a whole number from 1 to 1000", code="e.cmd.noti.rcpt.badlimit")
        rid = recipient_id(recipient) if recipient is not None else None
        owner_name = self._owner(user, owner, "read recipients")
        return self.digests.open_windows(owner_name, recipient=rid, limit=limit)

    # --- preferences ------------------------------------------------------------------------

    def preferences(
        self, rid: str, *, user: str | None = None, owner: str | None = None
    ) -> dict[str, dict[str, bool]]:
        return self.store.preferences(self._owner(user, owner, "read recipients"), rid)

    def set_preferences(
        self, rid: str, preferences: object, *, user: str | None = None, owner: str | None = None
    ) -> dict[str, dict[str, bool]]:
        return self.store.set_preferences(self._owner(user, owner, "write recipients"), rid, preferences)

    # --- categories -------------------------------------------------------------------------

    def categories(self) -> list[Category]:
        return self.store.categories()

    def category(self, name: str) -> Category:
        return self.store.category(name)

    def put_category(self, name: str, declaration: object, *, user: str | None = None) -> Category:
        """Declare a category; root members only."""
        self.notifier.user(user).require_root("e.cmd.noti.cat.nopvg", "declare categories")
        return self.store.put_category(name, declaration)

    def delete_category(self, name: str, *, user: str | None = None) -> bool:
        self.notifier.user(user).require_root("e.cmd.noti.cat.nopvg", "remove categories")
        return self.store.delete_category(name)

    # --- templates --------------------------------------------------------------------------

    def put_template(
        self, name: str, doc: object, *, user: str | None = None, owner: str | None = None
    ) -> int:
        """Store a new version of a template; its version number."""
        return self.templates.put(self._owner(user, owner, "write templates"), name, doc)

    def get_template(
        self, name: str, *, version: int | None = None, user: str | None = None, owner: str | None = None
    ) -> Template:
        return self.templates.get(self._owner(user, owner, "read templates"), name, version)

    def list_templates(self, *, user: str | None = None, owner: str | None = None) -> list[TemplateInfo]:
        return self.templates.list(self._owner(user, owner, "list templates"))

    def delete_template(self, name: str, *, user: str | None = None, owner: str | None = None) -> bool:
        return self.templates.delete(self._owner(user, owner, "remove templates"), name)

    # --- notices ----------------------------------------------------------------------------

    def notify(self, **kwargs: Any) -> Notice:
        """See :meth:`noti.recipients.notices.Notices.notify`."""
        return self.notices.notify(**kwargs)

    def notify_id(self, **kwargs: Any) -> str:
        """:meth:`notify`, answering the notice's id only."""
        return self.notices.notify_id(**kwargs)

    def notify_many(self, items: Sequence[object], **kwargs: Any) -> NoticeBatch:
        """Many notices, each refused alone (see :func:`noti.recipients.bulk.notify_many`)."""
        return notify_many(self.notices, items, **kwargs)

    def notice(self, notice_id: str, *, user: str | None = None) -> Notice:
        return self.notices.get(notice_id, user=user)


_current: Recipients | None = None


def recipients() -> Recipients:
    """The :class:`Recipients` of this process's notifier."""
    from noti.celery.process import process_notifier

    global _current  # noqa: PLW0603 - one per process notifier
    notifier = process_notifier()
    if _current is None or _current.notifier is not notifier:
        _current = Recipients(notifier)
    return _current
