"""Where the time goes (issue 24, point 4): per notification, on the hot paths.

1. ``notify()`` one at a time (scenario 1's path), in this process on a private Redis:
   the whole call, the part spent in the round trip (written, run by Redis, answered), of
   which Redis' own time running the script (``INFO commandstats``), and the client's
   Python; beside huey's one-at-a-time enqueue measured the same way, and the floor of a
   bare ``PING`` on the same kept connection.
2. The drain (scenario 3's path): **one** batch-mode worker process (``-P solo``, task
   events on, a receiver on each task signal) drains sandbox SMS while ``py-spy`` samples it
   (200 Hz). Each sample is charged to the outermost part of the worker it is in: task
   events (noti's ``TaskEvents`` writing and publishing them, and Celery's ``EventDispatcher``),
   task signals (the receivers and the pushed request context), the worker's request
   registry (``celery.worker.state``), message intake (kombu and Celery's consumer,
   noti's bulk fetch and envelope decoding), noti's claim, send and finish (their Redis
   calls included), and the rest (the event loop, acks). Worker and Redis CPU per
   notification and Redis round trips per notification are measured beside it (round
   trips in a separate run of the counting worker, as scenario 9 counts them).

    .venv/bin/python -m bench.profile_bench [--n 100000] [--seconds 6] [--calls 20000] [--smoke]

py-spy (the ``bench`` extra) reads the worker's stacks from outside; run as root, or where
``ptrace`` of one's own processes is allowed.
"""

from __future__ import annotations

import argparse
import collections
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import redis

from bench._counting_worker import total
from bench._harness import group_cpu_s, redis_cpu_s, redis_server, wait_for
from bench._noti import (
    FAST,
    PHONE,
    SMS_QUEUE,
    done_count,
    noti_env,
    point_driver,
    start_workers,
    write_config,
)

__all__ = ["DRAIN_PARTS", "drain_profile", "notify_profile", "part_of"]

#: The parts of a batch worker a sample is charged to, each with the stack frames that mark
#: it (matched on "function (file)"), outermost first: a sample goes to the first part one
#: of whose frames is on its stack, searched from the root.
DRAIN_PARTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "task events (noti.celery.taskevents, Celery's EventDispatcher)",
        ("TaskEvents.", "EventDispatcher.", "celery/events/"),
    ),
    (
        "task signals (receivers, pushed request context)",
        ("_PushedRequest", "Signal.send", "DeliveryReport._postrun", "DeliveryReport._context"),
    ),
    ("worker request registry (celery.worker.state)", ("celery/worker/state.py",)),
    (
        "noti: claim, send, finish (with their Redis calls)",
        (
            "Sender.",
            "RecordStore.",
            "RecordReader.",
            "CreateCalls.",
            "DeliveryBatcher._conclude",
            "DeliveryBatcher._settled",
            "SendWaves._conclude",
            "providers/",
        ),
    ),
    (
        "message intake (kombu, Celery's consumer, bulk fetch, decoding)",
        (
            "_brpop_read",
            "kombu/transport/",
            "kombu/messaging.py",
            "kombu/message.py",
            "on_task_received",
            "DeliveryBatcher.__call__",
        ),
    ),
)
OTHER = "the rest (event loop, batching, acks)"


def part_of(frames: list[str]) -> str:
    """The part of :data:`DRAIN_PARTS` a sample with ``frames`` (root first) is charged to."""
    for name, marks in DRAIN_PARTS:
        for frame in frames:
            if any(mark in frame for mark in marks):
                return name
    return OTHER


def _commandstats(client: redis.Redis) -> dict[str, dict[str, float]]:
    return {k.removeprefix("cmdstat_"): v for k, v in client.info("commandstats").items()}


def notify_profile(url: str, calls: int) -> dict[str, float]:
    """µs per ``notify()``: whole call, round trip, Redis' script time, client Python; and
    huey's enqueue and a bare PING measured alike."""
    import noti
    from noti.api import notifier
    from noti.redis.pipelines import HeldConnection, pack_command

    runtime = point_driver(noti_env(url, write_config()))
    client = redis.Redis.from_url(url)
    client.flushall()
    noti.notify_sms(PHONE, "warm-up")
    held = notifier().runtime.store._held
    in_call: list[float] = []
    call = held.call

    def timed(packed: bytes) -> Any:
        started = time.perf_counter()
        try:
            return call(packed)
        finally:
            in_call.append(time.perf_counter() - started)

    held.call = timed  # type: ignore[method-assign]
    client.config_resetstat()
    started = time.perf_counter()
    for i in range(calls):
        noti.notify_sms(PHONE, f"message {i}")
    whole = (time.perf_counter() - started) / calls * 1e6
    del held.call
    script = _commandstats(client)["evalsha"]["usec_per_call"]
    trip = sum(in_call) / len(in_call) * 1e6
    ping_conn = HeldConnection(runtime.redis)
    ping = pack_command(("PING",))
    ping_conn.call(ping)
    started = time.perf_counter()
    for _ in range(calls):
        ping_conn.call(ping)
    ping_us = (time.perf_counter() - started) / calls * 1e6
    ping_conn.close()
    out = {
        "notify": whole,
        "round_trip": trip,
        "redis_script": script,
        "python": whole - trip,
        "ping": ping_us,
    }
    try:
        from bench.peers import huey as huey_peer

        client.flushall()
        client.config_resetstat()
        rate = huey_peer.enqueue(url, calls)
        lpush = _commandstats(client)["lpush"]["usec_per_call"]
        out |= {"huey": 1e6 / rate, "huey_redis": lpush}
    except ImportError:
        pass
    return out


