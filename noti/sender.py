"""Delivering one record: claim it, call its provider, record the outcome.

Used by the ``noti.deliver`` Celery task and by ``noti send``; neither has a policy of its
own. The claim makes delivery effectively once: a redelivered or duplicate message finds the
record leased (it is looked at again when the lease ends), waiting for its time (the
delayed set holds it), or finished (nothing is sent). While the provider is called the
lease is renewed (:mod:`noti.lease`), so a slow call is never taken over and sent twice.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from dataclasses import dataclass

from noti.deadletter import DeadLetter
from noti.errors import (
    AmbiguousOutcome,
    DeliveryError,
    NotiError,
    PermanentFailure,
    ProviderMisconfigured,
    RateLimited,
    RecipientOptedOut,
    StaleCredential,
    StoreUnavailable,
)
from noti.providers import Message, Provider, Receipt
from noti.record import Channel, Notification, Status, msgid_field, now_ms
from noti.retry import RetryPolicy, decide, delivered
from noti.runtime import Runtime
from noti.store import Claim, ClaimState, Outcome

__all__ = ["SendResult", "Sender", "mask_target"]

log = logging.getLogger(__name__)

#: A record claimed this many times more than its attempt limit without ever finishing is
#: taken to crash its sender (e.g. kills the worker) and is made invalid.
POISON_MARGIN = 3
#: Pauses before trying again to record an outcome when Redis does not answer: the send
#: happened, so giving up would mean sending it again after the lease.
FINISH_RETRY_PAUSES_S = (0.2, 0.5, 1.0, 2.0)
#: A rate-limit wait this short is slept through; a longer one postpones the record.
SHORT_WAIT_S = 0.25


@dataclass(frozen=True, slots=True)
class SendResult:
    """What one delivery attempt did."""

    record_id: str
    #: "OK" delivered, "KO" failed this attempt, "!!" not attempted (see ``claim``).
    mark: str
    claim: ClaimState
    channel: Channel | None = None
    target: str = ""
    status: Status | None = None
    errmsg: str = ""

    def line(self) -> str:
        """The seed's one-line report: ``OK [sms]ID >> target:``."""
        kind = self.channel.value if self.channel else "?"
        detail = "" if self.mark == "OK" else self.errmsg
        return f"{self.mark} [{kind}]{self.record_id} >> {self.target}:{detail}"


def mask_target(target: str) -> str:
    """A target fit for logs: personal data (phone, openid, address) mostly hidden."""
    if len(target) <= 4:
        return "*" * len(target)
    return target[:3] + "*" * max(3, len(target) - 5) + target[-2:]


