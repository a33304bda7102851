"""A target's grid and its runs' slots: whole milliseconds, the same in every process."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest

from app.runs.slots import Grid, TakenSlots, epoch_ms, slot_time

T0 = datetime(2026, 12, 6, 10, 0, tzinfo=UTC)
T0_MS = epoch_ms(T0)  # a whole minute: a multiple of 1 s, 10 s, 60 s, 200 ms
MS = timedelta(milliseconds=1)


@pytest.mark.parametrize(
    ("offset_ms", "interval_ms", "at", "slot"),
    [
        (0, 10_000, T0, T0_MS),  # on a cell's start: that cell
        (0, 10_000, T0 + 9_999 * MS, T0_MS),  # its last millisecond: still that cell
        (0, 10_000, T0 + 10_000 * MS, T0_MS + 10_000),  # the next one
        (0, 10_000, T0 - MS, T0_MS - 10_000),  # just before: the cell before
        (2_500, 10_000, T0, T0_MS - 7_500),  # an offset shifts every cell
        (2_500, 10_000, T0 + 2_500 * MS, T0_MS + 2_500),
        (0, 10_000, T0 + timedelta(microseconds=9_999_999), T0_MS),  # µs floored, not rounded
        (0, 200, T0 + 450 * MS, T0_MS + 400),  # a sub-second interval
        (59_999, 60_000, T0, T0_MS - 1),  # an offset a millisecond short of the interval
    ],
)
def test_a_time_falls_in_the_cell_that_starts_at_or_before_it(
    offset_ms: int, interval_ms: int, at: datetime, slot: int
) -> None:
    assert Grid(offset_ms, interval_ms).slot(at) == slot


@pytest.mark.parametrize(
    ("at", "start"),
    [
        (T0, T0),  # a cell's start is its own next start
        (T0 + timedelta(microseconds=1), T0 + 10 * timedelta(seconds=1)),
        (T0 + 9_999 * MS, T0 + 10_000 * MS),
        (T0 - MS, T0),
    ],
)
def test_the_next_start_is_the_first_cell_start_at_or_after_a_time(
    at: datetime, start: datetime
) -> None:
    assert Grid(0, 10_000).next_start(at) == start


@pytest.mark.parametrize(
    ("interval_s", "interval_ms"),
    [(10.0, 10_000), (0.2, 200), (900.0, 900_000), (0.0001, 1), (1.0005, 1_000)],
)
def test_a_grid_is_whole_milliseconds_with_its_offset_inside_the_interval(
    interval_s: float, interval_ms: int
) -> None:
    grid = Grid.of("api", "fra-1", interval_s)
    assert grid.interval_ms == interval_ms
    assert 0 <= grid.offset_ms < interval_ms


def test_the_offset_is_stable_spread_and_differs_by_vantage() -> None:
    offsets = [Grid.of(f"target-{i}", "local", 10.0).offset_ms for i in range(200)]
    assert offsets == [Grid.of(f"target-{i}", "local", 10.0).offset_ms for i in range(200)]
    assert sum(offset < 5_000 for offset in offsets) in range(80, 121)  # about half
    elsewhere = [Grid.of(f"target-{i}", "fra-1", 10.0).offset_ms for i in range(200)]
    assert sum(a != b for a, b in zip(offsets, elsewhere, strict=True)) > 190


def test_two_processes_name_the_same_slot_for_one_scheduled_run_jitter_and_all() -> None:
    grid = Grid.of("api", "local", 60.0)
    start = grid.next_start(T0)
    jittered = [start + timedelta(seconds=s) for s in (0.0, 0.001, 17.5, 59.998)]
    assert {grid.slot(at) for at in jittered} == {epoch_ms(start)}
    assert slot_time(grid.slot(jittered[-1])) == start


@pytest.mark.parametrize(
    ("jitter_s", "interval_s", "bound_s"),
    [(0.0, 10.0, 0.0), (3.0, 10.0, 3.0), (9.9999, 10.0, 9.999), (0.5, 0.2, 0.199)],
)
def test_jitter_is_kept_a_millisecond_short_of_the_interval(
    jitter_s: float, interval_s: float, bound_s: float
) -> None:
    assert Grid.of("api", "local", interval_s).jitter_bound_s(jitter_s) == pytest.approx(bound_s)


def test_taken_slots_are_counted_and_logged_once_an_episode(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="app.runs.slots")
    now = [0.0]
    taken = TakenSlots(monotonic=lambda: now[0])
    for step in range(5):  # two replicas losing slots to each other by turns: one episode
        now[0] = step * 10.0
        taken.taken("api", "local", T0_MS + step * 10_000)
    taken.taken("web", "local", T0_MS)
    now[0] += TakenSlots.QUIET_S + 1  # quiet long enough: the next one is a new episode
    taken.taken("api", "local", T0_MS + 999_000)
    assert taken.snapshot() == {("api", "local"): 6, ("web", "local"): 1}
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 3, said
    assert said[0].startswith("a run of api at local not stored: its slot (2026-12-06T10:00:00Z)")
