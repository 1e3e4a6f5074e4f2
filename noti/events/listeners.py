"""Listeners, persisted in Redis: who is told about which events, and how.

All listeners live in one hash, ``noti:listeners`` (name → JSON), with a version counter
``noti:listeners:version`` bumped by every change, so a processor reloads them only when
they changed (it reads the version in the same round trip that takes the next event). A
stored listener's ``seq`` is the version its put made: listeners run in that order (their
ids, random within one millisecond, do not tell which of two made in it came first;
listeners stored before ``seq`` existed have none and run first, by id).
Changes are compare-and-set Lua scripts: two clients adding the same name never both win.

Whose events a listener hears (``from_users``): by default only its owner's own, whoever the
owner is (root members' listeners too). Its owner may opt in to other users' events by name,
or to everyone's with ``["*"]``, and only to users whose events the owner may read (so only
root members and administrators may name others). A listener stored by a release that had no
``from_users`` reads back as owner-only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import redis

from noti.access.users import User, resolve_user
from noti.config import Settings
from noti.core.keys import Keys
from noti.core.record import Channel
from noti.errors import InvalidInput, NotFound, PermissionDenied
from noti.events.actions import Action, CompiledAction, NotifyAction, TaskAction, compile_action
from noti.events.event import matches
from noti.events.templates import CompiledFilter, compile_filter
from noti.inputs import USER_NAME, could_be_id, finite_number, integer, shown
from noti.redis.conn import load_script
from noti.redis.outage import translate_errors

__all__ = [
    "ANY_USER",
    "BACKOFF_MAX_S",
    "FROM_USERS_MAX",
    "RETRIES_MAX",
    "CompiledListener",
    "Listener",
    "ListenerRegistry",
    "check_from_users",
    "hearing",
    "level_cap",
    "parse_from_users",
    "retry_policy",
    "validate_listener_name",
]

_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,99}\Z")
_DECIMAL = re.compile(r"\s*[+-]?([0-9]{1,12}(\.[0-9]{0,9})?|\.[0-9]{1,9})\s*\Z")
LISTENER_MAX_BYTES = 64 * 1024
#: Most retries a listener may declare for its own failures.
RETRIES_MAX = 20
#: Longest back-off between two attempts of a listener (a day): beyond it a typo is likelier.
BACKOFF_MAX_S = 86_400.0
#: The ``from_users`` entry that opts a listener in to every user's events its owner may read.
ANY_USER = "*"
#: Most user names one listener's ``from_users`` may list (beyond it, ``*`` and a filter on
#: ``_event.user`` say it better).
FROM_USERS_MAX = 100
_FROM_CODE = "e.noti.listener.badfrom"


def validate_listener_name(name: object) -> str:
    """``name`` when it is a valid listener name (1-100 letters, digits, ``_ . : -``).

    Raises:
        InvalidInput: ``e.noti.listener.badname``.
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidInput(
            f"a listener name is 1-100 letters, digits and _ . : - (not starting with . : -), got {name!r}",
            code="e.noti.listener.badname",
        )
    return name


def retry_policy(retries: object = 0, backoff: object = 0) -> tuple[int, float]:
    """A listener's retry policy, checked: ``retries`` (0-:data:`RETRIES_MAX` more attempts
    after a failure) and ``backoff`` (seconds to wait before each, 0-:data:`BACKOFF_MAX_S`).
    Strings of decimal digits are read as numbers (the CLI passes its options' text).

    Raises:
        InvalidInput: ``e.noti.listener.badretries``, ``e.noti.listener.badbackoff``.
    """
    count = integer(
        retries,
        what="retries",
        code="e.noti.listener.badretries",
        minimum=0,
        maximum=RETRIES_MAX,
        digits=True,
    )
    if isinstance(backoff, str) and _DECIMAL.match(backoff):
        backoff = float(backoff)
    seconds = finite_number(
        backoff, what="backoff (seconds)", code="e.noti.listener.badbackoff", minimum=0, maximum=BACKOFF_MAX_S
    )
    if seconds and not count:
        raise InvalidInput(
            "a backoff needs retries (the back-off is the wait before each retry)",
            code="e.noti.listener.badbackoff",
        )
    return count, seconds


