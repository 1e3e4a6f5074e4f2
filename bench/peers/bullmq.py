"""BullMQ 6.7.0 (Node.js, on ioredis) as its documentation shows it: a ``Queue`` and a
``Worker`` with a concurrency, stock settings otherwise: jobs are kept after they complete
(``removeOnComplete`` unset, so each job keeps its record, as noti's do), the stalled-job
checker on, the events stream on.

The Node side is ``bench/peers/bullmq/``: ``package.json`` and ``package-lock.json`` pin
bullmq and ioredis exactly, ``driver.js`` does the work (its header lists its subcommands).
The first use installs them (``npm ci`` into ``bench/peers/bullmq/node_modules``); where
``node`` or ``npm`` is missing, or the install fails, every run raises
:class:`~bench._report.Skipped`: the rows say why, and the bench does not fail.

- enqueue (scenario 1): ``await queue.add()`` one at a time, one Node process;
- enqueue_many (scenario 2): ``queue.addBulk()`` of :data:`CHUNK` jobs per call;
- the drains (scenarios 3 and 4) are filled with ``addBulk`` (untimed), then the workers are
  started: :data:`CONFIGS` are the configurations tried (processes × concurrency). The
  sandbox analogue's job does one ``LPUSH`` of a small record to ``bench:outbox`` on one
  ioredis client per process (noti's sandbox provider LPUSHes its outbox entry), counted
  with ``LLEN``; the 20 ms one does one signed POST (Standard Webhooks headers, the job's id
  as webhook-id) on a keep-alive ``http.Agent`` (``maxSockets`` = the concurrency), counted
  by the fake server. Each drain is checked: every job completed (BullMQ's ``completed``
  set), none waiting or failed, every outbox entry / webhook id once.
- latency (scenario 5): :data:`LATENCY` worker, and the driver's ``add()`` of ``lag``
  jobs at 200/s, each carrying its send time, as :func:`bench._probes.lag_latency` does.

The configurations tried, on the 2-core bench machine (another process using about half a
core meanwhile), rate and worker / Redis CPU per job: 20,000 noop-LPUSH jobs: 1 × 50
2,500/s (230 / 165 µs), 1 × 200 2,990–3,130/s (185–195 / 140 µs), 1 × 500 3,420/s
(177 / 129 µs), 2 × 50 3,000/s (265 / 138 µs), 2 × 100 3,040/s, 2 × 200 3,820/s
(222 / 131 µs); 5,000 20 ms POSTs: 1 × 50 1,410/s (711 / 210 µs), 1 × 200 1,590/s,
2 × 50 1,360/s, 2 × 100 1,400/s, 2 × 200 1,730/s (863 / 165 µs). Node's own ``http`` client
costs ~350 µs a POST here (the global ``fetch`` 870–1,220 µs), so the I/O drain is CPU-bound
well below what 200 jobs in flight would allow. :data:`CONFIGS` keeps the issue's two (one
process, concurrency 50 and 200) and the best two-process one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import redis

from bench._drain import Drain, DrainFailed
from bench._harness import Worker, running, wait_for
from bench._noti import PHONE, SECRET
from bench._probes import LAG_KEY, RATE, SETTLE_S, WARMUP, settled, timed_drain
from bench._report import Skipped
from bench.fake_http import FakeHttp
from bench.peers import broker_url

__all__ = ["CONFIGS", "SETUP", "VERSION", "drain_http", "drain_noop", "enqueue", "enqueue_many", "latency"]

HERE = Path(__file__).with_suffix("")
DRIVER = HERE / "driver.js"
PINNED: dict[str, str] = json.loads((HERE / "package.json").read_text())["dependencies"]
VERSION = f"{PINNED['bullmq']} (ioredis {PINNED['ioredis']}, Node.js)"
#: Jobs per ``addBulk`` call (scenario 2, and the drains' fill).
CHUNK = 1000
#: The drain configurations tried in each repetition: name -> (Node processes, concurrency).
CONFIGS = {"1x50": (1, 50), "1x200": (1, 200), "2x200": (2, 200)}
LATENCY = "1x50"
OUTBOX = "bench:outbox"
KEYS = "bull:bench"  #: the queue's keys: BullMQ's default prefix, queue "bench"
RETENTION = "jobs kept after completion (removeOnComplete unset)"


def _config(name: str) -> str:
    processes, concurrency = CONFIGS[name]
    return f"{processes} Node process{'es' if processes > 1 else ''} x Worker concurrency {concurrency}"


_BEST = ", ".join(CONFIGS)
#: How each run is set up, for the table's notes.
SETUP = {
    "enqueue": "await queue.add() one at a time (one Node process)",
    "enqueue_many": f"queue.addBulk() of {CHUNK:,} jobs per call (one Node process)",
    "drain_noop": f"the best of {_BEST} in each repetition, one LPUSH per job, {RETENTION}",
    "drain_http": f"the best of {_BEST} in each repetition, one keep-alive POST per job, {RETENTION}",
    "latency": f"{_config(LATENCY)}, a job recording now - t0, {RETENTION}",
    **{f"drain_noop {name}": f"{_config(name)}, one LPUSH per job, {RETENTION}" for name in CONFIGS},
    **{
        f"drain_http {name}": f"{_config(name)}, one keep-alive http.Agent POST per job, {RETENTION}"
        for name in CONFIGS
    },
}

_skip: str | None = None
_installed = False


def _install() -> None:
    """Install the pinned packages (``npm ci``) unless they already are; :class:`Skipped`
    where Node.js is missing or the install fails (decided once per process)."""
    global _skip, _installed
    if _installed:
        return
    if _skip is None:
        _skip = _try_install()
    if _skip:
        raise Skipped(_skip)
    _installed = True


def _try_install() -> str:
    """'' once the packages are in place, else why they cannot be."""
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    if missing:
        return f"{' and '.join(missing)} not found: BullMQ needs Node.js and npm"
    modules = HERE / "node_modules"
    if all(_installed_version(modules / name) == wanted for name, wanted in PINNED.items()):
        return ""
    command = ["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"]
    print(f"installing BullMQ: {' '.join(command)} in {HERE}", flush=True)
    try:
        subprocess.run(command, cwd=HERE, capture_output=True, text=True, timeout=600, check=True)
    except subprocess.CalledProcessError as exc:
        return f"npm ci failed ({exc.returncode}): {(exc.stderr or exc.stdout).strip()[-300:]}"
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"npm ci failed: {exc}"
    return ""


def _installed_version(package: Path) -> str | None:
    try:
        return str(json.loads((package / "package.json").read_text())["version"])
    except (OSError, ValueError, KeyError):
        return None


def _env(url: str) -> dict[str, str]:
    return {
        "BENCH_BROKER_URL": broker_url(url, "bullmq"),
        "BENCH_WEBHOOK_SECRET": SECRET,
        "BENCH_PHONE": PHONE,
    }


def _run(url: str, *args: str, timeout: float = 300) -> dict[str, Any]:
    """``node driver.js ARGS`` on ``url``'s BullMQ database: its JSON answer."""
    _install()
    done = subprocess.run(
        ["node", str(DRIVER), *args],
        env={**os.environ, **_env(url)},
        cwd=HERE,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if done.returncode:
        raise RuntimeError(f"driver.js {args[0]} exited {done.returncode}: {done.stderr.strip()[-500:]}")
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def _flushed(url: str) -> redis.Redis:
    client = redis.Redis.from_url(broker_url(url, "bullmq"))
    client.flushdb()
    return client


def _workers(url: str, config: str, kind: str) -> list[Worker]:
    processes, concurrency = CONFIGS[config]
    argv = ["node", str(DRIVER), "worker", str(concurrency), kind]
    return [Worker(argv, _env(url)) for _ in range(processes)]


def enqueue(url: str, n: int) -> float:
    """``n`` ``await queue.add('noop', {phone, text})``, one at a time, per second."""
    _install()
    _flushed(url)
    result = _run(url, "add", str(n))
    if result["waiting"] != n + 1:
        raise AssertionError(f"BullMQ's queue holds {result['waiting']} jobs for {n + 1} added")
    return float(result["rate"])


def enqueue_many(url: str, n: int) -> float:
    """``n`` jobs in ``addBulk`` calls of :data:`CHUNK`, per second (the job list is built
    before the timing, as noti's items are)."""
    _install()
    _flushed(url)
    result = _run(url, "addBulk", str(n), str(CHUNK))
    if result["waiting"] != n:
        raise AssertionError(f"BullMQ's queue holds {result['waiting']} jobs for {n} added")
    return float(result["rate"])


def _fill(url: str, n: int, kind: str, *args: str) -> set[str]:
    ids = _run(url, "fill", str(n), kind, *args)["ids"]
    if len(set(ids)) != n:
        raise DrainFailed(f"BullMQ's addBulk queued {len(set(ids))} jobs for {n}")
    return {str(i) for i in ids}


def _completed(client: redis.Redis) -> int:
    return int(client.zcard(f"{KEYS}:completed"))


def _check(client: redis.Redis, n: int) -> None:
    """Raise unless all ``n`` jobs completed and none is left waiting, active or failed."""
    left = {state: int(client.llen(f"{KEYS}:{state}")) for state in ("wait", "active")}
    left["failed"] = int(client.zcard(f"{KEYS}:failed"))
    if _completed(client) != n or any(left.values()):
        raise DrainFailed(f"BullMQ completed {_completed(client)} of {n} jobs; left {left}")


def drain_noop(url: str, n: int, config: str = "1x50") -> Drain:
    """``n`` noop-LPUSH jobs on the workers of ``config``: fill, start, time, verify."""
    _install()
    client = _flushed(url)
    ids = _fill(url, n, "noop")
    workers = _workers(url, config, "noop")
    drain = timed_drain(
        lambda: int(client.llen(OUTBOX)),
        n,
        workers,
        client,
        before_stop=settled(lambda: _completed(client) >= n),
    )
    _check(client, n)
    seen = [json.loads(entry)["id"] for entry in client.lrange(OUTBOX, 0, -1)]
    if len(seen) != n or set(seen) != ids:
        raise DrainFailed(f"BullMQ's outbox holds {len(seen)} entries ({len(set(seen))} jobs) for {n}")
    return drain


def drain_http(url: str, n: int, fake: FakeHttp, config: str = "1x50") -> Drain:
    """``n`` POST jobs to ``fake`` on the workers of ``config``, checked by the fake
    server's counts (every job's id once, correctly signed)."""
    _install()
    client = _flushed(url)
    fake.reset()
    ids = _fill(url, n, "http", fake.url)
    workers = _workers(url, config, "http")
    drain = timed_drain(
        fake.count,
        n,
        workers,
        client,
        others=[fake.pid],
        before_stop=settled(lambda: _completed(client) >= n),
    )
    fake.expect(n, ids)
    _check(client, n)
    return drain


def latency(url: str, seconds: float) -> dict[str, Any]:
    """Latencies (ms) of ``lag`` jobs added at 200/s for ``seconds`` (after :data:`WARMUP`
    warm-up jobs) by the driver, on the :data:`LATENCY` workers."""
    _install()
    client = _flushed(url)
    count = int(RATE * seconds)
    with running(_workers(url, LATENCY, "lag")):
        sent = _run(url, "latency", str(seconds), str(RATE), str(WARMUP), timeout=seconds + 120)
        wait_for(lambda: client.llen(LAG_KEY) >= count, SETTLE_S, 0.02)
    values = [float(x) * 1000 for x in client.lrange(LAG_KEY, 0, -1)]
    if len(values) != count or sent["sent"] != count:
        raise AssertionError(f"BullMQ: {sent['sent']} sent, {len(values)} ran, {count} due")
    return {"ms": values, "behind_s": float(sent["behind_s"]), "coarse": False}
