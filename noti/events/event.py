"""The event: its statuses, names, payload rules, and its Redis and JSON forms.

An event is one Redis hash (``noti:event:<id>``) with these fields:

================  ==========================================================================
field             meaning
================  ==========================================================================
``id``            unique, sorting by creation time (the notification ids' format)
``name``          what happened: ``order.paid`` (letters, digits, ``_ . : -``)
``user``          who dispatched it
``payload``       a JSON object: what the listeners' templates and tasks are given
``status``        ``new`` → ``activated`` (a processor runs its listeners) → ``done``
``seq``           arrival order: the processor takes events strictly by ``seq``
``created_ms``    dispatched (epoch ms); ``activated_ms`` / ``done_ms`` likewise
``tries``         how many processors activated it in its current step: 1, and one more
                  each time another took it over after its processor died or stalled (a
                  retry step starts again from 0)
``holders``       those processors, one name a line: the ones before the last died or
                  stalled (a stall is told by ``noti:events:stalled:<name>``); poison once
                  ``event_max_tries`` of them died (``e.noti.event.poison``)
``processor``     the processor that activated it last (``host/pid/token``)
``replays``       how many times ``noti event retry`` queued it again (``rerun``: the
                  listeners the next step re-runs; ``o:<listener id>``: outcomes recorded
                  one by one during a step, folded into ``result`` when it is done)
``retry``         while a listener waits for its retry back-off: JSON ``listener``,
                  ``attempts`` (failed so far), ``retries``, ``due_ms``, ``error_code``,
                  ``error_message`` (``a:<listener id>``: a listener's failed attempts)
``waits``         how many retry steps its listeners' retry policies queued
``result``        the return data: one JSON entry per listener (see :class:`Outcome`)
``error_code``    empty when every listener succeeded, else the first failure's code;
``error_message`` with its message and how many listeners failed
================  ==========================================================================
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from noti.errors import InvalidInput
from noti.inputs import JSON_DEPTH_MAX, check_json_shape

__all__ = [
    "POISON_CODE",
    "Event",
    "EventStatus",
    "Outcome",
    "encode_payload",
    "event_from_hash",
    "matches",
    "summarize",
    "validate_event_name",
    "validate_pattern",
]

NAME_MAX = 200
#: The error code of an event set aside because every processor that took it died.
POISON_CODE = "e.noti.event.poison"
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:-]*\Z")
_PATTERN = re.compile(r"^[A-Za-z0-9_.:*-]+\Z")


class EventStatus(StrEnum):
    """Where an event is in its life."""

    NEW = "new"  #: stored, waiting for the processor
    ACTIVATED = "activated"  #: a processor is running (or was running, then died) its listeners
    #: every listener ran (or it was set aside as poison); ``error_code`` says whether one failed
    DONE = "done"


def validate_event_name(name: object) -> str:
    """``name`` when it is a valid event name.

    Raises:
        InvalidInput: ``e.noti.event.badname``.
    """
    if not isinstance(name, str) or not 0 < len(name) <= NAME_MAX or not _NAME.match(name):
        raise InvalidInput(
            f"an event name is 1-{NAME_MAX} letters, digits and _ . : - (not starting with"
            f" . : -), got {name!r}",
            code="e.noti.event.badname",
        )
    return name


def validate_pattern(pattern: object) -> str:
    """``pattern`` when it is a valid event name pattern: a name where ``*`` matches any
    run of characters, dots included (``order.*``, ``*.paid``, ``*``).

    Raises:
        InvalidInput: ``e.noti.listener.badevent``.
    """
    if not isinstance(pattern, str) or not 0 < len(pattern) <= NAME_MAX or not _PATTERN.match(pattern):
        raise InvalidInput(
            f"a listener's event is a name or a pattern with * (e.g. order.* ), at most {NAME_MAX}"
            f" letters, digits and _ . : - *, got {pattern!r}",
            code="e.noti.listener.badevent",
        )
    return pattern


def matches(pattern: str, name: str) -> bool:
    """Does the event ``name`` match the listener ``pattern``?"""
    if "*" not in pattern:
        return pattern == name
    regex = ".*".join(re.escape(part) for part in pattern.split("*"))
    return re.fullmatch(regex, name) is not None


def encode_payload(payload: object, *, max_bytes: int) -> str:
    """The JSON text stored for ``payload``, which must be a JSON object of at most
    ``max_bytes`` bytes encoded.

    Raises:
        InvalidInput: ``e.noti.event.badpayload`` (not a JSON object, or holding values JSON
        cannot carry), ``e.noti.event.toolarge``.
    """
    if payload is None:
        payload = {}
    if not isinstance(payload, Mapping):
        raise InvalidInput(
            f"an event payload is a JSON object (a dict), got {type(payload).__name__}",
            code="e.noti.event.badpayload",
        )
    bad_keys = [k for k in payload if not isinstance(k, str)]
    if bad_keys:
        raise InvalidInput(
            f"event payload keys must be strings, got {bad_keys[0]!r}", code="e.noti.event.badpayload"
        )
    try:
        text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        size = len(text.encode())
    except RecursionError:
        raise InvalidInput(
            f"the event payload is nested more than {JSON_DEPTH_MAX} levels deep",
            code="e.noti.event.badpayload",
        ) from None
    except (TypeError, ValueError) as exc:  # a set, NaN, a lone surrogate, a 5,000-digit integer
        raise InvalidInput(
            f"the event payload is not plain JSON: {exc}", code="e.noti.event.badpayload"
        ) from None
    if size > max_bytes:
        raise InvalidInput(
            f"the event payload is {size} bytes of JSON, more than the {max_bytes} allowed"
            " (NOTI_EVENT_PAYLOAD_MAX_BYTES)",
            code="e.noti.event.toolarge",
        )
    check_json_shape(payload, what="the event payload", code="e.noti.event.badpayload")
    return text


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one listener did with one event: an entry of the event's return data.

    Exactly one of ``notification`` (the id of the notification it created), ``result``
    (what its task returned), ``skipped`` (why it did not run) or ``error_code`` is set.
    """

    listener: str
    notification: str | None = None
    task: str | None = None
    result: Any = None
    skipped: str | None = None
    error_code: str | None = None
    error_message: str | None = None
    #: How many times it ran, when its retry policy ran it more than once.
    attempts: int | None = None

    @property
    def failed(self) -> bool:
        return self.error_code is not None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"listener": self.listener}
        if self.task is not None:
            out["task"] = self.task
        if self.notification is not None:
            out["notification"] = self.notification
        if self.skipped is not None:
            out["skipped"] = self.skipped
        if self.error_code is not None:
            out["error_code"] = self.error_code
            out["error_message"] = self.error_message or ""
        elif self.task is not None:
            out["result"] = self.result
        if self.attempts is not None:
            out["attempts"] = self.attempts
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Outcome:
        return cls(
            listener=str(data.get("listener", "")),
            notification=data.get("notification"),
            task=data.get("task"),
            result=data.get("result"),
            skipped=data.get("skipped"),
            error_code=data.get("error_code"),
            error_message=data.get("error_message"),
            attempts=int(data["attempts"]) if isinstance(data.get("attempts"), int) else None,
        )


