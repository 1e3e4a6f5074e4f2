"""Delivering one record: claim it, call its provider, record the outcome.

Used by the ``noti.deliver`` Celery task and by ``noti send``; neither has a policy of its
own. The claim makes delivery effectively once: a redelivered or duplicate message finds the
record leased (it is looked at again when the lease ends), waiting for its time (the
delayed set holds it), or finished (nothing is sent). While the provider is called the
lease is renewed (:mod:`noti.core.lease`), so a slow call is never taken over and sent twice.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from noti.core.attempt import CallNote, Claim, ClaimState, ErasedReceipt, Finish, Finished, Outcome, Revoked
from noti.core.deadletter import DeadLetter
from noti.core.record import Channel, Notification, Status, now_ms
from noti.core.retry import RetryPolicy, decide
from noti.errors import (
    DeliveryError,
    NotiError,
    StoreUnavailable,
)
from noti.providers import Message, Provider
from noti.redis.entropy import owner_token
from noti.sending.failover import Failover, Plan, StepResult, call_note
from noti.sending.outcomes import Outcomes, erased_view, run_hooks, still_unsure, why_suppressed
from noti.sending.runtime import Runtime

__all__ = ["Attempt", "SendResult", "Sender"]

log = logging.getLogger(__name__)

#: A record claimed this many times more than its attempt limit without ever finishing is
#: taken to crash its sender (e.g. kills the worker) and is made invalid.
POISON_MARGIN = 3
#: Pauses before trying again to record an outcome when Redis does not answer: the send
#: happened, so giving up would mean sending it again after the lease.
FINISH_RETRY_PAUSES_S = (0.2, 0.5, 1.0, 2.0)


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
    #: The outcome recorded (None when nothing was attempted).
    outcome: Outcome | None = None
    #: Not attempted because a revoke had asked for it (the record is revoked now).
    revoked: bool = False

    def line(self) -> str:
        """The seed's one-line report: ``OK [sms]ID >> target:``."""
        kind = self.channel.value if self.channel else "?"
        detail = "" if self.mark == "OK" else self.errmsg
        return f"{self.mark} [{kind}]{self.record_id} >> {self.target}:{detail}"


@dataclass(frozen=True, slots=True)
class Attempt:
    """A claimed record, ready to be sent under ``owner``'s lease."""

    claim: Claim
    owner: str
    lease_ms: int
    #: Each provider call made for it, in order, with its duration and answer (its timeline;
    #: the last one's provider decided the outcome: the counters and the latency histogram,
    #: :mod:`noti.redis.counters`).
    notes: list[CallNote] = field(default_factory=list)

    @property
    def record(self) -> Notification:
        assert self.claim.record is not None
        return self.claim.record


#: What a plan's driver answers a send request with: the receipt, the delivery error the
#: provider raised, or the seconds the provider's rate limit still asks to wait.


