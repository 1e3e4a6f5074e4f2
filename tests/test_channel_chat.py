"""The chat channel's providers (DingTalk, Feishu, WeCom, Slack, Telegram) against their fakes:
delivery by a real worker process, every vendor error's outcome, signatures, the vendors'
flow limits, opt-outs, and what is refused at ``add``. Parametrised over tests/chat_vendors.py."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

import noti
from noti import errors
from noti.core.record import Status
from noti.providers import load_kind
from noti.providers.base import Message
from tests.chat_vendors import VENDORS, Vendor, toml_table
from tests.conftest import wait_until
from tests.fakes._chat import ChatFake
from tests.fakes._server import Reply
from tests.vendor_env import assert_record_after, send_now

BY_ID = {vendor.id: vendor for vendor in VENDORS}
PROVIDER = "chatty"


@pytest.fixture(scope="module", params=[v.id for v in VENDORS])
def running(request: pytest.FixtureRequest) -> Iterator[tuple[Vendor, ChatFake]]:
    vendor = BY_ID[request.param]
    with vendor.make_fake() as fake:
        assert isinstance(fake, ChatFake)
        yield vendor, fake


@pytest.fixture
def vendor(running: tuple[Vendor, ChatFake]) -> Vendor:
    return running[0]


@pytest.fixture
def fake(running: tuple[Vendor, ChatFake]) -> ChatFake:
    running[1].reset()
    return running[1]


def setup(configure: Any, options: dict[str, Any], *, lines: bool = False, **more: Any) -> Any:
    """A runtime whose chat channel goes through ``options`` (retries left). The
    conversations' rate lines are off unless ``lines`` (a test sending twice to one robot
    would wait seconds for the vendor's 20 a minute)."""
    options = {**options} if lines else {"target_rate_per_min": 0, **options}
    return configure(
        providers={PROVIDER: options}, channels={"chat": {"provider": PROVIDER}}, retry_max=5, **more
    )


@pytest.fixture
def rt(configure: Any, vendor: Vendor, fake: ChatFake) -> Any:
    return setup(configure, {**vendor.options(fake), "timeout_s": 0.5})


def add(vendor: Vendor, target: str | None = None, **fields: Any) -> str:
    return noti.notify("chat", target or vendor.target, **({"text": "disk full on db1"} | fields))


def message(vendor: Vendor, **fields: Any) -> Message:
    from noti.core.record import Channel

    return Message(id="rec1", channel=Channel.CHAT, target=vendor.target, fields={"text": "hi"} | fields)


def stored(rt: Any) -> list[bytes]:
    return list(rt.redis.keys("noti:rec:*"))


# --- delivery by a real worker process -----------------------------------------------------


def test_a_worker_process_delivers_to_each_vendor(
    configure: Any, spawn_worker: Any, vendor: Vendor, fake: ChatFake
) -> None:
    # given a `celery -A noti worker` configured for the vendor's fake
    options = vendor.options(fake)  # the vendor's default rate lines
    rt = setup(configure, options, lines=True)
    config = f'[channels.chat]\nprovider = "{PROVIDER}"\n[provider_grants]\n"*" = ["{PROVIDER}"]\n'
    worker = spawn_worker(config + toml_table(PROVIDER, options), "-P", "threads", "-c", "2")
    # when a plain and a markdown message are added
    plain = add(vendor, text="disk full on db1")
    marked = add(vendor, text="**db1** is at 97%", title="Disk", format="markdown")
    # then both are posted to the conversation (signed where the vendor signs) and done
    done = wait_until(lambda: all(rt.store.get(i).status == Status.DONE for i in (plain, marked)) and True)
    assert done, [rt.store.get(i).errmsg for i in (plain, marked)]
    assert [p.conversation for p in fake.posted] == [vendor.conversation] * 2
    # (the two may be posted in either order)
    by_text = {fake.text_of(p.body): p for p in fake.posted}
    [plain_shown] = [t for t in by_text if t.endswith("disk full on db1")]
    [marked_shown] = [t for t in by_text if "**db1** is at 97%" in t]
    assert "Disk" in marked_shown or "Disk" in str(by_text[marked_shown].body)
    for record_id, shown in ((plain, plain_shown), (marked, marked_shown)):
        record = rt.store.get(record_id)
        assert record.sent_by == PROVIDER and record.retry == 0
        assert record.msgid == (by_text[shown].msgid if vendor.msgid else None)
    log = worker.output()
    assert f"ok via {PROVIDER}" in log, log
    for secret in _secrets(options):
        assert secret not in log


def _secrets(options: dict[str, Any]) -> list[str]:
    found = [str(options[k]) for k in ("bot_token",) if k in options]
    for robot in options.get("robots", {}).values():
        found += [str(v) for v in robot.values()]
    return found


# --- every vendor error, and what it does to the record -------------------------------------

