"""The HTTP API (scenario 16): notifications through ``noti serve`` (uvicorn, 2 worker
processes on the 2 cores), next to ``notify()`` and plain Celery ``.delay()`` in this process.

Rows:

- ``POST /v1/notifications`` in batches of 100 from 4 concurrent clients, 20,000 SMS (smoke:
  2,000): stored and queued a second; target >= 5,000/s. Baseline: plain ``.delay()`` of a
  no-op task one at a time, in the same repetition on the same Redis.
- one notification per ``POST`` from 4 concurrent clients, 4,000 (smoke: 400): a second.
  Baseline: ``notify()`` one at a time in this process.
- one notification per ``POST`` paced at 200/s for 10 s (smoke: 1 s): the p99 of the time
  from when each request was due to its answer (201: stored and queued), so a slow answer
  also counts against the requests it held up; target <= 10 ms. p50 and max in the notes.

The clients are ``http.client`` connections kept alive, one per thread, with the bodies made
before the clock starts, so the driver spends as little of the 2 cores as it can; the server
(and Redis) share the machine with it, as an application's web server would. No worker runs:
as in scenarios 1 and 2, what is measured is adding (the records stored, their delivery
messages queued), not delivering.

    .venv/bin/python -m bench.http_bench [--reps 3] [--smoke]
"""

from __future__ import annotations

import http.client
import json
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from bench import enqueue_bench
from bench._harness import redis_server
from bench._noti import FAST, PHONE, WorkerConfig, noti_env, write_config
from bench._report import Row, attempt, errors_of, paired_ratio, present
from bench._runner import main
from tests.servers import ApiProcess

__all__ = ["SCENARIOS", "scenario_16"]

#: (normal, smoke) sizes: batched notifications, single-request notifications, paced seconds.
SIZES = {"batched": (20_000, 2_000), "single": (4_000, 400), "paced_s": (10.0, 1.0)}
BATCH = 100
CLIENTS = 4
PACE_PER_S = 200
SERVER_WORKERS = 2


def _bodies(n: int, size: int, tag: str) -> list[bytes]:
    """``n`` notifications as request bodies of ``size`` items (an object when 1)."""
    items = [{"type": "sms", "to": PHONE, "text": f"{tag} {i}"} for i in range(n)]
    if size == 1:
        return [json.dumps(item).encode() for item in items]
    return [json.dumps(items[i : i + size]).encode() for i in range(0, n, size)]


class _Client:
    """One kept-alive connection posting notifications with one token."""

    def __init__(self, port: int, token: str) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def post(self, body: bytes) -> None:
        self.connection.request("POST", "/v1/notifications", body=body, headers=self.headers)
        response = self.connection.getresponse()
        answer = response.read()
        if response.status != 201:
            raise AssertionError(f"POST /v1/notifications answered {response.status}: {answer[:300]!r}")

    def close(self) -> None:
        self.connection.close()


def _concurrent(port: int, token: str, bodies: list[bytes], count: int) -> float:
    """``bodies`` posted by :data:`CLIENTS` threads; notifications (``count``) a second."""
    clients = [_Client(port, token) for _ in range(CLIENTS)]
    for client in clients:  # connections open and warm before the clock starts
        client.post(_bodies(1, 1, "warm-up")[0])
    shares = [bodies[i::CLIENTS] for i in range(CLIENTS)]
    failures: list[BaseException] = []
    start = threading.Barrier(CLIENTS + 1)

    def work(client: _Client, share: list[bytes]) -> None:
        start.wait()
        try:
            for body in share:
                client.post(body)
        except BaseException as exc:  # noqa: BLE001 - re-raised by the driver below
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(c, s)) for c, s in zip(clients, shares, strict=True)]
    for thread in threads:
        thread.start()
    start.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    for client in clients:
        client.close()
    if failures:
        raise failures[0]
    return count / elapsed


