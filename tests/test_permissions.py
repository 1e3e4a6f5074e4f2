"""Who may do what: one table, every verb × every role, through the Python API and the CLI.

Each row of :data:`MATRIX` is a verb; its four cells say what happens when ``alice`` (a plain
user who owns the objects the verb touches), ``bob`` (another plain user), ``ops`` (a root
member) and ``boss`` (a root administrator) try it:

* ``ok``: allowed, and the row's ``effect`` checks what it did;
* ``own`` / ``all``: allowed, over the actor's own objects only / over everyone's;
* ``lv N``: allowed, the level asked for (1000) stored as N (the role's cap);
* ``no``: refused with :class:`~noti.errors.PermissionDenied` and the row's ``code``, and
  the Redis database is unchanged: every key's ``DUMP`` and absolute expiry (``PEXPIRETIME``)
  are the same before and after (and the webman TOML file too);
* ``none``: answered as if the object did not exist: :class:`~noti.errors.NotFound` with the
  row's ``code`` and the very message an id nobody has gets (but the id), nothing changed.

Every cell runs twice, once through the Python API and once through ``noti --as USER …``
in this process, each on a freshly built world (:func:`build_world`). The docs' roles
table is generated from the same rows (``python -m tests.test_permissions`` rewrites it);
:func:`test_the_readme_table_is_the_matrix` fails when they differ.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis

import noti
import noti.api
import tests.test_events_tasks  # noqa: F401 - registers the listener tasks (tests.events.explode)
from noti import events
from noti.api import redrive
from noti.bridge.webman import Producer, QueueKeys, QueueNames
from noti.bridge.webman.connection import connect
from noti.bridge.webman.console import WebmanConsole
from noti.core.record import Status, new_id
from noti.core.suppression import Suppressed
from noti.errors import NotFound, PermissionDenied
from noti.numpool import NumberPool, NumberState
from noti.sending.suppressions import Suppressions
from tests.conftest import ADMIN, ALICE, BOB, MEMBER, ROOT
from tests.noti_cli import invoke
from tests.webman_fixtures.consumers import Collect

PHONE = "+8613912345678"
OPTED_OUT = "+8613900000009"
#: Addresses suppressed by a bounce of alice's e-mail and a complaint about bob's.
ALICE_GONE, BOB_ANGRY = "gone@example.org", "angry@example.org"
ACTORS = {"owner": ALICE, "other": BOB, "member": MEMBER, "admin": ADMIN}
COLUMNS = tuple(ACTORS)
CONSUMER = {"class": "tests.webman_fixtures.consumers:Collect", "processes": 1}
TEMPLATE = {"type": "sms", "target": "{{ phone }}", "text": "paid"}
TEMPLATE_CLI = ["-type", "sms", "-to", "{{ phone }}", "-text", "paid"]
IU, ID, BU, N = NumberState.IDLE_UP, NumberState.IDLE_DOWN, NumberState.BUSY_UP, NumberState.NODATA


# --- the world every cell starts from -------------------------------------------------------------


@dataclass
class World:
    """What alice (and bob) own before the verb runs."""

    rt: Any
    config: Path
    ids: dict[str, str] = field(default_factory=dict)

    def __getattr__(self, name: str) -> str:
        try:
            return self.__dict__["ids"][name]
        except KeyError:
            raise AttributeError(name) from None

    def as_real(self, text: str, real: World) -> str:
        """``text`` (an answer about this world's made-up ids) with ``real``'s ids put back."""
        for name, made_up in self.ids.items():
            text = text.replace(made_up, real.ids[name])
        return text

    def status(self, record_id: str) -> Status | None:
        record = self.rt.store.find(record_id)
        return None if record is None else record.status

    def pool(self, name: str = "P") -> NumberPool:
        return NumberPool.trusted(name, client=self.rt.redis, keys=self.rt.keys)

    @property
    def queue(self) -> Producer:
        keys = QueueKeys(QueueNames.from_class(Collect.php_class), "webman_redis_queue_")
        return Producer(connect(self.rt.settings.redis_url), keys)


def build_world(configure: Callable[..., Any], tmp_path: Path) -> World:
    rt = configure(
        providers={
            "reject": {"kind": "sandbox", "fail": "always", "error": "permanent"},
            "vip": {"kind": "sandbox"},  # granted to no one: only root administrators name it
        },
        provider_grants={"*": ["reject"]},
        webman={"consumers": {"Collect": CONSUMER}},
    )
    config = tmp_path / "noti.toml"
    config.write_text(
        '[webman.consumers.Collect]\nclass = "tests.webman_fixtures.consumers:Collect"\nprocesses = 1\n'
    )
    w = World(rt, config)
    # records: alice's waiting one, bob's, a scheduled one, a done one, a dead-lettered one
    w.ids["rid"] = noti.notify_sms(PHONE, "alice's", user=ALICE)
    w.ids["bid"] = noti.notify_sms(PHONE, "bob's", user=BOB)
    w.ids["sid"] = noti.notify_sms(PHONE, "later", delay=3600, user=ALICE)
    w.ids["did"] = noti.notify_sms(PHONE, "done", user=ALICE)
    w.ids["xid"] = noti.notify_sms(PHONE, "dead", provider="reject", user=ALICE)
    assert [r.mark for r in noti.send(w.did, user=ADMIN) + noti.send(w.xid, user=ADMIN)] == ["OK", "KO"]
    assert [letter.record_id for letter in redrive().entries(user=ADMIN)] == [w.xid]
    rt.redis.sadd(rt.keys.suppressed("sms"), OPTED_OUT)  # suppressed before whys were kept
    rt.store.suppress("email", ALICE_GONE, why=Suppressed("", "", "bounce", record=w.rid, user=ALICE))
    rt.store.suppress("email", BOB_ANGRY, why=Suppressed("", "", "complaint", record=w.bid, user=BOB))
    # events and listeners: alice's done event whose listener failed (a variable the payload
    # lacks), then alice's and bob's new ones
    events.add_listener("order.failed", {**TEMPLATE, "target": "{{ nosuch }}"}, name="alices-bad", user=ALICE)
    w.ids["fid"] = events.dispatch("order.failed", {"phone": PHONE}, user=ALICE)
    events.events().processor().run()
    assert events.get_event(w.fid, user=ADMIN).failed
    events.add_listener("order.paid", TEMPLATE, name="alices", user=ALICE)
    events.add_listener("order.paid", TEMPLATE, name="bobs", user=BOB)
    w.ids["eid"] = events.dispatch("order.paid", {"phone": PHONE}, user=ALICE)
    w.ids["beid"] = events.dispatch("order.paid", {"phone": PHONE}, user=BOB)
    # alice's pool P: 1001 free, 1002 in a call, 1003 down; OLD, made before pools had owners
    pool = NumberPool("P", user=ALICE)
    for number in ("1001", "1002", "1003"):
        pool.add(number)
    pool.register("1001")
    pool.register("1002")
    pool.call("1002")
    old = w.pool("OLD")
    old.add("2001")
    old.register("2001")
    # a webman queue: one processed entry older than an hour, one waiting
    queue = w.queue
    processed = queue.push(queue.message("old", timestamp=1_000))
    queue.push("waiting")
    client = queue.redis
    client.xgroup_create(queue.keys.stream, queue.names.group, id="0")
    client.xreadgroup(queue.names.group, "php-0", {queue.keys.stream: ">"}, count=1)
    client.xack(queue.keys.stream, queue.names.group, processed)
    w.ids["entry"] = processed
    # an API token of alice's, and a webhook signing key of hers
    w.ids["tok"] = rt.tokens.add(ALICE, acting=ADMIN)[1].id
    w.ids["skey"] = rt.signing_keys.add(ALICE, acting=ALICE)[1].id
    time.sleep(0.002)  # `clean -keep 0` removes what was done before this millisecond
    return w


def as_missing(w: World) -> World:
    """``w`` with every id swapped for a fresh one that names nothing."""
    return World(w.rt, w.config, {name: new_id() for name in w.ids})


def suppressions_shown(w: World, actor: str, cell: str) -> tuple[set[str], set[str]]:
    """``own``: the addresses the actor's records caused, not another's nor one without why;
    ``all``: every one."""
    every = {ALICE_GONE, BOB_ANGRY, OPTED_OUT}
    mine = {ALICE: {ALICE_GONE}, BOB: {BOB_ANGRY}}.get(actor, set())
    return (mine, every - mine) if cell == "own" else (every, set())


# --- the matrix ----------------------------------------------------------------------------------

Effect = Callable[[World, str, str, str], None]
Shows = Callable[[World, str, str], tuple[set[str], set[str]]]


def nothing(w: World, actor: str, cell: str, out: str) -> None:
    """A read: the row's ``shows`` says what the output holds."""


@dataclass(frozen=True)
class Verb:
    """One row: the verb, what each role gets, and how to do it through the API and the CLI."""

    #: The row's key (and the test id's first part).
    name: str
    #: How the docs' table names the verb.
    text: str
    cells: tuple[str, str, str, str]
    #: The error code of a refusal (``""`` where no cell refuses).
    code: str
    api: Callable[[World, str], Any]
    #: The CLI's arguments: ``{rid}`` and the other ids of the world, ``{phone}``, ``{alice}``…
    #: (see :meth:`argv`) are filled in; ``TEMPLATE`` stands for a listener's template options.
    cli: str
    effect: Effect = nothing
    #: For reads: what the output must hold, and must not, by cell.
    shows: Shows | None = None
    #: The README's label for consecutive rows that share it (and their cells): one line.
    group: str = ""

    def cell(self, column: str) -> str:
        return self.cells[COLUMNS.index(column)]

    def argv(self, w: World) -> list[str]:
        names = {**w.ids, "phone": PHONE, "opted_out": OPTED_OUT, "gone": ALICE_GONE}
        names.update(alice=ALICE, bob=BOB, config=str(w.config))
        argv: list[str] = []
        for part in self.cli.split():
            argv += TEMPLATE_CLI if part == "TEMPLATE" else [part.format(**names)]
        return argv


def scoped(mine: Callable[[World, str], set[str]]) -> Shows:
    """``own`` shows the actor's objects and not the others'; ``all`` and ``ok`` show all."""

    def shows(w: World, actor: str, cell: str) -> tuple[set[str], set[str]]:
        every = mine(w, ALICE) | mine(w, BOB)
        if cell == "own":
            return mine(w, actor), every - mine(w, actor)
        return every, set()

    return shows


def records_of(w: World, user: str) -> set[str]:
    return {ALICE: {w.rid}, BOB: {w.bid}}.get(user, set())


def events_of(w: World, user: str) -> set[str]:
    return {ALICE: {w.eid}, BOB: {w.beid}}.get(user, set())


def listeners_of(w: World, user: str) -> set[str]:
    return {ALICE: {"alices"}, BOB: {"bobs"}}.get(user, set())


def holds(check: Callable[[World], bool], why: str) -> Effect:
    """An effect: ``check`` of the world after the verb is true, or the cell fails with ``why``."""

    def effect(w: World, actor: str, cell: str, out: str) -> None:
        assert check(w), why

    return effect


def status_is(record: str, status: Status | None, why: str) -> Effect:
    return holds(lambda w: w.status(getattr(w, record)) is status, why)


def _retried(w: World) -> bool:
    event = events.get_event(w.fid, user=ADMIN)
    return (event.status.value, event.replays) == ("new", 1)


def level_capped(w: World, actor: str, cell: str, out: str) -> None:
    assert w.rt.store.get(out.strip()).level == int(cell.split()[1])


def _purged_scoped(w: World, actor: str, cell: str, out: str) -> None:
    """Alice's dead letter is gone after alice's purge or a root member's, kept after bob's."""
    left = [letter.record_id for letter in redrive().entries(user=ADMIN)]
    assert left == ([] if actor in (ALICE, MEMBER, ADMIN) else [w.xid]), left


def sent_scoped(w: World, actor: str, cell: str, out: str) -> None:
    assert w.status(w.bid) is (Status.DONE if actor in (BOB, MEMBER, ADMIN) else Status.WAITING)
    assert w.status(w.rid) is (Status.DONE if actor in (ALICE, MEMBER, ADMIN) else Status.WAITING)


def number_is(number: str, state: NumberState, pool: str = "P") -> Effect:
    def effect(w: World, actor: str, cell: str, out: str) -> None:
        assert w.pool(pool).state(number) is state

    return effect


def owner_is(pool: str, user: str | None) -> Effect:
    def effect(w: World, actor: str, cell: str, out: str) -> None:
        assert w.pool(pool).owner() == (user or actor)

    return effect


def queue_emptied(w: World, actor: str, cell: str, out: str) -> None:
    assert not w.queue.redis.exists(*w.queue.keys.data_keys)


def history_deleted(w: World, actor: str, cell: str, out: str) -> None:
    assert [entry_id for entry_id, _ in w.queue.redis.xrange(w.queue.keys.stream)] != []
    assert w.entry not in {entry_id for entry_id, _ in w.queue.redis.xrange(w.queue.keys.stream)}


def listener_owned(name: str, event: str, hears: tuple[str, ...] = ()) -> Effect:
    def effect(w: World, actor: str, cell: str, out: str) -> None:
        found = {x.name: x for x in events.list_listeners(user=ADMIN)}
        assert (found[name].user, found[name].event, found[name].from_users) == (actor, event, hears)

    return effect


def token_made(w: World, actor: str, cell: str, out: str) -> None:
    assert sorted(t.user for t in w.rt.tokens.entries(acting=ADMIN)) == [ALICE, BOB]


def named_provider(w: World, actor: str, cell: str, out: str) -> None:
    assert w.rt.store.get(out.strip()).provider == "vip"


def signing_key_made(w: World, actor: str, cell: str, out: str) -> None:
    assert len(w.rt.signing_keys.entries(ALICE, acting=ADMIN)) == 2


def signing_key_deleted(w: World, actor: str, cell: str, out: str) -> None:
    assert w.rt.signing_keys.entries(ALICE, acting=ADMIN) == []


def token_revoked(w: World, actor: str, cell: str, out: str) -> None:
    [token] = w.rt.tokens.entries(acting=ADMIN)
    assert token.id == w.tok and token.revoked_ms is not None


def console() -> WebmanConsole:
    return WebmanConsole.from_runtime()


def pool(name: str, method: str, *args: str) -> Callable[[World, str], Any]:
    """The API call ``NumberPool(name, user=actor).method(*args)``."""
    return lambda w, u: getattr(NumberPool(name, user=u), method)(*args)


OK, NO = ("ok", "no", "ok", "ok"), ("no", "no", "ok", "ok")
#: Another plain user's object is answered as a missing one.
HIDDEN = ("ok", "none", "ok", "ok")
EVERYONE = ("ok", "ok", "ok", "ok")
ADMIN_ONLY = ("no", "no", "no", "ok")
OWNER_OR_ADMIN = ("ok", "no", "no", "ok")
SCOPED = ("own", "own", "all", "all")
#: The docs' one-line labels of groups of rows.
EVENT_LISTS = "event list [-errors]"
POOL_P = "pool P add · del · reg · unreg · hangup NUMBER; pool P call · show"
POOL_OLD = "pool OLD call · show · chown USER (a pool made before owners)"
HISTORY = "webman history QUEUE [--delete]"
CLEAN = "webman clean QUEUE · remove-consumer NAME --purge-data"
TOKENS = "token add -user USER · list · revoke ID"
SIGNING_KEYS = "signing-key add · list · del ID (-user USER)"
#: How a listener is added in the rows below (a new one, or alice's replaced).
LISTEN = "listener add order.paid -name new TEMPLATE"

# Each row: Verb(key, the docs' text, cells (owner, other, member, admin), refused with,
#                the API call, the CLI's arguments, [effect], [shows=…], [group=…]).
ROWS = [
    # --- notification records (alice's) ---
    Verb("add", "add sms -lv 1000", ("lv 1", "lv 1", "lv 100", "lv 1000"), "",
         lambda w, u: noti.notify_sms(PHONE, "hi", lv=1000, user=u),
         "add sms -text hi -to {phone} -lv 1000", level_capped),
    Verb("add -provider", "add sms -provider P (P not a channel default, granted to no one)",
         ADMIN_ONLY, "e.cmd.noti.add.providerdenied",
         lambda w, u: noti.notify_sms(PHONE, "hi", provider="vip", user=u),
         "add sms -text hi -to {phone} -provider vip", named_provider),
    Verb("get", "get ID", HIDDEN, "e.cmd.noti.not_found",
         lambda w, u: noti.get(w.rid, user=u), "get {rid}", shows=lambda w, a, c: ({w.rid}, set())),
    Verb("list", "list", SCOPED, "",
         lambda w, u: noti.list_notifications(user=u), "list", shows=scoped(records_of)),
    Verb("list -u", "list -u USER", OK, "e.cmd.noti.list.nopvg",
         lambda w, u: noti.list_notifications(user=u, creator=ALICE), "list -u {alice}",
         shows=lambda w, a, c: ({w.rid}, {w.bid})),
    Verb("send ID", "send ID", OK, "e.cmd.noti.send.nopvg",
         lambda w, u: noti.send(w.rid, user=u), "send {rid}", status_is("rid", Status.DONE, "not sent")),
    Verb("send", "send", SCOPED, "", lambda w, u: noti.send(user=u), "send", sent_scoped),
    Verb("send -u", "send -u USER", OK, "e.cmd.noti.send.nopvg",
         lambda w, u: noti.send(user=u, creator=ALICE), "send -u {alice}",
         status_is("rid", Status.DONE, "not sent")),
    Verb("del", "del ID", OK, "e.cmd.noti.del.nopvg",
         lambda w, u: noti.delete(w.rid, user=u), "del {rid}", status_is("rid", None, "not deleted")),
    Verb("revoke", "revoke ID", HIDDEN, "e.cmd.noti.revoke.not_found",
         lambda w, u: noti.revoke([w.rid], user=u), "revoke {rid}",
         status_is("rid", Status.INVALID, "not revoked")),
    Verb("delayed list", "delayed list", SCOPED, "",
         lambda w, u: noti.api.notifier().delayed(user=u), "delayed list",
         shows=scoped(lambda w, user: {w.sid} if user == ALICE else set())),
    Verb("cancel", "delayed cancel ID", OK, "e.cmd.noti.cancel.nopvg",
         lambda w, u: noti.cancel(w.sid, user=u), "delayed cancel {sid}",
         status_is("sid", None, "not cancelled")),
    Verb("clean", "clean", NO, "e.cmd.noti.clean.nopvg",
         lambda w, u: noti.clean(user=u, keep_s=0), "clean -keep 0", status_is("did", None, "not cleaned")),
    # --- dead letters ---
    Verb("dead list", "dead list", SCOPED, "",
         lambda w, u: redrive().entries(user=u), "dead list",
         shows=scoped(lambda w, user: {w.xid} if user == ALICE else set())),
    Verb("dead retry", "dead show · retry ID", HIDDEN, "e.cmd.noti.dead.not_found",
         lambda w, u: redrive().retry(w.xid, user=u), "dead retry {xid}",
         status_is("xid", Status.WAITING, "not retried")),
    Verb("dead purge", "dead purge", SCOPED, "",
         lambda w, u: redrive().purge(user=u), "dead purge --yes", _purged_scoped),
    Verb("dead unsuppress", "dead unsuppress TYPE TARGET", NO, "e.cmd.noti.dead.nopvg",
         lambda w, u: redrive().unsuppress("sms", OPTED_OUT, user=u), "dead unsuppress sms {opted_out}",
         holds(lambda w: not w.rt.redis.sismember(w.rt.keys.suppressed("sms"), OPTED_OUT), "suppressed")),
    # --- the suppression list (alice's bounce, bob's complaint, an opt-out without why) ---
    Verb("suppress list", "suppress list [TYPE]", SCOPED, "",
         lambda w, u: Suppressions(w.rt).entries(user=u), "suppress list", shows=suppressions_shown),
    Verb("suppress del", "suppress del TYPE TARGET (even one her record caused)",
         NO, "e.cmd.noti.suppress.nopvg",
         lambda w, u: Suppressions(w.rt).lift("email", ALICE_GONE, user=u), "suppress del email {gone}",
         holds(lambda w: not w.rt.store.is_suppressed("email", ALICE_GONE), "still suppressed")),
    # --- listeners and events (alice's) ---
    Verb("listener add", "listener add EVENT … (new name)", EVERYONE, "",
         lambda w, u: events.add_listener("order.paid", TEMPLATE, name="new", user=u),
         LISTEN, listener_owned("new", "order.paid")),
    Verb("listener from", "listener add EVENT … -from-users '*' (others' events too)",
         NO, "e.noti.listener.from.nopvg",
         lambda w, u: events.add_listener("order.paid", TEMPLATE, name="new", user=u, from_users=["*"]),
         f"{LISTEN} -from-users *", listener_owned("new", "order.paid", hears=("*",))),
    Verb("listener replace", "listener add EVENT -name N -replace", OK, "e.noti.listener.replace.nopvg",
         lambda w, u: events.add_listener("order.*", TEMPLATE, name="alices", replace=True, user=u),
         "listener add order.* -name alices TEMPLATE -replace", listener_owned("alices", "order.*")),
    Verb("listener del", "listener del NAME", OK, "e.noti.listener.del.nopvg",
         lambda w, u: events.remove_listener("alices", user=u), "listener del alices",
         holds(lambda w: "alices" not in {x.name for x in events.list_listeners(user=ADMIN)}, "not removed")),
    Verb("listener list", "listener list", SCOPED, "",
         lambda w, u: events.list_listeners(user=u), "listener list", shows=scoped(listeners_of)),
    Verb("event show", "event show ID", HIDDEN, "e.noti.event.not_found",
         lambda w, u: events.get_event(w.eid, user=u), "event show {eid}",
         shows=lambda w, a, c: ({w.eid}, set())),
    Verb("event retry", "event retry ID", OK, "e.noti.event.retry.nopvg",
         lambda w, u: events.retry_event(w.fid, user=u), "event retry {fid}", holds(_retried, "not retried")),
    Verb("event list", "event list", SCOPED, "",
         lambda w, u: events.list_events(user=u), "event list", shows=scoped(events_of), group=EVENT_LISTS),
    Verb("event list -errors", "event list -errors", SCOPED, "",
         lambda w, u: events.list_events(user=u, failed=True), "event list -errors",
         shows=scoped(lambda w, user: {w.fid} if user == ALICE else set()), group=EVENT_LISTS),
    Verb("event list -u", "event list -u USER", OK, "e.noti.event.list.nopvg",
         lambda w, u: events.list_events(user=u, creator=ALICE), "event list -u {alice}",
         shows=lambda w, a, c: ({w.eid}, {w.beid})),
    # --- number pools: P is alice's; OLD was made before pools had owners ---
    Verb("pool create", "pool NEW add NUMBER (a new pool)", EVERYONE, "",
         pool("NEW", "add", "3001"), "pool NEW add 3001", owner_is("NEW", None)),
    Verb("pool add", "pool P add NUMBER", OK, "e.noti.pool.add.nopvg",
         pool("P", "add", "1004"), "pool P add 1004", number_is("1004", ID), group=POOL_P),
    Verb("pool del", "pool P del NUMBER", OK, "e.noti.pool.del.nopvg",
         pool("P", "delete", "1001"), "pool P del 1001", number_is("1001", N), group=POOL_P),
    Verb("pool reg", "pool P reg NUMBER", OK, "e.noti.pool.reg.nopvg",
         pool("P", "register", "1003"), "pool P reg 1003", number_is("1003", IU), group=POOL_P),
    Verb("pool unreg", "pool P unreg NUMBER", OK, "e.noti.pool.unreg.nopvg",
         pool("P", "unregister", "1001"), "pool P unreg 1001", number_is("1001", ID), group=POOL_P),
    Verb("pool call", "pool P call", OK, "e.noti.pool.call.nopvg",
         pool("P", "call"), "pool P call", number_is("1001", BU), group=POOL_P),
    Verb("pool hangup", "pool P hangup NUMBER", OK, "e.noti.pool.hangup.nopvg",
         pool("P", "hangup", "1002"), "pool P hangup 1002", number_is("1002", IU), group=POOL_P),
    Verb("pool show", "pool P show", OK, "e.noti.pool.show.nopvg",
         pool("P", "snapshot"), "pool P show",
         shows=lambda w, a, c: ({"1001", "1002", "1003"}, set()), group=POOL_P),
    Verb("pool chown", "pool P chown USER", NO, "e.noti.pool.chown.nopvg",
         pool("P", "chown", BOB), "pool P chown {bob}", owner_is("P", BOB)),
    Verb("old pool call", "pool OLD call (no owner)", NO, "e.noti.pool.call.nopvg",
         pool("OLD", "call"), "pool OLD call", number_is("2001", BU, "OLD"), group=POOL_OLD),
    Verb("old pool show", "pool OLD show (no owner)", NO, "e.noti.pool.show.nopvg",
         pool("OLD", "snapshot"), "pool OLD show", shows=lambda w, a, c: ({"2001"}, set()), group=POOL_OLD),
    Verb("old pool chown", "pool OLD chown USER (no owner)", NO, "e.noti.pool.chown.nopvg",
         pool("OLD", "chown", ALICE), "pool OLD chown {alice}", owner_is("OLD", ALICE), group=POOL_OLD),
    # --- the webman bridge's queues (nobody's) ---
    Verb("webman list", "webman list", EVERYONE, "",
         lambda w, u: console().consumers(), "webman list", shows=lambda w, a, c: ({"Collect"}, set())),
    Verb("webman history", "webman history QUEUE", NO, "e.noti.bridge.history.nopvg",
         lambda w, u: console().history("Collect", older_than_s=3600, user=u),
         "webman history Collect --older-than 1h", shows=lambda w, a, c: ({w.entry}, set()), group=HISTORY),
    Verb("webman history --delete", "webman history QUEUE --delete", NO, "e.noti.bridge.history.nopvg",
         lambda w, u: console().delete_history("Collect", [w.entry], user=u),
         "webman history Collect --older-than 1h --delete", history_deleted, group=HISTORY),
    Verb("webman clean", "webman clean QUEUE", NO, "e.noti.bridge.clean.nopvg",
         lambda w, u: console().clean("Collect", user=u), "webman clean Collect --yes", queue_emptied,
         group=CLEAN),
    Verb("webman remove-consumer --purge-data", "webman remove-consumer NAME --purge-data",
         NO, "e.noti.bridge.clean.nopvg",
         lambda w, u: console().clean(console().registered_queue("Collect", w.config), user=u),
         "webman remove-consumer Collect --purge-data --yes --config {config}", queue_emptied, group=CLEAN),
    # --- the HTTP API's tokens (they act as their user: root administrators only) ---
    Verb("token add", "token add -user USER", ADMIN_ONLY, "e.noti.token.nopvg",
         lambda w, u: w.rt.tokens.add(BOB, acting=u), "token add -user {bob}", token_made, group=TOKENS),
    Verb("token list", "token list", ADMIN_ONLY, "e.noti.token.nopvg",
         lambda w, u: w.rt.tokens.entries(acting=u), "token list",
         shows=lambda w, a, c: ({w.tok}, set()), group=TOKENS),
    Verb("token revoke", "token revoke ID", ADMIN_ONLY, "e.noti.token.nopvg",
         lambda w, u: w.rt.tokens.revoke(w.tok, acting=u), "token revoke {tok}", token_revoked, group=TOKENS),
    # --- webhook signing keys: a user's own; a root administrator anyone's ---
    Verb("signing-key add", "signing-key add -user USER", OWNER_OR_ADMIN, "e.noti.sigkey.nopvg",
         lambda w, u: w.rt.signing_keys.add(ALICE, acting=u), "signing-key add -user {alice}",
         signing_key_made, group=SIGNING_KEYS),
    Verb("signing-key list", "signing-key list -user USER", OWNER_OR_ADMIN, "e.noti.sigkey.nopvg",
         lambda w, u: w.rt.signing_keys.entries(ALICE, acting=u), "signing-key list -user {alice}",
         shows=lambda w, a, c: ({w.skey}, set()), group=SIGNING_KEYS),
    Verb("signing-key del", "signing-key del ID -user USER", OWNER_OR_ADMIN, "e.noti.sigkey.nopvg",
         lambda w, u: w.rt.signing_keys.delete(w.skey, ALICE, acting=u),
         "signing-key del {skey} -user {alice}", signing_key_deleted, group=SIGNING_KEYS),
]  # fmt: skip
MATRIX: dict[str, Verb] = {row.name: row for row in ROWS}


# --- running one cell -----------------------------------------------------------------------------


def database(client: redis.Redis) -> dict[bytes, tuple[bytes, int]]:
    """Every key of the test database: its DUMP and absolute expiry (-1: none)."""
    return {
        key: (client.dump(key), int(client.execute_command("PEXPIRETIME", key)))
        for key in client.scan_iter(count=1000)
    }


def run_cli(user: str, args: list[str]) -> Any:
    return invoke("--as", user, *args)


CELLS = [(verb, column, via) for verb in MATRIX for column in COLUMNS for via in ("api", "cli")]


@pytest.fixture
def raw(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.mark.parametrize(("verb", "column", "via"), CELLS, ids=[f"{v}|{c}|{i}" for v, c, i in CELLS])
def test_the_permissions_matrix(
    verb: str, column: str, via: str, configure: Any, tmp_path: Path, raw: redis.Redis
) -> None:
    row, actor = MATRIX[verb], ACTORS[column]
    cell = row.cell(column)
    w = build_world(configure, tmp_path)
    before, config_before = database(raw), w.config.read_text()

    if via == "api":
        try:
            result = row.api(w, actor)
        except (PermissionDenied, NotFound) as exc:
            assert cell == ("none" if isinstance(exc, NotFound) else "no"), (
                f"{verb} refused to {actor}: {exc}"
            )
            assert exc.code == row.code
            if cell == "none":  # the very answer an id nobody has gets
                ghost = as_missing(w)
                with pytest.raises(NotFound) as missing:
                    row.api(ghost, actor)
                assert str(exc) == ghost.as_real(str(missing.value), w)
            refused = True
        else:
            assert cell not in ("no", "none"), f"{verb} allowed to {actor}"
            out, refused = result if isinstance(result, str) else repr(result), False
    else:
        done = run_cli(actor, row.argv(w))
        if cell in ("no", "none"):
            assert done.exit_code == 1, done.output
            assert done.stderr.startswith(f"{row.code}: "), done.stderr
            assert done.stdout == ""
            if cell == "none":
                ghost = as_missing(w)
                missing = run_cli(actor, row.argv(ghost))
                assert (done.exit_code, done.stderr) == (missing.exit_code, ghost.as_real(missing.stderr, w))
            refused = True
        else:
            assert done.exit_code == 0, done.output
            out, refused = done.stdout, False

    if refused:
        # nothing changed: not one key, not the TOML file
        assert database(raw) == before
        assert w.config.read_text() == config_before
        return
    row.effect(w, actor, cell, out)
    if row.shows is not None:
        present, absent = row.shows(w, actor, cell)
        assert all(token in out for token in present), (present, out)
        assert not any(token in out for token in absent), (absent, out)


# --- the table of the docs (docs/concepts/roles.md) -----------------------------------------------

README = ROOT / "docs" / "concepts" / "roles.md"
BEGIN = "<!-- permissions: generated from tests/test_permissions.py (python -m tests.test_permissions) -->"
END = "<!-- /permissions -->"
MARKS = {"ok": "✓", "no": "✗", "none": "∄", "own": "own", "all": "all"}


def readme_table() -> str:
    """The matrix as the README shows it: rows of one ``group`` on one line (their cells are
    equal; codes that differ in one part show it as ``<verb>``)."""
    lines = [
        "| `noti …` (or its API call) | plain user, owner | other plain user | root member | root admin "
        "| refused with |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    rows = list(MATRIX.values())
    while rows:
        first = rows[0]
        same = [r for r in rows if first.group and r.group == first.group] or [first]
        assert rows[: len(same)] == same, f"the rows of {first.group!r} are not together"
        assert all(r.cells == first.cells for r in same), f"the rows of {first.group!r} differ"
        rows = rows[len(same) :]
        cells = " | ".join(MARKS.get(c, c) for c in first.cells)
        lines.append(f"| `{first.group or first.text}` | {cells} | {_codes([r.code for r in same])} |")
    return "\n".join(lines)


def _codes(codes: list[str]) -> str:
    if not codes[0]:
        return ""
    parts = [code.split(".") for code in codes]
    shown = [p[0] if len({*p}) == 1 else "<verb>" for p in zip(*parts, strict=True)]
    return f"`{'.'.join(shown)}`"


def readme_block(text: str) -> str:
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    return text[start:end].strip()


def test_the_docs_table_is_the_matrix() -> None:
    assert readme_block(README.read_text()) == readme_table(), "run: python -m tests.test_permissions"


if __name__ == "__main__":
    text = README.read_text()
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    README.write_text(f"{text[:start]}\n{readme_table()}\n{text[end:]}")
    sys.exit(0)
