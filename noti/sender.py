"""Delivering one record: claim it, call its provider, record the outcome.

Used by the ``noti.deliver`` Celery task and by ``noti send``; neither has a policy of its
own. The claim makes delivery effectively once: a redelivered or duplicate message finds the
record leased (it is looked at again when the lease ends) or finished (nothing is sent).
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from dataclasses import dataclass

from noti.deadletter import DeadLetter
from noti.errors import NotiError
from noti.providers import Message
from noti.record import Channel, Notification, Status, msgid_field, now_ms
from noti.retry import RetryPolicy, decide, delivered
from noti.runtime import Runtime
from noti.store import Claim, ClaimState, Outcome

__all__ = ["SendResult", "Sender"]

log = logging.getLogger(__name__)

#: A record claimed this many times more than its attempt limit without ever finishing is
#: taken to crash its sender (e.g. kills the worker) and is made invalid.
POISON_MARGIN = 3


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
            return self._attempt(claim, owner)
        if claim.state is ClaimState.LEASED:
            # Someone holds it, or it waits for a back-off: look again when that ends, so a
            # message redelivered after a crash is never the record's last chance.
            rt.delayed.schedule(record_id, claim.until_ms + 1)
            note = "leased until " + str(claim.until_ms)
        elif claim.state is ClaimState.FINAL:
            note = f"already finished (st={int(claim.status or 0)})"
        elif claim.state is ClaimState.FOREIGN:
            note = "made by another user"
        else:
            note = "no such notification"
        log.debug("deliver %s: skipped, %s", record_id, note)
        return SendResult(record_id, "!!", claim.state, errmsg=note)

    def _attempt(self, claim: Claim, owner: str) -> SendResult:
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
                outcome = self._send(record)
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
        applied = rt.store.finish(
            record.id, owner=owner, outcome=outcome, letter=letter, letter_max_len=rt.dead_letters.max_len
        )
        if not applied:
            log.warning("deliver %s: lease lost before the outcome was recorded", record.id)
        elif letter is not None:
            rt.dead_letters.notify_hook(letter)
        mark = "OK" if outcome.status is Status.DONE else "KO"
        return SendResult(
            record.id, mark, ClaimState.CLAIMED, record.channel, record.target, outcome.status, outcome.errmsg
        )

    def _send(self, record: Notification) -> Outcome:
        rt = self.runtime
        try:
            policy = RetryPolicy.for_record(record, rt.settings)
        except NotiError:  # checked at add time; a later settings change may break it
            policy = RetryPolicy.from_settings(rt.settings)
        try:
            provider = rt.providers.chain(record.channel, record.provider)[0]
            receipt = provider.send(Message.from_record(record))
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