ERROR_CASES = [(v.id, code) for v in VENDORS for code in v.errors]


def test_the_cases_cover_each_providers_error_table() -> None:
    for vendor in VENDORS:
        module = __import__(load_kind(vendor.kind).__module__, fromlist=["x"])
        tables = [getattr(module, n) for n in ("ERRORS", "HOOK_ERRORS", "API_ERRORS") if hasattr(module, n)]
        known = set().union(*tables)
        covered = {v_code for v in VENDORS if v.kind == vendor.kind for v_code in v.errors}
        assert known <= covered, (vendor.kind, sorted(known - covered))


@pytest.mark.parametrize(("vendor_id", "code"), ERROR_CASES)
def test_each_vendor_error_raises_its_class_and_sets_the_record(
    configure: Any, vendor_id: str, code: str
) -> None:
    vendor = BY_ID[vendor_id]
    reply, expected = vendor.errors[code]
    with vendor.make_fake() as fake:
        rt = setup(configure, {**vendor.options(fake), "timeout_s": 2})
        # given the vendor answering with this error
        fake.script(reply)
        provider = rt.providers.get(PROVIDER)
        with pytest.raises(errors.DeliveryError) as info:
            provider.send(message(vendor))
        # then the class is the table's, the code kept, nothing posted
        assert type(info.value) is expected, info.value
        assert info.value.vendor_code == code and info.value.provider == PROVIDER
        if isinstance(info.value, errors.RateLimited):
            assert info.value.retry_after_s >= 1
        # and through the sender the record ends as the class says
        fake.script(reply)
        record = send_now(rt, add(vendor))
        assert_record_after(record, expected)
        assert code.removeprefix("http.") in record.errmsg
        assert fake.posted == []


def test_a_rate_limit_waits_the_vendors_window_without_an_attempt(configure: Any) -> None:
    vendor = BY_ID["telegram"]
    with vendor.make_fake() as fake:
        rt = setup(configure, vendor.options(fake))
        fake.script(vendor.errors["429"][0])
        record = send_now(rt, add(vendor))
        assert record.status is Status.WAITING and record.retry == 0
        assert rt.delayed.due_at(record.id) >= record.modified_ms + 17_000 - 1000


# --- credentials: the fakes verify them as the vendors do -----------------------------------


def test_a_wrong_secret_or_token_is_refused_by_the_vendor_and_fails_as_misconfigured(
    configure: Any, vendor: Vendor, fake: ChatFake
) -> None:
    options = vendor.wrong_credential(fake)
    rt = setup(configure, options)
    with pytest.raises(errors.ProviderMisconfigured) as info:
        rt.providers.get(PROVIDER).send(message(vendor))
    assert info.value.vendor_code == vendor.wrong_code
    record = send_now(rt, add(vendor))
    assert record.status is Status.FAILED and vendor.wrong_code in record.errmsg
    assert fake.posted == []
    for secret in _secrets(options) + _secrets(vendor.options(fake)):
        assert secret not in record.errmsg and secret not in str(info.value)
        assert secret not in repr(rt.providers.get(PROVIDER)) and secret not in repr(
            rt.providers.get(PROVIDER).options
        )


def test_no_credential_reaches_the_http_clients_log(
    rt: Any, vendor: Vendor, fake: ChatFake, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG):
        assert send_now(rt, add(vendor)).status is Status.DONE
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "HTTP Request" in text
    for secret in _secrets(vendor.options(fake)):
        assert secret not in text


# --- message types --------------------------------------------------------------------------


def _type(vendor: Vendor, body: dict[str, Any]) -> str:
    if vendor.kind in ("dingtalk", "wecom"):
        return str(body["msgtype"])
    if vendor.kind == "feishu":
        return str(body["msg_type"])
    if vendor.kind == "slack":
        return "markdown" if body.get("blocks") else "text"
    return str(body.get("parse_mode", ""))


def test_text_title_and_format_map_to_the_vendors_message_types(
    rt: Any, vendor: Vendor, fake: ChatFake
) -> None:
    fake.windows = []  # three messages to one conversation at once (the lines are off)
    ids = [
        add(vendor, text="plain words"),
        add(vendor, text="plain words", title="Heads up"),
        add(vendor, text="some *bold* words", title="Heads up", format="markdown"),
    ]
    for record_id in ids:
        assert send_now(rt, record_id).status is Status.DONE
    assert tuple(_type(vendor, p.body) for p in fake.posted) == vendor.types
    texts = fake.texts()
    assert texts[0] == "plain words" or texts[0].endswith("plain words")
    assert "Heads up" in texts[1] and "plain words" in texts[1]
    assert "Heads up" in texts[2] or "Heads up" in str(fake.posted[2].body)


