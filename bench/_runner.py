"""Running scenarios and reporting them: the command line shared by ``python -m bench`` and
each ``python -m bench.<name>_bench`` script."""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bench._floor import apply_floors, floor_now, needs_floor
from bench._harness import write_results
from bench._machine import describe, probe
from bench._noti import FAST, WorkerConfig
from bench._report import Row, attempt, format_table, rows_json

__all__ = ["Scenario", "main", "run"]

#: ``scenario(reps, smoke, config, ctx)``: rows; ``ctx`` carries results between scenarios.
Scenario = Callable[[int, bool, WorkerConfig, dict[str, Any] | None], list[Row]]


def run(
    scenarios: Mapping[int, Scenario], only: Sequence[int], reps: int, smoke: bool, config: WorkerConfig
) -> list[Row]:
    """Run the scenarios numbered ``only``, in order; a crashed scenario becomes a failed row."""
    ctx: dict[str, Any] = {}
    rows: list[Row] = []
    for number in sorted(only):
        started = time.monotonic()
        print(f"== scenario {number}", file=sys.stderr, flush=True)
        try:
            rows += scenarios[number](reps, smoke, config, ctx)
        except Exception as exc:  # noqa: BLE001 - reported in the table, exit status 1
            traceback.print_exc(file=sys.stderr)
            rows.append(Row(number, "(crashed)", "", [], "-", error=f"{type(exc).__name__}: {exc}"))
        print(f"   scenario {number}: {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    if needs_floor(rows):
        floor = ctx.get("floor") or attempt([], "the floor", lambda: floor_now(smoke))
        if floor:
            apply_floors(rows, floor)
    return rows


def _numbers(text: str) -> list[int]:
    try:
        return sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of scenario numbers like 1,3,5") from None


def main(doc: str, scenarios: Mapping[int, Scenario], name: str, argv: Sequence[str] | None = None) -> int:
    """Parse the command line, run, print one table, write ``bench/results/<name>[-smoke].json``;
    exit status 1 when a row failed (a missed target is reported, not an error)."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=3, help="repetitions per scenario (default 3)")
    parser.add_argument("--only", type=_numbers, default=sorted(scenarios), help="e.g. 1,3,5")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, 1 repetition: check it runs")
    parser.add_argument("--processes", type=int, default=FAST.processes, help="noti worker processes")
    parser.add_argument("--pool", default=FAST.pool, help="noti worker pool (solo, prefork, threads)")
    parser.add_argument("--concurrency", type=int, default=FAST.concurrency, help="noti pool size")
    parser.add_argument("--mode", default=FAST.mode, help="NOTI_DELIVERY_MODE of noti's workers")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.only) - set(scenarios))
    if unknown:
        parser.error(f"no scenario {unknown}; this runs {sorted(scenarios)}")
    reps = 1 if args.smoke else max(1, args.reps)
    config = WorkerConfig(args.processes, args.pool, args.concurrency, args.mode)
    probes = 100 if args.smoke else 2000
    machine = {"before": probe(probes)}
    started = time.monotonic()
    rows = run(scenarios, args.only, reps, args.smoke, config)
    elapsed = time.monotonic() - started
    machine["after"] = probe(probes)
    smoke = " (smoke)" if args.smoke else ""
    title = f"noti vs plain Celery and the peers: {reps} rep(s){smoke}, noti workers {config.label}"
    print(f"\n{title}, {elapsed:.0f} s; ratio = noti / baseline (median of per-repetition ratios)")
    print(f"noti's workers: {config.settings}\n")
    print(format_table(rows))
    print("\n" + "\n".join(describe(when, measured) for when, measured in machine.items()))
    path = write_results(
        f"{name}-smoke" if args.smoke else name,
        {
            "reps": reps,
            "smoke": args.smoke,
            "only": args.only,
            "config": config.as_json(),
            "seconds": elapsed,
            "machine": machine,
            "rows": rows_json(rows),
        },
    )
    print(f"\nresults: {path}")
    return 1 if any(r.error for r in rows) else 0
