"""The soak and fleet benches' slot count: what a target's grid says was due and kept."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bench.soak import slots
from bench.soak_timing import skips_logged

T0 = datetime(2026, 12, 7, 10, 0, tzinfo=UTC)


def at(*seconds: float) -> list[datetime]:
    return [T0 + timedelta(seconds=s) for s in seconds]


@pytest.mark.parametrize(
    ("dues", "until_s", "expected", "stored", "doubled", "missing"),
    [
        (at(0, 60, 120), 120, 3, 3, 0, {}),
        (at(0, 120), 120, 3, 2, 0, {"a": [1]}),
        (at(0, 60, 60.4, 120), 120, 3, 3, 1, {}),
        (at(0, 60, 120, 180), 130, 3, 3, 0, {}),  # a run after the window is not counted
        # first due after the window's end: nothing was due (it once counted -1)
        (at(200, 260), 80, 0, 0, 0, {}),
        (at(200), 130, 0, 0, 0, {}),
    ],
)
def test_slots_count_each_targets_grid(
    dues: list[datetime],
    until_s: float,
    expected: int,
    stored: int,
    doubled: int,
    missing: dict[str, list[int]],
) -> None:
    counted = slots({"a": dues}, ["a", "never-ran"], 60, T0 + timedelta(seconds=until_s))
    assert (counted.expected, counted.stored, counted.doubled) == (expected, stored, doubled)
    assert counted.missing_by_target == missing


def test_skips_logged_counts_each_streak_once_as_serve_says_it() -> None:
    """The first line of a streak says its count (one, or the slots a late wake dropped);
    the line as the next run begins says the whole streak, when it is more."""
    log = "\n".join(
        [
            "12:00 WARNING app.runtime.scheduler: target a: a due run skipped, the previous"
            " run is still going",
            "12:00 WARNING app.runtime.scheduler: target b: 3 due runs skipped, the scheduler"
            " woke after its time (no CPU, or a busy loop, for an interval)",
            "12:01 WARNING app.runtime.scheduler: target a: 4 due runs were skipped before"
            " this one began",
            "12:02 WARNING app.runtime.scheduler: target b: a due run skipped, the previous"
            " run is still going",
        ]
    )
    total, reasons = skips_logged(log)
    assert total == 4 + 3 + 1
    assert reasons == {
        "the previous run is still going": 2,
        "the scheduler woke after its time (no CPU, or a busy loop, for an interval)": 1,
    }
