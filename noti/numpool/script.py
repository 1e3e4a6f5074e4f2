"""The pool's Redis calls: ``numpool.lua`` (the one copy of the state table) called for one
pool and one acting user, what its replies mean (a :class:`~noti.numpool.states.Transition`,
a refusal, a snapshot), the stored layout of a number's state, and the pool registry and
``released`` list beside the script. :class:`~noti.numpool.pool.NumberPool` checks its
inputs and calls these.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.resources
import json
from collections.abc import Iterator, Mapping
from typing import Any, cast

import redis
from redis.commands.core import Script

from noti.access.users import User
from noti.core.keys import Keys
from noti.errors import NoFreeNumber, PermissionDenied, TransitionRefused
from noti.numpool.states import Event, NumberState, PoolSnapshot, Transition
from noti.redis.conn import PoolClient
from noti.redis.outage import translate_errors

__all__ = ["REASONS", "VERBS", "PoolScript", "decode_state", "source"]

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
def source() -> str:
    """``numpool.lua``'s text."""
    return importlib.resources.files("noti.numpool").joinpath("numpool.lua").read_text()


class PoolScript:
    """``numpool.lua`` called on the pool ``name`` (its keys under ``base``) for ``user`` (None:
    for no user, passing no owner check)."""

    def __init__(self, client: PoolClient, keys: Keys, name: str, base: str, user: User | None) -> None:
        self.name = name
        self.keys = keys
        self.user = user
        self.client = client
        self.base = base
        # register_script hashes locally; Script re-sends the source on NOSCRIPT (after SCRIPT
        # FLUSH or a fail-over), and RedisCluster sends SCRIPT LOAD to every primary.
        self.lua: Script = client.register_script(source())
        # The script's ARGV[3] and ARGV[4]: who acts, and whether any pool is theirs.
        self._actor = ["", "0"] if user is None else [user.name, "1" if user.is_root else "0"]

    @contextlib.contextmanager
    def errors(self) -> Iterator[None]:
        """Redis's errors as noti's (:class:`~noti.errors.StoreUnavailable`)."""
        # translate_errors only reads the client's masked URL, which a RedisCluster lacks.
        with translate_errors(cast(redis.Redis, self.client)):
            yield

    def fire(
        self, event: Event, number: str, *, sticky: tuple[str, int] | None = None, lease_ms: int = 0
    ) -> Transition:
        """Fire ``event`` on ``number`` (checked; "" for ``call``: the number free the longest)
        with the sticky binding ``(recipient's digest, TTL ms)`` and the lease, if any.

        Raises:
            NoFreeNumber, PermissionDenied, TransitionRefused, StoreUnavailable: see
                :meth:`~noti.numpool.pool.NumberPool.fire`.
        """
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

    def chown(self, owner: str) -> str | None:
        """Give the pool to ``owner`` (a checked user name); the previous owner.

        Raises:
            PermissionDenied, StoreUnavailable: see :meth:`~noti.numpool.pool.NumberPool.chown`.
        """
        reply = self._call("chown", owner)
        self._refuse_if_denied("chown", reply)
        return _text(reply[2]) or None

    def show(self) -> PoolSnapshot:
        """The owner, every number's state and the free numbers, read at once.

        Raises:
            PermissionDenied, StoreUnavailable: see :meth:`~noti.numpool.pool.NumberPool.snapshot`.
        """
        reply = self._call("show", "")
        self._refuse_if_denied("show", reply)
        flat, free = cast(list[Any], reply[2]), cast(list[Any], reply[3])
        states = sorted(
            (_text(k), decode_state(v) or NumberState.NODATA)
            for k, v in zip(flat[::2], flat[1::2], strict=True)
        )
        return PoolSnapshot(_text(reply[1]) or None, dict(states), [_text(n) for n in free])

    def wait_released(self, timeout_s: float) -> bool:
        """Block on the pool's ``released`` list at most ``timeout_s``; True when a token came.

        Raises:
            StoreUnavailable: Redis cannot be reached.
        """
        timeout = max(0.001, round(float(timeout_s), 3))
        with self.errors():
            return self.client.blpop([self.keys.numpool(self.name, "released")], timeout) is not None

    def _register(self) -> None:
        """Name this pool in the pool registry (:attr:`Keys.numpools`), where the metrics and
        ``noti status`` find the pools. A key of its own, outside the pool's hash tag, so a
        command of its own (the script must touch one cluster slot only); only ``add`` calls it."""
        with self.errors():
            self.client.sadd(self.keys.numpools, self.name)

    def _call(
        self, event: str, number: str, *, sticky: tuple[str, int] | None = None, lease_ms: int = 0
    ) -> list[Any]:
        # The plain EVALSHA sha 1 <base> event number, then noti's own arguments.
        args: list[str | int] = [event, number, *self._actor]
        args += [sticky[0], sticky[1]] if sticky is not None else ["", 0]
        args.append(lease_ms)
        with self.errors():
            return cast(list[Any], self.lua(keys=[self.base], args=args))

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
