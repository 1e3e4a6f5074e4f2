"""``noti serve`` under a hostile probe (scenario 17; issue 32 point 5): the probe of the
finding, against one server process with the default limits, while one honest client keeps
asking.

The probe, all at once: 100 connections without a token each sending a ~4 MB body to
``POST /v1/notifications`` (smoke: 10), 300 slowloris connections dribbling a header byte a
second (smoke: 30), 500 connections opened and left idle (smoke: 50) and one 1 MB header, for
8 s (smoke: 2 s). Rows:

- the server's RSS growth over its RSS before the probe, the peak of samples every 50 ms;
  target < 50 MiB (the bound docs/howto/operations.md states);
- the honest client's ``GET /v1/health`` round trips during the probe, one after another:
  p99; target <= 250 ms (served, not starved). p50 and the requests made in the notes.

The limits that hold it (:mod:`noti.http.protocol`, :mod:`noti.http.guard`): the token is
checked before a body is read (401, closed), headers are capped (431) and timed (408), idle
connections closed, requests and connections per process capped.

    .venv/bin/python -m bench.hostile_bench [--reps 3] [--smoke]
"""

from __future__ import annotations

import contextlib
import http.client
import os
import socket
import statistics
import sys
import threading
import time
from typing import Any

from bench._harness import redis_server
from bench._noti import FAST, WorkerConfig, noti_env, write_config
from bench._report import Row, attempt, errors_of, present
from bench._runner import main
from tests.servers import ApiProcess

__all__ = ["SCENARIOS", "scenario_17"]

#: (normal, smoke): bodies, slowloris connections, idle connections, seconds of probe.
SIZES = {"bodies": (100, 10), "slow": (300, 30), "idle": (500, 50), "seconds": (8.0, 2.0)}
BODY_BYTES = 4 * 1024 * 1024 - 4096
MIB = 1024 * 1024


def _rss(pid: int) -> int:
    """Resident bytes of process ``pid`` (Linux)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=30)


def _body_without_token(port: int, stop: threading.Event) -> None:
    head = f"POST /v1/notifications HTTP/1.1\r\nHost: b\r\nContent-Length: {BODY_BYTES}\r\n\r\n".encode()
    piece = b"x" * 65536
    with contextlib.suppress(OSError), _connect(port) as conn:
        conn.sendall(head)
        sent = 0
        while sent < BODY_BYTES and not stop.is_set():
            conn.sendall(piece)
            sent += len(piece)


def _slowloris(port: int, stop: threading.Event) -> None:
    with contextlib.suppress(OSError), _connect(port) as conn:
        conn.sendall(b"GET /v1/health HTTP/1.1\r\nHost: b\r\n")
        while not stop.wait(1.0):
            conn.sendall(b"X")


def _idle(port: int, stop: threading.Event) -> None:
    with contextlib.suppress(OSError), _connect(port):
        stop.wait()


def _big_header(port: int, stop: threading.Event) -> None:
    with contextlib.suppress(OSError), _connect(port) as conn:
        conn.sendall(b"GET /v1/health HTTP/1.1\r\nHost: b\r\nX-Big: " + b"a" * MIB + b"\r\n\r\n")
        conn.recv(65536)


def _probe(
    server: ApiProcess, sizes: dict[str, Any], p50s: list[float], counts: list[int]
) -> tuple[float, float]:
    """One probe: (RSS growth MiB, the honest client's p99 ms)."""
    pid = server.proc.pid
    before = _rss(pid)
    stop = threading.Event()
    threads = [
        *(
            threading.Thread(target=_body_without_token, args=(server.port, stop))
            for _ in range(sizes["bodies"])
        ),
        *(threading.Thread(target=_slowloris, args=(server.port, stop)) for _ in range(sizes["slow"])),
        *(threading.Thread(target=_idle, args=(server.port, stop)) for _ in range(sizes["idle"])),
        threading.Thread(target=_big_header, args=(server.port, stop)),
    ]
    peak = before

    def sample() -> None:
        nonlocal peak
        while not stop.wait(0.05):
            peak = max(peak, _rss(pid))

    sampler = threading.Thread(target=sample)
    sampler.start()
    for thread in threads:
        thread.daemon = True
        thread.start()
    took: list[float] = []
    client = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    deadline = time.monotonic() + sizes["seconds"]
    try:
        while time.monotonic() < deadline:
            started = time.perf_counter()
            try:
                client.request("GET", "/v1/health")
                response = client.getresponse()
                response.read()
                ok = response.status == 200
            except (OSError, http.client.HTTPException):
                ok = False
            if not ok:  # closed by the idle timeout, or refused: a new connection, counted
                client.close()
                client = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
            took.append((time.perf_counter() - started) * 1000)
    finally:
        client.close()
        stop.set()
        sampler.join()
        for thread in threads:
            thread.join(5)
    took.sort()
    p50s.append(statistics.median(took))
    counts.append(len(took))
    return (peak - before) / MIB, took[min(len(took) - 1, int(len(took) * 0.99))]


def scenario_17(
    reps: int, smoke: bool, config: WorkerConfig = FAST, ctx: dict[str, Any] | None = None
) -> list[Row]:
    sizes = {name: values[smoke] for name, values in SIZES.items()}
    samples: dict[str, list[float | None]] = {"rss": [], "p99": []}
    errors: dict[str, list[str]] = {"rss": [], "p99": []}
    p50s: list[float] = []
    counts: list[int] = []
    with redis_server() as url:
        env = noti_env(url, write_config())
        server = ApiProcess({**os.environ, **env}, "--no-access-log")
        try:
            server.wait_ready(60)
            for rep in range(reps):
                measured: list[tuple[float, float]] = []

                def run(into: list[tuple[float, float]] = measured) -> float:
                    into.append(_probe(server, sizes, p50s, counts))
                    return into[-1][0]

                samples["rss"].append(attempt(errors["rss"], f"probe rep {rep + 1}", run))
                samples["p99"].append(measured[-1][1] if measured else None)
                time.sleep(1.0)  # the closed connections' memory goes back before the next
        finally:
            server.stop()
    probe = (
        f"{sizes['bodies']} x 4 MB without a token, {sizes['slow']} slowloris, "
        f"{sizes['idle']} idle, 1 MB header"
    )
    setup = {"server": "noti serve, 1 process, default limits", "probe_s": sizes["seconds"]}
    return [
        Row(
            17,
            f"HTTP under a hostile probe ({probe}): server RSS growth",
            "MiB",
            present(samples["rss"]),
            "< 50 MiB",
            check=lambda r: r.median < 50,
            config=setup,
            error=errors_of(errors, "rss"),
        ),
        Row(
            17,
            "HTTP under a hostile probe: another client's GET /v1/health p99",
            "ms",
            present(samples["p99"]),
            "<= 250 ms",
            check=lambda r: r.median <= 250,
            config=setup,
            notes=[f"p50 {statistics.median(p50s):.2f} ms, {min(counts)} requests at least"] if p50s else [],
            error=errors_of(errors, "rss"),
        ),
    ]


SCENARIOS = {17: scenario_17}

if __name__ == "__main__":
    sys.exit(main(__doc__ or "", SCENARIOS, "hostile"))
