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

import click
import pytest
import redis
from click.testing import CliRunner

import noti
import noti.api
import tests.test_events_tasks  # noqa: F401 - registers the listener tasks (tests.events.explode)
from noti import events
from noti.api import redrive
from noti.bridge.webman import Producer, QueueKeys, QueueNames
from noti.bridge.webman.connection import connect
from noti.bridge.webman.console import WebmanConsole
from noti.cli import main
from noti.core.record import Status, new_id
from noti.core.suppression import Suppressed
from noti.errors import NotFound, PermissionDenied
from noti.numpool import NumberPool, NumberState
from noti.sending.suppressions import Suppressions
from tests.conftest import ADMIN, ALICE, BOB, MEMBER, ROOT
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


def nothing(w: World, actor: str, cell: str, out: str) -> None:
    """A read: the row's ``shows`` says what the output holds."""


@dataclass(frozen=True)
class Verb:
    """One row: the verb, through the API and the CLI, and what each role gets."""

    cli_text: str
    code: str
    cells: tuple[str, str, str, str]
    api: Callable[[World, str], Any]
    cli: Callable[[World], list[str]]
    effect: Effect = nothing
    #: For reads: what the output must hold, and must not, by cell.
    shows: Callable[[World, str, str], tuple[set[str], set[str]]] | None = None
    #: The README's label for consecutive rows that share it (and their cells): one line.
    group: str = ""

    def cell(self, column: str) -> str:
        return self.cells[COLUMNS.index(column)]


def scoped(mine: Callable[[World, str], set[str]]) -> Callable[[World, str, str], tuple[set[str], set[str]]]:
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


def _retried(w: World) -> None:
    event = events.get_event(w.fid, user=ADMIN)
    assert (event.status.value, event.replays) == ("new", 1)


def level_capped(w: World, actor: str, cell: str, out: str) -> None:
    assert w.rt.store.get(out.strip()).level == int(cell.split()[1])


def sent(record: str) -> Effect:
    def effect(w: World, actor: str, cell: str, out: str) -> None:
        assert w.status(getattr(w, record)) is Status.DONE

    return effect


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


OK, NO = ("ok", "no", "ok", "ok"), ("no", "no", "ok", "ok")
#: Another plain user's object is answered as a missing one.
HIDDEN = ("ok", "none", "ok", "ok")
EVERYONE = ("ok", "ok", "ok", "ok")
ADMIN_ONLY = ("no", "no", "no", "ok")
OWNER_OR_ADMIN = ("ok", "no", "no", "ok")
SCOPED = ("own", "own", "all", "all")

