"""``make chaos``: notifications through real workers while the run kills them and Redis, then
a reconciliation of every id ``notify()`` returned (see :mod:`chaos`).

    .venv/bin/python -m chaos [--short] [--fsync everysec|always|both] [--seed 1] [--n 10000]
        [--crash os|process] [--json PATH] [--keep]

Prints one table (a column per run) and what needs explaining under it, writes the JSON
report (default ``chaos/results/chaos.json``, ``chaos-short.json`` with ``--short``), and
exits 1 if a run failed its checks (the work directories with every process's log are then
kept and named).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

from chaos.digests import run_digests
from chaos.plan import FULL, SHORT, build_plan
from chaos.reconcile import reconcile
from chaos.report import details, table
from chaos.run import run

RESULTS = Path(__file__).resolve().parent / "results"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m chaos", description=__doc__.splitlines()[0])
    parser.add_argument("--short", action="store_true", help="1,000 notifications, 2 kills, 1 Redis restart")
    parser.add_argument("--fsync", choices=("everysec", "always", "both"), default="both")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--n", type=int, default=None, help="notifications (default 10,000; 1,000 short)")
    parser.add_argument(
        "--crash",
        choices=("os", "process"),
        default="os",
        help="os: a Redis kill also cuts the AOF back to what the fsync policy guarantees (default); "
        "process: a plain SIGKILL",
    )
    parser.add_argument("--json", type=Path, default=None, help="where to write the report")
    parser.add_argument(
        "--keep", action="store_true", help="keep the work directories (logs) of passing runs"
    )
    parser.add_argument(
        "--digests",
        choices=("on", "off", "only"),
        default="on",
        help="the digest scenario (appendfsync always) after the runs (default), not at all, or alone",
    )
    args = parser.parse_args(argv)
    size = SHORT if args.short else FULL
    plan = build_plan(args.seed, size, notifications=args.n)
    modes = ("everysec", "always") if args.fsync == "both" else (args.fsync,)
    reports, workdirs = [], []
    began = time.time()
    for fsync in modes if args.digests != "only" else ():
        print(f"chaos: {fsync}, seed {args.seed}, {plan.intents:,} notifications", flush=True)
        data = run(plan, fsync=fsync, crash=args.crash, log=lambda line: print(line, flush=True))
        report = reconcile(data)
        reports.append(report)
        workdirs.append(data.workdir)
        print(
            f"  [{fsync}] {'PASS' if report.ok else 'FAIL'} in {data.finished_s - data.started_s:.0f} s",
            flush=True,
        )
    digest_report = None
    if args.digests != "off":
        events, produce_s = (400, 12.0) if args.short else (3000, 30.0)
        print(f"chaos: digests, always, seed {args.seed}, {events:,} events", flush=True)
        digest_report, digest_dir = run_digests(
            fsync="always", seed=args.seed, events=events, produce_s=produce_s, crash=args.crash,
            log=lambda line: print(line, flush=True),
        )  # fmt: skip
    print()
    if reports:
        print(table(plan, reports))
    for report in reports:
        print(details(report))
    if digest_report is not None:
        print(digest_report.table())
    path = args.json or RESULTS / ("chaos-short.json" if args.short else "chaos.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    document = {
        "seed": args.seed,
        "size": size.name,
        "notifications": plan.intents,
        "crash": args.crash,
        "plan": {"calls": len(plan.calls), "faults": len(plan.faults), "kinds": plan.kinds},
        "runs": [r.as_json() for r in reports],
        "digests": digest_report.as_json() if digest_report is not None else None,
        "elapsed_s": round(time.time() - began, 1),
    }
    path.write_text(json.dumps(document, indent=2, default=str))
    print(f"\nreport: {path}")
    for report, workdir in zip(reports, workdirs, strict=True):
        if report.ok and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print(f"logs of the {report.fsync} run: {workdir / 'logs'}")
    if digest_report is not None:
        if digest_report.ok and not args.keep:
            shutil.rmtree(digest_dir, ignore_errors=True)
        else:
            print(f"logs of the digest run: {digest_dir / 'logs'}")
    digests_ok = digest_report is None or digest_report.ok
    return 0 if all(r.ok for r in reports) and digests_ok else 1


if __name__ == "__main__":
    sys.exit(main())
