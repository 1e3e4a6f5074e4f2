"""Hostile input (issue 19 point 3): every case of ``tests/hostile/corpus.py`` is refused with
its documented code, shows no traceback, and leaves the Redis database unchanged.

"Unchanged" is measured with Redis's own ``DEBUG DIGEST`` (a hash of every key, value and
expiry flag of every database; the session's redis-server runs with
``enable-debug-command local``):

* **api, bulk, cli, proc, config**: the whole server's digest after the refusal equals the
  one before, byte for byte. Nothing else runs meanwhile (no worker), so nothing may change.
* **task** (refused by a real Celery worker): the worker leaves one expected trace, the
  task's failure (``noti:task:<id>:failed``, what ``AsyncResult.get()`` reads). The test
  reads it, checks its code, deletes it, and then compares ``DEBUG DIGEST-VALUE`` of every
  key with the snapshot from before the call: no record, index, identifier or idempotency
  key was created, and the intake message and its unacked entry are gone. Two kinds of key
  change by themselves while a worker runs and are left out: kombu's ``unacked_mutex`` (its
  restore loop), noti's lease locks (``noti:lock:*``, the delayed pump's), the event
  processor's short-lived start marker (``noti:events:starting``) and the workers' heartbeats
  (``noti:workers``, what ``noti status`` counts as alive).
* **webman** (refused by the ``NotificationConsumer`` reading the stream): the entry is
  dead-lettered with its reason, then acked and deleted. Expected traces: the new dead
  letter in ``noti:dead`` (checked: code, reason, class) and the stream's own bookkeeping
  (its last id; it must hold no entry and none pending). Every other key is unchanged.
* **event** (a listener's template rendered against a hostile payload by the processor
  that the ``noti.events.process`` task runs): the event itself is the trace (done, its
  outcome carrying the code), with the listener added for the case; every other key is
  unchanged — in particular no notification record was stored.
"""

from __future__ import annotations

import ctypes
import gc
import io
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click
import pytest
import redis
from click.testing import CliRunner

import noti
import noti.api
import noti.config
import noti.events
import noti.recipients
import noti.recipients.api
import noti.sending.runtime
from noti.errors import NotiError
from noti.numpool import NumberPool
from noti.recipients.importing import rows_of_csv, rows_of_jsonl
from tests.conftest import ALICE, BASE_ENV, BOB, MEMBER, ROOT, wait_until
from tests.hostile.corpus import (
    CASES,
    RCPT_SEED,
    Api,
    Big,
    Bulk,
    Case,
    Cli,
    Config,
    Deep,
    Proc,
    Processed,
    Ref,
    Task,
    Webman,
    by_surface,
)

pytestmark = pytest.mark.timeout(180)

#: Keys that change by themselves while a worker runs (see the module docstring).
VOLATILE_PREFIXES = ("unacked_mutex", "noti:lock:", "noti:events:starting", "noti:workers")
NOTIFY_CLASS = "app\\queue\\HostileNotify"


# --- building the inputs -------------------------------------------------------------------------


def _deep(spec: Deep) -> Any:
    if spec.text:
        opening, closing = ("[", "]") if spec.array else ('{"a":', "}")
        return opening * spec.depth + ("" if spec.array else "1") + closing * spec.depth
    value: Any = 1
    for _ in range(spec.depth):
        value = [value] if spec.array else {"a": value}
    return value


def build(value: Any, seed: dict[str, str]) -> Any:
    """``value`` with its markers (:class:`Ref`, :class:`Big`, :class:`Deep`) made real."""
    if isinstance(value, Ref):
        return seed[value.name]
    if isinstance(value, Big):
        return value.prefix + value.char * value.size + value.suffix
    if isinstance(value, Deep):
        return _deep(value)
    if isinstance(value, dict):
        return {build(k, seed): build(v, seed) for k, v in value.items()}
    if isinstance(value, list):
        return [build(v, seed) for v in value]
    if isinstance(value, tuple):
        return tuple(build(v, seed) for v in value)
    return value


