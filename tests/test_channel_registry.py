"""The open channel registry (issue 33, point 1): what ``Channel`` still is (a ``str``, one
object per name, the enum's constants), what a channel may not be (the registry's checks),
a channel registered in a process, a record written by the release before the registry
delivered by this one, and an example third-party channel installed as its own package
(``examples/noti-channel-ntfy``) found by the registry and delivered through a real worker."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

import pytest
import redis

from bench.registry_bench import BEFORE_REGISTRY, worktree
from noti.core.channel import (
    BUILTIN,
    Channel,
    ChannelSpec,
    EveryChannel,
    channel_problems,
    defined_at,
    register,
    unregister,
)
from noti.core.record import from_hash, parse_channel, to_hash, validate_fields, validate_target
from noti.errors import InvalidConfig, InvalidInput
from tests.conftest import BASE_ENV, sandbox_outbox, wait_until
from tests.fakes._server import FakeServer, Received, Reply

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "noti-channel-ntfy"


# --- what Channel still is ---------------------------------------------------------------------


def test_a_channel_is_its_name_one_object_per_name() -> None:
    assert Channel("sms") is Channel.SMS and Channel(Channel.SMS) is Channel.SMS
    assert Channel.SMS == "sms" and hash(Channel.SMS) == hash("sms")
    assert (Channel.SMS.value, Channel.SMS.name, Channel.SMS.queue) == ("sms", "SMS", "noti.sms")
    assert str(Channel.WEIXIN) == "weixin" and type(str(Channel.WEIXIN)) is str
    assert f"{Channel.EMAIL}" == "email" and json.dumps([Channel.WEBHOOK]) == '["webhook"]'
    assert pickle.loads(pickle.dumps(Channel.PUSH)) is Channel.PUSH
    # built-ins first, in their fixed order (queues, metrics and listings follow it)
    assert [c.value for c in Channel][: len(BUILTIN)] == list(BUILTIN)
    assert "chat" in Channel and "fax" not in Channel and 3 not in Channel


def test_an_unknown_channel_is_refused_with_the_known_ones_named() -> None:
    with pytest.raises(ValueError, match="'fax' is not a noti channel"):
        Channel("fax")
    with pytest.raises(InvalidInput) as refused:
        parse_channel("fax")
    assert refused.value.code == "e.cmd.noti.add.badtype"
    assert "sms, weixin, email, webhook, push, chat" in refused.value.message


@pytest.mark.parametrize(
    ("channel", "target", "fields"),
    [
        (
            Channel.PUSH,
            "fcm:APA91b-token_1.x",
            {"body": "hi", "title": "T", "data": '{"k": "v"}', "collapse": "c1"},
        ),
        (Channel.CHAT, "ops-robot", {"text": "deploy done", "title": "CI", "format": "markdown"}),
        (Channel.CHAT, "-1001234567890", {"text": "x"}),
        (Channel.CHAT, "@channelname", {"text": "x"}),
    ],
)
def test_the_new_channels_take_their_targets_and_fields_and_read_back(
    channel: Channel, target: str, fields: dict[str, Any]
) -> None:
    from noti.core.record import Notification, new_id

    clean = validate_fields(channel, fields)
    record = Notification(
        id=new_id(), channel=channel, target=validate_target(channel, target), creator="alice", fields=clean
    )
    assert from_hash(to_hash(record)) == record
    if channel is Channel.PUSH:
        assert clean["data"] == {"k": "v"}


@pytest.mark.parametrize(
    ("channel", "target", "fields", "code"),
    [
        (Channel.PUSH, "has space", {"body": "x"}, "badtarget"),
        (Channel.PUSH, "t" * 4097, {"body": "x"}, "badtarget"),
        (Channel.PUSH, "tok/../x", {"body": "x"}, "badtarget"),
        (Channel.PUSH, "tok", {}, "missing"),
        (Channel.PUSH, "tok", {"body": "x" * 4001}, "badtext"),
        (Channel.PUSH, "tok", {"body": "x", "title": "two\nlines"}, "badtext"),
        (Channel.PUSH, "tok", {"body": "x", "data": "[1]"}, "badcontent"),
        (Channel.PUSH, "tok", {"body": "x", "data": {"k": "v" * 5000}}, "badcontent"),
        (Channel.PUSH, "tok", {"body": "x", "collapse": "a b"}, "badfield"),
        (Channel.PUSH, "tok", {"body": "x", "text": "x"}, "badfield"),
        (Channel.CHAT, "two words", {"text": "x"}, "badtarget"),
        (Channel.CHAT, "r" * 257, {"text": "x"}, "badtarget"),
        (Channel.CHAT, "ops", {"text": "x" * 20_001}, "badtext"),
        (Channel.CHAT, "ops", {"text": "x", "format": "html"}, "badfield"),
        (Channel.CHAT, "ops", {"text": "x", "format": 3}, "badfield"),
        (Channel.CHAT, "ops", {"title": "x"}, "missing"),
        (Channel.CHAT, "ops", {"text": "a\x00b"}, "badtext"),
    ],
)
def test_bad_targets_and_fields_of_the_new_channels_are_refused(
    channel: Channel, target: str, fields: dict[str, Any], code: str
) -> None:
    with pytest.raises(InvalidInput) as refused:
        validate_target(channel, target)
        validate_fields(channel, fields)
    assert refused.value.code == f"e.cmd.noti.add.{code}"


# --- what a channel may not be -----------------------------------------------------------------


def _spec(name: str = "pager", **attributes: Any) -> type[ChannelSpec]:
    fields = attributes.pop("fields", {"text": f"noti_{name}_text"})
    return type(
        "Spec",
        (ChannelSpec,),
        {"name": name, "title": name, "fields": fields, "required": ("text",), **attributes},
    )


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        (_spec(name="other"), "its name is 'other', registered as 'pager'"),
        (_spec(fields={}), "it has no fields"),
        (_spec(fields={"text": "noti_sms_text"}), "it must start with noti_pager_"),
        (_spec(fields={"text": "plain"}), "it must start with noti_pager_"),
        (_spec(fields={"text": "noti_pager_text", "delay": "noti_pager_delay"}), "one every notification"),
        (_spec(fields={"text": "noti_pager_text", "2x": "noti_pager_2x"}), "is not an identifier"),
        (_spec(required=("body",)), "required field 'body'"),
        (_spec(json_fields=frozenset({"body"})), "json_fields names fields it does not have"),
        (_spec(stdin_field="body"), "stdin_field 'body'"),
        (int, "is not a noti ChannelSpec class"),
    ],
)
def test_the_registry_refuses_a_broken_channel(spec: type[ChannelSpec], problem: str) -> None:
    problems = channel_problems(spec, "pager", builtin=False)
    assert any(problem in p for p in problems), problems


def test_the_built_in_channels_pass_the_registrys_checks() -> None:
    for name in BUILTIN:
        assert channel_problems(type(Channel(name).spec), name, builtin=True) == []
        assert defined_at(name) == BUILTIN[name]


@contextmanager
def registered(name: str, path: str) -> Iterator[Channel]:
    """The channel ``name`` registered in this process, forgotten afterwards (its queue too,
    which a worker's start declared in the app), so no later test sees it."""
    try:
        yield register(name, path)
    finally:
        forget(name)


def forget(name: str) -> None:
    from noti.celery.app import app

    unregister(name)
    if app.configured:  # else no worker declared it (and reading the settings now would fix them)
        queues = app.amqp.queues
        queues.pop(f"noti.{name}", None)
        if queues._consume_from:
            queues._consume_from.pop(f"noti.{name}", None)
    assert name not in Channel


class Pager(ChannelSpec):
    """A channel registered in this process (what the ``noti.channels`` entry point does)."""

    name = "pager"
    title = "pager"
    fields: ClassVar[Mapping[str, str]] = {"text": "noti_pager_text"}
    required = ("text",)

    def check_target(self, target: str) -> str:
        if not target.isdigit():
            raise InvalidInput("a pager number is digits", code="e.cmd.noti.add.badtarget")
        return target


class Broken(ChannelSpec):
    name = "broken"
    title = "broken"
    fields: ClassVar[Mapping[str, str]] = {"text": "noti_sms_text"}  # another channel's field


@pytest.fixture(scope="module")
def pager() -> Iterator[Channel]:
    with registered("pager", f"{__name__}:Pager") as channel:
        yield channel


def test_a_registered_channel_is_listed_checked_and_served_by_the_sandbox(pager: Channel) -> None:
    assert Channel("pager") is pager and pager in list(Channel) and pager.queue == "noti.pager"
    assert validate_target(pager, " 12345 ") == "12345"
    with pytest.raises(InvalidInput):
        validate_target(pager, "abc")
    from noti.providers.sandbox import SandboxProvider

    assert pager in SandboxProvider.channels and isinstance(SandboxProvider.channels, EveryChannel)
    with pytest.raises(InvalidConfig, match="already registered"):
        register("pager", "elsewhere:Pager")
    with pytest.raises(InvalidConfig, match="a channel's name is"):
        register("Bad-Name", f"{__name__}:Pager")


def test_a_broken_registered_channel_is_refused_when_used_and_hides_nothing_else() -> None:
    from noti.core.record import msgid_fields

    with registered("broken", f"{__name__}:Broken") as broken:
        with pytest.raises(InvalidConfig, match="it must start with noti_broken_"):
            broken.spec  # noqa: B018 - loading it is the test
        assert "noti_sms_msgid" in msgid_fields()  # the others' message ids are still read
    assert "broken" not in Channel


def test_a_built_in_channel_cannot_be_unregistered() -> None:
    with pytest.raises(InvalidConfig, match="built in"):
        unregister("sms")
    assert Channel("sms") is Channel.SMS


def test_a_registered_channel_is_delivered_by_a_real_worker(
    pager: Channel, configure: Callable[..., Any], start_worker_now: Callable[[], Any]
) -> None:
    rt = configure(channels={"pager": {"provider": "sandbox"}, "sms": {"provider": "sandbox"}})
    from kombu import Queue

    import noti
    from noti.celery.app import app

    # a worker process declares it at its start (NotiLoader: the test below); this process's
    # loader ran once, for the first in-process worker of the suite
    app.amqp.queues.select_add(Queue(pager.queue, routing_key=pager.queue))
    with start_worker_now():
        record_id = noti.notify("pager", "5550100", text="the build is red")
        wait_until(lambda: rt.store.get(record_id).status == 10)
    sent = sandbox_outbox(rt)
    assert [(m["type"], m["target"], m["fields"]) for m in sent] == [
        ("pager", "5550100", {"text": "the build is red"})
    ]
    assert rt.redis.hget(rt.keys.record(record_id), "noti_pager_text") == "the build is red"


# --- the release before the registry -----------------------------------------------------------


@pytest.fixture(scope="module")
def release_before() -> Iterator[Path]:
    """A checkout of the last release before the registry (a git worktree: bench scenario 18's)."""
    try:
        checkout = worktree(BEFORE_REGISTRY)
        where = checkout.__enter__()
    except subprocess.CalledProcessError as exc:  # pragma: no cover - a shallow clone
        pytest.skip(f"the release before the registry ({BEFORE_REGISTRY}) is not in this clone: {exc.stderr}")
    yield where
    checkout.__exit__(None, None, None)


_WRITE_WITH_THE_OLD_RELEASE = """
import json, sys
import noti, noti.core.record as record
assert not hasattr(record, "ChannelSpec"), record.__file__  # the code before the registry
ids = [
    noti.notify("sms", "+8613912345678", text="old sms"),
    noti.notify("weixin", "oUpF8uMuAJO_M2pxb1Q9zNjWeS6o", pnb="acct", tmpl="T1", content={"k": {"value": 1}}),
    noti.notify("email", "ops@example.com", subject="old", text="old e-mail", html="<p>old</p>"),
    noti.notify("webhook", "https://hooks.example.com/in", content={"n": 1}),
]
print(json.dumps(ids))
"""


@pytest.mark.slow
@pytest.mark.integration
def test_a_record_written_by_the_release_before_the_registry_is_delivered(
    release_before: Path,
    redis_url: str,
    tmp_path: Path,
    spawn_worker: Callable[..., Any],
    configure: Callable[..., Any],
) -> None:
    config = tmp_path / "noti.toml"
    config.write_text(
        "".join(f'[channels.{c}]\nprovider = "sandbox"\n' for c in ("sms", "weixin", "email", "webhook"))
        + '[provider_grants]\n"*" = ["sandbox"]\n'
    )
    redis.Redis.from_url(redis_url).flushdb()
    env = {**os.environ, **BASE_ENV, "NOTI_REDIS_URL": redis_url, "NOTI_CONFIG": str(config)}
    old = subprocess.run(
        [sys.executable, "-c", _WRITE_WITH_THE_OLD_RELEASE],
        env={**env, "PYTHONPATH": str(release_before)},
        cwd=release_before,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert old.returncode == 0, old.stderr
    ids = json.loads(old.stdout)
    spawn_worker(config.read_text())  # this release's worker, every queue
    rt = configure()
    wait_until(lambda: all(rt.store.get(i).status == 10 for i in ids), timeout=30)
    sent = {m["id"]: m for m in sandbox_outbox(rt)}
    assert [sent[i]["type"] for i in ids] == ["sms", "weixin", "email", "webhook"]
    assert sent[ids[1]]["fields"] == {"pnb": "acct", "tmpl": "T1", "content": {"k": {"value": 1}}}
    assert sent[ids[2]]["fields"] == {"subject": "old", "text": "old e-mail", "html": "<p>old</p>"}


# --- a third-party channel installed as its own package ----------------------------------------


class FakeNtfy(FakeServer):
    """ntfy's publish API: ``POST /<topic>``, the body is the message; a token if set."""

    token = "tk_secret"

    def verify(self, received: Received) -> Reply | None:
        if received.headers.get("authorization") != f"Bearer {self.token}":
            return Reply(401, {"code": 40101, "http": 401, "error": "unauthorized"})
        if received.method != "POST" or not received.body:
            return Reply(400, {"code": 40001, "http": 400, "error": "bad request"})
        return None

    def succeed(self, received: Received) -> Reply:
        return Reply(200, {"id": f"m{len(self.requests)}", "event": "message", "topic": received.path[1:]})


@pytest.fixture(scope="module")
def installed_example(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``examples/noti-channel-ntfy`` installed with pip into a directory of its own, as a
    package is (its dist-info carries the entry points); the processes below put it on their
    path."""
    target = tmp_path_factory.mktemp("site")
    build = tmp_path_factory.mktemp("build")
    source = build / "noti-channel-ntfy"
    subprocess.run(["cp", "-r", str(EXAMPLE), str(source)], check=True)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert (target / "noti_ntfy").is_dir() and list(target.glob("noti_channel_ntfy-*.dist-info"))
    return target


@pytest.mark.slow
@pytest.mark.integration
def test_an_installed_third_party_channel_is_found_and_delivered(
    installed_example: Path, redis_url: str, tmp_path: Path, spawn_worker: Callable[..., Any]
) -> None:
    with FakeNtfy() as fake:
        config = (
            '[channels.ntfy]\nprovider = "ntfy"\n'
            f'[providers.ntfy]\nbase_url = "{fake.url}"\ntoken = "{FakeNtfy.token}"\n'
            '[provider_grants]\n"*" = ["ntfy"]\n'
        )
        config_file = tmp_path / "noti.toml"
        config_file.write_text(config)
        redis.Redis.from_url(redis_url).flushdb()
        env = {
            **os.environ,
            **BASE_ENV,
            "NOTI_REDIS_URL": redis_url,
            "NOTI_CONFIG": str(config_file),
            "PYTHONPATH": os.pathsep.join([str(installed_example), str(ROOT)]),
        }

        def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, "-m", "noti", *args],
                env=env,
                input=stdin,
                capture_output=True,
                text=True,
                timeout=60,
            )

        listed = cli("channels", "-json")
        assert listed.returncode == 0, listed.stderr
        ntfy = {c["name"]: c for c in json.loads(listed.stdout)["channels"]}["ntfy"]
        assert ntfy == {
            "name": "ntfy",
            "queue": "noti.ntfy",
            "module": "noti_ntfy:NtfyChannel",
            "provider": "ntfy",
            "title": "ntfy",
            "target": "An ntfy topic",
            "fields": ["message*", "title", "priority"],
            "docs": "https://docs.ntfy.sh/publish/",
            "status": "ok",
        }
        providers = cli("providers", "-json")
        assert {
            "kind": "ntfy",
            "module": "noti_ntfy.provider:NtfyProvider",
            "channels": "ntfy",
            "status": "ok",
        } in (json.loads(providers.stdout)["kinds"])
        # refused by the channel's own checks, nothing stored
        bad = cli("add", "ntfy", "-to", "not a topic", "-F", "message=x")
        assert bad.returncode != 0 and "e.cmd.noti.add.badtarget" in bad.stderr
        bad = cli("add", "ntfy", "-to", "alerts", "-F", "message=x", "-F", "priority=9")
        assert bad.returncode != 0 and "e.cmd.noti.add.badfield" in bad.stderr
        assert not redis.Redis.from_url(redis_url).keys("noti:rec:*")
        # -F for its fields, standard input for its stdin field
        first = cli(
            "add", "ntfy", "-to", "alerts", "-F", "title=Disk", "-F", "priority=5", stdin="disk full\n"
        )
        second = cli("add", "ntfy", "-to", "alerts", "-F", "message=back to normal", "-lv", "2")
        assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
        ids = [first.stdout.strip(), second.stdout.strip()]
        spawn_worker(config, env={"PYTHONPATH": env["PYTHONPATH"]})
        wait_until(lambda: len(fake.requests) == 2, timeout=30)
        wait_until(lambda: all(cli("get", i, "-json").stdout.count('"noti_st": 10') for i in ids), timeout=30)
        record = json.loads(cli("get", ids[0], "-json").stdout)
        assert (record["noti_ntfy_title"], record["noti_ntfy_message"], record["noti_sent_by"]) == (
            "Disk",
            "disk full",
            "ntfy",
        )
    by_body = {r.body.decode(): r for r in fake.requests}
    assert set(by_body) == {"disk full", "back to normal"}
    assert by_body["disk full"].path == "/alerts"
    assert (by_body["disk full"].headers["title"], by_body["disk full"].headers["priority"]) == ("Disk", "5")
    assert by_body["back to normal"].headers["priority"] == "3"  # a low level: ntfy's default


def test_push_and_chat_are_notified_from_python_and_delivered_by_a_real_worker(
    configure: Callable[..., Any], start_worker_now: Callable[[], Any]
) -> None:
    rt = configure(channels={"push": {"provider": "sandbox"}, "chat": {"provider": "sandbox"}})
    import noti

    with start_worker_now():
        ids = [
            noti.notify_push("tok_1", body="Your order shipped", title="Order", data={"order": "42"}),
            noti.notify_chat("ops", text="**deploy** done", format="markdown"),
        ]
        wait_until(lambda: all(rt.store.get(i).status == 10 for i in ids))
    sent = {m["id"]: (m["type"], m["target"], m["fields"]) for m in sandbox_outbox(rt)}
    assert sent == {
        ids[0]: ("push", "tok_1", {"body": "Your order shipped", "title": "Order", "data": {"order": "42"}}),
        ids[1]: ("chat", "ops", {"text": "**deploy** done", "format": "markdown"}),
    }


def test_the_http_apis_notification_schema_follows_the_registry(pager: Channel) -> None:
    from noti.http.models import NotificationIn, notification_model

    fields = NotificationIn.model_fields
    for channel in Channel:
        if channel.value in BUILTIN:
            for name in channel.spec.fields:
                assert name in fields, (channel, name)
    assert fields["data"].annotation != fields["body"].annotation  # a JSON field takes an object
    assert "text" in notification_model().model_fields  # a channel's fields, each named once


def test_the_workers_queues_and_the_metrics_follow_the_registry(rt: Any, pager: Channel) -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from noti.celery.queues import queue_names
    from noti.observe.prometheus import NotiCollector
    from noti.observe.snapshot import Observer

    assert {"noti.push", "noti.chat", "noti.pager"} <= set(queue_names())
    registry = CollectorRegistry(auto_describe=False)
    registry.register(NotiCollector(Observer(rt).snapshot))
    exposition = generate_latest(registry).decode()
    for queue in ("noti.push", "noti.chat", "noti.pager"):
        assert f'noti_queue_messages{{queue="{queue}",step="0"}} 0.0' in exposition


@pytest.mark.slow
@pytest.mark.integration
def test_a_channel_registered_by_a_noti_imports_module_is_consumed_by_a_worker_process(
    configure: Callable[..., Any], spawn_worker: Callable[..., Any]
) -> None:
    with registered("siren", "tests.registered_channel:Siren"):  # as the worker's import does
        rt = configure(channels={"siren": {"provider": "sandbox"}})
        import noti

        record_id = noti.notify("siren", "hall-3", text="fire drill at noon")
        spawn_worker(
            '[channels.siren]\nprovider = "sandbox"\n[provider_grants]\n"*" = ["sandbox"]\n',
            env={"NOTI_IMPORTS": "tests.registered_channel"},
        )
        wait_until(lambda: rt.store.get(record_id).status == 10, timeout=30)
        assert [(m["type"], m["target"]) for m in sandbox_outbox(rt)] == [("siren", "hall-3")]
