"""Rows of the benchmark table: one measured quantity of one scenario, noti against its baseline.

A scenario function returns a list of :class:`Row`; the orchestrator (``python -m bench``)
prints them as one table and writes them as JSON.
"""

from __future__ import annotations

import math
import statistics
import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

__all__ = [
    "Row",
    "Skip",
    "Skipped",
    "attempt",
    "errors_of",
    "format_table",
    "median_ratio",
    "paired_ratio",
    "present",
    "rows_json",
    "skips_of",
]

T = TypeVar("T")


class Skipped(Exception):
    """A run this machine cannot do at all (a peer whose runtime is absent, such as Node.js for
    BullMQ): its rows say why, and it is not a failure."""


class Skip(str):
    """An entry of an errors list that is the reason a run was skipped, not a failure:
    :func:`errors_of` leaves it out, :func:`skips_of` finds it."""


def attempt(errors: list[str], label: str, run: Callable[[], T]) -> T | None:
    """``run()``, or None after noting its failure in ``errors`` (and on stderr, loudly): one
    failed repetition fails its row without losing the other scenarios. A run that raises
    :class:`Skipped` is noted as a :class:`Skip` (and printed with its reason)."""
    try:
        return run()
    except Skipped as exc:
        print(f"SKIPPED {label}: {exc}", file=sys.stderr)
        errors.append(Skip(f"skipped: {exc}"))
        return None
    except Exception as exc:  # noqa: BLE001 - reported, and the row fails
        print(f"FAILED {label}: {exc}", file=sys.stderr)
        traceback.print_exc(file=sys.stderr)
        errors.append(f"{label}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
        return None


def errors_of(errors: dict[str, list[str]], *keys: str) -> str | None:
    """The failures noted under ``keys`` of ``errors`` (one list per kind of run), or None;
    skipped runs (:class:`Skip`) are not failures."""
    found = [e for key in keys for e in errors.get(key, []) if not isinstance(e, Skip)]
    return "; ".join(found) or None


def skips_of(errors: dict[str, list[str]], *keys: str) -> str | None:
    """Why the runs under ``keys`` of ``errors`` were skipped (each reason once), or None."""
    found = dict.fromkeys(e for key in keys for e in errors.get(key, []) if isinstance(e, Skip))
    return "; ".join(found) or None


def present(samples: Sequence[float | None]) -> list[float]:
    """The samples of the repetitions that measured something (a failed one is None)."""
    return [x for x in samples if x is not None]


def paired_ratio(ours: Sequence[float | None], theirs: Sequence[float | None]) -> float | None:
    """Median over the repetitions both sides measured of ours/theirs (lists indexed by
    repetition, None where a run failed); None when no repetition has both."""
    pairs = [o / t for o, t in zip(ours, theirs, strict=True) if o is not None and t]
    return statistics.median(pairs) if pairs else None


def median_ratio(ours: Sequence[float], theirs: Sequence[float]) -> float | None:
    """Median over repetitions of ours/theirs (pairs from the same repetition when the counts
    match, else the ratio of the medians); None without a baseline."""
    if not ours or not theirs:
        return None
    if len(ours) == len(theirs) and all(t for t in theirs):
        return statistics.median(o / t for o, t in zip(ours, theirs, strict=True))
    base = statistics.median(theirs)
    return statistics.median(ours) / base if base else None


@dataclass
class Row:
    """One line of the table.

    ``noti`` / ``baseline`` are the samples (one per repetition). ``check`` decides "met"
    from the row (None: the row has no pass/fail target). ``ratio`` defaults to
    :func:`median_ratio` of the samples.
    """

    scenario: int
    name: str
    unit: str
    noti: list[float]
    target: str
    baseline: list[float] = field(default_factory=list)
    baseline_name: str = ""
    check: Callable[[Row], bool] | None = None
    ratio: float | None = None
    config: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    #: The figure as a fraction of what one Redis allows on this path (:mod:`bench._floor`),
    #: and that floor's name; None for a row compared with no floor.
    floor_fraction: float | None = None
    floor_name: str = ""

    def __post_init__(self) -> None:
        if self.ratio is None:
            self.ratio = median_ratio(self.noti, self.baseline)

    @property
    def median(self) -> float:
        return statistics.median(self.noti) if self.noti else math.nan

    @property
    def baseline_median(self) -> float | None:
        return statistics.median(self.baseline) if self.baseline else None

    @property
    def met(self) -> bool | None:
        if self.error is not None or not self.noti:
            return False
        return None if self.check is None else bool(self.check(self))

    def cells(self) -> list[str]:
        """The printed cells: scenario, noti median, min..max, baseline, ratio, of floor,
        target, met."""
        spread = f"{_num(min(self.noti))}..{_num(max(self.noti))}" if self.noti else "-"
        base = self.baseline_median
        met = {True: "yes", False: "NO", None: "-"}[self.met]
        return [
            f"{self.scenario} {self.name}",
            f"{_num(self.median)} {self.unit}" if self.noti else "FAILED",
            spread,
            _num(base) if base is not None else "-",
            f"{self.ratio:.2f}x" if self.ratio is not None else "-",
            f"{self.floor_fraction:.0%}" if self.floor_fraction is not None else "-",
            self.target,
            met,
        ]

    def as_json(self) -> dict[str, Any]:
        data = {k: v for k, v in asdict(self).items() if k != "check"}
        data.update(median=self.median, baseline_median=self.baseline_median, met=self.met)
        return data


def _num(value: float) -> str:
    if math.isnan(value):
        return "nan"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


HEADER = ["scenario", "noti median", "min..max", "baseline", "ratio", "of floor", "target", "met"]


def format_table(rows: Sequence[Row]) -> str:
    """The table, then the notes and configurations, as text."""
    cells = [r.cells() for r in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(HEADER)] if cells else []
    lines = ["  ".join(h.ljust(w) for h, w in zip(HEADER, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    notes: list[str] = []
    seen: set[str] = set()
    for row in rows:
        own = [f"ERROR: {row.error}"] if row.error else []
        if row.baseline_name:
            own.append(f"baseline: {row.baseline_name}")
        if row.floor_name:
            own.append(f"floor: {row.floor_name}")
        for note in own + row.notes:
            text = f"[{row.scenario}] {note}"
            if text not in seen:
                seen.add(text)
                notes.append(text)
    if notes:
        lines += ["", "notes:", *(f"  {n}" for n in notes)]
    return "\n".join(lines)


def rows_json(rows: Sequence[Row]) -> list[dict[str, Any]]:
    return [r.as_json() for r in rows]
