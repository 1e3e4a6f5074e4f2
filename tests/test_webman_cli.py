"""``noti webman …``: make-consumer, remove-consumer, list, clean, history, run."""

from __future__ import annotations

import importlib
import os
import signal
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

import noti
from noti.bridge.webman import PendingStrategy, Producer, QueueKeys, QueueNames
from noti.bridge.webman.connection import connect
from noti.config import load_settings
from noti.errors import InvalidConfig
from tests.config_files import use_config
from tests.conftest import ADMIN, BASE_ENV, wait_until
from tests.noti_cli import invoke as run
from tests.noti_cli import start_noti
from tests.webman_fixtures.consumers import Collect

DB = 5


@pytest.fixture
def bridge_url(redis_server: str) -> Iterator[str]:
    url = f"{redis_server}/{DB}"
    redis.Redis.from_url(url).flushdb()
    yield url
    redis.Redis.from_url(url).flushdb()


def send(url: str, php_class: str = Collect.php_class) -> Producer:
    return Producer(connect(url), QueueKeys(QueueNames.from_class(php_class), "webman_redis_queue_"))


def test_make_consumer_asks_like_the_plugin_and_writes_a_ready_class(
    rt: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given: a settings file with content of its own
    config = tmp_path / "noti.toml"
    config.write_text('# my settings\n[channels.sms]\nprovider = "sandbox"  # keep me\n')
    # when: answering the three questions
    result = run(
        "webman",
        "make-consumer",
        "--root",
        str(tmp_path),
        "--config",
        str(config),
        stdin="send-code\n2\napp/queue/test\n",
    )
    # then: the class exists, is registered, and the file kept its own content
    assert result.exit_code == 0, result.output
    assert "Please enter the name of the queue" in result.output
    assert "Please enter the number of processes" in result.output
    assert "Please enter the path to create the class in" in result.output
    text = config.read_text()
    assert text.startswith('# my settings\n[channels.sms]\nprovider = "sandbox"  # keep me\n')
    entry = tomllib.loads(text)["webman"]["consumers"]["SendCode"]
    assert entry == {"class": "app.queue.test.send_code:SendCode", "processes": 2}
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("app.queue.test.send_code")
    try:
        consumer = module.SendCode(client=connect("redis://127.0.0.1:1/0"))
        assert consumer.php_class == "app\\queue\\test\\SendCode"  # what solar:make:consumer would name
        assert consumer.keys.stream == "webman_redis_queue_app_queue_test_sendcode"
    finally:
        for name in [n for n in sys.modules if n == "app" or n.startswith("app.")]:
            del sys.modules[name]


def test_make_consumer_runs_unattended_and_refuses_a_taken_name(rt: Any, tmp_path: Path) -> None:
    config = tmp_path / "noti.toml"
    args = ["webman", "make-consumer", "--queue", "sendEmail", "--processes", "1", "--path", "jobs"]
    first = run(*args, "--root", str(tmp_path), "--config", str(config))
    assert first.exit_code == 0, first.output
    assert (tmp_path / "jobs" / "send_email.py").is_file() and (tmp_path / "jobs" / "__init__.py").is_file()
    again = run(*args, "--root", str(tmp_path / "other"), "--config", str(config))
    assert again.exit_code == 1 and "e.noti.bridge.exists" in again.output
    bad = run(
        "webman",
        "make-consumer",
        "--queue",
        "send_email",
        "--processes",
        "1",
        "--path",
        "x",
        "--config",
        str(config),
    )
    assert bad.exit_code == 1 and "e.noti.bridge.badname" in bad.output


def test_remove_consumer_unregisters_and_purges_after_confirmation(
    configure: Any, tmp_path: Path, bridge_url: str
) -> None:
    # given: a registered consumer with data
    configure(webman={"redis_url": bridge_url})
    config = tmp_path / "noti.toml"
    config.write_text(
        "[webman.consumers.Collect]\n"
        'class = "tests.webman_fixtures.consumers:Collect"\n'
        "processes = 1\n\n"
        "[webman.consumers.Collect.options]\n"
        "max_attempts = 2\n\n"
        "[other]\nkept = true\n"
    )
    producer = send(bridge_url)
    producer.push("x")
    producer.schedule("y", 60)
    # when: refusing, then confirming the purge
    refused = run(
        "webman", "remove-consumer", "Collect", "--purge-data", "--config", str(config), stdin="n\n"
    )
    assert refused.exit_code == 1 and "Collect" in config.read_text()
    done = run(
        "--as",
        ADMIN,
        "webman",
        "remove-consumer",
        "Collect",
        "--purge-data",
        "--config",
        str(config),
        stdin="y\n",
    )
    # then
    assert done.exit_code == 0, done.output
    assert "deleted 3 key(s)" in done.output
    assert tomllib.loads(config.read_text()) == {"other": {"kept": True}}
    assert not producer.redis.exists(*producer.keys.data_keys)


def test_list_shows_the_plugin_columns(configure: Any, bridge_url: str) -> None:
    # given: a queue with 3 entries (1 pending) and 2 delayed tasks
    consumers = {"Collect": {"class": "tests.webman_fixtures.consumers:Collect", "processes": 2}}
    configure(webman={"redis_url": bridge_url, "consumers": consumers})
    producer = send(bridge_url)
    producer.push_many(["a", "b", "c"])
    producer.schedule("d", 60)
    producer.schedule("e", 60)
    client = producer.redis
    client.xgroup_create(producer.keys.stream, producer.names.group, id="0")
    client.xreadgroup(producer.names.group, "php-0", {producer.keys.stream: ">"}, count=1)
    # when
    result = run("webman", "list")
    # then
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    headers = [
        "Key",
        "Consumer",
        "Count",
        "Stream Length",
        "Delay Set Length",
        "Pending List Length",
        "Last Active",
    ]
    assert [h.strip() for h in lines[1].split("|")[1:-1]] == headers
    assert lines[0] == lines[2] == lines[4] and set(lines[0]) == {"+", "-"}
    cells = [c.strip() for c in lines[3].split("|")[1:-1]]
    assert cells[:6] == ["Collect", Collect.php_class, "2", "3", "2", "1"]
    assert cells[6].endswith("seconds ago")
    as_json = run("webman", "list", "--json")
    assert '"pending": 1' in as_json.output


def test_clean_asks_then_deletes_the_queue_keys(rt: Any, configure: Any, bridge_url: str) -> None:
    configure(webman={"redis_url": bridge_url})
    producer = send(bridge_url)
    producer.push("x")
    producer.schedule("y", 60)
    refused = run("--as", ADMIN, "webman", "clean", Collect.php_class, stdin="n\n")
    assert refused.exit_code == 1 and producer.redis.exists(producer.keys.stream)
    done = run("--as", ADMIN, "webman", "clean", Collect.php_class, "--yes")
    assert done.exit_code == 0 and "deleted 3 key(s)" in done.output
    assert not producer.redis.exists(*producer.keys.data_keys)


def test_history_lists_and_deletes_only_processed_entries(configure: Any, bridge_url: str) -> None:
    # given: two processed entries kept (acked, not deleted), one pending, one never delivered
    configure(webman={"redis_url": bridge_url})
    producer = send(bridge_url)
    client = producer.redis
    old = producer.message("old", timestamp=1_000)
    ids = producer.push_many([old, producer.message("fresh"), old, old])
    client.execute_command("XADD", producer.keys.stream, "*", "message", "garbage")
    client.xgroup_create(producer.keys.stream, producer.names.group, id="0")
    client.xreadgroup(producer.names.group, "c", {producer.keys.stream: ">"}, count=3)
    client.xack(producer.keys.stream, producer.names.group, ids[0], ids[1])
    # when
    listed = run("--as", ADMIN, "webman", "history", Collect.php_class, "--older-than", "1h")
    deleted = run("--as", ADMIN, "webman", "history", Collect.php_class, "--older-than", "1h", "--delete")
    # then: only the old processed one (the pending old one and the undelivered ones stay)
    assert listed.exit_code == 0, listed.output
    assert ids[0] in listed.output and ids[2] not in listed.output and "1 entries" in listed.output
    assert "deleted 1 entries" in deleted.output
    assert [i for i, _ in client.xrange(producer.keys.stream)][:3] == ids[1:]
    bad = run("--as", ADMIN, "webman", "history", Collect.php_class, "--older-than", "soon")
    assert bad.exit_code == 1 and "e.noti.bridge.badtime" in bad.output


@pytest.mark.slow
def test_run_consumes_until_terminated(rt: Any, redis_url: str, tmp_path: Path) -> None:
    # given: `noti webman run` with a registered notification consumer
    config = tmp_path / "noti.toml"
    config.write_text(
        '[channels.sms]\nprovider = "sandbox"\n\n'
        "[webman.consumers.notify]\n"
        'class = "noti.bridge.webman.notifications:NotificationConsumer"\n\n'
        "[webman.consumers.notify.options]\n"
        "php_class = 'app\\queue\\Notify'\nblock_time_ms = 200\n"
    )
    env = {**os.environ, **BASE_ENV, "NOTI_REDIS_URL": redis_url, "NOTI_CONFIG": str(config)}
    proc = start_noti(env, "webman", "run", stderr=subprocess.STDOUT)
    try:
        # when: a message arrives
        send(redis_url, "app\\queue\\Notify").push({"type": "sms", "to": "+8613912345678", "text": "hi"})
        # then: it becomes a notification, and SIGTERM stops the command cleanly
        wait_until(lambda: noti.list_notifications(user=ADMIN), timeout=30)
    finally:
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, output
    assert "running 1 consumer thread(s)" in output


def test_run_without_consumers_is_a_usage_error(rt: Any) -> None:
    result = run("webman", "run")
    assert result.exit_code == 2 and "no consumer to run" in result.output


def test_webman_settings_come_from_the_toml_file_and_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = use_config(
        monkeypatch,
        tmp_path / "noti.toml",
        "[webman]\nprefix = 'shop_'\n\n"
        "[webman.connections.orders]\nurl = 'redis://10.0.0.5:6379/2'\n\n"
        "[webman.consumers.Collect]\nclass = 'tests.webman_fixtures.consumers:Collect'\nprocesses = 2\n",
    )
    monkeypatch.setenv("NOTI_WEBMAN__ENABLED", "true")
    settings = load_settings()
    webman = settings.webman
    assert webman.enabled and webman.consumers["Collect"].processes == 2
    assert webman.connection("default", noti_redis_url=settings.redis_url).prefix == "shop_"
    orders = webman.connection("orders", noti_redis_url=settings.redis_url)
    assert (orders.url, orders.prefix) == ("redis://10.0.0.5:6379/2", "webman_redis_queue_")
    with pytest.raises(InvalidConfig):
        webman.connection("nope", noti_redis_url=settings.redis_url)
    config.write_text("[webman.consumers.X]\nclass = 'not a path'\n")
    with pytest.raises(InvalidConfig, match=r"webman\.consumers\.X\.class in .*noti\.toml"):  # its TOML key
        load_settings()


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"max_atempts": 3}, "unknown option"),
        ({"max_attempts": "3"}, "wrong type"),
        ({"auto_ack": 1}, "wrong type"),
        ({"pending_strategy": "sometimes"}, "wrong type"),
        ({"php_class": ""}, "php_class"),
        ({"php_class": "\\app\\X"}, "leading backslash"),
    ],
)
def test_consumer_options_are_checked(options: dict[str, Any], fragment: str) -> None:
    with pytest.raises(InvalidConfig, match=fragment):
        Collect(client=connect("redis://127.0.0.1:1/0"), options=options)


def test_consumer_options_convert_strategy_names_and_numbers() -> None:
    consumer = Collect(
        client=connect("redis://127.0.0.1:1/0"),
        options={"pending_strategy": "ignore", "delayed_interval_s": 2, "queue_name": "demo"},
    )
    assert consumer.pending_strategy is PendingStrategy.IGNORE and consumer.delayed_interval_s == 2.0
    assert consumer.names.queue == "demo" and consumer.names.group == "app_queue_test_collect"