# --- the database ------------------------------------------------------------------------------------


def digest(client: redis.Redis) -> str:
    """``DEBUG DIGEST`` of the whole server."""
    return str(client.execute_command("DEBUG", "DIGEST"))


def snapshot(client: redis.Redis, *, leave_out: Callable[[str], bool] = lambda key: False) -> dict[str, str]:
    """``DEBUG DIGEST-VALUE`` of every key of the client's database but those left out, by
    key (shown with ``backslashreplace`` where a key is not UTF-8)."""
    keys = sorted(set(client.scan_iter(count=1000)))
    names = [key.decode(errors="backslashreplace") for key in keys]
    kept = [
        (key, name)
        for key, name in zip(keys, names, strict=True)
        if not leave_out(name) and not name.startswith(VOLATILE_PREFIXES)
    ]
    if not kept:
        return {}
    values = client.execute_command("DEBUG", "DIGEST-VALUE", *(key for key, _ in kept))
    return {name: str(value) for (_, name), value in zip(kept, values, strict=True)}


def changes(before: dict[str, str], after: dict[str, str]) -> dict[str, str]:
    """Keys created, removed or changed between two snapshots."""
    out = {k: "created" for k in after.keys() - before.keys()}
    out.update({k: "removed" for k in before.keys() - after.keys()})
    out.update({k: "changed" for k in before.keys() & after.keys() if before[k] != after[k]})
    return out


# --- fixtures ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hostile_rt(redis_url: str) -> Iterator[Any]:
    """One runtime for the module (sandbox providers), on a flushed database."""
    raw = redis.Redis.from_url(redis_url)
    raw.flushdb()
    try:
        raw.execute_command("DEBUG", "DIGEST")
    except redis.ResponseError as exc:  # NOTI_TEST_REDIS_URL names a server without it
        pytest.skip(
            f"the test Redis refuses DEBUG DIGEST ({exc}); start it with --enable-debug-command local"
        )
    channels = {c: {"provider": "sandbox"} for c in ("sms", "weixin", "email", "webhook")}
    # the event cases' processor runs in this process, whose memory the whole suite has grown:
    # its resident-memory limit (256 MB by default) is not what they test
    runtime = noti.sending.runtime.configure(channels=channels, event_processor_max_memory_mb=1_000_000)
    yield runtime
    raw.flushdb()
    noti.sending.runtime.configure()
    _give_back_memory()


