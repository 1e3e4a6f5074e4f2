"""The peer libraries the issue names, measured in the same run as noti and plain Celery.

The performance issue sets some targets against peers rather than against Celery ("ahead
of dramatiq and huey", ">= 2x RQ enqueue_many") and quotes their figures from before noti
existed; these modules measure them again beside noti, on the same private Redis, so the
table says where noti stands today. Each module is written as a team would use that
library: its own Redis broker, its own worker program with the configuration that suits
the work, stock settings otherwise.

Every module is also the app its worker program loads, configured from the environment:
``BENCH_BROKER_URL`` (a Redis URL with the module's own database, :data:`DATABASES`) and
``BENCH_WEBHOOK_SECRET`` (what the fake HTTP provider checks the signatures with). Its tasks:

- ``noop(phone, text)``: nothing (the enqueue scenarios 1 and 2);
- ``incr()``: ``INCR bench:done`` (the drain of scenario 3, like plain Celery's);
- ``post(url, body, …)``: one signed POST to the fake 20 ms provider (scenario 4;
  :mod:`bench._signed_post`), with a webhook id the driver knows (the task's own id where
  the library hands it to the task, else one passed as an argument), so the fake server's
  ids can be checked;
- ``lag(t0)``: ``RPUSH bench:lag time.time() - t0`` (latency, scenario 5).

And the driver functions the scenarios call (``url`` is the scenario's redis-server, no
database; each function flushes its own database first and stops what it started):

- ``enqueue(url, n) -> float``: ``n`` ``noop`` enqueued one at a time, per second;
- ``enqueue_many(url, n) -> float`` (RQ): ``n`` in one bulk call, per second;
- ``drain_noop(url, n) -> Drain``: ``n`` ``incr`` queued, then the workers started and the
  drain timed (:func:`bench._drain.time_drain`), checked (``bench:done == n``, queue empty);
- ``drain_http(url, n, fake) -> Drain``: the same with ``post`` to ``fake.url``, checked
  by the fake server's counts;
- ``latency(url, seconds) -> dict``: ``lag`` sent at 200/s for ``seconds`` with the workers
  running, as ``bench.latency_bench.celery_latency`` does.
"""

from __future__ import annotations

import importlib
from importlib import metadata
from types import ModuleType

__all__ = ["DATABASES", "DONE_KEY", "LAG_KEY", "broker_url", "load", "version"]

#: Each peer's database on the scenario's redis-server (noti uses 0, plain Celery 1).
DATABASES = {"rq": 2, "huey": 3, "dramatiq": 4, "taskiq": 5}
DONE_KEY, LAG_KEY = "bench:done", "bench:lag"


def broker_url(url: str, peer: str) -> str:
    """``peer``'s Redis URL on the scenario's server ``url``."""
    return f"{url}/{DATABASES[peer]}"


def load(peer: str) -> ModuleType:
    """The module of ``peer`` (imported when a scenario needs it: ``python -m bench --only 7``
    runs without the peer libraries)."""
    if peer not in DATABASES:
        raise ValueError(f"no peer {peer!r}; the peers are {sorted(DATABASES)}")
    return importlib.import_module(f"{__name__}.{peer}")


def version(peer: str) -> str:
    """The installed version of ``peer``'s library, for the table's notes."""
    return metadata.version(peer)
