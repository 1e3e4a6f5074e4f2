"""What noti relies on in kombu beyond its public API, and the check a worker makes of it.

noti supports Celery and kombu 5.5 through 5.7 (``pyproject.toml``). Two parts of noti go
under kombu's public API, and a kombu release may change what they rely on:

- the workers' bulk transport (:mod:`noti.celery.transport`) subclasses kombu's Redis
  transport: it replaces ``Channel._brpop_read`` (a copy of kombu's plus the bulk fetch),
  ``Channel.conn_or_acquire`` (one client per channel), ``QoS.append`` for the messages its
  script noted, and ``QoS.ack`` (acks buffered, then kombu's ``_remove_from_indices`` done
  for many in one MULTI); it calls ``Channel._brpop_start``, ``_create_client``, ``pool``,
  ``client.parse_response``, ``_queue_cycle.rotate``, ``connection._deliver``,
  ``QoS.restore_by_tag``, ``QoS.pipe_or_acquire``, ``QoS.can_consume_max_estimate``, and
  its script ``noti/lua/bulk_fetch.lua`` writes kombu's unacked bookkeeping itself;
- the publisher (:mod:`noti.celery.publish`) and the foreign-priority adoption
  (:mod:`noti.celery.queues`) write kombu's wire format on Redis themselves: the envelope,
  its priority list, kombu's default separator and steps, the binding set's key.

:data:`RELIANCE` lists each of these. :func:`check_kombu` verifies them when a worker
starts (:class:`~noti.celery.steps.KombuCheck`), without any I/O: the attributes are there,
the signatures take noti's calls, the kombu methods noti replaces are the ones it was
written against (a fingerprint of their source, comments and docstrings aside), and small
probes run kombu's own code on stand-ins: the list a priority goes to and the order BRPOP
reads the lists in, the envelope ``_put`` writes, the unacked index and hash ``QoS.append``
writes and ``QoS.restore_by_tag`` reads back. A mismatch raises
:class:`~noti.errors.IncompatibleDependency` naming kombu's version and what changed, and
the worker does not start.
"""

from __future__ import annotations

import ast
import base64
import hashlib
import inspect
import io
import json
import textwrap
import time
import tokenize
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import kombu
from kombu.transport import redis as kombu_redis
from kombu.transport import virtual

from noti.celery.publish import queue_key
from noti.celery.queues import PRIORITY_SEPARATOR, PRIORITY_STEPS
from noti.errors import IncompatibleDependency

__all__ = [
    "RELIANCE",
    "Reliance",
    "check_kombu",
    "source_fingerprint",
]


@dataclass(frozen=True, slots=True)
class Reliance:
    """One thing noti relies on in kombu."""

    #: Where, e.g. ``kombu.transport.redis.Channel._brpop_read``.
    what: str
    #: What noti does with it.
    why: str


#: The fingerprints (:func:`source_fingerprint`) of the kombu methods noti replaces or
#: re-implements, as of the kombu releases it was checked against. A new kombu whose method
#: differs must be reviewed against noti's copy, then its fingerprint added here.
KNOWN_SOURCES: dict[str, dict[str, str]] = {
    "Channel._brpop_read": {
        "0c36f018e7b4171b": "5.5.0-5.6.2",
        "f7e4afb7bac8b174": "5.7.0 (flushes re-authentication after each read)",
    },
    "Channel.conn_or_acquire": {"7f809f5a79190193": "5.5.0-5.7.0"},
    "QoS.append": {"ae20f14cfeba917e": "5.5.0-5.7.0"},
    "QoS.ack": {"a33d955576c4adc4": "5.5.0-5.7.0"},
    "QoS._remove_from_indices": {"963210a98ebb32f1": "5.5.0-5.7.0"},
}