def summarize(outcomes: list[Outcome]) -> tuple[str, str]:
    """The event's ``(error_code, error_message)``: empty when no listener failed."""
    failed = [o for o in outcomes if o.failed]
    if not failed:
        return "", ""
    first = failed[0]
    message = f"listener {first.listener!r}: {first.error_message}"
    if len(failed) > 1:
        message += f" (and {len(failed) - 1} more of {len(outcomes)} listeners failed)"
    return first.error_code or "e.noti.event.failed", message


@dataclass(frozen=True, slots=True)
class Event:
    """One dispatched event, as stored."""

    id: str
    name: str
    user: str
    status: EventStatus
    seq: int
    created_ms: int
    payload: Mapping[str, Any] = field(default_factory=dict)
    activated_ms: int = 0
    done_ms: int = 0
    tries: int = 0
    processor: str = ""
    outcomes: tuple[Outcome, ...] = ()
    error_code: str = ""
    error_message: str = ""
    #: How many times it was queued again by a retry (``noti event retry``).
    replays: int = 0
    #: The processors that activated it in its current step, in order (see ``tries``).
    holders: tuple[str, ...] = ()
    #: Of the processors that activated it before the last one (all of them for poison):
    #: how many died, and how many stalled (said they lost their lock while alive). Filled
    #: in by :class:`~noti.events.reads.EventReader` reads; a processor still stopped counts
    #: as died until it continues and says it stalled.
    deaths: int = 0
    stalls: int = 0
    #: While a listener waits for its retry back-off: ``listener``, ``attempts`` (failed so
    #: far), ``retries``, ``due_ms``, ``error_code``, ``error_message``; else None.
    retry: Mapping[str, Any] | None = None
    #: How many retry steps its listeners' retry policies queued.
    waits: int = 0

    @property
    def failed(self) -> bool:
        return bool(self.error_code)

    @property
    def replaced(self) -> tuple[str, ...]:
        """The processors that activated it and did not finish it (they died or stalled):
        all but the last, or all of them when it was set aside as poison."""
        if self.error_code == POISON_CODE:
            return self.holders
        return self.holders[:-1]

    @property
    def wait_ms(self) -> int | None:
        """From dispatch to the (last) activation."""
        return self.activated_ms - self.created_ms if self.activated_ms else None

    @property
    def run_ms(self) -> int | None:
        """From the last activation to done."""
        return self.done_ms - self.activated_ms if self.done_ms and self.activated_ms else None

    def to_json(self) -> dict[str, Any]:
        """The event as ``noti event show -json`` prints it."""
        return {
            "id": self.id,
            "name": self.name,
            "status": self.status.value,
            "user": self.user,
            "seq": self.seq,
            "payload": dict(self.payload),
            "created_ms": self.created_ms,
            "activated_ms": self.activated_ms or None,
            "done_ms": self.done_ms or None,
            "wait_ms": self.wait_ms,
            "run_ms": self.run_ms,
            "tries": self.tries,
            "deaths": self.deaths,
            "stalls": self.stalls,
            "replays": self.replays,
            "waits": self.waits,
            "retry": dict(self.retry) if self.retry is not None else None,
            "processor": self.processor or None,
            "error_code": self.error_code or None,
            "error_message": self.error_message or None,
            "result": [o.to_json() for o in self.outcomes] if self.status is EventStatus.DONE else None,
        }


