"""Tracing with OpenTelemetry, when it is installed (the ``otel`` extra) and something records.

One trace runs from the caller's ``notify()`` (or HTTP request) through the ``noti.deliver``
message to the provider's HTTP request, and on to the receipt (docs/howto/tracing.md):

============================  =========  ====================================================
span                          kind       where
============================  =========  ====================================================
``noti.notify``,              producer   :class:`~noti.sending.notifier.Notifier` ``add``,
``noti.notify_many``                     :func:`~noti.sending.bulk.add_many`
``noti.deliver``              consumer   one per record and attempt: the ``noti.deliver`` task
                                         (task mode) or the batch worker (one per record)
``POST`` (the HTTP method)    client     each provider HTTP request (:mod:`noti.providers._http`,
                                         :mod:`noti.providers._http11`)
``POST /v1/...``              server     each request of the HTTP API (:mod:`noti.http.traces`)
``noti.receipts``,            internal   a pushed or polled batch of receipts; each report's
``noti.receipt``                         span is a child of its record's trace
============================  =========  ====================================================

The W3C trace context (``traceparent``, ``tracestate``) crosses the message in its headers,
and is kept on the record (``noti_trace``) so a delayed or retried record's message, published
later by the pump, and its receipts continue the same trace.

What it costs: nothing of OpenTelemetry is imported by noti unless tracing is asked for
(``NOTI_TRACING=otlp``, :func:`use_tracer_provider`): no tracer provider can be set in a
process before ``opentelemetry.trace`` is imported there, so :func:`tracer` looks that module
up in ``sys.modules`` (a dictionary look-up: no import attempt) and answers None without it.
With the API imported but no provider set (FastAPI imports it), it answers None after one
look at the global provider. None means no span, no header, no record field.
``NOTI_TRACING=off`` turns it all off; ``otlp`` has noti set the SDK up itself
(:func:`configure`).
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
import importlib.metadata
import importlib.util
import logging
import sys
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, Tracer, TracerProvider

__all__ = [
    "NULL",
    "active",
    "carrier",
    "client_call",
    "configure",
    "current_text",
    "delivering",
    "extracted",
    "from_text",
    "installed",
    "propagates_to",
    "provider_call",
    "start_delivery",
    "to_text",
    "tracer",
    "use_tracer_provider",
]

log = logging.getLogger(__name__)

#: ``opentelemetry.trace``, once this process has imported it (see the module docstring).
_trace: Any = None
_UNKNOWN = object()
_installed: bool | None = None

#: A context manager that does nothing, returned by the helpers when nothing is traced.
NULL: contextlib.nullcontext[None] = contextlib.nullcontext()

#: The headers a trace context travels in (W3C Trace Context), and their longest value read.
TRACE_HEADERS = ("traceparent", "tracestate")
_HEADER_MAX = 512

_mode = "auto"
_propagate = "webhook"
_override: tuple[Any, Any] | None = None  # (provider, its tracer)
_cached: tuple[Any, Any] | None = None  # the global provider and its tracer
_w3c: Any = None

#: The record and channel being delivered, and the provider being called, for client spans.
_delivery: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar(
    "noti_delivery", default=None
)
_provider: contextvars.ContextVar[str | None] = contextvars.ContextVar("noti_provider", default=None)


def installed() -> bool:
    """Whether the OpenTelemetry API can be imported here (looked for once, not imported)."""
    global _installed
    if _installed is None:
        try:
            _installed = importlib.util.find_spec("opentelemetry.trace") is not None
        except ImportError:
            _installed = False
    return _installed


def _import_api() -> Any:
    global _trace
    if _trace is None:
        _trace = importlib.import_module("opentelemetry.trace")
    return _trace


def configure(*, mode: str = "auto", propagate: str = "webhook", service: str = "noti") -> None:
    """Apply ``NOTI_TRACING`` (``auto``: trace when the process has a tracer provider,
    ``off``: never, ``otlp``: set the SDK up to export OTLP over HTTP, configured by the
    standard ``OTEL_*`` variables, unless the process has a provider already) and
    ``NOTI_TRACING_PROPAGATE`` (which provider requests carry the trace context headers:
    ``webhook``, ``all`` or ``none``). Called by :class:`noti.sending.runtime.Runtime`.
    """
    global _mode, _propagate
    _mode, _propagate = mode, propagate
    if mode == "otlp" and installed() and tracer() is None:
        _install_otlp(service)


def _install_otlp(service: str) -> None:
    """An SDK tracer provider with a batch processor and the OTLP/HTTP exporter (both read
    ``OTEL_EXPORTER_OTLP_*``; the resource reads ``OTEL_SERVICE_NAME`` and
    ``OTEL_RESOURCE_ATTRIBUTES``, the sampler ``OTEL_TRACES_SAMPLER``)."""
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider as SdkProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        log.warning("NOTI_TRACING=otlp needs the otel extra (pip install 'noti[otel]'): %s", exc)
        return
    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: service}))  # OTEL_SERVICE_NAME wins
    provider = SdkProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    _import_api().set_tracer_provider(provider)


def use_tracer_provider(provider: TracerProvider | None) -> None:
    """Make noti's spans with ``provider`` instead of the global one (None: the global one
    again): for tests and applications that keep a provider of their own."""
    global _override
    if provider is not None:
        _import_api()
    _override = None if provider is None else (provider, provider.get_tracer("noti", _version()))


def tracer() -> Tracer | None:
    """The tracer noti's spans are made with; None when nothing would record them (no
    OpenTelemetry, ``NOTI_TRACING=off``, or no tracer provider set in this process)."""
    global _cached, _trace
    if _mode == "off":
        return None
    if _override is not None:
        return _override[1]  # type: ignore[no-any-return]
    api = _trace
    if api is None:
        api = sys.modules.get("opentelemetry.trace")
        if api is None:  # not imported: no provider can have been set
            return None
        api.get_tracer_provider()  # once: it sets the one OTEL_PYTHON_TRACER_PROVIDER names
        _trace = api
    # the API's global, None until a provider is set: get_tracer_provider() would look in the
    # environment at each call, ten times the cost of this whole check
    provider: Any = getattr(api, "_TRACER_PROVIDER", _UNKNOWN)
    if provider is None:
        return None
    if provider is _UNKNOWN:  # an API without that global
        provider = api.get_tracer_provider()
    cached = _cached
    if cached is not None and cached[0] is provider:
        return cached[1]  # type: ignore[no-any-return]
    if isinstance(provider, (api.ProxyTracerProvider, api.NoOpTracerProvider)):
        return None
    found = provider.get_tracer("noti", _version())
    _cached = (provider, found)
    return found  # type: ignore[no-any-return]


def active() -> bool:
    """Whether noti traces now (see :func:`tracer`)."""
    return tracer() is not None


def _version() -> str:
    try:
        return importlib.metadata.version("noti")
    except importlib.metadata.PackageNotFoundError:
        return "0"


def _propagator() -> Any:
    global _w3c
    if _w3c is None:
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        _w3c = TraceContextTextMapPropagator()
    return _w3c


# --- the trace context on messages and records ------------------------------------------------


_last: tuple[Any, dict[str, str] | None, str | None] = (None, None, None)


def carrier() -> dict[str, str] | None:
    """The W3C trace context of the current span (``traceparent``, and ``tracestate`` when
    it has one), or None when nothing is traced or there is no span. Made once per span (a
    bulk call asks for every record it builds)."""
    return _current()[1]


def current_text() -> str | None:
    """:func:`carrier` as a record keeps it (:func:`to_text`)."""
    return _current()[2]


def _current() -> tuple[Any, dict[str, str] | None, str | None]:
    global _last
    if tracer() is None:
        return (None, None, None)
    current = _trace.get_current_span()
    last = _last
    if last[0] is current:
        return last
    headers: dict[str, str] = {}
    _propagator().inject(headers, context=_trace.set_span_in_context(current))
    found = (current, headers or None, to_text(headers))
    _last = found
    return found


def to_text(headers: Mapping[str, str] | None) -> str | None:
    """A trace context as kept on a record (``noti_trace``): the ``traceparent``, then the
    ``tracestate`` after a line break when there is one."""
    if not headers or "traceparent" not in headers:
        return None
    state = headers.get("tracestate")
    return headers["traceparent"] + ("\n" + state if state else "")


def from_text(text: str | None) -> dict[str, str] | None:
    """The headers of a trace context kept by :func:`to_text`."""
    if not text:
        return None
    parent, _, state = text.partition("\n")
    return {"traceparent": parent, "tracestate": state} if state else {"traceparent": parent}


def extracted(headers: Mapping[str, Any] | Any) -> Context | None:
    """The context a W3C trace context continues (``headers`` may be a mapping or an object
    with the headers as attributes, as Celery's task request); None when there is none or it
    is malformed: then a new trace starts. Never raises."""
    if headers is None or _trace is None:
        return None
    get = headers.get if isinstance(headers, Mapping) else lambda name: getattr(headers, name, None)
    found = {}
    for name in TRACE_HEADERS:
        value = get(name)
        if isinstance(value, str) and 0 < len(value) <= _HEADER_MAX:
            found[name] = value
    if "traceparent" not in found:
        return None
    try:
        context = _propagator().extract(found)
        if not _trace.get_current_span(context).get_span_context().is_valid:
            return None
    except Exception:  # a malformed header is no reason to fail a delivery
        return None
    return context  # type: ignore[no-any-return]


# --- spans ------------------------------------------------------------------------------------


def _kind(name: str) -> Any:
    return getattr(_trace.SpanKind, name.upper())


def span(
    name: str,
    *,
    kind: str = "internal",
    attributes: Mapping[str, Any] | None = None,
    parent: Context | None = None,
    links: tuple[Context | None, ...] = (),
) -> contextlib.AbstractContextManager[Span | None]:
    """A span made current while the block runs (:data:`NULL` when nothing is traced); an
    exception escaping it is recorded on it. ``parent``: the context it continues (default:
    the current one); ``links``: spans it is linked to (None: the current one)."""
    found = tracer()
    if found is None:
        return NULL
    return found.start_as_current_span(name, **_options(kind, attributes, parent, links))


def start(
    name: str,
    *,
    kind: str = "internal",
    attributes: Mapping[str, Any] | None = None,
    parent: Context | None = None,
    links: tuple[Context | None, ...] = (),
) -> Span | None:
    """A span started and not made current (the caller ends it), or None when nothing is traced."""
    found = tracer()
    if found is None:
        return None
    return found.start_span(name, **_options(kind, attributes, parent, links))


def _options(
    kind: str, attributes: Mapping[str, Any] | None, parent: Context | None, links: tuple[Context | None, ...]
) -> dict[str, Any]:
    """What :func:`span` and :func:`start` give the tracer; ``links`` keeps the valid ones."""
    linked = [_trace.get_current_span(c).get_span_context() for c in links]
    return {
        "context": parent,
        "kind": _kind(kind),
        "attributes": dict(attributes or {}),
        "links": [_trace.Link(c) for c in linked if c.is_valid],
    }


def context_of(started: Span) -> Context:
    """The context whose current span is ``started`` (to parent or link others to it)."""
    return _trace.set_span_in_context(started)  # type: ignore[no-any-return]


def fail(started: Span, description: str) -> None:
    """Mark ``started`` as failed."""
    started.set_status(_trace.Status(_trace.StatusCode.ERROR, description[:200]))


def _delivery_attributes(record_id: str, channel: str | None, task_id: str | None) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "messaging.system": "celery",
        "messaging.operation.type": "process",
        "messaging.message.id": task_id or record_id,
        "noti.record_id": record_id,
    }
    if channel:
        attributes["noti.channel"] = channel
        attributes["messaging.destination.name"] = f"noti.{channel}"
    return attributes


def delivering(
    headers: Mapping[str, Any] | Any, record_id: str, channel: str | None, *, task_id: str | None = None
) -> contextlib.AbstractContextManager[Span | None]:
    """The ``noti.deliver`` consumer span of one record's attempt, continuing the trace its
    message carries (``headers``), current while the block runs; the provider calls made in
    it are its children and carry the record id and channel. :data:`NULL` when nothing is
    traced."""
    found = tracer()
    if found is None:
        return NULL
    return _delivering(found, headers, record_id, channel, task_id)


@contextlib.contextmanager
def _delivering(
    found: Tracer, headers: Any, record_id: str, channel: str | None, task_id: str | None
) -> Iterator[Span]:
    token = _delivery.set((record_id, channel or ""))
    try:
        with found.start_as_current_span(
            "noti.deliver",
            context=extracted(headers),
            kind=_trace.SpanKind.CONSUMER,
            attributes=_delivery_attributes(record_id, channel, task_id),
        ) as current:
            yield current
    finally:
        _delivery.reset(token)


def start_delivery(
    headers: Mapping[str, Any] | Any, record_id: str, channel: str | None, *, task_id: str | None = None
) -> Span | None:
    """:func:`delivering`'s span, started and not made current (several records sent
    together, by a provider that makes no request of its own); the caller ends it."""
    found = tracer()
    if found is None:
        return None
    return found.start_span(
        "noti.deliver",
        context=extracted(headers),
        kind=_trace.SpanKind.CONSUMER,
        attributes=_delivery_attributes(record_id, channel, task_id),
    )


def provider_call(provider: str) -> contextvars.Token[str | None] | None:
    """Note that ``provider`` makes the HTTP requests that follow (their client spans say
    so); pass what it returns to :func:`provider_done`. Nothing when nothing is traced."""
    if tracer() is None:
        return None
    return _provider.set(provider)


def provider_done(token: contextvars.Token[str | None] | None) -> None:
    if token is not None:
        _provider.reset(token)


def propagates_to() -> bool:
    """Whether the provider request being made carries the trace context headers
    (``NOTI_TRACING_PROPAGATE``: only a webhook's by default; vendors' APIs need not learn
    the caller's trace ids)."""
    if _propagate == "all":
        return True
    delivery = _delivery.get()
    return _propagate == "webhook" and delivery is not None and delivery[1] == "webhook"


def client_attributes(method: str, url: str, host: str, port: int | None) -> dict[str, Any]:
    """A provider request's client span attributes: the HTTP ones (``url`` without its
    query or credentials: the caller masks them) and noti's record, channel and provider."""
    attributes: dict[str, Any] = {"http.request.method": method, "url.full": url, "server.address": host}
    if port is not None:
        attributes["server.port"] = port
    delivery = _delivery.get()
    if delivery is not None:
        attributes["noti.record_id"] = delivery[0]
        if delivery[1]:
            attributes["noti.channel"] = delivery[1]
    provider = _provider.get()
    if provider is not None:
        attributes["noti.provider"] = provider
    return attributes


class ClientCall:
    """One provider HTTP request under its client span (:func:`client_call`): the headers it
    carries besides its own (the trace context, when it is propagated), and its answer."""

    def __init__(self, started: Span | None) -> None:
        self.span = started
        self.headers: dict[str, str] = {}

    def answered(self, status: int) -> None:
        """Note the HTTP status on the span (4xx and 5xx fail it)."""
        if self.span is None:
            return
        self.span.set_attribute("http.response.status_code", status)
        if status >= 400:
            self.span.set_attribute("error.type", str(status))
            fail(self.span, f"HTTP {status}")


@contextlib.contextmanager
def client_call(method: str, url: str, host: str, port: int | None) -> Iterator[ClientCall]:
    """The client span of one provider HTTP request (attributes: :func:`client_attributes`),
    for both of noti's HTTP clients (httpx's transport and :mod:`noti.providers._http11`); an
    exception escaping the request is its ``error.type``."""
    attributes = client_attributes(method, url, host, port)
    with span(method, kind="client", attributes=attributes) as started:
        call = ClientCall(started)
        if propagates_to():
            inject_headers(call.headers)
        try:
            yield call
        except Exception as exc:
            if started is not None:
                started.set_attribute("error.type", type(exc).__qualname__)
            raise


def inject_headers(headers: dict[str, str]) -> None:
    """Add the current trace context to an outgoing request's ``headers`` (the process's
    propagators: W3C by default, ``OTEL_PROPAGATORS`` otherwise)."""
    from opentelemetry import propagate

    propagate.inject(headers)


def incoming(headers: Mapping[str, str]) -> Context | None:
    """The context an incoming HTTP request's headers continue (the process's propagators);
    None when they carry none or a malformed one. Never raises."""
    if _trace is None:
        return None
    try:
        from opentelemetry import propagate

        context = propagate.extract(headers)
        if not _trace.get_current_span(context).get_span_context().is_valid:
            return None
        return context
    except Exception:
        return None
