"""A timeline per notification: every step of its life, in order, next to the record.

A record keeps its last state only; its timeline (``noti:tl:<id>``, a LIST of JSON steps)
keeps how it got there: each claim (which worker), each provider call of each attempt (the
provider, how long the request took, the vendor's message id or its code and text), each
failover from one provider to the next, the retry scheduled, the failure and its dead letter,
the revoke, each receipt the vendor sent, the fallback fired, each status callback posted.

Every step is written by the script that makes the change it describes (``timeline.lua``,
included by ``finish.lua``, ``claim_record.lua``, ``delivery.lua``, ``revoke.lua``,
``revive.lua``, ``standby.lua``, ``notify.lua``, ``create.lua``), in the same atomic step
and only when the change is applied: a timeline never disagrees with its record. A record's
creation is not written twice: the record's own fields (created when, by whom, through which
door, at which level, on which channel, for which notice or recipient) are its first step,
read with the list (:func:`first_step`). The list is bounded (:data:`MAX_STEPS`, the newest
kept; the record's ``noti_tl_drop`` counts those dropped), deleted with the record
(``delete.lua``, ``cancel.lua``) and masked with it (:mod:`noti.recipients.erasure`).

Steps hold no address: a vendor's text may quote one, so erasure rewrites them with the
address masked, as it does the record's error text.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from noti.core.attempt import CallNote, Finish
from noti.core.record import Notification, Status
from noti.errors import split_code
from noti.fastjson import dumps

__all__ = [
    "EVENTS",
    "MAX_STEPS",
    "Step",
    "Timeline",
    "finish_steps",
    "first_step",
    "parse_steps",
    "why_waiting",
    "step_text",
]

#: The most steps a timeline keeps (``TL_MAX`` in ``timeline.lua``): the newest; a record
#: retried this often has its oldest attempts dropped and counted.
MAX_STEPS = 50

#: Every event a step may name, in the order a record usually meets them.
EVENTS = (
    "created",  # the record's own fields: by, door (noti.core.door), level, channel, provider, notice
    "delayed",  # due later than made: until
    "held",  # notify(recipient=…) held it: reason (quiet hours, throttle), until
    "claimed",  # a worker took its lease: worker, claims
    "attempt",  # one provider call: provider, ms, outcome (ok, failed, waited), msgid, code, text
    "failover",  # the next provider of the chain is tried: from, to
    "sent",  # the vendor took it: provider, msgid, delivery (accepted or delivered)
    "retry",  # the attempt failed and another is scheduled: at, retry, code, text
    "failed",  # every attempt failed: retry, code, text
    "invalid",  # refused for good (permanent failure, opted out, poison): code, text
    "dead_letter",  # written to the dead-letter stream: class
    "revoked",  # revoked before it was sent: text
    "requeued",  # a failed or invalid record put back to waiting: by (redrive)
    "receipt",  # the vendor's delivery report: state, provider, code, text, vendor_at
    "fallback",  # its fallback record was made due or cancelled: record, why
    "callback",  # a status callback was posted: status, outcome, code
)


@dataclass(frozen=True, slots=True)
class Step:
    """One step of a record's life: when, what, and what the step says of it."""

    at_ms: int
    event: str
    detail: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"at": self.at_ms, "event": self.event, **self.detail}

    def line(self) -> str:
        """The step as one line of ``noti get -timeline``."""
        parts = [f"{k}={v}" for k, v in self.detail.items() if v not in (None, "")]
        return f"{self.event:<11} {' '.join(parts)}".rstrip()


@dataclass(frozen=True, slots=True)
class Timeline:
    """A record's steps, oldest first, and how many older ones were dropped."""

    record_id: str
    steps: list[Step]
    dropped: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.record_id, "dropped": self.dropped, "steps": [s.to_dict() for s in self.steps]}


