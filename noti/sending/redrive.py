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
from noti.sending.traces import record_traces

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
        """Dead letters, newest first: a root member's every one, another user's those of
        their own records (a webman bridge's letters are the root members').

        Raises:
            InvalidInput: ``e.cmd.noti.dead.badlimit``: a limit that is not an integer.
        """
        acting = self.user(user)
        if limit is not None:
            limit = integer(limit, what="limit", code="e.cmd.noti.dead.badlimit")
        count = limit if limit and limit > 0 else None
        if acting.is_root:
            return self.runtime.dead_letters.entries(count)
        return self._own(acting, self.runtime.dead_letters.entries())[:count]

    def _own(self, acting: User, letters: list[DeadLetter]) -> list[DeadLetter]:
        """The letters of records ``acting`` made (one read of those records)."""
        ours = [letter for letter in letters if letter.source == "noti"]
        records = self.runtime.store.find_many([letter.record_id for letter in ours])
        mine = {r.id for r in records if r is not None and r.creator == acting.name}
        return [letter for letter in ours if letter.record_id in mine]

    def get(self, ident: str, *, user: str | None = None) -> DeadLetter:
        """One dead letter by entry id or record id: a root member's any, another user's one of
        their own records (any other is answered as a missing one).

        Raises:
            NotFound: ``e.cmd.noti.dead.not_found``.
        """
        acting = self.user(user)
        letter = self.runtime.dead_letters.find(ident) if could_be_id(ident) else None
        if letter is not None and not acting.is_root and not self._own(acting, [letter]):
            letter = None
        if letter is None:
            raise NotFound(f"no dead letter has the id {ident!r}", code="e.cmd.noti.dead.not_found")
        return letter

    def retry(self, ident: str, *, user: str | None = None) -> Notification:
        """Put a dead letter's record back to waiting, attempts reset, and queue it.

        Raises:
            NotFound: no such dead letter, or its record is gone.
            InvalidInput: ``e.cmd.noti.dead.notretryable``: not a noti record, or not failed.
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
        # in the trace the record was made in, where it has one (else the current span's)
        traces = record_traces(self.runtime, [record.id]) or None
        self.publisher.publish([(record.id, record.channel, record.level)], traces=traces)
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
        """Remove the dead letters the user sees (a root member: every one); how many."""
        acting = self.user(user)
        if acting.is_root:
            return self.runtime.dead_letters.purge()
        mine = [letter.entry_id for letter in self._own(acting, self.runtime.dead_letters.entries())]
        return self.runtime.dead_letters.remove(mine) if mine else 0

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