#: Parameters (``*`` and ``**`` marking variadic ones) of the kombu methods the bulk
#: transport overrides: kombu calls them, noti's overrides must take kombu's calls.
_OVERRIDDEN_SIGNATURES: dict[str, tuple[str, ...]] = {
    "Channel._brpop_read": ("self", "**options"),
    "Channel._brpop_start": ("self", "timeout"),
    "Channel.conn_or_acquire": ("self", "client"),
    "QoS.append": ("self", "message", "delivery_tag"),
    "QoS.ack": ("self", "delivery_tag"),
    "QoS.restore_unacked": ("self", "client"),
    "QoS.restore_unacked_once": ("self", "stderr"),
    "QoS.restore_visible": ("self", "start", "num", "interval"),
}

#: Calls noti makes into kombu (positional arguments after self, keyword arguments).
_CALLS: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {
    "Channel._create_client": ((), {}),
    "Channel._q_for_pri": (("queue", 1), {}),
    "Channel._do_restore_message": (({}, "", "queue", None), {"leftmost": True}),
    "QoS.pipe_or_acquire": ((), {}),
    "QoS.restore_by_tag": (("tag",), {"client": None, "leftmost": True}),
    "QoS.can_consume_max_estimate": ((), {}),
    "QoS._remove_from_indices": (("tag",), {"pipe": None}),
    "virtual.QoS.append": ((None, "tag"), {}),
    "virtual.QoS.ack": (("tag",), {}),
    "virtual.Transport._deliver": (({}, "queue"), {}),
}

#: Class attributes and properties read by noti.
_ATTRIBUTES = (
    "Channel.QoS",
    "Channel.pool",
    "Channel._pool",
    "Channel._closing",
    "Channel._in_poll",
    "Channel.sep",
    "Channel.priority_steps",
    "Channel.global_keyprefix",
    "Channel.unacked_key",
    "Channel.unacked_index_key",
    "Channel.keyprefix_queue",
    "Channel.from_transport_options",
    "QoS.unacked_key",
    "QoS.unacked_index_key",
    "Transport.Channel",
)

#: The transport options noti sets (``noti.celery.queues.transport_options``) that the
#: channel must read.
_OPTIONS = ("priority_steps", "sep", "queue_order_strategy", "visibility_timeout", "global_keyprefix")

RELIANCE: tuple[Reliance, ...] = (
    *(
        Reliance(f"kombu.transport.redis.{name}", "replaced or re-implemented by noti's bulk transport")
        for name in KNOWN_SOURCES
    ),
    *(
        Reliance(f"kombu.transport.redis.{name}({', '.join(params)})", "overridden by noti's bulk transport")
        for name, params in _OVERRIDDEN_SIGNATURES.items()
    ),
    *(
        Reliance(
            f"kombu.transport.{'' if name.startswith('virtual.') else 'redis.'}{name}()", "called by noti"
        )
        for name in _CALLS
    ),
    *(Reliance(f"kombu.transport.redis.{name}", "read by noti") for name in _ATTRIBUTES),
    Reliance(
        "priority lists",
        "kombu keeps priority p of queue q in the list q<sep>p (q for p = 0); BRPOP reads the "
        "lists of every step in step order; noti's publisher and adoption write those lists",
    ),
    Reliance(
        "envelope",
        "kombu's Redis message: body (base64), content-type, content-encoding, headers, "
        "properties with priority, delivery_mode, delivery_info {exchange, routing_key}, "
        "body_encoding, delivery_tag, LPUSHed as JSON: what noti's publisher writes",
    ),
    Reliance(
        "unacked bookkeeping",
        "a taken message is a member of the unacked index (sorted set, score = when taken, "
        "in seconds) and a field of the unacked hash (JSON [message, exchange, routing key]) "
        "under its delivery tag; what noti/lua/bulk_fetch.lua writes and kombu's restore reads",
    ),
    Reliance(
        "defaults",
        "kombu's default separator '\\x06\\x16', priority steps [0, 3, 6, 9] and binding-set key "
        "'_kombu.binding.<exchange>': where foreign Celery apps put noti's messages",
    ),
)


