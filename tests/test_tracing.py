"""OpenTelemetry tracing (noti/tracing.py, the ``otel`` extra): one trace from ``notify()`` or
an HTTP request, through the ``noti.deliver`` message (``traceparent`` in its headers, and on
the record for what the pump publishes later), to the provider's HTTP request and the
receipt. Real Redis, real workers (in this process, spans in the SDK's in-memory exporter;
in a subprocess, spans exported over OTLP/HTTP to a receiver here that decodes them), and a
real ``noti serve`` exporting its request spans to that receiver."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ExportedSpan
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import noti
from noti import tracing
from noti.celery.publish import Publisher
from noti.celery.queues import PRIORITY_STEPS, priority_for_level, queue_key
from noti.core.record import Channel, Status
from noti.providers import _http
from tests.conftest import ADMIN, ALICE, ROOT, serving_api, wait_until
from tests.fakes.twilio import TwilioFake, error_reply, twilio_options
from tests.fakes.webhook import SECRET, WebhookReceiver, hook_options
from tests.servers import ApiProcess
from tests.vendor_env import fake_fixtures

PHONE = "+14155550123"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
#: An exported (OTLP) span's kind when it is a server's.
SERVER = ExportedSpan.SpanKind.SPAN_KIND_SERVER

server, twilio = fake_fixtures(lambda: TwilioFake(), name="twilio")


@pytest.fixture
def provider() -> Iterator[TracerProvider]:
    """An SDK tracer provider of this test's (not the global one), which noti uses."""
    made = TracerProvider()
    tracing.use_tracer_provider(made)
    yield made
    tracing.use_tracer_provider(None)
    made.shutdown()


@pytest.fixture
def spans(provider: TracerProvider) -> InMemorySpanExporter:
    """noti's spans (and the application's, :func:`caller`), kept in memory."""
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter


@pytest.fixture
def caller(provider: TracerProvider) -> Any:
    """The application's own tracer, on the provider noti uses here."""
    return provider.get_tracer("the-app")


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as running:
        yield running


def finished(exporter: InMemorySpanExporter, name: str, count: int) -> list[ReadableSpan]:
    """The ``count`` finished spans named ``name``, waited for."""
    return wait_until(
        lambda: (
            (found := [s for s in exporter.get_finished_spans() if s.name == name])
            and len(found) >= count
            and found
        )
    )


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def queued(rt: Any, channel: Channel) -> list[dict[str, Any]]:
    """The envelopes of the delivery messages waiting in ``channel``'s queue (every step)."""
    lists = [queue_key(channel.queue, step) for step in PRIORITY_STEPS]
    return [json.loads(m) for key in lists for m in rt.redis.lrange(key, 0, -1)]


# --- notify() to the vendor's request --------------------------------------------------------


@pytest.mark.parametrize("mode", ["task", "batch"])
def test_notify_to_the_vendors_request_is_one_trace_across_a_retry(
    configure: Any,
    start_worker_now: Any,
    twilio: TwilioFake,
    spans: InMemorySpanExporter,
    mode: str,
    caller: Any,
) -> None:
    # given Twilio behind an SMS channel, refusing the first send with a rate limit (the
    # record then waits in the delayed set and the pump publishes its message again)
    rt = configure(
        providers={"tw": twilio_options(twilio)}, channels={"sms": {"provider": "tw"}}, delivery_mode=mode
    )
    twilio.script(error_reply(20429, headers={"retry-after": "0"}))
    with start_worker_now():
        # when the application notifies inside a span of its own
        with caller.start_as_current_span("checkout") as checkout:
            record_id = noti.notify_sms(PHONE, "traced", lv=3)
        wait_until(lambda: rt.store.get(record_id).status is Status.DONE)
        delivers = finished(spans, "noti.deliver", 2)
        requests = finished(spans, "POST", 2)
    # then every span is in the caller's trace: checkout > noti.notify > noti.deliver > POST
    trace_id = checkout.get_span_context().trace_id
    [notify] = [s for s in spans.get_finished_spans() if s.name == "noti.notify"]
    assert {s.context.trace_id for s in [notify, *delivers, *requests]} == {trace_id}
    assert parent_of(notify) == checkout.get_span_context().span_id
    assert notify.kind is trace.SpanKind.PRODUCER and notify.attributes["noti.record_id"] == record_id
    # each attempt (the first one, and the one the pump published later) continues it
    assert [parent_of(d) for d in delivers] == [notify.context.span_id] * 2
    assert {d.kind for d in delivers} == {trace.SpanKind.CONSUMER}
    assert [d.attributes["noti.outcome"] for d in delivers] == ["waiting", "done"]
    assert all(d.attributes["noti.record_id"] == record_id for d in delivers)
    assert all(d.attributes["noti.channel"] == "sms" for d in delivers)
    # and each provider request is a client span of its attempt, with noti's attributes
    assert sorted(parent_of(r) or 0 for r in requests) == sorted(d.context.span_id for d in delivers)
    for request in requests:
        assert request.kind is trace.SpanKind.CLIENT
        assert request.attributes["noti.record_id"] == record_id
        assert request.attributes["noti.channel"] == "sms"
        assert request.attributes["noti.provider"] == "tw"
        assert request.attributes["http.request.method"] == "POST"
        assert str(request.attributes["url.full"]).startswith(twilio.url)
        assert request.attributes["server.address"] == "127.0.0.1"
    assert sorted(r.attributes["http.response.status_code"] for r in requests) == [201, 429]
    # the vendor's API is not told the trace (only webhooks are, by default)
    assert len(twilio.requests) == 2 and not any("traceparent" in r.headers for r in twilio.requests)
    # the record keeps its trace context, for its later messages and receipts
    stored = rt.redis.hget(rt.keys.record(record_id), "noti_trace")
    assert stored.startswith(f"00-{trace_id:032x}-{notify.context.span_id:016x}-")


