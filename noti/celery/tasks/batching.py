"""Batch delivery: the Celery strategy that runs ``noti.deliver`` messages a batch at a time.

Every notification is still one Celery task message (``noti.deliver`` with its record id);
what changes is how a worker runs them. The consumer hands each message to
:class:`DeliveryBatcher` instead of building a Celery request for it; the batcher gathers
the messages of one broker fetch (up to ``delivery_batch_max``) and, once the fetch is
handed out (the hub's ``call_soon``, so a lone message waits for nothing), flushes them:

1. the records are claimed: by the broker transport as it fetched the messages (the
   batcher sets :class:`~noti.celery.transport.DeliveryClaims` on the channel, so the fetch script
   claims them in the same call), else in one claim script call for the batch
   (:meth:`Sender.claim_records`); messages of records that are not ours to send (finished,
   leased, not due, gone) are acked at once;
2. records whose providers answer at once (the sandbox) are sent on the consumer thread;
   the others go to the process's send loop (:mod:`noti.sending.loop`), where they wait on
   the network concurrently while the consumer fetches the next batch;
3. a finish script call records the outcomes (dead letters included), then the messages
   are acked — after the outcome, as ``acks_late`` would — directly on the consumer thread
   (Celery's ack promise would defer each through the hub). On the send loop the outcomes
   are recorded as the answers come: those answered within
   :data:`~noti.celery.tasks.waves.CONCLUDE_WINDOW_S` of each other in one call, so a slow
   send never holds back the outcomes of the sends answered before it (a worker killed
   meanwhile would send those again): :mod:`noti.celery.tasks.waves`.

A message is acked only once its record's outcome is stored, so a crash loses nothing: its
messages come back after the visibility timeout and the claim keeps anything from being sent
twice. The prefetch window (``delivery_window``) bounds the sends in flight. Messages with an
ETA or an expiry take Celery's own path.

Celery's tools see each notification as a task whose id is its record id
(:mod:`noti.celery.report`): ``inspect`` lists what the batcher holds, Flower gets received,
started and one true outcome event (succeeded, failed, retried, revoked), and task signals
fire per notification when someone listens. The worker's task events are published every
0.1 s rather than once per event-loop turn. A message whose task id Celery's ``revoke``
named is not sent: its record is revoked (:meth:`~noti.core.store.RecordStore.revoke`) and the
message acked.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from typing import Any

from celery.worker import state as worker_state
from celery.worker.strategy import default as default_strategy

from noti.celery.report import DeliveryReport
from noti.celery.taskevents import PUBLISH_AT, PUBLISH_INTERVAL_S, TaskEvents
from noti.celery.tasks.held import Held
from noti.celery.tasks.waves import SendWaves
from noti.celery.transport import BulkChannel, DeliveryClaims, kombu_json
from noti.core.attempt import Claim, ClaimState, Outcome, Revoked, claim_from_row
from noti.errors import StoreUnavailable
from noti.sending.runtime import Runtime, get_runtime
from noti.sending.sender import Attempt, Sender, SendResult
from noti.sending.traces import note_outcome
from noti.tracing import active, start_delivery

__all__ = ["DeliveryBatcher", "delivery_claims"]

log = logging.getLogger(__name__)

#: When Redis does not answer the claim, the batch is tried again this much later (its
#: messages stay unacked meanwhile, so nothing is lost and nothing spins).
CLAIM_RETRY_S = 5.0


class DeliveryBatcher:
    """The ``noti.deliver`` strategy in batch mode (see the module docstring)."""

    def __init__(self, task: Any, app: Any, consumer: Any, **kwargs: Any) -> None:
        self.celery_path = default_strategy(task, app, consumer, **kwargs)
        self.consumer = consumer
        self.task_name = task.name
        self.hub = consumer.hub
        self.connection_errors = consumer.connection_errors
        eventer = consumer.event_dispatcher
        events = _process_task_events(eventer, task) if eventer is not None else None
        self.report = DeliveryReport(task, consumer, events)
        if events is not None:
            _publish_events_periodically(self.hub, events)
        self.owner = consumer.hostname or None
        #: Celery's per-worker rate-limit buckets (``celery control rate_limit`` replaces them:
        #: read at each use, never kept).
        self._buckets = consumer.task_buckets
        self._rate_limits = not app.conf.worker_disable_rate_limits
        #: Messages waiting for their rate limit's tokens, oldest first.
        self.limited: deque[Held] = deque()
        self._release_timer: Any = None
        # what the transport is told to claim with, for the runtime it was made from
        self._claims_for: tuple[Runtime, DeliveryClaims | None] | None = None
        self.pending: list[Held] = []
        #: The sends that wait on the network, on the send loop.
        self.waves = SendWaves(self.hub, self._ack_concluded)

    def __call__(self, message: Any, body: Any, ack: Any, reject: Any, callbacks: Any, **kw: Any) -> None:
        headers = message.headers
        if headers.get("eta") or headers.get("expires"):
            return self.celery_path(message, body, ack, reject, callbacks, **kw)  # type: ignore[no-any-return]
        try:
            args = _body(message)[0]
            record_id = args[0]
            if not isinstance(record_id, str) or len(args) != 1:
                raise ValueError(f"expected one record id, got {args!r:.80}")
        except Exception as exc:
            log.error("noti.deliver %s: refused a malformed message: %s", headers.get("id"), exc)
            self._reject(message, requeue=False)
            return None
        task_id = headers.get("id") or record_id
        claim = self._fetched_claim(message, record_id)
        held = Held(task_id, record_id, message, time.monotonic(), self.report, claim)
        self.report.reserved(held)
        if self.limited or (self._rate_limits and self._buckets[self.task_name] is not None):
            self.limited.append(held)
            if self._release_timer is None:
                self._release_limited()
            return None
        self.pending.append(held)
        if len(self.pending) == 1:
            self.hub.call_soon(self.flush)  # once this fetch is handed out
        elif len(self.pending) >= get_runtime().settings.delivery_batch_max:
            self.flush()
        return None

    def _release_limited(self) -> None:
        """Send the rate-limited messages the bucket has tokens for (one token each, as
        Celery takes them), and come back when the next token is due. Their claims may have
        waited past their leases: the batch renews or re-takes them first."""
        self._release_timer = None
        bucket = self._buckets[self.task_name] if self._rate_limits else None
        released: list[Held] = []
        while self.limited and (bucket is None or bucket.can_consume(1)):
            released.append(self.limited.popleft())
        if released:
            self._deliver_guarded(released, True)
        if self.limited and bucket is not None:
            wait_s = max(bucket.expected_time(1), 0.001)
            self._release_timer = self.hub.call_later(wait_s, self._release_limited)

    def _fetched_claim(self, message: Any, record_id: str) -> tuple[Claim, str, int] | None:
        """The claim the transport made for ``message``'s record, if it did; and have the
        transport claim as it fetches from now on (when the records share its database)."""
        channel = message.channel
        if not isinstance(channel, BulkChannel):
            return None
        claims = self._delivery_claims()
        if channel.delivery_claims is not claims:
            channel.delivery_claims = claims
        fetched = channel.fetched_claims.pop(message.delivery_tag, None)
        if fetched is None:
            return None
        try:
            claim = claim_from_row(fetched.row)
            if claim.record is not None and claim.record.id != record_id:
                raise ValueError(f"it claimed {claim.record.id}")
        except Exception as exc:  # a bug: claim it the usual way (finding it leased until then)
            log.error("noti.deliver %s: cannot use the claim made by the fetch: %r", record_id, exc)
            return None
        return claim, fetched.owner, fetched.lease_ms

    def _delivery_claims(self) -> DeliveryClaims | None:
        rt = get_runtime()  # the runtime of now (tests reconfigure)
        if self._claims_for is None or self._claims_for[0] is not rt:
            self._claims_for = (rt, delivery_claims(rt, self.task_name, Sender(rt, owner=self.owner)))
        return self._claims_for[1]

    def flush(self) -> None:
        """Claim the pending batch, send it, and record and ack what finished here."""
        batch, self.pending = self.pending, []
        if batch:
            self._deliver_guarded(batch)

    def _deliver_guarded(self, batch: list[Held], retried: bool = False) -> None:
        try:
            self._deliver(batch, retried)
        except Exception:  # a bug: never let it stop the consumer, and lose nothing
            log.exception("noti.deliver: a batch of %d failed; its messages are queued again", len(batch))
            self._requeue([h for h in batch if not h.taken])

    def _deliver(self, batch: list[Held], retried: bool = False) -> None:
        sender = Sender(get_runtime(), owner=self.owner)  # the runtime of now (tests reconfigure)
        try:
            if retried:
                self._keep_claims(sender, batch)
            # claimed by the transport as it fetched them, or now (one script call)
            to_claim = [held for held in batch if held.claim is None]
            if to_claim:
                claims, owner, lease = sender.claim_records([held.record_id for held in to_claim])
                for held, claim in zip(to_claim, claims, strict=True):
                    held.claim = (claim, owner, lease)
            ready, results = sender.sort_claims(
                [(held.record_id, *held.claim) for held in batch if held.claim is not None]
            )
        except StoreUnavailable as exc:
            log.warning(
                "noti.deliver: cannot claim %d record(s) (%s); again in %.0f s",
                len(batch),
                exc,
                CLAIM_RETRY_S,
            )
            self.hub.call_later(CLAIM_RETRY_S, self._deliver_guarded, batch, True)
            return
        claimed: list[Held] = []
        for held, result in zip(batch, results, strict=True):
            if result is None:
                claimed.append(held)
            elif result.revoked:  # a revoke asked while another sender held it: revoked now
                held.taken = True
                self._ack(held.message)
                self.report.revoked(held, held.retries)
            else:  # nothing to send: done with the message
                self._settled([held], [result])
        pairs = list(zip(claimed, ready, strict=True))
        if worker_state.revoked:
            pairs = self._drop_revoked(sender, pairs)
        self.report.started([(held, held.retries) for held, _ in pairs])
        inline: list[tuple[Held, Attempt]] = []
        waiting: list[tuple[Held, Attempt]] = []
        for held, attempt in pairs:
            (inline if sender.inline(attempt.record) else waiting).append((held, attempt))
        if waiting:
            self.waves.submit(sender, [h for h, _ in waiting], [a for _, a in waiting])
        if inline:
            attempts = [attempt for _, attempt in inline]
            spans = _delivery_spans(inline) if active() else []
            outcomes = sender.attempt_many(attempts, hold_leases=False)  # they answer at once
            for span, outcome in zip(spans, outcomes, strict=False):  # none when not traced
                note_outcome(span, outcome)
                span.end()
            self._conclude(sender, [h for h, _ in inline], list(zip(attempts, outcomes, strict=True)))

    def _drop_revoked(self, sender: Sender, pairs: list[tuple[Held, Attempt]]) -> list[tuple[Held, Attempt]]:
        """Revoke the claimed records whose task ids Celery's ``revoke`` named (this worker
        holds their leases, so the revoke is its to make), ack their messages; the rest."""
        revoked = [(held, attempt) for held, attempt in pairs if held.id in worker_state.revoked]
        if not revoked:
            return pairs
        try:
            for held, attempt in revoked:
                done = sender.runtime.store.revoke([held.record_id], reason="revoked", owner=attempt.owner)
                if done[0] is not Revoked.REVOKED:  # not ours after all: sent as usual
                    continue
                held.taken = True
                self._ack(held.message)
                self.report.revoked(held, held.retries)
        except StoreUnavailable as exc:  # never send what was revoked: put it back for later
            log.warning("noti.deliver: could not revoke (%s); the message is queued again", exc)
            self._requeue([held for held, _ in revoked if not held.taken])
        return [(held, attempt) for held, attempt in pairs if not held.taken]

    @staticmethod
    def _keep_claims(sender: Sender, batch: list[Held]) -> None:
        """Before a retry: renew the leases the batch still holds (nothing renewed them while
        Redis was away); a record whose lease went to another sender is claimed again."""
        held = [h for h in batch if h.claim is not None and h.claim[0].state is ClaimState.CLAIMED]
        if not held:
            return
        lease_ms = max(h.claim[2] for h in held if h.claim is not None)
        kept = sender.runtime.store.renew(
            [(h.record_id, h.claim[1]) for h in held if h.claim is not None], lease_ms=lease_ms
        )
        for h, still_ours in zip(held, kept, strict=True):
            if not still_ours:
                h.claim = None

    def _conclude(self, sender: Sender, held: list[Held], outcomes: list[tuple[Attempt, Outcome]]) -> None:
        try:
            results = sender.conclude_many(outcomes)
        except StoreUnavailable:
            log.error("noti.deliver: %d outcome(s) could not be recorded", len(held))
            self._requeue(held)
            return
        self._settled(held, results)

    def _ack_concluded(self) -> set[Any]:
        """On the consumer thread: ack (or requeue) what the send loop finished with; the
        channels acked on."""
        channels: dict[int, Any] = {}
        while self.waves.concluded:
            held, results = self.waves.concluded.popleft()
            if results is None:
                self._requeue(held)
                continue
            for h, result in zip(held, results, strict=True):
                try:
                    self._ack(h.message)
                    channels[id(h.message.channel)] = h.message.channel
                except Exception:  # e.g. the broker refused the ack flush: the message comes
                    log.exception("noti.deliver %s: could not ack", h.record_id)  # back; claim refuses it
                finally:  # the outcome is stored either way
                    self.report.concluded(h, result.outcome, h.retries)
        return set(channels.values())

    def drain(self, timeout_s: float) -> None:
        """Wait (up to ``timeout_s``) for the sends in flight, then ack them and publish the
        task events waiting: called when the consumer stops, while its channel is still open."""
        if self.limited:  # not sent yet: back to the queue, for the next worker
            limited, self.limited = list(self.limited), deque()
            self._requeue(limited)
        deadline = time.monotonic() + timeout_s
        while self.waves.in_flight and time.monotonic() < deadline:
            time.sleep(0.01)  # each batch leaves once it is handed back
        for channel in self._ack_concluded():
            flush = getattr(channel.qos, "flush_acks", None)  # noti.celery.transport buffers acks
            if flush is not None:
                flush()
        if self.report.events is not None:  # the dispatcher is still open (Events stops later)
            self.report.events.flush()

    def _ack(self, message: Any) -> None:
        try:
            message.ack_log_error(log, self.connection_errors)
        finally:  # a failed ack too, as Celery's promise steps on its error
            self._prefetch_step()

    def _reject(self, message: Any, *, requeue: bool) -> None:
        try:
            message.reject_log_error(log, self.connection_errors, requeue=requeue)
        finally:
            self._prefetch_step()

    def _prefetch_step(self) -> None:
        """One step back towards the worker's whole prefetch window, when a broker connection
        loss reduced it. Celery (before 5.7 on Redis) shrinks the window by the requests in
        flight when the connection is lost and widens it again one step per message acked
        or rejected, through the promises its consumer hands the strategy; this batcher acks
        messages itself, so it takes the steps itself (else the window stayed reduced until
        the worker restarted)."""
        consumer = self.consumer
        if not getattr(consumer, "_maximum_prefetch_restored", True):
            consumer._restore_prefetch_count_after_connection_restart(None)

    def _settled(self, held: list[Held], results: list[SendResult]) -> None:
        for h, result in zip(held, results, strict=True):
            h.mark, h.taken = result.mark, True
            self._ack(h.message)
            self.report.concluded(h, result.outcome, h.retries)

    def _requeue(self, held: list[Held]) -> None:
        """Put the messages back: their records are leased, so the claim of the redelivery
        schedules a look at the lease's end (:meth:`Sender.claim_many`)."""
        for h in held:
            h.taken = True
            self.report.concluded(h, None, h.retries)  # received again after the requeue
            try:
                self._reject(h.message, requeue=True)
            except Exception:  # it comes back after the visibility timeout instead
                log.exception("noti.deliver %s: could not requeue", h.record_id)


