"""The channel registry: which channels exist, and what each one is.

A channel is how a notification travels (``noti_type``: ``sms``, ``email``, ``push`` …). Each
is one package under ``noti/channels/`` defining a :class:`ChannelSpec`: its name, its fields
and their hash names, how its targets and fields are checked and its targets masked. Its
providers live beside it and name it in their ``channels``; its Celery queue is
``noti.<name>``. The core knows the built-in channels by name only (:data:`BUILTIN`: import
paths, loaded on first use), and third-party packages add channels through the entry-point
group ``noti.channels`` (``mychannel = "mypkg.channel:MyChannel"``), without editing noti.

:class:`Channel` is the channel's identity: a ``str`` (``Channel("sms") == "sms"``), one
object per name, so ``record.channel is Channel.SMS`` holds and a channel pickles, hashes,
prints and JSON-encodes as its name. ``Channel(name)`` finds a registered channel (or raises
``ValueError``), ``for channel in Channel`` walks them all (built-ins first, in a fixed order,
then installed ones by name), ``channel.spec`` is its :class:`ChannelSpec`.

Records written before the registry (when ``Channel`` was a closed enum of four) are read
unchanged: the names, hash fields, queues and key layout of the four are what they were.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, ClassVar

from noti.errors import InvalidConfig, InvalidInput
from noti.imports import load_object

__all__ = [
    "BUILTIN",
    "ENTRY_POINT_GROUP",
    "Channel",
    "ChannelSpec",
    "EveryChannel",
    "FieldUse",
    "bad_target",
    "defined_at",
    "fields_by_name",
    "channel_problems",
    "generation",
    "register",
    "unregister",
]

log = logging.getLogger(__name__)

#: name -> "module:Class" of the channels that ship with noti, in the order they are listed.
BUILTIN: dict[str, str] = {
    "sms": "noti.channels.sms:SmsChannel",
    "weixin": "noti.channels.weixin:WeixinChannel",
    "email": "noti.channels.email:EmailChannel",
    "webhook": "noti.channels.webhook:WebhookChannel",
    "push": "noti.channels.push:PushChannel",
    "chat": "noti.channels.chat:ChatChannel",
}
ENTRY_POINT_GROUP = "noti.channels"
#: A channel's name: it is a Celery queue's suffix, a key's suffix and a hash field's infix.
NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")
#: Hash fields of every record (:func:`noti.core.record.to_hash`): no channel may take them.
RESERVED_PREFIXES = ("noti_dlv", "noti_fallback", "noti_status_", "noti_sent_by", "noti_retry")
#: What every notification takes besides its channel's fields (``notify()``'s keywords, the
#: HTTP API's keys): no channel's field may be called so.
RESERVED_NAMES = frozenset(
    {
        "type",
        "to",
        "target",
        "lv",
        "level",
        "user",
        "provider",
        "retry_max",
        "retry_policy",
        "delay",
        "eta",
        "at",
        "identifier",
        "status_callback",
        "idempotency_key",
        "fallback",
        "level_cap",
        "providers_allowed",
        "after_s",
    }
)


class ChannelSpec:
    """What a channel package defines: subclass it, set the class attributes, override the
    checks. One instance per process (:attr:`Channel.spec`).

    A field's value is stored as text in the record's hash, JSON-encoded when its name is in
    :attr:`json_fields`. The core refuses unknown and missing fields before
    :meth:`check_fields` runs, and refuses an empty or over-long target, or one with control
    characters, before :meth:`check_target` runs.
    """

    #: ``noti_type``: lower case letters, digits and ``_`` (see :data:`NAME`).
    name: ClassVar[str]
    #: What people call it ("SMS", "mobile push").
    title: ClassVar[str]
    #: Python field name -> the record hash's field (``{"text": "noti_sms_text"}``).
    fields: ClassVar[Mapping[str, str]]
    #: Fields every notification of the channel must have.
    required: ClassVar[tuple[str, ...]] = ()
    #: Fields holding a JSON value (stored JSON-encoded).
    json_fields: ClassVar[frozenset[str]] = frozenset()
    #: The hash field of the provider's message id; empty: ``noti_<name>_msgid``.
    msgid_field: ClassVar[str] = ""
    #: One line on what a target is (the CLI's help, the HTTP API's schema).
    target_help: ClassVar[str] = ""
    #: Per field, one line on what it is (the CLI's help, the HTTP API's schema).
    field_help: ClassVar[Mapping[str, str]] = {}
    #: The field ``noti add`` reads from standard input when it is not given; empty: none.
    stdin_field: ClassVar[str] = ""
    #: Where its page is in the documentation (``channels/sms.md``).
    docs: ClassVar[str] = ""

    def check_target(self, target: str) -> str:
        """The target, checked for this channel (already stripped, non-empty, at most 2,048
        characters, no control character).

        Raises:
            InvalidInput: ``e.cmd.noti.add.badtarget``, saying what a target is.
        """
        return target

    def check_fields(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        """The given fields (no unknown one, no required one missing), checked and normalised.

        Raises:
            InvalidInput: ``e.cmd.noti.add.badtext``, ``badcontent`` or ``badfield``.
        """
        return dict(fields)

    def mask_target(self, target: str) -> str:
        """The target fit for logs and task views (personal data mostly hidden)."""
        from noti.core.privacy import mask_target

        return mask_target(target)


class EveryChannel(frozenset["Channel"]):
    """The ``channels`` of a provider that serves every channel, those registered after it
    was made included (the sandbox)."""

    def __contains__(self, value: object) -> bool:
        return isinstance(value, Channel)

    def __iter__(self) -> Iterator[Channel]:
        return iter(Channel)

    def __len__(self) -> int:
        return len(Channel)


@dataclass(frozen=True, slots=True)
class FieldUse:
    """One channel's use of a field name: what it means there (one line), and whether it is
    JSON or the channel's standard-input field."""

    channel: str
    help: str
    json: bool
    stdin: bool