def _give_back_memory() -> None:
    """Hand the memory of the ten-megabyte cases back to the system: glibc keeps freed heap
    for the process, and later tests run event processors that stop above a resident-memory
    limit (``NOTI_EVENT_PROCESSOR_MAX_MEMORY_MB``) measured on this very process."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


@pytest.fixture(scope="module")
def seed(hostile_rt: Any) -> dict[str, str]:
    """Data the cases refer to: another user's records, event and listener, a webman dead
    letter, a pool number. Everything waits (an hour away) so no worker touches it."""
    from noti.core.deadletter import DeadLetter
    from noti.core.record import now_ms
    from noti.events import Events

    events = Events(hostile_rt, start_processor=lambda: None)
    NumberPool("sms-cn").add("+8610690000001")
    seeded = {
        "bob_record": noti.notify_sms("+8613912345678", "bob's", user="bob", delay=3600),
        "bob_cart": noti.notify_sms("+8613912345678", "cart", user="bob", delay=3600, identifier="bob-cart"),
        "webman_letter": hostile_rt.dead_letters.add(
            DeadLetter("1-1", "q", "stream", 0, "poison", "bad_json", now_ms(), source="webman:q")
        ),
        "bob_event": events.dispatch("bob.private", {"x": 1}, user="bob"),
        "bob_listener": events.add_listener(
            "bob.only", {"type": "sms", "target": "+8613912345678", "text": "x"}, name="bob-sms", user="bob"
        ).name,
        "pool_number": "+8610690000001",
        "bob_notice": _seed_recipients(),
    }
    # the dispatch's "processor starting" marker expires by itself in seconds: drop it, so
    # no case's digest sees it go
    hostile_rt.redis.delete(hostile_rt.keys.event_starting)
    return seeded


def _seed_recipients() -> str:
    """What the recipients cases stand on (``RCPT_SEED``): categories (declared by a root
    member), alice's recipients and templates, bob's; the id of a notice to bob's recipient
    (waiting an hour: no worker touches it)."""
    for name, declaration in RCPT_SEED["categories"].items():
        noti.recipients.put_category(name, declaration, user=MEMBER)
    for rid, profile in RCPT_SEED["recipients"].items():
        noti.recipients.put(rid, profile, user=ALICE)
    for name, document in RCPT_SEED["templates"].items():
        noti.recipients.put_template(name, document, user=ALICE)
    rid, profile = RCPT_SEED["bob"]["recipient"]
    name, document = RCPT_SEED["bob"]["template"]
    noti.recipients.put(rid, profile, user=BOB)
    noti.recipients.put_template(name, document, user=BOB)
    return noti.notify(recipient=rid, template=name, data={"order": 1}, user=BOB, delay=3600)


@pytest.fixture
def raw(redis_url: str) -> redis.Redis:
    return redis.Redis.from_url(redis_url)


@pytest.fixture(scope="module")
def intake_worker(hostile_rt: Any, redis_url: str) -> Iterator[Callable[[], None]]:
    """A real Celery worker (threads pool) in this process, started by the first task case
    and given time to settle: at start it declares its queues and takes up the seeded
    events waiting for a processor, which must not count against the first case."""
    from celery.contrib.testing.worker import start_worker

    from noti.celery.app import app

    contexts: list[Any] = []

    def _ensure() -> None:
        if not contexts:
            context = start_worker(
                app,
                pool="threads",
                concurrency=2,
                perform_ping_check=False,
                loglevel="WARNING",
                shutdown_timeout=20,
            )
            context.__enter__()
            contexts.append(context)
            client = redis.Redis.from_url(redis_url)
            previous: dict[str, str] = {}

            def settled() -> bool:
                nonlocal previous
                now = snapshot(client)
                quiet = now == previous and not client.exists(hostile_rt.keys.event_queue)
                previous = now
                return quiet

            wait_until(settled, timeout=60, interval=1.0)

    yield _ensure
    for context in contexts:
        context.__exit__(None, None, None)


@pytest.fixture(scope="module")
def webman_consumer(hostile_rt: Any) -> Any:
    """A NotificationConsumer of ``NOTIFY_CLASS`` on the test database, driven tick by tick."""
    from noti.bridge.webman.connection import connect
    from noti.bridge.webman.notifications import NotificationConsumer
    from noti.bridge.webman.worker import QueueWorker

    consumer = NotificationConsumer(
        client=connect(hostile_rt.settings.redis_url),
        dead_letters=hostile_rt.dead_letters,
        options={"php_class": NOTIFY_CLASS, "notify_user": "alice", "block_time_ms": 10},
    )
    worker = QueueWorker(consumer)
    worker.ensure_group()
    return worker


# --- the runners, one per surface -------------------------------------------------------------------------


def _pool(method: str) -> Callable[..., Any]:
    def call(name: Any, *args: Any, **kwargs: Any) -> Any:
        return getattr(NumberPool(name), method)(*args, **kwargs)

    return call


def _send(*args: Any, **kwargs: Any) -> Any:
    return noti.send(*args, **kwargs)


API: dict[str, Callable[..., Any]] = {
    "notify": noti.notify,
    "notify_sms": noti.notify_sms,
    "notify_email": noti.notify_email,
    "notify_webhook": noti.notify_webhook,
    "notify_many": noti.notify_many,
    "schedule_many": noti.schedule_many,
    "get": noti.get,
    "delete": noti.delete,
    "cancel": noti.cancel,
    "notifier.cancel": lambda *a, **kw: noti.api.notifier().cancel(*a, **kw),
    "revoke": noti.revoke,
    "send": _send,
    "list_notifications": noti.list_notifications,
    "clean": noti.clean,
    "delayed": lambda **kw: noti.api.notifier().delayed(**kw),
    "dead.entries": lambda *a, **kw: noti.api.redrive().entries(*a, **kw),
    "dead.get": lambda *a, **kw: noti.api.redrive().get(*a, **kw),
    "dead.retry": lambda *a, **kw: noti.api.redrive().retry(*a, **kw),
    "dead.purge": lambda *a, **kw: noti.api.redrive().purge(*a, **kw),
    "dead.unsuppress": lambda *a, **kw: noti.api.redrive().unsuppress(*a, **kw),
    "dispatch": noti.events.dispatch,
    "get_event": noti.events.get_event,
    "list_events": noti.events.list_events,
    "add_listener": noti.events.add_listener,
    "remove_listener": noti.events.remove_listener,
    "pool.add": _pool("add"),
    "pool.fire": _pool("fire"),
    "pool.register": _pool("register"),
    "pool.hangup": _pool("hangup"),
    "pool.call": _pool("call"),
    "rcpt.put": noti.recipients.put,
    "rcpt.get": noti.recipients.get,
    "rcpt.update": noti.recipients.update,
    "rcpt.merge": noti.recipients.merge,
    "rcpt.delete": noti.recipients.delete,
    "rcpt.list": noti.recipients.list_recipients,
    "rcpt.history": noti.recipients.history,
    "rcpt.preferences": noti.recipients.preferences,
    "rcpt.set_preferences": noti.recipients.set_preferences,
    "rcpt.put_template": noti.recipients.put_template,
    "rcpt.get_template": noti.recipients.get_template,
    "rcpt.delete_template": noti.recipients.delete_template,
    "rcpt.import_rows": noti.recipients.import_rows,
    "rcpt.import_csv": lambda text, **kw: noti.recipients.import_rows(
        rows_of_csv(io.StringIO(text, newline="")), **kw
    ),
    "rcpt.import_jsonl": lambda lines, **kw: noti.recipients.import_rows(rows_of_jsonl(lines), **kw),
    "rcpt.notify_many": lambda *a, **kw: noti.recipients.api.recipients().notify_many(*a, **kw),
    "category.put": noti.recipients.put_category,
    "category.delete": noti.recipients.delete_category,
    "get_notice": noti.get_notice,
}


def run_api(case: Case, seed: dict[str, str]) -> None:
    call: Api = case.input
    args, kwargs = build(call.args, seed), build(call.kwargs, seed)
    with pytest.raises(NotiError) as info:
        API[call.fn](*args, **kwargs)
    assert info.value.code == case.code, f"{info.value!r}"
    assert info.value.message and len(info.value.message) < 2000


def bulk_outcome(result: Any) -> tuple[int, list[int], tuple[str, ...]]:
    """``(stored, the refused items' indexes, their codes)`` of a bulk call's result: a
    ``BulkResult`` (refusals with ``index`` and ``code``), the recipients' ``NoticeBatch``
    (``(index, code, message)``) or ``ImportResult`` (``(row from 1, code, message)``)."""
    if hasattr(result, "created"):  # ImportResult
        return (
            result.created + result.updated,
            [n - 1 for n, _, _ in result.refused],
            tuple(c for _, c, _ in result.refused),
        )
    assert all(i is None for i in result.ids), result.ids
    refused = [(r.index, r.code) if hasattr(r, "code") else (r[0], r[1]) for r in result.refused]
    return result.stored, [i for i, _ in refused], tuple(c for _, c in refused)


def run_bulk(case: Case, seed: dict[str, str]) -> None:
    call: Bulk = case.input
    result = API[call.fn](*build(call.args, seed), **build(call.kwargs, seed))
    stored, indexes, codes = bulk_outcome(result)
    assert stored == 0
    assert codes == call.codes, result.refused
    assert indexes == list(range(len(call.codes)))


@click.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.pass_context
def _entry(ctx: click.Context) -> None:
    from noti.cli import main

    main(list(ctx.args))


def _files(files: dict[str, bytes], tmp_path: Path) -> dict[str, str]:
    """The case's files written; a name with a suffix keeps it (``order.json``: a template
    file's name is the template's), the others get ``.in``."""
    paths = {}
    for name, data in files.items():
        path = tmp_path / (name if "." in name else f"{name}.in")
        path.write_bytes(data)
        paths[name] = str(path)
    return paths


def _fill(value: Any, paths: dict[str, str]) -> Any:
    if isinstance(value, str) and value.startswith("{") and value.endswith("}") and value[1:-1] in paths:
        return paths[value[1:-1]]
    return value


def check_cli_output(case: Case, exit_code: int, expected_exit: int, stdout: str, stderr: str) -> None:
    shown = stdout + stderr
    assert "Traceback" not in shown and "e.noti.internal" not in shown, shown[-2000:]
    assert exit_code == expected_exit, shown[-2000:]
    lines = stderr.splitlines()
    if case.code is None:
        assert any(line.startswith("Error: ") for line in lines), stderr[-2000:]
        return
    assert any(
        line.startswith(f"{case.code}: ")
        or (line.startswith(("line ", "row ")) and f": {case.code}: " in line)
        for line in lines
    ), stderr[-2000:]


def run_cli(case: Case, seed: dict[str, str], tmp_path: Path) -> None:
    call: Cli = case.input
    paths = _files(call.files, tmp_path)
    argv = [_fill(a, paths) for a in build(call.argv, seed)]
    if argv[:1] != ["--as"]:
        argv = ["--as", call.user, *argv]
    result = CliRunner().invoke(_entry, argv, input=call.stdin if call.stdin is not None else b"")
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"the CLI raised {result.exception!r}") from result.exception
    check_cli_output(case, result.exit_code, call.exit, result.stdout, result.stderr)


def run_proc(case: Case, redis_url: str, tmp_path: Path) -> None:
    call: Proc = case.input
    paths = _files(call.files, tmp_path)
    env = {**os.environ, **BASE_ENV, "NOTI_REDIS_URL": redis_url}
    env.update({k: _fill(v, paths) for k, v in call.env.items()})
    argv = [a if isinstance(a, bytes) else _fill(a, paths).encode() for a in call.argv]
    done = subprocess.run(
        [sys.executable.encode(), b"-m", b"noti", *argv],
        input=call.stdin or b"",
        capture_output=True,
        env=env,
        cwd=ROOT,
        timeout=60,
    )
    stdout, stderr = (s.decode(errors="replace") for s in (done.stdout, done.stderr))
    check_cli_output(case, done.returncode, call.exit, stdout, stderr)


def run_config(case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    call: Config = case.input
    for name in [n for n in os.environ if n.startswith("NOTI_")]:  # the case's settings only
        monkeypatch.delenv(name)
    if call.toml is not None:
        path = tmp_path / "noti.toml"
        path.write_bytes(call.toml)
        monkeypatch.setenv("NOTI_CONFIG", str(path))
    for name, value in call.env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(NotiError) as info:
        noti.config.load_settings()
    assert info.value.code == case.code and call.says in info.value.message, info.value.message


def run_task(case: Case, seed: dict[str, str], raw: redis.Redis, ensure_worker: Callable[[], None]) -> None:
    from noti.celery.app import app
    from noti.tasks import notify

    call: Task = case.input
    args, kwargs, options = build(call.args, seed), build(call.kwargs, seed), build(call.options, seed)

    if call.how == "event_task":
        run_event_task(case, args, kwargs, raw, ensure_worker)
        return

    def send() -> Any:
        if call.how == "delay":
            return notify.delay(*args, **kwargs)
        if call.how == "apply_async":
            return notify.apply_async(args, kwargs, **options)
        return app.send_task("noti.notify", args=args, kwargs=kwargs, queue="noti.intake", **options)

    if call.at_call:
        before = digest(raw)
        with pytest.raises(NotiError) as info:
            send()
        assert info.value.code == case.code, f"{info.value!r}"
        assert digest(raw) == before
        return
    ensure_worker()
    before = snapshot(raw)
    result = send()
    with pytest.raises(NotiError) as info:
        result.get(timeout=60)
    assert info.value.code == case.code, f"{info.value!r}"
    assert result.state == "FAILURE"
    failure = raw.get(f"noti:task:{result.id}:failed")
    assert failure is not None and json.loads(failure)["result"]["exc_code"] == case.code
    raw.delete(f"noti:task:{result.id}:failed")  # the expected trace, read and removed
    # the worker acks the message just after the failure is written
    try:
        wait_until(lambda: not changes(before, snapshot(raw)), timeout=15)
    except AssertionError:
        raise AssertionError(f"the database changed: {changes(before, snapshot(raw))}") from None


def run_event_task(
    case: Case, args: Any, kwargs: Any, raw: redis.Redis, ensure_worker: Callable[[], None]
) -> None:
    """``noti.events.dispatch`` keeps no result: what a user sees is the worker's failure of
    the task (its log line, its task-failed event), caught here with Celery's own signal."""
    from celery.signals import task_failure

    from noti.celery.app import app

    ensure_worker()
    failures: dict[str, BaseException] = {}

    def failed(
        sender: Any = None, task_id: str = "", exception: BaseException | None = None, **_: Any
    ) -> None:
        if exception is not None:
            failures[task_id] = exception

    task_failure.connect(failed, weak=False)
    try:
        before = snapshot(raw)
        result = app.send_task("noti.events.dispatch", args=args, kwargs=kwargs, queue="noti.events")
        wait_until(lambda: result.id in failures, timeout=30)
    finally:
        task_failure.disconnect(failed)
    error = failures[result.id]
    assert isinstance(error, NotiError) and error.code == case.code, repr(error)
    try:
        wait_until(lambda: not changes(before, snapshot(raw)), timeout=15)
    except AssertionError:
        raise AssertionError(f"the database changed: {changes(before, snapshot(raw))}") from None


