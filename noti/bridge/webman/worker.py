"""The loops that feed a :class:`~noti.bridge.webman.consumer.Consumer`, as the plugin's
``QueueConsumer`` does, minus its silent failures.

* :meth:`QueueWorker.read_once` is one consume tick: ``XREADGROUP … COUNT prefetch BLOCK ms
  STREAMS <stream> >``, then each entry through :meth:`QueueWorker.process` (ack, delete,
  retry or dead letter as ``processMessage``). One difference: the auto-acks of a tick go
  out together, one ``XACK`` and one ``XDEL`` naming all its entries, and the loop sends
  them in the same round trip as its next read, before it (PHP: an ``XACK`` and an
  ``XDEL`` round trip per entry) — a tick costs one round trip, not 1 + 2 × prefetch. An
  entry is thus acked later than PHP would (never earlier), by at most a second and a
  quarter of the pending timeout, so the pending check does not take it; if the worker
  dies in between, the pending check hands it out again, as after a death mid-consume.
* :meth:`QueueWorker.check_pending` is one pending check: PHP worker 0's lock, ``XPENDING - +
  batch``, ``XCLAIM`` of entries idle past the timeout, then ``handle_pending_timeout``; the
  entry is acked (and deleted) only when that returns, so a failure leaves it pending.
* An entry PHP would drop or choke on goes to :meth:`Consumer.handle_malformed` (logged and
  dead-lettered), then is acked and deleted: never silently, never left to jam the queue.
* :meth:`QueueWorker.run` survives what stops a PHP worker in silence: a Redis restart (it
  waits with a back-off capped at 5 s, logging the outage and the recovery once each) and a
  deleted stream or group (``NOGROUP``: it recreates the group with start id ``0`` and logs
  it).
* :class:`Housekeeper` runs the delayed-task mover (under noti's per-queue mover lock) and the
  pending checks of one queue.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from typing import Any, cast

import redis

from noti.bridge.webman.codec import parse_entry
from noti.bridge.webman.consumer import Consumer, ConsumerMessage
from noti.bridge.webman.mover import DelayedMover
from noti.errors import MalformedMessage, NotiError, StoreUnavailable
from noti.redis.outage import Outage, translate_errors
from noti.redis.pipelines import run_commands

__all__ = ["Housekeeper", "QueueWorker"]

log = logging.getLogger(__name__)

#: Longest an auto-acked entry waits for its XACK (see QueueWorker.settle_within_s).
_SETTLE_WITHIN_S = 1.0
#: The pending-check lock's time-to-live, as PHP sets it.
PENDING_LOCK_TTL_S = 300
_MAX_BACKOFF_S = 5.0


def _is_nogroup(exc: BaseException) -> bool:
    """The group is gone: ``NOGROUP``, or (Redis >= 7) ``UNBLOCKED the stream key no longer
    exists``, what a reader blocked in XREADGROUP gets when the stream is deleted under it."""
    return isinstance(exc, redis.ResponseError) and str(exc).startswith(("NOGROUP", "UNBLOCKED"))


class QueueWorker:
    """Reads and processes the entries of one consumer's queue."""

    def __init__(self, consumer: Consumer) -> None:
        self.consumer = consumer
        self.redis = consumer.redis
        self.keys = consumer.keys
        #: Entries consumed and auto-acked whose XACK (and XDEL) are not sent yet.
        self._settling: list[str] = []

    # --- group ------------------------------------------------------------------------------

    def ensure_group(self) -> bool:
        """``XGROUP CREATE <stream> <group> 0 MKSTREAM``; whether it was created (False: it existed)."""
        try:  # not under translate_errors: it takes "BUSYGROUP" for Redis's "BUSY"
            self.redis.xgroup_create(self.keys.stream, self.consumer.names.group, id="0", mkstream=True)
        except redis.ResponseError as exc:
            if str(exc).startswith("BUSYGROUP"):
                return False
            raise
        return True

    def _recreate_group(self) -> None:
        if self.ensure_group():
            log.warning(
                "webman %s: group %s was missing on %s (stream deleted or Redis emptied); recreated it",
                self.consumer.names.queue,
                self.consumer.names.group,
                self.keys.stream,
            )

    def leave_group(self) -> None:
        """Remove this worker's consumer from the group if it holds no pending entry."""
        consumer = self.consumer
        try:
            with translate_errors(self.redis):
                mine = self.redis.xpending_range(
                    self.keys.stream, consumer.names.group, "-", "+", 1, consumername=consumer.consumer_name
                )
                if not mine:
                    self.redis.xgroup_delconsumer(
                        self.keys.stream, consumer.names.group, consumer.consumer_name
                    )
        except (NotiError, redis.RedisError) as exc:
            log.debug("webman %s: could not leave the group: %s", consumer.names.queue, exc)

    # --- consuming --------------------------------------------------------------------------

    def read_once(self, *, block_ms: int | None = None, settle: bool = True) -> int:
        """One consume tick; how many entries it read.

        The entries it auto-acks are acked (and deleted) together, in one round trip at its
        end; with ``settle=False`` (what :meth:`run` does) they go in the same round trip as
        the next tick's read, before it. Either way one tick costs one or two round trips,
        not two per entry. A tick that runs long settles as it goes: no entry waits for its
        ack more than :meth:`settle_within_s` after its consume.
        """
        consumer = self.consumer
        settling, self._settling = self._settling, []
        read = (
            *("XREADGROUP", "GROUP", consumer.names.group, consumer.consumer_name),
            *("COUNT", consumer.prefetch_count),
            *("BLOCK", consumer.block_time_ms if block_ms is None else block_ms),
            *("STREAMS", self.keys.stream, ">"),
        )
        try:
            with translate_errors(self.redis):
                replies = run_commands(
                    self.redis, [*self._settle_commands(settling), read], raise_on_error=False
                )
        except BaseException:
            self._settling = settling + self._settling  # acking again is harmless: try next time
            raise
        self._log_settle_errors(settling, replies[:-1])
        reply = replies[-1]
        if isinstance(reply, Exception):
            if not _is_nogroup(reply):
                with translate_errors(self.redis):  # LOADING, READONLY …: StoreUnavailable
                    raise reply
            self._recreate_group()
            return 0
        count = 0
        within_s = self.settle_within_s()
        since = time.monotonic()
        for _stream, entries in cast(list[Any], reply or []):
            for message_id, flat in entries:  # RESP2: [id, [field, value, …]] (nil if deleted)
                count += 1
                self.process(
                    message_id, None if flat is None else dict(zip(flat[::2], flat[1::2], strict=True))
                )
                if self._settling and time.monotonic() - since >= within_s:
                    self._settle_or_log()
                    since = time.monotonic()
        if settle:
            self.settle()
        return count

    def settle(self) -> None:
        """Ack (and, with ``auto_delete``, delete) the entries auto-acked and not yet settled,
        in one round trip.

        Raises:
            StoreUnavailable: Redis cannot be reached (they are kept for the next try).
        """
        settling, self._settling = self._settling, []
        if not settling:
            return
        try:
            with translate_errors(self.redis):
                replies = run_commands(self.redis, self._settle_commands(settling), raise_on_error=False)
        except BaseException:
            self._settling = settling + self._settling
            raise
        self._log_settle_errors(settling, replies)

    def settle_within_s(self) -> float:
        """How long an auto-acked entry may wait for its ack: a second at most, and a
        quarter of the pending timeout, so the pending check never takes an entry that was
        consumed already."""
        return min(_SETTLE_WITHIN_S, self.consumer.pending_timeout_s / 4)

    def _settle_or_log(self) -> None:
        try:
            self.settle()
        except (NotiError, redis.RedisError) as exc:  # kept for the next try
            log.warning("webman %s: could not ack entries yet: %s", self.consumer.names.queue, exc)

    def _settle_commands(self, message_ids: list[str]) -> list[tuple[Any, ...]]:
        """The XACK (and with ``auto_delete`` the XDEL) of ``message_ids``, if any."""
        if not message_ids:
            return []
        commands: list[tuple[Any, ...]] = [
            ("XACK", self.keys.stream, self.consumer.names.group, *message_ids)
        ]
        if self.consumer.auto_delete:
            commands.append(("XDEL", self.keys.stream, *message_ids))
        return commands

    def _log_settle_errors(self, message_ids: list[str], replies: list[Any]) -> None:
        for reply in replies:
            if isinstance(reply, Exception):  # the entries stay pending: the pending check sees them
                log.warning(
                    "webman %s: ack/delete of %d entries (%s…) failed: %s",
                    self.consumer.names.queue,
                    len(message_ids),
                    message_ids[0],
                    reply,
                )

    def process(self, message_id: str, fields: dict[str, str] | None) -> None:
        """Handle one delivered entry as ``processMessage`` does; an auto-ack is left to
        :meth:`settle` (or the next read)."""
        consumer = self.consumer
        parsed = self._parse(message_id, fields)
        if parsed is None:
            return
        message = ConsumerMessage(message_id, parsed[0], parsed[1], consumer)
        settling = False
        try:
            try:
                consumer.consume(message)
                if consumer.auto_ack and not message.acked:
                    message.acked = settling = True
                    self._settling.append(message_id)
            except Exception as exc:
                self._after_failure(message, exc)
        finally:
            if message.ack_status and consumer.auto_delete and not settling:
                consumer.xdel(message_id)

    def _after_failure(self, message: ConsumerMessage, exc: Exception) -> None:
        queue = self.consumer.names.queue
        log.info("webman %s: consume failed for %s: %s: %s", queue, message.id, type(exc).__name__, exc)
        message.trigger_error(exc)
        if message.fail_retry_disabled:
            if not message.acked:
                message.ack()
            return
        if message.acked:
            return
        try:
            retried = message.trigger_fail_retry(exc)
        except Exception:
            log.exception("webman %s: retry of %s failed; the entry stays pending", queue, message.id)
            return
        if retried and not message.acked:
            message.ack()

    def _parse(self, message_id: str, fields: dict[str, str] | None) -> tuple[Any, str] | None:
        """The entry's message, or None when it was discarded (deleted, malformed, foreign)."""
        consumer = self.consumer
        if fields is None:  # deleted while pending
            log.warning("webman %s: entry %s no longer exists; acking it", consumer.names.queue, message_id)
            consumer.ack_and_delete(message_id)
            return None
        try:
            return parse_entry(
                fields,
                queue_name=consumer.names.queue,
                php_class=consumer.names.php_class,
                now_s=consumer.now_s(),
            )
        except MalformedMessage as error:
            try:
                consumer.handle_malformed(message_id, fields.get("message"), error)
            except Exception:
                log.exception(
                    "webman %s: could not set aside entry %s; it stays pending",
                    consumer.names.queue,
                    message_id,
                )
                return None
            consumer.ack_and_delete(message_id)
            return None

    # --- pending check ----------------------------------------------------------------------

    def check_pending(self) -> int:
        """One pending check (skipped while another noti or PHP check holds the lock); entries handled."""
        consumer = self.consumer
        token = secrets.token_hex(16)
        with translate_errors(self.redis):
            if not self.redis.set(self.keys.pending_lock, token, nx=True, ex=PENDING_LOCK_TTL_S):
                return 0
        try:
            return self._check_pending()
        finally:
            try:
                with translate_errors(self.redis):
                    if self.redis.get(self.keys.pending_lock) == token:
                        self.redis.delete(self.keys.pending_lock)
            except (NotiError, redis.RedisError) as exc:
                log.warning("webman %s: could not release the pending lock: %s", consumer.names.queue, exc)

    def _check_pending(self) -> int:
        consumer = self.consumer
        names = consumer.names
        try:
            with translate_errors(self.redis):
                rows = self.redis.xpending_range(
                    self.keys.stream, names.group, "-", "+", consumer.pending_check_batch
                )
        except redis.ResponseError as exc:
            if _is_nogroup(exc):
                return 0
            raise
        handled = 0
        for row in rows:
            idle_ms = int(row["time_since_delivered"])
            if idle_ms < consumer.pending_timeout_s * 1000:
                continue
            message_id = str(row["message_id"])
            with translate_errors(self.redis):
                claimed = self.redis.xclaim(
                    self.keys.stream, names.group, consumer.consumer_name, 0, [message_id]
                )
            fields = dict(cast(list[tuple[str, dict[str, str] | None]], claimed)).get(message_id)
            parsed = self._parse(message_id, fields)
            if parsed is None:
                continue
            handled += 1
            message = ConsumerMessage(message_id, parsed[0], parsed[1], consumer)
            try:
                consumer.handle_pending_timeout(
                    message_id, message, str(row["consumer"]), idle_ms, int(row["times_delivered"])
                )
            except Exception:
                # As in process(): a failed handler never acks; the entry stays pending for
                # the next check (unless the handler itself acked it before failing).
                log.exception(
                    "webman %s: pending entry %s could not be handled; it stays pending",
                    names.queue,
                    message_id,
                )
            else:
                if consumer.auto_ack and not message.acked:
                    message.ack()
            finally:
                if message.ack_status and consumer.auto_delete:
                    consumer.xdel(message_id)
        return handled

    # --- the loop ---------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Consume until ``stop`` is set, through Redis restarts and deleted groups."""
        consumer = self.consumer
        outage = Outage(f"webman {consumer.names.queue}", cap_s=_MAX_BACKOFF_S, logger=log)
        backoff = 0.1
        need_group = True
        try:
            while not stop.is_set():
                try:
                    if need_group:
                        self.ensure_group()
                        need_group = False
                    # Between ticks the acks wait for the next read, unless the loop sleeps.
                    self.read_once(settle=consumer.consumer_interval_s > 0)
                    outage.ok()
                    backoff = 0.1
                    if consumer.consumer_interval_s > 0:
                        stop.wait(consumer.consumer_interval_s)
                except (StoreUnavailable, redis.ConnectionError, redis.TimeoutError) as exc:
                    need_group = True
                    stop.wait(outage.failed(exc))
                except Exception:
                    log.exception("webman %s: consume tick failed; going on", consumer.names.queue)
                    stop.wait(backoff)
                    backoff = min(backoff * 2, _MAX_BACKOFF_S)
        finally:  # also when a consume raised SystemExit or KeyboardInterrupt
            self._settle_or_log()
        self.leave_group()


