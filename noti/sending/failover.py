"""The failover rules of one attempt: which provider sends next, and what each answer means.

A record's providers form a chain (``provider = "a,b"`` or the channel's default); one
attempt walks it as a plan (:meth:`Failover.plan`, a generator): it yields each
``(provider, message)`` to send and is sent back what happened. The same plan is driven by
blocking calls (:meth:`noti.sending.sender.Sender.attempt_many`, with :meth:`Failover.take_token`
before a rate-limited provider's send) or on an asyncio loop (:meth:`Failover.run_async`), so
the rules are written once. Split from :mod:`noti.sending.sender` (issue 39), unchanged.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Generator

from noti.core.attempt import CallNote
from noti.core.privacy import mask_target
from noti.core.record import Notification, now_ms
from noti.errors import (
    AmbiguousOutcome,
    DeliveryError,
    PermanentFailure,
    ProviderMisconfigured,
    RateLimited,
    RecipientOptedOut,
    StaleCredential,
    UnconfirmedOutcome,
    Unsubscribed,
)
from noti.providers import Message, Provider, Receipt
from noti.providers._lookup import LookupProvider
from noti.providers.ratelimit import Place
from noti.sending.runtime import Runtime

__all__ = ["Failover", "Plan", "StepResult", "call_note"]

log = logging.getLogger(__name__)

StepResult = Receipt | DeliveryError | float
#: A failover plan (:meth:`Failover.plan`): yields the sends to make, returns the receipt.
Plan = Generator[tuple[Provider, Message], StepResult, Receipt]


def call_note(provider: str, seconds: float, answer: object) -> CallNote:
    """One provider call as the record's timeline tells it (:mod:`noti.core.timeline`): the
    vendor took it (a receipt), refused it (a delivery error: noti's code, the vendor's code
    and text), our rate limit kept it from being sent (a wait), or the provider broke."""
    at = now_ms() - int(seconds * 1000)
    if isinstance(answer, Receipt):
        return CallNote(provider, at, seconds, "ok", msgid=answer.msgid)
    if isinstance(answer, DeliveryError):
        return CallNote(
            provider,
            at,
            seconds,
            "failed",
            code=answer.code,
            vendor_code=answer.vendor_code,
            text=answer.message,
        )
    if isinstance(answer, int | float):
        return CallNote(provider, at, seconds, "waited", text=f"rate limit: a token in {answer:.3f} s")
    return CallNote(provider, at, seconds, "error", text=f"{type(answer).__name__}: {answer}")


class Failover:
    """The failover rules for the records of one runtime."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    async def run_async(self, plan: Plan, record: Notification, notes: list[CallNote]) -> Receipt:
        """Drive ``record``'s failover plan on the running asyncio loop; each provider call is
        noted in ``notes`` with its duration and its answer."""
        loop = asyncio.get_running_loop()
        try:
            provider, message = next(plan)
            while True:
                result: StepResult
                wait_s = 0.0
                if provider.options.rate_limit_per_s:  # Redis calls, in line for a token
                    place = self.place(provider, record)
                    wait_s, done = await loop.run_in_executor(None, place.ask)
                    while not done:  # a short wait for our turn: sleep it here, not on a thread
                        await asyncio.sleep(wait_s)
                        wait_s, done = await loop.run_in_executor(None, place.ask)
                if wait_s > 0:
                    result = wait_s
                else:
                    started = time.perf_counter()
                    try:
                        result = await provider.send_async(message)
                    except DeliveryError as exc:
                        result = exc
                    except BaseException as exc:  # the provider broke: noted, and it goes on up
                        notes.append(call_note(provider.name, time.perf_counter() - started, exc))
                        raise
                    notes.append(call_note(provider.name, time.perf_counter() - started, result))
                provider, message = plan.send(result)
        except StopIteration as done:
            receipt: Receipt = done.value
            return receipt

    def plan(
        self,
        record: Notification,
        *,
        suppressed: bool = False,
        in_doubt: bool = False,
        unsubscribed: str = "",
    ) -> Plan:
        """The record's providers in failover order (shared/providers.md §0), as a plan.

        It yields each ``(provider, message)`` to send and is sent back what happened (a
        receipt, the delivery error, or the rate-limit wait that kept it from being sent):

        - ``ProviderOutage``, ``ProviderMisconfigured``, a plain ``TemporaryFailure``, or our
          own rate limit being exhausted: the next provider is tried, within this attempt;
        - ``StaleCredential``: the same provider once more at once (it dropped the credential);
        - ``PermanentFailure`` (and ``RecipientOptedOut``), ``RateLimited`` (a per-recipient
          window) and ``AmbiguousOutcome`` (it may have been sent): no failover.

        ``in_doubt``: an earlier attempt may have been sent (:attr:`Claim.in_doubt`), through
        any provider of the chain. The first provider that can ask its vendor asks it, and every
        other provider of the chain that can (:mod:`noti.providers._lookup`), before sending; the
        next provider is tried only after those look-ups said "not sent" and its own send then
        failed. A look-up that cannot tell (``UnconfirmedOutcome``) ends the
        attempt under the channel's ``lookup_failure = "hold"``; under ``"resend"`` the same
        provider sends at once without asking.

        When every provider failed: if one was only throttled by its rate limit, the record
        waits for the soonest window (not an attempt); else a temporary failure, if any, counts
        as an attempt; else the configuration failure fails the record.
        """
        rt = self.runtime
        message = Message.from_record(record)
        chain = rt.providers.chain(record.channel, record.provider)
        askable = [p for p in chain if isinstance(p, LookupProvider)] if in_doubt else []
        if unsubscribed:  # the claim saw the recipient's preferences refuse it (noti.recipients)
            raise Unsubscribed(
                f"recipient {record.recipient} refuses {record.category} on {record.channel.value} "
                f"now ({unsubscribed})",
                provider=chain[0].name,
            )
        if suppressed:  # the claim saw the target's opt-out
            raise RecipientOptedOut(
                f"{mask_target(record.target)} opted out of {record.channel.value} earlier",
                provider=chain[0].name,
            )
        throttled_s: float | None = None
        temporary: DeliveryError | None = None
        misconfigured: DeliveryError | None = None
        # In doubt, the first provider that can ask its vendor asks it and the chain's others
        # (the earlier attempt may have gone out through any of them); once their look-ups
        # found nothing and its own send failed for certain, the doubt is settled for this
        # attempt and the next providers send without asking again.
        settled = not in_doubt
        for n, provider in enumerate(chain):
            sent = message
            if not settled:
                others = tuple(p for p in askable if p is not provider)
                sent = dataclasses.replace(message, in_doubt=True, ask_also=others)
            result = yield provider, sent
            if isinstance(result, StaleCredential):  # once more, with a fresh credential
                result = yield provider, sent
                if isinstance(result, StaleCredential):  # a fresh one refused too: ours is wrong
                    result = ProviderMisconfigured(
                        f"{provider.name}: a fresh access token was refused too: {result.message}",
                        provider=provider.name,
                        vendor_code=result.vendor_code,
                    )
            if isinstance(result, UnconfirmedOutcome) and self.resends(record):
                log.warning("deliver %s: %s; sending again (lookup_failure = resend)", record.id, result)
                result = yield provider, dataclasses.replace(sent, in_doubt=False, ask_also=())
            if isinstance(result, Receipt):
                return result
            if isinstance(result, float):  # throttled before its send: nothing was asked
                throttled_s = result if throttled_s is None else min(throttled_s, result)
                continue
            settled = settled or isinstance(provider, LookupProvider)
            if isinstance(result, (PermanentFailure, RateLimited, AmbiguousOutcome)):
                raise result
            if isinstance(result, ProviderMisconfigured):
                misconfigured = result
            else:
                temporary = result
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

    def resends(self, record: Notification) -> bool:
        """Whether the record's channel sends again when a look-up cannot tell (``lookup_failure``)."""
        return self.runtime.settings.channel(record.channel.value).lookup_failure == "resend"

    def take_token(self, provider: Provider, record: Notification) -> float:
        """Stand in ``provider``'s line for a token for ``record``: 0 when taken (send now),
        else the seconds still to wait (the place was given up; :mod:`noti.providers.ratelimit`)."""
        if not provider.options.rate_limit_per_s:
            return 0.0
        place = self.place(provider, record)
        wait_s, done = place.ask()
        while not done:
            time.sleep(wait_s)
            wait_s, done = place.ask()
        return wait_s

    def place(self, provider: Provider, record: Notification) -> Place:
        """``record``'s place in the line of ``provider``'s rate limit."""
        rate = provider.options.rate_limit_per_s
        assert rate  # only rate-limited providers have a line
        return self.runtime.rate_limiter.place(
            provider.name,
            rate_per_s=rate,
            burst=provider.options.rate_burst,
            contender=record.id,
            level=record.level,
            user=record.creator,
        )
