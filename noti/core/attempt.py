"""What a send attempt finds and leaves: a claim (:class:`Claim`, read from the claim
scripts' rows), its outcome (:class:`Outcome`, decided by :mod:`noti.core.retry`), the finish
that records it (:class:`Finish`) and a revoke's answer (:class:`Revoked`).

These are values only: the sender, the retry policy, the broker transport's fetch and the
control commands share them without the store's Redis calls (:mod:`noti.core.store`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from noti.core.deadletter import DeadLetter
from noti.core.record import Notification, Status, from_hash

__all__ = [
    "REVOKED_CODE",
    "Finished",
    "ErasedReceipt",
    "UNSURE_FIELD",
    "CallNote",
    "Claim",
    "ClaimState",
    "Finish",
    "Outcome",
    "Revoked",
    "claim_from_row",
]

#: Hash field ("1") of a record an earlier attempt of which may have been sent: set through the
#: outcome's fields (:func:`noti.core.retry.decide`, the sender) and kept until the record is sent
#: (finish.lua), so every later attempt asks the vendor first.
UNSURE_FIELD = "_unsure"


class ClaimState(enum.Enum):
    CLAIMED = 1  #: the caller holds the lease and may send
    LEASED = 2  #: waiting, but another sender holds it or it is not due yet
    FINAL = 3  #: not waiting any more (done, failed or invalid)
    FOREIGN = 4  #: made by another user than the one required
    NOT_DUE = 5  #: waiting for its time in the delayed set: leave it alone
    MISSING = 0  #: no such record


@dataclass(frozen=True, slots=True)
class Claim:
    """What a claim attempt found."""

    state: ClaimState
    record: Notification | None = None
    #: For LEASED: the ms when the lease ends; for NOT_DUE: when it is due.
    until_ms: int = 0
    #: For FINAL: the status found.
    status: Status | None = None
    #: For CLAIMED: claims since the record was last finished, this one included.
    claims: int = 0
    #: For CLAIMED: the target opted out of the record's channel.
    suppressed: bool = False
    #: For CLAIMED: a revoke found the record held by another sender; the claimer revokes it.
    revoke_requested: bool = False
    #: For CLAIMED: an earlier attempt ended without knowing whether it was sent (``_unsure``).
    unsure: bool = False
    #: For CLAIMED: why the recipient's preferences refuse it now (``optout``, ``erased``;
    #: :mod:`noti.recipients`), "" when they take it or it has no recipient.
    unsubscribed: str = ""

    @property
    def in_doubt(self) -> bool:
        """For CLAIMED: an earlier attempt may have been sent. Either it ended ambiguous
        (:attr:`unsure`), or it never recorded an outcome at all (the claim before this one
        is still counted in ``_inflight``: its sender died, maybe mid-send). The claim script
        wrote both marks already, so knowing costs no round trip."""
        return self.unsure or self.claims > 1


@dataclass(frozen=True, slots=True)
class Outcome:
    """The new state of a record after a send attempt (decided by :mod:`noti.core.retry`)."""

    status: Status
    errmsg: str
    retry: int
    #: For WAITING: when the next attempt is due (the record is re-queued then).
    not_before_ms: int = 0
    expires_ms: int | None = None
    #: Extra hash fields to set (provider that delivered, message id).
    fields: tuple[tuple[str, str], ...] = ()
    #: For FAILED / INVALID: the dead-letter class (``exhausted``, ``invalid``, ``config``,
    #: ``unexpected``, ``poison``).
    error_class: str = ""


class Revoked(enum.Enum):
    """What :meth:`~noti.core.store.RecordStore.revoke` did to a record."""

    REVOKED = 1  #: it waited; now invalid (-1) with ``noti_revoked_at``
    MISSING = 0  #: no such record
    HELD = 2  #: another sender holds its lease: the record is marked, its next claimer revokes it
    FINAL = 3  #: not waiting any more (done, failed, invalid or revoked before)


#: The code at the start of a revoked record's ``noti_errmsg``.
REVOKED_CODE = "e.cmd.noti.revoked"


@dataclass(frozen=True, slots=True)
class CallNote:
    """One provider call of an attempt, as the sender saw it (the sending layer turns its
    answers into these: :func:`noti.sending.failover.call_note`)."""

    provider: str
    at_ms: int
    seconds: float
    #: ``ok`` (the vendor took it), ``failed`` (a delivery error), ``waited`` (our rate limit
    #: kept it from being sent), ``error`` (the provider itself broke).
    outcome: str
    msgid: str | None = None
    #: noti's error code (``e.noti.delivery.temporary``…), the vendor's own code, the text.
    code: str = ""
    vendor_code: str = ""
    text: str = ""


@dataclass(frozen=True, slots=True)
class Finish:
    """One send's outcome to record, fenced by the lease ``owner`` that claimed it."""

    record_id: str
    owner: str
    outcome: Outcome
    #: Appended to the dead-letter stream in the same atomic step.
    letter: DeadLetter | None = None
    #: Each provider call of the attempt, in order, as its timeline tells it
    #: (:mod:`noti.core.timeline`).
    notes: tuple[CallNote, ...] = ()

    @property
    def provider(self) -> str:
        """The provider whose answer decided the outcome, the last one called ("": none
        answered), for the counters."""
        return self.notes[-1].provider if self.notes else ""

    @property
    def calls(self) -> tuple[tuple[str, float], ...]:
        """Each provider call, ``(provider, seconds)``: the latency histogram's (and the key
        records of a batch share their tally by: a provider group's calls took as long)."""
        return tuple((note.provider, note.seconds) for note in self.notes)


def claim_from_row(row: list[Any]) -> Claim:
    """The claim a ``claim_record.lua`` row describes (``claim.lua``, ``bulk_fetch.lua``)."""
    state = ClaimState(int(row[0]))
    if state is ClaimState.CLAIMED:
        fields = iter(row[1:])
        data = dict(zip(fields, fields, strict=True))
        return Claim(
            state,
            record=from_hash(data),
            claims=int(data.get("_inflight", "1")),
            suppressed=data.get("_suppressed") == "1",
            revoke_requested="noti_revoke_requested" in data,
            unsure=bool(data.get(UNSURE_FIELD)),
            unsubscribed=data.get("_prefout", ""),
        )
    if state in (ClaimState.LEASED, ClaimState.NOT_DUE):
        return Claim(state, until_ms=int(row[1]))
    if state is ClaimState.FINAL:
        return Claim(state, status=Status(int(row[1])))
    return Claim(state)


class Finished(enum.Enum):
    """An applied outcome :meth:`~noti.core.store.RecordStore.finish_many` says more of (true,
    as every applied one)."""

    #: Applied to a record whose recipient was erased while it was sent: written without the
    #: address or the vendor's words; the caller's hooks (a dead-letter hook, an application's
    #: handler) get the record and its dead letter masked likewise.
    ERASED_MEANWHILE = 2


class ErasedReceipt(str):
    """An early receipt's JSON :meth:`~noti.core.store.RecordStore.finish_many` answers (to be
    applied, as any) for a record whose recipient was also erased while it was sent (its hooks
    get it masked, as :attr:`Finished.ERASED_MEANWHILE` says)."""

    __slots__ = ()