@pytest.mark.parametrize("mode", ["task", "batch"])
def test_a_webhooks_receiver_is_told_the_trace(
    configure: Any, start_worker_now: Any, receiver: WebhookReceiver, spans: InMemorySpanExporter, mode: str
) -> None:
    # given a webhook provider (the batch worker sends it on its send loop, HTTP/1.1 of noti's)
    rt = configure(
        providers={"hook": hook_options(receiver)},
        channels={"webhook": {"provider": "hook"}},
        delivery_mode=mode,
    )
    with start_worker_now():
        record_id = noti.notify_webhook(receiver.url + "/", content={"n": 1})
        wait_until(lambda: rt.store.get(record_id).status is Status.DONE)
        [request] = finished(spans, "POST", 1)
    [notify] = [s for s in spans.get_finished_spans() if s.name == "noti.notify"]
    [deliver] = [s for s in spans.get_finished_spans() if s.name == "noti.deliver"]
    # then the receiver's request carries the client span's context, in the notify's trace
    [received] = receiver.requests
    assert received.headers["traceparent"].startswith(
        f"00-{notify.context.trace_id:032x}-{request.context.span_id:016x}-"
    )
    assert parent_of(request) == deliver.context.span_id and parent_of(deliver) == notify.context.span_id
    assert request.attributes["noti.channel"] == "webhook" and request.attributes["noti.provider"] == "hook"
    # (the Standard Webhooks signature still verifies: trace headers are not signed)
    assert receiver.refusals == []


def test_a_batch_of_records_is_a_deliver_span_each_in_its_own_trace(
    configure: Any, start_worker_now: Any, spans: InMemorySpanExporter, caller: Any
) -> None:
    # given 5 notifications, each made in a trace of its own, queued before a batch worker runs
    rt = configure(delivery_mode="batch")
    made = {}
    for n in range(5):
        with caller.start_as_current_span(f"request {n}") as request:
            made[noti.notify_sms(PHONE, f"n{n}")] = request.get_span_context().trace_id
    # when one batch worker fetches and sends them together (the sandbox: on its consumer thread)
    with start_worker_now():
        wait_until(lambda: all(rt.store.get(i).status is Status.DONE for i in made))
        delivers = finished(spans, "noti.deliver", 5)
    # then each record's deliver span continues its own trace
    assert {d.attributes["noti.record_id"]: d.context.trace_id for d in delivers} == made
    assert {d.attributes["noti.outcome"] for d in delivers} == {"done"}


# --- a message's trace headers -------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        {"traceparent": "garbage"},
        {"traceparent": 42},
        {"traceparent": ["00-" + TRACE_ID + "-" + PARENT_ID + "-01"]},
        {"traceparent": "00-" + TRACE_ID + "-" + PARENT_ID + "-01", "tracestate": {"a": 1}},
        {},
        None,
    ],
)
def test_a_message_whose_trace_headers_are_malformed_starts_a_new_trace(
    spans: InMemorySpanExporter, headers: Any
) -> None:
    # a foreign producer's message may carry anything in its headers
    with tracing.delivering(headers, "r1", "sms") as span:
        assert span is not None
    [deliver] = spans.get_finished_spans()
    assert deliver.parent is None or f"{deliver.context.trace_id:032x}" == TRACE_ID


