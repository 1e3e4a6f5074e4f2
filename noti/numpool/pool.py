"""The sender-number pool: numbers shared by many processes, moved by one atomic Lua script.

Each number has a call state (idle/busy) and a registration state (up/down). Six events
(:class:`~noti.numpool.states.Event`) move it through the pool's state table, which lives in
``numpool.lua`` and nowhere else (:mod:`noti.numpool.script` calls it): each event is one
``EVALSHA sha 1 <base> event number …`` (the plain calling convention, noti's own arguments
after it) over keys that share the base's hash tag ``{numpool:NAME}``, so it is atomic on a
single Redis and on Redis Cluster. The data is in
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
import hashlib
import logging
import re
from collections.abc import Iterator

from noti.access.users import User, resolve_user
from noti.config import Settings
from noti.core.keys import Keys
from noti.errors import InvalidConfig, InvalidInput, TransitionRefused
from noti.inputs import POOL_NAME_PATTERN, check_name, finite_number, user_name
from noti.numpool.script import PoolScript
from noti.numpool.states import Event, NumberState, PoolSnapshot, PoolStats, Transition
from noti.redis.conn import PoolClient

__all__ = ["DEFAULT_STICKY_TTL_S", "NumberPool"]

log = logging.getLogger(__name__)


#: How long a recipient keeps its sticky sender number after its last send, by default.
DEFAULT_STICKY_TTL_S = 24 * 3600.0

_POOL_NAME = re.compile(POOL_NAME_PATTERN)
#: A number: a phone number, or a sign name or sender id (any letters, 信息 included).
_NUMBER = re.compile(r"^[\w+*#.:@-]{1,64}$")


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
        self._script = PoolScript(client, keys, name, base, user)

    def __repr__(self) -> str:
        return f"<NumberPool {self.name!r}>"

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
        return self._script.fire(ev, self._number(number))

    def add(self, number: str) -> Transition:
        """Put ``number`` in the pool, idle and down (already there: unchanged).

        Raises:
            InvalidInput, PermissionDenied, StoreUnavailable: see :meth:`fire`.
        """
        return self.fire(Event.ADD, number)

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
            return self._script.fire(
                Event.CALL, "" if number is None else self._number(number), lease_ms=lease_ms
            )
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
        return self._script.fire(Event.CALL, "", sticky=(digest, ttl_ms), lease_ms=lease_ms)

    def wait_released(self, timeout_s: float) -> bool:
        """Block until a number of this pool becomes free (a hang-up, a registration, an
        expired lease), at most ``timeout_s``; True when one did. A wake-up is a hint: the
        number may be taken by another caller first, so call again.

        Raises:
            StoreUnavailable: Redis cannot be reached.
        """
        return self._script.wait_released(timeout_s)

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
        return self._script.chown(owner)

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
        return self._script.show()

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

    # --- checks ------------------------------------------------------------------------------

    def _number(self, number: str) -> str:
        if not isinstance(number, str) or not _NUMBER.fullmatch(number):
            raise InvalidInput(
                f"bad number {number!r} for pool {self.name}: use 1-64 letters, digits or _ + * # . : @ -",
                code="e.noti.pool.badnumber",
            )
        return number
