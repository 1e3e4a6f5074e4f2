"""The workers' check of what noti relies on in kombu (noti/celery/compat.py): it passes on the
kombu installed here, and a kombu that changed any of it (simulated by patching kombu) is
refused with e.noti.config.dependency, naming kombu's version and what changed; a worker on
such a kombu does not start."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import kombu
import pytest
from kombu.transport import redis as kombu_redis
from kombu.transport import virtual

import noti
from noti.celery.compat import KNOWN_SOURCES, RELIANCE, check_kombu, source_fingerprint
from noti.core.record import Status
from noti.errors import IncompatibleDependency, InvalidConfig
from tests.conftest import BASE_ENV, ROOT, wait_until

pytestmark = pytest.mark.integration


def test_the_installed_kombu_passes_and_its_replaced_methods_are_known() -> None:
    check_kombu(bulk_transport=True)
    for name, known in KNOWN_SOURCES.items():
        owner, method = name.split(".")
        assert source_fingerprint(getattr(getattr(kombu_redis, owner), method)) in known, name
    assert len(RELIANCE) > 20 and all(r.what and r.why for r in RELIANCE)


def _documented() -> Any:
    def f(self: Any, x: int) -> int:
        """Doc."""
        # a comment
        return x + 1  # another

    return f


def _bare() -> Any:
    def f(self: Any, x: int) -> int:

        return x + 1

    return f


def _changed_body() -> Any:
    def f(self: Any, x: int) -> int:
        return x + 2

    return f


def test_the_fingerprint_ignores_comments_docstrings_and_blank_lines_only() -> None:
    assert source_fingerprint(_documented()) == source_fingerprint(_bare())
    assert source_fingerprint(_bare()) != source_fingerprint(_changed_body())


def _brpop_read_with_a_new_step(self: Any, **options: Any) -> Any:
    self.something_new = True  # what a future kombu could add, and noti's copy would miss
    return None


def _append_elsewhere(self: Any, message: Any, delivery_tag: str) -> None:
    with self.pipe_or_acquire() as pipe:
        pipe.hset("unacked2", delivery_tag, "{}").execute()


def _restore_by_tag_reading_a_dict(self: Any, tag: str, client: Any = None, leftmost: bool = False) -> None:
    def restore_transaction(pipe: Any) -> None:
        p = pipe.hget(self.unacked_key, tag)
        pipe.multi()
        self._remove_from_indices(tag, pipe)
        if p:
            stored = json.loads(p)
            self.channel._do_restore_message(stored["message"], stored["exchange"], stored["rk"], pipe)

    with self.channel.conn_or_acquire(client) as client:
        client.transaction(restore_transaction, self.unacked_key)


def _q_for_pri_with_a_new_format(self: Any, queue: str, pri: int) -> str:
    pri = self.priority(pri)
    return f"{queue}{self.sep}p{pri}" if pri else queue


def _brpop_start_lowest_first(self: Any, timeout: Any = None) -> None:
    queues = self._queue_cycle.consume(len(self.active_queues))
    keys = [self._q_for_pri(q, p) for p in reversed(self.priority_steps) for q in queues]
    self._in_poll = self.client.connection
    self.client.connection.send_command("BRPOP", *keys, timeout or 0)


def _augment_with_a_renamed_field(self: Any, message: Any, exchange: str, routing_key: str) -> None:
    message["body"], encoding = self.encode_body(message["body"], self.body_encoding)
    message["properties"].update(body_encoding=encoding, tag=self._next_delivery_tag())
    message["properties"]["delivery_info"].update(exchange=exchange, routing_key=routing_key)


def _restore_unacked_with_a_new_argument(self: Any, client: Any, *, fast: bool) -> None:
    pass


# (what to patch, the value, text the refusal names, a change of the bulk transport only)
CHANGES: dict[str, tuple[Any, str, Any, str, bool]] = {
    "a replaced method changed": (
        kombu_redis.Channel,
        "_brpop_read",
        _brpop_read_with_a_new_step,
        "Channel._brpop_read is not the one",
        True,
    ),
    "the unacked hash moved": (
        kombu_redis.QoS,
        "append",
        _append_elsewhere,
        "QoS.append is not the one",
        True,
    ),
    "a method noti calls is gone": (
        kombu_redis.QoS,
        "pipe_or_acquire",
        None,
        "QoS.pipe_or_acquire is gone",
        True,
    ),
    "an overridden signature changed": (
        kombu_redis.QoS,
        "restore_unacked",
        _restore_unacked_with_a_new_argument,
        "QoS.restore_unacked takes (self, client, fast)",
        True,
    ),
    "the unacked hash layout changed": (
        kombu_redis.QoS,
        "restore_by_tag",
        _restore_by_tag_reading_a_dict,
        "the unacked bookkeeping",
        True,
    ),
    "BRPOP reads the lowest step first": (
        kombu_redis.Channel,
        "_brpop_start",
        _brpop_start_lowest_first,
        "the order BRPOP reads the priority lists in",
        True,
    ),
    "an option is no longer read": (
        kombu_redis.Channel,
        "from_transport_options",
        tuple(o for o in kombu_redis.Channel.from_transport_options if o != "priority_steps"),
        "no longer reads the transport options ['priority_steps']",
        True,
    ),
    "the priority list's name changed": (
        kombu_redis.Channel,
        "_q_for_pri",
        _q_for_pri_with_a_new_format,
        "priority 1 went to the list 'noti.probe:p1', noti writes 'noti.probe:1'",
        False,
    ),
    "an envelope field was renamed": (
        virtual.Channel,
        "_inplace_augment_message",
        _augment_with_a_renamed_field,
        "the envelope and priority list of a published message: kombu writes",
        False,
    ),
    "the default separator changed": (
        kombu_redis.Channel,
        "sep",
        "\x1f",
        "the Redis channel's default sep is '\\x1f', not '\\x06\\x16'",
        False,
    ),
    "the binding key changed": (
        kombu_redis.Channel,
        "keyprefix_queue",
        "_kombu.bindings.%s",
        "default keyprefix_queue",
        False,
    ),
}


@contextmanager
def _changed(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, value: Any) -> Any:
    if value is None:
        monkeypatch.delattr(owner, name)
    else:
        monkeypatch.setattr(owner, name, value)
    yield


@pytest.mark.parametrize("change", list(CHANGES))
def test_a_changed_kombu_is_refused_naming_its_version_and_the_change(
    monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    owner, name, value, named, transport_only = CHANGES[change]
    with _changed(monkeypatch, owner, name, value):
        with pytest.raises(IncompatibleDependency) as refused:
            check_kombu(bulk_transport=True)
        if transport_only:  # kombu's stock transport does not need it
            check_kombu(bulk_transport=False)
        else:
            with pytest.raises(IncompatibleDependency):
                check_kombu(bulk_transport=False)
    error = refused.value
    assert isinstance(error, InvalidConfig) and error.code == "e.noti.config.dependency"
    assert f"kombu {kombu.__version__} changed what noti relies on" in error.message
    assert named in error.message
    # the way out it names is one that works: the stock transport only when it avoids the change
    assert ("NOTI_BROKER_BULK_FETCH=false" in error.message) == transport_only
    assert "pyproject.toml" in error.message


def test_a_method_whose_source_cannot_be_read_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    namespace: dict[str, Any] = {}
    exec("def ack(self, delivery_tag):\n    pass\n", namespace)  # no file behind it
    monkeypatch.setattr(kombu_redis.QoS, "ack", namespace["ack"])
    with pytest.raises(IncompatibleDependency, match="the source of QoS.ack cannot be read"):
        check_kombu(bulk_transport=True)


FUTURE_KOMBU = '''
"""A future kombu: what tests/test_kombu_compat.py patches into kombu before a worker starts."""
from kombu.transport import redis as kombu_redis

_read = kombu_redis.Channel._brpop_read


def _brpop_read(self, **options):
    self.reads = getattr(self, "reads", 0) + 1  # a step noti's copy would not make
    return _read(self, **options)


kombu_redis.Channel._brpop_read = _brpop_read
'''

FUTURE_SEPARATOR = '''
"""A future kombu with another default priority separator."""
from kombu.transport import redis as kombu_redis

kombu_redis.Channel.sep = "\\x1f"
'''


def _worker_on(tmp_path: Path, redis_url: str, patch: str, **env: str) -> subprocess.Popen[bytes]:
    """``celery -A noti worker`` with ``patch`` imported into kombu first."""
    (tmp_path / "future_kombu.py").write_text(textwrap.dedent(patch))
    code = (
        "import sys, future_kombu\n"
        "from celery.__main__ import main\n"
        "sys.argv = ['celery', '-A', 'noti', 'worker', '-l', 'INFO', '-P', 'threads', '-c', '2',\n"
        "            '--without-mingle', '--without-gossip', '-n', 'compat@%h']\n"
        "main()\n"
    )
    environment = {k: v for k, v in os.environ.items() if not k.startswith("NOTI_")}
    environment |= {**BASE_ENV, "NOTI_REDIS_URL": redis_url, "NOTI_CHANNELS__SMS__PROVIDER": "sandbox"}
    environment |= {"PYTHONPATH": f"{tmp_path}:{ROOT}", **env}
    with (tmp_path / "worker.log").open("wb") as log:
        return subprocess.Popen(
            [sys.executable, "-c", code], cwd=ROOT, env=environment, stdout=log, stderr=subprocess.STDOUT
        )


def _run_until_exit(proc: subprocess.Popen[bytes], tmp_path: Path) -> str:
    try:
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return (tmp_path / "worker.log").read_text(errors="replace")


@pytest.mark.slow
def test_a_worker_on_a_kombu_that_changed_the_read_it_copies_refuses_to_start(
    rt: Any, tmp_path: Path
) -> None:
    # given a notification waiting, and a kombu whose Channel._brpop_read changed
    record_id = noti.notify_sms("+8613912345678", "waiting")
    # when a worker starts on it
    output = _run_until_exit(_worker_on(tmp_path, rt.settings.redis_url, FUTURE_KOMBU), tmp_path)
    # then it exits before it is ready, saying why and what to do, and sent nothing
    assert "e.noti.config.dependency" in output, output[-3000:]
    assert f"kombu {kombu.__version__} changed what noti relies on" in output
    assert "Channel._brpop_read is not the one noti's bulk transport was written against" in output
    assert "NOTI_BROKER_BULK_FETCH=false" in output
    assert "ready." not in output
    assert rt.store.get(record_id).status is Status.WAITING


@pytest.mark.slow
def test_the_stock_transport_it_advises_runs_on_that_kombu(rt: Any, tmp_path: Path) -> None:
    # given the same kombu, and the way out the refusal names
    record_id = noti.notify_sms("+8613912345678", "through the stock transport")
    proc = _worker_on(tmp_path, rt.settings.redis_url, FUTURE_KOMBU, NOTI_BROKER_BULK_FETCH="false")
    try:
        # then the worker starts and delivers
        wait_until(lambda: rt.store.get(record_id).status is not Status.WAITING or proc.poll(), timeout=60)
        assert rt.store.get(record_id).status is Status.DONE, (tmp_path / "worker.log").read_text()
    finally:
        proc.terminate()
        _run_until_exit(proc, tmp_path)


@pytest.mark.slow
def test_a_worker_on_a_kombu_with_another_wire_format_refuses_even_with_the_stock_transport(
    rt: Any, tmp_path: Path
) -> None:
    proc = _worker_on(tmp_path, rt.settings.redis_url, FUTURE_SEPARATOR, NOTI_BROKER_BULK_FETCH="false")
    output = _run_until_exit(proc, tmp_path)
    assert "e.noti.config.dependency" in output, output[-3000:]
    assert "the Redis channel's default sep is '\\x1f'" in output
    assert "NOTI_BROKER_BULK_FETCH" not in output
    assert "ready." not in output
