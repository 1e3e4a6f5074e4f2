"""The suppression list as users see it: who may read it and who may lift a suppression.

A suppressed target (:mod:`noti.core.suppression`) is someone's address or number and the
fact that they opted out, bounced or complained: personal data of people who are not users
of noti, and a protection of theirs. So:

* **listing** (``noti suppress list``, ``GET /v1/suppressions``): root members and
  administrators see every entry; any other user sees only the entries that a record of
  their own caused (``user`` of the why is theirs): the addresses they sent to, never another
  user's recipients. Entries written before whys were kept name no user: root only.
* **lifting** (``noti suppress del``, ``DELETE /v1/suppressions/{channel}/{target}``, and
  ``noti dead unsuppress``, kept as it was): root members and administrators only
  (``e.cmd.noti.suppress.nopvg``), whoever caused it. A plain user who could lift the
  suppression of an address that complained could send to it again; an operator decides.
"""

from __future__ import annotations

from collections.abc import Iterable

from noti.access.users import User, resolve_user
from noti.core.record import Channel, parse_channel, validate_target
from noti.core.suppression import Suppressed
from noti.errors import InvalidInput, NotFound
from noti.sending.runtime import Runtime

__all__ = ["LIST_MAX", "Suppressions"]

#: The most entries one listing returns.
LIST_MAX = 10_000


class Suppressions:
    """The suppression list of one runtime, under the rules of the module docstring."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.list_ = runtime.store.suppressions

    def user(self, name: str | None) -> User:
        return resolve_user(self.runtime.settings, name)

    def channel(self, name: str) -> Channel:
        """Raises InvalidInput ``e.cmd.noti.suppress.badtype``: no such channel."""
        try:
            return parse_channel(name)
        except InvalidInput as exc:
            raise InvalidInput(exc.message, code="e.cmd.noti.suppress.badtype") from None

    def entries(
        self, *, user: str | None = None, channel: str | None = None, limit: int | None = None
    ) -> list[Suppressed]:
        """The entries ``user`` may see (of ``channel``, or of every channel), newest first,
        at most ``limit`` (at most :data:`LIST_MAX`).

        Raises:
            InvalidInput: ``e.cmd.noti.suppress.badtype``, ``e.cmd.noti.suppress.badlimit``.
        """
        who = self.user(user)
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise InvalidInput(
                "the limit is a whole number of at least 1", code="e.cmd.noti.suppress.badlimit"
            )
        most = min(limit or LIST_MAX, LIST_MAX)
        channels: Iterable[Channel] = [self.channel(channel)] if channel is not None else list(Channel)
        found = [
            entry
            for ch in channels
            for entry in self.list_.entries(ch.value)
            if who.is_root or (entry.user and entry.user == who.name)
        ]
        found.sort(key=lambda e: (-e.at_ms, e.channel, e.target))
        return found[:most]

    def lift(self, channel: str, target: str, *, user: str | None = None) -> Suppressed:
        """Lift the suppression of ``target`` for ``channel`` (root members only); what it was.

        Raises:
            PermissionDenied: ``e.cmd.noti.suppress.nopvg`` (checked first: a plain user learns
                nothing of the list by asking).
            InvalidInput: ``e.cmd.noti.suppress.badtype``, ``e.cmd.noti.suppress.badtarget``.
            NotFound: ``e.cmd.noti.suppress.not_found``: it is not suppressed.
        """
        self.user(user).require_root("e.cmd.noti.suppress.nopvg", "lift suppressions")
        kind = self.channel(channel)
        try:
            clean = validate_target(kind, target)
        except InvalidInput as exc:
            raise InvalidInput(exc.message, code="e.cmd.noti.suppress.badtarget") from None
        entry = self.list_.get(kind.value, clean)
        if entry is None or not self.list_.remove(kind.value, clean):
            raise NotFound(f"{kind.value} {clean!r} is not suppressed", code="e.cmd.noti.suppress.not_found")
        return entry
