"""Receipts asked for: each provider whose vendor is polled (:attr:`Provider.polls_receipts`:
Aliyun ``QuerySendDetails``, Tencent ``PullSmsSendStatus``, Twilio without a status callback)
is given the records sent through it that still await a receipt, and its answers are applied
(beat, ``noti.maintenance.poll_receipts``, every ``NOTI_RECEIPT_POLL_INTERVAL_S``)."""

from __future__ import annotations

import logging

from noti.errors import DeliveryError, InvalidConfig
from noti.runtime import Runtime

__all__ = ["poll_receipts"]

log = logging.getLogger(__name__)

#: Records one provider is asked about per round at most (oldest first).
POLL_BATCH = 200


def poll_receipts(runtime: Runtime, *, limit: int = POLL_BATCH) -> int:
    """Ask every polled provider about its records awaiting a receipt; how many reports were
    applied. A provider that cannot be asked is logged and asked again next round.

    Raises:
        StoreUnavailable: Redis cannot be reached.
    """
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
        return 0
    applied = 0
    for name, pending in runtime.delivery.pending(polled, limit=limit).items():
        if not pending:
            continue
        try:
            reports = polled[name].poll_receipts(pending)
        except DeliveryError as exc:
            log.warning("receipts: %s could not be asked about %d record(s): %s", name, len(pending), exc)
            continue
        results = runtime.delivery.apply(reports)
        applied += results.count("applied")
        log.info(
            "receipts: %s answered %d of %d pending (%d applied)", name, len(reports), len(pending), applied
        )
    return applied
