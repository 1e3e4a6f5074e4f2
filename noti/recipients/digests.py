"""Digests: many events for one recipient, one notice per window (issue 35).

``notify(recipient="42", template="new_comments", data={...}, digest="comments",
window="10m")`` does not notify now: it puts the event into recipient 42's digest
``comments``. The first event opens a window (due ``window`` later); the events in it are kept
in order (the first ``digest_max``, 50 unless given; every one is counted); when the window is
due, it is closed and exactly **one** notice is made from it, through the window's template
(the opening call's template, category, channels or chain, locale and level), which sees

* ``events``: the data of the events kept, oldest first;
* ``count``: how many events came (more than ``events`` holds when the window kept no more);
* ``digest``: the digest's key; ``opened_ms`` and ``due_ms``: the window's times;

and the recipient's preferences, quiet hours and suppression lists apply to that notice as to
any. The call answers the window's id, which is the id the digest's notice will have
(``noti get`` finds it once the window has closed).

Everything is held in Redis and decided in Lua, no worker memory: ``digest_add.lua`` puts an
event into the open window or opens one; ``digest_close.lua`` closes a due window in one step
(the next event opens a new window), so an event racing the close lands in exactly one of the
two windows. A closed window waits in a closing set with a lease until its notice is made; the
notice is made by ``notify.lua`` under the window's own idempotency key (``noti:dg-made:<w>``),
so a run that dies after closing (a worker killed, Redis restarted) is taken over by the next
run once the lease ends, and the window still makes one notice, never two, with every event.

Windows close in the maintenance tick (``noti.maintenance.digest_tick``, every
``NOTI_DIGEST_TICK_INTERVAL_S`` from beat), a window's notice made at most a tick after it is
due.

An event is checked when it comes: the recipient, template and category must exist, and the
template must render a digest of this one event (a missing variable is refused now, not when
the window closes). With an idempotency key (or the Celery task id of
``noti.tasks.notify.delay``) an event repeated goes into its window once.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, replace
from datetime import time as dt_time
from typing import TYPE_CHECKING, Any

from noti.core.record import new_id, now_ms, parse_level
from noti.errors import NotiError, StoreUnavailable
from noti.inputs import shown
from noti.recipients.notice import Notice
from noti.recipients.quiet import next_at_ms
from noti.recipients.request import NoticeRequest, parse_request
from noti.recipients.snapshot import Snapshot
from noti.recipients.store import NOTICE_MARK
from noti.redis.conn import load_script
from noti.redis.counters import field
from noti.redis.outage import translate_errors

if TYPE_CHECKING:
    from noti.recipients.notices import Notices

__all__ = ["Digests", "OpenWindow", "TickResult"]

log = logging.getLogger(__name__)

#: How long a run that closed a window has to make its notice before another run may.
LEASE_MS = 60_000
#: Windows closed (or taken over) per round of a run; how long a run goes on while more are due.
CLOSE_BATCH, TICK_BUDGET_S = 200, 30.0


@dataclass(frozen=True, slots=True)
class TickResult:
    """What one run of :meth:`Digests.tick` did."""

    #: Windows closed, and their notices made (those taken over from an earlier run included).
    closed: int
    made: list[str]
    #: Windows whose notice was refused (recipient, template or category gone): dropped.
    failed: list[str]


@dataclass(frozen=True, slots=True)
class OpenWindow:
    """One open digest window: the notice it will make, its recipient and key, its events so
    far, when it opened and when it is due (ms)."""

    window: str
    recipient: str
    digest: str
    events: int
    opened_ms: int
    due_ms: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Digests:
    """The digest windows of one :class:`~noti.recipients.notices.Notices`."""

    def __init__(self, notices: Notices) -> None:
        self.notices = notices
        self.runtime = notices.runtime
        self.keys = notices.keys
        self._add = load_script(self.runtime.redis, "digest_add")
        self._close = load_script(self.runtime.redis, "digest_close")
        notices.digests = self  # a notify(…, digest=…) call comes through the notices

    # --- an event -----------------------------------------------------------------------

    def add(self, request: NoticeRequest, snapshot: Snapshot) -> Notice:
        """Put one event into its digest's open window (opening one when none is); the window
        (a notice-to-be: its id, ``mode="digest"``, no channels yet).

        Raises:
            InvalidInput: the template cannot render a digest of this event.
        """
        assert request.digest is not None
        now = now_ms()
        self._check_renders(request, snapshot, now)
        k, settings = self.keys, self.runtime.settings
        idem_key, key_ttl = request.once_key(k, int(settings.idempotency_ttl_s * 1000))
        digest_key = k.digest(request.owner, request.rid, request.digest)
        due = self._due(request, snapshot, now)
        with translate_errors(self.runtime.redis):
            window, n = self._add(
                keys=[
                    digest_key,
                    k.digests_due,
                    idem_key or digest_key,
                    k.metrics,
                    k.digests_of(request.owner),
                ],
                args=[
                    NOTICE_MARK + new_id(now),
                    now,
                    due,
                    json.dumps(
                        request.window_doc(user=self.notices.notifier.user(request.user).name, opened=now),
                        separators=(",", ":"),
                    ),
                    json.dumps(
                        {"at": now, "data": request.values}, ensure_ascii=False, separators=(",", ":")
                    ),
                    request.digest_max,
                    key_ttl,
                    k.digest_events(""),
                    field("digested", request.category),
                    "1" if request.backoff else "0",
                ],
            )
        window = str(window)
        if request.backoff and n == 1:  # a back-off window's first event: sent at once
            first = replace(
                request,
                digest=None,
                values=_digest_values(request.digest, [request.values], 1, now, due),
                made_key=k.digest_made(window + ":first"),
            )
            return self.notices._make(first, snapshot)
        return Notice(
            id=window,
            owner=request.owner,
            recipient=request.rid,
            template=snapshot.template.name,
            version=snapshot.template.version,
            category=snapshot.category.name,
            mode="digest",
            created_ms=now,
        )

    def _due(self, request: NoticeRequest, snapshot: Snapshot, now: int) -> int:
        """When a window this event opens is due: its length from now, or the next time its
        time of day comes in the recipient's timezone (else the operator's)."""
        if request.digest_at is None:
            return now + request.window_ms
        hour, minute = request.digest_at.split(":")
        zone = snapshot.profile.timezone or self.notices.quiet.default()[1]
        return next_at_ms(dt_time(int(hour), int(minute)), zone, now)

    def _check_renders(self, request: NoticeRequest, snapshot: Snapshot, now: int) -> None:
        """Check what the close will use now: the level, and the window's template rendered for
        a digest of this one event on each channel it would go on (in the recipient's locale):
        a missing variable is this call's error, not the window's."""
        parse_level(request.lv)
        tmpl, profile = snapshot.template, snapshot.profile
        values = _digest_values(request.digest or "", [request.values], 1, now, now + request.window_ms)
        view = {**values, "recipient": profile.template_view()}
        asked = request.locale or profile.locale
        for channel in request.wanted if request.wanted is not None else list(tmpl.channels):
            loc = tmpl.locale_for(channel, asked)
            if loc is not None and profile.primary(channel) is not None:
                tmpl.render(channel, loc, {**view, "locale": loc})

    # --- what is open ------------------------------------------------------------------

    def _parts(self, digest_key: str) -> tuple[str, str, str]:
        """``(owner, recipient, key)`` of a digest's hash key (none of them holds a colon)."""
        base = self.keys.digest("", "", "")[:-2]  # "<prefix>dg:"
        owner, rid, key = digest_key[len(base) :].split(":")
        return owner, rid, key

    def open_windows(self, owner: str, *, recipient: str | None = None, limit: int = 100) -> list[OpenWindow]:
        """``owner``'s open digest windows (of one recipient), the soonest due first."""
        k, client = self.keys, self.runtime.redis
        found: list[OpenWindow] = []
        start = 0
        while len(found) < limit:
            with translate_errors(client):
                page = client.zrange(k.digests_of(owner), start, start + CLOSE_BATCH - 1)
                if not page:
                    return found
                start += len(page)
                wanted = [str(d) for d in page if recipient is None or self._parts(str(d))[1] == recipient]
                pipe = client.pipeline(transaction=False)
                for digest_key in wanted:
                    pipe.hmget(digest_key, "w", "n", "opened", "due")
                rows = pipe.execute()
            for digest_key, (window, n, opened, due) in zip(wanted, rows, strict=True):
                if window is not None and len(found) < limit:
                    _, rid, key = self._parts(digest_key)
                    found.append(
                        OpenWindow(str(window), rid, key, int(n or 0), int(opened or 0), int(due or 0))
                    )
        return found

    # --- the close ----------------------------------------------------------------------

    def tick(self, now: int | None = None, *, budget_s: float = TICK_BUDGET_S) -> TickResult:
        """Close the windows due and make their notices, :data:`CLOSE_BATCH` at a time, until
        none is due or ``budget_s`` has passed (the next run goes on); take over the windows
        an earlier run closed and did not finish (its lease over).

        Raises:
            StoreUnavailable: Redis cannot be reached (what was closed is finished by a later run).
        """
        fixed = now
        started = time.monotonic()
        closed, made, failed = 0, [], []
        while True:
            at = now_ms() if fixed is None else fixed
            windows = self._close_due(at) + self._take_over(at)
            for window in windows:
                outcome = self._make(window)
                if outcome is True:
                    made.append(window)
                elif outcome is False:
                    failed.append(window)
            closed += len(windows)
            if len(windows) < CLOSE_BATCH or time.monotonic() - started > budget_s:
                return TickResult(closed, made, failed)

    def _close_due(self, now: int) -> list[str]:
        """Close up to :data:`CLOSE_BATCH` windows due at ``now``; their ids."""
        k, client = self.keys, self.runtime.redis
        closed: list[str] = []
        with translate_errors(client):
            due = client.zrangebyscore(k.digests_due, "-inf", now, start=0, num=CLOSE_BATCH)
            for digest_key in due:
                owner, _, _ = self._parts(str(digest_key))
                window = self._close(
                    keys=[str(digest_key), k.digests_due, k.digests_closing, k.digests_of(owner)],
                    args=[now, LEASE_MS, k.digest_closed("")],
                )
                if window:
                    closed.append(str(window))
        return closed

    def _take_over(self, now: int) -> list[str]:
        """Windows an earlier run closed and did not finish (their lease over), each taken for
        a new lease."""
        k, client = self.keys, self.runtime.redis
        with translate_errors(client):
            stale = client.zrangebyscore(k.digests_closing, "-inf", now, start=0, num=CLOSE_BATCH)
            return [
                str(w)
                for w in stale
                if client.zadd(k.digests_closing, {str(w): now + LEASE_MS}, xx=True, gt=True, ch=True)
            ]

    def _make(self, window: str) -> bool | None:
        """Make the notice of a closed window, then forget the window. True: made (or made
        before); False: refused (the window is dropped, counted and logged); None: nothing to
        make (the window was finished meanwhile, or a back-off window had only its first
        event, which went at once)."""
        k, client = self.keys, self.runtime.redis
        with translate_errors(client):
            pipe = client.pipeline(transaction=False)
            pipe.hgetall(k.digest_closed(window))
            pipe.lrange(k.digest_events(window), 0, -1)
            closed, events = pipe.execute()
        if not closed:
            with translate_errors(client):
                client.zrem(k.digests_closing, window)
            return None
        doc = json.loads(closed["doc"])
        kept = [json.loads(e) for e in events]
        count = int(closed.get("n") or len(kept))
        if closed.get("first") == "1" and not self._claim_first(window):
            kept, count = kept[1:], count - 1  # a back-off window's first event: sent already
        outcome: bool | None = True
        if count > 0:
            values = _digest_values(
                doc["digest"],
                [e["data"] for e in kept],
                count,
                int(doc["opened"]),
                int(closed.get("due") or 0),
            )
            try:
                self._notice(window, doc, values)
            except StoreUnavailable:
                raise
            except NotiError as exc:  # the recipient erased, the template or category gone, no channel
                log.warning("digest window %s of %s made no notice: %s", window, shown(doc["rcpt"]), exc)
                outcome = False
        else:  # nothing came after the first event, which went at once
            outcome = None
        with translate_errors(client):
            pipe = client.pipeline(transaction=True)
            pipe.delete(k.digest_closed(window), k.digest_events(window))
            pipe.zrem(k.digests_closing, window)
            result = "made" if outcome else "failed" if outcome is False else "empty"
            pipe.hincrby(k.metrics, field("digests", doc["cat"], result), 1)
            pipe.execute()
        return outcome

    def _claim_first(self, window: str) -> bool:
        """For a back-off window: True when its first event's notice was not made (its key is
        taken now: the notice can no longer be made, the digest carries the event); False when
        it was (the digest leaves it out)."""
        with translate_errors(self.runtime.redis):
            return bool(
                self.runtime.redis.set(
                    self.keys.digest_made(window + ":first"),
                    window,
                    nx=True,
                    px=int(self.runtime.settings.idempotency_ttl_s * 1000),
                )
            )

    def _notice(self, window: str, doc: dict[str, Any], values: dict[str, Any]) -> Notice:
        """The window's notice, made by ``notify.lua`` once under the window's own key."""
        notices = self.notices
        request = parse_request(
            notices.notifier,
            recipient=doc["rcpt"],
            template=doc["tmpl"],
            category=doc["cat"],
            channels=doc["channels"],
            chain=doc["chain"],
            after_s=doc["after_ms"] / 1000 if doc["after_ms"] else None,
            locale=doc["locale"],
            lv=doc["lv"],
            user=doc["user"],
            owner=doc["owner"],
            level_cap=doc["level_cap"],
            providers_allowed=frozenset(doc["providers"]) if doc["providers"] is not None else None,
        )
        request = replace(request, values=values, notice_id=window, made_key=self.keys.digest_made(window))
        return notices._make(request, notices.snapshots.kept(request) or notices._read(request))


def _digest_values(digest: str, events: list[Any], count: int, opened_ms: int, due_ms: int) -> dict[str, Any]:
    """What a digest's template sees (see the module)."""
    return {"events": events, "count": count, "digest": digest, "opened_ms": opened_ms, "due_ms": due_ms}