# --- what goes to vendors, and what a client span shows --------------------------------------


@pytest.mark.parametrize(
    ("propagate", "told"), [("webhook", {"webhook"}), ("all", {"webhook", "sms"}), ("none", set())]
)
def test_which_provider_requests_carry_the_trace_context(
    configure: Any, spans: InMemorySpanExporter, propagate: str, told: set[str]
) -> None:
    configure(tracing_propagate=propagate)
    seen: dict[str, str | None] = {}

    def answer(request: httpx.Request) -> httpx.Response:
        seen[request.url.path.strip("/")] = request.headers.get("traceparent")
        return httpx.Response(200)

    with httpx.Client(transport=_http.traced(httpx.MockTransport(answer))) as client:
        for channel in ("webhook", "sms"):
            with tracing.delivering({}, "r1", channel), _http.map_transport_errors("p"):
                client.post(f"http://user:pw@vendor.test:8443/{channel}?access_token=s3cret")
    assert {channel for channel, header in seen.items() if header} == told
    requests = [s for s in spans.get_finished_spans() if s.kind is trace.SpanKind.CLIENT]
    assert [r.attributes["url.full"] for r in requests] == [
        "http://vendor.test:8443/webhook",
        "http://vendor.test:8443/sms",
    ]
    assert {r.attributes["noti.provider"] for r in requests} == {"p"}


def test_the_template_envelope_with_a_traceparent_is_the_one_built_field_by_field(rt: Any) -> None:
    publisher = Publisher.for_settings(rt.settings, noti.celery.app.app)
    trace_context = {"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"}
    queue, fast = publisher.message("01JREC", Channel.SMS, 3, trace=trace_context)
    priority = priority_for_level(3)
    slow = json.loads(
        publisher._envelope("01JREC", Channel.SMS, priority, task_id="01JREC", trace=trace_context)
    )
    fast_envelope = json.loads(fast)
    for envelope in (fast_envelope, slow):
        envelope["properties"].pop("delivery_tag")
    assert fast_envelope == slow and fast_envelope["headers"]["traceparent"] == trace_context["traceparent"]
    # a tracestate (any printable characters) goes the field-by-field way, escaped
    _, with_state = publisher.message(
        "01JREC", Channel.SMS, 3, trace={**trace_context, "tracestate": 'a="b\\'}
    )
    assert json.loads(with_state)["headers"]["tracestate"] == 'a="b\\'


# --- receipts -------------------------------------------------------------------------------


def test_the_lost_message_sweep_and_a_redrive_publish_in_the_records_own_trace(
    rt: Any, spans: InMemorySpanExporter
) -> None:
    from noti.core.record import now_ms
    from noti.sending.upkeep import sweep_lost
    from tests.admin_client import failed_record

    own = f"00-{TRACE_ID}-{PARENT_ID}-01"
    lists = [queue_key(Channel.SMS.queue, step) for step in PRIORITY_STEPS]
    publisher = Publisher.for_settings(rt.settings, noti.celery.app.app)
    # given a waiting record made in a trace, whose delivery message was lost
    lost = noti.notify_sms(PHONE, "lost")
    rt.redis.delete(*lists)
    rt.redis.hset(rt.keys.record(lost), "noti_trace", own)
    # when the sweep (a beat job: no span of its own) queues it again
    assert sweep_lost(rt, publisher, older_than_s=0, at_ms=now_ms() + 3_600_000) == 1
    # then its message carries the record's trace, not a new one
    [envelope] = queued(rt, Channel.SMS)
    assert envelope["headers"]["id"] == lost and envelope["headers"]["traceparent"] == own
    # and a dead letter's retry goes on in its record's trace too
    rt.redis.delete(*lists)
    failed = failed_record(rt, ALICE)
    rt.redis.hset(rt.keys.record(failed), "noti_trace", own)
    noti.api.redrive().retry(failed, user=ALICE)
    [envelope] = queued(rt, Channel.SMS)
    assert envelope["headers"]["id"] == failed and envelope["headers"]["traceparent"] == own


