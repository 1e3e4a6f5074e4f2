"""Building a record from what a caller gave: every input checked, the acting user's level
cap and provider grants applied, the chain's providers' own checks run, a fallback built
like its record. Nothing is stored here: :class:`noti.sending.notifier.Notifier` stores and
queues what this builds (bulk sends build tens of thousands a second, so what the settings
say per user, channel and chain is worked out once per runtime). Split from
:mod:`noti.sending.notifier` (issue 39), unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from noti.access.users import User, resolve_user
from noti.core.delay import due_ms, validate_identifier
from noti.core.door import current_door
from noti.core.record import (
    Channel,
    Notification,
    new_id,
    now_ms,
    parse_channel,
    parse_level,
    validate_fields,
    validate_target,
)
from noti.core.retry import RetryPolicy
from noti.errors import InvalidInput
from noti.inputs import bad_character, shown
from noti.sending.runtime import Runtime
from noti.tracing import current_text

if TYPE_CHECKING:
    from noti.access.grants import Grants
    from noti.providers import Provider

# noti.providers and noti.sending.sender (the delivery side) are imported where they are used, so
# that reading records (``noti list``, ``noti get``) does not load them

__all__ = ["RecordBuilder"]


class RecordBuilder:
    """Builds the records of one runtime."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        # Settings never change under a runtime: what they say per user and per channel is
        # worked out once (bulk sends build tens of thousands of records a second).
        self._users: dict[str | None, User] = {}
        self._retry_max: dict[Channel, int] = {}
        self._checking: dict[tuple[Channel, str | None], list[Provider]] = {}
        self._authorized: set[tuple[str, Channel, str | None, frozenset[str] | None]] = set()
        self._grants: Grants | None = None

    def user(self, name: str | None) -> User:
        found = self._users.get(name) if name is None or type(name) is str else None
        if found is None:
            found = resolve_user(self.runtime.settings, name)
            if len(self._users) < 1024:
                self._users[name] = found
        return found

    def build(
        self,
        type: str,  # noqa: A002 - the seed's word
        target: str,
        /,
        *,
        lv: object = 1,
        user: str | None = None,
        provider: str | None = None,
        retry_max: int | None = None,
        retry_policy: str | None = None,
        delay: float | None = None,
        eta: datetime | None = None,
        identifier: str | None = None,
        level_cap: int | None = None,
        status_callback: str | None = None,
        providers_allowed: frozenset[str] | None = None,
        not_before_ms: int = 0,
        record_extra: Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> Notification:
        """A validated, not yet stored record.

        ``delay`` (seconds) or ``eta`` (a datetime; naive means local time) postpone it;
        ``identifier`` names it for replacement and cancelling (see :meth:`add`);
        ``status_callback`` is an http(s) URL each of its status changes is posted to (a
        signed webhook, :mod:`noti.sending.callbacks`). ``not_before_ms``: due no sooner
        (quiet hours); ``record_extra``: attributes noti sets itself (a notice's parent,
        recipient, category, preference, owner: :mod:`noti.recipients.notices`), never input.
        The level is lowered to the user's role cap, and to ``level_cap`` when given (an API
        token's). The providers it goes through must be ones the user may use
        (:mod:`noti.access.grants`), and among ``providers_allowed`` when given (an API token's).

        Raises:
            InvalidInput: any field is missing or malformed (nothing is stored).
            InvalidConfig: a named provider exists but its options are invalid.
        """
        acting = self.user(user)
        channel = parse_channel(type)
        clean_target = validate_target(channel, target)
        clean_fields = validate_fields(channel, fields)
        level = acting.cap_level(parse_level(lv))
        if level_cap is not None and level > level_cap:
            level = level_cap
        if retry_max is None:
            retry_max = self._retry_max.get(channel) or self._default_retry_max(channel)
        elif isinstance(retry_max, bool) or not isinstance(retry_max, int) or not 1 <= retry_max <= 100:
            raise InvalidInput(
                f"retry_max must be an integer from 1 to 100, got {shown(retry_max)}",
                code="e.cmd.noti.add.badretry",
            )
        if retry_policy is not None:
            RetryPolicy.parse(retry_policy)
        if provider is not None and (not isinstance(provider, str) or not provider.strip()):
            raise InvalidInput("provider must be a non-empty name", code="e.cmd.noti.add.noprovider")
        if provider is not None and bad_character(provider, name=True):
            raise InvalidInput(
                f"provider {shown(provider)} is not a provider name", code="e.cmd.noti.add.noprovider"
            )
        if status_callback is not None:
            status_callback = self._check_status_callback(status_callback, acting, providers_allowed)
        created = now_ms()
        due = due_ms(delay=delay, eta=eta, now_ms=created)
        if identifier is not None:
            identifier = validate_identifier(identifier)
            due = max(due, created)  # an identified record always passes through the delayed set
        if not_before_ms > due:
            due = not_before_ms
        made: dict[str, Any] = {
            "id": new_id(created),
            "channel": channel,
            "target": clean_target,
            "creator": acting.name,
            "level": level,
            "retry_max": retry_max,
            "created_ms": created,
            "modified_ms": created,
            "lease_until_ms": due,
            "fields": clean_fields,
            "provider": provider.strip() if provider else None,
            "retry_policy": retry_policy.strip() if retry_policy else None,
            "identifier": identifier,
            "status_callback": status_callback,
            "door": current_door(),
        }
        if record_extra:
            made.update(record_extra)
        trace = current_text()  # the trace it is made in, for its later messages and receipts
        if trace is not None:
            made["trace"] = trace
        record = Notification(**made)
        if (acting.name, channel, record.provider, providers_allowed) not in self._authorized:
            self._authorize(acting, channel, record.provider, providers_allowed)
        checking = self._checking.get((channel, record.provider))
        if checking is None:
            checking = self._providers_checking(channel, record.provider)
        if checking:
            from noti.providers import Message

            message = Message.from_record(record)
            for chosen in checking:
                chosen.check(message)
        return record

    def _check_status_callback(self, url: object, acting: User, token: frozenset[str] | None) -> str:
        """A status callback URL the webhook channel's provider would post to, as ``acting``
        may use it: the grants (a default webhook provider that reaches private addresses is
        for users granted it) and the provider's own checks (private addresses, a creator
        without a signing key) apply now, not at the first change.

        Raises:
            InvalidInput: not an http(s) URL, refused by the provider, or no webhook provider.
            PermissionDenied: ``e.cmd.noti.add.providerdenied``.
        """
        from noti.providers import Message

        checked = validate_target(Channel.WEBHOOK, url)
        if (acting.name, Channel.WEBHOOK, None, token) not in self._authorized:
            self._authorize(acting, Channel.WEBHOOK, None, token)
        creator = acting.name
        probe = Message(
            id="status-callback",
            channel=Channel.WEBHOOK,
            target=checked,
            fields={"content": {}},
            creator=creator,
            status_of="status-callback",
        )
        for chosen in self._providers_checking(Channel.WEBHOOK, None):
            chosen.check(probe)
        return checked

    def _authorize(
        self, acting: User, channel: Channel, provider: str | None, token: frozenset[str] | None
    ) -> None:
        """May ``acting`` (through a token limited to ``token``) send ``channel`` notifications
        through ``provider`` (None: the channel's default chain)? Remembered when it may
        (settings never change under a runtime).

        Raises:
            PermissionDenied: ``e.cmd.noti.add.providerdenied``. InvalidInput: no such chain.
        """
        from noti.access.grants import Grants

        if self._grants is None:
            self._grants = Grants(self.runtime.settings)
        providers = self.runtime.providers
        if provider is not None:
            try:
                defaults = providers.chain_names(channel, None)
            except InvalidInput:  # the channel has no default chain
                defaults = []
            self._grants.check_names(acting, providers.chain_names(channel, provider), defaults, token=token)
        self._grants.check_chain(acting, providers.chain(channel, provider), token=token)
        if len(self._authorized) < 4096:
            self._authorized.add((acting.name, channel, provider, token))

    def _default_retry_max(self, channel: Channel) -> int:
        settings = self.runtime.settings
        found = self._retry_max[channel] = settings.channel(channel.value).retry_max or settings.retry_max
        return found

    def _providers_checking(self, channel: Channel, provider: str | None) -> list[Provider]:
        """The providers of the chain that check a message before it is stored (those that
        override :meth:`Provider.check`); raises as :meth:`Providers.chain` does."""
        from noti.providers import Provider

        chain = self.runtime.providers.chain(channel, provider)
        checking = [chosen for chosen in chain if chosen.__class__.check is not Provider.check]
        if len(self._checking) < 1024:
            self._checking[(channel, provider)] = checking
        return checking

    def with_fallback(
        self,
        record: Notification,
        value: object,
        *,
        user: str | None = None,
        level_cap: int | None = None,
        providers_allowed: frozenset[str] | None = None,
    ) -> tuple[Notification, Notification]:
        """``record`` naming its fallback, and the fallback record (delayed to its deadline,
        built like ``record``: same user, level lowered to ``level_cap`` likewise).

        Raises:
            InvalidInput: ``e.cmd.noti.add.badfallback``, or the fallback's own bad input.
        """
        from noti.delivery.fallback import parse_fallback

        spec = parse_fallback(value)
        if record.identifier is not None:
            raise InvalidInput(
                "a notification with an identifier cannot have a fallback", code="e.cmd.noti.add.badfallback"
            )
        after_s = spec.after_s or self.runtime.settings.channel(record.channel.value).fallback_after_s
        standby = self.build(
            spec.type,
            spec.target,
            lv=record.level if spec.lv is None else spec.lv,
            user=user,
            level_cap=level_cap,
            providers_allowed=providers_allowed,
            provider=spec.provider,
            delay=after_s + max(0, record.lease_until_ms - record.created_ms) / 1000,
            status_callback=record.status_callback,
            **spec.fields,
        )
        standby = replace(standby, fallback_of=record.id)
        return replace(record, fallback=standby.id), standby