def _stream_message(case: Webman, worker: Any) -> dict[str, Any]:
    names = worker.consumer.names
    message = {
        "type": names.queue,
        "data": case.data,
        "timestamp": int(time.time()),
        "source": names.php_class,
        "failCount": 0,
        "nextRetry": 0,
        "delayUntil": 0,
    }
    message.update(case.message)
    return message


def run_webman(case: Case, seed: dict[str, str], raw: redis.Redis, worker: Any) -> None:
    call: Webman = case.input
    stream = worker.keys.stream
    if call.fields is not None:
        fields = build(call.fields, seed)
    else:
        fields = {"message": json.dumps(build(_stream_message(call, worker), seed))}
    letters = noti.sending.runtime.get_runtime().dead_letters
    seen = {letter.entry_id for letter in letters.entries()}
    before = snapshot(raw, leave_out=lambda key: key in (stream, "noti:dead"))
    raw.xadd(stream, fields)
    assert worker.read_once(block_ms=10) == 1
    new = [letter for letter in letters.entries() if letter.entry_id not in seen]
    assert len(new) == 1, new
    (letter,) = new
    for piece in call.expect:
        assert piece in letter.errmsg, letter.errmsg
    assert letter.error_class == call.error_class and letter.source.startswith("webman:")
    assert raw.xlen(stream) == 0
    assert raw.xpending(stream, worker.consumer.names.group)["pending"] == 0
    after = snapshot(raw, leave_out=lambda key: key in (stream, "noti:dead"))
    assert not changes(before, after)