def _int(value: str | None) -> int:
    if not value:
        return 0
    number = float(value)
    return int(number) if math.isfinite(number) else 0


def event_from_hash(data: Mapping[str, str]) -> Event:
    """An :class:`Event` from its Redis hash."""
    outcomes: tuple[Outcome, ...] = ()
    if data.get("result"):
        outcomes = tuple(Outcome.from_json(o) for o in json.loads(data["result"]))
    return Event(
        id=data["id"],
        name=data.get("name", ""),
        user=data.get("user", ""),
        status=EventStatus(data.get("status", EventStatus.NEW.value)),
        seq=_int(data.get("seq")),
        created_ms=_int(data.get("created_ms")),
        payload=json.loads(data["payload"]) if data.get("payload") else {},
        activated_ms=_int(data.get("activated_ms")),
        done_ms=_int(data.get("done_ms")),
        tries=_int(data.get("tries")),
        processor=data.get("processor", ""),
        outcomes=outcomes,
        error_code=data.get("error_code", ""),
        error_message=data.get("error_message", ""),
        replays=_int(data.get("replays")),
        holders=tuple(x for x in data.get("holders", "").split("\n") if x),
        retry=json.loads(data["retry"]) if data.get("retry") else None,
        waits=_int(data.get("waits")),
    )