def source_fingerprint(function: Callable[..., Any]) -> str:
    """A hash of ``function``'s source with comments, docstring, blank lines and indentation
    left out (the same on every Python version).

    Raises:
        OSError: the source is not available (a deployment without ``.py`` files).
    """
    source = textwrap.dedent(inspect.getsource(function))
    lines = source.splitlines()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            row, column = token.start
            lines[row - 1] = lines[row - 1][:column]
    definition = ast.parse(source).body[0]
    if isinstance(definition, ast.FunctionDef | ast.AsyncFunctionDef):
        first = definition.body[0]
        if (
            isinstance(first, ast.Expr)
            and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)
        ):
            for index in range(first.lineno - 1, first.end_lineno or first.lineno):
                lines[index] = ""
    text = "\n".join(line.strip() for line in lines if line.strip())
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def check_kombu(*, bulk_transport: bool) -> None:
    """Verify what noti relies on in the installed kombu: the wire format always, and with
    ``bulk_transport`` what the workers' bulk transport relies on too.

    Raises:
        IncompatibleDependency: something changed; the message names kombu's version, each
            change found and what to do.
    """
    wire_format = _wire_format_problems()
    transport = _transport_problems() if bulk_transport else []
    if not (wire_format or transport):
        return
    advice = "install a kombu noti supports (pyproject.toml: kombu>=5.5.2,<6, checked up to 5.7.0)"
    if transport and not wire_format:
        advice += ", or set NOTI_BROKER_BULK_FETCH=false to consume through kombu's stock transport"
    raise IncompatibleDependency(
        f"kombu {kombu.__version__} changed what noti relies on (noti.celery.compat): "
        f"{'; '.join(transport + wire_format)}. To run noti, {advice}"
    )


def _resolve(name: str) -> Any:
    """``Channel.x``, ``QoS.x``, ``Transport.x`` of kombu's Redis transport, ``virtual.X.x``."""
    owner_name, _, attribute = name.rpartition(".")
    module: Any = kombu_redis
    if owner_name.startswith("virtual."):
        module, owner_name = virtual, owner_name.removeprefix("virtual.")
    owner = getattr(module, owner_name, None)
    if owner is None:
        raise AttributeError(f"{owner_name} is gone")
    try:
        return inspect.getattr_static(owner, attribute)
    except AttributeError:
        raise AttributeError(f"{name} is gone") from None


def _function(name: str) -> Callable[..., Any]:
    found = _resolve(name)
    function = getattr(found, "__func__", found)  # staticmethod / classmethod
    function = getattr(function, "__wrapped__", function)  # contextmanager
    if not callable(function):
        raise AttributeError(f"{name} is no longer a method")
    return function  # type: ignore[no-any-return]


def _params(function: Callable[..., Any]) -> tuple[str, ...]:
    marks: dict[Any, str] = {inspect.Parameter.VAR_POSITIONAL: "*", inspect.Parameter.VAR_KEYWORD: "**"}
    return tuple(marks.get(p.kind, "") + p.name for p in inspect.signature(function).parameters.values())


def _transport_problems() -> list[str]:
    problems: list[str] = []
    for name, known in KNOWN_SOURCES.items():
        try:
            fingerprint = source_fingerprint(_function(name))
        except AttributeError as exc:
            problems.append(str(exc))
            continue
        except (OSError, TypeError) as exc:
            problems.append(f"the source of {name} cannot be read to verify it ({exc})")
            continue
        if fingerprint not in known:
            problems.append(
                f"{name} is not the one noti's bulk transport was written against (kombu "
                f"{', '.join(known.values())}; fingerprint {fingerprint})"
            )
    for name, expected in _OVERRIDDEN_SIGNATURES.items():
        try:
            params = _params(_function(name))
        except AttributeError as exc:
            problems.append(str(exc))
            continue
        if params != expected:
            problems.append(f"{name} takes ({', '.join(params)}), not ({', '.join(expected)})")
    for name, (args, kwargs) in _CALLS.items():
        try:
            inspect.signature(_function(name)).bind(None, *args, **kwargs)
        except AttributeError as exc:
            problems.append(str(exc))
        except TypeError as exc:
            problems.append(f"{name} no longer takes noti's call ({exc})")
    for name in _ATTRIBUTES:
        try:
            _resolve(name)
        except AttributeError as exc:
            problems.append(str(exc))
    options = set(kombu_redis.Channel.from_transport_options)
    missing = [option for option in _OPTIONS if option not in options]
    if missing:
        problems.append(f"the Redis channel no longer reads the transport options {missing}")
    if not problems:
        problems += _probe("the order BRPOP reads the priority lists in", _probe_brpop_order)
        problems += _probe("the unacked bookkeeping", _probe_unacked_layout)
    return problems


