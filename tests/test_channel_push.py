"""The push channel's providers (FCM HTTP v1 and APNs) against faithful fakes of both
vendors, each test run once per vendor (:mod:`tests.push_vendors`): delivery through a real
worker, every documented error, the shared credential, dead tokens, rate limits, options."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import noti
from noti import errors
from noti.channels.push import apns as apns_module
from noti.channels.push import fcm as fcm_module
from noti.core.record import Status, now_ms
from tests.conftest import wait_until
from tests.fakes._server import Reply
from tests.push_vendors import *  # noqa: F403 - the fixtures vendor, fake, rt, push_material
from tests.push_vendors import APNS, FCM, Vendor, add, message, provider, send_now
from tests.vendor_env import assert_record_after, nobody_listening

# --- delivery -------------------------------------------------------------------------------------


def test_a_push_carries_title_body_data_collapse_and_priority(rt: Any, vendor: Vendor, fake: Any) -> None:
    # given a level-3 push with every field
    record_id = add(vendor, title="Order 42", data={"order": "42"}, collapse="order-42", lv=3)
    # when it is sent
    record = send_now(rt, record_id)
    # then the vendor got every field, at high priority, and the record names its message id
    [sent] = vendor.sent(fake)
    assert sent["target"] == vendor.target() and sent["title"] == "Order 42"
    assert sent["body"] == "Your order shipped" and sent["data"] == {"order": "42"}
    assert sent["collapse"] == "order-42" and sent["high"] is True
    assert record.status is Status.DONE and record.sent_by == "p" and record.msgid == sent["msgid"].lower()
    assert rt.redis.hget(rt.keys.record(record_id), "noti_push_msgid") == record.msgid
    assert record.delivery == "delivered"  # no receipts: the vendor's acceptance is all there is


def test_each_push_request_is_a_client_span_with_the_device_token_masked(
    rt: Any, vendor: Vendor, fake: Any
) -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from noti import tracing

    made, exporter = TracerProvider(), InMemorySpanExporter()
    made.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.use_tracer_provider(made)
    try:
        record_id = add(vendor)
        send_now(rt, record_id)
    finally:
        tracing.use_tracer_provider(None)
        made.shutdown()
    posts = [
        s
        for s in exporter.get_finished_spans()
        if s.kind is trace.SpanKind.CLIENT and "/token" not in str(s.attributes["url.full"])
    ]
    [post] = posts  # the push itself (FCM's credential exchange is a span of its own)
    assert post.attributes["http.request.method"] == "POST"
    assert post.attributes["http.response.status_code"] == 200
    assert str(post.attributes["url.full"]).startswith(fake.url)
    assert vendor.target() not in str(post.attributes["url.full"])  # APNs: /3/device/***


def test_a_default_level_push_goes_at_normal_priority(rt: Any, vendor: Vendor, fake: Any) -> None:
    send_now(rt, add(vendor))
    [sent] = vendor.sent(fake)
    assert sent["high"] is False and sent["title"] is None and sent["data"] == {}


def test_apns_id_is_made_from_the_record_id_and_the_same_at_every_attempt(
    configure: Any, push_material: Any, tmp_path: Path
) -> None:
    with APNS.fake() as fake:
        rt = configure(providers={"p": APNS.options(fake, tmp_path)}, channels={"push": {"provider": "p"}})
        record_id = add(APNS)
        fake.script(Reply(500, {"reason": "InternalServerError"}))
        assert send_now(rt, record_id).status is Status.WAITING
        rt.redis.hset(rt.keys.record(record_id), "noti_timeout_at", 0)
        record = send_now(rt, record_id)
    # APNs does not de-duplicate: both attempts went out, under one apns-id
    ids = {r.headers["apns-id"] for r in fake.requests}
    assert ids == {apns_module.apns_id(record_id)} and len(fake.requests) == 2
    assert record.status is Status.DONE and record.msgid == apns_module.apns_id(record_id)


def test_fcm_sends_the_apns_headers_for_ios_devices(
    configure: Any, push_material: Any, tmp_path: Path
) -> None:
    with FCM.fake() as fake:
        rt = configure(
            providers={"p": FCM.options(fake, tmp_path, ttl_s=600)}, channels={"push": {"provider": "p"}}
        )
        before_s = now_ms() // 1000
        send_now(rt, add(FCM, collapse="c1", lv=5))
    [sent] = fake.sent
    headers = sent["apns"]["headers"]
    assert headers["apns-priority"] == "10" and headers["apns-collapse-id"] == "c1"
    assert before_s + 600 <= int(headers["apns-expiration"]) and sent["android"]["ttl"] == "600s"


# --- the shared credential ------------------------------------------------------------------------


def test_many_pushes_share_one_credential_cached_for_every_worker(rt: Any, vendor: Vendor, fake: Any) -> None:
    for n in range(5):
        assert provider(rt).send(message(vendor, f"01JPUSHRECORD00000000000{n}")).msgid
    assert vendor.credentials_made(fake) == 1 and vendor.calls(fake) == 5
    key = rt.keys.credential(vendor.kind, vendor.account())
    ttl = rt.redis.ttl(key)
    # FCM: expires_in (3599) less the 300 s grace; APNs: reused 50 minutes
    assert (3299 - 5 <= ttl <= 3299) if vendor is FCM else (3000 - 5 <= ttl <= 3000)


def test_a_refused_credential_is_replaced_at_once_and_the_push_sent(
    rt: Any, vendor: Vendor, fake: Any
) -> None:
    # given a cached credential the vendor now refuses as expired
    send_now(rt, add(vendor, 1))
    old = rt.redis.get(rt.keys.credential(vendor.kind, vendor.account()))
    vendor.expire_credential(fake, provider(rt))
    # when the next record is sent
    record = send_now(rt, add(vendor, 2))
    # then the credential was replaced and the push sent in the same attempt
    assert record.status is Status.DONE and record.retry == 0
    assert vendor.credentials_made(fake) == 2 and len(vendor.sent(fake)) == 2
    assert rt.redis.get(rt.keys.credential(vendor.kind, vendor.account())) not in (None, old)


def test_a_credential_refused_twice_is_a_configuration_error(rt: Any, vendor: Vendor, fake: Any) -> None:
    if vendor is APNS:  # a JWT refused as expired at once is a test's artefact: let APNs take a new one
        fake.token_update_spacing_s = 0
    fake.script(vendor.credential_refused(), vendor.credential_refused())
    record = send_now(rt, add(vendor))
    assert record.status is Status.FAILED and record.retry == 0
    assert "refused too" in record.errmsg and vendor.calls(fake) == 2


def test_a_refusal_of_an_old_credential_never_drops_a_newer_one(rt: Any, vendor: Vendor, fake: Any) -> None:
    provider(rt).send(message(vendor))
    key = rt.keys.credential(vendor.kind, vendor.account())
    old = rt.redis.get(key)
    rt.redis.set(key, "newer-credential-of-another-worker")
    credential = provider(rt)._token if vendor is FCM else provider(rt)._jwt
    assert credential.drop(old) is False
    assert rt.redis.get(key) == "newer-credential-of-another-worker"


def test_a_lost_apns_token_remade_within_20_minutes_is_an_outage(
    configure: Any, push_material: Any, tmp_path: Path
) -> None:
    with APNS.fake() as fake:
        rt = configure(providers={"p": APNS.options(fake, tmp_path)}, channels={"push": {"provider": "p"}})
        provider(rt).send(message(APNS))
        rt.redis.delete(rt.keys.credential("apns", APNS.account()))  # lost (a flush): a second JWT
        with pytest.raises(errors.ProviderOutage) as info:
            provider(rt).send(message(APNS, "01JPUSHRECORD000000000002"))
    assert info.value.vendor_code == "TooManyProviderTokenUpdates" and info.value.retry_after_s == 60.0


def test_a_send_gives_up_waiting_for_a_credential_another_worker_is_making(
    configure: Any, vendor: Vendor, fake: Any, tmp_path: Path
) -> None:
    rt = configure(
        providers={"p": vendor.options(fake, tmp_path, credential_wait_s=0.2)},
        channels={"push": {"provider": "p"}},
    )
    lock = rt.redis.lock(
        rt.keys.lock(f"cred:{vendor.kind}:{vendor.account()}"), timeout=10, thread_local=False
    )
    assert lock.acquire(blocking=False)
    with pytest.raises(errors.RateLimited) as info:  # nothing was sent: not an attempt
        provider(rt).send(message(vendor))
    lock.release()
    assert info.value.retry_after_s > 0 and vendor.calls(fake) == 0 and vendor.credentials_made(fake) == 0


# --- every documented error -----------------------------------------------------------------------

ERROR_CASES = [
    (FCM, code, cls) for code, cls in sorted(fcm_module.ERRORS.items()) if code != "UNSPECIFIED_ERROR"
]
ERROR_CASES += [(APNS, reason, cls) for reason, cls in sorted(apns_module.ERRORS.items())]


@pytest.mark.parametrize(
    ("vendor", "code", "expected"), ERROR_CASES, ids=lambda v: str(getattr(v, "__name__", v))
)
def test_each_documented_error_raises_its_class(
    rt: Any, vendor: Vendor, fake: Any, code: str, expected: type[errors.DeliveryError]
) -> None:
    fake.script(vendor.error(code))
    with pytest.raises(errors.DeliveryError) as info:
        provider(rt).send(message(vendor))
    assert type(info.value) is expected and info.value.vendor_code == code and info.value.provider == "p"
    assert code in info.value.message


@pytest.mark.parametrize(
    ("vendor", "code"),
    [(FCM, "INTERNAL"), (FCM, "UNAVAILABLE"), (FCM, "SENDER_ID_MISMATCH"), (FCM, "THIRD_PARTY_AUTH_ERROR")]
    + [(APNS, "InternalServerError"), (APNS, "ServiceUnavailable"), (APNS, "DeviceTokenNotForTopic")]
    + [(APNS, "TopicDisallowed"), (APNS, "IdleTimeout"), (APNS, "PayloadTooLarge")],
    ids=str,
)
def test_errors_decide_the_record(rt: Any, vendor: Vendor, fake: Any, code: str) -> None:
    expected = (fcm_module.ERRORS if vendor is FCM else apns_module.ERRORS)[code]
    record_id = add(vendor)
    fake.script(vendor.error(code))
    record = send_now(rt, record_id)
    assert_record_after(record, expected)
    assert code in record.errmsg
    assert not rt.store.is_suppressed("push", vendor.target())


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (Reply(502, "bad gateway"), errors.AmbiguousOutcome),
        (Reply(404, "not found"), errors.ProviderMisconfigured),
        (Reply(close=True), errors.AmbiguousOutcome),
    ],
    ids=["502", "404", "closed"],
)
def test_answers_that_are_not_the_vendors(
    rt: Any, vendor: Vendor, fake: Any, reply: Reply, expected: type[errors.DeliveryError]
) -> None:
    provider(rt).send(message(vendor))  # the credential is cached
    fake.script(reply)
    with pytest.raises(errors.DeliveryError) as info:
        provider(rt).send(message(vendor))
    assert type(info.value) is expected


@pytest.mark.parametrize("reply", [Reply(200, "<html>ok?</html>"), Reply(200, {"status": "queued"})])
def test_an_fcm_success_without_a_message_name_is_ambiguous(
    configure: Any, push_material: Any, tmp_path: Path, reply: Reply
) -> None:
    with FCM.fake() as fake:
        rt = configure(providers={"p": FCM.options(fake, tmp_path)}, channels={"push": {"provider": "p"}})
        fake.script(reply)
        with pytest.raises(errors.AmbiguousOutcome):
            provider(rt).send(message(FCM))


def test_a_timeout_is_ambiguous_and_counts_as_an_attempt(
    configure: Any, vendor: Vendor, fake: Any, tmp_path: Path
) -> None:
    rt = configure(
        providers={"p": vendor.options(fake, tmp_path, timeout_s=0.3)}, channels={"push": {"provider": "p"}}
    )
    provider(rt).send(message(vendor))  # the credential is cached
    fake.script(Reply(hang_s=1.0))
    record = send_now(rt, add(vendor))
    assert record.status is Status.WAITING and record.retry == 1 and "may have been sent" in record.errmsg


def test_connection_refused_is_an_outage(configure: Any, vendor: Vendor, fake: Any, tmp_path: Path) -> None:
    closed = nobody_listening("http" if vendor is FCM else "https")
    where = {"api_base": closed} if vendor is FCM else {"base_url": closed}
    rt = configure(
        providers={"p": vendor.options(fake, tmp_path, **where)}, channels={"push": {"provider": "p"}}
    )
    with pytest.raises(errors.ProviderOutage):
        provider(rt).send(message(vendor))


# --- dead tokens ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("vendor", "how"),
    [(FCM, "unregistered"), (FCM, "not-a-token"), (APNS, "unregistered"), (APNS, "other-environment")],
    ids=str,
)
def test_a_dead_token_is_suppressed_and_the_next_push_to_it_refused(
    rt: Any, vendor: Vendor, fake: Any, how: str
) -> None:
    # given the vendor says the token is dead
    target = vendor.target(7)
    if how == "unregistered":
        reason = vendor.kill(fake, target)
    elif how == "other-environment":
        fake.other_environment(target)
        reason = "BadDeviceToken"
    else:  # FCM: "The registration token is not a valid FCM registration token"
        target = "not-an-fcm-registration-token"
        reason = "INVALID_ARGUMENT"
    # when a push is sent to it
    first = send_now(rt, noti.notify_push(target, body="one"))
    # then the record is invalid naming the vendor's reason, and the token suppressed
    assert first.status is Status.INVALID and reason in first.errmsg
    assert first.errmsg.startswith("e.noti.delivery.optedout")
    assert rt.store.is_suppressed("push", target)
    calls = vendor.calls(fake)
    # and the next push to that token is refused without asking the vendor
    second = send_now(rt, noti.notify_push(target, body="two"))
    assert second.status is Status.INVALID and "opted out" in second.errmsg
    assert vendor.calls(fake) == calls
    # while another token of the same app still gets its push
    assert send_now(rt, add(vendor, 8)).status is Status.DONE


def test_an_invalid_argument_about_the_message_is_not_a_dead_token(
    configure: Any, push_material: Any, tmp_path: Path
) -> None:
    with FCM.fake() as fake:
        rt = configure(providers={"p": FCM.options(fake, tmp_path)}, channels={"push": {"provider": "p"}})
        fake.script(FCM.error("INVALID_ARGUMENT"))  # "Request contains an invalid argument."
        record = send_now(rt, add(FCM))
        assert record.status is Status.INVALID and not rt.store.is_suppressed("push", FCM.target())
        fake.script(
            Reply(
                400,
                {
                    "error": {
                        "code": 400,
                        "status": "INVALID_ARGUMENT",
                        "message": "bad",
                        "details": [
                            {
                                "@type": "type.googleapis.com/google.rpc.BadRequest",
                                "fieldViolations": [{"field": "message.token"}],
                            }
                        ],
                    }
                },
            )
        )
        with pytest.raises(errors.RecipientOptedOut):
            provider(rt).send(message(FCM))


# --- rate limits ----------------------------------------------------------------------------------


def test_a_rate_limit_waits_for_retry_after_without_counting_an_attempt(
    rt: Any, vendor: Vendor, fake: Any
) -> None:
    record_id = add(vendor)
    fake.script(vendor.rate_limited("7"))
    before = now_ms()
    record = send_now(rt, record_id)
    assert record.status is Status.WAITING and record.retry == 0
    assert record.lease_until_ms >= before + 7000
    with pytest.raises(errors.RateLimited) as info:
        fake.script(vendor.rate_limited("0"))
        provider(rt).send(message(vendor))
    assert info.value.retry_after_s == 1.0  # never at once: a wait is not an attempt


def test_the_vendors_own_device_limit_is_a_rate_limit(rt: Any, vendor: Vendor, fake: Any) -> None:
    fake.device_limit_per_min = 1
    provider(rt).send(message(vendor))
    with pytest.raises(errors.RateLimited) as info:
        provider(rt).send(message(vendor, "01JPUSHRECORD000000000002"))
    # FCM names the rest of the minute; APNs names no wait: rate_limit_wait_s (60)
    assert 1 <= info.value.retry_after_s <= 60


def test_a_provider_rate_limit_option_is_taken(
    configure: Any, vendor: Vendor, fake: Any, tmp_path: Path
) -> None:
    rt = configure(
        providers={"p": vendor.options(fake, tmp_path, rate_limit_per_s=50, rate_burst=5)},
        channels={"push": {"provider": "p"}},
    )
    assert provider(rt).options.rate_limit_per_s == 50
    assert send_now(rt, add(vendor)).status is Status.DONE


# --- a real worker ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_worker_process_delivers_pushes_and_refuses_a_dead_token(
    configure: Any, spawn_worker: Any, vendor: Vendor, fake: Any, tmp_path: Path
) -> None:
    # given `celery -A noti worker` configured for the vendor's fake
    options = vendor.options(fake, tmp_path)
    rt = configure(providers={"p": options}, channels={"push": {"provider": "p"}})
    worker = spawn_worker(vendor.toml(options), "-P", "threads", "-c", "4", name=f"push-{vendor}")
    dead = vendor.target(99)
    reason = vendor.kill(fake, dead)
    # when pushes are added, one of them to a dead token
    ids = [add(vendor, n, title=f"n{n}") for n in range(6)]
    dead_id = noti.notify_push(dead, body="to a dead token")
    # then the worker delivers them with one credential, and the dead token's record is invalid
    wait_until(
        lambda: rt.store.count(Status.DONE) == 6 and rt.store.get(dead_id).status is Status.INVALID, 60
    )
    assert sorted(p["title"] for p in vendor.sent(fake)) == [f"n{n}" for n in range(6)]
    assert vendor.credentials_made(fake) == 1
    assert reason in rt.store.get(dead_id).errmsg and rt.store.is_suppressed("push", dead)
    # and the next push to it is refused by the worker without a request to the vendor
    calls = vendor.calls(fake)
    again = noti.notify_push(dead, body="again")
    wait_until(lambda: rt.store.get(again).status is Status.INVALID, 30)
    assert vendor.calls(fake) == calls
    assert {rt.store.get(i).msgid for i in ids} == {p["msgid"].lower() for p in vendor.sent(fake)}
    assert vendor.secret(fake) not in worker.output()