def _paced(port: int, token: str, seconds: float) -> list[float]:
    """One notification per request at :data:`PACE_PER_S`; each one's latency in ms, from
    when it was due (not when it could be sent) to its answer."""
    n = int(seconds * PACE_PER_S)
    bodies = _bodies(n, 1, "paced")
    client = _Client(port, token)
    client.post(_bodies(1, 1, "warm-up")[0])
    latencies: list[float] = []
    origin = time.perf_counter() + 0.05
    for i, body in enumerate(bodies):
        due = origin + i / PACE_PER_S
        pause = due - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
        client.post(body)
        latencies.append((time.perf_counter() - due) * 1000)
    client.close()
    return latencies


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def scenario_16(
    reps: int, smoke: bool, config: WorkerConfig = FAST, ctx: dict[str, Any] | None = None
) -> list[Row]:
    batched, single, paced_s = SIZES["batched"][smoke], SIZES["single"][smoke], SIZES["paced_s"][smoke]
    samples: dict[str, list[float | None]] = {k: [] for k in ("batched", "delay", "single", "notify", "p99")}
    errors: dict[str, list[str]] = {k: [] for k in samples}
    p50s: list[float] = []
    maxes: list[float] = []
    with redis_server() as url:
        env = noti_env(url, write_config())
        flush = enqueue_bench.setup(url)  # this process: noti on db 0, plain Celery on db 1
        from noti.sending.runtime import get_runtime

        server = ApiProcess({**os.environ, **env}, "-workers", str(SERVER_WORKERS), "--no-access-log")
        try:
            server.wait_ready(60)

            def fresh_token() -> str:
                flush.flushall()
                plain, _ = get_runtime().tokens.add("bench", acting="bench")
                return str(plain)

            def over_http(bodies: list[bytes], count: int) -> Callable[[], float]:
                return lambda: _concurrent(server.port, fresh_token(), bodies, count)

            def latency() -> float:
                measured = _paced(server.port, fresh_token(), paced_s)
                p50s.append(statistics.median(measured))
                maxes.append(max(measured))
                return _percentile(measured, 0.99)

            def in_process(run: Callable[[int], float], n: int) -> Callable[[], float]:
                def measure() -> float:
                    flush.flushall()
                    return run(n)

                return measure

            for rep in range(reps):
                runs: dict[str, Callable[[], float]] = {
                    "batched": over_http(_bodies(batched, BATCH, f"r{rep}"), batched),
                    "delay": in_process(enqueue_bench.celery_delay, single),
                    "single": over_http(_bodies(single, 1, f"r{rep}"), single),
                    "notify": in_process(enqueue_bench.noti_notify, single),
                    "p99": latency,
                }
                for name, run in runs.items():
                    samples[name].append(attempt(errors[name], f"{name} rep {rep + 1}", run))
        finally:
            server.stop()
    setup = {"server": f"noti serve -workers {SERVER_WORKERS}", "clients": CLIENTS}
    rows = [
        Row(
            16,
            f"POST /v1/notifications, batches of {BATCH} x {CLIENTS} clients ({batched:,})",
            "/s",
            present(samples["batched"]),
            ">= 5,000/s",
            baseline=present(samples["delay"]),
            baseline_name=f"plain Celery .delay() one at a time in-process ({single:,})",
            check=lambda r: r.median >= 5_000,
            ratio=paired_ratio(samples["batched"], samples["delay"]),
            config=setup,
            error=errors_of(errors, "batched", "delay"),
        ),
        Row(
            16,
            f"POST /v1/notifications, one per request x {CLIENTS} clients ({single:,})",
            "/s",
            present(samples["single"]),
            "-",
            baseline=present(samples["notify"]),
            baseline_name=f"notify() one at a time in-process ({single:,})",
            ratio=paired_ratio(samples["single"], samples["notify"]),
            config=setup,
            error=errors_of(errors, "single", "notify"),
        ),
        Row(
            16,
            f"POST /v1/notifications, one at {PACE_PER_S}/s for {paced_s:g} s: p99 due to 201",
            "ms",
            present(samples["p99"]),
            "<= 10 ms",
            check=lambda r: r.median <= 10,
            config=setup,
            notes=[
                f"p50 {statistics.median(p50s):.2f} ms, max {max(maxes):.1f} ms (medians / worst of the reps)"
            ]
            if p50s
            else [],
            error=errors_of(errors, "p99"),
        ),
    ]
    return rows


SCENARIOS = {16: scenario_16}

if __name__ == "__main__":
    sys.exit(main(__doc__ or "", SCENARIOS, "http"))