def _wire_format_problems() -> list[str]:
    problems: list[str] = []
    defaults = {
        "sep": (getattr(kombu_redis.Channel, "sep", None), "\x06\x16"),
        "priority_steps": (getattr(kombu_redis.Channel, "priority_steps", None), [0, 3, 6, 9]),
        "keyprefix_queue": (getattr(kombu_redis.Channel, "keyprefix_queue", None), "_kombu.binding.%s"),
    }
    for name, (found, expected) in defaults.items():
        if found != expected:
            problems.append(f"the Redis channel's default {name} is {found!r}, not {expected!r}")
    problems += _probe("the envelope and priority list of a published message", _probe_envelope)
    return problems


def _probe(what: str, probe: Callable[[], str | None]) -> list[str]:
    try:
        found = probe()
    except Exception as exc:  # noqa: BLE001 - kombu's code on a stand-in failed: it changed
        return [f"{what}: kombu's code fails on noti's probe ({type(exc).__name__}: {exc})"]
    return [f"{what}: {found}"] if found else []


def _stand_in_channel() -> Any:
    """A kombu Redis channel object that was never connected, with noti's transport options."""
    channel = object.__new__(kombu_redis.Channel)
    channel.sep = PRIORITY_SEPARATOR
    channel.priority_steps = list(PRIORITY_STEPS)
    channel.global_keyprefix = ""
    channel._expires = {}
    return channel


