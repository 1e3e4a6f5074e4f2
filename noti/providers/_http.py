"""HTTP for providers: one pooled ``httpx.Client`` per process, and transport errors mapped
once to the outcome classes (shared/providers.md §0).

==============================================  ===================  ======================
what happened                                   raised               why
==============================================  ===================  ======================
could not connect (refused, DNS, connect         ProviderOutage       nothing was sent: try
timeout)                                                              the next provider
the request was sent, then a timeout, a broken   AmbiguousOutcome     it may have been
connection or an undecodable body                                     processed: no failover
a request the HTTP library refuses to encode     ProviderMisconfigured our settings are wrong
any other transport error                        TemporaryFailure     retried per the policy
an answer that is not the JSON expected          AmbiguousOutcome     the vendor may have
                                                                      acted on it
==============================================  ===================  ======================

When noti traces (:mod:`noti.tracing`), each request is a client span (:func:`traced`: the
method, the URL without its query and with path secrets masked, the status) carrying the
record, channel and provider it is made for; the provider is named by
:func:`map_transport_errors`, which every provider's request passes through.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Protocol

import httpx

from noti import tracing
from noti.errors import AmbiguousOutcome, ProviderMisconfigured, ProviderOutage, TemporaryFailure

__all__ = [
    "BASE_URL",
    "cannot_connect",
    "client",
    "join_path",
    "json_object",
    "map_transport_errors",
    "no_complete_answer",
    "retry_after_s",
    "span_url",
    "traced",
    "transport_failed",
    "unencodable",
]

#: Query parameters that carry credentials in some vendors' URLs (WeChat's access_token,
#: Aliyun's signature, DingTalk's sign): httpx logs request URLs at INFO, so these are masked
#: in its log.
CREDENTIAL_PARAMS = frozenset(
    {"access_token", "token", "Signature", "AccessKeyId", "signature", "key", "sign"}
)
#: What vendors carry in a URL's *path* that must not reach a log (a bot token, a webhook's
#: secret, a device token): patterns whose first group is kept and the rest of the match
#: masked, added by the providers that need them (:func:`mask_in_path`).
_PATH_SECRETS: list[re.Pattern[str]] = []


def mask_in_path(pattern: str) -> None:
    """Mask what ``pattern`` matches in the paths of the request URLs httpx logs, but its
    first group (``r"(/bot)[0-9]+:[A-Za-z0-9_-]+"`` logs ``/bot***``)."""
    with _lock:
        if all(known.pattern != pattern for known in _PATH_SECRETS):
            _PATH_SECRETS.append(re.compile(pattern))


class _MaskCredentials(logging.Filter):
    """Masks credentials (query parameters, and what :func:`mask_in_path` names in paths) in
    the request URLs httpx logs."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and any(isinstance(a, httpx.URL) for a in record.args):
            record.args = tuple(_masked(a) if isinstance(a, httpx.URL) else a for a in record.args)
        return True


def _masked(url: httpx.URL) -> httpx.URL:
    for name in CREDENTIAL_PARAMS & set(url.params.keys()):
        url = url.copy_set_param(name, "***")
    if _PATH_SECRETS:
        path = hidden = url.raw_path.decode("ascii", "replace")
        for pattern in _PATH_SECRETS:
            hidden = pattern.sub(lambda m: m.group(1) + "***", hidden)
        if hidden != path:
            url = url.copy_with(raw_path=hidden.encode())
    return url


_httpx_log = logging.getLogger("httpx")
if not any(isinstance(f, _MaskCredentials) for f in _httpx_log.filters):
    _httpx_log.addFilter(_MaskCredentials())

#: A vendor base URL option: ``http(s)://host[:port]`` with an optional path (a vendor's
#: regional path, a corporate proxy's prefix); no query, fragment or whitespace.
BASE_URL = r"^https?://[^\s/?#]+(?:/[^\s?#]*)?$"

_lock = threading.Lock()
_client: httpx.Client | None = None
_client_pid = 0


def client() -> httpx.Client:
    """This process's pooled client (a new one after a fork: sockets are never shared)."""
    global _client, _client_pid
    with _lock:
        if _client is None or _client_pid != os.getpid():
            limits = httpx.Limits(max_connections=100, max_keepalive_connections=20)
            _client = httpx.Client(
                transport=traced(httpx.HTTPTransport(limits=limits)),
                follow_redirects=False,
                headers={"user-agent": "noti"},
            )
            _client_pid = os.getpid()
        return _client