def parse_from_users(value: object) -> tuple[str, ...]:
    """Whose events a listener hears besides its owner's, checked: None or empty (nobody
    else: the default), ``["*"]`` (everyone whose events the owner may read), or a list of
    1-:data:`FROM_USERS_MAX` user names (repeats dropped, order kept). A string is read as
    comma-separated entries, spaces around them ignored (the CLI passes its option's text:
    ``alice,bob`` or ``*``).

    Raises:
        InvalidInput: ``e.noti.listener.badfrom``.
    """
    if value is None:
        return ()
    if isinstance(value, str):
        if len(value) > FROM_USERS_MAX * 66:
            raise InvalidInput(f"from_users is {len(value)} characters long", code=_FROM_CODE)
        # spaces around the commas are allowed ("bob, alice"); other white space is refused
        items: list[object] = [part.strip(" ") for part in value.split(",")] if value.strip(" ") else []
    elif isinstance(value, list | tuple):
        items = list(value)
    else:
        raise InvalidInput(
            f"from_users is a list of user names, or [{ANY_USER!r}] for everyone's events,"
            f" got {type(value).__name__}",
            code=_FROM_CODE,
        )
    if len(items) > FROM_USERS_MAX:
        raise InvalidInput(
            f"from_users names {len(items)} users; the limit is {FROM_USERS_MAX} (use"
            f" [{ANY_USER!r}] and a filter on _event.user)",
            code=_FROM_CODE,
        )
    names: list[str] = []
    for item in items:
        if not isinstance(item, str) or not (item == ANY_USER or USER_NAME.fullmatch(item)):
            raise InvalidInput(
                f"from_users: {shown(item)} is neither a user name (1-64 letters, digits or _ . @ + -)"
                f" nor {ANY_USER!r}",
                code=_FROM_CODE,
            )
        if item not in names:
            names.append(item)
    if ANY_USER in names and len(names) > 1:
        raise InvalidInput(
            f"from_users: {ANY_USER!r} already means every user; give it alone", code=_FROM_CODE
        )
    return tuple(names)


def check_from_users(owner: User, names: tuple[str, ...]) -> tuple[str, ...]:
    """``names`` (from :func:`parse_from_users`) when ``owner`` may read the events of each
    (``*``: of everyone, so root members and administrators only), without ``owner``'s own
    name, which a listener always hears.

    Raises:
        PermissionDenied: ``e.noti.listener.from.nopvg``.
    """
    for name in names:
        if not (owner.is_root if name == ANY_USER else owner.can_touch(name)):
            whose = "everyone's events" if name == ANY_USER else f"the events of {name}"
            raise PermissionDenied(
                f"{owner.name} may not make a listener hear {whose}: a listener hears only events"
                " its owner may read (only members of the root group may read other users')",
                code="e.noti.listener.from.nopvg",
            )
    return tuple(name for name in names if name != owner.name)


def _stored_from_users(value: object) -> tuple[str, ...]:
    """``from_users`` as stored; absent (a listener of a release without it) or unreadable:
    nobody else (owner-only, the safe reading)."""
    try:
        return parse_from_users(value)
    except InvalidInput:
        return ()


@dataclass(frozen=True, slots=True)
class Listener:
    """A subscription: events whose name matches ``event`` run ``action`` as ``user``, for
    the events of ``user`` and of those ``from_users`` names (:meth:`hears`)."""

    id: str
    name: str
    event: str
    user: str
    action: Action
    filter: str | None = None
    created_ms: int = 0
    #: Its retry policy (:func:`retry_policy`): after a failure, run it again up to
    #: ``retries`` times, ``backoff_s`` seconds after the failure, before giving up.
    retries: int = 0
    backoff_s: float = 0.0
    #: Whose events it hears besides its owner's (:func:`parse_from_users`): ``()`` nobody's
    #: (the default, and what a listener stored without the field reads as), ``("*",)``
    #: everyone's, or user names. The processor also requires that the owner may read them.
    from_users: tuple[str, ...] = ()
    #: Its place in the running order, given by Redis when it is stored (0: not stored yet,
    #: or stored by a release without it); not part of what is written (``listener_put.lua``
    #: adds it) and not compared.
    seq: int = field(default=0, compare=False)

    def hears(self, sender: str) -> bool:
        """Does it run for events dispatched by ``sender``, as far as its own opt-in goes
        (the owner's right to read them is checked by the processor)?"""
        return sender == self.user or ANY_USER in self.from_users or sender in self.from_users

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "event": self.event,
            "user": self.user,
            "action": self.action.to_json(),
            "filter": self.filter,
            "created_ms": self.created_ms,
            "retries": self.retries,
            "backoff_s": self.backoff_s,
            "from_users": list(self.from_users),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Listener:
        spec = data["action"]
        action: Action
        if spec.get("kind") == "task":
            action = TaskAction(spec["task"])
        else:
            action = NotifyAction(
                Channel(spec["type"]),
                spec["target"],
                spec.get("fields") or {},
                spec.get("lv", 1),
                spec.get("provider"),
            )
        return cls(
            id=data["id"],
            name=data["name"],
            event=data["event"],
            user=data["user"],
            action=action,
            filter=data.get("filter"),
            created_ms=int(data.get("created_ms", 0)),
            retries=int(data.get("retries", 0)),
            backoff_s=float(data.get("backoff_s", 0.0)),
            from_users=_stored_from_users(data.get("from_users")),
            seq=int(data.get("seq", 0)),
        )

    def encode(self) -> str:
        """The stored JSON text.

        Raises:
            InvalidInput: ``e.noti.listener.toolarge``.
        """
        text = json.dumps(self.to_json(), ensure_ascii=False, separators=(",", ":"))
        if len(text.encode()) > LISTENER_MAX_BYTES:
            raise InvalidInput(
                f"a listener is at most {LISTENER_MAX_BYTES} bytes of JSON", code="e.noti.listener.toolarge"
            )
        return text