def test_a_receipt_is_a_span_in_its_records_trace(rt: Any, spans: InMemorySpanExporter, caller: Any) -> None:
    # given a record sent through the sandbox vendor that takes signed receipts
    from noti.delivery.state import Delivery, DeliveryReport

    with caller.start_as_current_span("checkout") as checkout:
        record_id = noti.notify_sms(PHONE, "hi")
    list(noti.send(record_id))
    # when its vendor's report is applied (as a push or a poll applies it)
    from noti.sending.poll import _apply

    report = DeliveryReport("sandbox", Delivery.DELIVERED, record_id=record_id)
    with caller.start_as_current_span("poll") as poll:
        _apply(rt, [report], answered_by="sandbox")
    # then its span is a child of the record's notify span, linked to the poll's
    [receipt] = [s for s in spans.get_finished_spans() if s.name == "noti.receipt"]
    [notify] = [s for s in spans.get_finished_spans() if s.name == "noti.notify"]
    assert receipt.context.trace_id == checkout.get_span_context().trace_id
    assert parent_of(receipt) == notify.context.span_id
    assert [link.context.trace_id for link in receipt.links] == [poll.get_span_context().trace_id]
    assert receipt.attributes["noti.record_id"] == record_id
    assert receipt.attributes["noti.receipt.result"] in ("applied", "foreign", "unsent", "stale")


# --- OTLP: a worker process exporting to a receiver -----------------------------------------


class _OtlpReceiver(ThreadingHTTPServer):
    """An OTLP/HTTP trace receiver: decodes each ``/v1/traces`` export (protobuf)."""

    def __init__(self) -> None:
        self.spans: list[Any] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
                body = self.rfile.read(int(self.headers["content-length"]))
                if self.headers.get("content-encoding") == "gzip":
                    body = gzip.decompress(body)
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                for resource_spans in request.resource_spans:
                    service = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
                    for scope_spans in resource_spans.scope_spans:
                        receiver.spans += [(service, s) for s in scope_spans.spans]
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@contextlib.contextmanager
def _receiving() -> Iterator[_OtlpReceiver]:
    running = _OtlpReceiver()
    thread = threading.Thread(target=running.serve_forever, daemon=True)
    thread.start()
    try:
        yield running
    finally:
        running.shutdown()
        running.server_close()


@pytest.fixture
def otlp() -> Iterator[_OtlpReceiver]:
    with _receiving() as running:
        yield running


def otlp_env(receiver: _OtlpReceiver, service: str) -> dict[str, str]:
    """What a noti process is told to export its spans to ``receiver`` as ``service``:
    ``NOTI_TRACING=otlp`` and the standard ``OTEL_*`` variables (docs/howto/tracing.md)."""
    return {
        "NOTI_TRACING": "otlp",
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
        "OTEL_SERVICE_NAME": service,
        "OTEL_BSP_SCHEDULE_DELAY": "100",
    }


@pytest.mark.slow
def test_a_worker_process_exports_its_spans_over_otlp_in_the_callers_trace(
    configure: Any,
    spawn_worker: Any,
    receiver: WebhookReceiver,
    otlp: _OtlpReceiver,
    spans: InMemorySpanExporter,
) -> None:
    # given a worker process told NOTI_TRACING=otlp and where the collector is (OTEL_*)
    destinations = json.dumps([receiver.url + "/"])
    config = (
        '[channels.webhook]\nprovider = "hook"\n'
        f'[providers.hook]\nkind = "webhook"\nsecret = "{SECRET}"\nallow_private = true\n'
        f"destinations = {destinations}\n"
        '[provider_grants]\n"*" = ["hook"]\n'
    )
    worker = spawn_worker(
        config,
        env=otlp_env(otlp, "noti-worker-test"),
    )
    rt = configure(
        providers={"hook": hook_options(receiver)},
        channels={"webhook": {"provider": "hook"}},
    )
    # when this process notifies (its own spans in memory)
    record_id = noti.notify_webhook(receiver.url + "/", content={"n": 1})
    wait_until(lambda: rt.store.get(record_id).status is Status.DONE, timeout=30)
    # then the worker's spans reach the receiver, in the trace of this process's notify
    [notify] = [s for s in spans.get_finished_spans() if s.name == "noti.notify"]
    exported = wait_until(
        lambda: (
            (found := {s.name: (svc, s) for svc, s in otlp.spans})
            and {"noti.deliver", "POST"} <= found.keys()
            and found
        ),
        timeout=30,
    )
    service, deliver = exported["noti.deliver"]
    _, request = exported["POST"]
    assert service["service.name"] == "noti-worker-test", worker.output()
    assert deliver.trace_id == request.trace_id == notify.context.trace_id.to_bytes(16, "big")
    assert deliver.parent_span_id == notify.context.span_id.to_bytes(8, "big")
    assert request.parent_span_id == deliver.span_id
    attributes = {a.key: a.value.string_value for a in request.attributes}
    assert attributes["noti.record_id"] == record_id and attributes["noti.provider"] == "hook"
    assert (
        receiver.requests[0].headers["traceparent"].split("-")[1]
        == notify.context.trace_id.to_bytes(16, "big").hex()
    )