class Sender:
    """Delivers records of one runtime; ``owner`` names this sender in leases."""

    def __init__(self, runtime: Runtime, *, owner: str | None = None) -> None:
        self.runtime = runtime
        self.owner_prefix = owner or f"{socket.gethostname()}:{os.getpid()}"

    def deliver(
        self, record_id: str, *, lease_ms: int | None = None, creator: str | None = None
    ) -> SendResult:
        """Claim ``record_id`` and, if it was ours to take, send it and record the outcome."""
        rt = self.runtime
        lease = int(lease_ms if lease_ms is not None else rt.settings.lease_timeout_s * 1000)
        owner = f"{self.owner_prefix}:{uuid.uuid4().hex[:12]}"
        claim = rt.store.claim(record_id, owner=owner, lease_ms=lease, creator=creator)
        if claim.state is ClaimState.CLAIMED:
            assert claim.record is not None
            return self._attempt(claim, owner, lease)
        if claim.state is ClaimState.LEASED:
            # Another sender holds it: look again when its lease ends, so a message redelivered
            # after a crash is never the record's last chance (NX: keep an earlier look).
            rt.delayed.recheck(record_id, claim.until_ms + 1)
            note = f"leased until {claim.until_ms}"
        elif claim.state is ClaimState.NOT_DUE:
            note = f"not due until {claim.until_ms}"
        elif claim.state is ClaimState.FINAL:
            note = f"already finished (st={int(claim.status or 0)})"
        elif claim.state is ClaimState.FOREIGN:
            note = "made by another user"
        else:
            note = "no such notification"
        log.debug("deliver %s: skipped, %s", record_id, note)
        return SendResult(record_id, "!!", claim.state, errmsg=note)

    def _attempt(self, claim: Claim, owner: str, lease_ms: int) -> SendResult:
        rt = self.runtime
        record = claim.record
        assert record is not None
        try:
            if claim.claims > record.retry_max + POISON_MARGIN:
                outcome = Outcome(
                    Status.INVALID,
                    f"e.cmd.noti.send.poison: claimed {claim.claims} times without finishing",
                    record.retry,
                    error_class="poison",
                )
            else:
                with rt.lease_keeper.hold(record.id, owner, lease_ms):
                    outcome = self._send(record, suppressed=claim.suppressed)
        except Exception as exc:  # the outcome itself could not be computed: a bug
            log.exception("deliver %s: unexpected error", record.id)
            outcome = decide(record, exc, policy=RetryPolicy(), now_ms=now_ms())
        letter = None
        if outcome.status in (Status.FAILED, Status.INVALID):
            letter = DeadLetter(
                record_id=record.id,
                type=record.channel.value,
                target=record.target,
                attempts=outcome.retry if outcome.error_class == "exhausted" else record.retry + 1,
                error_class=outcome.error_class or "invalid",
                errmsg=outcome.errmsg,
                at_ms=now_ms(),
            )
        if outcome.error_class == "opted_out":
            rt.store.suppress(record.channel.value, record.target)
        if not self._finish(record, owner, outcome, letter):
            log.warning("deliver %s: lease lost before the outcome was recorded", record.id)
        elif letter is not None:
            rt.dead_letters.notify_hook(letter)
        mark = "OK" if outcome.status is Status.DONE else "KO"
        return SendResult(
            record.id, mark, ClaimState.CLAIMED, record.channel, record.target, outcome.status, outcome.errmsg
        )

    def _finish(self, record: Notification, owner: str, outcome: Outcome, letter: DeadLetter | None) -> bool:
        """Record the outcome, trying again while Redis does not answer (same owner token)."""
        store = self.runtime.store
        for pause in (*FINISH_RETRY_PAUSES_S, None):
            try:
                return store.finish(
                    record.id,
                    owner=owner,
                    outcome=outcome,
                    letter=letter,
                    letter_max_len=self.runtime.dead_letters.max_len,
                )
            except StoreUnavailable:
                if pause is None:
                    raise
                log.warning("deliver %s: cannot record the outcome yet; trying again", record.id)
                time.sleep(pause)
        return False  # pragma: no cover - the loop returns or raises

    def _send(self, record: Notification, *, suppressed: bool = False) -> Outcome:
        """Call the record's providers in failover order; the outcome to record."""
        rt = self.runtime
        try:
            policy = RetryPolicy.for_record(record, rt.settings)
        except NotiError:  # checked at add time; a later settings change may break it
            policy = RetryPolicy.from_settings(rt.settings)
        try:
            receipt = self._call_providers(record, suppressed=suppressed)
        except NotiError as exc:
            outcome = decide(record, exc, policy=policy, now_ms=now_ms())
            log.info(
                "deliver %s [%s] to %s: %s -> st=%d",
                record.id,
                record.channel.value,
                mask_target(record.target),
                exc,
                outcome.status,
            )
            return outcome
        except Exception as exc:
            log.exception("deliver %s: provider raised an unexpected error", record.id)
            return decide(record, exc, policy=policy, now_ms=now_ms())
        log.info(
            "deliver %s [%s] to %s: ok via %s",
            record.id,
            record.channel.value,
            mask_target(record.target),
            receipt.provider,
        )
        return delivered(
            now_ms=now_ms(),
            keep_ms=int(rt.settings.keep_done_s * 1000),
            sent_by=receipt.provider,
            msgid=receipt.msgid,
            msgid_field=msgid_field(record.channel),
            retry=record.retry,
        )

    def _call_providers(self, record: Notification, *, suppressed: bool = False) -> Receipt:
        """Send through the record's providers in failover order (shared/providers.md §0).

        - ``ProviderOutage``, ``ProviderMisconfigured``, a plain ``TemporaryFailure``, or our
          own rate limit being exhausted: the next provider is tried, within this attempt;
        - ``StaleCredential``: the same provider once more at once (it dropped the credential);
        - ``PermanentFailure`` (and ``RecipientOptedOut``), ``RateLimited`` (a per-recipient
          window) and ``AmbiguousOutcome`` (it may have been sent): no failover.

        When every provider failed: if one was only throttled by its rate limit, the record
        waits for the soonest window (not an attempt); else a temporary failure, if any, counts
        as an attempt; else the configuration failure fails the record.
        """
        rt = self.runtime
        message = Message.from_record(record)
        chain = rt.providers.chain(record.channel, record.provider)
        if suppressed:  # the claim saw the target's opt-out
            raise RecipientOptedOut(
                f"{mask_target(record.target)} opted out of {record.channel.value} earlier",
                provider=chain[0].name,
            )
        throttled_s: float | None = None
        temporary: DeliveryError | None = None
        misconfigured: DeliveryError | None = None
        for n, provider in enumerate(chain):
            wait_s = self._take_token(provider)
            if wait_s > 0:
                throttled_s = wait_s if throttled_s is None else min(throttled_s, wait_s)
                continue
            try:
                try:
                    return provider.send(message)
                except StaleCredential:
                    wait_s = self._take_token(provider)  # the second request counts too
                    if wait_s > 0:
                        throttled_s = wait_s if throttled_s is None else min(throttled_s, wait_s)
                        continue
                    try:
                        return provider.send(message)
                    except StaleCredential as again:  # a fresh credential refused too: ours is wrong
                        raise ProviderMisconfigured(
                            f"{provider.name}: a fresh access token was refused too: {again.message}",
                            provider=provider.name,
                            vendor_code=again.vendor_code,
                        ) from again
            except (PermanentFailure, RateLimited, AmbiguousOutcome):
                raise
            except ProviderMisconfigured as exc:
                misconfigured = exc
            except DeliveryError as exc:
                temporary = exc
            if n + 1 < len(chain):
                log.info("deliver %s: %s failed; trying %s", record.id, provider.name, chain[n + 1].name)
        if throttled_s is not None:
            raise RateLimited(
                f"provider rate limit reached; next token in {throttled_s:.2f} s",
                retry_after_s=throttled_s,
                provider=chain[0].name,
            )
        failure = temporary or misconfigured
        assert failure is not None  # a chain is never empty
        raise failure

    def _take_token(self, provider: Provider) -> float:
        """Wait briefly for the provider's rate limit; the seconds still to wait (0: go)."""
        rate = provider.options.rate_limit_per_s
        if not rate:
            return 0.0
        limiter = self.runtime.rate_limiter
        for _ in range(4):
            wait_s = limiter.acquire(provider.name, rate_per_s=rate, burst=provider.options.rate_burst)
            if wait_s <= 0:
                return 0.0
            if wait_s > SHORT_WAIT_S:
                return wait_s
            time.sleep(wait_s)
        return SHORT_WAIT_S