def test_slack_escapes_plain_text_so_it_mentions_nobody(configure: Any) -> None:
    vendor = BY_ID["slack"]
    with vendor.make_fake() as fake:
        rt = setup(configure, vendor.options(fake))
        assert send_now(rt, add(vendor, text="<!channel> a & b")).status is Status.DONE
        assert fake.posted[0].body == {"text": "&lt;!channel&gt; a &amp; b", "mrkdwn": False}


# --- the vendors' flow limits ---------------------------------------------------------------


@pytest.mark.slow
def test_each_conversations_rate_line_keeps_under_the_vendors_limit(
    configure: Any, start_worker_now: Any, vendor: Vendor, fake: ChatFake
) -> None:
    # given a vendor taking at most 4 messages a second per conversation (its fake enforces it)
    # and the provider's line for the conversation at 2 a second, burst 1 (at most 3 a second)
    fake.windows = [(4, 1.0)]
    options = {**vendor.options(fake), "target_rate_per_min": 120, "target_burst": 1}
    rt = setup(configure, options, lines=True)
    # when eight messages to one conversation are added at once
    ids = [add(vendor, text=f"message {n}") for n in range(8)]
    with start_worker_now():
        wait_until(lambda: rt.store.count(Status.DONE) == 8, timeout=60)
    # then all were posted, none over the vendor's limit, and no wait counted as an attempt
    assert fake.throttled == 0 and len(fake.posted) == 8
    assert all(rt.store.get(i).retry == 0 for i in ids)


def test_the_default_lines_sit_under_each_vendors_documented_windows() -> None:
    # a bucket of b tokens filled at r a second lets b + r*T through in any T seconds
    windows = {
        "dingtalk": [(20, 60.0)],
        "wecom": [(20, 60.0)],
        "feishu": [(5, 1.0), (100, 60.0)],
        "slack": [(2, 1.0)],  # about one a second, bursts allowed
        "telegram": [(20, 60.0)],  # per group
    }
    for kind, limits in windows.items():
        options = load_kind(kind).Options.model_fields
        per_min = options["target_rate_per_min"].default
        burst = options["target_burst"].default
        for most, seconds in limits:
            assert burst + per_min / 60 * seconds <= most, (kind, most, seconds)
    telegram = load_kind("telegram").Options.model_fields
    assert telegram["rate_limit_per_s"].default == 30  # the bot's ~30 messages a second in all


# --- opt-outs -------------------------------------------------------------------------------


def test_a_user_who_blocked_the_bot_is_suppressed_and_the_next_send_refused(configure: Any) -> None:
    vendor = BY_ID["telegram"]
    with vendor.make_fake() as fake:
        rt = setup(configure, vendor.options(fake))
        # given a user who blocked the bot
        record = send_now(rt, add(vendor, target="424242"))
        # then the record is invalid and the chat suppressed
        assert record.status is Status.INVALID and record.errmsg.startswith(errors.RecipientOptedOut.code)
        assert rt.store.is_suppressed("chat", "424242")
        # and the next message to it is refused without a request to Telegram
        asked = len(fake.requests)
        record = send_now(rt, add(vendor, target="424242"))
        assert record.status is Status.INVALID and record.errmsg.startswith(errors.RecipientOptedOut.code)
        assert len(fake.requests) == asked
        # a group that removed the bot is suppressed the same way
        assert send_now(rt, add(vendor, target="-4242")).status is Status.INVALID
        assert rt.store.is_suppressed("chat", "-4242")


# --- refused at add, nothing stored ---------------------------------------------------------


ROBOT_VENDORS = [v.id for v in VENDORS if v.target == "ops"]


@pytest.mark.parametrize("vendor_id", ROBOT_VENDORS)
def test_an_unknown_robot_is_refused_at_add(configure: Any, vendor_id: str) -> None:
    vendor = BY_ID[vendor_id]
    with vendor.make_fake() as fake:
        rt = setup(configure, vendor.options(fake))
        with pytest.raises(errors.InvalidInput) as info:
            add(vendor, target="sales")
        assert info.value.code == "e.cmd.noti.add.badtarget"
        assert "ops" not in info.value.message  # the configured robots are not listed
        assert stored(rt) == [] and fake.requests == []


@pytest.mark.parametrize(
    ("vendor_id", "target"),
    [
        ("telegram", "ops"),
        ("telegram", "12ab"),
        ("telegram", "@ab"),
        ("slack_api", "c0lowercase"),
        ("slack_api", "#general"),
        ("dingtalk", "C0FAKE0001"),
        ("wecom", "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=x"),
    ],
)
def test_a_target_the_vendor_cannot_reach_is_refused_at_add(
    configure: Any, vendor_id: str, target: str
) -> None:
    vendor = BY_ID[vendor_id]
    with vendor.make_fake() as fake:
        rt = setup(configure, vendor.options(fake))
        with pytest.raises(errors.InvalidInput) as info:
            add(vendor, target=target)
        assert info.value.code == "e.cmd.noti.add.badtarget" and stored(rt) == []