# --- the HTTP API: a noti serve process exporting over OTLP ---------------------------------


@pytest.fixture(scope="module")
def traced_api(redis_url: str) -> Iterator[tuple[ApiProcess, _OtlpReceiver]]:
    """``noti serve`` on the test database, told NOTI_TRACING=otlp, exporting to a receiver here."""
    with _receiving() as receiver:
        environ = {name: value for name, value in os.environ.items() if not name.startswith("OTEL_")}
        env = {"NOTI_CHANNELS__SMS__PROVIDER": "sandbox", **otlp_env(receiver, "noti-api-test")}
        with serving_api(redis_url, environ=environ, **env) as api:
            yield api, receiver


def _values(span: Any) -> dict[str, Any]:
    """An exported span's attributes, each as the value it carries (string, int, ...)."""
    return {a.key: getattr(a.value, a.value.WhichOneof("value")) for a in span.attributes}


def _post(api: ApiProcess, rt: Any, headers: dict[str, str]) -> str:
    """POST one SMS to ``api`` as alice with ``headers``; the new record's id (answered 201)."""
    plain = str(rt.tokens.add(ALICE, acting=ADMIN)[0])
    answer = httpx.post(
        f"{api.url}/v1/notifications",
        json={"type": "sms", "to": PHONE, "text": "hi"},
        headers={"Authorization": f"Bearer {plain}", **headers},
        timeout=10.0,
    )
    assert answer.status_code == 201, answer.text
    return str(answer.json()["id"])


def _request_spans(receiver: _OtlpReceiver, record_id: str) -> list[Any]:
    """The exported spans from the ``noti.notify_many`` that made ``record_id`` up through its
    parents, as far as they have reached ``receiver``: the notify span first, the request's
    outermost span last (FastAPI's own server span, on a FastAPI that makes one, is around
    noti's: the first server span up the chain is noti's)."""
    by_id = {s.span_id: s for _, s in receiver.spans}
    chain = [
        s
        for s in by_id.values()
        if s.name == "noti.notify_many" and _values(s).get("noti.record_id") == record_id
    ]
    while chain and chain[-1].parent_span_id in by_id:
        chain.append(by_id[chain[-1].parent_span_id])
    return chain


def _server_span(chain: list[Any]) -> Any:
    return next((s for s in chain if s.kind == SERVER), None)


