"""The rule of the bench's peer targets (issue 24): met only if every repetition meets it."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(
    ("ours", "theirs", "need", "lower", "met"),
    [
        ([110, 120, 130], [100, 100, 100], 1.0, False, True),
        ([110, 90, 130], [100, 100, 100], 1.0, False, False),  # 2 of 3 is not enough
        ([150, 160], [100, 100], 1.5, False, True),
        ([150, 149], [100, 100], 1.5, False, False),
        ([0.5, 0.6], [0.6, 0.6], 1.0, True, True),  # a latency: at most the peer's
        ([0.5, 0.7], [0.6, 0.6], 1.0, True, False),
        ([None, 120], [100, 100], 1.0, False, False),  # a failed repetition: not every one won
    ],
)
def test_a_peer_target_holds_only_if_every_repetition_meets_it(
    ours: list[float | None], theirs: list[float], need: float, lower: bool, met: bool
) -> None:
    from bench import peers

    [row] = peers.rows(
        1, "x", "/s", ours, {"huey": theirs}, "enqueue", {"huey": need}, {}, lower_is_better=lower
    )
    assert row.check is not None and row.check(row) is met
