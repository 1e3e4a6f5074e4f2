"""Every Redis key noti owns, built in one place.

With the default prefix ``noti:``:

==============================  =======  ==================================================
key                             type     holds
==============================  =======  ==================================================
``noti:rec:<id>``               HASH     one notification record (the original system's
                                         field names)
``noti:tl:<id>``                LIST     the record's timeline (:mod:`noti.core.timeline`): its
                                         steps after its creation, JSON, oldest first, the
                                         newest 50 kept; written by the scripts that change
                                         the record, deleted with it
``noti:idx:to:<digest>``       ZSET     ids of the records sent to one address on one channel,
                                         score = created ms; ``<digest>``: keyed BLAKE2b of
                                         the channel and the address (``noti:search:secret``)
                                         (:mod:`noti.core.search`), so no key names an address
``noti:search:secret``          STRING   that MAC's key (random, made on first use)
``noti:idx:all``                ZSET     every record id, score = created ms
``noti:idx:user:<user>``        ZSET     ids created by ``<user>``, score = created ms
``noti:idx:st:<st>``            ZSET     ids in status ``<st>``, score = ms it entered it
``noti:idx:waiting``            ZSET     waiting ids, score = -level; equal scores sort by id,
                                         ids sort by age (to the ms): "level desc, age asc"
``noti:delayed``                ZSET     ids due later (retry back-off, lease re-checks),
                                         score = due ms
``noti:dead``                   STREAM   dead letters (capped; see :mod:`noti.core.deadletter`)
``noti:metrics``                HASH     cluster-wide counters, ``<family>|<label>|…`` -> count,
                                         incremented by the scripts (:mod:`noti.redis.counters`)
``noti:workers``                HASH     worker node name -> its last heartbeat (JSON; see
                                         :mod:`noti.observe.presence`)
``noti:numpools``               SET      names of the sender-number pools numbers were added to
``noti:idem:<user>:<key>``      STRING   record id a user created for an idempotency key (TTL)
``noti:ident:<user>:<ident>``   STRING   record id scheduled under a debounce identifier (TTL)
``noti:task:<task id>``         STRING   record id the ``noti.notify`` Celery task ``<task id>``
                                         created: that task's idempotency key (written with
                                         the record, TTL = ``NOTI_IDEMPOTENCY_TTL_S``) and
                                         its result (:mod:`noti.celery.backend`)
``noti:task:<task id>:failed``  STRING   how that task failed (JSON: state, exception),
                                         written only when it fails (TTL = ``result_expires``)
``noti:lock:<name>``            STRING   a lease lock (token, PX expiry)
``noti:rate:<provider>``        HASH     the provider's token bucket (tokens, ts)
``noti:rate:<provider>:line``   ZSET     records waiting for its tokens, score = precedence
                                         (level, then the user's clock; :mod:`noti.providers.ratelimit`)
``noti:rate:<provider>:back``   ZSET     those records, score = ms by which each must ask again
``noti:rate:<provider>:clock``  ZSET     user -> where that user's next place starts (ms)
``noti:suppressed:<channel>``   SET      targets no notification of a channel goes to (an
                                         opt-out, a hard bounce, a complaint, a dead push
                                         token; :mod:`noti.core.suppression`); the claim
                                         reads it
``noti:suppressed-why:<channel>`` HASH   target -> why it was suppressed (JSON: reason,
                                         vendor code and text, record, its user, provider,
                                         at_ms); the first why is kept
``noti:sandbox:<provider>``     LIST     what the sandbox provider "sent", oldest first
``noti:weixin:token:<appid>``   STRING   a WeChat account's access token (TTL = its expires_in
                                         less a grace); refreshed under ``noti:lock:weixin:<appid>``
``noti:cred:<kind>:<account>``  STRING   a push vendor's credential shared by every worker: an FCM
                                         access token (account = the service account's email), an
                                         APNs provider JWT (account = ``<team id>.<key id>``); TTL =
                                         its reuse life; made under ``noti:lock:cred:<kind>:<account>``
``noti:event:<id>``             HASH     one event (:mod:`noti.events`): name, status, payload…
``noti:events:queue``           LIST     ids of events not done yet, in arrival order
``noti:events:seq``             STRING   arrival counter (each event's ``seq``)
``noti:event:idem:<user>:<key>`` STRING  event id a user dispatched under an idempotency key
``noti:events:all``             ZSET     every event id, score = seq
``noti:events:st:<status>``     ZSET     ids ``new`` / ``activated`` (score = seq) or
                                         ``done`` (score = done ms)
``noti:events:user:<user>``     ZSET     ids dispatched by ``<user>``, score = seq
``noti:events:starting``        STRING   a processor task is queued and has not started yet (PX expiry)
``noti:events:stop``            HASH     how the last event processor stopped
``noti:events:backoff``         ZSET     events waiting for a listener's retry back-off, score =
                                         due ms (then moved to the end of the arrival queue)
``noti:events:stalled:<proc>``  STRING   that processor lost its lock while alive (a stall,
                                         not a death: poison does not count it; PX 1 day)
``noti:lock:events``            STRING   the event processor's liveness lock (JSON: token,
                                         host, pid, since; PX expiry, renewed)
``noti:listeners``              HASH     listener name -> listener (JSON)
``noti:listeners:version``      STRING   bumped on every listener change
``noti:dlv:<state>``            ZSET     ids whose delivery is ``<state>`` (accepted, delivered,
                                         undelivered, unknown), score = ms it entered it
``noti:dlv:watch``              ZSET     sent ids awaiting a receipt, score = ms their delivery
                                         becomes ``unknown`` (:mod:`noti.delivery`)
``noti:dlv:vid``                HASH     ``<provider>:<vendor message id>`` -> record id, to
                                         match receipts naming only the vendor's id
``noti:dlv:vid:age``            ZSET     those fields, score = ms written (trimmed after
                                         ``NOTI_RECEIPT_WINDOW_S``)
``noti:dlv:early``              HASH     ``<provider>:<vendor id>`` -> a receipt (JSON) that came
                                         before its send was recorded (applied then, if that
                                         provider's send returned that id); at most
                                         ``NOTI_RECEIPT_EARLY_MAX``
``noti:dlv:early:age``          ZSET     those fields, score = ms received (trimmed after
                                         ``NOTI_RECEIPT_EARLY_TTL_S``)
``noti:dlv:changes``            STREAM   status changes of records that asked for a status
                                         callback (the outbox the callback sender reads)
``noti:token:<sha256>``         HASH     one API token (hashed; :mod:`noti.access.tokens`): user, cap,
                                         rate, created, revoked
``noti:tokens``                 ZSET     every token's sha256, score = created ms
``noti:sigkeys:<user>``         HASH     a user's webhook signing secrets (:mod:`noti.access.signing`):
                                         key id -> ``<created ms> <secret>``
``noti:rcpt:<owner>:<id>``      HASH     one recipient of user ``<owner>`` (:mod:`noti.recipients`):
                                         ``doc`` (the profile, JSON), ``ct``, ``lm``, ``v``
                                         (its version: bumped by every profile write), and
                                         preferences ``p:<category>:<channel>`` -> ``1`` (in)
                                         or ``0`` (out), ``*`` for every category or channel;
                                         read by ``notify.lua`` and by the claim
``noti:rcpts:<owner>``          ZSET     the recipient ids of ``<owner>``, score = created ms
``noti:rcpt-log:<owner>:<id>``  ZSET     notices and records made for that recipient, score =
                                         created ms (its history; what erasure masks)
``noti:cats``                   HASH     category name -> its declaration (JSON: channels on by
                                         default, whether recipients may opt out, critical)
``noti:notice:<id>``            HASH     one ``notify(recipient=…)`` call: recipient, template
                                         and version, category, locale, and per channel what
                                         became of it (a record id, held until, suppressed why)
``noti:notice-idem:<owner>:<key>`` STRING notice id an idempotency key made (TTL)
``noti:dedupe:<owner>:<id>:<key>`` STRING the notice (or digest window) a recipient got under
                                         a deduplication key (TTL: the call's ``dedupe_window``)
``noti:thr:<owner>:<id>:<category>:<channel>`` ZSET a recipient's sends of a throttled
                                         category on a channel (record id, score = when it
                                         goes; a delayed one's future time), kept a period
``noti:dg:<owner>:<id>:<key>``  HASH     the open window of one recipient's digest ``<key>``
                                         (:mod:`noti.recipients.digests`): ``w`` (the window,
                                         its digest notice's id), ``due`` (ms), ``n`` (events
                                         so far), ``doc`` (what its notice is made with, JSON)
``noti:dgs:<owner>``            ZSET     a user's open digest windows (their hash keys, score =
                                         due ms), for ``noti digest list``
``noti:dg-ev:<window>``         LIST     the events of a window (JSON; the first
                                         ``digest_max``), until its notice is made
``noti:dg-due``                 ZSET     the open windows' hash keys, score = due ms
``noti:dg-closing``             ZSET     closed windows whose notice is being made, score =
                                         when another run may take it over (ms)
``noti:dg-closed:<window>``     HASH     a closed window (``n``, ``doc``, ``due``, ``digest``:
                                         its hash key) until its notice is made
``noti:dg-made:<window>``       STRING   the digest notice made of a window (TTL: the
                                         idempotency time-to-live)
``noti:unsub:secret``           STRING   the key unsubscribe links are signed with (random,
                                         made on first use; :mod:`noti.recipients.unsubscribe`)
``noti:tmpl:<owner>:<name>``    HASH     one of a user's named templates
                                         (:mod:`noti.recipients.templates`): ``current`` ->
                                         the latest version (int as text), ``v<N>`` -> the
                                         document of version N (JSON, never changed once
                                         written), ``ct``, ``lm`` (created, modified ms)
``noti:tmpls:<owner>``          ZSET     a user's template names, score = created ms
``noti:{numpool:<pool>}:…``     …        one sender-number pool (:mod:`noti.numpool`), in
                                         the plain pool layout; the hash tag
                                         ``{numpool:<pool>}`` puts all its keys in one
                                         cluster slot, so one script can touch them all
                                         (``numpool_keys`` may give a pool another base,
                                         such as a plain client's ``{numpool}``)
  ``…:numstate``                HASH     number -> JSON ``{"callstate": 0|1, "regstate":
                                         0|1}`` (+ ``"lease"`` while noti holds it)
  ``…:idle:up``                 LIST     free numbers (idle and up), longest free first
  ``…:leases``                  ZSET     numbers noti holds under a lease, score = its end
  ``…:released``                LIST     a token per number freed: waiting senders BLPOP it
  ``…:sticky:<sha256>``         STRING   a recipient's sticky sender number (TTL)
  ``…:owner``                   STRING   the user who created the pool (its first ``add``);
                                         none on a pool made before pools had owners
==============================  =======  ==================================================

The Celery broker's keys are kombu's, not ours: one LIST per queue and priority step
(``noti.sms``, ``noti.sms:1`` … ``noti.sms:9``), ``unacked`` / ``unacked_index`` for
messages being worked on, and ``_kombu.binding.*``. RedBeat keeps its schedule and lock
under ``<prefix>beat:``.

The webman-redis-queue bridge's keys are not built here: the PHP plugin dictates them (its
connection prefix, ``webman_redis_queue_`` by default, never ``NOTI_KEY_PREFIX``), and
:mod:`noti.bridge.webman.layout` builds them as the plugin does.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Keys"]

STATUSES = ("-1", "0", "1", "10")


@dataclass(frozen=True, slots=True)
class Keys:
    """Key builder for one key prefix."""

    prefix: str = "noti:"
    #: ``(pool, base)`` pairs of the ``numpool_keys`` setting: pools whose keys live under a
    #: base of the operator's choice (a plain client's ``{numpool}``).
    numpool_bases: tuple[tuple[str, str], ...] = ()

    def record(self, record_id: str) -> str:
        return f"{self.prefix}rec:{record_id}"

    def timeline(self, record_id: str) -> str:
        return f"{self.prefix}tl:{record_id}"

    def address_index(self, digest: str) -> str:
        return f"{self.prefix}idx:to:{digest}"

    @property
    def search_secret(self) -> str:
        return f"{self.prefix}search:secret"

    @property
    def all_index(self) -> str:
        return f"{self.prefix}idx:all"

    def user_index(self, user: str) -> str:
        return f"{self.prefix}idx:user:{user}"

    def status_index(self, status: int | str) -> str:
        return f"{self.prefix}idx:st:{status}"

    @property
    def status_indexes(self) -> list[str]:
        """The four status indexes, in the order the Lua scripts expect them."""
        return [self.status_index(st) for st in STATUSES]

    @property
    def waiting_index(self) -> str:
        return f"{self.prefix}idx:waiting"

    @property
    def delayed(self) -> str:
        return f"{self.prefix}delayed"

    @property
    def dead_letters(self) -> str:
        return f"{self.prefix}dead"

    @property
    def metrics(self) -> str:
        """The counters hash (:mod:`noti.redis.counters`)."""
        return f"{self.prefix}metrics"

    @property
    def workers(self) -> str:
        """Worker heartbeats: node name -> JSON (:mod:`noti.observe.presence`)."""
        return f"{self.prefix}workers"

    @property
    def numpools(self) -> str:
        """The names of the number pools (:mod:`noti.numpool`), for the metrics to find them."""
        return f"{self.prefix}numpools"

    def idempotency(self, user: str, key: str) -> str:
        return f"{self.prefix}idem:{user}:{key}"

    def identifier(self, user: str, identifier: str) -> str:
        return f"{self.prefix}ident:{user}:{identifier}"

    def task(self, task_id: str) -> str:
        """The record id a ``noti.notify`` task created: its idempotency key, whoever the user."""
        return f"{self.prefix}task:{task_id}"

    def task_failure(self, task_id: str) -> str:
        """How a ``noti.notify`` task failed (its Celery result, written only on failure)."""
        return f"{self.prefix}task:{task_id}:failed"

    def rate_bucket(self, provider: str) -> str:
        return f"{self.prefix}rate:{provider}"

    def rate_line(self, provider: str) -> str:
        return f"{self.prefix}rate:{provider}:line"

    def rate_back(self, provider: str) -> str:
        return f"{self.prefix}rate:{provider}:back"

    def rate_clock(self, provider: str) -> str:
        return f"{self.prefix}rate:{provider}:clock"

    def suppressed(self, channel: str) -> str:
        return f"{self.prefix}suppressed:{channel}"

    def suppressed_why(self, channel: str) -> str:
        """Why each target of :meth:`suppressed` is there (:mod:`noti.core.suppression`)."""
        return f"{self.prefix}suppressed-why:{channel}"

    def lock(self, name: str) -> str:
        return f"{self.prefix}lock:{name}"

    def sandbox_outbox(self, provider: str) -> str:
        return f"{self.prefix}sandbox:{provider}"

    def credential(self, kind: str, account: str) -> str:
        """A vendor credential of provider ``kind`` for ``account``, cached for every worker
        (:mod:`noti.channels.push._credentials`); made under ``lock("cred:<kind>:<account>")``."""
        return f"{self.prefix}cred:{kind}:{account}"

    def weixin_token(self, appid: str) -> str:
        """WeChat account ``appid``'s cached access token; refreshed under ``lock("weixin:<appid>")``."""
        return f"{self.prefix}weixin:token:{appid}"

    def numpool_base(self, pool: str) -> str:
        """The base of number pool ``pool``'s keys (``KEYS[1]`` of its script): the one the
        ``numpool_keys`` setting gives it, else ``<prefix>{numpool:<pool>}``."""
        for name, base in self.numpool_bases:
            if name == pool:
                return base
        return f"{self.prefix}{{numpool:{pool}}}"

    def numpool(self, pool: str, part: str) -> str:
        """Key ``part`` (``numstate``, ``idle:up``, ``released``, …) of number pool ``pool``;
        every part shares the base's hash tag."""
        return f"{self.numpool_base(pool)}:{part}"

    # --- events (noti.events) --------------------------------------------------------------

    def event(self, event_id: str) -> str:
        """An event's hash; ``event("")`` is the prefix the event scripts append ids to."""
        return f"{self.prefix}event:{event_id}"

    @property
    def event_queue(self) -> str:
        return f"{self.prefix}events:queue"

    @property
    def event_seq(self) -> str:
        return f"{self.prefix}events:seq"

    @property
    def event_index(self) -> str:
        return f"{self.prefix}events:all"

    def event_status_index(self, status: str) -> str:
        return f"{self.prefix}events:st:{status}"

    def event_user_index(self, user: str) -> str:
        """Events dispatched by ``user``; ``event_user_index("")`` is the scripts' prefix."""
        return f"{self.prefix}events:user:{user}"

    @property
    def event_starting(self) -> str:
        return f"{self.prefix}events:starting"

    @property
    def event_stop(self) -> str:
        return f"{self.prefix}events:stop"

    @property
    def event_backoff(self) -> str:
        """Events waiting for a listener's retry back-off (score: when due, ms)."""
        return f"{self.prefix}events:backoff"

    def event_stalled(self, processor: str) -> str:
        """Set by a processor that found its lock lost while it was alive (stalled, not dead);
        ``event_stalled("")`` is the prefix ``activate.lua`` appends processor names to."""
        return f"{self.prefix}events:stalled:{processor}"

    @property
    def event_lock(self) -> str:
        return self.lock("events")

    @property
    def listeners(self) -> str:
        return f"{self.prefix}listeners"

    @property
    def listeners_version(self) -> str:
        return f"{self.prefix}listeners:version"

    def delivery_index(self, state: str) -> str:
        return f"{self.prefix}dlv:{state}"

    @property
    def delivery_watch(self) -> str:
        return f"{self.prefix}dlv:watch"

    @property
    def vendor_ids(self) -> str:
        return f"{self.prefix}dlv:vid"

    @property
    def vendor_id_age(self) -> str:
        return f"{self.prefix}dlv:vid:age"

    @property
    def early_receipts(self) -> str:
        return f"{self.prefix}dlv:early"

    @property
    def early_receipt_age(self) -> str:
        return f"{self.prefix}dlv:early:age"

    @property
    def status_changes(self) -> str:
        return f"{self.prefix}dlv:changes"

    def token(self, digest: str) -> str:
        return f"{self.prefix}token:{digest}"

    @property
    def tokens(self) -> str:
        return f"{self.prefix}tokens"

    def signing_keys(self, user: str) -> str:
        return f"{self.prefix}sigkeys:{user}"

    @property
    def beat_prefix(self) -> str:
        return f"{self.prefix}beat:"

    # --- recipients (noti.recipients) -------------------------------------------------------

    def recipient(self, owner: str, recipient_id: str) -> str:
        """One recipient's profile and preferences; ``recipient(owner, "")`` is the prefix of
        ``owner``'s recipients."""
        return f"{self.prefix}rcpt:{owner}:{recipient_id}"

    def recipients(self, owner: str) -> str:
        """The ids of ``owner``'s recipients (score: created ms)."""
        return f"{self.prefix}rcpts:{owner}"

    def recipient_log(self, owner: str, recipient_id: str) -> str:
        """Notices and records made for one recipient (score: created ms)."""
        return f"{self.prefix}rcpt-log:{owner}:{recipient_id}"

    @property
    def categories(self) -> str:
        """Message categories: name -> declaration (JSON)."""
        return f"{self.prefix}cats"

    def notice(self, notice_id: str) -> str:
        """One ``notify(recipient=…)`` call and what became of it per channel."""
        return f"{self.prefix}notice:{notice_id}"

    def notice_idempotency(self, owner: str, key: str) -> str:
        """The notice id ``owner`` made under an idempotency key."""
        return f"{self.prefix}notice-idem:{owner}:{key}"

    def dedupe(self, owner: str, recipient_id: str, key: str) -> str:
        """The notice (or digest window) ``owner``'s recipient got under a deduplication key."""
        return f"{self.prefix}dedupe:{owner}:{recipient_id}:{key}"

    def throttle(self, owner: str, recipient_id: str, category: str, channel: str) -> str:
        """A recipient's sends of one category on one channel, for the category's throttle."""
        return f"{self.prefix}thr:{owner}:{recipient_id}:{category}:{channel}"

    def digest(self, owner: str, recipient_id: str, key: str) -> str:
        """The open window of ``owner``'s recipient's digest ``key``."""
        return f"{self.prefix}dg:{owner}:{recipient_id}:{key}"

    def digests_of(self, owner: str) -> str:
        """``owner``'s open digest windows (their hash keys, score = due ms)."""
        return f"{self.prefix}dgs:{owner}"

    def digest_events(self, window: str) -> str:
        """The events of one digest window."""
        return f"{self.prefix}dg-ev:{window}"

    @property
    def digests_due(self) -> str:
        """Open digest windows by due time."""
        return f"{self.prefix}dg-due"

    @property
    def digests_closing(self) -> str:
        """Closed digest windows whose notice is being made, by when another run may take over."""
        return f"{self.prefix}dg-closing"

    def digest_closed(self, window: str) -> str:
        """A closed digest window until its notice is made."""
        return f"{self.prefix}dg-closed:{window}"

    def digest_made(self, window: str) -> str:
        """The notice made of a digest window (its idempotency key)."""
        return f"{self.prefix}dg-made:{window}"

    @property
    def unsubscribe_secret(self) -> str:
        """The secret unsubscribe links are signed with."""
        return f"{self.prefix}unsub:secret"

    def template(self, owner: str, name: str) -> str:
        """User ``owner``'s template ``name``: its versions (:mod:`noti.recipients.templates`)."""
        return f"{self.prefix}tmpl:{owner}:{name}"

    def templates(self, owner: str) -> str:
        """User ``owner``'s template names, score = created ms."""
        return f"{self.prefix}tmpls:{owner}"
