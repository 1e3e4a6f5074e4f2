"""The delivery book: vendors' reports applied to records, in Redis, atomically.

=========================  ==================================================================
step                       what happens (one script call each, ``noti/lua``)
=========================  ==================================================================
a send is recorded         ``finish.lua``: the record's delivery becomes ``accepted`` (its
                           receipt awaited in the watch, its vendor id noted) or
                           ``delivered`` (webhook, e-mail: the answer was the delivery)
a report names the record  ``delivery.lua``: applied only if the record was sent through
                           the report's provider under the report's vendor id (below);
                           forward-only; a ``delivered`` cancels the record's waiting
                           fallback, an ``undelivered`` makes it due now
a report names only the    the vendor id is looked up under the report's provider; one not
vendor's id                recorded yet (the receipt beat the worker recording the send) is
                           kept (``receipt_early.lua``) and applied when ``finish.lua``
                           records that id for a send through that provider
no receipt in time         :meth:`DeliveryBook.sweep` (beat): ``unknown``; kept receipts
                           older than ``NOTI_RECEIPT_EARLY_TTL_S`` and vendor ids older than
                           ``NOTI_RECEIPT_WINDOW_S`` are dropped
=========================  ==================================================================

**A receipt speaks only for what its provider sent.** A vendor's report moves a record (and
its fallback) only when the record is sent (status 10), ``noti_sent_by`` is the provider the
report came through, the record's vendor message id is the report's (what that send
returned: a message of another account of the vendor, or a forged id, has another), and,
when the report names a record id too, it is that record. Else it is refused for the record
and counted (``noti_receipts_total{result}``): ``foreign`` for a record sent otherwise,
``unsent`` for one not sent yet. A report naming a record not sent yet is kept under
``<provider>:<vendor id>`` (as one naming only an unknown vendor id is), so the race of a
receipt with its own send still ends right, and a forged one applies to nothing: it waits for
a send through that provider returning that id, which never comes, and is forgotten. Kept
receipts are bounded: ``NOTI_RECEIPT_EARLY_MAX`` of them at most (more are ``dropped``), each
for ``NOTI_RECEIPT_EARLY_TTL_S``.

A report that says its target is to be suppressed (a hard bounce, a complaint:
:attr:`~noti.delivery.state.DeliveryReport.suppress`) suppresses the record's target for its
channel once it passes those checks (applied, or stale: the record is final already), with
why (:mod:`noti.core.suppression`); a refused one suppresses nothing.

Every change of a record that asked for status callbacks (``status_callback=``) is written to
the status-change stream in the same step (:mod:`noti.sending.callbacks` sends them).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import redis

from noti.core.keys import Keys
from noti.core.record import Channel, msgid_field, msgid_fields, now_ms
from noti.core.suppression import Suppressed, SuppressionList
from noti.delivery.state import Delivery, DeliveryReport, PendingDelivery
from noti.redis import counters
from noti.redis.conn import load_script
from noti.redis.outage import translate_errors

__all__ = ["Applied", "DeliveryBook"]

log = logging.getLogger(__name__)

#: What became of one report: applied to its record; not above the record's delivery status
#: (a duplicate, a late intermediate status); no such record; refused because the record was
#: sent through another provider or under another vendor id (``foreign``) or is not sent yet
#: (``unsent``; kept under its vendor id for its send); kept until its send is recorded
#: (``early``: it names only a vendor id not recorded yet); or not kept, the kept receipts
#: being at their bound (``dropped``).
Applied = Literal["applied", "stale", "gone", "foreign", "unsent", "early", "dropped"]

#: Records marked ``unknown`` per sweep round at most (the next round takes the rest).
SWEEP_BATCH = 500
#: Watch entries read per page, and at most per round, to find the records polled vendors
#: are asked about.
PENDING_PAGE = 500
PENDING_SCAN = 20_000
#: Status-change stream length kept (entries the callback sender has not taken yet).
CHANGES_MAX_LEN = 100_000


@dataclass(frozen=True, slots=True)
class _Resolved:
    report: DeliveryReport
    record_id: str
    early_field: str = ""
    #: A vendor's word, checked against what the record's send returned (False: noti's own
    #: word, the sweep's ``unknown``).
    vendors: bool = True


class DeliveryBook:
    """Applies :class:`DeliveryReport` s to the records of one Redis database."""

    def __init__(
        self,
        client: redis.Redis,
        keys: Keys,
        *,
        window_s: float = 3 * 86400,
        early_max: int = 10_000,
        early_ttl_s: float = 600.0,
    ) -> None:
        self.redis = client
        self.keys = keys
        self.window_ms = int(window_s * 1000)
        self.early_max = early_max
        self.early_ttl_ms = int(early_ttl_s * 1000)
        self._apply = load_script(client, "delivery")
        self._keep_early = load_script(client, "receipt_early")
        self._fallback_now = load_script(client, "fallback_now")
        self.suppressions = SuppressionList(client, keys)

    # --- reports ---------------------------------------------------------------------------

    def apply(self, reports: Sequence[DeliveryReport], *, at_ms: int | None = None) -> list[Applied]:
        """Apply ``reports`` (in order); per report what became of it.

        Raises:
            StoreUnavailable: Redis cannot be reached (nothing, or a prefix, is applied: a
                vendor pushing again is harmless, the rule being forward-only).
        """
        if not reports:
            return []
        now = now_ms() if at_ms is None else at_ms
        results: list[Applied | None] = [None] * len(reports)
        resolved: dict[int, _Resolved] = {}
        by_vendor = [i for i, r in enumerate(reports) if not r.record_id]
        with translate_errors(self.redis):
            if by_vendor:
                fields = [_vendor_field(reports[i]) for i in by_vendor]
                found = self.redis.hmget(self.keys.vendor_ids, fields)
                unknown: list[int] = []
                for i, record_id in zip(by_vendor, found, strict=True):
                    if record_id is None:
                        unknown.append(i)
                    else:
                        resolved[i] = _Resolved(reports[i], _text(record_id))
                if unknown:
                    # kept until the send is recorded, unless it was recorded meanwhile
                    args: list[str | int] = [now, self.early_max, self.early_ttl_ms]
                    for i in unknown:
                        args += [_vendor_field(reports[i]), reports[i].to_json(), reports[i].provider]
                    answers = self._keep_early(
                        keys=[
                            self.keys.vendor_ids,
                            self.keys.early_receipts,
                            self.keys.early_receipt_age,
                            self.keys.metrics,
                        ],
                        args=args,
                    )
                    for i, answer in zip(unknown, answers, strict=True):
                        if answer == 0:
                            results[i] = "dropped"
                        elif _text(answer):
                            resolved[i] = _Resolved(reports[i], _text(answer))
                        else:
                            results[i] = "early"
            for i, report in enumerate(reports):
                if report.record_id:
                    resolved[i] = _Resolved(report, report.record_id)
            order = sorted(resolved)
            applied = self._apply_resolved([resolved[i] for i in order], now)
        for i, result in zip(order, applied, strict=True):
            results[i] = result
        return [r if r is not None else "gone" for r in results]

    def apply_early(self, receipts: Iterable[tuple[str, str]]) -> None:
        """Apply receipts kept because they came before their send was recorded, each with
        the record it turned out to name (``(record id, JSON)``, as ``finish.lua`` hands them
        back); a failure leaves them kept for :meth:`sweep`."""
        resolved = []
        for record_id, text in receipts:
            report = DeliveryReport.from_json(text)
            resolved.append(_Resolved(report, record_id, _vendor_field(report)))
        if resolved:
            try:
                with translate_errors(self.redis):
                    self._apply_resolved(resolved, now_ms())
            except Exception:  # kept; the sweep applies it
                log.warning("delivery: %d early receipt(s) left for the sweep", len(resolved), exc_info=True)

    def refuse(self, reports: Sequence[DeliveryReport]) -> None:
        """Count reports their provider's reader refused itself (``foreign``: they name an
        account of the vendor's other than the provider's); nothing else is written.

        Raises:
            StoreUnavailable: Redis cannot be reached.
        """
        if not reports:
            return
        tally: dict[str, int] = {}
        for report in reports:
            name = counters.field("receipts", "foreign", report.provider)
            tally[name] = tally.get(name, 0) + 1
        with translate_errors(self.redis):
            pipe = self.redis.pipeline(transaction=False)
            for name, amount in tally.items():
                pipe.hincrby(self.keys.metrics, name, amount)
            pipe.execute()

    def _apply_resolved(self, items: Sequence[_Resolved], now: int) -> list[Applied]:
        if not items:
            return []
        k = self.keys
        pipe = self.redis.pipeline(transaction=False)  # one round trip for all fallbacks
        for item in items:
            pipe.hget(k.record(item.record_id), "noti_fallback")
        fallbacks = pipe.execute()
        keys = [
            *(k.delivery_index(state) for state in Delivery),
            k.delivery_watch,
            k.status_changes,
            k.delayed,
            k.waiting_index,
            k.status_index(-1),
            k.status_index(1),
            k.metrics,
            k.early_receipts,
            k.early_receipt_age,
        ]
        args: list[str | int] = [now, CHANGES_MAX_LEN, self.early_max, self.early_ttl_ms]
        for item, fallback in zip(items, fallbacks, strict=True):
            report = item.report
            record_key = k.record(item.record_id)
            keys += [record_key, k.record(_text(fallback)) if fallback else record_key]
            keep = item.vendors and report.record_id and report.vendor_id and not item.early_field
            args += [
                report.state.value,
                report.code[:200],
                report.text[:500],
                report.at_ms,
                report.provider,
                "1" if fallback else "",
                item.early_field,
                "1" if item.vendors else "",
                report.vendor_id or "",
                report.record_id or "",
                report.to_json() if keep else "",
            ]
        answers = self._apply(keys=keys, args=args)
        results: list[Applied] = [_text(a) for a in answers]  # type: ignore[misc]
        self._suppress(
            [item for item, result in zip(items, results, strict=True) if _suppresses(item, result)], now
        )
        return results

    def _suppress(self, items: Sequence[_Resolved], now: int) -> None:
        """Suppress the targets of these records (reports that say so and speak for their
        record: applied, or stale because the record is final already, a complaint after the
        delivery), each with its why (:mod:`noti.core.suppression`). Done again when the
        vendor pushes the report again: the first why is kept."""
        if not items:
            return
        with translate_errors(self.redis):
            pipe = self.redis.pipeline(transaction=False)
            for item in items:
                pipe.hmget(self.keys.record(item.record_id), ["noti_type", "noti_target", "noti_c"])
            rows = pipe.execute()
        entries = []
        for item, (kind, target, creator) in zip(items, rows, strict=True):
            if kind is None or target is None:
                continue
            report = item.report
            entries.append(
                Suppressed(
                    channel=_text(kind),
                    target=_text(target),
                    reason=report.suppress,
                    code=report.code,
                    text=report.text,
                    record=item.record_id,
                    user=_text(creator or ""),
                    provider=report.provider,
                    at_ms=report.at_ms or now,
                )
            )
            log.info("delivery: record %s: its target is suppressed (%s)", item.record_id, report.suppress)
        self.suppressions.add_many(entries)

    def fallbacks_now(self, fallback_ids: Sequence[str], *, at_ms: int | None = None) -> int:
        """Make these fallbacks due now (their notification failed: no receipt will come),
        those still waiting untouched; how many were moved.

        Raises:
            StoreUnavailable: Redis cannot be reached (they go at their deadline then).
        """
        if not fallback_ids:
            return 0
        now = now_ms() if at_ms is None else at_ms
        keys = [self.keys.delayed, *(self.keys.record(i) for i in fallback_ids)]
        with translate_errors(self.redis):
            return int(self._fallback_now(keys=keys, args=[now]))

    # --- the silent ones -------------------------------------------------------------------

    def sweep(self, *, at_ms: int | None = None, batch: int = SWEEP_BATCH) -> int:
        """Mark ``unknown`` the records whose receipt did not come in time; apply kept
        receipts whose send is recorded now; drop kept receipts older than their lifetime and
        vendor ids older than the receipt window. Returns how many records were marked unknown.

        Raises:
            StoreUnavailable: Redis cannot be reached.
        """
        k = self.keys
        now = now_ms() if at_ms is None else at_ms
        with translate_errors(self.redis):
            due = [_text(x) for x in self.redis.zrangebyscore(k.delivery_watch, "-inf", now, 0, batch)]
            marked = 0
            if due:
                pipe = self.redis.pipeline(transaction=False)
                for record_id in due:
                    pipe.hget(k.record(record_id), "noti_sent_by")
                providers = pipe.execute()
                reports = [
                    DeliveryReport(_text(by) if by else "", Delivery.UNKNOWN, record_id=record_id)
                    for record_id, by in zip(due, providers, strict=True)
                ]
                results = self._apply_resolved(
                    [_Resolved(r, r.record_id or "", vendors=False) for r in reports], now
                )
                marked = results.count("applied")
                # a record gone or already final leaves the watch too
                self.redis.zrem(k.delivery_watch, *due)
            fields = [_text(f) for f in self.redis.hkeys(k.early_receipts)]
            if fields:
                ids = self.redis.hmget(k.vendor_ids, fields)
                ready = [(f, _text(i)) for f, i in zip(fields, ids, strict=True) if i is not None]
                if ready:
                    texts = self.redis.hmget(k.early_receipts, [f for f, _ in ready])
                    self.apply_early(
                        (record_id, _text(t))
                        for (_, record_id), t in zip(ready, texts, strict=True)
                        if t is not None
                    )
            for table, ages, cutoff in (
                (k.early_receipts, k.early_receipt_age, now - self.early_ttl_ms),
                (k.vendor_ids, k.vendor_id_age, now - self.window_ms),
            ):
                old = [_text(f) for f in self.redis.zrangebyscore(ages, "-inf", cutoff, 0, 10_000)]
                if old:
                    pipe = self.redis.pipeline(transaction=True)
                    pipe.hdel(table, *old)
                    pipe.zrem(ages, *old)
                    pipe.execute()
        return marked

    def pending(self, providers: Collection[str], *, limit: int = 1000) -> dict[str, list[PendingDelivery]]:
        """By provider (of ``providers``: the polled ones), the records sent through it that
        await a receipt, oldest first, at most ``limit`` each. The watch is read once for all
        of them, a page at a time, and no further than :data:`PENDING_SCAN` entries.

        Raises:
            StoreUnavailable: Redis cannot be reached.
        """
        k = self.keys
        found: dict[str, list[PendingDelivery]] = {name: [] for name in providers}
        msgids = msgid_fields()
        fields = ("noti_sent_by", "noti_target", "noti_type", "noti_dlv_accepted_at", *msgids)
        with translate_errors(self.redis):
            for start in range(0, PENDING_SCAN, PENDING_PAGE):
                ids = [_text(x) for x in self.redis.zrange(k.delivery_watch, start, start + PENDING_PAGE - 1)]
                pipe = self.redis.pipeline(transaction=False)
                for record_id in ids:
                    pipe.hmget(k.record(record_id), fields)
                for record_id, (by, target, kind, sent, *ids_by_vendor) in zip(
                    ids, pipe.execute(), strict=True
                ):
                    wanted = found.get(_text(by)) if by is not None and kind is not None else None
                    if wanted is None or len(wanted) >= limit:
                        continue
                    vendor_id = dict(zip(msgids, ids_by_vendor, strict=True)).get(
                        msgid_field(Channel(_text(kind)))
                    )
                    wanted.append(
                        PendingDelivery(
                            record_id=record_id,
                            target=_text(target or ""),
                            vendor_id=_text(vendor_id) if vendor_id else None,
                            sent_ms=int(sent or 0),
                        )
                    )
                if len(ids) < PENDING_PAGE or all(len(v) >= limit for v in found.values()):
                    break
        return found


def _suppresses(item: _Resolved, result: str) -> bool:
    """The report asks for its target's suppression and speaks for its record."""
    return bool(item.report.suppress) and item.vendors and result in ("applied", "stale")


def _vendor_field(report: DeliveryReport) -> str:
    return f"{report.provider}:{report.vendor_id}"


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