def fields_by_name(
    channels: Iterable[Channel], *, broken: Callable[[Channel, InvalidConfig], None] | None = None
) -> dict[str, list[FieldUse]]:
    """Every field name ``channels`` take, each with the channels that take it, in order: what
    the CLI's options and the HTTP API's schema are built from. A channel whose package cannot
    be loaded is left out (``broken`` hears of it)."""
    found: dict[str, list[FieldUse]] = {}
    for channel in channels:
        try:
            spec = channel.spec
        except InvalidConfig as exc:
            if broken is not None:
                broken(channel, exc)
            continue
        for name in spec.fields:
            text = spec.field_help.get(name) or f"{spec.title}: {name}"
            use = FieldUse(channel.value, text, name in spec.json_fields, spec.stdin_field == name)
            found.setdefault(name, []).append(use)
    return found


def bad_target(message: str) -> InvalidInput:
    """The refusal of a target (``e.cmd.noti.add.badtarget``)."""
    return InvalidInput(message, code="e.cmd.noti.add.badtarget")


def channel_problems(spec: type[ChannelSpec], name: str, *, builtin: bool) -> list[str]:
    """What is wrong with a channel class registered as ``name`` (empty: nothing)."""
    problems = []
    if not (isinstance(spec, type) and issubclass(spec, ChannelSpec)):
        return [f"{spec!r} is not a noti ChannelSpec class"]
    if getattr(spec, "name", None) != name:
        problems.append(f"its name is {getattr(spec, 'name', None)!r}, registered as {name!r}")
    fields = getattr(spec, "fields", None)
    if not isinstance(fields, Mapping) or not fields:
        return [*problems, "it has no fields"]
    for python_name, hash_field in fields.items():
        if not (isinstance(python_name, str) and python_name.isidentifier()):
            problems.append(f"field name {python_name!r} is not an identifier")
        elif python_name in RESERVED_NAMES:
            problems.append(f"field name {python_name!r} is one every notification takes")
        # a third-party channel's hash fields are its own: noti_<name>_…, so no channel and no
        # later field of the record can take them
        prefix = "noti_" if builtin else f"noti_{name}_"
        if not (isinstance(hash_field, str) and hash_field.startswith(prefix)):
            problems.append(f"field {python_name!r} is stored as {hash_field!r}: it must start with {prefix}")
        elif hash_field.startswith(RESERVED_PREFIXES):
            problems.append(f"field {python_name!r} takes the record's own field {hash_field!r}")
    for required in spec.required:
        if required not in fields:
            problems.append(f"required field {required!r} is not one of its fields")
    if not spec.json_fields <= set(fields):
        problems.append("json_fields names fields it does not have")
    if spec.stdin_field and spec.stdin_field not in fields:
        problems.append(f"stdin_field {spec.stdin_field!r} is not one of its fields")
    return problems


class _Registry(type):
    """The type of :class:`Channel`: iterating it walks the registered channels."""

    def __iter__(cls) -> Iterator[Channel]:
        _discover()
        return iter(tuple(_CHANNELS.values()))

    def __len__(cls) -> int:
        _discover()
        return len(_CHANNELS)

    def __contains__(cls, value: object) -> bool:
        return isinstance(value, str) and Channel.known(value)


#: Registered channels by name, in listing order (built-ins first), and where each is defined.
_CHANNELS: dict[str, Channel] = {}
_PATHS: dict[str, str] = {}
_SPECS: dict[str, ChannelSpec] = {}
_lock = threading.Lock()
_discovered = False
#: Bumped by every change of the registry (readers that cache what it holds compare it).
_generation = 0


