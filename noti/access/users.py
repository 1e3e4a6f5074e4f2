"""Who may do what (seed 000): roles, level caps and ownership, as pure functions.

=================  =========  ==============================================
role               level cap  may
=================  =========  ==============================================
root administrator 1000       everything a root member may
root member        100        read, send, delete others' records, listeners,
                              events and number pools; ``clean``, dead
                              letters, the webman queues' data
anyone else        1          add; read, send, delete their own records,
                              listeners, events and number pools
=================  =========  ==============================================

Only root administrators make, list and revoke HTTP API tokens (:mod:`noti.access.tokens`): a token
acts as its user, whoever that is.

A record or event of another user, named by its id by someone who may not see it (``get``,
``revoke``, ``event show``, and so the HTTP API), is answered as an id nobody has
(:class:`~noti.errors.NotFound`, the same message), so the answer tells neither that it exists
nor whose it is; a right the user lacks (a root-only verb, another user's listing) is
:class:`~noti.errors.PermissionDenied`.

A level above the cap is lowered to the cap, never refused. These checks are made by the
Python API (:mod:`noti.api`, :mod:`noti.events`, :class:`noti.numpool.NumberPool`,
:class:`noti.bridge.webman.console.WebmanConsole`), so the CLI and applications get the same
rules; ``tests/test_permissions.py`` holds the whole matrix, verb by verb.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from noti.config import Settings
from noti.errors import PermissionDenied
from noti.inputs import user_name

__all__ = ["Role", "User", "resolve_user"]


class Role(IntEnum):
    USER = 0
    ROOT_MEMBER = 1
    ROOT_ADMIN = 2


LEVEL_CAPS = {Role.USER: 1, Role.ROOT_MEMBER: 100, Role.ROOT_ADMIN: 1000}


@dataclass(frozen=True, slots=True)
class User:
    """An acting user and the role the settings give them."""

    name: str
    role: Role = Role.USER

    @property
    def is_root(self) -> bool:
        """Member (or administrator) of the ``root`` group."""
        return self.role >= Role.ROOT_MEMBER

    @property
    def is_admin(self) -> bool:
        """A root administrator (``NOTI_ROOT_ADMINS``)."""
        return self.role is Role.ROOT_ADMIN

    @property
    def level_cap(self) -> int:
        return LEVEL_CAPS[self.role]

    def cap_level(self, level: int) -> int:
        """The level this user gets when asking for ``level``."""
        return min(level, self.level_cap)

    def can_touch(self, creator: str) -> bool:
        """May this user list, send or delete a record made by ``creator``?"""
        return self.is_root or creator == self.name

    def require_access(self, owner: str, *, code: str, action: str) -> None:
        """Raises :class:`PermissionDenied` with ``code`` unless this user may ``action`` (e.g.
        "delete notifications") things owned by ``owner``."""
        if not self.can_touch(owner):
            raise PermissionDenied(f"{self.name} may not {action} of {owner}", code=code)

    def scope(self, owner: str | None, *, code: str, action: str) -> str | None:
        """The owner a listing or sending should be limited to.

        Root members get ``owner`` as asked (None: everyone); other users get themselves, and
        :class:`PermissionDenied` (``code``) when they ask for someone else.
        :class:`~noti.errors.InvalidInput` (``e.cmd.noti.baduser``): ``owner`` is no user name.
        """
        if owner is not None:
            user_name(owner)
            if not self.can_touch(owner):
                raise PermissionDenied(
                    f"only members of the root group may {action} of other users "
                    f"({self.name} asked for {owner})",
                    code=code,
                )
            return owner
        return None if self.is_root else self.name

    def require_root(self, code: str, action: str) -> None:
        """Raises :class:`PermissionDenied` with ``code`` unless the user is a root member."""
        if not self.is_root:
            raise PermissionDenied(
                f"only members of the root group may {action} (acting user: {self.name})", code=code
            )

    def require_admin(self, code: str, action: str) -> None:
        """Raises :class:`PermissionDenied` with ``code`` unless the user is a root administrator."""
        if not self.is_admin:
            raise PermissionDenied(
                f"only root administrators may {action} (acting user: {self.name})", code=code
            )


def resolve_user(settings: Settings, name: str | None = None) -> User:
    """The :class:`User` called ``name`` (default, when None: the settings' acting user) with
    their role.

    Raises:
        InvalidInput: ``e.cmd.noti.baduser``: not 1-64 of ``A-Z a-z 0-9 _ . @ + -`` (user
            names are parts of Redis keys, so ``:``, spaces, control characters and a
            trailing newline are refused; so is an empty name).
    """
    name = user_name(settings.user if name is None else name)
    if name in settings.root_admins:
        return User(name, Role.ROOT_ADMIN)
    if name in settings.root_members:
        return User(name, Role.ROOT_MEMBER)
    return User(name, Role.USER)