def span_url(url: httpx.URL) -> str:
    """``url`` as a client span shows it: no query (credentials travel there), no user or
    password, path secrets masked (:func:`mask_in_path`)."""
    path = _masked(url).raw_path.split(b"?", 1)[0].decode("ascii", "replace")
    return f"{url.scheme}://{url.netloc.decode('ascii', 'replace')}{path}"


class _Traced(httpx.BaseTransport):
    """A transport whose requests are client spans while noti traces."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self._inner = inner

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if tracing.tracer() is None:
            return self._inner.handle_request(request)
        url = request.url
        with tracing.client_call(request.method, span_url(url), url.host, url.port) as call:
            request.headers.update(call.headers)
            response = self._inner.handle_request(request)
            call.answered(response.status_code)
            return response

    def close(self) -> None:
        self._inner.close()


def traced(transport: httpx.BaseTransport) -> httpx.BaseTransport:
    """``transport`` with a client span per request while noti traces (and nothing more
    than one check per request while it does not)."""
    return _Traced(transport)


def join_path(base: str, path: str) -> str:
    """``path`` under a base URL that may carry a path of its own (a vendor's regional path,
    a proxy's prefix): ``join_path("https://proxy/sms/", "/")`` is ``https://proxy/sms/``."""
    return base.rstrip("/") + "/" + path.lstrip("/")


def cannot_connect(provider: str, exc: BaseException) -> ProviderOutage:
    """No connection to the vendor: nothing was sent (the next provider may try)."""
    return ProviderOutage(f"{provider}: cannot connect: {exc}", provider=provider)


def unencodable(provider: str) -> ProviderMisconfigured:
    """The HTTP library refused the request noti built. The library's text is never
    interpolated: it may quote the offending header value, maybe a secret."""
    return ProviderMisconfigured(
        f"{provider}: the request could not be encoded (a header or URL value is not allowed)",
        provider=provider,
    )


def no_complete_answer(provider: str, exc: BaseException) -> AmbiguousOutcome:
    """The request went out and no complete answer came back: it may have been sent."""
    return AmbiguousOutcome(
        f"{provider}: no complete answer ({type(exc).__name__}); it may have been sent",
        provider=provider,
    )


def transport_failed(provider: str, exc: BaseException) -> TemporaryFailure:
    """Any other transport failure: worth another try."""
    return TemporaryFailure(f"{provider}: {type(exc).__name__}: {exc}", provider=provider)


@contextmanager
def map_transport_errors(provider: str) -> Iterator[None]:
    """Translate httpx transport failures into the outcome classes above (and, traced, name
    ``provider`` on the requests made inside)."""
    token = tracing.provider_call(provider)
    try:
        yield
    except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
        raise cannot_connect(provider, exc) from exc
    except httpx.LocalProtocolError as exc:  # we built a request the HTTP library refuses
        raise unencodable(provider) from exc
    except (
        httpx.ReadTimeout,
        httpx.WriteTimeout,
        httpx.RemoteProtocolError,
        httpx.ReadError,
        httpx.DecodingError,
        httpx.StreamError,
    ) as exc:
        raise no_complete_answer(provider, exc) from exc
    except httpx.HTTPError as exc:
        raise transport_failed(provider, exc) from exc
    finally:
        tracing.provider_done(token)


def json_object(response: httpx.Response, provider: str) -> dict[str, Any]:
    """The response body as a JSON object.

    Raises:
        AmbiguousOutcome: it is not one (the vendor may have acted on the request).
    """
    try:
        data = json.loads(response.content)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        excerpt = response.text[:200]
        raise AmbiguousOutcome(
            f"{provider}: HTTP {response.status_code} with an unreadable answer: {excerpt!r}",
            provider=provider,
            vendor_code=f"http.{response.status_code}",
        )
    return data


class _Answered(Protocol):
    @property
    def headers(self) -> Mapping[str, str]: ...


def retry_after_s(response: _Answered, default: float) -> float:
    """Seconds from a ``Retry-After`` header (delta seconds; dates fall back to ``default``)."""
    value = response.headers.get("retry-after", "")
    try:
        return max(0.0, float(value))
    except ValueError:
        return default
