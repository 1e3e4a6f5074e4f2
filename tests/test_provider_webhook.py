"""The webhook provider against a receiver that verifies Standard Webhooks signatures."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click
import httpx
import pytest

import noti
from noti import errors
from noti.access.signing import SigningKeys
from noti.channels.webhook.provider import ERRORS, WebhookProvider, sign
from noti.cli import main
from noti.core.record import Channel, Status
from noti.providers.base import Message
from tests.clirunner import cli_runner
from tests.conftest import ALICE, wait_until
from tests.fakes._server import Reply
from tests.fakes.webhook import SECRET, WebhookReceiver
from tests.vendor_env import assert_record_after, fake_fixtures, nobody_listening, send_now

KEY = base64.b64decode(SECRET.removeprefix("whsec_"))
OTHER_SECRET = "whsec_" + base64.b64encode(b"another key of 24 bytes!").decode()
CONTENT = {"event": "order.paid", "order": 42, "buyer": "张三", "items": [1, 2]}


@pytest.fixture(autouse=True, params=["httpx", "http11"])
def http_client(request: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test runs with each client: ``send`` (httpx, blocking) and ``send_async``
    (noti.providers._http11, what batch-mode workers use) must behave the same."""
    if request.param == "http11":
        from noti.sending.loop import send_loop

        send_async = WebhookProvider.send_async

        def send(self: WebhookProvider, message: Message) -> Any:
            return send_loop().submit(send_async(self, message)).result(30)

        monkeypatch.setattr(WebhookProvider, "send", send)
    return str(request.param)


server, receiver = fake_fixtures(WebhookReceiver, name="receiver")


@pytest.fixture
def configure_hook(configure: Any, server: WebhookReceiver) -> Any:
    """``configure`` with one provider ``hook`` of these options, the receiver its operator's
    destination, granted to everyone (it reaches loopback)."""

    def configure_hook(**overrides: Any) -> Any:
        overrides.setdefault("destinations", [server.url + "/"])
        return configure(
            providers={"hook": options(**overrides)},
            channels={"webhook": {"provider": "hook"}},
            provider_grants={"*": ["hook"]},
        )

    return configure_hook


def options(**overrides: Any) -> dict[str, Any]:
    return {"kind": "webhook", "secret": SECRET, "allow_private": True, "timeout_s": 0.5, **overrides}


@pytest.fixture
def rt(configure: Any, server: WebhookReceiver) -> Any:
    # the receiver is the operator's: its requests are signed with the provider's secret;
    # alice has a signing key of her own for the URLs she chooses
    mine = [server.url + "/"]
    found = configure(
        providers={
            "hook": options(destinations=mine),
            "strict": options(allow_private=False, destinations=mine),
        },
        provider_grants={"*": ["hook", "strict"]},
        channels={"webhook": {"provider": "hook"}},
        retry_max=5,
        retry_seconds=0.1,
    )
    SigningKeys(found.redis, found.keys, found.settings).add(ALICE, acting=ALICE)
    return found


def provider(rt: Any, name: str = "hook") -> WebhookProvider:
    instance = rt.providers.get(name)
    assert isinstance(instance, WebhookProvider)
    return instance


def url(receiver: WebhookReceiver, path: str = "/hooks/orders") -> str:
    return receiver.url + path


def message(target: str, record_id: str = "rec1") -> Message:
    return Message(
        id=record_id, channel=Channel.WEBHOOK, target=target, fields={"content": CONTENT}, creator=ALICE
    )


def send_record(rt: Any, target: str, **kwargs: Any) -> Any:
    """Add a webhook, send it once in this process, and return the record."""
    return send_now(rt, noti.notify_webhook(target, content=CONTENT, **kwargs))


