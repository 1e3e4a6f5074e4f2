"""What a chaos run does, decided before it starts from a seed: every ``notify()`` call (when,
by whom, to which channel, at which level, delayed, keyed or debounced), which notifications
the provider refuses, and when the faults strike.

A notification as the application means it is an *intent* (``seq``); its content carries the
tag ``c<seq>v<version>``, so the fake providers know what they received without asking
Redis. Most intents are one call. A keyed intent may be called again with the same
idempotency key (an application retrying) and must get the same id back; a debounced one is
scheduled two to four times with one identifier before it is due (each call a new version
of the content), and only the last version may be delivered.

Users and levels: ``chaos-admin`` (a root administrator: levels 1-1000), ``chaos-ops`` and
``calm`` (root members: up to 100), ``u1``-``u3`` and ``flood`` (plain users: level 1).
During the flood window ``flood`` sends SMS at ten times the rate of each other user, while
``calm`` keeps sending level-100 SMS at its normal rate: the run measures how long those wait.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

__all__ = [
    "ADMIN",
    "CALM",
    "CHANNELS",
    "FLOOD",
    "FULL",
    "MEMBER",
    "PLAIN",
    "SHORT",
    "Call",
    "Fault",
    "Plan",
    "Size",
    "build_plan",
]

CHANNELS = ("sms", "email", "webhook")
ADMIN, MEMBER, CALM, FLOOD = "chaos-admin", "chaos-ops", "calm", "flood"
PLAIN = ("u1", "u2", "u3")
#: Users that send at the normal rate (the flood user sends at ten times it).
NORMAL_USERS = (ADMIN, MEMBER, CALM, *PLAIN)
WORKER_SLOTS = 4

#: Shares of the mixed intents (not calm's, not the flood's).
DEBOUNCED, DELAYED, KEYED, KEY_REPEATED = 0.05, 0.28, 0.10, 0.5
#: Intents whose target the provider refuses for good (invalid) or always fails (failed).
BAD, FLAKY = 0.03, 0.01


@dataclass(frozen=True, slots=True)
class Size:
    """How big a run is."""

    name: str
    notifications: int
    #: Seconds over which the calls are spread.
    produce_s: float
    #: Worker SIGKILLs: None = one every 2-6 s; a number = that many, spread over the run.
    worker_kills: int | None
    redis_restarts: int
    flood: bool
    #: After the faults stop, how long the backlog may take before what remains is stuck.
    drain_deadline_s: float


FULL = Size("full", 10_000, 80.0, None, 2, True, 150.0)
SHORT = Size("short", 1_000, 15.0, 2, 1, False, 60.0)


@dataclass(frozen=True, slots=True)
class Call:
    """One ``notify()`` call of the plan."""

    at_s: float
    seq: int
    version: int
    user: str
    channel: str
    level: int
    kind: str
    delay_s: float | None = None
    identifier: str | None = None
    idempotency_key: str | None = None

    @property
    def tag(self) -> str:
        return f"c{self.seq}v{self.version}"

    @property
    def replaces(self) -> bool:
        """Whether this call sets the record's content and due time (a repeat with the same
        idempotency key only reads the record the first call made)."""
        return self.kind != "key-repeat"


@dataclass(frozen=True, slots=True)
class Fault:
    """A SIGKILL: of the worker in ``slot`` (then started again), or of Redis (``slot`` -1)."""

    at_s: float
    kind: str
    slot: int = -1


@dataclass(frozen=True, slots=True)
class Plan:
    seed: int
    size: Size
    calls: list[Call]
    faults: list[Fault]
    #: Intents the provider refuses for good / fails every time.
    bad: frozenset[int]
    flaky: frozenset[int]
    intents: int
    #: (start, end) seconds of the flood, None without one.
    flood_window: tuple[float, float] | None
    #: Seconds after which no fault is planned.
    faults_end_s: float
    debounced: int = 0
    keyed: int = 0
    delayed: int = 0
    kinds: dict[str, int] = field(default_factory=dict)


def _level(rng: random.Random, user: str) -> int:
    if user == ADMIN:
        return max(1, min(1000, round(10 ** rng.uniform(0, 3))))
    if user == MEMBER:
        return max(1, min(100, round(10 ** rng.uniform(0, 2))))
    return 1


def build_plan(seed: int, size: Size, *, notifications: int | None = None) -> Plan:
    """The plan of one run (the same seed and size give the same plan)."""
    rng = random.Random(seed)
    total = notifications or size.notifications
    produce = size.produce_s
    window = (0.7 * produce, 0.9 * produce) if size.flood else None
    flood_s = window[1] - window[0] if window else 0.0
    # the flood user sends at 10x each normal user's rate: total = mix * (1 + 10 W / (U P))
    mix = round(total / (1 + 10 * flood_s / (len(NORMAL_USERS) * produce)))
    calls: list[Call] = []
    seq = 0
    calm = mix // len(NORMAL_USERS)
    for i in range(calm):
        calls.append(Call((i + 0.5) * produce / calm, seq, 0, CALM, "sms", 100, "calm"))
        seq += 1
    if window:
        floods = total - mix
        for i in range(floods):
            calls.append(Call(window[0] + (i + 0.5) * flood_s / floods, seq, 0, FLOOD, "sms", 1, "flood"))
            seq += 1
    bad: set[int] = set()
    flaky: set[int] = set()
    debounced = keyed = delayed = 0
    others = (ADMIN, MEMBER, *PLAIN)
    for _ in range(mix - calm):
        at = rng.uniform(0, produce)
        user = rng.choice(others)
        channel = rng.choice(CHANNELS)
        level = _level(rng, user)
        fate = rng.random()
        if fate < BAD:
            bad.add(seq)
        elif fate < BAD + FLAKY:
            flaky.add(seq)
        shape = rng.random()
        if shape < DEBOUNCED:
            debounced += 1
            delay = rng.uniform(5, 15)
            for version in range(rng.randint(2, 4)):
                if version:
                    at += rng.uniform(0.3, 1.2)
                ident = f"d{seq}"
                calls.append(Call(at, seq, version, user, channel, level, "debounce", delay, ident))
        else:
            delay_s = None
            if shape < DEBOUNCED + DELAYED:
                delayed += 1
                delay_s = rng.uniform(1, 20)
            key = None
            if rng.random() < KEYED:
                keyed += 1
                key = f"k{seq}"
            kind = "keyed" if key else ("delayed" if delay_s else "plain")
            calls.append(Call(at, seq, 0, user, channel, level, kind, delay_s, None, key))
            if key and rng.random() < KEY_REPEATED:
                again = at + rng.uniform(0.5, 8)
                calls.append(Call(again, seq, 0, user, channel, level, "key-repeat", delay_s, None, key))
        seq += 1
    calls.sort(key=lambda c: (c.at_s, c.seq, c.version))
    faults, end = _faults(rng, size, window)
    kinds: dict[str, int] = {}
    for call in calls:
        kinds[call.kind] = kinds.get(call.kind, 0) + 1
    return Plan(
        seed=seed,
        size=size,
        calls=calls,
        faults=faults,
        bad=frozenset(bad),
        flaky=frozenset(flaky),
        intents=seq,
        flood_window=window,
        faults_end_s=end,
        debounced=debounced,
        keyed=keyed,
        delayed=delayed,
        kinds=kinds,
    )


def _faults(rng: random.Random, size: Size, window: tuple[float, float] | None) -> tuple[list[Fault], float]:
    """Worker kills and Redis restarts. The flood window, and the time before it that a kill
    (up to the visibility timeout) or a Redis restart takes to recover from, are kept free
    of faults, so the flood's latencies measure the flood."""
    produce = size.produce_s
    end = produce + 5.0
    quiet = (window[0] - 12.0, window[1]) if window else None
    faults: list[Fault] = []
    for k in range(size.redis_restarts):
        at = produce * (k + 1) / (size.redis_restarts + 1)
        if window:
            at = produce * 0.2 * (k + 1)
        faults.append(Fault(at, "redis"))
    if size.worker_kills is None:
        at = 2.0
        while at < end:
            if quiet is None or not quiet[0] <= at <= quiet[1]:
                faults.append(Fault(at, "worker", rng.randrange(WORKER_SLOTS)))
            at += rng.uniform(2.0, 6.0)
    else:
        for k in range(size.worker_kills):
            at = produce * (0.25 + 0.5 * k / max(1, size.worker_kills - 1))
            faults.append(Fault(at, "worker", rng.randrange(WORKER_SLOTS)))
    faults.sort(key=lambda f: f.at_s)
    return faults, end
