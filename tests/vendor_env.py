"""What every provider's tests need whatever the vendor: what one send that ended in each
outcome class leaves on the record (:data:`RECORD_AFTER`), sending a record once in this
process, a URL where nobody listens, a vendor fake kept running for a module and reset for
each test, and a provider built straight from its options.

A provider test starts its vendor's fake once per module and meets it through the sender as a
worker would::

    from noti import errors
    from tests.fakes.twilio import TwilioFake, error_reply, twilio_options
    from tests.vendor_env import assert_record_after, fake_fixtures, nobody_listening, send_now

    server, fake = fake_fixtures(lambda: TwilioFake(opted_out=(OPTED_OUT,)))

    fake.script(error_reply(21610))                           # the vendor refuses the next send
    record = send_now(rt, noti.notify_sms(PHONE, "hi"))       # one attempt, in this process
    assert_record_after(record, errors.RecipientOptedOut)     # INVALID, no attempt counted

    twilio_options(fake, base_url=nobody_listening())         # a refused connection: an outage
    build_provider("tw", twilio_options(fake), redis_url)     # the provider alone, no runtime

The table is the sender's contract with the outcome classes (docs/concepts/delivery.md), stated
once here so that each vendor's error table is checked against the same rule. The outcome
classes are named as ``errors.X`` (``from noti import errors``) rather than imported one by one:
a list of ten names copied into every provider test said nothing the namespace does not.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

import noti
from noti import errors
from noti.core.attempt import ClaimState
from noti.core.keys import Keys
from noti.core.record import Status
from noti.providers import load_kind
from tests.servers import free_port

__all__ = [
    "RECORD_AFTER",
    "assert_record_after",
    "build_provider",
    "fake_fixtures",
    "nobody_listening",
    "send_now",
]

#: Outcome class -> (record status, attempts counted) after one send with retries left: a
#: failure that may be tried again waits (a rate limit without counting an attempt), one that
#: cannot is final (invalid for the message's own fault, failed for the operator's).
RECORD_AFTER: dict[type[errors.DeliveryError], tuple[Status, int]] = {
    errors.TemporaryFailure: (Status.WAITING, 1),
    errors.ProviderOutage: (Status.WAITING, 1),
    errors.AmbiguousOutcome: (Status.WAITING, 1),
    errors.RateLimited: (Status.WAITING, 0),
    errors.PermanentFailure: (Status.INVALID, 0),
    errors.RecipientOptedOut: (Status.INVALID, 0),
    errors.ProviderMisconfigured: (Status.FAILED, 0),
}


def send_now(rt: Any, record_id: str, **kwargs: Any) -> Any:
    """Send ``record_id`` once in this process, as a worker's task would (``kwargs`` go to
    :func:`noti.send`, e.g. ``user``), and return the record as stored after it."""
    [result] = noti.send(record_id, **kwargs)
    assert result.record_id == record_id and result.claim is ClaimState.CLAIMED, result
    return rt.store.get(record_id)


def assert_record_after(record: Any, outcome: type[errors.DeliveryError]) -> None:
    """``record`` is as one send that raised ``outcome`` leaves it (:data:`RECORD_AFTER`)."""
    assert (record.status, record.retry) == RECORD_AFTER[outcome], record.errmsg


def nobody_listening(scheme: str = "http", path: str = "") -> str:
    """A loopback URL on a port nobody listens on: connecting to it is refused."""
    return f"{scheme}://127.0.0.1:{free_port()}{path}"


def fake_fixtures(start: Callable[[], Any], *, name: str = "fake") -> tuple[Any, Any]:
    """A test module's two fixtures of one vendor fake, to assign as ``server, fake = …``:
    ``server``, the fake ``start()`` makes, running for the whole module (a server per test
    would cost a start and a stop each), and ``name`` (``fake`` unless told), the same fake
    :meth:`~tests.fakes._server.FakeServer.reset` before each test, so that no test sees
    another's requests, script or delay."""

    @pytest.fixture(scope="module", name="server")
    def server() -> Iterator[Any]:
        with start() as running:
            yield running

    @pytest.fixture(name=name)
    def fake(server: Any) -> Any:
        server.reset()
        return server

    return server, fake


def build_provider(name: str, options: dict[str, Any], redis_url: str) -> Any:
    """The provider ``name`` that ``options`` describe (their ``kind``), built as a runtime
    builds it but outside one: for a test of the provider alone (its requests, its errors,
    the options it refuses), on the Redis of ``redis_url`` under noti's ``noti:`` prefix."""
    options = dict(options)
    kind = options.pop("kind")
    return load_kind(kind)(name, options, redis=redis.Redis.from_url(redis_url), keys=Keys("noti:"))