class Channel(str, metaclass=_Registry):
    """``noti_type``: how a notification travels (see the module docstring)."""

    __slots__ = ()

    SMS: ClassVar[Channel]
    WEIXIN: ClassVar[Channel]
    EMAIL: ClassVar[Channel]
    WEBHOOK: ClassVar[Channel]
    PUSH: ClassVar[Channel]
    CHAT: ClassVar[Channel]

    def __new__(cls, value: str) -> Channel:
        found = _CHANNELS.get(value)
        if found is None:
            if isinstance(value, Channel):
                return value
            _discover()
            found = _CHANNELS.get(value)
            if found is None:
                raise ValueError(f"{value!r} is not a noti channel")
        return found

    @classmethod
    def known(cls, value: str) -> bool:
        """Whether ``value`` names a registered channel."""
        if value in _CHANNELS:
            return True
        _discover()
        return value in _CHANNELS

    @property
    def value(self) -> str:
        """Its name, as a plain ``str``."""
        return str.__str__(self)

    @property
    def name(self) -> str:
        """Its name in upper case (``SMS``), as the constant that holds it (what the enum
        before the registry called its name)."""
        return str.__str__(self).upper()

    @property
    def queue(self) -> str:
        """Its Celery queue."""
        return f"noti.{str.__str__(self)}"

    @property
    def spec(self) -> ChannelSpec:
        """Its :class:`ChannelSpec`, loaded on first use.

        Raises:
            InvalidConfig: its package cannot be imported or defines a broken channel.
        """
        spec = _SPECS.get(self)
        if spec is None:
            spec = _load(str.__str__(self))
        return spec

    def __str__(self) -> str:
        return str.__str__(self)

    def __repr__(self) -> str:
        return f"Channel({str.__str__(self)!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Channel, (str.__str__(self),))


def defined_at(channel: str) -> str:
    """Where a registered channel is defined (``"module:Class"``), or ``""``."""
    _discover()
    return _PATHS.get(channel, "")


def _new(name: str) -> Channel:
    return str.__new__(Channel, name)


def _load(name: str) -> ChannelSpec:
    path = _PATHS[name]
    cls = load_object(path, what=f"channel {name!r}")
    problems = channel_problems(cls, name, builtin=name in BUILTIN)  # type: ignore[arg-type]
    if problems:
        raise InvalidConfig(f"channel {name!r} ({path}): {'; '.join(problems)}")
    with _lock:
        spec = _SPECS.get(name)
        if spec is None:
            spec = _SPECS[name] = cls()  # type: ignore[operator]
    return spec


def _discover() -> None:
    """Add the installed channels (entry points) to the built-ins, once per process."""
    global _discovered
    if _discovered:
        return
    with _lock:
        if _discovered:
            return
        found = []
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            if ep.name in BUILTIN:
                log.warning("channel %r of %s is a built-in channel's name: ignored", ep.name, ep.value)
            elif not NAME.fullmatch(ep.name):
                log.warning(
                    "channel %r of %s: a channel's name is %s: ignored", ep.name, ep.value, NAME.pattern
                )
            else:
                found.append((ep.name, ep.value))
        for name, path in sorted(found):
            _PATHS.setdefault(name, path)
            _CHANNELS.setdefault(name, _new(name))
        _changed()
        _discovered = True


def _changed() -> None:
    global _generation
    _generation += 1


def generation() -> int:
    """A number that changes whenever a channel is registered or forgotten (readers that
    cache what the registry holds compare it)."""
    _discover()
    return _generation


def register(name: str, path: str) -> Channel:
    """Register the channel ``name`` defined at ``path`` (``"module:Class"``) in this process:
    what an entry point does, for a channel that is not installed as a package (tests, a
    project's own module named in ``NOTI_IMPORTS``).

    Raises:
        InvalidConfig: a bad name, or one already registered elsewhere.
    """
    if not NAME.fullmatch(name):
        raise InvalidConfig(f"channel name {name!r}: a channel's name is {NAME.pattern}")
    with _lock:
        if _PATHS.get(name, path) != path:
            raise InvalidConfig(f"channel {name!r} is already registered ({_PATHS[name]})")
        _PATHS[name] = path
        channel = _CHANNELS.setdefault(name, _new(name))
        _changed()
        return channel


def unregister(name: str) -> None:
    """Forget the channel ``name`` registered in this process (a test's, or a plugin being
    unloaded); the built-in channels stay. Its records, if any, can no longer be read here.

    Raises:
        InvalidConfig: ``name`` is a built-in channel.
    """
    if name in BUILTIN:
        raise InvalidConfig(f"channel {name!r} is built in: it cannot be unregistered")
    with _lock:
        _CHANNELS.pop(name, None)
        _PATHS.pop(name, None)
        _SPECS.pop(name, None)
        _changed()


for _name, _path in BUILTIN.items():
    _PATHS[_name] = _path
    _CHANNELS[_name] = _new(_name)
    setattr(Channel, _name.upper(), _CHANNELS[_name])
