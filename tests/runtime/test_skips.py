"""Skipped due runs: the slots between two due times the scheduler names are skips, counted
by reason and said once a streak."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest

from app.runs.slots import Grid
from app.runtime.skips import Skips

GRID = Grid(offset_ms=250, interval_ms=1000)
OTHER = Grid(offset_ms=250, interval_ms=2000)
T0 = datetime(2026, 12, 7, 12, 0, 0, 250_000, tzinfo=UTC)


def at(cell: float) -> datetime:
    """A time ``cell`` seconds after T0: its integer part is the cell of GRID."""
    return T0 + timedelta(seconds=cell)


@pytest.mark.parametrize(
    ("case", "named", "woke_late"),
    [
        ("cell after cell", [(GRID, 0), (GRID, 1), (GRID, 2)], 0),
        ("jitter inside its cell", [(GRID, 0.9), (GRID, 1.1), (GRID, 2.95)], 0),
        ("two cells coalesced away", [(GRID, 0), (GRID, 3)], 2),
        ("late in one, early in the next-but-one", [(GRID, 0.99), (GRID, 2.0)], 1),
        ("the same due named again (a skip of a submitted run)", [(GRID, 1), (GRID, 1)], 0),
        ("an older due named after", [(GRID, 5), (GRID, 2), (GRID, 6)], 0),
        ("the grid changed: no comparison", [(GRID, 0), (OTHER, 8)], 0),
        ("over a grid change, counted on the new one", [(GRID, 0), (OTHER, 2), (OTHER, 8)], 2),
    ],
)
def test_cells_between_two_named_due_times_are_skips(
    case: str, named: list[tuple[Grid, float]], woke_late: int
) -> None:
    skips = Skips(60)
    for grid, cell in named:
        skips.named("t", grid, at(cell))
    assert skips.total.get(("t", "woke_late"), 0) == woke_late, case


def test_forgetting_a_target_starts_it_over() -> None:
    skips = Skips(60)
    skips.named("a", GRID, at(0))
    skips.named("b", GRID, at(0))
    skips.forget("a")
    skips.named("a", GRID, at(10))
    skips.named("b", GRID, at(3))
    skips.forget()
    skips.named("b", GRID, at(9))
    assert dict(skips.total) == {("b", "woke_late"): 2}


def test_a_streak_is_said_once_and_whole_when_the_next_run_begins(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="app.runtime.scheduler")
    skips = Skips(60)
    skips.skip("a", "running")
    skips.skip("a", "running")
    skips.skip("a", "late")
    skips.began("a")
    skips.began("a")  # no streak: nothing said
    skips.named("b", GRID, at(0))
    skips.named("b", GRID, at(4))
    skips.began("b")  # the first line said it whole
    assert [r.getMessage() for r in caplog.records] == [
        "target a: a due run skipped, the previous run is still going",
        "target a: 3 due runs were skipped before this one began",
        "target b: 3 due runs skipped, the scheduler woke after its time (no CPU, or a busy"
        " loop, for an interval)",
    ]
    assert skips.counts("v") == {
        ("a", "v", "running"): 2,
        ("a", "v", "late"): 1,
        ("b", "v", "woke_late"): 3,
    }
    assert skips.streak == {}


@pytest.mark.parametrize(
    ("case", "steps", "problems"),
    [
        ("one skip is a slow run's cost", [("skip", "a", "running")], []),
        (
            "two in a row are a problem, with the latest reason",
            [("skip", "a", "running"), ("skip", "a", "turn")],
            [
                "target a: 2 due runs skipped in a row, the latest because it waited its whole"
                " interval for a turn (max_runs_in_flight runs were probing)"
            ],
        ),
        (
            "a run began: over",
            [("skip", "a", "late"), ("skip", "a", "late"), ("began", "a", "")],
            [],
        ),
        (
            "removed or rescheduled: over",
            [("skip", "a", "late"), ("skip", "a", "late"), ("forget", "a", "")],
            [],
        ),
        (
            "paused: every streak over",
            [("skip", "a", "late"), ("skip", "a", "late"), ("forget", "", "")],
            [],
        ),
        (
            "its slot went to another replica: over",
            [("skip", "a", "late"), ("skip", "a", "late"), ("passed", "a", "")],
            [],
        ),
        (
            "another target's end leaves this one's",
            [
                ("skip", "b", "running"),
                ("skip", "a", "late"),
                ("skip", "b", "running"),
                ("began", "a", ""),
            ],
            [
                "target b: 2 due runs skipped in a row, the latest because the previous run"
                " is still going"
            ],
        ),
        (
            "woken late: the cells coalesced count at once",
            [("named", "a", "0"), ("named", "a", "4")],
            [
                "target a: 3 due runs skipped in a row, the latest because the scheduler woke after"
                " its time (no CPU, or a busy loop, for an interval)"
            ],
        ),
    ],
)
def test_a_target_skipped_slot_after_slot_is_a_problem_until_its_streak_ends(
    case: str, steps: list[tuple[str, str, str]], problems: list[str]
) -> None:
    skips = Skips(60)
    for step, target, arg in steps:
        if step == "skip":
            skips.skip(target, arg)
        elif step == "named":
            skips.named(target, GRID, at(float(arg)))
        elif step == "forget":
            skips.forget(target or None)
        else:
            getattr(skips, step)(target)
    assert skips.problems() == problems, case
