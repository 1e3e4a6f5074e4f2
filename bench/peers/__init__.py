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
- ``incr()``: ``INCR bench:done`` (the drains of scenario 3, like plain Celery's;
  :mod:`bench._probes`);
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
  drain timed (:func:`bench._probes.counted_drain`), checked (``bench:done == n``, queue
  empty, acks done);
- ``drain_http(url, n, fake) -> Drain``: the same with ``post`` to ``fake.url``, checked
  by the fake server's counts;
- ``latency(url, seconds) -> dict``: ``lag`` sent at 200/s for ``seconds`` with the workers
  running, as :func:`bench._probes.lag_latency` measures plain Celery.

Each module also has ``SETUP``: how each of those runs is configured, for the table.

BullMQ (:mod:`bench.peers.bullmq`) is a Node.js library: its module drives a small Node
program instead of being the worker's app, installs it with ``npm ci`` on first use, and
raises :class:`~bench._report.Skipped` (a printed reason, not a failure) where Node.js is
absent. Its drains run in several configurations (``"bullmq 1x50"``: one Node process with
concurrency 50); a peer named with such a suffix is that configuration of the library, and
its ``SETUP`` entry is ``"<run> <configuration>"`` (:func:`configurations`); the drain
scenarios also show the best configuration of each repetition as the library's own row.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from importlib import metadata
from types import ModuleType
from typing import Any

from bench._report import Row, Skipped, errors_of, paired_ratio, present, skips_of

__all__ = ["DATABASES", "broker_url", "configurations", "load", "rows", "runner", "version"]

#: Each peer's database on the scenario's redis-server (noti uses 0, plain Celery 1).
DATABASES = {"rq": 2, "huey": 3, "dramatiq": 4, "taskiq": 5, "bullmq": 6}


def broker_url(url: str, peer: str) -> str:
    """``peer``'s Redis URL on the scenario's server ``url``."""
    return f"{url}/{DATABASES[peer]}"


def load(peer: str) -> ModuleType:
    """The module of ``peer`` (imported when a scenario needs it: ``python -m bench --only 7``
    runs without the peer libraries)."""
    if peer not in DATABASES:
        raise ValueError(f"no peer {peer!r}; the peers are {sorted(DATABASES)}")
    return importlib.import_module(f"{__name__}.{peer}")


def runner(peer: str, function: str, *args: Any) -> Callable[..., Any]:
    """``bench.peers.<peer>.<function>`` with ``args`` first, imported only when called: a
    missing library fails that peer's runs (reported in its rows), not the scenario."""
    return lambda *more: getattr(load(peer), function)(*args, *more)


#: Why a smoke run leaves a context peer's drain or latency run out.
CONTEXT_IN_FULL_RUNS = "a context peer: its drains and latency run in full runs, not in the smoke run"


def scenario_runner(
    peer: str, target: float | None, smoke: bool, function: str, *args: Any
) -> Callable[..., Any]:
    """:func:`runner`, but a smoke run skips a context peer (no ``target``), with its reason:
    the smoke run (CI) checks that the scenarios and the targets' peers run; the context
    peers' drains and latencies cost it a minute on two cores and are the full runs'."""
    if smoke and target is None:

        def skipped(*_: Any) -> Any:
            raise Skipped(CONTEXT_IN_FULL_RUNS)

        return skipped
    return runner(peer, function, *args)


def version(peer: str) -> str:
    """The installed version of ``peer``'s library, for the table's notes (a module that is
    no Python distribution, such as BullMQ's, says it in ``VERSION``)."""
    return getattr(load(peer), "VERSION", None) or metadata.version(peer)


def configurations(peer: str, smoke: bool = False) -> list[str]:
    """The names of ``peer``'s drain configurations measured side by side (``"bullmq 1x50"``:
    its module's ``CONFIGS``; ``smoke``: the first only, the smoke run checks that it runs),
    or none for a library run in one configuration."""
    names = [f"{peer} {name}" for name in getattr(load(peer), "CONFIGS", {})]
    return names[:1] if smoke else names


def rows(
    scenario: int,
    name: str,
    unit: str,
    ours: Sequence[float | None],
    theirs: Mapping[str, Sequence[float | None]],
    run: str,
    needs: Mapping[str, float | None],
    errors: Mapping[str, list[str]],
    *,
    lower_is_better: bool = False,
) -> list[Row]:
    """One row per peer: noti's samples ``ours`` against the peer's ``theirs[peer]`` (both
    indexed by repetition, None where a run failed), from the peer's ``run`` function.

    ``needs[peer]`` is the issue's target, to hold **in every repetition** (the ratio of
    that repetition's noti and peer figures; issue 24: "every repetition won, not 2 of 3"):
    for rates, 1.0 for "ahead of" (noti's rate above the peer's) and a factor such as 1.5
    for ">= 1.5x"; with ``lower_is_better`` (latencies), 1.0 for "<= the peer's". None: a
    peer shown for context. A row's error is noti's or that peer's failure
    (``errors["noti"]``, ``errors[peer]``), no other.
    """
    result = []
    for peer, samples in theirs.items():
        skipped = skips_of(dict(errors), peer)
        # a peer this machine cannot run (no Node.js for BullMQ): its row says why, no target
        need = None if skipped else needs[peer]
        # one ratio per repetition; a failed repetition leaves a gap, and the target is not met
        paired = [a / b for a, b in zip(ours, samples, strict=False) if a is not None and b]
        if len(paired) != max(len(ours), len(samples)):
            paired = []
        result.append(
            Row(
                scenario,
                f"{name} vs {peer}",
                unit,
                present(ours),
                _target(peer, needs[peer], lower_is_better),
                baseline=present(samples),
                baseline_name=f"{peer}: {skipped}" if skipped else _describe(peer, run),
                check=None if need is None else _every_repetition(paired, need, lower_is_better),
                ratio=paired_ratio(ours, samples),
                error=errors_of(dict(errors), "noti", peer),
            )
        )
    return result


def _target(peer: str, need: float | None, lower_is_better: bool) -> str:
    if need is None:
        return "(context)"
    if lower_is_better:
        return f"<= {peer}, every rep"
    if need == 1:
        return f"ahead of {peer}, every rep"
    return f">= {need:g}x {peer}, every rep"


def _every_repetition(paired: Sequence[float], need: float, lower_is_better: bool) -> Callable[[Row], bool]:
    """The check of a peer row: every repetition's ratio meets ``need`` ("ahead", need 1,
    is strictly faster; a latency row's ratio is at most ``need``)."""
    if lower_is_better:
        return lambda row: bool(paired) and all(r <= need for r in paired)
    if need == 1:
        return lambda row: bool(paired) and all(r > 1 for r in paired)
    return lambda row: bool(paired) and all(r >= need for r in paired)


def _describe(peer: str, run: str) -> str:
    """``peer``'s version and how its ``run`` is set up (its module's ``SETUP``; a peer named
    ``"library configuration"`` is that entry of the library's)."""
    library, _, variant = peer.partition(" ")
    try:
        return f"{library} {version(library)}: {load(library).SETUP[f'{run} {variant}'.strip()]}"
    except (ImportError, metadata.PackageNotFoundError) as exc:
        return f"{peer}: not available ({exc})"