def _role(settings: Settings, name: str) -> User | None:
    """The user called ``name`` with their role now, or None for a name no longer valid."""
    try:
        return resolve_user(settings, name)
    except InvalidInput:
        return None


def hearing(
    listeners: list[tuple[Listener, CompiledListener | InvalidInput]], sender: str, settings: Settings
) -> list[tuple[Listener, CompiledListener | InvalidInput]]:
    """Those of ``listeners`` that run for an event of ``sender``: their owner's own events;
    another user's only when the listener opted in to them (:meth:`Listener.hears`) and its
    owner may read them (roles as the settings say now: a root member made a plain user
    again no longer hears others)."""
    readers: dict[str, bool] = {}

    def may_read(owner: str) -> bool:
        if owner not in readers:
            found = _role(settings, owner)  # an owner name no longer valid reads nothing
            readers[owner] = found is not None and found.can_touch(sender)
        return readers[owner]

    return [
        (listener, ready)
        for listener, ready in listeners
        if listener.user == sender or (listener.hears(sender) and may_read(listener.user))
    ]


def level_cap(settings: Settings, owner: str, sender: str) -> int:
    """The highest level a listener of ``owner`` may give what it makes for an event of
    ``sender``: the lower of the two users' caps (1 for a name no longer valid)."""
    return min(found.level_cap if (found := _role(settings, name)) else 1 for name in (owner, sender))


@dataclass(frozen=True, slots=True)
class CompiledListener:
    """A listener ready to run: its templates and filter compiled."""

    listener: Listener
    action: CompiledAction
    filter: CompiledFilter | None

    @classmethod
    def build(cls, listener: Listener, *, check_task: bool = True) -> CompiledListener:
        """Compile ``listener``.

        Raises:
            InvalidInput: see :func:`~noti.events.actions.compile_action`,
            :func:`~noti.events.templates.compile_filter`.
        """
        action = compile_action(listener.action, check_task=check_task)
        flt = compile_filter(listener.filter) if listener.filter is not None else None
        return cls(listener, action, flt)


class ListenerRegistry:
    """The listeners of one key prefix, with a per-process cache of compiled listeners."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.redis = client
        self.keys = keys
        self._put = load_script(client, "listener_put", package="noti.events")
        self._delete = load_script(client, "listener_del", package="noti.events")
        self._cache_version: str | None = None
        self._cache: list[tuple[Listener, CompiledListener | InvalidInput]] = []

    def get(self, name: str) -> tuple[Listener, str] | None:
        """The listener called ``name`` and its stored text (for :meth:`put` / :meth:`delete`);
        None when there is none (or ``name`` cannot be a name: not asked of Redis)."""
        if not could_be_id(name):
            return None
        with translate_errors(self.redis):
            text = cast(str | None, self.redis.hget(self.keys.listeners, name))
        return (Listener.from_json(json.loads(text)), text) if text else None

    def require(self, name: str) -> tuple[Listener, str]:
        """:meth:`get`, for a listener that must exist.

        Raises:
            NotFound: ``e.noti.listener.not_found``.
        """
        found = self.get(name)
        if found is None:
            raise NotFound(f"no listener is called {shown(name)}", code="e.noti.listener.not_found")
        return found

    def all(self) -> list[Listener]:
        """Every listener, in the order they were stored (the order they run in)."""
        with translate_errors(self.redis):
            values = self.redis.hvals(self.keys.listeners)
        listeners = [Listener.from_json(json.loads(v)) for v in values]
        return sorted(listeners, key=lambda x: (x.seq, x.id, x.name))

    def put(self, listener: Listener, *, expected: str) -> bool:
        """Store ``listener`` if the text stored under its name is still ``expected`` (``""``:
        no listener of that name); False when someone changed it meanwhile."""
        with translate_errors(self.redis):
            done = self._put(
                keys=[self.keys.listeners, self.keys.listeners_version],
                args=[listener.name, expected, listener.encode()],
            )
        return bool(int(done))

    def delete(self, name: str, *, expected: str) -> bool:
        """Remove listener ``name`` if its stored text is still ``expected``; False otherwise."""
        with translate_errors(self.redis):
            done = self._delete(
                keys=[self.keys.listeners, self.keys.listeners_version], args=[name, expected]
            )
        return bool(int(done))

    # --- the processor's view ---------------------------------------------------------------

    def matching(
        self, name: str, version: str | None
    ) -> list[tuple[Listener, CompiledListener | InvalidInput]]:
        """The listeners of event ``name`` in creation order, each compiled or with the reason
        it no longer compiles. Reloads only when ``version`` (read with the event) differs
        from the cached one."""
        if version is None or version != self._cache_version:
            self._reload(version)
        return [(listener, ready) for listener, ready in self._cache if matches(listener.event, name)]

    def _reload(self, version: str | None) -> None:
        cache: list[tuple[Listener, CompiledListener | InvalidInput]] = []
        for listener in self.all():
            try:
                # An unknown task is reported per event (it may be registered later), not here.
                cache.append((listener, CompiledListener.build(listener, check_task=False)))
            except InvalidInput as exc:
                cache.append((listener, exc))
        self._cache, self._cache_version = cache, version
