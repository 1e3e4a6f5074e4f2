"""The apprise provider of the chat channel (issue 33, point 5): the operator's named apprise
URLs as targets, through a real worker to a fake service (apprise's ``json://`` service posts
to it), each of apprise's outcomes judged, unknown targets and URLs apprise does not know
refused, and no URL (it carries a token) in an answer, an error or a log."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

import noti
from noti.core.record import Status
from noti.errors import InvalidConfig, InvalidInput
from tests.conftest import wait_until
from tests.fakes._server import FakeServer, Received, Reply

pytest.importorskip("apprise")

PROVIDER = "tail"
#: What the URL's path carries: a service's token, which must never be shown.
TOKEN = "hk_4f7a9c2e81d6"


class FakeService(FakeServer):
    """A service apprise's ``json://`` plugin posts to: ``{"title", "message", "type", …}``."""

    def verify(self, received: Received) -> Reply | None:
        if received.method != "POST" or received.path != f"/hook/{TOKEN}":
            return Reply(404, "no such hook")
        body = received.json()
        if body.get("version") != "1.0" or "message" not in body:
            return Reply(400, "bad payload")
        return None

    def succeed(self, received: Received) -> Reply:
        return Reply(200, {"ok": True})


@pytest.fixture
def fake() -> Iterator[FakeService]:
    with FakeService() as server:
        yield server


def _options(fake: FakeService, **more: Any) -> dict[str, Any]:
    host = fake.url.split("//", 1)[1]
    return {"kind": "apprise", "urls": {"ops": f"json://{host}/hook/{TOKEN}"}, **more}


@pytest.fixture
def rt(configure: Any, fake: FakeService) -> Any:
    return configure(
        providers={PROVIDER: _options(fake, timeout_s=1.0)}, channels={"chat": {"provider": PROVIDER}}
    )


def _send(rt: Any, record_id: str) -> Any:
    noti.send(record_id)
    return rt.store.get(record_id)


def test_a_message_is_posted_with_its_title_and_format(rt: Any, fake: FakeService) -> None:
    record = _send(rt, noti.notify_chat("ops", text="**db1** at 97%", title="Disk", format="markdown"))
    assert record.status is Status.DONE and record.sent_by == PROVIDER and record.msgid is None
    [posted] = fake.requests
    body = posted.json()
    assert (body["title"], body["type"]) == ("Disk", "info")
    assert "db1" in body["message"]


@pytest.mark.parametrize(
    ("reply", "errmsg"),
    [
        # apprise tells that it failed, not why: retried by the record's policy
        (Reply(500, "down"), "e.noti.delivery.temporary: tail: apprise could not post to 'ops'"),
        (Reply(400, "bad"), "e.noti.delivery.temporary: tail: apprise could not post to 'ops'"),
        (Reply(429, "slow down"), "e.noti.delivery.temporary: tail: apprise could not post to 'ops'"),
        # no answer within timeout_s: it may have been posted
        (
            Reply(200, {"ok": True}, hang_s=2.5),
            "e.noti.delivery.ambiguous: tail: apprise timed out after 1 s",
        ),
    ],
)
def test_each_of_apprises_outcomes_is_judged(rt: Any, fake: FakeService, reply: Reply, errmsg: str) -> None:
    fake.script(reply)
    record = _send(rt, noti.notify_chat("ops", text="hello", retry_policy="linear:0"))
    assert record.status is Status.WAITING and record.retry == 1
    assert record.errmsg.startswith(errmsg) and TOKEN not in record.errmsg
    again = _send(rt, record.id)  # the next attempt: posted
    assert again.status is Status.DONE and again.sent_by == PROVIDER


def test_a_timeout_is_ambiguous_a_failure_is_temporary(rt: Any, fake: FakeService) -> None:
    from noti.channels.chat.via_apprise import AppriseProvider
    from noti.errors import AmbiguousOutcome, TemporaryFailure
    from noti.providers import Message

    provider = rt.providers.get(PROVIDER)
    assert isinstance(provider, AppriseProvider)
    message = Message(id="r1", channel=noti.Channel.CHAT, target="ops", fields={"text": "x"})
    fake.script(Reply(503, "no"))
    with pytest.raises(TemporaryFailure) as failed:
        provider.send(message)
    assert not isinstance(failed.value, AmbiguousOutcome)
    fake.script(Reply(200, {"ok": True}, hang_s=2.5))
    with pytest.raises(AmbiguousOutcome):
        provider.send(message)


def test_an_unknown_target_is_refused_at_add_without_listing_the_configured_ones(
    rt: Any, fake: FakeService
) -> None:
    with pytest.raises(InvalidInput) as refused:
        noti.notify_chat("sales", text="hi")
    assert refused.value.code == "e.cmd.noti.add.badtarget"
    assert "ops" not in refused.value.message
    assert not rt.redis.keys("noti:rec:*") and not fake.requests


@pytest.mark.parametrize(
    ("urls", "problem"),
    [
        ({"ops": f"nosuchservice://{TOKEN}"}, "not one apprise understands"),
        ({"Ops": "json://127.0.0.1/x"}, "target name 'Ops'"),
        ({"ops": ""}, "not one apprise understands"),
    ],
)
def test_a_url_apprise_does_not_know_is_refused_when_the_settings_are_read(
    configure: Any, urls: dict[str, str], problem: str
) -> None:
    rt = configure(
        providers={PROVIDER: {"kind": "apprise", "urls": urls}}, channels={"chat": {"provider": PROVIDER}}
    )
    with pytest.raises(InvalidConfig) as refused:
        rt.providers.get(PROVIDER)
    assert problem in refused.value.message and TOKEN not in refused.value.message


def test_the_urls_never_print(rt: Any) -> None:
    provider = rt.providers.get(PROVIDER)
    assert TOKEN not in repr(provider.options) and TOKEN not in str(dict(provider.options))


@pytest.mark.slow
@pytest.mark.integration
def test_a_worker_process_posts_through_apprise(configure: Any, spawn_worker: Any, fake: FakeService) -> None:
    rt = configure(providers={PROVIDER: _options(fake)}, channels={"chat": {"provider": PROVIDER}})
    host = fake.url.split("//", 1)[1]
    config = (
        f'[channels.chat]\nprovider = "{PROVIDER}"\n[provider_grants]\n"*" = ["{PROVIDER}"]\n'
        f'[providers.{PROVIDER}]\nkind = "apprise"\n[providers.{PROVIDER}.urls]\n'
        f'ops = "json://{host}/hook/{TOKEN}"\n'
    )
    worker = spawn_worker(config, "-P", "threads", "-c", "2")
    ids = [
        noti.notify_chat("ops", text="deploy done"),
        noti.notify_chat("ops", text="*rollback*", format="markdown"),
    ]
    wait_until(lambda: all(rt.store.get(i).status is Status.DONE for i in ids), timeout=30)
    assert sorted(json.loads(r.body)["message"] for r in fake.requests) == sorted(
        ["deploy done", "*rollback*"]
    )
    assert TOKEN not in worker.output()