MATRIX: dict[str, Verb] = {
    # --- notification records (alice's) ---
    "add": Verb(
        "add sms -lv 1000",
        "",
        ("lv 1", "lv 1", "lv 100", "lv 1000"),
        lambda w, u: noti.notify_sms(PHONE, "hi", lv=1000, user=u),
        lambda w: ["add", "sms", "-text", "hi", "-to", PHONE, "-lv", "1000"],
        level_capped,
    ),
    "add -provider": Verb(
        "add sms -provider P (P not a channel default, granted to no one)",
        "e.cmd.noti.add.providerdenied",
        ADMIN_ONLY,
        lambda w, u: noti.notify_sms(PHONE, "hi", provider="vip", user=u),
        lambda w: ["add", "sms", "-text", "hi", "-to", PHONE, "-provider", "vip"],
        named_provider,
    ),
    "get": Verb(
        "get ID",
        "e.cmd.noti.not_found",
        HIDDEN,
        lambda w, u: noti.get(w.rid, user=u),
        lambda w: ["get", w.rid],
        shows=lambda w, a, c: ({w.rid}, set()),
    ),
    "list": Verb(
        "list",
        "",
        SCOPED,
        lambda w, u: noti.list_notifications(user=u),
        lambda w: ["list"],
        shows=scoped(records_of),
    ),
    "list -u": Verb(
        "list -u USER",
        "e.cmd.noti.list.nopvg",
        OK,
        lambda w, u: noti.list_notifications(user=u, creator=ALICE),
        lambda w: ["list", "-u", ALICE],
        shows=lambda w, a, c: ({w.rid}, {w.bid}),
    ),
    "send ID": Verb(
        "send ID",
        "e.cmd.noti.send.nopvg",
        OK,
        lambda w, u: noti.send(w.rid, user=u),
        lambda w: ["send", w.rid],
        sent("rid"),
    ),
    "send": Verb(
        "send",
        "",
        SCOPED,
        lambda w, u: noti.send(user=u),
        lambda w: ["send"],
        sent_scoped,
    ),
    "send -u": Verb(
        "send -u USER",
        "e.cmd.noti.send.nopvg",
        OK,
        lambda w, u: noti.send(user=u, creator=ALICE),
        lambda w: ["send", "-u", ALICE],
        sent("rid"),
    ),
    "del": Verb(
        "del ID",
        "e.cmd.noti.del.nopvg",
        OK,
        lambda w, u: noti.delete(w.rid, user=u),
        lambda w: ["del", w.rid],
        lambda w, a, c, o: None if w.status(w.rid) is None else pytest.fail("not deleted"),
    ),
    "revoke": Verb(
        "revoke ID",
        "e.cmd.noti.revoke.not_found",
        HIDDEN,
        lambda w, u: noti.revoke([w.rid], user=u),
        lambda w: ["revoke", w.rid],
        lambda w, a, c, o: None if w.status(w.rid) is Status.INVALID else pytest.fail("not revoked"),
    ),
    "delayed list": Verb(
        "delayed list",
        "",
        SCOPED,
        lambda w, u: noti.api.notifier().delayed(user=u),
        lambda w: ["delayed", "list"],
        shows=scoped(lambda w, user: {w.sid} if user == ALICE else set()),
    ),
    "cancel": Verb(
        "delayed cancel ID",
        "e.cmd.noti.cancel.nopvg",
        OK,
        lambda w, u: noti.cancel(w.sid, user=u),
        lambda w: ["delayed", "cancel", w.sid],
        lambda w, a, c, o: None if w.status(w.sid) is None else pytest.fail("not cancelled"),
    ),
    "clean": Verb(
        "clean",
        "e.cmd.noti.clean.nopvg",
        NO,
        lambda w, u: noti.clean(user=u, keep_s=0),
        lambda w: ["clean", "-keep", "0"],
        lambda w, a, c, o: None if w.status(w.did) is None else pytest.fail("not cleaned"),
    ),
    # --- dead letters ---
    "dead list": Verb(
        "dead list / show",
        "e.cmd.noti.dead.nopvg",
        NO,
        lambda w, u: redrive().entries(user=u),
        lambda w: ["dead", "list"],
        shows=lambda w, a, c: ({w.xid}, set()),
        group="dead list · show · retry ID · purge · unsuppress TYPE TARGET",
    ),
    "dead retry": Verb(
        "dead retry ID",
        "e.cmd.noti.dead.nopvg",
        NO,
        lambda w, u: redrive().retry(w.xid, user=u),
        lambda w: ["dead", "retry", w.xid],
        lambda w, a, c, o: None if w.status(w.xid) is Status.WAITING else pytest.fail("not retried"),
        group="dead list · show · retry ID · purge · unsuppress TYPE TARGET",
    ),
    "dead purge": Verb(
        "dead purge",
        "e.cmd.noti.dead.nopvg",
        NO,
        lambda w, u: redrive().purge(user=u),
        lambda w: ["dead", "purge", "--yes"],
        lambda w, a, c, o: None if not redrive().entries(user=ADMIN) else pytest.fail("not purged"),
        group="dead list · show · retry ID · purge · unsuppress TYPE TARGET",
    ),
    "dead unsuppress": Verb(
        "dead unsuppress TYPE TARGET",
        "e.cmd.noti.dead.nopvg",
        NO,
        lambda w, u: redrive().unsuppress("sms", OPTED_OUT, user=u),
        lambda w: ["dead", "unsuppress", "sms", OPTED_OUT],
        lambda w, a, c, o: (
            None
            if not w.rt.redis.sismember(w.rt.keys.suppressed("sms"), OPTED_OUT)
            else pytest.fail("still suppressed")
        ),
        group="dead list · show · retry ID · purge · unsuppress TYPE TARGET",
    ),
    # --- the suppression list (alice's bounce, bob's complaint, an opt-out without why) ---
    "suppress list": Verb(
        "suppress list [TYPE]",
        "",
        SCOPED,
        lambda w, u: Suppressions(w.rt).entries(user=u),
        lambda w: ["suppress", "list"],
        shows=suppressions_shown,
    ),
    "suppress del": Verb(
        "suppress del TYPE TARGET (even one her record caused)",
        "e.cmd.noti.suppress.nopvg",
        NO,
        lambda w, u: Suppressions(w.rt).lift("email", ALICE_GONE, user=u),
        lambda w: ["suppress", "del", "email", ALICE_GONE],
        lambda w, a, c, o: (
            None if not w.rt.store.is_suppressed("email", ALICE_GONE) else pytest.fail("still suppressed")
        ),
    ),
    # --- listeners and events (alice's) ---
    "listener add": Verb(
        "listener add EVENT … (new name)",
        "",
        EVERYONE,
        lambda w, u: events.add_listener("order.paid", TEMPLATE, name="new", user=u),
        lambda w: ["listener", "add", "order.paid", "-name", "new", *TEMPLATE_CLI],
        listener_owned("new", "order.paid"),
    ),
    "listener from": Verb(
        "listener add EVENT … -from-users '*' (others' events too)",
        "e.noti.listener.from.nopvg",
        NO,
        lambda w, u: events.add_listener("order.paid", TEMPLATE, name="new", user=u, from_users=["*"]),
        lambda w: ["listener", "add", "order.paid", "-name", "new", *TEMPLATE_CLI, "-from-users", "*"],
        listener_owned("new", "order.paid", hears=("*",)),
    ),
    "listener replace": Verb(
        "listener add EVENT -name N -replace",
        "e.noti.listener.replace.nopvg",
        OK,
        lambda w, u: events.add_listener("order.*", TEMPLATE, name="alices", replace=True, user=u),
        lambda w: ["listener", "add", "order.*", "-name", "alices", *TEMPLATE_CLI, "-replace"],
        listener_owned("alices", "order.*"),
    ),
    "listener del": Verb(
        "listener del NAME",
        "e.noti.listener.del.nopvg",
        OK,
        lambda w, u: events.remove_listener("alices", user=u),
        lambda w: ["listener", "del", "alices"],
        lambda w, a, c, o: (
            None
            if "alices" not in {x.name for x in events.list_listeners(user=ADMIN)}
            else pytest.fail("not removed")
        ),
    ),
    "listener list": Verb(
        "listener list",
        "",
        SCOPED,
        lambda w, u: events.list_listeners(user=u),
        lambda w: ["listener", "list"],
        shows=scoped(listeners_of),
    ),
    "event show": Verb(
        "event show ID",
        "e.noti.event.not_found",
        HIDDEN,
        lambda w, u: events.get_event(w.eid, user=u),
        lambda w: ["event", "show", w.eid],
        shows=lambda w, a, c: ({w.eid}, set()),
    ),
    "event retry": Verb(
        "event retry ID",
        "e.noti.event.retry.nopvg",
        OK,
        lambda w, u: events.retry_event(w.fid, user=u),
        lambda w: ["event", "retry", w.fid],
        lambda w, a, c, o: _retried(w),
    ),
    "event list": Verb(
        "event list",
        "",
        SCOPED,
        lambda w, u: events.list_events(user=u),
        lambda w: ["event", "list"],
        shows=scoped(events_of),
        group="event list [-errors]",
    ),
    "event list -errors": Verb(
        "event list -errors",
        "",
        SCOPED,
        lambda w, u: events.list_events(user=u, failed=True),
        lambda w: ["event", "list", "-errors"],
        shows=scoped(lambda w, user: {w.fid} if user == ALICE else set()),
        group="event list [-errors]",
    ),
    "event list -u": Verb(
        "event list -u USER",
        "e.noti.event.list.nopvg",
        OK,
        lambda w, u: events.list_events(user=u, creator=ALICE),
        lambda w: ["event", "list", "-u", ALICE],
        shows=lambda w, a, c: ({w.eid}, {w.beid}),
    ),
    # --- number pools: P is alice's; OLD was made before pools had owners ---
    "pool create": Verb(
        "pool NEW add NUMBER (a new pool)",
        "",
        EVERYONE,
        lambda w, u: NumberPool("NEW", user=u).add("3001"),
        lambda w: ["pool", "NEW", "add", "3001"],
        owner_is("NEW", None),
    ),
    "pool add": Verb(
        "pool P add NUMBER",
        "e.noti.pool.add.nopvg",
        OK,
        lambda w, u: NumberPool("P", user=u).add("1004"),
        lambda w: ["pool", "P", "add", "1004"],
        number_is("1004", ID),
        group="pool P add · del · reg · unreg · hangup NUMBER; pool P call · show",
    ),
    "pool del": Verb(
        "pool P del NUMBER",
        "e.noti.pool.del.nopvg",
        OK,
        lambda w, u: NumberPool("P", user=u).delete("1001"),
        lambda w: ["pool", "P", "del", "1001"],
        number_is("1001", N),
        group="pool P add · del · reg · unreg · hangup NUMBER; pool P call · show",
    ),
    "pool reg": Verb(
        "pool P reg NUMBER",
        "e.noti.pool.reg.nopvg",
        OK,
        lambda w, u: NumberPool("P", user=u).register("1003"),
        lambda w: ["pool", "P", "reg", "1003"],
        number_is("1003", IU),
        group="pool P add · del · reg · unreg · hangup NUMBER; pool P call · show",
    ),
    "pool unreg": Verb(
        "pool P unreg NUMBER",
        "e.noti.pool.unreg.nopvg",
        OK,
        lambda w, u: NumberPool("P", user=u).unregister("1001"),
        lambda w: ["pool", "P", "unreg", "1001"],
        number_is("1001", ID),
        group="pool P add · del · reg · unreg · hangup NUMBER; pool P call · show",
    ),
    "pool call": Verb(
        "pool P call",
        "e.noti.pool.call.nopvg",
        OK,
        lambda w, u: NumberPool("P", user=u).call(),
        lambda w: ["pool", "P", "call"],
        number_is("1001", BU),
        group="pool P add · del · reg · unreg · hangup NUMBER; pool P call · show",
    ),
    "pool hangup": Verb(
        "pool P hangup NUMBER",
        "e.noti.pool.hangup.nopvg",
        OK,
        lambda w, u: NumberPool("P", user=u).hangup("1002"),
        lambda w: ["pool", "P", "hangup", "1002"],
        number_is("1002", IU),
        group="pool P add · del · reg · unreg · hangup NUMBER; pool P call · show",
    ),
    "pool show": Verb(
        "pool P show",
        "e.noti.pool.show.nopvg",
        OK,
        lambda w, u: NumberPool("P", user=u).snapshot(),
        lambda w: ["pool", "P", "show"],
        shows=lambda w, a, c: ({"1001", "1002", "1003"}, set()),
        group="pool P add · del · reg · unreg · hangup NUMBER; pool P call · show",
    ),
    "pool chown": Verb(
        "pool P chown USER",
        "e.noti.pool.chown.nopvg",
        NO,
        lambda w, u: NumberPool("P", user=u).chown(BOB),
        lambda w: ["pool", "P", "chown", BOB],
        owner_is("P", BOB),
    ),
    "old pool call": Verb(
        "pool OLD call (no owner)",
        "e.noti.pool.call.nopvg",
        NO,
        lambda w, u: NumberPool("OLD", user=u).call(),
        lambda w: ["pool", "OLD", "call"],
        number_is("2001", BU, "OLD"),
        group="pool OLD call · show · chown USER (a pool made before owners)",
    ),
    "old pool show": Verb(
        "pool OLD show (no owner)",
        "e.noti.pool.show.nopvg",
        NO,
        lambda w, u: NumberPool("OLD", user=u).snapshot(),
        lambda w: ["pool", "OLD", "show"],
        shows=lambda w, a, c: ({"2001"}, set()),
        group="pool OLD call · show · chown USER (a pool made before owners)",
    ),
    "old pool chown": Verb(
        "pool OLD chown USER (no owner)",
        "e.noti.pool.chown.nopvg",
        NO,
        lambda w, u: NumberPool("OLD", user=u).chown(ALICE),
        lambda w: ["pool", "OLD", "chown", ALICE],
        owner_is("OLD", ALICE),
        group="pool OLD call · show · chown USER (a pool made before owners)",
    ),
    # --- the webman bridge's queues (nobody's) ---
    "webman list": Verb(
        "webman list",
        "",
        EVERYONE,
        lambda w, u: console().consumers(),
        lambda w: ["webman", "list"],
        shows=lambda w, a, c: ({"Collect"}, set()),
    ),
    "webman history": Verb(
        "webman history QUEUE",
        "e.noti.bridge.history.nopvg",
        NO,
        lambda w, u: console().history("Collect", older_than_s=3600, user=u),
        lambda w: ["webman", "history", "Collect", "--older-than", "1h"],
        shows=lambda w, a, c: ({w.entry}, set()),
        group="webman history QUEUE [--delete]",
    ),
    "webman history --delete": Verb(
        "webman history QUEUE --delete",
        "e.noti.bridge.history.nopvg",
        NO,
        lambda w, u: console().delete_history("Collect", [w.entry], user=u),
        lambda w: ["webman", "history", "Collect", "--older-than", "1h", "--delete"],
        history_deleted,
        group="webman history QUEUE [--delete]",
    ),
    "webman clean": Verb(
        "webman clean QUEUE",
        "e.noti.bridge.clean.nopvg",
        NO,
        lambda w, u: console().clean("Collect", user=u),
        lambda w: ["webman", "clean", "Collect", "--yes"],
        queue_emptied,
        group="webman clean QUEUE · remove-consumer NAME --purge-data",
    ),
    "webman remove-consumer --purge-data": Verb(
        "webman remove-consumer NAME --purge-data",
        "e.noti.bridge.clean.nopvg",
        NO,
        lambda w, u: console().clean(console().registered_queue("Collect", w.config), user=u),
        lambda w: [
            "webman",
            "remove-consumer",
            "Collect",
            "--purge-data",
            "--yes",
            "--config",
            str(w.config),
        ],
        queue_emptied,
        group="webman clean QUEUE · remove-consumer NAME --purge-data",
    ),
    # --- the HTTP API's tokens (they act as their user: root administrators only) ---
    "token add": Verb(
        "token add -user USER",
        "e.noti.token.nopvg",
        ADMIN_ONLY,
        lambda w, u: w.rt.tokens.add(BOB, acting=u),
        lambda w: ["token", "add", "-user", BOB],
        token_made,
        group="token add -user USER · list · revoke ID",
    ),
    "token list": Verb(
        "token list",
        "e.noti.token.nopvg",
        ADMIN_ONLY,
        lambda w, u: w.rt.tokens.entries(acting=u),
        lambda w: ["token", "list"],
        shows=lambda w, a, c: ({w.tok}, set()),
        group="token add -user USER · list · revoke ID",
    ),
    "token revoke": Verb(
        "token revoke ID",
        "e.noti.token.nopvg",
        ADMIN_ONLY,
        lambda w, u: w.rt.tokens.revoke(w.tok, acting=u),
        lambda w: ["token", "revoke", w.tok],
        token_revoked,
        group="token add -user USER · list · revoke ID",
    ),
    # --- webhook signing keys: a user's own; a root administrator anyone's ---
    "signing-key add": Verb(
        "signing-key add -user USER",
        "e.noti.sigkey.nopvg",
        OWNER_OR_ADMIN,
        lambda w, u: w.rt.signing_keys.add(ALICE, acting=u),
        lambda w: ["signing-key", "add", "-user", ALICE],
        signing_key_made,
        group="signing-key add · list · del ID (-user USER)",
    ),
    "signing-key list": Verb(
        "signing-key list -user USER",
        "e.noti.sigkey.nopvg",
        OWNER_OR_ADMIN,
        lambda w, u: w.rt.signing_keys.entries(ALICE, acting=u),
        lambda w: ["signing-key", "list", "-user", ALICE],
        shows=lambda w, a, c: ({w.skey}, set()),
        group="signing-key add · list · del ID (-user USER)",
    ),
    "signing-key del": Verb(
        "signing-key del ID -user USER",
        "e.noti.sigkey.nopvg",
        OWNER_OR_ADMIN,
        lambda w, u: w.rt.signing_keys.delete(w.skey, ALICE, acting=u),
        lambda w: ["signing-key", "del", w.skey, "-user", ALICE],
        signing_key_deleted,
        group="signing-key add · list · del ID (-user USER)",
    ),
}


# --- running one cell -----------------------------------------------------------------------------


def database(client: redis.Redis) -> dict[bytes, tuple[bytes, int]]:
    """Every key of the test database: its DUMP and absolute expiry (-1: none)."""
    return {
        key: (client.dump(key), int(client.execute_command("PEXPIRETIME", key)))
        for key in client.scan_iter(count=1000)
    }


@click.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.pass_context
def _entry(ctx: click.Context) -> None:
    main(list(ctx.args))


def run_cli(user: str, args: list[str]) -> Any:
    return CliRunner().invoke(_entry, ["--as", user, *args], catch_exceptions=False)


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
        done = run_cli(actor, row.cli(w))
        if cell in ("no", "none"):
            assert done.exit_code == 1, done.output
            assert done.stderr.startswith(f"{row.code}: "), done.stderr
            assert done.stdout == ""
            if cell == "none":
                ghost = as_missing(w)
                missing = run_cli(actor, row.cli(ghost))
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
        lines.append(f"| `{first.group or first.cli_text}` | {cells} | {_codes([r.code for r in same])} |")
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
