"""A recipient's profile: who a person is to noti, checked before anything is stored.

A profile belongs to one noti user (its *owner*) and is named by an id of the owner's choice
(their own user id: ``"42"``). It holds the person's addresses per channel (several of each,
the primary first), their locale and timezone, their quiet hours (or none, or the operator's
default) and custom attributes the templates can use::

    {"id": "42",
     "addresses": {"sms": ["+8613912345678"], "email": ["ada@example.com"], "push": ["fcm-token"]},
     "locale": "zh-Hant-TW", "timezone": "Asia/Taipei", "quiet_hours": "22:00-07:00",
     "attributes": {"name": "Ada", "plan": "pro"}}

What a caller gives is checked here, refused with :class:`~noti.errors.InvalidInput` (codes
``e.cmd.noti.rcpt.*``) and nothing stored: an id is 1-128 letters, digits or ``_ . @ + = -``
starting with a letter or digit; a channel is a registered one and each address is a target
that channel accepts (the channel's own check), at most :data:`ADDRESSES_MAX` per channel; the
locale a BCP 47 tag (:mod:`noti.recipients.locales`), the timezone an IANA name, quiet hours
``HH:MM-HH:MM`` or ``"off"`` (:mod:`noti.recipients.quiet`); attributes a plain JSON object of
at most :data:`ATTRIBUTES_MAX_BYTES`; the whole profile at most :data:`PROFILE_MAX_BYTES` as JSON.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from noti.core.record import parse_channel, validate_target
from noti.errors import InvalidInput, NotiError
from noti.inputs import bad_character, load_json, plain_json, shown
from noti.recipients.locales import parse_locale
from noti.recipients.quiet import QUIET_DEFAULT, QUIET_OFF, parse_quiet, parse_timezone

__all__ = [
    "ADDRESSES_MAX",
    "ATTRIBUTES_MAX_BYTES",
    "PROFILE_MAX_BYTES",
    "QUIET_DEFAULT",
    "QUIET_OFF",
    "Recipient",
    "merge_patch",
    "parse_recipient",
    "recipient_id",
]

#: Addresses kept per channel.
ADDRESSES_MAX = 8
ATTRIBUTES_MAX_BYTES = 16 * 1024
PROFILE_MAX_BYTES = 64 * 1024
#: ``quiet_hours`` values: the operator's default (``NOTI_QUIET_HOURS``), or none at all.
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@+=-]{0,127}")
#: The keys a profile has; anything else is refused (a typo must not be kept silently).
_KEYS = frozenset({"id", "addresses", "locale", "timezone", "quiet_hours", "attributes"})


def _bad(code: str, message: str) -> InvalidInput:
    """The refusal ``e.cmd.noti.rcpt.`` + ``code``: ``e.cmd.noti.rcpt.badid``,
    ``e.cmd.noti.rcpt.badaddr``, ``e.cmd.noti.rcpt.baddoc``, ``e.cmd.noti.rcpt.toobig``
    (written out so the error reference lists them)."""
    return InvalidInput(message, code=f"e.cmd.noti.rcpt.{code}")


def recipient_id(value: object) -> str:
    """``value`` when it is a recipient id.

    Raises:
        InvalidInput: ``e.cmd.noti.rcpt.badid``.
    """
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        value = str(value)
    if not isinstance(value, str) or not _ID.fullmatch(value):
        raise _bad(
            "badid",
            f"recipient id {shown(value)} is not 1-128 letters, digits or _ . @ + = - "
            "starting with a letter or digit",
        )
    return value


@dataclass(frozen=True, slots=True)
class Recipient:
    """One person, as stored."""

    id: str
    #: Channel name -> addresses, the primary first.
    addresses: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    locale: str | None = None
    timezone: str | None = None
    #: ``"HH:MM-HH:MM"``, :data:`QUIET_OFF`, or :data:`QUIET_DEFAULT` (the operator's).
    quiet_hours: str = QUIET_DEFAULT
    attributes: Mapping[str, Any] = field(default_factory=dict)
    created_ms: int = 0
    updated_ms: int = 0

    def primary(self, channel: str) -> str | None:
        """The primary address for ``channel``, or None."""
        found = self.addresses.get(channel)
        return found[0] if found else None

    def to_dict(self) -> dict[str, Any]:
        """The profile as JSON shows it."""
        return {
            "id": self.id,
            "addresses": {k: list(v) for k, v in self.addresses.items()},
            "locale": self.locale,
            "timezone": self.timezone,
            "quiet_hours": self.quiet_hours,
            "attributes": dict(self.attributes),
            "created_ms": self.created_ms,
            "updated_ms": self.updated_ms,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes) -> Recipient:
        """A stored profile (trusted: it was checked when written)."""
        data = json.loads(text)
        return cls(
            id=data["id"],
            addresses={k: tuple(v) for k, v in data.get("addresses", {}).items()},
            locale=data.get("locale"),
            timezone=data.get("timezone"),
            quiet_hours=data.get("quiet_hours") or QUIET_DEFAULT,
            attributes=data.get("attributes") or {},
            created_ms=int(data.get("created_ms", 0)),
            updated_ms=int(data.get("updated_ms", 0)),
        )

    def template_view(self) -> dict[str, Any]:
        """What a template sees as ``recipient``: never the addresses."""
        return {
            "id": self.id,
            "locale": self.locale,
            "timezone": self.timezone,
            "attributes": dict(self.attributes),
        }


def _addresses(value: object) -> dict[str, tuple[str, ...]]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise _bad("badaddr", f"addresses is an object of channel -> addresses, got {shown(value)}")
    out: dict[str, tuple[str, ...]] = {}
    for name, given in value.items():
        try:
            channel = parse_channel(name) if isinstance(name, str) else None
        except NotiError:
            channel = None
        if channel is None:
            raise _bad("badaddr", f"{shown(name)} is not a channel (see `noti channels`)")
        items = [given] if isinstance(given, str) else given
        if items is None:
            continue
        if not isinstance(items, (list, tuple)):
            raise _bad("badaddr", f"the {channel.value} addresses are a string or a list, got {shown(given)}")
        if len(items) > ADDRESSES_MAX:
            raise _bad("badaddr", f"at most {ADDRESSES_MAX} {channel.value} addresses, got {len(items)}")
        clean: list[str] = []
        for item in items:
            try:
                address = validate_target(channel, item)
            except InvalidInput as exc:
                raise _bad("badaddr", f"a {channel.value} address: {exc.message}") from None
            if address not in clean:
                clean.append(address)
        if clean:
            out[channel.value] = tuple(clean)
    return out


def _object(value: object, what: str) -> Mapping[str, Any]:
    """A profile or a patch as given: a mapping, or the JSON text of one within
    :data:`PROFILE_MAX_BYTES`.

    Raises:
        InvalidInput: ``e.cmd.noti.rcpt.toobig``, ``e.cmd.noti.rcpt.baddoc``.
    """
    if isinstance(value, (str, bytes)):
        if len(value) > PROFILE_MAX_BYTES:
            raise _bad("toobig", f"a profile is at most {PROFILE_MAX_BYTES} bytes")
        value = load_json(value, what=what, code="e.cmd.noti.rcpt.baddoc")
    if not isinstance(value, Mapping):
        raise _bad("baddoc", f"{what} is an object, got {shown(value)}")
    return value


def parse_recipient(value: object, *, rid: str | None = None, now_ms: int = 0) -> Recipient:
    """A profile from what a caller gave (a mapping, or a JSON text of one); ``rid`` is the id
    when the caller names it apart (an HTTP path, a CLI argument): a body's own ``id`` must
    then agree with it.

    Raises:
        InvalidInput: ``e.cmd.noti.rcpt.*``: a bad id, address, locale, timezone, quiet hours,
        attributes, an unknown key, or a profile over :data:`PROFILE_MAX_BYTES`.
    """
    value = _object(value, "the profile")
    unknown = sorted(str(k) for k in value if k not in _KEYS)
    if unknown:
        raise _bad("baddoc", f"unknown profile keys: {', '.join(shown(k) for k in unknown[:5])}")
    given_id = value.get("id")
    if rid is not None:
        rid = recipient_id(rid)
        if given_id is not None and str(given_id) != rid:
            raise _bad("badid", f"the profile's id {shown(given_id)} is not {shown(rid)}")
    else:
        rid = recipient_id(given_id)
    locale = value.get("locale")
    timezone = value.get("timezone")
    quiet = value.get("quiet_hours")
    if quiet is None or quiet == QUIET_DEFAULT:
        quiet_text = QUIET_DEFAULT
    elif quiet in (QUIET_OFF, ""):
        quiet_text = QUIET_OFF
    else:
        parsed = parse_quiet(quiet)
        quiet_text = str(parsed) if parsed is not None else QUIET_OFF
    attributes = value.get("attributes")
    if attributes is None:
        attrs: dict[str, Any] = {}
    else:
        attrs, _ = plain_json(
            attributes, what="attributes", code="e.cmd.noti.rcpt.badattrs", max_bytes=ATTRIBUTES_MAX_BYTES
        )
        _check_keys(attrs)
    recipient = Recipient(
        id=rid,
        addresses=_addresses(value.get("addresses")),
        locale=parse_locale(locale) if locale is not None else None,
        timezone=parse_timezone(timezone) if timezone is not None else None,
        quiet_hours=quiet_text,
        attributes=attrs,
        created_ms=now_ms,
        updated_ms=now_ms,
    )
    if len(recipient.to_json().encode()) > PROFILE_MAX_BYTES:
        raise _bad("toobig", f"a profile is at most {PROFILE_MAX_BYTES} bytes as JSON")
    return recipient


def _check_keys(value: Any) -> None:
    """Refuse attribute keys (at any depth) that are empty, over 128 characters, or hold a
    control character, a line break or a lone surrogate: templates name them, logs show them.

    Raises:
        InvalidInput: ``e.cmd.noti.rcpt.badattrs``.
    """
    if isinstance(value, dict):
        for key, item in value.items():
            problem = (
                "empty"
                if not key
                else "over 128 characters"
                if len(key) > 128
                else bad_character(key, one_line=True)
            )
            if problem is not None:
                raise _bad("badattrs", f"an attribute key {shown(key)} is not allowed: {problem}")
            _check_keys(item)
    elif isinstance(value, list):
        for item in value:
            _check_keys(item)


def merge_patch(current: Recipient, patch: object, *, now_ms: int) -> Recipient:
    """``current`` updated by ``patch`` (RFC 7396 JSON merge patch over the profile's JSON:
    a key set to null is removed, an object merges key by key, anything else replaces); the
    result is checked as a whole profile.

    Raises:
        InvalidInput: as :func:`parse_recipient`; ``e.cmd.noti.rcpt.badid`` when the patch
        changes the id.
    """
    patch = _object(patch, "the profile patch")
    base = current.to_dict()
    del base["created_ms"], base["updated_ms"]
    merged = _merge(base, patch)
    if not isinstance(merged, Mapping):  # pragma: no cover - a mapping merged with a mapping
        raise _bad("baddoc", "a profile patch is an object")
    updated = parse_recipient(merged, rid=current.id, now_ms=now_ms)
    return replace(updated, created_ms=current.created_ms)


def _merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, Mapping):
        return patch
    out = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _merge(out.get(key), value)
    return out