class Housekeeper:
    """Moves one queue's due tasks and checks its pending entries, at the consumer's intervals.

    Every noti worker runs one per queue; the mover lock lets one of them move at a time (a
    PHP mover may run alongside: the script is atomic), and PHP worker 0's pending lock lets
    one check run at a time across noti and PHP.
    """

    def __init__(self, worker: QueueWorker, *, monotonic: Any = time.monotonic) -> None:
        consumer = worker.consumer
        self.worker = worker
        self.consumer = consumer
        self.mover = (
            DelayedMover(
                consumer.redis, consumer.keys, batch=consumer.delayed_batch_size, clock=consumer.clock
            )
            if consumer.run_mover
            else None
        )
        self._monotonic = monotonic
        self._lock_ttl_s = max(10.0, 3 * consumer.delayed_interval_s)
        self._lock = consumer.redis.lock(
            consumer.keys.mover_lock, timeout=self._lock_ttl_s, thread_local=False
        )
        self._owns_lock = False

    def move_once(self) -> int:
        """Move due tasks if this worker holds (or takes) the mover lock; how many moved."""
        if self.mover is None:
            return 0
        try:
            if self._owns_lock:
                self._lock.reacquire()
            else:
                self._owns_lock = bool(self._lock.acquire(blocking=False))
        except redis.exceptions.LockError:
            log.info("webman %s: another worker moves delayed tasks now", self.consumer.names.queue)
            self._owns_lock = False
        return self.mover.drain() if self._owns_lock else 0

    def run(self, stop: threading.Event) -> None:
        """Run until ``stop`` is set; errors are logged and retried at the next interval."""
        consumer = self.consumer
        next_check = self._monotonic() + consumer.pending_check_interval_s
        interval = max(consumer.delayed_interval_s, 0.05)
        outage = Outage(f"webman {consumer.names.queue} housekeeping", cap_s=_MAX_BACKOFF_S, logger=log)
        while not stop.is_set():
            try:
                self.move_once()
                if self._monotonic() >= next_check:
                    next_check = self._monotonic() + consumer.pending_check_interval_s
                    self.worker.check_pending()
            except (StoreUnavailable, redis.ConnectionError, redis.TimeoutError) as exc:
                self._owns_lock = False
                stop.wait(outage.failed(exc))
                continue
            except redis.RedisError as exc:
                log.warning("webman %s: housekeeping failed (%s); retrying", consumer.names.queue, exc)
                self._owns_lock = False
            except Exception:
                log.exception("webman %s: housekeeping failed; retrying", consumer.names.queue)
            else:
                outage.ok()
            stop.wait(interval if self._owns_lock or self.mover is None else self._lock_ttl_s / 4)
        if self._owns_lock:
            try:
                self._lock.release()
            except redis.RedisError:
                pass
