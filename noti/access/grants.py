"""Which providers a user, and an API token, may use.

A provider holds an operator's credentials and reaches what the operator pointed it at, so
naming one is a right, not a choice of route:

- Without ``provider=``, a notification goes through its channel's default chain
  (``[channels.<type>] provider``): anyone may use it.
- Naming a provider (``provider="hook"``) is allowed for the providers of the channel's
  default chain, and for those the settings grant the user (``provider_grants``: the user's
  list and ``"*"``'s). Root administrators (the operators) may name any.
- A provider that may reach private addresses (a webhook provider with ``allow_private``:
  :attr:`Provider.reaches_private`) is usable only by users granted it by name, even as a
  channel default: it exists for the operator's internal receivers, and the SSRF guard does
  not stand in front of it. Root administrators may use it.
- An API token made with ``-providers a,b`` narrows all of the above to those names (for a
  root administrator's token too): it may name only them, and use a private-reaching default
  only when it is one of them.

A refusal is :class:`~noti.errors.PermissionDenied` ``e.cmd.noti.add.providerdenied``, made
before anything is stored. It names the provider asked for and never lists the others (a
user learns nothing of the operator's configuration from it): a provider that does not exist
and one the user may not name answer alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from noti.access.users import User
from noti.config import Settings
from noti.errors import PermissionDenied

__all__ = ["Grants", "Reaching"]

CODE = "e.cmd.noti.add.providerdenied"


class Reaching(Protocol):
    """What the grants need of a provider instance."""

    name: str

    @property
    def reaches_private(self) -> bool: ...


class Grants:
    """The ``provider_grants`` of one settings object, read once."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        everyone = frozenset(settings.provider_grants.get("*", ()))
        self._granted = {
            user: frozenset(names) | everyone for user, names in settings.provider_grants.items()
        }
        self._everyone = everyone

    def granted(self, user: User) -> frozenset[str]:
        """The providers the settings grant ``user`` by name (``"*"``'s included)."""
        return self._granted.get(user.name, self._everyone)

    def check_names(
        self,
        user: User,
        names: Sequence[str],
        defaults: Sequence[str],
        *,
        token: frozenset[str] | None = None,
    ) -> None:
        """May ``user`` (through a token limited to ``token``) name each of ``names``, given
        the channel's default chain ``defaults``? Checked before the names are looked up.

        Raises:
            PermissionDenied: ``e.cmd.noti.add.providerdenied``.
        """
        for name in names:
            if token is not None and name not in token:
                raise PermissionDenied(f"this API token may not use provider {name!r}", code=CODE)
            if not user.is_admin and name not in defaults and name not in self.granted(user):
                raise PermissionDenied(
                    f"{user.name} may not name provider {name!r}: an operator grants providers "
                    "(provider_grants in the settings)",
                    code=CODE,
                )

    def check_chain(
        self, user: User, chain: Sequence[Reaching], *, token: frozenset[str] | None = None
    ) -> None:
        """May ``user`` send through each provider of ``chain`` (named or the channel's
        default)? Only providers that reach private addresses need more than
        :meth:`check_names`.

        Raises:
            PermissionDenied: ``e.cmd.noti.add.providerdenied``.
        """
        for provider in chain:
            if not provider.reaches_private:
                continue
            if token is not None and provider.name not in token:
                raise PermissionDenied(
                    f"this API token may not use provider {provider.name!r}, which reaches private addresses",
                    code=CODE,
                )
            if not user.is_admin and provider.name not in self.granted(user):
                raise PermissionDenied(
                    f"{user.name} may not use provider {provider.name!r}, which reaches private "
                    "addresses: only users granted it by name may (provider_grants in the settings)",
                    code=CODE,
                )