@pytest.mark.slow
def test_an_http_request_with_a_traceparent_continues_the_callers_trace(
    traced_api: tuple[ApiProcess, _OtlpReceiver], rt: Any
) -> None:
    # given a caller whose trace is TRACE_ID, its span PARENT_ID
    api, receiver = traced_api
    # when it posts a notification to noti serve
    record_id = _post(api, rt, {"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"})
    # then the server process exports the request's server span, continuing the caller's
    # trace, with the notify span under it
    chain = wait_until(
        lambda: (found := _request_spans(receiver, record_id)) and _server_span(found) and found
    )
    notify, server_span = chain[0], _server_span(chain)
    assert server_span.trace_id.hex() == TRACE_ID and server_span.parent_span_id.hex() == PARENT_ID
    assert server_span.name == "POST /v1/notifications"
    attributes = _values(server_span)
    assert attributes["http.route"] == "/v1/notifications"
    assert attributes["http.response.status_code"] == 201
    assert {s.trace_id.hex() for s in chain} == {TRACE_ID}
    services = {service["service.name"] for service, s in receiver.spans if s.trace_id.hex() == TRACE_ID}
    assert services == {"noti-api-test"}, api.output()
    # and the queued message carries it on, as does the record
    [message] = queued(rt, Channel.SMS)
    assert message["headers"]["traceparent"] == f"00-{TRACE_ID}-{notify.span_id.hex()}-01"  # its flags
    assert rt.redis.hget(rt.keys.record(record_id), "noti_trace").startswith(
        f"00-{TRACE_ID}-{notify.span_id.hex()}-"
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "traceparent",
    [
        "garbage",
        f"00-{'0' * 32}-{PARENT_ID}-01",  # an all-zero trace id is invalid
        f"00-{TRACE_ID}-{PARENT_ID}",  # no flags
        f"00-{TRACE_ID.upper()}-{PARENT_ID}-01",
        "x" * 5000,
    ],
)
def test_a_malformed_traceparent_starts_a_new_trace(
    traced_api: tuple[ApiProcess, _OtlpReceiver], rt: Any, traceparent: str
) -> None:
    api, receiver = traced_api
    # when a request carries a malformed trace context, it is still answered 201
    record_id = _post(api, rt, {"traceparent": traceparent, "tracestate": "=,=,"})
    # then its spans, waited for up to the outermost (no parent; the caller's span would fail below),
    chain = wait_until(
        lambda: (
            (found := _request_spans(receiver, record_id))
            and found[-1].parent_span_id in (b"", bytes.fromhex(PARENT_ID))
            and found
        )
    )
    notify, server_span, outermost = chain[0], _server_span(chain), chain[-1]
    # are a new trace started in this server: the outermost is a server span with no parent
    assert outermost.kind == SERVER and outermost.parent_span_id == b"", api.output()
    assert server_span.name == "POST /v1/notifications"
    assert server_span.trace_id.hex() not in (TRACE_ID, "0" * 32)
    assert {s.trace_id for s in chain} == {server_span.trace_id}
    # which the notification carries on
    assert rt.redis.hget(rt.keys.record(record_id), "noti_trace").startswith(
        f"00-{server_span.trace_id.hex()}-{notify.span_id.hex()}-"
    )


# --- without OpenTelemetry -------------------------------------------------------------------

_WITHOUT = """
import json, sys

class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ModuleNotFoundError(f"No module named {name!r}")

if sys.argv[1] == "uninstalled":
    sys.meta_path.insert(0, Refuse())
import noti, noti.tracing
from noti.sending.runtime import get_runtime

assert noti.tracing.installed() is (sys.argv[1] == "installed")
assert noti.tracing.tracer() is None
record_id = noti.notify_sms("+14155550123", "untraced")
rt = get_runtime()
[message] = [m for key in rt.redis.keys("noti.sms*") for m in rt.redis.lrange(key, 0, -1)]
results = [r.mark for r in noti.send(record_id)]
print(json.dumps({
    "headers": json.loads(message)["headers"],
    "trace": rt.redis.hget(rt.keys.record(record_id), "noti_trace"),
    "sent": results,
    "otel": sorted(m for m in sys.modules if m.startswith("opentelemetry")),
}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("otel", ["uninstalled", "installed"])
def test_without_opentelemetry_noti_works_and_injects_nothing(rt: Any, redis_url: str, otel: str) -> None:
    # given a process where OpenTelemetry cannot be imported (or is installed, unused)
    env = {
        **os.environ,
        "NOTI_REDIS_URL": redis_url,
        "NOTI_CHANNELS__SMS__PROVIDER": "sandbox",
        "NOTI_USER": ALICE,
    }
    # when it notifies and sends
    run = subprocess.run(
        [sys.executable, "-c", _WITHOUT, otel], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    # then it works and its message carries no trace context (uninstalled: nothing of
    # OpenTelemetry was imported; installed, redis-py 8 imports it for its own metrics)
    assert run.returncode == 0, run.stderr
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    assert "traceparent" not in seen["headers"] and seen["trace"] is None
    assert seen["sent"] == ["OK"]
    assert seen["otel"] == [] or otel == "installed"


def test_with_the_api_and_no_provider_nothing_is_traced(rt: Any) -> None:
    # FastAPI brings the OpenTelemetry API along: without a tracer provider nothing is made
    assert tracing.installed() and tracing.tracer() is None
    record_id = noti.notify_sms(PHONE, "untraced")
    [message] = queued(rt, Channel.SMS)
    assert "traceparent" not in message["headers"]
    assert rt.redis.hget(rt.keys.record(record_id), "noti_trace") is None


def test_the_stored_trace_context_round_trips() -> None:
    headers = {"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01", "tracestate": "a=1,b=2"}
    assert tracing.from_text(tracing.to_text(headers)) == headers
    assert tracing.from_text(tracing.to_text({"traceparent": headers["traceparent"]})) == {
        "traceparent": headers["traceparent"]
    }
    assert tracing.to_text(None) is None and tracing.from_text("") is None