def events_profile(url: str, notifications: int = 21_000, per_publish: int = 700) -> dict[str, float]:
    """µs of CPU per notification for a batch worker's three task events (received, started,
    succeeded) and their publishing, one publish per ``per_publish`` notifications (a busy
    worker's 0.1 s): through Celery's ``EventDispatcher`` (``send`` into its buffer, ``flush``)
    and through noti's :class:`~noti.celery.taskevents.TaskEvents` (the reason it exists)."""
    from celery import Celery

    from noti.celery import taskevents

    task_id, name, args = "01m8frm1krdtjc6kkt7ye2r2t8", "noti.deliver", "['01m8frm1krdtjc6kkt7ye2r2t8']"
    result = (
        '{"id": "01m8frm1krdtjc6kkt7ye2r2t8", "provider": "sandbox", "msgid": "s-1", "delivery": "delivered"}'
    )
    app = Celery("events-profile", broker=url, set_as_current=False)

    class Task:
        send_events = True

    out: dict[str, float] = {}
    with app.connection_for_write() as conn:
        dispatcher = app.events.Dispatcher(conn, hostname="w1@bench", buffer_group=["task"], enabled=True)
        dispatcher.buffer_limit = 10**9
        started = time.process_time()
        for i in range(notifications):
            dispatcher.send("task-received", uuid=task_id, name=name, args=args, kwargs="{}", root_id=task_id,
                            parent_id=None, retries=0, eta=None, expires=None)  # fmt: skip
            dispatcher.send("task-started", uuid=task_id)
            dispatcher.send("task-succeeded", uuid=task_id, result=result, runtime=0.0123)
            if i % per_publish == per_publish - 1:
                dispatcher.flush()
        out["celery"] = (time.process_time() - started) / notifications * 1e6
        events = taskevents.TaskEvents(dispatcher, Task())
        started = time.process_time()
        for i in range(notifications):
            if events.on:
                now = time.time()
                events.started(now, task_id, name, args, "{}", task_id, None, 0)
            if events.on:
                events.succeeded(time.time(), task_id, result, 0.0123)
            if i % per_publish == per_publish - 1:
                events.publish()
        out["noti"] = (time.process_time() - started) / notifications * 1e6
        dispatcher.close()
    return out


def _py_spy() -> str:
    found = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(found).exists():
        sys.exit("py-spy is not installed: make bench installs it (the bench extra)")
    return found


