"""Why a notification reached a provider more than once (:mod:`chaos.reconcile`).

A *repeat* is a record the providers accepted again. Its cause comes from the worker
incarnation that made the earlier send (each names itself to the providers), when the
provider wrote its answer, and the faults the run made, in this order: the earlier send's
claim or recorded outcome was in the second an AOF cut dropped; its worker was SIGKILLed
before the answer reached it (at-least-once: it could not know the provider had it) or
after, before it recorded the outcome; Redis was killed before the outcome was recorded.
A repeat with none of these causes is unexplained.

A *second record* is one notification (its tag) accepted under two record ids: an
application retry after ``notify()`` raised having stored the record, or an idempotency
key (with its record) in the second an AOF cut dropped.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from chaos.facts import Facts
from chaos.producer import CallResult
from chaos.providers import ACCEPTED, DEDUPED, Attempt, parse_tag

__all__ = [
    "CUT",
    "KILLED",
    "KILLED_WAITING",
    "OUTAGE",
    "UNEXPLAINED",
    "key_mismatches",
    "repeats",
    "second_records",
]

#: A provider may take a request up to this long after its sender died (the request was
#: on the wire, or waiting for the fake's thread, when the SIGKILL came).
IN_FLIGHT_S = 1.0
#: How long before a Redis kill a send may have been answered whose outcome the outage kept
#: from being recorded (its finish call in flight when Redis went away).
OUTAGE_REACH_S = 2.0
#: Causes of a repeated send, as the table groups them.
KILLED_WAITING, KILLED, CUT, OUTAGE, UNEXPLAINED = (
    "worker SIGKILLed before the provider's answer reached it",
    "worker SIGKILLed after the answer, before recording it",
    "claim or recorded outcome dropped by the AOF cut",
    "Redis killed before the outcome was recorded",
    "unexplained",
)
#: Time for a provider's answer to reach its sender (loopback, a loaded machine).
ANSWER_TRAVEL_S = 0.05
#: How soon after its answer a send's outcome is recorded, at most, on a loaded machine
#: (for telling whether an AOF cut dropped it).
RECORD_SLACK_S = 0.5


def repeat_cause(run: Facts, prev: Attempt, cur: Attempt) -> tuple[str, str]:
    """Why ``cur`` was sent although the provider had accepted ``prev``: its class (one of
    the constants above) and the detail. The cut of an AOF comes first: a worker killed
    after it plays no part (the record had gone back to waiting)."""
    # the outcome can only have been recorded once the answer was written; a send in the
    # cut second had its claim (lease) there too: the record went back to waiting
    answered = prev.answered_at if prev.answered_at is not None else prev.at + prev.late_s
    for what, when, slack in (("answered", answered, RECORD_SLACK_S), ("sent", prev.at, 0.0)):
        cut = run.cut_covering(when, when + slack)
        if cut is not None and cur.at > cut.killed_at:
            return (
                CUT,
                f"{what} {cut.killed_at - when:.3f} s before the Redis kill; "
                f"the AOF kept {cut.killed_at - cut.kept_until:.3f} s less",
            )
    killed = run.killed.get(prev.sender)
    if killed is not None and prev.at - IN_FLIGHT_S <= killed <= cur.at:
        if killed < prev.at:
            return KILLED_WAITING, (
                f"worker {prev.sender} SIGKILLed with the request on the wire; "
                f"the provider took it {1000 * (prev.at - killed):.0f} ms later"
            )
        if prev.answered_at is None or killed <= answered + ANSWER_TRAVEL_S:
            held = f", the provider holding its answer {prev.late_s:.1f} s" if prev.late_s else ""
            return KILLED_WAITING, (
                f"worker {prev.sender} SIGKILLed {1000 * (killed - prev.at):.0f} ms after the provider "
                f"accepted{held}"
            )
        return KILLED, (
            f"worker {prev.sender} SIGKILLed {1000 * (killed - answered):.0f} ms after the provider's answer"
        )
    for kill in run.data.redis_kills:
        if kill.killed_at - OUTAGE_REACH_S <= answered <= kill.up_at and cur.at >= kill.killed_at:
            return OUTAGE, f"answered {answered - kill.killed_at:+.2f} s from the Redis kill"
    if prev.sender == cur.sender:
        return UNEXPLAINED, f"worker {prev.sender} sent it twice, no fault in between"
    slow = f" (the provider answered it {prev.late_s:.1f} s late)" if prev.late_s else ""
    return UNEXPLAINED, f"{cur.sender} sent it again while {prev.sender}, not killed, had sent it{slow}"


def repeats(run: Facts) -> list[dict[str, Any]]:
    """Every repeat, with its cause."""
    found: list[dict[str, Any]] = []
    for record_id in run.attempts:
        accepts = run.accepts(record_id)
        for prev, cur in zip(accepts, accepts[1:], strict=False):
            cause, detail = repeat_cause(run, prev, cur)
            found.append(
                {
                    "id": record_id,
                    "channel": cur.channel,
                    "kind": "provider-deduped" if cur.outcome == DEDUPED else "sent twice",
                    "first": run.rel(prev.at),
                    "again": run.rel(cur.at),
                    "by": [prev.sender, cur.sender],
                    "answer_held_s": round(prev.late_s, 2),
                    "cause": cause,
                    "detail": detail,
                    "explained": cause != UNEXPLAINED,
                }
            )
    return found


def second_records(run: Facts) -> list[dict[str, Any]]:
    """Notifications (tags) accepted under more than one record id, with their causes."""
    found: list[dict[str, Any]] = []
    ids_by_tag: dict[str, list[str]] = defaultdict(list)
    for record_id, attempts in run.attempts.items():
        for tag in {a.tag for a in attempts if a.outcome in (ACCEPTED, DEDUPED)}:
            ids_by_tag[tag].append(record_id)
    for tag, ids in ids_by_tag.items():
        if len(ids) < 2:
            continue
        parsed = parse_tag(tag)
        results = run.by_seq.get(parsed[0], []) if parsed else []
        returned = {r.record_id for r in results if r.record_id}
        for extra in sorted(set(ids) - returned) or sorted(ids)[1:]:
            cause, explained = _second_record_cause(run, results, extra in returned)
            channel = results[0].call.channel if results else "?"
            found.append(
                {
                    "tag": tag,
                    "channel": channel,
                    "ids": sorted(ids),
                    "extra": extra,
                    "cause": cause,
                    "explained": explained,
                }
            )
    return found


def key_mismatches(run: Facts) -> list[dict[str, Any]]:
    """Calls with one idempotency key that got different ids back."""
    found: list[dict[str, Any]] = []
    for seq, results in run.by_seq.items():
        keyed = [r for r in results if r.call.idempotency_key and r.record_id]
        key_ids = {r.record_id or "" for r in keyed}
        if len(key_ids) > 1:
            first = min(keyed, key=lambda r: r.returned or 0)
            cut = run.cut_for(first)
            found.append(
                {
                    "seq": seq,
                    "ids": sorted(key_ids),
                    "explained": cut is not None,
                    "cause": "the first call's record was in the second the AOF cut dropped"
                    if cut
                    else "no fault explains it",
                }
            )
    return found


def _second_record_cause(run: Facts, results: list[CallResult], returned: bool) -> tuple[str, bool]:
    if not returned:
        for result in results:
            for start, end in result.raised:
                for kill in run.data.redis_kills:
                    if kill.killed_at - 1.0 <= end and start <= kill.up_at + 1.0:
                        return (
                            "notify() raised as Redis was killed, after the record was stored; "
                            "the application's retry stored a second one",
                            True,
                        )
        return "a record no call returned, and no call raised while Redis was down", False
    keyed = [r for r in results if r.returned is not None]
    first = min(keyed, key=lambda r: r.returned or 0) if keyed else None
    if run.cut_for(first):
        return "the first record (and its idempotency key) was in the second the AOF cut dropped", True
    return "two calls returned two ids for one notification, no fault explains it", False
