"""Receipts asked for: each provider whose vendor is polled (:attr:`Provider.polls_receipts`:
Aliyun ``QuerySendDetails``, Tencent ``PullSmsSendStatus``, Twilio without a status callback)
is given the records sent through it that still await a receipt, and its answers are applied
(beat, ``noti.maintenance.poll_receipts``, every ``NOTI_RECEIPT_POLL_INTERVAL_S``).

Reports a vendor answered that Redis did not take (it went away between the question and
the answer) are held by this process and applied first in its next round, before any vendor
is asked again: Tencent hands each report out once, so a report pulled is not lost to an
outage. Applying a report twice is harmless (the delivery states only move forward). The
hold is in memory: a worker killed during the outage loses what it held (logged with each
report when it is taken, so an operator can tell which records stay ``unknown``)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from noti.delivery.state import DeliveryReport
from noti.errors import DeliveryError, InvalidConfig, StoreUnavailable
from noti.sending.runtime import Runtime
from noti.sending.traces import traced_receipts
from noti.tracing import span

__all__ = ["HELD_AT_MOST", "held_reports", "poll_receipts"]

log = logging.getLogger(__name__)

#: Records one provider is asked about per round at most (oldest first).
POLL_BATCH = 200
#: Reports this process holds at most while Redis is away (the oldest go first beyond it).
HELD_AT_MOST = 100_000

#: Reports answered but not applied, by store (Redis URL and key prefix): applied first next round.
_held: dict[tuple[str, str], list[DeliveryReport]] = {}


def _store_of(runtime: Runtime) -> tuple[str, str]:
    return runtime.settings.redis_url, runtime.keys.prefix


def held_reports(runtime: Runtime) -> int:
    """How many reports this process holds for ``runtime``'s store, to apply next round."""
    return len(_held.get(_store_of(runtime), ()))


def _hold(runtime: Runtime, reports: Sequence[DeliveryReport]) -> None:
    held = _held.setdefault(_store_of(runtime), [])
    held += reports
    if len(held) > HELD_AT_MOST:
        dropped = held[: len(held) - HELD_AT_MOST]
        del held[: len(dropped)]
        log.error(
            "receipts: Redis is away; %d held report(s) dropped (over %d): %s",
            len(dropped),
            HELD_AT_MOST,
            [r.to_json() for r in dropped],
        )


def _apply(runtime: Runtime, reports: Sequence[DeliveryReport], *, answered_by: str | None) -> int:
    """Apply ``reports`` (as ``answered_by`` answered them; None: held ones); how many were
    applied. If Redis does not take them, they are held.

    Raises:
        StoreUnavailable: Redis cannot be reached (``reports`` are held).
    """
    try:
        with span("noti.receipts", attributes={"noti.provider": answered_by or "(held)"}):
            with traced_receipts(runtime, reports) as traced:
                results = runtime.delivery.apply(reports)
                traced += results
    except StoreUnavailable:
        _hold(runtime, reports)
        if answered_by is None:
            log.warning("receipts: Redis is still away; %d report(s) still held", len(reports))
        else:  # each report once in the log, where a worker killed meanwhile leaves it
            log.warning(
                "receipts: Redis is away; %d report(s) of %s held for the next round: %s",
                len(reports),
                answered_by,
                [r.to_json() for r in reports],
            )
        raise
    return results.count("applied")


def poll_receipts(runtime: Runtime, *, limit: int = POLL_BATCH) -> int:
    """Apply the reports held from an earlier round, then ask every polled provider about
    its records awaiting a receipt; how many reports were applied. A provider that cannot be
    asked is logged and asked again next round.

    Raises:
        StoreUnavailable: Redis cannot be reached (what a vendor answered is held).
    """
    applied = 0
    held = _held.pop(_store_of(runtime), [])
    if held:
        applied += _apply(runtime, held, answered_by=None)
        log.info("receipts: %d held report(s) applied (%d moved a record)", len(held), applied)
    polled = {}
    for name in sorted(runtime.settings.providers):
        try:
            provider = runtime.providers.get(name)
        except InvalidConfig as exc:
            log.warning("receipts: provider %s not polled: %s", name, exc)
            continue
        if provider.polls_receipts:
            polled[name] = provider
    if not polled:
        return applied
    for name, pending in runtime.delivery.pending(polled, limit=limit).items():
        if not pending:
            continue
        try:
            reports = polled[name].poll_receipts(pending)
        except DeliveryError as exc:
            log.warning("receipts: %s could not be asked about %d record(s): %s", name, len(pending), exc)
            continue
        moved = _apply(runtime, reports, answered_by=name)
        applied += moved
        log.info(
            "receipts: %s answered %d of %d pending (%d applied)", name, len(reports), len(pending), moved
        )
    return applied