def run_event(case: Case, seed: dict[str, str], raw: redis.Redis, hostile_rt: Any) -> None:
    from noti.events import Events, EventStatus

    call: Processed = case.input
    api = Events(hostile_rt, start_processor=lambda: None)
    name = f"hostile.{case.name}"

    def leave_out(key: str) -> bool:
        # the event, its listener, and the counters (one dispatched, one done with an error)
        return (
            key.startswith(("noti:event:", "noti:events:", "noti:listeners"))
            or key == hostile_rt.keys.metrics
        )

    def notification_counters() -> dict[str, str]:
        counts = raw.hgetall(hostile_rt.keys.metrics)
        return {k.decode(): v.decode() for k, v in counts.items() if not k.startswith(b"events_")}

    before = snapshot(raw, leave_out=leave_out)
    counted = notification_counters()
    listener = api.add_listener(name, build(call.action, seed), name=f"hostile-{case.name}")
    try:
        event_id = api.dispatch(name, build(call.payload, seed))
        api.processor().run()
        event = api.get(event_id)
    finally:
        api.remove_listener(listener.name)
        # the processor's short-lived markers would expire under later cases' digests
        raw.delete(hostile_rt.keys.event_starting, hostile_rt.keys.event_lock)
    assert event.status is EventStatus.DONE
    assert [o.error_code for o in event.outcomes] == [case.code], event.outcomes
    assert event.error_code == case.code
    assert not changes(before, snapshot(raw, leave_out=leave_out))
    assert notification_counters() == counted  # no notification was added