@contextmanager
def garbage_server() -> Iterator[str]:
    """A server that answers one request with bytes that are not HTTP."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()

    def serve() -> None:
        conn, _ = sock.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"THIS IS NOT HTTP\r\n\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/hook"
    finally:
        sock.close()


def signed_headers(webhook_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    digest = hmac.new(KEY, f"{webhook_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return {
        "content-type": "application/json",
        "webhook-id": webhook_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": "v1," + base64.b64encode(digest).decode(),
    }


# --- the classification table ----------------------------------------------------------------

CASES = [
    # (ERRORS key, reply, class, retry_after_s)
    ("3xx", Reply(301, "", {"location": "https://elsewhere.example/"}), errors.PermanentFailure, None),
    ("3xx", Reply(302, "", {"location": "/other"}), errors.PermanentFailure, None),
    ("3xx", Reply(307, ""), errors.PermanentFailure, None),
    ("3xx", Reply(308, ""), errors.PermanentFailure, None),
    ("408", Reply(408, "request timeout"), errors.TemporaryFailure, None),
    ("410", Reply(410, "gone"), errors.RecipientOptedOut, None),
    ("425", Reply(425, "", {"retry-after": "3"}), errors.TemporaryFailure, 3.0),
    ("429", Reply(429, "", {"retry-after": "120"}), errors.RateLimited, 120.0),
    ("429", Reply(429, "slow down"), errors.RateLimited, 30.0),
    ("429", Reply(429, "", {"retry-after": "0"}), errors.RateLimited, 1.0),
    ("4xx", Reply(400, {"error": "bad"}), errors.PermanentFailure, None),
    ("4xx", Reply(401, ""), errors.PermanentFailure, None),
    ("4xx", Reply(403, ""), errors.PermanentFailure, None),
    ("4xx", Reply(404, "no such hook"), errors.PermanentFailure, None),
    ("4xx", Reply(422, ""), errors.PermanentFailure, None),
    ("5xx", Reply(500, "<html>oops</html>"), errors.TemporaryFailure, None),
    ("5xx", Reply(502, ""), errors.TemporaryFailure, None),
    ("5xx", Reply(503, "", {"retry-after": "9"}), errors.TemporaryFailure, 9.0),
    ("5xx", Reply(504, ""), errors.TemporaryFailure, None),
    ("abort-message", Reply(503, "", {"webhook-delivery": "abort-message"}), errors.PermanentFailure, None),
    ("abort-message", Reply(429, "", {"webhook-delivery": "abort-message"}), errors.PermanentFailure, None),
]


def test_the_cases_cover_the_whole_table() -> None:
    assert {key for key, *_ in CASES} == set(ERRORS)


@pytest.mark.parametrize(("key", "reply", "expected", "retry_after_s"), CASES)
def test_each_receiver_answer_raises_its_class_and_sets_the_record(
    rt: Any,
    receiver: WebhookReceiver,
    key: str,
    reply: Reply,
    expected: type[errors.DeliveryError],
    retry_after_s: float | None,
) -> None:
    # given the receiver answering this way
    receiver.script(reply)
    # when the provider sends
    with pytest.raises(errors.DeliveryError) as info:
        provider(rt).send(message(url(receiver)))
    # then the class is the table's, and the status is kept as the vendor code
    assert type(info.value) is expected and ERRORS[key] is expected
    assert info.value.vendor_code == f"http.{reply.status}" and info.value.provider == "hook"
    if isinstance(info.value, errors.TemporaryFailure):
        assert info.value.retry_after_s == retry_after_s
    # and through the sender the record ends as the class says
    receiver.script(reply)
    record = send_record(rt, url(receiver))
    assert_record_after(record, expected)
    assert rt.store.is_suppressed("webhook", url(receiver)) is (expected is errors.RecipientOptedOut)


def test_a_redirect_is_not_followed(rt: Any, receiver: WebhookReceiver) -> None:
    receiver.script(Reply(302, "", {"location": url(receiver, "/elsewhere")}))
    with pytest.raises(errors.PermanentFailure) as info:
        provider(rt).send(message(url(receiver)))
    assert "redirects are not followed" in str(info.value)
    assert [r.path for r in receiver.requests] == ["/hooks/orders"]


# --- success -----------------------------------------------------------------------------------


def test_credentials_in_the_target_are_sent_as_basic_auth(rt: Any, receiver: WebhookReceiver) -> None:
    # both clients send them the same way (httpx's rule)
    record = send_record(rt, url(receiver).replace("http://", "http://hook%40user:s3cr%3At@"))
    assert record.status is Status.DONE
    expected = "Basic " + base64.b64encode(b"hook@user:s3cr:t").decode()
    assert receiver.requests[0].headers["authorization"] == expected


@pytest.mark.parametrize("status", [200, 201, 202, 204])
def test_any_2xx_is_delivered(rt: Any, receiver: WebhookReceiver, status: int) -> None:
    receiver.script(Reply(status, b"" if status == 204 else "not json, and that is fine"))
    receipt = provider(rt).send(message(url(receiver), record_id="rec-2xx"))
    assert receipt.provider == "hook" and receipt.msgid == "rec-2xx" and receipt.raw == f"HTTP {status}"


def test_the_exact_body_is_signed_and_the_record_is_done(
    configure_hook: Any, receiver: WebhookReceiver
) -> None:
    # given a provider with extra headers, one of them a credential
    headers = {"Authorization": "Bearer s3cr3t-t0ken", "X-Tenant": "acme"}
    rt = configure_hook(headers=headers)
    # when a webhook is sent
    record = send_record(rt, url(receiver))
    # then the receiver verified it and got compact UTF-8 JSON signed over those exact bytes
    assert record.status is Status.DONE and record.sent_by == "hook" and record.msgid == record.id
    [request] = receiver.requests
    assert receiver.ids == [record.id] and receiver.refusals == []
    assert request.body == json.dumps(CONTENT, ensure_ascii=False, separators=(",", ":")).encode()
    assert request.json() == CONTENT
    assert request.headers["content-type"] == "application/json"
    assert request.headers["webhook-id"] == record.id
    timestamp = request.headers["webhook-timestamp"]
    assert timestamp.isdigit() and abs(int(timestamp) - time.time()) < 300
    assert (
        request.headers["webhook-signature"]
        == signed_headers(record.id, int(timestamp), request.body)["webhook-signature"]
    )
    assert request.headers["authorization"] == "Bearer s3cr3t-t0ken" and request.headers["x-tenant"] == "acme"
    # and neither the secret nor the credential header shows anywhere
    for text in (repr(provider(rt)), repr(provider(rt).options), str(provider(rt).options)):
        assert SECRET not in text and "s3cr3t-t0ken" not in text


def test_sign_matches_the_standard_webhooks_library() -> None:
    from datetime import UTC, datetime

    from standardwebhooks import Webhook

    body = b'{"a":"\xc3\xa9"}'
    expected = Webhook(SECRET).sign("msg_1", datetime.fromtimestamp(1700000000, UTC), body.decode())
    assert sign(KEY, "msg_1", 1700000000, body) == expected


# --- the receiver fake is faithful -----------------------------------------------------------------


def test_the_receiver_enforces_the_five_minute_window(receiver: WebhookReceiver) -> None:
    body = b'{"x":1}'
    now = int(time.time())
    old = httpx.post(url(receiver), content=body, headers=signed_headers("old", now - 310, body))
    future = httpx.post(url(receiver), content=body, headers=signed_headers("new", now + 310, body))
    fresh = httpx.post(url(receiver), content=body, headers=signed_headers("ok", now - 240, body))
    assert (old.status_code, future.status_code, fresh.status_code) == (400, 400, 200)
    assert receiver.ids == ["ok"]
    assert "too old" in receiver.refusals[0] and "too new" in receiver.refusals[1]


def test_the_receiver_refuses_a_body_changed_after_signing(receiver: WebhookReceiver) -> None:
    headers = signed_headers("m1", int(time.time()), b'{"x":1}')
    response = httpx.post(url(receiver), content=b'{"x": 1}', headers=headers)
    assert response.status_code == 400 and receiver.ids == []


def test_a_rotated_secret_signs_with_each_so_old_and_new_receivers_verify(configure_hook: Any) -> None:
    # given a provider rotating from SECRET (old) to OTHER_SECRET (new): the new one first
    for receiver_secret in (SECRET, OTHER_SECRET):
        with WebhookReceiver(receiver_secret) as receiver:
            assert isinstance(receiver, WebhookReceiver)
            rt = configure_hook(secret=[OTHER_SECRET, SECRET], destinations=[receiver.url + "/"])
            # when it sends, then a receiver holding either secret verifies it
            provider(rt).send(message(url(receiver)))
            assert receiver.refusals == [] and receiver.ids == ["rec1"]
            [request] = receiver.requests
            header = request.headers["webhook-signature"]
            stamp = int(request.headers["webhook-timestamp"])
            new_key = base64.b64decode(OTHER_SECRET.removeprefix("whsec_"))
            old_key = base64.b64decode(SECRET.removeprefix("whsec_"))
            # one signature per secret, space-separated, the first secret's first
            signed = [sign(key, "rec1", stamp, request.body) for key in (new_key, old_key)]
            assert (
                header == " ".join(signed) and sign([new_key, old_key], "rec1", stamp, request.body) == header
            )
    # and a list of one is the same as the bare secret
    with WebhookReceiver(SECRET) as receiver:
        single = configure_hook(secret=[SECRET], destinations=[receiver.url + "/"])
        provider(single).send(message(url(receiver)))
        assert len(receiver.requests[0].headers["webhook-signature"].split(" ")) == 1


def test_a_wrong_secret_is_refused_by_the_receiver(configure_hook: Any, receiver: WebhookReceiver) -> None:
    rt = configure_hook(secret=OTHER_SECRET)
    with pytest.raises(errors.PermanentFailure) as info:
        provider(rt).send(message(url(receiver)))
    assert info.value.vendor_code == "http.400"
    assert receiver.ids == [] and "No matching signature found" in receiver.refusals[0]
    assert send_record(rt, url(receiver)).status is Status.INVALID


# --- transport failures --------------------------------------------------------------------------


def test_a_timeout_is_ambiguous_and_retried_on_the_same_id(rt: Any, receiver: WebhookReceiver) -> None:
    # given a receiver that takes longer than the timeout (0.5 s) to answer
    receiver.script(Reply(hang_s=1.5))
    # when the record is sent
    record = send_record(rt, url(receiver))
    # then it may have been received: waiting, the attempt counted, the id was seen
    assert record.status is Status.WAITING and record.retry == 1
    assert "may have been sent" in record.errmsg
    assert receiver.ids == [record.id]


def test_a_closed_connection_is_ambiguous(rt: Any, receiver: WebhookReceiver) -> None:
    receiver.script(Reply(close=True))
    with pytest.raises(errors.AmbiguousOutcome):
        provider(rt).send(message(url(receiver)))


def test_an_answer_that_is_not_http_is_ambiguous(rt: Any) -> None:
    with garbage_server() as target, pytest.raises(errors.AmbiguousOutcome):
        provider(rt).send(message(target))


def test_a_refused_connection_is_a_provider_outage(rt: Any) -> None:
    with pytest.raises(errors.ProviderOutage):
        provider(rt).send(message(nobody_listening(path="/hook")))
    record = send_record(rt, nobody_listening(path="/hook"))
    assert record.status is Status.WAITING and record.retry == 1


def test_a_name_that_does_not_resolve_is_a_provider_outage(rt: Any) -> None:
    for name in ("hook", "strict"):
        with pytest.raises(errors.ProviderOutage):
            provider(rt, name).send(message("http://no-such-host.invalid/hook"))


# --- SSRF ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "target",
    [
        "http://127.0.0.1:8080/hook",
        "http://localhost/hook",
        "http://api.localhost/hook",
        "http://10.1.2.3/hook",
        "http://192.168.0.10/hook",
        "http://169.254.169.254/latest/meta-data/",
        "http://100.64.0.1/hook",
        "http://[::1]/hook",
        "http://[::ffff:127.0.0.1]/hook",
        "http://[fe80::1]/hook",
        "http://0.0.0.0/hook",
        "http://2130706433/hook",
        "http://127.1/hook",
    ],
)
def test_non_public_targets_are_refused_when_added(rt: Any, target: str) -> None:
    with pytest.raises(errors.InvalidInput) as info:
        noti.notify_webhook(target, content=CONTENT, provider="strict")
    assert info.value.code == "e.cmd.noti.add.badtarget"
    assert rt.store.count() == 0


def test_public_targets_are_accepted_when_added(rt: Any) -> None:
    for target in ("https://hooks.example.com/x", "http://8.8.8.8/hook", "https://[2001:4860:4860::8888]/"):
        noti.notify_webhook(target, content=CONTENT, provider="strict")
    assert rt.store.count() == 3


def test_a_non_public_target_is_refused_again_at_send_time(rt: Any, receiver: WebhookReceiver) -> None:
    # a message that skipped the add-time check (or whose name now resolves elsewhere)
    with pytest.raises(errors.PermanentFailure) as info:
        provider(rt, "strict").send(message(url(receiver)))
    assert info.value.vendor_code == "ssrf" and "127.0.0.1" in str(info.value)
    assert receiver.requests == []


# --- options ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides",
    [
        {"secret": "not-a-whsec-secret"},
        {"secret": "whsec_!!!not base64!!!"},
        {"secret": "whsec_" + base64.b64encode(b"16 bytes is weak").decode()},
        {"headers": {"webhook-id": "mine"}},
        {"headers": {"Content-Type": "text/plain"}},
        {"headers": {"Bad Name": "x"}},
        {"headers": {"X-Split": "a\r\nInjected: yes"}},
        {"allow_redirects": True},
        {"secret": []},
        {"secret": [SECRET, SECRET]},
        {"secret": [SECRET, "whsec_!!!not base64!!!"]},
        {"secret": [SECRET, 42]},
        {
            "secret": [
                SECRET,
                OTHER_SECRET,
                *(f"whsec_{base64.b64encode(bytes([n]) * 24).decode()}" for n in range(4)),
            ]
        },
        {"secret": {"new": SECRET}},
    ],
)
def test_bad_options_are_refused_without_showing_the_secret(
    configure_hook: Any, overrides: dict[str, Any]
) -> None:
    rt = configure_hook(**overrides)
    with pytest.raises(errors.InvalidConfig) as info:
        rt.providers.get("hook")
    assert SECRET not in str(info.value)
    secrets = overrides.get("secret", [])
    for secret in (
        secrets.values() if isinstance(secrets, dict) else [secrets] if isinstance(secrets, str) else secrets
    ):
        assert str(secret) not in str(info.value)


def test_a_missing_secret_is_refused(configure: Any) -> None:
    rt = configure(providers={"hook": {"kind": "webhook"}}, channels={"webhook": {"provider": "hook"}})
    with pytest.raises(errors.InvalidConfig, match="secret"):
        rt.providers.get("hook")


# --- a real worker, and the command line ------------------------------------------------------------


def run_cli(*args: str) -> Any:
    @click.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
    @click.pass_context
    def entry(ctx: click.Context) -> None:
        main(list(ctx.args))

    return cli_runner().invoke(entry, ["--as", ALICE, *args], catch_exceptions=False)


def test_a_webhook_added_on_the_command_line_is_delivered_by_a_worker(
    rt: Any, receiver: WebhookReceiver, worker: Any
) -> None:
    # given a receiver that fails the first attempt
    receiver.script(Reply(503, "warming up"))
    # when `noti add webhook -to URL -content JSON` adds one and a real worker delivers it
    content = '{"event": "deploy.done", "by": "张三", "ok": true}'
    result = run_cli("add", "webhook", "-to", url(receiver), "-content", content)
    assert result.exit_code == 0, result.output
    record_id = result.stdout.strip()
    record = wait_until(lambda: (r := rt.store.get(record_id)).status != Status.WAITING and r)
    # then it is done after one retry, and both attempts carried the same webhook-id
    assert record.status is Status.DONE and record.retry == 1 and record.sent_by == "hook"
    assert receiver.ids == [record_id, record_id]
    assert [r.json() for r in receiver.requests] == [json.loads(content)] * 2


def test_the_checked_address_is_the_one_connected_to(rt: Any) -> None:
    """DNS rebinding: the request goes to the address that was checked, the name stays in
    Host (and TLS SNI), so a second DNS answer cannot point it elsewhere."""
    from noti.channels.webhook.provider import WebhookProvider, resolve_public
    from noti.core.record import Channel
    from noti.providers.base import Message

    provider = WebhookProvider(
        "hook", {"secret": "whsec_" + base64.b64encode(b"k" * 32).decode()}, redis=rt.redis, keys=rt.keys
    )
    for target, url, host in (
        ("https://93.184.216.34:8443/in?x=1", "https://93.184.216.34:8443/in?x=1", "93.184.216.34:8443"),
        ("http://[2606:4700::1111]/in", "http://[2606:4700::1111]/in", "[2606:4700::1111]"),
    ):
        message = Message(id="r1", channel=Channel.WEBHOOK, target=target, fields={"content": {}})
        assert provider._pin_public_address(message) == (url, {"host": host})
    assert resolve_public("127.0.0.1", 80)[0] is not None
    assert resolve_public("93.184.216.34", 80) == (None, "93.184.216.34")


@pytest.mark.parametrize("value", ["Bearer TOPSECRET ", " lead", "tab\tend\t", "bell\x07", "é"])
def test_header_values_http_would_refuse_are_refused_in_the_settings(rt: Any, value: str) -> None:
    with pytest.raises(errors.InvalidConfig) as info:
        WebhookProvider(
            "hook",
            {"secret": "whsec_" + base64.b64encode(b"k" * 32).decode(), "headers": {"Authorization": value}},
            redis=rt.redis,
            keys=rt.keys,
        )
    assert "TOPSECRET" not in info.value.message
