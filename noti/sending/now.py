"""``noti send``: waiting records sent now, in this process, highest level first, oldest
first, each claimed first so that no worker sends it too (:meth:`noti.sending.notifier.Notifier.send`
checks the inputs and the acting user; this walks the waiting index). Split from
:mod:`noti.sending.notifier` (issue 39), unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator

from noti.access.users import User
from noti.core.attempt import ClaimState
from noti.core.record import Notification, Status
from noti.sending.runtime import Runtime
from noti.sending.sender import Sender, SendResult

__all__ = ["send_now"]

#: The longest claim ``noti send`` takes (its ``-timeout`` is capped to it).
SEND_TIMEOUT_MAX_S = 600.0
#: Waiting ids read from the index at a time.
_SEND_PAGE = 200


def send_now(
    runtime: Runtime,
    acting: User,
    record_id: str | None,
    *,
    creator: str | None,
    limit: int | None,
    timeout_s: float,
) -> Iterator[SendResult]:
    """Records sent now for ``acting`` (checked by the caller): ``record_id`` alone, or the
    waiting ones (of ``creator``, as ``acting`` may see), at most ``limit`` (None: all)."""
    lease_ms = max(1, int(min(timeout_s, SEND_TIMEOUT_MAX_S) * 1000))
    sender = Sender(runtime, owner=f"cli:{acting.name}")
    if record_id is not None:
        record = runtime.store.get(record_id)
        acting.require_access(record.creator, code="e.cmd.noti.send.nopvg", action="send notifications")
        yield _with_record(sender.deliver(record_id, lease_ms=lease_ms), record)
        return
    creator = acting.scope(creator, code="e.cmd.noti.send.nopvg", action="send notifications")
    sent = 0
    stuck: set[str] = set()  # ids still in the waiting index after we looked at them
    store = runtime.store
    while limit is None or limit <= 0 or sent < limit:
        with_stuck = store.waiting_head(len(stuck) + _SEND_PAGE)
        fresh = [i for i in with_stuck if i not in stuck]
        if not fresh:
            return
        for candidate in fresh:
            result = sender.deliver(candidate, lease_ms=lease_ms, creator=creator)
            if result.claim is not ClaimState.CLAIMED:
                stuck.add(candidate)
                continue
            if result.status is Status.WAITING:
                stuck.add(candidate)
            sent += 1
            yield result
            if limit is not None and 0 < limit <= sent:
                return


def _with_record(result: SendResult, record: Notification) -> SendResult:
    if result.channel is not None:
        return result
    return SendResult(
        result.record_id,
        result.mark,
        result.claim,
        record.channel,
        record.target,
        record.status,
        result.errmsg,
    )
