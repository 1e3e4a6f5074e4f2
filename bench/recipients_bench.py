"""What notifying people costs (issue 34): the recipients layer against the raw call.

19. ``notify(recipient=…, template=…)`` one at a time, against ``notify_sms`` with the text
    already written (the cost of the layer: profile, category and template read in one round
    trip, the template rendered, the preference check and the records written by one script);
    the same in bulk (``recipients.notify_many`` against ``notify_many`` of raw SMS); and the
    rate of a bulk profile import from CSV (100,000 profiles; smoke: 5,000).

Each notice reaches one channel (SMS) of one of 1,000 recipients in turn, category
``orders`` (preferences enforced), with a template that has an English and a Chinese
variant; the raw side sends the same text to the same numbers. Repetitions are interleaved
(recipients, raw, recipients, …) on one private Redis, flushed before each run. The issue's
target: the layer costs at most 1.5x the raw call (rate ratio >= 0.667); an import of
100,000 profiles "in minutes, not hours" (>= 1,000 profiles/s: 100 s).

    .venv/bin/python -m bench.recipients_bench [--reps 3] [--smoke]
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from bench._harness import redis_server
from bench._noti import FAST, WorkerConfig, noti_env, point_driver, write_config
from bench._report import Row, attempt, errors_of, paired_ratio, present
from bench._runner import main
from bench.enqueue_bench import noti_notify_many

__all__ = ["interleaved", "scenario_19"]

SIZES = {"one": (20_000, 500), "bulk": (50_000, 2_000), "import": (100_000, 5_000)}
RECIPIENTS = 1_000
TEMPLATE = {
    "default_locale": "en",
    "channels": {
        "sms": {
            "en": {"text": "Order {{ order }} shipped, {{ recipient.attributes.name }}"},
            "zh": {"text": "订单 {{ order }} 已发货"},
        }
    },
}


def _phone(i: int) -> str:
    return f"+86139{i % RECIPIENTS:08d}"


def _given() -> None:
    from noti import recipients
    from noti.recipients.importing import rows_of_csv

    recipients.put_category("orders", {"channels": {"sms": True}})
    recipients.put_template("order_shipped", TEMPLATE)
    rows = "id,sms,locale,attr.name\n" + "".join(f"u{i},{_phone(i)},en,User {i}\n" for i in range(RECIPIENTS))
    result = recipients.import_rows(rows_of_csv(io.StringIO(rows)))
    if result.refused:
        raise AssertionError(f"profiles refused: {result.refused[:3]}")


def layer_one_at_a_time(n: int) -> float:
    import noti

    _given()
    noti.notify(recipient="u0", template="order_shipped", data={"order": 0}, category="orders")
    started = time.perf_counter()
    for i in range(n):
        noti.notify(
            recipient=f"u{i % RECIPIENTS}", template="order_shipped", data={"order": i}, category="orders"
        )
    return n / (time.perf_counter() - started)


def raw_one_at_a_time(n: int) -> float:
    import noti

    noti.notify_sms(_phone(0), "warm-up")
    started = time.perf_counter()
    for i in range(n):
        noti.notify_sms(_phone(i), f"Order {i} shipped, User {i % RECIPIENTS}")
    return n / (time.perf_counter() - started)


def layer_bulk(n: int) -> float:
    from noti import recipients

    _given()
    items = [
        {
            "recipient": f"u{i % RECIPIENTS}",
            "template": "order_shipped",
            "data": {"order": i},
            "category": "orders",
        }
        for i in range(n)
    ]
    api = recipients._api()
    started = time.perf_counter()
    result = api.notify_many(items)
    elapsed = time.perf_counter() - started
    if result.stored != n:
        raise AssertionError(f"stored {result.stored} of {n}: {result.refused[:3]}")
    return n / elapsed


def raw_bulk(n: int) -> float:
    items = [
        {"type": "sms", "to": _phone(i), "text": f"Order {i} shipped, User {i % RECIPIENTS}"}
        for i in range(n)
    ]
    return noti_notify_many(n, items)


def import_rate(n: int) -> float:
    from noti import recipients
    from noti.recipients.importing import rows_of_csv

    text = "id,sms,email,locale,timezone,attr.name\n" + "".join(
        f"p{i},+86138{i:08d},p{i}@example.com,zh-Hant-TW,Asia/Taipei,Person {i}\n" for i in range(n)
    )
    started = time.perf_counter()
    result = recipients.import_rows(rows_of_csv(io.StringIO(text)))
    elapsed = time.perf_counter() - started
    if result.created != n:
        raise AssertionError(f"created {result.created} of {n}: {result.refused[:3]}")
    return n / elapsed


def interleaved(
    reps: int, runs: dict[str, tuple[Callable[[int], float], int]]
) -> tuple[dict[str, list[float | None]], dict[str, list[str]]]:
    """Each run ``reps`` times, interleaved, on one private Redis flushed before each (the
    driver pointed at it): per run its samples (None: failed) and its errors."""
    samples: dict[str, list[float | None]] = {name: [] for name in runs}
    errors: dict[str, list[str]] = {name: [] for name in runs}
    with redis_server() as url:
        import redis

        point_driver(noti_env(url, write_config()))
        client = redis.Redis.from_url(url)
        for rep in range(reps):
            for name, (run, size) in runs.items():
                client.flushall()
                samples[name].append(attempt(errors[name], f"{name} rep {rep + 1}", partial(run, size)))
    return samples, errors


def scenario_19(
    reps: int, smoke: bool, config: WorkerConfig = FAST, ctx: dict[str, Any] | None = None
) -> list[Row]:
    """The recipients layer's cost, one at a time and in bulk, and the profile import rate."""
    one, bulk, imported = SIZES["one"][smoke], SIZES["bulk"][smoke], SIZES["import"][smoke]
    s, errors = interleaved(
        reps,
        {
            "layer": (layer_one_at_a_time, one),
            "raw": (raw_one_at_a_time, one),
            "layer_bulk": (layer_bulk, bulk),
            "raw_bulk": (raw_bulk, bulk),
            "import": (import_rate, imported),
        },
    )
    return [
        Row(
            19,
            f"notify(recipient=…, template=…) x {one:,}, one at a time",
            "/s",
            present(s["layer"]),
            "<= 1.5x the raw call (ratio >= 0.667)",
            baseline=present(s["raw"]),
            baseline_name="notify_sms() of the same texts to the same numbers",
            check=lambda r: (r.ratio or 0) >= 1 / 1.5,
            ratio=paired_ratio(s["layer"], s["raw"]),
            error=errors_of(errors, "layer", "raw"),
        ),
        Row(
            19,
            f"recipients notify_many({bulk:,})",
            "/s",
            present(s["layer_bulk"]),
            "<= 1.5x the raw call (ratio >= 0.667)",
            baseline=present(s["raw_bulk"]),
            baseline_name="notify_many() of the same SMS",
            check=lambda r: (r.ratio or 0) >= 1 / 1.5,
            ratio=paired_ratio(s["layer_bulk"], s["raw_bulk"]),
            error=errors_of(errors, "layer_bulk", "raw_bulk"),
        ),
        Row(
            19,
            f"profile import from CSV, {imported:,} profiles",
            "/s",
            present(s["import"]),
            ">= 1,000 profiles/s (100,000 in under 100 s)",
            check=lambda r: r.median >= 1_000,
            error=errors_of(errors, "import"),
        ),
    ]


SCENARIOS = {19: scenario_19}

if __name__ == "__main__":
    import sys

    sys.exit(main(__doc__ or "", SCENARIOS, "recipients"))
