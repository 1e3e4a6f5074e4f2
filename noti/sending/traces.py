"""The trace context records keep (``noti_trace``, :mod:`noti.tracing`), read back where a
record's trace goes on later: the pump publishing a delayed or retried record's message,
and the receipts of its vendor. Asked only while noti traces (one pipelined round trip)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any, cast

from noti.core.attempt import Outcome
from noti.core.record import Status
from noti.delivery.state import DeliveryReport
from noti.redis.outage import translate_errors
from noti.sending.runtime import Runtime
from noti.tracing import extracted, fail, from_text, start, tracer

__all__ = ["note_outcome", "receipt_spans", "record_traces", "traced_receipts"]


def record_traces(runtime: Runtime, record_ids: Sequence[str]) -> dict[str, dict[str, str]]:
    """By record id, the trace context each of ``record_ids`` was made in (those that have
    one); nothing, and no round trip, when noti does not trace.

    Raises:
        StoreUnavailable: Redis cannot be reached.
    """
    if not record_ids or tracer() is None:
        return {}
    client, keys = runtime.redis, runtime.keys
    with translate_errors(client):
        pipe = client.pipeline(transaction=False)
        for record_id in record_ids:
            pipe.hget(keys.record(record_id), "noti_trace")
        texts = cast(list[str | None], pipe.execute())
    found = {}
    for record_id, text in zip(record_ids, texts, strict=True):
        headers = from_text(text)
        if headers is not None:
            found[record_id] = headers
    return found


def receipt_spans(runtime: Runtime, reports: Sequence[DeliveryReport]) -> list[Any] | None:
    """One started ``noti.receipt`` span per report, each a child of its record's trace (a
    report naming only the vendor's id finds its record as the delivery book does) and
    linked to the current span (the push's request, or the poll); None when noti does not
    trace (:func:`traced_receipts` ends them)."""
    if not reports or tracer() is None:
        return None
    client, keys = runtime.redis, runtime.keys
    with translate_errors(client):
        pipe = client.pipeline(transaction=False)
        for report in reports:
            if not report.record_id and report.vendor_id:
                pipe.hget(keys.vendor_ids, f"{report.provider}:{report.vendor_id}")
        named = iter(cast(list[str | None], pipe.execute()))
    record_ids = [report.record_id or (next(named) if report.vendor_id else None) or "" for report in reports]
    traces = record_traces(runtime, [r for r in dict.fromkeys(record_ids) if r])
    spans = []
    for report, record_id in zip(reports, record_ids, strict=True):
        attributes = {"noti.provider": report.provider, "noti.delivery": report.state.value}
        if record_id:
            attributes["noti.record_id"] = record_id
        if report.vendor_id:
            attributes["noti.vendor_id"] = report.vendor_id
        parent = extracted(traces.get(record_id))  # none: a child of the current span
        links = (None,) if parent is not None else ()
        spans.append(start("noti.receipt", attributes=attributes, parent=parent, links=links))
    return spans


@contextlib.contextmanager
def traced_receipts(runtime: Runtime, reports: Sequence[DeliveryReport]) -> Iterator[list[str]]:
    """While ``reports`` are applied, a ``noti.receipt`` span each (:func:`receipt_spans`);
    the block adds to the list it gets what became of each (``applied``, ``stale``, …:
    :data:`noti.delivery.book.Applied`), set on the spans as they end."""
    spans = receipt_spans(runtime, reports)
    results: list[str] = []
    try:
        yield results
    finally:
        for n, started in enumerate(spans or ()):
            started.set_attribute("noti.receipt.result", results[n] if n < len(results) else "unapplied")
            started.end()


def note_outcome(span: Any, outcome: Outcome | None) -> None:
    """Set what an attempt made of its record on its ``noti.deliver`` span (None: nothing
    was attempted, the record was not this message's to send)."""
    if span is None:
        return
    if outcome is None:
        span.set_attribute("noti.outcome", "skipped")
        return
    span.set_attributes({"noti.outcome": outcome.status.name.lower(), "noti.attempt": outcome.retry})
    if outcome.status is not Status.DONE:
        kind = outcome.error_class or outcome.errmsg.split(":", 1)[0]
        span.set_attribute("error.type", kind)
        fail(span, kind)