def drain_profile(url: str, n: int, seconds: float) -> dict[str, Any]:
    """One worker process drains ``n`` sandbox SMS; sampled for ``seconds`` mid-drain.
    Returns the parts' shares, CPU per notification and round trips per notification."""
    import noti

    env = noti_env(url, write_config())
    runtime = point_driver(env)
    config = replace(FAST, processes=1)
    result: dict[str, Any] = {"config": config.settings}

    def fill() -> None:
        runtime.redis.flushall()
        stored = noti.notify_many([{"type": "sms", "to": PHONE, "text": f"drain {i}"} for i in range(n)])
        if stored.stored != n:
            raise SystemExit(f"notify_many stored {stored.stored} of {n}")

    fill()
    [worker] = start_workers(config, env, SMS_QUEUE)
    raw = Path(tempfile.mkdtemp(prefix="noti-profile-")) / "worker.raw"
    try:
        wait_for(lambda: done_count(runtime) >= min(2_000, n // 10), 60, 0.05)
        done0, cpu0, rcpu0, t0 = (
            done_count(runtime),
            group_cpu_s(worker.pgid),
            redis_cpu_s(runtime.redis),
            time.monotonic(),
        )
        spy = [_py_spy(), "record", "-p", str(worker.proc.pid), "-d", str(int(seconds)), "-r", "200"]
        subprocess.run([*spy, "-f", "raw", "-o", str(raw), "--nonblocking"], capture_output=True, check=True)
        done1, cpu1, rcpu1, t1 = (
            done_count(runtime),
            group_cpu_s(worker.pgid),
            redis_cpu_s(runtime.redis),
            time.monotonic(),
        )
    finally:
        worker.stop()
    sent = done1 - done0
    if sent <= 0 or done1 >= n:
        raise SystemExit(f"the profile window saw {sent} notifications (of {n}): give --n more")
    result |= {
        "rate": sent / (t1 - t0),
        "worker_cpu_us": (cpu1 - cpu0) / sent * 1e6,
        "redis_cpu_us": (rcpu1 - rcpu0) / sent * 1e6,
    }
    parts: collections.Counter[str] = collections.Counter()
    waiting = 0
    samples = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        frames = [_frame(f) for f in stack.split(";")]
        parts[part_of(frames)] += int(count)
        samples += int(count)
        if any(mark in frames[-1] for mark in ("recv_into", "sendall", "read_from_socket", "poll (")):
            waiting += int(count)
    result["samples"] = samples
    result["parts"] = {name: parts[name] / samples for name, _ in (*DRAIN_PARTS, (OTHER, ()))}
    result["socket"] = waiting / samples
    # round trips: a second fill, drained by the counting worker
    fill()
    counts = tempfile.mkdtemp(prefix="noti-trips-")
    [counting] = start_workers(config, env, SMS_QUEUE, counting=counts)
    try:
        wait_for(lambda: done_count(runtime) >= n, 300, 0.05)
        time.sleep(0.2)
        result["round_trips"] = total(counts) / n
    finally:
        counting.stop()
    return result


def _frame(text: str) -> str:
    """``function (path:line)`` as ``function (path)``, the path from site-packages or the repo."""
    match = re.match(r"(.*) \((.*?):\d+\)$", text)
    if not match:
        return text
    path = match.group(2).split("site-packages/")[-1]
    return f"{match.group(1)} ({path})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--calls", type=int, default=20_000, help="notify() calls timed")
    # enough that the worker is still draining when the sampling ends (it has drained ~6,000/s
    # here since the task events and the scripts got cheaper; 8,000 for the smoke ran out)
    parser.add_argument("--n", type=int, default=100_000, help="SMS the profiled worker drains")
    parser.add_argument("--seconds", type=float, default=6.0, help="how long py-spy samples")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: check it runs")
    args = parser.parse_args(argv)
    if args.smoke:
        args.calls, args.n, args.seconds = 500, 30_000, 1.0
    with redis_server() as url:
        enqueue = notify_profile(url, args.calls)
    print(f"notify() one at a time, {args.calls:,} calls, µs per call")
    rows = [
        ("whole call", enqueue["notify"]),
        ("  client Python (validate, build the record and its Celery message, pack)", enqueue["python"]),
        ("  the round trip (write, Redis runs create.lua, answer)", enqueue["round_trip"]),
        ("    of which Redis running the script (INFO commandstats)", enqueue["redis_script"]),
        ("a bare PING round trip on the same kind of kept connection", enqueue["ping"]),
    ]
    if "huey" in enqueue:
        rows += [
            ("huey's enqueue, whole call", enqueue["huey"]),
            ("  of which Redis running LPUSH", enqueue["huey_redis"]),
        ]
    for label, value in rows:
        print(f"  {label:<78} {value:7.1f}")
    with redis_server() as url:
        cost = events_profile(url)
    print("\ntask events of one notification (received, started, succeeded) and their publishing, µs of CPU")
    print(f"  {'Celery EventDispatcher: send x3, flush':<78} {cost['celery']:7.1f}")
    print(
        f"  {'noti.celery.taskevents.TaskEvents: written as JSON at once, published':<78} {cost['noti']:7.1f}"
    )
    with redis_server() as url:
        drain = drain_profile(url, args.n, args.seconds)
    print(f"\ndrain, one worker process ({drain['config']})")
    print(
        f"  rate {drain['rate']:,.0f}/s; per notification: worker CPU {drain['worker_cpu_us']:.0f} µs, "
        f"Redis CPU {drain['redis_cpu_us']:.0f} µs, {drain['round_trips']:.2f} Redis round trips"
    )
    print(f"  where the worker's time goes ({drain['samples']:,} py-spy samples at 200 Hz):")
    for name, share in drain["parts"].items():
        print(f"    {name:<66} {share * 100:5.1f} %  ~{share * drain['worker_cpu_us']:4.0f} µs")
    print(f"    (in all parts: waiting in socket calls to Redis {drain['socket'] * 100:.1f} %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