class Sender:
    """Delivers records of one runtime; ``owner`` names this sender in leases.

    One record (:meth:`deliver`) or a batch (:meth:`claim_many`, then :meth:`attempt_many`,
    or :meth:`attempt_async` per claimed record, then :meth:`conclude_many`): a batch costs one
    claim and one finish script call whatever its size. The failover rules are written
    once (:meth:`noti.sending.failover.Failover.plan`) and driven either by blocking calls or
    on an asyncio loop.
    """

    def __init__(self, runtime: Runtime, *, owner: str | None = None) -> None:
        self.runtime = runtime
        self.owner_prefix = owner or f"{socket.gethostname()}:{os.getpid()}"
        #: The failover rules (which provider next) and what an attempt's end makes of the record.
        self.failover = Failover(runtime)
        self.outcomes = Outcomes(runtime)

    def deliver(
        self, record_id: str, *, lease_ms: int | None = None, creator: str | None = None
    ) -> SendResult:
        """Claim ``record_id`` and, if it was ours to take, send it and record the outcome."""
        return self.deliver_many([record_id], lease_ms=lease_ms, creator=creator)[0]

    def deliver_many(
        self, record_ids: Sequence[str], *, lease_ms: int | None = None, creator: str | None = None
    ) -> list[SendResult]:
        """Claim, send one after the other, and record the outcomes of ``record_ids``."""
        ready, results = self.claim_many(record_ids, lease_ms=lease_ms, creator=creator)
        slots = [i for i, result in enumerate(results) if result is None]  # in claim order
        outcomes = self.attempt_many(ready)
        concluded = self.conclude_many(list(zip(ready, outcomes, strict=True)))
        for i, result in zip(slots, concluded, strict=True):
            results[i] = result
        return [r for r in results if r is not None]

    # --- a batch, step by step ------------------------------------------------------------

    def claim_many(
        self, record_ids: Sequence[str], *, lease_ms: int | None = None, creator: str | None = None
    ) -> tuple[list[Attempt], list[SendResult | None]]:
        """Claim ``record_ids`` in one script call.

        Returns the attempts to make, and one slot per id: the result of an id that is not
        ours to send (leased, not due, finished, foreign, missing), None for a claimed one.
        """
        claims, owner, lease = self.claim_records(record_ids, lease_ms=lease_ms, creator=creator)
        return self.sort_claims(
            [(record_id, claim, owner, lease) for record_id, claim in zip(record_ids, claims, strict=True)]
        )

    def claim_records(
        self, record_ids: Sequence[str], *, lease_ms: int | None = None, creator: str | None = None
    ) -> tuple[list[Claim], str, int]:
        """The claims of ``record_ids`` (one script call), the owner token they were made
        for, and the lease length (ms)."""
        rt = self.runtime
        lease = self.lease_ms if lease_ms is None else int(lease_ms)
        owner = owner_token(self.owner_prefix)
        return rt.store.claim_many(record_ids, owner=owner, lease_ms=lease, creator=creator), owner, lease

    @property
    def lease_ms(self) -> int:
        """How long a claim holds a record (``lease_timeout_s``), in ms."""
        return int(self.runtime.settings.lease_timeout_s * 1000)

    def sort_claims(
        self, claims: Sequence[tuple[str, Claim, str, int]]
    ) -> tuple[list[Attempt], list[SendResult | None]]:
        """:meth:`claim_many`'s answer for claims made elsewhere (the broker transport claims
        as it fetches): ``(record id, claim, owner token, lease ms)`` each."""
        ready: list[Attempt] = []
        results: list[SendResult | None] = []
        for record_id, claim, owner, lease in claims:
            if (
                claim.state is ClaimState.CLAIMED
                and claim.revoke_requested
                and self._revoked(record_id, owner)
            ):
                results.append(
                    SendResult(record_id, "!!", ClaimState.FINAL, status=Status.INVALID, revoked=True)
                )
            elif claim.state is ClaimState.CLAIMED:
                ready.append(Attempt(claim, owner, lease))
                results.append(None)
            else:
                results.append(self._skipped(record_id, claim))
        return ready, results

    def _revoked(self, record_id: str, owner: str) -> bool:
        """Revoke a claimed record a revoke asked for while another sender held it."""
        done = self.runtime.store.revoke(
            [record_id], reason="revoked while another sender held it", owner=owner
        )
        return done[0] is Revoked.REVOKED

    def attempt_many(self, attempts: Sequence[Attempt], *, hold_leases: bool = True) -> list[Outcome]:
        """Send claimed records through their providers (blocking); their outcomes, in order.

        The records' failover plans advance in step: each round, the sends due at one provider
        go to it together (:meth:`Provider.send_many`: the sandbox pipelines them), so a batch
        costs a round trip per provider and round, not per record. ``hold_leases=False`` skips
        the lease heartbeats, for providers that answer at once (:meth:`inline`).
        """
        outcomes: list[Outcome | None] = [self._poisoned(a) for a in attempts]
        plans: dict[int, Plan] = {}
        requests: dict[int, tuple[Provider, Message]] = {}
        policies: dict[int, RetryPolicy] = {}
        held = [(a.record.id, a.owner, a.lease_ms) for a in attempts] if hold_leases else []
        with self.runtime.lease_keeper.hold_many(held):
            for i, attempt in enumerate(attempts):
                if outcomes[i] is not None:
                    continue
                record = attempt.record
                policies[i] = self.outcomes.policy(record)
                plans[i] = self.failover.plan(
                    record,
                    suppressed=attempt.claim.suppressed,
                    in_doubt=attempt.claim.in_doubt,
                    unsubscribed=attempt.claim.unsubscribed,
                )
                try:
                    requests[i] = next(plans[i])
                except Exception as exc:
                    outcomes[i] = self.outcomes.failed(record, exc, policies[i])
            while requests:
                timings: dict[int, tuple[str, float]] = {}
                answers = self._send_round(requests, timings, attempts)
                requests = {}
                for i, (provider_name, seconds) in timings.items():
                    attempts[i].notes.append(call_note(provider_name, seconds, answers.get(i)))
                for i, answer in answers.items():
                    record = attempts[i].record
                    try:
                        try:
                            if isinstance(answer, BaseException) and not isinstance(answer, DeliveryError):
                                raise answer  # the provider itself broke (or its rate limiter)
                            requests[i] = plans[i].send(answer)
                        except StopIteration as done:
                            outcomes[i] = self.outcomes.delivered(record, done.value)
                        except Exception as exc:
                            outcomes[i] = self.outcomes.failed(record, exc, policies[i])
                    except Exception as exc:  # the outcome itself could not be computed: a bug
                        log.exception("deliver %s: unexpected error", record.id)
                        outcomes[i] = decide(record, exc, policy=RetryPolicy(), now_ms=now_ms())
        return [outcome for outcome in outcomes if outcome is not None]

    def _send_round(
        self,
        requests: dict[int, tuple[Provider, Message]],
        timings: dict[int, tuple[str, float]],
        attempts: Sequence[Attempt],
    ) -> dict[int, StepResult | BaseException]:
        """One round of blocking sends, grouped by provider; a rate-limited provider gets its
        requests one at a time, each right after its token (``attempts[i]``'s record takes
        its place in line). ``timings`` gets, per request sent, its provider and how long the
        call took (a group's calls took as long as it)."""
        by_provider: dict[int, list[int]] = {}
        for i, (provider, _) in requests.items():
            by_provider.setdefault(id(provider), []).append(i)
        answers: dict[int, StepResult | BaseException] = {}
        for group in by_provider.values():
            provider = requests[group[0]][0]
            if provider.options.rate_limit_per_s:  # each send right after its token
                for i in group:
                    try:
                        wait_s = self.failover.take_token(provider, attempts[i].record)
                    except Exception as exc:  # e.g. Redis gone: this record's attempt ends so
                        answers[i] = exc
                        continue
                    if wait_s > 0:
                        answers[i] = wait_s
                    else:
                        answers.update(self._send_group(provider, [i], requests, timings))
            else:
                answers.update(self._send_group(provider, group, requests, timings))
        return answers

    @staticmethod
    def _send_group(
        provider: Provider,
        group: list[int],
        requests: dict[int, tuple[Provider, Message]],
        timings: dict[int, tuple[str, float]],
    ) -> dict[int, StepResult | BaseException]:
        results: Sequence[StepResult | BaseException]
        started = time.perf_counter()
        try:
            results = provider.send_many([requests[i][1] for i in group])
        except Exception as exc:  # a provider bug, not an outcome: each record gets it
            log.exception("deliver: provider %s raised an unexpected error", provider.name)
            results = [exc] * len(group)
        timing = (provider.name, time.perf_counter() - started)
        for i in group:
            timings[i] = timing
        return dict(zip(group, results, strict=True))

    async def attempt_async(self, attempt: Attempt) -> Outcome:
        """One record of :meth:`attempt_many`, on an asyncio loop (:meth:`Provider.send_async`):
        many sends of one process wait on the network at once. The caller keeps the lease alive
        (:meth:`~noti.core.lease.LeaseKeeper.hold_many` around the batch)."""
        record = attempt.record
        poisoned = self._poisoned(attempt)
        if poisoned is not None:
            return poisoned
        try:
            policy = self.outcomes.policy(record)
            try:
                receipt = await self.failover.run_async(
                    self.failover.plan(
                        record,
                        suppressed=attempt.claim.suppressed,
                        in_doubt=attempt.claim.in_doubt,
                        unsubscribed=attempt.claim.unsubscribed,
                    ),
                    record,
                    attempt.notes,
                )
            except Exception as exc:
                return self.outcomes.failed(record, exc, policy)
            return self.outcomes.delivered(record, receipt)
        except Exception as exc:  # the outcome itself could not be computed: a bug
            log.exception("deliver %s: unexpected error", record.id)
            return decide(record, exc, policy=RetryPolicy(), now_ms=now_ms())

    def conclude_many(self, outcomes: Sequence[tuple[Attempt, Outcome]]) -> list[SendResult]:
        """Record the outcomes in one script call (dead letters included); one result each."""
        rt = self.runtime
        items: list[Finish] = []
        for attempt, outcome in outcomes:
            record = attempt.record
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
            last = attempt.notes[-1].provider if attempt.notes else ""
            if outcome.error_class == "opted_out":
                rt.store.suppress(
                    record.channel.value, record.target, why=why_suppressed(record, outcome, last)
                )
            outcome = still_unsure(outcome, attempt.claim.in_doubt)
            items.append(Finish(record.id, attempt.owner, outcome, letter, tuple(attempt.notes)))
        applied = self._finish(items)
        results = []
        early: list[tuple[str, str]] = []
        for (attempt, outcome), item, ok in zip(outcomes, items, applied, strict=True):
            record = attempt.record
            if isinstance(ok, str):  # its vendor's receipt came before this outcome was recorded
                early.append((record.id, ok))
            seen, told, letter = record, outcome, item.letter
            if ok is Finished.ERASED_MEANWHILE or isinstance(ok, ErasedReceipt):  # hooks and result
                seen, told, letter = erased_view(record, outcome, letter)  # see what erasure left
            if not ok:
                log.warning("deliver %s: lease lost before the outcome was recorded", record.id)
            else:
                if letter is not None:
                    rt.dead_letters.notify_hook(letter)
                if rt.handler is not None:
                    run_hooks(rt.handler, seen, told, letter)
            mark = "OK" if outcome.status is Status.DONE else "KO"
            results.append(
                SendResult(
                    record.id,
                    mark,
                    ClaimState.CLAIMED,
                    record.channel,
                    seen.target,
                    outcome.status,
                    told.errmsg,
                    told if ok else None,
                )
            )
        if early:
            rt.delivery.apply_early(early)
        failed_with_fallback: list[str] = [
            attempt.record.fallback
            for (attempt, outcome), ok in zip(outcomes, applied, strict=True)
            if ok and attempt.record.fallback and outcome.status in (Status.FAILED, Status.INVALID)
        ]
        if failed_with_fallback:  # no receipt will come: its fallback need not wait for the deadline
            try:
                rt.delivery.fallbacks_now(failed_with_fallback)
            except StoreUnavailable:
                log.warning("deliver: %d fallback(s) left to their deadline", len(failed_with_fallback))
        return results

    def inline(self, record: Notification) -> bool:
        """Whether every provider of the record answers at once (no network wait), so a
        batch may send it on the consumer's own thread."""
        try:
            chain = self.runtime.providers.chain(record.channel, record.provider)
        except NotiError:  # no usable provider: the attempt fails at once
            return True
        # a rate limit may mean waiting for a token
        return all(provider.inline and not provider.options.rate_limit_per_s for provider in chain)

    # --- the pieces ------------------------------------------------------------------------

    def _skipped(self, record_id: str, claim: Claim) -> SendResult:
        if claim.state is ClaimState.LEASED:
            # Another sender holds it: look again when its lease ends, so a message redelivered
            # after a crash is never the record's last chance (NX: keep an earlier look).
            self.runtime.delayed.recheck(record_id, claim.until_ms + 1)
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

    def _poisoned(self, attempt: Attempt) -> Outcome | None:
        record = attempt.record
        if attempt.claim.claims <= record.retry_max + POISON_MARGIN:
            return None
        return Outcome(
            Status.INVALID,
            f"e.cmd.noti.send.poison: claimed {attempt.claim.claims} times without finishing",
            record.retry,
            error_class="poison",
        )

    def _finish(self, items: list[Finish]) -> list[bool | str | Finished]:
        """Record outcomes, trying again while Redis does not answer (same owner tokens)."""
        store = self.runtime.store
        unknown_after_ms = int(self.runtime.settings.delivery_unknown_after_s * 1000)
        for pause in (*FINISH_RETRY_PAUSES_S, None):
            try:
                return store.finish_many(
                    items, letter_max_len=self.runtime.dead_letters.max_len, unknown_after_ms=unknown_after_ms
                )
            except StoreUnavailable:
                if pause is None:
                    raise
                log.warning("deliver: cannot record %d outcome(s) yet; trying again", len(items))
                time.sleep(pause)
        return [False] * len(items)  # pragma: no cover - the loop returns or raises