def _delivery_spans(inline: list[tuple[Held, Attempt]]) -> list[Any]:
    """A ``noti.deliver`` span per record sent on the consumer thread (providers that make
    no request: the spans need not be current), each in the trace its message carries."""
    return [
        start_delivery(h.message.headers, a.record.id, a.record.channel.value, task_id=h.id)
        for h, a in inline
    ]


def delivery_claims(rt: Runtime, task: str, sender: Sender) -> DeliveryClaims | None:
    """What the broker transport needs to claim records for ``sender`` as it fetches
    ``task`` messages; None when the records are not in the broker's database."""
    if rt.settings.broker != rt.settings.redis_url:
        return None
    return DeliveryClaims(
        task=task,
        record_prefix=rt.keys.record(""),
        optouts=rt.store.optouts,
        lease_ms=sender.lease_ms,
        owner_prefix=sender.owner_prefix,
    )


def _body(message: Any) -> Any:
    """The decoded body (:func:`~noti.celery.transport.kombu_json` for JSON, else kombu's decode,
    which also enforces the accepted content types)."""
    body = message.body
    if message.content_type == "application/json" and isinstance(body, bytes | str):
        return kombu_json(body)
    return message.decode()


_event_timer: Any = None
#: This process's task events: a restarted consumer's batcher rebinds them to its dispatcher
#: (with the events not published yet), and the sends in flight of the one before report
#: through them too.
_task_events: TaskEvents | None = None


def _process_task_events(eventer: Any, task: Any) -> TaskEvents:
    global _task_events
    if _task_events is None:
        _task_events = TaskEvents(eventer, task)
    else:
        _task_events.rebind(eventer)
    return _task_events


def _publish_events_periodically(hub: Any, events: TaskEvents) -> None:
    """Publish the worker's task events every :data:`~noti.celery.taskevents.PUBLISH_INTERVAL_S`
    (:meth:`TaskEvents.flush`: the batcher's and those Celery's dispatcher buffered for the
    tasks that take Celery's path) instead of once per event-loop turn: a busy batch worker
    turns its loop thousands of times a second, and each publish is a Redis round trip."""
    global _event_timer
    if _event_timer is not None:  # a restarted consumer: the old dispatcher is gone
        _event_timer.cancel()
    eventer = events.dispatcher
    eventer.on_send_buffered = None
    eventer.buffer_limit = max(eventer.buffer_limit, PUBLISH_AT)
    _event_timer = hub.call_repeatedly(PUBLISH_INTERVAL_S, events.flush)