# --- the test --------------------------------------------------------------------------------------------


def test_the_corpus_covers_every_surface_with_at_least_300_cases() -> None:
    counts = by_surface()
    assert sum(counts.values()) >= 300, counts
    assert set(counts) == {"api", "bulk", "cli", "proc", "task", "webman", "event", "config"}


#: The worker the task cases start runs on to the end of the module: they go last (those
#: refused in the caller first, before it starts), so every whole-server digest sees
#: nothing but its own case.
ORDERED = (
    [c for c in CASES if c.surface != "task"]
    + [c for c in CASES if c.surface == "task" and c.input.at_call]  # before the worker starts
    + [c for c in CASES if c.surface == "task" and not c.input.at_call]
)


def documented_codes(text: str) -> set[str]:
    """The error codes a text names: ``e.x.y.z`` in backticks, and the shorthand that follows
    one (```.w``` replaces its last part, ```.v.w``` its last two, …)."""
    found: set[str] = set()
    last: list[str] = []
    for token in re.findall(r"`([A-Za-z0-9_.]+)`", text):
        if token.startswith("e."):
            last = token.split(".")
            found.add(token)
        elif token.startswith(".") and last:
            parts = token[1:].split(".")
            found.add(".".join(last[: len(last) - len(parts)] + parts))
    return found