def test_a_channel_id_without_a_bot_token_is_refused_at_add(configure: Any) -> None:
    vendor = BY_ID["slack"]
    with vendor.make_fake() as fake:
        options = {k: v for k, v in vendor.options(fake).items() if k != "bot_token"}
        rt = setup(configure, options)
        with pytest.raises(errors.InvalidInput) as info:
            add(vendor, target="C0FAKE0001")
        assert info.value.code == "e.cmd.noti.add.badtarget" and "bot_token" in info.value.message
        assert stored(rt) == []


def test_a_message_over_the_vendors_limit_is_refused_at_add(rt: Any, vendor: Vendor, fake: ChatFake) -> None:
    with pytest.raises(errors.InvalidInput) as info:
        add(vendor, **vendor.oversize)
    assert (
        info.value.code == "e.cmd.noti.add.badtext"
        and vendor.kind.split("_")[0] in info.value.message.lower()
    )
    assert stored(rt) == [] and fake.requests == []


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"text": ""}, "e.cmd.noti.add.badtext"),
        ({"text": "x" * 20_001}, "e.cmd.noti.add.badtext"),
        ({"text": "x", "title": "two\nlines"}, "e.cmd.noti.add.badtext"),
        ({"text": "x", "format": "html"}, "e.cmd.noti.add.badfield"),
    ],
)
def test_the_channels_own_limits_are_refused_at_add(
    rt: Any, vendor: Vendor, fields: dict[str, Any], code: str
) -> None:
    with pytest.raises(errors.InvalidInput) as info:
        noti.notify("chat", vendor.target, **fields)
    assert info.value.code.startswith(code.rsplit(".", 1)[0]) and stored(rt) == []


# --- options --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "overrides"),
    [
        ("dingtalk", {"robots": {}}),
        ("dingtalk", {"robots": {"Ops Team": {"token": "t"}}}),
        ("dingtalk", {"robots": {"ops": {"token": "t", "colour": "red"}}}),
        ("feishu", {"target_rate_per_min": -1}),
        ("wecom", {"robots": {"ops": {"token": "k", "secret": "s3cr3t-value"}}}),
        ("slack", {"robots": {}, "bot_token": None}),
        ("slack", {"bot_token": "not-a-token-s3cr3t-value"}),
        ("slack", {"robots": {"ops": {"token": "s3cr3t-value"}}}),
        ("telegram", {"bot_token": "s3cr3t-value"}),
        ("telegram", {"robots": {"ops": {"token": "s3cr3t-value"}}}),
    ],
)
def test_bad_options_are_refused_without_showing_a_secret(
    configure: Any, kind: str, overrides: dict[str, Any]
) -> None:
    vendor = next(v for v in VENDORS if v.kind == kind)
    with vendor.make_fake() as fake:
        options = {**vendor.options(fake), **overrides}
        options = {k: v for k, v in options.items() if v is not None}
        rt = setup(configure, options)
        with pytest.raises(errors.InvalidConfig) as info:
            rt.providers.get(PROVIDER)
        assert "s3cr3t-value" not in str(info.value)


@pytest.mark.parametrize(
    ("kind", "given", "expected"),
    [
        ("dingtalk", "https://oapi.dingtalk.com/robot/send?access_token=abc123", "abc123"),
        ("feishu", "https://open.feishu.cn/open-apis/bot/v2/hook/hook-id-1", "hook-id-1"),
        ("wecom", "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=k-1", "k-1"),
        ("slack", "https://hooks.slack.com/services/T1/B2/xyz", "T1/B2/xyz"),
    ],
)
def test_a_robot_token_may_be_the_webhook_url_the_vendor_shows(
    configure: Any, kind: str, given: str, expected: str
) -> None:
    vendor = next(v for v in VENDORS if v.kind == kind)
    with vendor.make_fake() as fake:
        rt = setup(configure, {**vendor.options(fake), "robots": {"ops": {"token": given}}})
        robot = rt.providers.get(PROVIDER).options.robots["ops"]
        assert robot.token.get_secret_value() == expected


# --- transport ------------------------------------------------------------------------------


def test_a_timeout_is_ambiguous_and_retried(rt: Any, vendor: Vendor, fake: ChatFake) -> None:
    fake.script(Reply(hang_s=1.5))
    record = send_now(rt, add(vendor))
    assert record.status is Status.WAITING and record.retry == 1 and "may have been sent" in record.errmsg


def test_a_refused_connection_is_an_outage(configure: Any, vendor: Vendor) -> None:
    with vendor.make_fake() as gone:
        options = vendor.options(gone)
    rt = setup(configure, options)
    with pytest.raises(errors.ProviderOutage):
        rt.providers.get(PROVIDER).send(message(vendor))