class _Recorder:
    """A stand-in Redis client or pipeline: records the commands called on it."""

    def __init__(self, replies: dict[str, Any] | None = None) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.replies = replies or {}
        self.connection = SimpleNamespace(send_command=lambda *args: self.calls.append(("send", *args)))

    def __getattr__(self, command: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((command, *args, *sorted(kwargs.items())))
            return self.replies.get(command, self)

        return call

    def transaction(self, body: Callable[[Any], None], *keys: Any) -> None:
        body(self)


@contextmanager
def _yielding(client: Any) -> Iterator[Any]:
    yield client


def _probe_envelope() -> str | None:
    """kombu's ``prepare_message``, ``_inplace_augment_message`` and ``_put`` of a message
    as Celery publishes one: noti's publisher writes the same JSON to the same list."""
    queue = "noti.probe"
    for priority in range(10):
        channel = _stand_in_channel()
        client = _Recorder()
        channel.conn_or_acquire = lambda client_=None, _c=client: _yielding(_c)
        body = json.dumps([["r"], {}, {}])
        properties = {"correlation_id": "c", "reply_to": "", "delivery_mode": 2}
        message = channel.prepare_message(
            body, priority, "application/json", "utf-8", {"id": "c"}, properties
        )
        channel._inplace_augment_message(message, "", queue)
        channel._put(queue, message)
        pushes = [call for call in client.calls if call[0] == "lpush"]
        if len(pushes) != 1:
            return f"kombu's _put sent {client.calls!r}, not one LPUSH"
        _, key, payload = pushes[0]
        if key != queue_key(queue, priority):
            return f"priority {priority} went to the list {key!r}, noti writes {queue_key(queue, priority)!r}"
        written = json.loads(payload)
        tag = written.get("properties", {}).get("delivery_tag")
        expected = {
            "body": base64.b64encode(body.encode()).decode(),
            "content-encoding": "utf-8",
            "content-type": "application/json",
            "headers": {"id": "c"},
            "properties": {
                **properties,
                "delivery_info": {"exchange": "", "routing_key": queue},
                "priority": priority,
                "body_encoding": "base64",
                "delivery_tag": tag,
            },
        }
        if not isinstance(tag, str) or written != expected:
            return f"kombu writes {written!r}, where noti writes {expected!r}"
    return None


def _probe_brpop_order() -> str | None:
    """kombu's ``_brpop_start`` reads the lists of every priority step, step 0 first."""
    channel = _stand_in_channel()
    client = _Recorder()
    channel.client = client
    channel._active_queues = ["noti.probe"]
    channel.active_fanout_queues = set()
    channel._queue_cycle = SimpleNamespace(consume=lambda n: ["noti.probe"])
    channel.brpop_timeout = 1
    channel._brpop_start(1)
    expected = ("send", "BRPOP", *(queue_key("noti.probe", p) for p in channel.priority_steps), 1)
    if client.calls != [expected]:
        return f"kombu sends {client.calls!r}, noti's lists are {expected[1:]!r}"
    return None


def _probe_unacked_layout() -> str | None:
    """kombu's ``QoS.append`` writes what ``bulk_fetch.lua`` writes, and ``restore_by_tag``
    reads back what it writes; ``_remove_from_indices`` removes what the buffered acks do."""
    restored: list[tuple[Any, ...]] = []
    channel = SimpleNamespace(
        unacked_key="noti.probe.unacked",
        unacked_index_key="noti.probe.unacked_index",
        unacked_mutex_key="noti.probe.unacked_mutex",
        do_restore=False,
        _do_restore_message=lambda *args, **kwargs: restored.append((*args, kwargs)),
    )
    qos: Any = kombu_redis.QoS(channel)
    collect = getattr(qos, "_on_collect", None)
    if collect is not None:
        collect.cancel()
    pipe = _Recorder()
    qos.pipe_or_acquire = lambda pipe_=None, client=None: _yielding(pipe_ or pipe)
    raw = {"body": "e30=", "properties": {"delivery_tag": "t1"}}
    message = SimpleNamespace(delivery_info={"exchange": "", "routing_key": "noti.probe"}, _raw=raw)
    before = time.time()
    qos.append(message, "t1")
    zadds = [call for call in pipe.calls if call[0] == "zadd"]
    hsets = [call for call in pipe.calls if call[0] == "hset"]
    if len(zadds) != 1 or len(hsets) != 1:
        return f"QoS.append sent {pipe.calls!r}"
    _, index_key, scores = zadds[0]
    if index_key != channel.unacked_index_key or set(scores) != {"t1"}:
        return f"the unacked index entry is {zadds[0]!r}"
    if not before - 1 <= float(scores["t1"]) <= time.time() + 1:
        return f"the unacked index score is {scores['t1']!r}, not the time in seconds"
    _, hash_key, field, value = hsets[0]
    if hash_key != channel.unacked_key or field != "t1" or json.loads(value) != [raw, "", "noti.probe"]:
        return f"the unacked hash entry is {hsets[0]!r}"
    # what bulk_fetch.lua writes for a message it noted, read back by kombu's restore
    lua_value = "[" + json.dumps(raw) + ', "", "noti.probe"]'
    client = _Recorder({"hget": lua_value.encode()})
    channel.conn_or_acquire = lambda client_=None: _yielding(client_)
    qos.restore_by_tag("t1", client=client, leftmost=True)
    removed = [call[:3] for call in client.calls if call[0] in ("zrem", "hdel")]
    if removed != [("zrem", channel.unacked_index_key, "t1"), ("hdel", channel.unacked_key, "t1")]:
        return f"restoring removes {removed!r} from the unacked bookkeeping"
    if len(restored) != 1 or restored[0][:3] != (raw, "", "noti.probe"):
        return f"restoring what bulk_fetch.lua writes gives {restored!r}"
    return None