def test_every_code_of_the_corpus_is_in_the_docs() -> None:
    from docsgen.reference import pages

    documented = documented_codes("\n".join(pages().values()))
    missing = sorted({c.code for c in CASES if c.code} - documented)
    assert not missing, f"codes the corpus expects that the docs do not list: {missing}"


@pytest.mark.parametrize(
    "case",
    # not in `make test-fast`: the proc cases run noti in a fresh process, the task cases wait
    # on a worker (about a second each, for its acks)
    [
        pytest.param(c, id=c.id, marks=[pytest.mark.slow] if c.surface in {"proc", "task"} else [])
        for c in ORDERED
    ],
)
def test_hostile_input_is_refused_and_changes_nothing(
    case: Case,
    seed: dict[str, str],
    raw: redis.Redis,
    redis_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    intake_worker: Callable[[], None],
    webman_consumer: Any,
    hostile_rt: Any,
) -> None:
    if case.surface == "task":
        run_task(case, seed, raw, intake_worker)
        return
    if case.surface == "webman":
        run_webman(case, seed, raw, webman_consumer)
        return
    if case.surface == "event":
        run_event(case, seed, raw, hostile_rt)
        return
    before = digest(raw)
    if case.surface == "api":
        run_api(case, seed)
    elif case.surface == "bulk":
        run_bulk(case, seed)
    elif case.surface == "cli":
        run_cli(case, seed, tmp_path)
    elif case.surface == "proc":
        run_proc(case, redis_url, tmp_path)
    elif case.surface == "config":
        run_config(case, tmp_path, monkeypatch)
    else:
        raise AssertionError(f"unknown surface {case.surface}")
    assert digest(raw) == before, "the database changed"
