"""The held-out spread behind ``level_shift``'s increments (app/analysis/levelspread.py)."""

from __future__ import annotations

import math
import warnings
from datetime import timedelta

import numpy as np
import pytest

from app.analysis import level as lv
from app.analysis import levelspread as ls
from app.analysis.runs import RunData
from tests.runfactory import EVERY, LLM, T0, make_run

GENERATION = 1 + list(LLM).index("generation")  # series 0 is end-to-end


def one_hour(
    levels: dict[int, float], per_day: int = 6, kind: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``per_day`` rows at 10:00 of each day of ``levels`` (day → value)."""
    values = [[value] for value in levels.values() for _ in range(per_day)]
    days = [day for day in levels for _ in range(per_day)]
    slots = [10 + 24 * kind] * len(values)
    return np.array(values), np.array(slots, dtype=np.int64), np.array(days, dtype=np.int64)


@pytest.mark.parametrize(
    ("levels", "expected"),
    [
        # Each day against the median of the others: in-sample, day 0's runs would read
        # 1 − 2 = −1 (its own runs in the median); held out, 1 − 3.
        ({0: 1.0, 1: 2.0, 2: 4.0}, {0: -2.0, 1: -0.5, 2: 2.5}),
        ({0: 0.0, 1: 0.0, 2: 0.0}, {0: 0.0, 1: 0.0, 2: 0.0}),
        # Two days (a weekend's): each told by the other alone.
        ({5: 0.1, 6: -0.1}, {5: 0.2, 6: -0.2}),
        # One day: nothing else to tell it by, so its own.
        ({3: 0.5}, {3: 0.0}),
    ],
)
def test_each_day_is_read_against_the_other_days(
    levels: dict[int, float], expected: dict[int, float]
) -> None:
    values, slots, days = one_hour(levels)
    outside = ls.held_out(values, slots, days)
    for day, residual in expected.items():
        assert outside[days == day, 0] == pytest.approx(residual)


def test_a_weekend_hour_is_told_by_the_other_weekend_day_not_by_weekdays() -> None:
    weekdays = one_hour({0: 1.0, 1: 1.0, 2: 1.0, 3: 1.0, 4: 1.0})
    weekend = one_hour({5: 0.3, 6: 0.2}, kind=1)
    values, slots, days = (np.concatenate(parts) for parts in zip(weekdays, weekend, strict=True))
    outside = ls.held_out(values, slots, days)
    assert outside[days == 5, 0] == pytest.approx(0.1)
    assert outside[days == 2, 0] == pytest.approx(0.0)


def week(seed: int, weekend_apart: float, days: int = 7) -> list[RunData]:
    """A run every 15 min from T0 (a Monday); Saturday's generation × e^apart, Sunday's
    × e^−apart: one weekend's two days that disagree, as one draw of a day's level does."""
    rng = np.random.default_rng(seed)
    runs = []
    for i in range(days * 96):
        at = T0 + i * EVERY
        shift = {5: weekend_apart, 6: -weekend_apart}.get(at.weekday(), 0.0)
        medians = dict(LLM, generation=LLM["generation"] * math.exp(shift))
        runs.append(make_run(rng, at, medians, run_sigma=0.08))
    return runs


@pytest.mark.parametrize(("seed", "apart", "least"), [(0, 0.0, 1.1), (1, 0.0, 1.1), (0, 0.1, 1.3)])
def test_the_spread_counts_the_references_own_error(seed: int, apart: float, least: float) -> None:
    """A run's residual against a median it is part of, or against one day's level for an
    hour, is too small: the held-out spread is wider, the more so when days disagree."""
    reference = lv.LevelReference.build(week(seed, apart))
    assert reference is not None
    ratio = reference.sigma_held[GENERATION] / reference.sigma_eff[GENERATION]
    assert ratio >= least


@pytest.mark.parametrize(
    ("seed", "factor", "runs", "in_sample"),
    [
        (0, 1.2, None, 5),
        (0, 1.25, 5, 4),
        (0, 2.0, 2, 2),
        (2, 1.25, 5, 3),
        (2, 2.0, 2, 2),
    ],
)
def test_a_saturday_slowdown_crosses_in_runs(
    seed: int, factor: float, runs: int | None, in_sample: int
) -> None:
    """A Saturday's hour is one weekend's runs: its level's error is every run's of that
    hour, so a few runs 20–25 % slower are weaker evidence than against the in-sample
    spread (``in_sample``: the service lane's unit); a doubling still crosses on the second
    run, the most one run may add."""
    reference = lv.LevelReference.build(week(seed, 0.0))
    assert reference is not None
    rng = np.random.default_rng(100 + seed)
    saturday = T0 + timedelta(days=12, hours=10)
    medians = dict(LLM, generation=LLM["generation"] * factor)
    slow = [make_run(rng, saturday + i * EVERY, medians, run_sigma=0.0) for i in range(6)]
    for held_out, expected in ((True, runs), (False, in_sample)):
        steps = np.array(
            [lv.increments(reference, run, 0.12, 10, 6.0, held_out=held_out) for run in slow]
        )
        heights = [lv.window_cusum(steps[: k + 1])[0][GENERATION] for k in range(len(slow))]
        crossed = next((k + 1 for k, height in enumerate(heights) if height >= 12), None)
        assert crossed == expected


def _expected_by_masks(
    rows: np.ndarray, slots: np.ndarray, days: np.ndarray | None, min_days: int
) -> np.ndarray:
    """``expected_by_slot`` as it was first written: a mask and ``np.unique`` per widening."""
    days = np.arange(len(rows)) if days is None else days
    hours, kinds = slots % 24, slots // 24
    table = np.empty((48, rows.shape[1]))
    for index in range(48):
        hour, kind = index % 24, index // 24
        near = np.abs(((hours - hour) + 12) % 24 - 12) <= 1
        for chosen in (
            (hours == hour) & (kinds == kind),
            near & (kinds == kind),
            hours == hour,
            near,
        ):
            if chosen.sum() >= ls.MIN_MATCHED and len(np.unique(days[chosen])) >= min_days:
                break
        else:
            chosen = np.ones(len(rows), dtype=bool)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # numpy's "All-NaN slice"
            table[index] = np.nanmedian(rows[chosen], axis=0)
    return table


@pytest.mark.parametrize(
    ("runs", "hours", "day_count", "min_days", "nan_share"),
    [
        (0, 48, 1, 2, 0.0),  # no row: NaN everywhere
        (5, 48, 1, 2, 0.0),  # too few anywhere: every row
        (400, 48, 7, 2, 0.0),  # a week of every slot
        (400, 48, 7, 1, 0.1),  # held out (one day is enough), some NaNs
        (60, 3, 2, 2, 0.0),  # a few slots only: the widenings, then every row
        (200, 6, 1, 2, 0.0),  # one day: never two, so every row
        (300, 48, 0, 2, 0.3),  # no days given: rows from as many days as rows
    ],
)
def test_expected_by_slot_is_the_masks_spelling(
    runs: int, hours: int, day_count: int, min_days: int, nan_share: float
) -> None:
    rng = np.random.default_rng(runs + hours)
    rows = rng.normal(0, 1, (runs, 3))
    rows[rng.random(rows.shape) < nan_share] = np.nan
    slots = rng.choice(rng.choice(48, hours, replace=False), runs).astype(np.int64)
    days = rng.integers(0, day_count, runs).astype(np.int64) if day_count else None
    found = ls.expected_by_slot(rows, slots, days, min_days)
    np.testing.assert_array_equal(found, _expected_by_masks(rows, slots, days, min_days))


def _held_out_by_masks(rows: np.ndarray, slots: np.ndarray, days: np.ndarray) -> np.ndarray:
    """``held_out`` spelled a day at a time: each day's rows against the masks' table of
    the other days' rows (with one day only, its own)."""
    outside = np.empty_like(rows)
    unique = np.unique(days)
    for day in unique:
        mine = days == day
        others = ~mine if len(unique) > 1 else mine
        table = _expected_by_masks(rows[others], slots[others], days[others], 1)
        outside[mine] = rows[mine] - table[slots[mine]]
    return outside


@pytest.mark.parametrize(
    ("runs", "hours", "day_count", "nan_share", "rounded"),
    [
        (0, 48, 1, 0.0, False),  # no row
        (7, 48, 3, 0.0, False),  # too few anywhere: every row of the other days
        (400, 48, 1, 0.0, False),  # one day: told by its own
        (672, 48, 7, 0.0, False),  # a week of every slot, as a reference holds
        (672, 48, 7, 0.0, True),  # ties among the rows (numbers to one decimal)
        (500, 48, 8, 0.2, False),  # NaNs (a phase a run lacks)
        (90, 4, 5, 0.0, False),  # a few slots: widened, then every row
        (300, 20, 2, 0.1, False),  # two days, each told by the other alone
        (700, 48, 7, 0.9, False),  # mostly NaN: columns with none left
    ],
)
def test_held_out_is_the_day_by_day_spelling(
    runs: int, hours: int, day_count: int, nan_share: float, rounded: bool
) -> None:
    rng = np.random.default_rng(runs + 7 * hours + day_count)
    rows = rng.normal(0, 1, (runs, 4))
    rows = np.round(rows, 1) if rounded else rows
    rows[rng.random(rows.shape) < nan_share] = np.nan
    slots = rng.choice(rng.choice(48, hours, replace=False), runs).astype(np.int64)
    days = (738000 + rng.integers(0, day_count, runs)).astype(np.int64)
    found = ls.held_out(rows, slots, days)
    np.testing.assert_array_equal(found, _held_out_by_masks(rows, slots, days))
