"""Cluster-wide counters, kept in Redis by the scripts that change what they count.

Every counter is a field of one hash (:attr:`noti.core.keys.Keys.metrics`, ``noti:metrics``),
incremented by the Lua script that makes the change it counts, in the same atomic step: a
record created (``create.lua``, ``schedule.lua``), finished (``finish.lua``: sent, retried,
failed, invalid, dead-lettered, and the provider calls' latency), revoked (``revoke.lua``),
cancelled (``cancel.lua``), put back to waiting (``revive.lua``); an event dispatched or
processed (``noti/events/*.lua``). So the counts are the same whoever reads them, survive
every worker's restart, cost no round trip of their own, and never count a change that did
not happen (a finish fenced off by a lost lease, an idempotent duplicate).

A field is ``<family>|<label>|…``, the provider (a name from the settings, which may hold
``|``) always last. This module builds the fields the Python side hands to the scripts
(:func:`finish_tally`, :func:`added_field`) and reads them back (:func:`parse`); the
channel of a finish is put in by ``finish.lua`` from the record itself, and the scripts that
find the labels themselves (``revoke.lua``, ``cancel.lua``, ``revive.lua``, the event
scripts) build the same shape. :data:`FAMILIES` is the one list of what exists;
:mod:`noti.observe` turns it into Prometheus metrics.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "DEFAULT_PROVIDER",
    "FAMILIES",
    "LATENCY_BOUNDS_S",
    "NO_PROVIDER",
    "Family",
    "added_field",
    "finish_tally",
    "parse",
]

SEP = "|"
#: The provider label of a record that names none (its channel's configured default decides
#: when it is sent).
DEFAULT_PROVIDER = "default"
#: The provider label of an outcome no provider answered (a poisoned record, a target that
#: opted out earlier, a channel without a usable provider).
NO_PROVIDER = "none"
#: Upper bounds of the provider latency histogram's buckets, seconds (``+Inf`` implied).
LATENCY_BOUNDS_S: tuple[float, ...] = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_BOUND_LABELS = tuple(f"{b:g}" for b in LATENCY_BOUNDS_S) + ("+Inf",)


@dataclass(frozen=True, slots=True)
class Family:
    """One counter family: its field prefix in the hash and its labels, the provider last."""

    code: str
    labels: tuple[str, ...]
    #: What one increment stands for (the Prometheus help text).
    help: str


#: Every counter family, by field prefix. ``lat`` and ``latsum`` together make the provider
#: latency histogram (bucket counts, not cumulative; the sum in microseconds).
FAMILIES: Mapping[str, Family] = {
    f.code: f
    for f in (
        Family("added", ("channel", "provider"), "Notifications stored (an idempotent duplicate is not)"),
        Family("sent", ("channel", "provider"), "Notifications delivered (status 10)"),
        Family(
            "retried",
            ("channel", "provider"),
            "Attempts that put the notification back to wait for a later one (a retry back-off, "
            "a rate-limit wait)",
        ),
        Family("failed", ("channel", "reason", "provider"), "Notifications failed (status 0)"),
        Family(
            "invalid",
            ("channel", "reason", "provider"),
            "Notifications made invalid by their attempt (status -1; revocations are counted apart)",
        ),
        Family("dead_lettered", ("channel", "reason", "provider"), "Dead letters written for notifications"),
        Family("revoked", ("channel", "provider"), "Waiting notifications revoked (status -1)"),
        Family("cancelled", ("channel", "provider"), "Scheduled notifications cancelled (deleted)"),
        Family("revived", ("channel", "provider"), "Failed or invalid notifications put back to waiting"),
        Family("lat", ("channel", "le", "provider"), "Provider calls by latency bucket"),
        Family("latsum", ("channel", "provider"), "Provider call time, microseconds"),
        Family(
            "delivery",
            ("channel", "state", "provider"),
            "Delivery statuses reached by vendors' receipts (delivered, undelivered, accepted) or "
            "by their silence (unknown)",
        ),
        Family(
            "receipts",
            ("result", "provider"),
            "Receipts taken: applied, stale (not above the record's status: a duplicate or a late "
            "intermediate word), gone (no such record), foreign (the record was sent through "
            "another provider, under another vendor id or by another account: refused), unsent "
            "(the record is not sent yet: refused), early (kept until the send is recorded), "
            "dropped (not kept: the kept receipts are at NOTI_RECEIPT_EARLY_MAX)",
        ),
        Family(
            "fallbacks",
            ("channel", "result"),
            "Fallbacks no longer needed (cancelled by a delivered receipt)",
        ),
        Family(
            "suppressed",
            ("category", "channel", "reason"),
            "Channels of recipient notices not sent: the recipient opted out (optout) or the "
            "address is on the suppression list (suppressed); each is an invalid record",
        ),
        Family(
            "held",
            ("category", "channel"),
            "Records of recipient notices held until the recipient's quiet hours end",
        ),
        Family("digested", ("category",), "Events put into a recipient's digest window"),
        Family(
            "throttled",
            ("category", "channel", "action"),
            "Notice records over their category's per-recipient throttle: dropped (an invalid "
            "record) or delayed (due when the throttle lets them through)",
        ),
        Family(
            "deduplicated",
            ("category",),
            "Notices not made again: a deduplication key named one made within its window",
        ),
        Family(
            "digests",
            ("category", "result"),
            "Digest windows closed: made (one notice of their events) or failed (the notice "
            "was refused: the recipient, template or category gone)",
        ),
        Family("events_dispatched", (), "Events stored (an idempotent duplicate is not)"),
        Family("events_done", ("result",), "Events processed: ok, error (a listener failed) or poison"),
    )
}


def _label(value: str) -> str:
    """A label value safe inside a field and a tally line (no tab, no newline)."""
    if "\t" in value or "\n" in value:
        return value.replace("\t", " ").replace("\n", " ")
    return value


def field(code: str, *labels: str) -> str:
    """The hash field of family ``code`` with ``labels`` (in the family's order)."""
    return SEP.join((code, *(_label(v) for v in labels)))


def added_field(channel: str, provider: str | None) -> str:
    """The ``added`` field of a record of ``channel`` that names ``provider`` (or none)."""
    return field("added", channel, provider or DEFAULT_PROVIDER)


def latency_bucket(seconds: float) -> str:
    """The ``le`` label of the histogram bucket ``seconds`` falls in."""
    return _BOUND_LABELS[bisect.bisect_left(LATENCY_BOUNDS_S, seconds)]


def finish_tally(
    *,
    status: int,
    provider: str,
    reason: str,
    dead_letter: bool,
    calls: Sequence[tuple[str, float]] = (),
) -> str:
    """The counters one recorded outcome moves, as ``finish.lua`` takes them: lines of
    ``family|labels`` or ``family|labels<TAB>amount`` without the channel, which the script
    puts after the family from the record itself. They are counted only if the outcome is
    applied (its sender still held the lease).

    ``status`` is the record's new ``noti_st``; ``provider`` the provider whose answer decided
    it (:data:`NO_PROVIDER` when none answered); ``reason`` the dead-letter class of a failed
    or invalid outcome; ``calls`` each provider call of the attempt with its duration (s).
    """
    provider = _label(provider or NO_PROVIDER)
    if status == 10:
        lines = [f"sent{SEP}{provider}"]
    elif status == 1:
        lines = [f"retried{SEP}{provider}"]
    else:
        lines = [SEP.join(("failed" if status == 0 else "invalid", reason, provider))]
        if dead_letter:
            lines.append(SEP.join(("dead_lettered", reason, provider)))
    for name, seconds in calls:
        name = _label(name)
        lines.append(SEP.join(("lat", latency_bucket(seconds), name)))
        lines.append(f"latsum{SEP}{name}\t{max(0, round(seconds * 1e6))}")
    return "\n".join(lines)


def parse(fields: Mapping[str, str]) -> Iterable[tuple[Family, tuple[str, ...], int]]:
    """Each counter of the hash ``fields`` (as ``HGETALL`` returns it) as ``(family, label
    values, value)``; fields of unknown families or shapes are skipped."""
    for name, raw in fields.items():
        code, _, rest = name.partition(SEP)
        family = FAMILIES.get(code)
        if family is None:
            continue
        n = len(family.labels)
        values = tuple(rest.split(SEP, n - 1)) if n else ()
        if len(values) != n or (n == 0 and rest):
            continue
        try:
            count = int(raw)
        except ValueError:
            continue
        yield family, values, count
