"""Beat jobs: keep the store tidy."""

from __future__ import annotations

import logging

from noti.app import app

__all__ = ["clean"]

log = logging.getLogger(__name__)


@app.task(name="noti.maintenance.clean")
def clean() -> int:
    """Remove done records older than the keep window (``NOTI_KEEP_DONE_S``)."""
    from noti.api import clean_done

    removed = clean_done()
    log.info("clean: removed %d done records", len(removed))
    return len(removed)
