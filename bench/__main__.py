"""``make bench``: every scenario of the performance issue, noti against plain Celery and the
peer libraries the issue names (:mod:`bench.peers`) in one run.

    .venv/bin/python -m bench [--reps 3] [--only 1,3,5] [--smoke]
        [--processes 2] [--pool solo] [--concurrency 1] [--mode batch]

Scenarios (each on its own private redis-server; repetitions interleaved noti, baseline, …):

0. the floor of one Redis: PING, EVALSHA, pipelined LPUSH; rows show a fraction of it (bench.limits_bench)
1. ``notify()`` one at a time vs plain ``.delay()``                    (bench.enqueue_bench)
2. ``notify_many()`` vs a Celery publish loop                          (bench.enqueue_bench)
3. drain 20,000 SMS, sandbox, vs plain Celery prefork -c 2 INCR task   (bench.drain_bench)
4. drain 5,000 webhooks, 20 ms HTTP, vs Celery threads -c 50 POSTs     (bench.drain_bench)
5. latency at 200/s, sandbox and 20 ms HTTP, vs Celery ``.delay(t0)``  (bench.latency_bench)
6. priority: 100 level-1000 behind 20,000 level-1                      (bench.priority_bench)
7. 100,000 delayed: schedule rate, worker RSS, lateness                (bench.delay_bench)
8. webman ``push_many`` and consume+ack                                (bench.webman_bench)
9. cost per notification: CPU µs and Redis round trips                 (bench.cost_bench)
10. CLI start-up: noti list / get / add vs python -c "import redis"    (bench.cli_bench)
11. notify() acknowledged by a replica (WAIT) vs by the primary alone  (bench.replica_bench)
12. soak: 1,000,000 SMS, the workers' RSS growth                        (bench.soak_bench)
13. events under sparse traffic: dispatch to activation p50/p99/max     (bench.events_bench)
14. number pool: 30 SMS over 3 senders at 20 ms each, < 0.5 s           (bench.numpool_bench)
15. scaling: the drain with 1, 2, 4, 8 processes; producers 1 and 2     (bench.limits_bench)
16. HTTP API: POST /v1/notifications batched and single, p99 at 200/s  (bench.http_bench)
17. HTTP under a hostile probe: server RSS growth, another client's p99 (bench.hostile_bench)
18. the channel registry's cost: scenario 3's drain vs the workers before it (bench.registry_bench)
19. recipients: notify(recipient, template) vs notify_sms; profile import   (bench.recipients_bench)
20. digests: events into open windows, one at a time and bulk; closing 10,000 (bench.digests_bench)
21. the timeline's cost: scenario 3's drain and notify() vs the revision before it (bench.timeline_bench)

Prints one table (noti median, min..max, baseline median, ratio, fraction of the floor, target,
met) and writes ``bench/results/all.json`` (``all-smoke.json`` with ``--smoke``). Exit status 1
if a row failed to measure (a missed target is reported in the table, not an error).
"""

from __future__ import annotations

import sys

from bench import (
    cli_bench,
    cost_bench,
    delay_bench,
    digests_bench,
    drain_bench,
    enqueue_bench,
    events_bench,
    hostile_bench,
    http_bench,
    latency_bench,
    limits_bench,
    numpool_bench,
    priority_bench,
    recipients_bench,
    registry_bench,
    replica_bench,
    soak_bench,
    timeline_bench,
    webman_bench,
)
from bench._runner import Scenario, main

SCENARIOS: dict[int, Scenario] = {
    **enqueue_bench.SCENARIOS,
    **drain_bench.SCENARIOS,
    **latency_bench.SCENARIOS,
    **priority_bench.SCENARIOS,
    **delay_bench.SCENARIOS,
    **webman_bench.SCENARIOS,
    **cost_bench.SCENARIOS,
    **cli_bench.SCENARIOS,
    **replica_bench.SCENARIOS,
    **soak_bench.SCENARIOS,
    **limits_bench.SCENARIOS,
    **events_bench.SCENARIOS,
    **numpool_bench.SCENARIOS,
    **http_bench.SCENARIOS,
    **hostile_bench.SCENARIOS,
    **registry_bench.SCENARIOS,
    **recipients_bench.SCENARIOS,
    **digests_bench.SCENARIOS,
    **timeline_bench.SCENARIOS,
}

if __name__ == "__main__":
    sys.exit(main(__doc__ or "", SCENARIOS, "all"))
