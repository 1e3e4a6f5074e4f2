"""What digests cost (issue 35): events into open windows, and closing many windows at once.

20. events into open digest windows, one at a time (``notify(recipient=…, digest=…)``) against
    the notice the same call makes without a digest (the cost of collecting instead of
    sending); the same in bulk (``recipients.notify_many`` of digest events); and the close of
    10,000 windows due at once (smoke: 500): windows closed and made into their notices per
    second by one ``digest_tick``.

The events go to 1,000 recipients in turn (an SMS each), category ``comments``, into windows of
an hour (none closes while events come); the close makes each window's notice with its
events. The issue names the rows and sets no target.

    .venv/bin/python -m bench.digests_bench [--reps 3] [--smoke]
"""

from __future__ import annotations

import time
from functools import partial
from typing import Any

from bench._noti import FAST, WorkerConfig
from bench._report import Row, errors_of, paired_ratio, present
from bench._runner import main
from bench.recipients_bench import interleaved

__all__ = ["scenario_20"]

SIZES = {"one": (20_000, 500), "bulk": (50_000, 2_000), "close": (10_000, 500)}
RECIPIENTS = 1_000
TEMPLATE = {
    "default_locale": "en",
    "channels": {"sms": {"en": {"text": "{{ count }} new comments, the first by {{ events[0].by }}"}}},
}


def _given(recipients_n: int = RECIPIENTS) -> None:
    from noti import recipients

    recipients.put_category("comments", {"channels": {"sms": True}})
    recipients.put_template("new_comments", TEMPLATE)
    rows = [
        {"id": f"u{i}", "addresses": {"sms": f"+86139{i:08d}"}, "locale": "en"} for i in range(recipients_n)
    ]
    result = recipients.import_rows(rows)
    if result.refused:
        raise AssertionError(f"profiles refused: {result.refused[:3]}")


def _call(i: int, digest: bool, people: int = RECIPIENTS) -> dict[str, Any]:
    call: dict[str, Any] = {
        "recipient": f"u{i % people}",
        "template": "new_comments",
        "data": {"by": f"user {i}", "comment": i},
        "category": "comments",
    }
    if digest:
        call.update(digest="comments", window="1h")
    else:  # the notice renders the same template from a digest of this one event
        call["data"] = {"events": [call["data"]], "count": 1}
    return call


def one_at_a_time(digest: bool, n: int) -> float:
    import noti

    _given()
    noti.notify(**_call(0, digest))
    started = time.perf_counter()
    for i in range(n):
        noti.notify(**_call(i, digest))
    return n / (time.perf_counter() - started)


def bulk(n: int) -> float:
    from noti.recipients.api import recipients

    _given()
    items = [_call(i, True) for i in range(n)]
    started = time.perf_counter()
    result = recipients().notify_many(items)
    elapsed = time.perf_counter() - started
    if result.stored != n:
        raise AssertionError(f"stored {result.stored} of {n}: {result.refused[:3]}")
    return n / elapsed


def close(n: int) -> float:
    from noti.recipients.api import recipients

    _given(n)
    api = recipients()
    result = api.notify_many([_call(i, True, n) for i in range(n)])
    if result.stored != n:
        raise AssertionError(f"stored {result.stored} of {n}: {result.refused[:3]}")
    started = time.perf_counter()
    done = api.digests.tick(now=int(time.time() * 1000) + 3_600_001, budget_s=3600)
    elapsed = time.perf_counter() - started
    if len(done.made) != n:
        raise AssertionError(f"made {len(done.made)} of {n} windows ({len(done.failed)} failed)")
    return n / elapsed


def scenario_20(
    reps: int, smoke: bool, config: WorkerConfig = FAST, ctx: dict[str, Any] | None = None
) -> list[Row]:
    """Events into open digests, one at a time and in bulk, and the close of many windows."""
    one, many, windows = SIZES["one"][smoke], SIZES["bulk"][smoke], SIZES["close"][smoke]
    samples, errors = interleaved(
        reps,
        {
            "digest": (partial(one_at_a_time, True), one),
            "notice": (partial(one_at_a_time, False), one),
            "bulk": (bulk, many),
            "close": (close, windows),
        },
    )
    return [
        Row(
            20,
            f"digest events, one at a time x {one:,}",
            "/s",
            present(samples["digest"]),
            "(a row the issue names; no target)",
            baseline=present(samples["notice"]),
            baseline_name="the same notify(recipient=…) without a digest (a notice made now)",
            ratio=paired_ratio(samples["digest"], samples["notice"]),
            error=errors_of(errors, "digest", "notice"),
        ),
        Row(
            20,
            f"digest events, notify_many({many:,})",
            "/s",
            present(samples["bulk"]),
            "(a row the issue names; no target)",
            error=errors_of(errors, "bulk"),
        ),
        Row(
            20,
            f"close of {windows:,} windows due at once (each made into its notice)",
            "/s",
            present(samples["close"]),
            "(a row the issue names; no target)",
            error=errors_of(errors, "close"),
        ),
    ]


SCENARIOS = {20: scenario_20}

if __name__ == "__main__":
    import sys

    sys.exit(main(__doc__ or "", SCENARIOS, "digests"))
