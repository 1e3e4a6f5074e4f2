"""Redrive: the operator's view of dead letters — list, show, put back to waiting, purge.
Root members only (``e.cmd.noti.dead.nopvg``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from noti.access.users import User, resolve_user
from noti.core.deadletter import DeadLetter
from noti.core.record import Notification, parse_channel, validate_target
from noti.errors import InvalidInput, NotFound
from noti.inputs import could_be_id, integer
from noti.sending.runtime import Runtime

if TYPE_CHECKING:
    from noti.sending.notifier import Publishing

__all__ = ["Redrive"]


class Redrive:
    """Dead-letter operations over one runtime and publisher."""

    def __init__(self, runtime: Runtime, publisher: Publishing) -> None:
        self.runtime = runtime
        self.publisher = publisher

    def user(self, name: str | None) -> User:
        return resolve_user(self.runtime.settings, name)

    def entries(self, *, user: str | None = None, limit: int | None = None) -> list[DeadLetter]:
        """Dead letters, newest first (root members only).

        Raises:
            PermissionDenied: ``e.cmd.noti.dead.nopvg``.
            InvalidInput: ``e.cmd.noti.dead.badlimit``: a limit that is not an integer.
        """
        self.user(user).require_root("e.cmd.noti.dead.nopvg", "read dead letters")
        if limit is not None:
            limit = integer(limit, what="limit", code="e.cmd.noti.dead.badlimit")
        return self.runtime.dead_letters.entries(limit if limit and limit > 0 else None)

    def get(self, ident: str, *, user: str | None = None) -> DeadLetter:
        """One dead letter by entry id or record id (root members only).

        Raises:
            NotFound: ``e.cmd.noti.dead.not_found``. PermissionDenied.
        """
        self.user(user).require_root("e.cmd.noti.dead.nopvg", "read dead letters")
        letter = self.runtime.dead_letters.find(ident) if could_be_id(ident) else None
        if letter is None:
            raise NotFound(f"no dead letter has the id {ident!r}", code="e.cmd.noti.dead.not_found")
        return letter

    def retry(self, ident: str, *, user: str | None = None) -> Notification:
        """Put a dead letter's record back to waiting, attempts reset, and queue it.

        Raises:
            NotFound: no such dead letter, or its record is gone.
            InvalidInput: ``e.cmd.noti.dead.notretryable``: not a noti record, or not failed.
            PermissionDenied: ``e.cmd.noti.dead.nopvg``.
        """
        letter = self.get(ident, user=user)
        if letter.source != "noti":
            raise InvalidInput(
                f"dead letter {letter.entry_id} comes from {letter.source}, not a noti record",
                code="e.cmd.noti.dead.notretryable",
            )
        record = self.runtime.store.revive(letter.record_id)
        if record is None:
            existing = self.runtime.store.find(letter.record_id)
            if existing is None:
                raise NotFound(
                    f"record {letter.record_id} of dead letter {letter.entry_id} was deleted",
                    code="e.cmd.noti.dead.not_found",
                )
            raise InvalidInput(
                f"record {letter.record_id} is not failed or invalid (st={int(existing.status)})",
                code="e.cmd.noti.dead.notretryable",
            )
        self.publisher.publish([(record.id, record.channel, record.level)])
        self.runtime.dead_letters.remove([letter.entry_id])
        return record

    def retry_all(self, *, user: str | None = None) -> list[Notification]:
        """:meth:`retry` for every dead letter of a noti record that can be retried."""
        revived = []
        for letter in self.entries(user=user):
            if letter.source != "noti":
                continue
            try:
                revived.append(self.retry(letter.entry_id, user=user))
            except (NotFound, InvalidInput):
                continue
        return revived

    def purge(self, *, user: str | None = None) -> int:
        """Remove every dead letter (root members only); how many there were."""
        self.user(user).require_root("e.cmd.noti.dead.nopvg", "purge dead letters")
        return self.runtime.dead_letters.purge()

    def unsuppress(self, channel: str, target: str, *, user: str | None = None) -> bool:
        """Let ``target`` receive ``channel`` notifications again after an opt-out (root only).

        Returns whether it was suppressed.

        Raises:
            PermissionDenied: ``e.cmd.noti.dead.nopvg``.
            InvalidInput: ``e.cmd.noti.dead.badtype`` (no such channel: ``fax``),
            ``e.cmd.noti.dead.badtarget`` (not a target of that channel).
        """
        self.user(user).require_root("e.cmd.noti.dead.nopvg", "lift opt-outs")
        try:
            kind = parse_channel(channel)
        except InvalidInput as exc:
            raise InvalidInput(exc.message, code="e.cmd.noti.dead.badtype") from None
        try:
            clean_target = validate_target(kind, target)
        except InvalidInput as exc:
            raise InvalidInput(exc.message, code="e.cmd.noti.dead.badtarget") from None
        return self.runtime.store.unsuppress(kind.value, clean_target)