def step_text(at_ms: int, event: str, detail: Mapping[str, Any]) -> str:
    """A step as the list keeps it: one line of JSON (no newline inside: JSON escapes them)."""
    clean = {k: v for k, v in detail.items() if v not in (None, "")}
    return dumps({"at": at_ms, "ev": event, **clean})


def _call_steps(notes: Sequence[CallNote]) -> Iterable[str]:
    previous: CallNote | None = None
    for note in notes:
        if previous is not None and previous.provider != note.provider and previous.outcome != "ok":
            yield step_text(note.at_ms, "failover", {"from": previous.provider, "to": note.provider})
        yield step_text(
            note.at_ms,
            "attempt",
            {
                "provider": note.provider,
                "ms": round(note.seconds * 1000, 1),
                "outcome": note.outcome,
                "msgid": note.msgid,
                "code": note.code,
                "vendor_code": note.vendor_code,
                "text": note.text[:500],
            },
        )
        previous = note


def finish_steps(item: Finish, now_ms: int) -> str:
    """The steps a finish writes (``finish.lua``), one per line: each provider call, the
    failovers between them, then what the outcome made of the record."""
    outcome = item.outcome
    lines = list(_call_steps(item.notes))
    code, text = split_code(outcome.errmsg)
    if outcome.status is Status.DONE:
        fields = dict(outcome.fields)
        msgid = next((v for k, v in fields.items() if k.endswith("_msgid")), None)
        lines.append(
            step_text(
                now_ms,
                "sent",
                {"provider": fields.get("noti_sent_by"), "msgid": msgid, "delivery": fields.get("noti_dlv")},
            )
        )
    elif outcome.status is Status.WAITING:
        lines.append(
            step_text(
                now_ms,
                "retry",
                {"at": outcome.not_before_ms, "retry": outcome.retry, "code": code, "text": text[:500]},
            )
        )
    else:
        event = "failed" if outcome.status is Status.FAILED else "invalid"
        lines.append(
            step_text(
                now_ms,
                event,
                {"retry": outcome.retry, "class": outcome.error_class, "code": code, "text": text[:500]},
            )
        )
        if item.letter is not None:
            lines.append(step_text(now_ms, "dead_letter", {"class": item.letter.error_class}))
    return "\n".join(lines)


def first_step(record: Notification) -> Step:
    """The record's creation, read from its own fields."""
    detail: dict[str, Any] = {
        "by": record.creator,
        "door": record.door,
        "channel": record.channel.value,
        "level": record.level,
        "provider": record.provider,
        "notice": record.parent,
        "recipient": record.recipient,
        "category": record.category,
        "fallback_of": record.fallback_of,
        "status_of": record.status_of,
    }
    return Step(record.created_ms, "created", {k: v for k, v in detail.items() if v not in (None, "")})


def why_waiting(steps: Sequence[Step]) -> str:
    """Why a record in the delayed set waits, from its newest step that says so: ``quiet
    hours``, ``throttle`` or ``fallback`` (held by ``notify(recipient=…)``), ``scheduled`` (a
    delay or an eta), ``retry n`` (backing off after a failed attempt); "" when no step says."""
    for step in reversed(steps):
        if step.event == "held":
            return str(step.detail.get("reason") or "held")
        if step.event == "delayed":
            return "scheduled"
        if step.event == "retry":
            return f"retry {step.detail.get('retry', '')}".rstrip()
        if step.event in ("claimed", "attempt", "requeued"):
            return ""
    return ""


def parse_steps(raw: Iterable[bytes | str]) -> list[Step]:
    """The list's steps; an entry that is not a step object (written by hand) is kept as text."""
    steps: list[Step] = []
    for item in raw:
        text = item.decode("utf-8", "replace") if isinstance(item, bytes) else item
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if not isinstance(data, dict) or not isinstance(data.get("ev"), str):
            steps.append(Step(0, "unreadable", {"text": text[:500]}))
            continue
        at = data.pop("at", 0)
        event = data.pop("ev")
        steps.append(Step(int(at) if isinstance(at, int | float) else 0, event, data))
    return steps
