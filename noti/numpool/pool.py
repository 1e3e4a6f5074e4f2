"""The sender-number pool: numbers shared by many processes, moved by one atomic Lua script.

Each number has a call state (idle/busy) and a registration state (up/down). Six events
(:class:`Event`) move it through the pool's state table, which lives in ``numpool.lua`` and
nowhere else: each event is one ``EVALSHA sha 1 <base> event number …`` (the plain calling
convention, noti's own arguments after it) over keys that share the base's hash tag
``{numpool:NAME}``, so it is atomic on a single Redis and on Redis Cluster. The data is in
the plain layout (a HASH of JSON states, a LIST of free numbers), so a plain client that
knows nothing of noti and noti share one pool; docs/howto/numpool.md lists what noti adds.

``call`` without a number takes the number that has been free (idle and up) the longest:
a number that becomes free goes to the tail of the free list and ``call`` takes the head,
so numbers are handed out in the order they were given back (least recently used). Every
free number is used in turn, which spreads the sending volume (and a carrier's per-number
limits) evenly, and the pick is deterministic, so tests can predict it.

A number noti's providers take is held under a lease (``lease_s``): if the worker dies
mid-send, the first script call after the lease ends hangs it up. Each number that becomes
free pushes a token on the pool's ``released`` list, so a sender waiting for one
(:meth:`NumberPool.wait_released`) wakes at once.

A pool belongs to the user whose ``add`` created it. Only its owner and root members (and
administrators) may fire its events or read it, and only root may give it to someone else
(:meth:`NumberPool.chown`); anyone else gets :class:`~noti.errors.PermissionDenied`
(``e.noti.pool.<verb>.nopvg``) and nothing changes. The check is made by the script call
that fires the event, so nothing can slip in between. A pool made before pools had owners
has none: root only, until ``chown`` gives it one. noti's own providers take their sender
numbers from the pool the operator named (``sender_pool``) through
:meth:`NumberPool.trusted`, which acts for no user.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import hashlib
import importlib.resources
import json
import logging
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import redis
from redis.commands.core import Script

from noti.access.users import User, resolve_user
from noti.config import Settings
from noti.core.keys import Keys
from noti.errors import InvalidConfig, InvalidInput, NoFreeNumber, PermissionDenied, TransitionRefused
from noti.inputs import POOL_NAME_PATTERN, check_name, finite_number, user_name
from noti.redis.conn import PoolClient
from noti.redis.outage import translate_errors

__all__ = [
    "POOL_NAME_PATTERN",
    "Event",
    "NumberPool",
    "NumberState",
    "PoolClient",
    "PoolSnapshot",
    "PoolStats",
    "Transition",
    "decode_state",
]

log = logging.getLogger(__name__)


#: How long a recipient keeps its sticky sender number after its last send, by default.
DEFAULT_STICKY_TTL_S = 24 * 3600.0

_POOL_NAME = re.compile(POOL_NAME_PATTERN)
#: A number: a phone number, or a sign name or sender id (any letters, 信息 included).
_NUMBER = re.compile(r"^[\w+*#.:@-]{1,64}$")


class NumberState(enum.StrEnum):
    """Where a number is: its call state (idle/busy) and registration state (up/down)."""

    NODATA = "nodata"  #: not in the pool
    IDLE_UP = "idle+up"  #: free: ``call`` may take it
    IDLE_DOWN = "idle+down"  #: added or unregistered, not in a call
    BUSY_UP = "busy+up"  #: in a call
    BUSY_DOWN = "busy+down"  #: in a call, unregistered meanwhile

    @property
    def busy(self) -> bool:
        return self in (NumberState.BUSY_UP, NumberState.BUSY_DOWN)

    @property
    def up(self) -> bool:
        return self in (NumberState.IDLE_UP, NumberState.BUSY_UP)


class Event(enum.StrEnum):
    """What happens to a number (the pool's six events)."""

    ADD = "add"
    DEL = "del"
    REG = "reg"
    UNREG = "unreg"
    CALL = "call"
    HANGUP = "hangup"


#: What each refusal reason of the table means, for error messages.
REASONS: Mapping[str, str] = {
    "unknown": "the number is not in the pool",
    "idle": "the number is not in a call",
    "down": "the number is not registered (down)",
    "busy": "the number is already in a call",
}


#: What a refused user may not do, by verb (``e.noti.pool.<verb>.nopvg``).
VERBS: Mapping[str, str] = {
    "add": "add numbers to",
    "del": "delete numbers from",
    "reg": "register numbers of",
    "unreg": "unregister numbers of",
    "call": "call numbers of",
    "hangup": "hang up numbers of",
    "show": "read",
    "chown": "give away",
}


@dataclass(frozen=True, slots=True)
class Transition:
    """An event the table accepted: the number's state before and after it."""

    pool: str
    number: str
    event: Event
    before: NumberState
    state: NumberState

    @property
    def changed(self) -> bool:
        return self.before is not self.state

    def line(self) -> str:
        """One readable line: ``1001  reg  idle+down -> idle+up``."""
        change = f"{self.before} -> {self.state}" if self.changed else f"{self.state} (unchanged)"
        return f"{self.number}  {self.event}  {change}"


@dataclass(frozen=True, slots=True)
class PoolStats:
    """How many numbers are in each state (``nodata`` is never counted)."""

    counts: Mapping[NumberState, int] = field(default_factory=dict)

    @classmethod
    def of(cls, states: Iterable[NumberState]) -> PoolStats:
        """The counts of ``states`` (one entry per number)."""
        counts: dict[NumberState, int] = {}
        for state in states:
            counts[state] = counts.get(state, 0) + 1
        return cls(counts)

    def __getitem__(self, state: NumberState) -> int:
        return self.counts.get(state, 0)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def free(self) -> int:
        """Numbers ``call`` may take now (idle and up)."""
        return self[NumberState.IDLE_UP]

    def as_dict(self) -> dict[str, int]:
        return {str(s): self[s] for s in NumberState if s is not NumberState.NODATA}


@dataclass(frozen=True, slots=True)
class PoolSnapshot:
    """A pool as one script call read it: its owner, every number's state, the free numbers."""

    #: The user who created the pool; None for a pool made before pools had owners, or one
    #: nobody has made yet.
    owner: str | None
    #: Every number and its state, sorted by number.
    numbers: Mapping[str, NumberState]
    #: The free numbers (idle and up), in the order ``call`` takes them.
    free: list[str]

    @property
    def stats(self) -> PoolStats:
        return PoolStats.of(self.numbers.values())


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


_BY_FLAGS = {
    (0, 0): NumberState.IDLE_DOWN,
    (0, 1): NumberState.IDLE_UP,
    (1, 0): NumberState.BUSY_DOWN,
    (1, 1): NumberState.BUSY_UP,
}


def decode_state(raw: str | bytes) -> NumberState | None:
    """A number's state as stored: the plain layout's JSON ``{"callstate": 0|1, "regstate": 0|1}``,
    or an earlier noti's string (``idle+up``); None when it is neither."""
    text = _text(raw)
    if not text.startswith("{"):
        try:
            return NumberState(text) if text != NumberState.NODATA else None
        except ValueError:
            return None
    try:
        fields = json.loads(text)
        flags = (int(fields["callstate"]), int(fields["regstate"]))
    except (ValueError, TypeError, KeyError):
        return None
    return _BY_FLAGS.get(flags)


@functools.cache
def _source() -> str:
    return importlib.resources.files("noti.numpool").joinpath("numpool.lua").read_text()


def _load_script(client: PoolClient) -> Script:
    source = _source()
    # register_script hashes locally; Script re-sends the source on NOSCRIPT (after SCRIPT
    # FLUSH or a fail-over), and RedisCluster sends SCRIPT LOAD to every primary.
    return client.register_script(source)


class NumberPool:
    """One named pool of sender numbers in Redis (or Redis Cluster), used by one user."""

    def __init__(
        self,
        name: str,
        *,
        user: str | User | None = None,
        client: PoolClient | None = None,
        keys: Keys | None = None,
        settings: Settings | None = None,
    ) -> None:
        """A handle on pool ``name`` for ``user`` (default: the settings' acting user, as for
        every API call); ``client``, ``keys`` and ``settings`` (which give the roles) default
        to this process's runtime.

        Raises:
            InvalidInput: ``e.noti.pool.badname`` for a name that is not 1-64 of
                ``A-Z a-z 0-9 _ . -`` (starting with a letter or digit); ``e.cmd.noti.baduser``.
            InvalidConfig: the key prefix holds a brace, which would break the hash tag.
        """
        if not isinstance(user, User):
            if settings is None:
                from noti.sending.runtime import get_runtime  # the edge: only when the caller gave none

                settings = get_runtime().settings
            user = resolve_user(settings, user)
        self._setup(name, client, keys, user)

    @classmethod
    def trusted(cls, name: str, *, client: PoolClient | None = None, keys: Keys | None = None) -> NumberPool:
        """A handle that acts for no user and passes no owner check: for noti's own providers,
        which take sender numbers from the pool the operator named in the settings
        (``sender_pool``). Applications and commands use ``NumberPool(name, user=…)``.

        Raises:
            InvalidInput, InvalidConfig: as the constructor.
        """
        pool = cls.__new__(cls)
        pool._setup(name, client, keys, None)
        return pool

    def _setup(self, name: str, client: PoolClient | None, keys: Keys | None, user: User | None) -> None:
        if not isinstance(name, str) or not _POOL_NAME.fullmatch(name):
            raise InvalidInput(
                f"bad pool name {name!r}: use 1-64 letters, digits, '_', '.' or '-'",
                code="e.noti.pool.badname",
            )
        if client is None or keys is None:
            from noti.sending.runtime import get_runtime  # the edge: only when the caller gave none

            runtime = get_runtime()
            client = runtime.numpool_redis if client is None else client
            keys = runtime.keys if keys is None else keys
        base = keys.numpool_base(name)
        if base.count("{") != 1 or base.count("}") != 1:
            raise InvalidConfig(f"pool {name}: key base {base!r} must hold exactly one hash tag {{...}}")
        self.name = name
        self.keys = keys
        #: The acting user; None for a :meth:`trusted` handle.
        self.user = user
        self._client = client
        self._base = base
        self._script = _load_script(client)
        # The script's ARGV[3] and ARGV[4]: who acts, and whether any pool is theirs.
        self._actor = ["", "0"] if user is None else [user.name, "1" if user.is_root else "0"]

    def __repr__(self) -> str:
        return f"<NumberPool {self.name!r}>"

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        # translate_errors only reads the client's masked URL, which a RedisCluster lacks.
        with translate_errors(cast(redis.Redis, self._client)):
            yield

    # --- events -------------------------------------------------------------------------------

    def fire(self, event: Event | str, number: str) -> Transition:
        """Apply ``event`` to ``number`` atomically, as the state table says.

        Raises:
            InvalidInput: an unknown event (``e.noti.pool.badevent``) or a malformed number
                (``e.noti.pool.badnumber``: 1-64 letters (any script), digits or ``_ + * # . : @ -``).
            PermissionDenied: ``e.noti.pool.<event>.nopvg``: the pool is someone else's (see
                the module's docstring); nothing changed.
            TransitionRefused: the table refuses ``event`` in the number's state.
            StoreUnavailable: Redis cannot be reached.
        """
        try:
            ev = Event(event)
        except ValueError:
            raise InvalidInput(f"unknown pool event {event!r}", code="e.noti.pool.badevent") from None
        return self._run(ev, self._number(number))

    def add(self, number: str) -> Transition:
        """Put ``number`` in the pool, idle and down (already there: unchanged).

        Raises:
            InvalidInput, PermissionDenied, StoreUnavailable: see :meth:`fire`.
        """
        return self.fire(Event.ADD, number)

    def _register(self) -> None:
        """Name this pool in the pool registry (:attr:`Keys.numpools`), where the metrics and
        ``noti status`` find the pools. A key of its own, outside the pool's hash tag, so a
        command of its own (the script must touch one cluster slot only); only ``add`` calls it."""
        with self._errors():
            self._client.sadd(self.keys.numpools, self.name)

    def delete(self, number: str) -> Transition:
        """Take ``number`` out of the pool, whatever its state (not there: unchanged).

        Raises:
            InvalidInput, PermissionDenied, StoreUnavailable: see :meth:`fire`.
        """
        return self.fire(Event.DEL, number)

    def register(self, number: str) -> Transition:
        """Mark ``number`` up (registered); an idle one becomes free.

        Raises:
            TransitionRefused: ``unknown`` (not in the pool).
            InvalidInput, PermissionDenied, StoreUnavailable: see :meth:`fire`.
        """
        return self.fire(Event.REG, number)

    def unregister(self, number: str) -> Transition:
        """Mark ``number`` down; it is no longer free, and a call on it goes on.

        Raises:
            TransitionRefused: ``unknown`` (not in the pool).
            InvalidInput, PermissionDenied, StoreUnavailable: see :meth:`fire`.
        """
        return self.fire(Event.UNREG, number)

    def hangup(self, number: str) -> Transition:
        """End the call on ``number``: it becomes idle (and free if it is up).

        Raises:
            TransitionRefused: ``unknown`` (not in the pool) or ``idle`` (not in a call).
            InvalidInput, PermissionDenied, StoreUnavailable: see :meth:`fire`.
        """
        return self.fire(Event.HANGUP, number)

    def call(
        self,
        number: str | None = None,
        *,
        sticky_to: str | None = None,
        sticky_ttl_s: float = DEFAULT_STICKY_TTL_S,
        lease_s: float | None = None,
    ) -> Transition:
        """Take ``number``, or without one the number free the longest, and mark it busy.

        With ``sticky_to`` (a recipient; no ``number``), the recipient gets the number it
        got last time while that number is up, and the binding lasts ``sticky_ttl_s`` after
        each call. Only a hash of the recipient is stored. With ``lease_s``, the number is
        hung up by the pool itself once that long has passed without a hang-up (the caller
        died): the first script call after the lease ends does it.

        Raises:
            NoFreeNumber: no number is idle and up; or the sticky number is in a call.
            TransitionRefused: ``number`` given and the table refuses (``unknown``, ``down``, ``busy``).
            InvalidInput, PermissionDenied, StoreUnavailable: see :meth:`fire`; ``e.noti.pool.badsticky`` for
                ``sticky_to`` with a number, a ``sticky_to`` that is not text (or holds a
                control character or a lone surrogate), or a TTL under 1 ms or not finite;
                ``e.noti.pool.badlease`` for a lease under 1 ms, over a day or not finite.
        """
        lease_ms = 0
        if lease_s is not None:
            lease_ms = int(
                finite_number(
                    lease_s, what="lease (s)", code="e.noti.pool.badlease", minimum=0.001, maximum=86400
                )
                * 1000
            )
        if sticky_to is None:
            return self._run(Event.CALL, "" if number is None else self._number(number), lease_ms=lease_ms)
        if number is not None:
            raise InvalidInput("call takes a number or sticky_to, not both", code="e.noti.pool.badsticky")
        check_name(sticky_to, what="sticky_to (the recipient)", code="e.noti.pool.badsticky", max_len=2048)
        seconds = finite_number(
            sticky_ttl_s,
            what="sticky TTL (s)",
            code="e.noti.pool.badsticky",
            minimum=0,
            maximum=10 * 366 * 86400,
        )
        ttl_ms = int(seconds * 1000)
        if ttl_ms < 1:
            raise InvalidInput(f"sticky TTL {sticky_ttl_s!r} s is too short", code="e.noti.pool.badsticky")
        digest = hashlib.sha256(sticky_to.encode()).hexdigest()[:32]
        return self._run(Event.CALL, "", sticky=(digest, ttl_ms), lease_ms=lease_ms)

    def wait_released(self, timeout_s: float) -> bool:
        """Block until a number of this pool becomes free (a hang-up, a registration, an
        expired lease), at most ``timeout_s``; True when one did. A wake-up is a hint: the
        number may be taken by another caller first, so call again.

        Raises:
            StoreUnavailable: Redis cannot be reached.
        """
        timeout = max(0.001, round(float(timeout_s), 3))
        with self._errors():
            return self._client.blpop([self.keys.numpool(self.name, "released")], timeout) is not None

    def chown(self, owner: str) -> str | None:
        """Give the pool to ``owner`` (root members and administrators only); the previous
        owner (None: it had none). A pool nobody has made yet is made, empty, for ``owner``:
        so an operator makes a pool for someone, or keeps a provider's ``sender_pool`` name.

        Raises:
            PermissionDenied: ``e.noti.pool.chown.nopvg``: not a root member; nothing changed.
            InvalidInput: ``e.cmd.noti.baduser``: ``owner`` cannot be a user name.
            StoreUnavailable: Redis cannot be reached.
        """
        owner = user_name(owner)
        if self.user is not None:
            self.user.require_root("e.noti.pool.chown.nopvg", f"give away the number pool {self.name}")
        reply = self._call("chown", owner)
        self._refuse_if_denied("chown", reply)
        return _text(reply[2]) or None

    @contextlib.contextmanager
    def calling(
        self,
        number: str | None = None,
        *,
        sticky_to: str | None = None,
        sticky_ttl_s: float = DEFAULT_STICKY_TTL_S,
    ) -> Iterator[str]:
        """Call (see :meth:`call`), yield the number, and always hang up after.

        A hang-up the table refuses (someone deleted the number or hung it up meanwhile) is
        logged, not raised: the number is no longer ours either way.

        Raises:
            NoFreeNumber, TransitionRefused, InvalidInput, PermissionDenied, StoreUnavailable: see
                :meth:`call`.
        """
        taken = self.call(number, sticky_to=sticky_to, sticky_ttl_s=sticky_ttl_s).number
        try:
            yield taken
        finally:
            try:
                self.hangup(taken)
            except TransitionRefused as exc:
                log.warning("pool %s: hang-up of %s refused: %s", self.name, taken, exc.message)

    # --- reading ------------------------------------------------------------------------------

    def snapshot(self) -> PoolSnapshot:
        """The owner, every number's state and the free numbers, read at once.

        Raises:
            PermissionDenied: ``e.noti.pool.show.nopvg``: the pool is someone else's.
            StoreUnavailable: Redis cannot be reached.
        """
        reply = self._call("show", "")
        self._refuse_if_denied("show", reply)
        flat, free = cast(list[Any], reply[2]), cast(list[Any], reply[3])
        states = sorted(
            (_text(k), decode_state(v) or NumberState.NODATA)
            for k, v in zip(flat[::2], flat[1::2], strict=True)
        )
        return PoolSnapshot(_text(reply[1]) or None, dict(states), [_text(n) for n in free])

    def owner(self) -> str | None:
        """The user the pool belongs to (None: made before pools had owners, or not made yet).

        Raises:
            PermissionDenied, StoreUnavailable: see :meth:`snapshot`.
        """
        return self.snapshot().owner

    def state(self, number: str) -> NumberState:
        """The state of ``number`` (``nodata`` when it is not in the pool).

        Raises:
            InvalidInput: a malformed number.
            PermissionDenied, StoreUnavailable: see :meth:`snapshot`.
        """
        number = self._number(number)
        return self.snapshot().numbers.get(number, NumberState.NODATA)

    def numbers(self) -> dict[str, NumberState]:
        """Every number in the pool and its state, sorted by number.

        Raises:
            PermissionDenied, StoreUnavailable: see :meth:`snapshot`.
        """
        return dict(self.snapshot().numbers)

    def free_numbers(self) -> list[str]:
        """The free numbers (idle and up), in the order ``call`` would take them.

        Raises:
            PermissionDenied, StoreUnavailable: see :meth:`snapshot`.
        """
        return self.snapshot().free

    def stats(self) -> PoolStats:
        """How many numbers are in each state.

        Raises:
            PermissionDenied, StoreUnavailable: see :meth:`snapshot`.
        """
        return self.snapshot().stats

    # --- the script ---------------------------------------------------------------------------

    def _number(self, number: str) -> str:
        if not isinstance(number, str) or not _NUMBER.fullmatch(number):
            raise InvalidInput(
                f"bad number {number!r} for pool {self.name}: use 1-64 letters, digits or _ + * # . : @ -",
                code="e.noti.pool.badnumber",
            )
        return number

    def _call(
        self, event: str, number: str, *, sticky: tuple[str, int] | None = None, lease_ms: int = 0
    ) -> list[Any]:
        # The plain EVALSHA sha 1 <base> event number, then noti's own arguments.
        args: list[str | int] = [event, number, *self._actor]
        args += [sticky[0], sticky[1]] if sticky is not None else ["", 0]
        args.append(lease_ms)
        with self._errors():
            return cast(list[Any], self._script(keys=[self._base], args=args))

    def _refuse_if_denied(self, verb: str, reply: list[Any]) -> None:
        """Raises :class:`PermissionDenied` when the script refused the acting user."""
        if _text(reply[0]) != "nopvg":
            return
        owner = _text(reply[2])
        if owner:
            why = f"it belongs to {owner} (only its owner and root members may)"
        else:
            why = (
                "it has no owner (it was made before pools had owners): only root members may, "
                f"until `noti pool {self.name} chown USER` gives it one"
            )
        acting = self.user.name if self.user is not None else "noti"
        raise PermissionDenied(
            f"{acting} may not {VERBS[verb]} the number pool {self.name}: {why}",
            code=f"e.noti.pool.{verb}.nopvg",
        )

    def _run(
        self, event: Event, number: str, *, sticky: tuple[str, int] | None = None, lease_ms: int = 0
    ) -> Transition:
        reply = self._call(event.value, number, sticky=sticky, lease_ms=lease_ms)
        self._refuse_if_denied(event.value, reply)
        result, got, before, after = (_text(part) for part in reply[:4])
        if event is Event.ADD and result == "ok":
            self._register()
        if result == "ok":
            return Transition(self.name, got, event, NumberState(before), NumberState(after))
        if result == "empty":
            hint = int(reply[4]) if len(reply) > 4 else -1
            raise NoFreeNumber(
                f"pool {self.name}: no number is idle and up",
                pool=self.name,
                lease_ends_in_s=hint / 1000 if hint >= 0 else None,
            )
        if result == "sticky_busy":
            raise NoFreeNumber(
                f"pool {self.name}: {got}, the sticky sender number of this recipient, is in a call",
                pool=self.name,
            )
        raise TransitionRefused(
            f"pool {self.name}: {event} refused for {got} in state {before}: {REASONS.get(result, result)}",
            pool=self.name,
            number=got,
            event=event.value,
            state=before,
            reason=result,
        )
