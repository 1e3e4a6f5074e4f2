"""Beat jobs: keep the store tidy. Each is idempotent, so a duplicate run is harmless, and each
is housekeeping: it sends no task events (Flower lists notifications, not these ticks), and its
runs are seen in the worker's log and ``celery inspect stats`` (:mod:`noti.celery.beat`)."""

from __future__ import annotations

import logging

from noti.celery.app import app
from noti.sending import upkeep

__all__ = ["clean", "delivery_tick", "digest_tick", "poll_receipts", "sweep_lost", "trim_dead_letters"]

log = logging.getLogger(__name__)


@app.task(name="noti.maintenance.clean", send_events=False)
def clean() -> int:
    """Remove done records older than the keep window (``NOTI_KEEP_DONE_S``)."""
    from noti.celery.process import process_notifier

    removed = process_notifier().clean_done()
    log.info("clean: removed %d done records", len(removed))
    return len(removed)


@app.task(name="noti.maintenance.sweep_lost", send_events=False)
def sweep_lost() -> int:
    """Queue again waiting records whose message was lost (``NOTI_SWEEP_AFTER_S``)."""
    from noti.celery.process import process_publisher
    from noti.sending.runtime import get_runtime

    runtime = get_runtime()
    return upkeep.sweep_lost(runtime, process_publisher(), older_than_s=runtime.settings.sweep_after_s)


@app.task(name="noti.maintenance.trim_dead_letters", send_events=False)
def trim_dead_letters() -> int:
    """Drop dead letters past ``NOTI_DEAD_LETTER_MAX_AGE_S`` / ``_MAX_LEN``."""
    from noti.sending.runtime import get_runtime

    return upkeep.trim_dead_letters(get_runtime())


@app.task(name="noti.maintenance.delivery_tick", send_events=False)
def delivery_tick() -> dict[str, int]:
    """Mark ``unknown`` the sent records whose receipt did not come in time, and post the
    status callbacks waiting (:mod:`noti.delivery`)."""
    from noti.celery.process import process_notifier
    from noti.sending.callbacks import StatusCallbacks

    current = process_notifier()
    unknown = current.runtime.delivery.sweep()
    posted = StatusCallbacks(current).run()
    return {"unknown": unknown, "callbacks": posted}


@app.task(name="noti.maintenance.poll_receipts", send_events=False)
def poll_receipts() -> int:
    """Ask the polled vendors for the receipts of sent records (:mod:`noti.sending.poll`)."""
    from noti.sending.poll import poll_receipts as poll
    from noti.sending.runtime import get_runtime

    return poll(get_runtime())


@app.task(name="noti.maintenance.digest_tick", send_events=False)
def digest_tick() -> dict[str, int]:
    """Close the recipients' digest windows that are due and make their notices
    (:mod:`noti.recipients.digests`)."""
    from noti.recipients.api import recipients

    done = recipients().digests.tick()
    return {"closed": done.closed, "made": len(done.made), "failed": len(done.failed)}
