"""A batch's sends that wait on the network, on the process's send loop
(:mod:`noti.sending.loop`): sent concurrently, their outcomes recorded in waves as the
answers come (:data:`CONCLUDE_WINDOW_S`), each wave handed back to the consumer thread to be
acked (:class:`~noti.celery.tasks.batching.DeliveryBatcher`)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
from collections import deque
from collections.abc import Callable
from typing import Any

from noti.celery.tasks.held import Held
from noti.core.attempt import Outcome
from noti.sending.loop import send_loop
from noti.sending.sender import Attempt, Sender, SendResult
from noti.sending.traces import note_outcome
from noti.tracing import delivering

__all__ = ["CONCLUDE_WINDOW_S", "SendWaves"]

# the batcher's logger: these lines keep the name operators filter the batcher's by
log = logging.getLogger("noti.celery.tasks.batching")

#: Once a send of a batch is answered, the others answered within this long (or until all
#: are) have their outcomes recorded with it in one finish call; a later answer starts the
#: next wave. Sends answered together (the usual case) are one wave, as when the batch's
#: outcomes were recorded only once all had answered.
CONCLUDE_WINDOW_S = 0.02


class SendWaves:
    """The sends of one batcher on the send loop: :meth:`submit` starts them; the outcomes
    recorded wait in :attr:`concluded` until ``on_concluded`` (called through the hub, on
    the consumer thread) acks or requeues them."""

    def __init__(self, hub: Any, on_concluded: Callable[[], object]) -> None:
        self.hub = hub
        self._on_concluded = on_concluded
        #: Outcomes recorded on the send loop, waiting for the consumer thread to ack them
        #: (None: not recorded, to be requeued).
        self.concluded: deque[tuple[list[Held], list[SendResult] | None]] = deque()
        #: The batches whose sends are not over yet.
        self.in_flight: set[concurrent.futures.Future[None]] = set()

    def submit(self, sender: Sender, held: list[Held], attempts: list[Attempt]) -> None:
        """Send ``attempts`` (the messages ``held``, no longer the caller's to settle) on the
        send loop."""
        future = send_loop().submit(self._send_waiting(sender, held, attempts))
        for h in held:
            h.taken = True
        self.in_flight.add(future)
        future.add_done_callback(lambda f: self._on_sent(held, f))

    async def _send_waiting(self, sender: Sender, held: list[Held], attempts: list[Attempt]) -> None:
        """On the send loop: send ``attempts`` (the messages ``held``) and record their
        outcomes in waves as the answers come (:data:`CONCLUDE_WINDOW_S`), each wave handed
        back to the consumer thread to be acked."""
        leases = [(a.record.id, a.owner, a.lease_ms) for a in attempts]
        with sender.runtime.lease_keeper.hold_many(leases) as release:
            if len(attempts) == 1:  # no task of its own: it starts now, not a loop turn later
                outcome = await _attempt(sender, attempts[0], held[0])
                release([0])
                await self._conclude_wave(sender, held, attempts, [(0, outcome)])
                return
            answered: list[tuple[int, Outcome | Exception]] = []
            arrived, everyone = asyncio.Event(), asyncio.Event()
            left = [len(attempts)]  # sends not concluded yet

            async def send(i: int) -> None:
                answered.append((i, await _attempt(sender, attempts[i], held[i])))
                arrived.set()
                if len(answered) >= left[0]:
                    everyone.set()

            tasks = [asyncio.ensure_future(send(i)) for i in range(len(attempts))]
            try:
                while left[0]:
                    await arrived.wait()
                    if len(answered) < left[0]:  # the answers coming about now join this wave
                        with contextlib.suppress(TimeoutError):
                            await asyncio.wait_for(everyone.wait(), CONCLUDE_WINDOW_S)
                    wave = list(answered)
                    answered.clear()
                    arrived.clear()
                    everyone.clear()
                    left[0] -= len(wave)
                    release([i for i, _ in wave])
                    await self._conclude_wave(sender, held, attempts, wave)
            finally:
                for task in tasks:  # only when this coroutine is cancelled (the loop stops)
                    task.cancel()

    async def _conclude_wave(
        self,
        sender: Sender,
        held: list[Held],
        attempts: list[Attempt],
        wave: list[tuple[int, Outcome | Exception]],
    ) -> None:
        """Record the outcomes of ``wave`` (positions in ``attempts``) in one finish call and
        hand them back; a send that raised (a bug) is put back in the queue."""
        sent = [(i, outcome) for i, outcome in wave if isinstance(outcome, Outcome)]
        for i, outcome in wave:
            if not isinstance(outcome, Outcome):
                log.error("noti.deliver %s: the send failed: %r", attempts[i].record.id, outcome)
                self._hand_back([held[i]], None)
        if not sent:
            return
        results: list[SendResult] | None = None
        pairs = [(attempts[i], outcome) for i, outcome in sent]
        try:
            recorder = send_loop().recorder  # never behind the blocking sends of the default pool
            results = await asyncio.get_running_loop().run_in_executor(recorder, sender.conclude_many, pairs)
        except Exception as exc:
            log.error("noti.deliver: %d outcome(s) could not be recorded: %s", len(pairs), exc)
        self._hand_back([held[i] for i, _ in sent], results)

    def _hand_back(self, held: list[Held], results: list[SendResult] | None) -> None:
        """From the send loop: give ``held`` to the consumer thread, to be acked once their
        outcomes are recorded (``results``) or requeued (None). The hub's ``call_soon`` is
        thread-safe and wakes it."""
        for i, h in enumerate(held):
            h.handed_back = True
            if results is not None:
                h.mark = results[i].mark
        self.concluded.append((held, results))
        self.hub.call_soon(self._on_concluded)

    def _on_sent(self, held: list[Held], future: concurrent.futures.Future[None]) -> None:
        """On the send loop, once a batch's sends are over: what was not handed back (the
        coroutine failed or was cancelled) goes back to the queue."""
        left = [h for h in held if not h.handed_back]
        if left:
            exc = "cancelled" if future.cancelled() else future.exception()
            log.error("noti.deliver: %d outcome(s) could not be recorded: %s", len(left), exc)
            self._hand_back(left, None)
        self.in_flight.discard(future)


async def _attempt(sender: Sender, attempt: Attempt, held: Held) -> Outcome | Exception:
    """One send's outcome, or what it raised (a bug: never let it stop the batch's other
    sends or keep their outcomes from being recorded). Traced, it is the record's
    ``noti.deliver`` span, in the trace its message carries (this coroutine is a task of its
    own: the span is current for its provider calls only)."""
    record = attempt.record
    with delivering(held.message.headers, record.id, record.channel.value, task_id=held.id) as span:
        try:
            outcome = await sender.attempt_async(attempt)
        except Exception as exc:
            return exc
        note_outcome(span, outcome)
        return outcome
